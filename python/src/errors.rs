//! Library errors as Python exceptions. The classes live in Python (`smb3/_errors.py`), where
//! a class can have two bases (`NotFoundError(SMBError, FileNotFoundError)`); this module picks
//! the class by what went wrong and fills in `errno`, `strerror`, `filename`, `ntstatus` and
//! `status_name`.

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use smb3_client::{Error, NtStatus};

const EIO: i32 = 5;
const EINVAL: i32 = 22;

/// The class name in `smb3._errors` for a library error.
fn class_of(e: &Error) -> &'static str {
    match e {
        Error::Status { status, .. } => match *status {
            NtStatus::LOGON_FAILURE
            | NtStatus::ACCOUNT_DISABLED
            | NtStatus::ACCOUNT_RESTRICTION
            | NtStatus::PASSWORD_EXPIRED => "AuthError",
            NtStatus::IO_TIMEOUT => "SMBTimeoutError",
            _ => by_errno(e.to_errno()),
        },
        Error::Auth { .. } => "AuthError",
        Error::Io { .. } | Error::ConnectionLost { .. } | Error::HandleLost { .. } => {
            "SMBConnectionError"
        }
        Error::Timeout { .. } => "SMBTimeoutError",
        Error::Protocol(_) | Error::UnsafeName { .. } => "ProtocolError",
        Error::SnapshotNotFound { .. } => "NotFoundError",
        Error::Unsupported { .. } => "NotSupportedError",
        Error::Config(_) | Error::ApiMisuse(_) | Error::NotALink { .. } => "InvalidArgument",
        _ => by_errno(e.to_errno()),
    }
}

/// The class for a status the library maps to `errno`.
fn by_errno(errno: i32) -> &'static str {
    match errno {
        2 => "NotFoundError",
        1 | 13 => "PermissionDenied",
        17 => "FileExists",
        20 => "NotADirectory",
        21 => "IsADirectory",
        39 => "DirectoryNotEmpty",
        38 | 95 => "NotSupportedError",
        110 => "SMBTimeoutError",
        _ => "SMBError",
    }
}

/// The NTSTATUS an error carries (the server's answer), if any.
fn ntstatus_of(e: &Error) -> Option<NtStatus> {
    match e {
        Error::Status { status, .. } | Error::Unsupported { status, .. } => Some(*status),
        _ => None,
    }
}

/// The path an error names, if any.
fn path_of(e: &Error) -> Option<String> {
    match e {
        Error::Status { path, .. } => path.clone(),
        _ => None,
    }
}

/// Make an instance of `smb3._errors.<class>(errno, message[, filename])` with `ntstatus` and
/// `status_name` set; a plain OSError if the Python part cannot be imported.
pub(crate) fn make(
    py: Python<'_>,
    class: &str,
    errno: i32,
    message: &str,
    filename: Option<&str>,
    status: Option<NtStatus>,
) -> PyErr {
    let built = (|| -> PyResult<PyErr> {
        let module = PyModule::import(py, "smb3._errors")?;
        let cls = module.getattr(class)?;
        let args = match filename {
            Some(f) => PyTuple::new(
                py,
                [
                    errno.into_pyobject(py)?.into_any(),
                    message.into_pyobject(py)?.into_any(),
                    f.into_pyobject(py)?.into_any(),
                ],
            )?,
            None => PyTuple::new(
                py,
                [
                    errno.into_pyobject(py)?.into_any(),
                    message.into_pyobject(py)?.into_any(),
                ],
            )?,
        };
        let exc = cls.call1(args)?;
        exc.setattr("ntstatus", status.map(|s| s.0))?;
        exc.setattr("status_name", status.map(status_name))?;
        Ok(PyErr::from_value(exc))
    })();
    built.unwrap_or_else(|_| PyOSError::new_err((errno, message.to_string())))
}

/// `STATUS_OBJECT_NAME_NOT_FOUND`, or the hex value of a status without a name.
fn status_name(s: NtStatus) -> String {
    match s.name() {
        Some(n) => format!("STATUS_{n}"),
        None => format!("0x{:08X}", s.0),
    }
}

/// The exception for a library error.
pub(crate) fn from_client(py: Python<'_>, e: &Error) -> PyErr {
    let path = path_of(e);
    make(
        py,
        class_of(e),
        e.to_errno(),
        &e.to_string(),
        path.as_deref(),
        ntstatus_of(e),
    )
}

/// An `SMBError` for a failure inside the package (a panic caught, the runtime gone).
pub(crate) fn internal(py: Python<'_>, message: &str) -> PyErr {
    make(py, "SMBError", EIO, message, None, None)
}

/// An `InvalidArgument` (also a ValueError) for an unusable argument.
pub(crate) fn invalid(py: Python<'_>, message: impl AsRef<str>) -> PyErr {
    make(py, "InvalidArgument", EINVAL, message.as_ref(), None, None)
}

/// A plain OSError for a local file, with its errno and path.
pub(crate) fn local(path: &std::path::Path, e: &std::io::Error) -> PyErr {
    PyOSError::new_err((
        e.raw_os_error().unwrap_or(EIO),
        e.to_string(),
        path.display().to_string(),
    ))
}
