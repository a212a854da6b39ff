//! The one error convention of the C API: every call returns an `int`, 0 for success or a
//! negative [`smb3_error_kind`]; the calling thread's last error keeps the message, the
//! NTSTATUS (when the server gave one) and the closest errno. And the one guard every entry
//! point runs in, which turns a panic into [`smb3_error_kind::SMB3_ERR_PANIC`] instead of
//! letting it unwind into C.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use smb3_client::{Error, NtStatus};

/// What went wrong, by what a caller does about it. Every call returns 0 (`SMB3_OK`) or one
/// of these (negative); the details are in `smb3_last_error_message()`,
/// `smb3_last_error_ntstatus()` and `smb3_last_error_errno()`.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum smb3_error_kind {
    /// Success.
    SMB3_OK = 0,
    /// The caller passed something unusable: a NULL pointer, a string that is not UTF-8,
    /// unknown flags, a bad URL, or the API used in a way it does not allow (e.g. writing
    /// through a snapshot). Nothing was sent.
    SMB3_ERR_INVALID_ARGUMENT = -1,
    /// The file, directory, share or snapshot does not exist (OBJECT_NAME_NOT_FOUND,
    /// OBJECT_PATH_NOT_FOUND, BAD_NETWORK_NAME, ...).
    SMB3_ERR_NOT_FOUND = -2,
    /// The server refused access (ACCESS_DENIED, PRIVILEGE_NOT_HELD, ...).
    SMB3_ERR_ACCESS_DENIED = -3,
    /// The name is taken (OBJECT_NAME_COLLISION).
    SMB3_ERR_EXISTS = -4,
    /// Authentication failed: wrong user name or password (LOGON_FAILURE), a disabled or
    /// expired account, or Kerberos could not get a ticket.
    SMB3_ERR_AUTH = -5,
    /// The server answered with another NTSTATUS (see `smb3_last_error_ntstatus()`).
    SMB3_ERR_STATUS = -6,
    /// The network failed (connection refused, reset, every channel lost) or an open was lost
    /// with the connection and not reclaimed.
    SMB3_ERR_NETWORK = -7,
    /// No reply in time.
    SMB3_ERR_TIMEOUT = -8,
    /// The server broke the protocol (malformed reply, bad signature, unsafe name).
    SMB3_ERR_PROTOCOL = -9,
    /// The server does not offer what was asked (NOT_SUPPORTED).
    SMB3_ERR_UNSUPPORTED = -10,
    /// The copy was cancelled by its progress callback or its `smb3_cancel`.
    SMB3_ERR_CANCELLED = -11,
    /// A local file or directory could not be read or written (the errno says why).
    SMB3_ERR_LOCAL_IO = -12,
    /// A bug inside the library (a Rust panic, caught at the boundary). The handles passed
    /// to the call remain valid to free.
    SMB3_ERR_PANIC = -13,
    /// The source of a copy changed while it was copied (a file shrank): the copy is removed.
    SMB3_ERR_SOURCE_CHANGED = -14,
}

use smb3_error_kind::*;

/// An error on its way to the caller.
#[derive(Debug)]
pub(crate) enum FfiError {
    /// From the library.
    Client(Error),
    /// The caller's argument (NULL, not UTF-8, bad flag), in words.
    Argument(String),
    /// A local file system error, with the path.
    Local(String, std::io::Error),
    /// Cancelled by the caller.
    Cancelled,
    /// The source of a copy changed under it, in words.
    SourceChanged(String),
}

impl From<Error> for FfiError {
    fn from(e: Error) -> FfiError {
        FfiError::Client(e)
    }
}

/// Result of the internals behind an entry point.
pub(crate) type FfiResult<T> = Result<T, FfiError>;

/// `Err(FfiError::Argument(..))` in one expression.
pub(crate) fn bad_arg<T>(msg: impl Into<String>) -> FfiResult<T> {
    Err(FfiError::Argument(msg.into()))
}

/// What the calling thread's last failed call left behind.
struct LastError {
    message: CString,
    ntstatus: u32,
    errno: c_int,
}

thread_local! {
    static LAST: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// The kind of an error from the library: statuses the caller acts on get their own kind.
fn kind_of(e: &Error) -> smb3_error_kind {
    match e {
        Error::Status { status, .. } => match *status {
            NtStatus::OBJECT_NAME_NOT_FOUND
            | NtStatus::OBJECT_PATH_NOT_FOUND
            | NtStatus::NO_SUCH_FILE
            | NtStatus::NOT_FOUND
            | NtStatus::BAD_NETWORK_NAME => SMB3_ERR_NOT_FOUND,
            NtStatus::ACCESS_DENIED
            | NtStatus::NETWORK_ACCESS_DENIED
            | NtStatus::PRIVILEGE_NOT_HELD
            | NtStatus::CANNOT_DELETE => SMB3_ERR_ACCESS_DENIED,
            NtStatus::OBJECT_NAME_COLLISION => SMB3_ERR_EXISTS,
            NtStatus::LOGON_FAILURE
            | NtStatus::ACCOUNT_DISABLED
            | NtStatus::ACCOUNT_RESTRICTION
            | NtStatus::PASSWORD_EXPIRED => SMB3_ERR_AUTH,
            NtStatus::NOT_SUPPORTED | NtStatus::NOT_IMPLEMENTED => SMB3_ERR_UNSUPPORTED,
            NtStatus::IO_TIMEOUT => SMB3_ERR_TIMEOUT,
            _ => SMB3_ERR_STATUS,
        },
        Error::Auth { .. } => SMB3_ERR_AUTH,
        Error::Io { .. } | Error::ConnectionLost { .. } | Error::HandleLost { .. } => {
            SMB3_ERR_NETWORK
        }
        Error::Timeout { .. } => SMB3_ERR_TIMEOUT,
        Error::Protocol(_) | Error::UnsafeName { .. } => SMB3_ERR_PROTOCOL,
        Error::SnapshotNotFound { .. } => SMB3_ERR_NOT_FOUND,
        Error::Unsupported { .. } => SMB3_ERR_UNSUPPORTED,
        Error::Config(_) | Error::ApiMisuse(_) | Error::NotALink { .. } => {
            SMB3_ERR_INVALID_ARGUMENT
        }
        // A variant added to the library later: its message and errno still say what it is.
        _ => SMB3_ERR_STATUS,
    }
}

/// The NTSTATUS an error carries: the server's answer, or 0.
fn ntstatus_of(e: &Error) -> u32 {
    match e {
        Error::Status { status, .. } | Error::Unsupported { status, .. } => status.0,
        _ => 0,
    }
}

const EINVAL: c_int = 22;
const EIO: c_int = 5;
const ECANCELED: c_int = 125;

impl FfiError {
    fn record(self) -> smb3_error_kind {
        let (kind, message, ntstatus, errno) = match self {
            FfiError::Client(e) => (kind_of(&e), e.to_string(), ntstatus_of(&e), e.to_errno()),
            FfiError::Argument(m) => (SMB3_ERR_INVALID_ARGUMENT, m, 0, EINVAL),
            FfiError::Local(path, e) => (
                SMB3_ERR_LOCAL_IO,
                format!("{path}: {e}"),
                0,
                e.raw_os_error().unwrap_or(EIO),
            ),
            FfiError::Cancelled => (SMB3_ERR_CANCELLED, "cancelled".to_string(), 0, ECANCELED),
            FfiError::SourceChanged(m) => (SMB3_ERR_SOURCE_CHANGED, m, 0, EIO),
        };
        set_last(message, ntstatus, errno);
        kind
    }
}

fn set_last(message: String, ntstatus: u32, errno: c_int) {
    // A message with a NUL in it (a server-sent name) is cut there rather than lost.
    let message = CString::new(message).unwrap_or_else(|e| {
        let end = e.nul_position();
        let mut bytes = e.into_vec();
        bytes.truncate(end);
        CString::new(bytes).unwrap_or_default()
    });
    LAST.with(|l| {
        *l.borrow_mut() = Some(LastError {
            message,
            ntstatus,
            errno,
        })
    });
}

/// Run the body of an entry point: 0 on success, the error recorded and its kind returned
/// otherwise, and a panic caught and reported as [`SMB3_ERR_PANIC`] (never unwound into C).
pub(crate) fn guard(body: impl FnOnce() -> FfiResult<()>) -> c_int {
    guard_value(|| body().map(|()| 0))
}

/// Like [`guard`] for calls that return a non-negative count on success (e.g. 1 for "an
/// entry", 0 for "the end").
pub(crate) fn guard_value(body: impl FnOnce() -> FfiResult<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        // Success leaves the last error as it was (errno does the same): a caller may make
        // other calls, e.g. to clean up, before it reports the failure.
        Ok(Ok(n)) => n,
        Ok(Err(e)) => e.record() as c_int,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            set_last(format!("internal error (panic): {what}"), 0, EIO);
            SMB3_ERR_PANIC as c_int
        }
    }
}

/// Run a free function's body (returns nothing to C): a panic there is caught too, so it
/// never unwinds into C; it is recorded as the last error.
pub(crate) fn guard_void(body: impl FnOnce()) {
    let _ = guard(|| {
        body();
        Ok(())
    });
}

/// The message of the calling thread's last failed call ("" if none failed yet); a call that
/// succeeds leaves it unchanged, as errno. Owned by the library: valid until the next smb3_
/// call on this thread; copy it to keep it. Never NULL.
#[no_mangle]
pub extern "C" fn smb3_last_error_message() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    LAST.with(|l| match &*l.borrow() {
        Some(last) => last.message.as_ptr(),
        None => EMPTY.as_ptr().cast(),
    })
}

/// The NTSTATUS of the calling thread's last failed call when the server answered with one
/// (e.g. 0xC000006D STATUS_LOGON_FAILURE, 0xC0000034 STATUS_OBJECT_NAME_NOT_FOUND), else 0.
/// A call that succeeds leaves it unchanged.
#[no_mangle]
pub extern "C" fn smb3_last_error_ntstatus() -> u32 {
    LAST.with(|l| l.borrow().as_ref().map_or(0, |last| last.ntstatus))
}

/// The closest POSIX errno of the calling thread's last failed call (ENOENT, EACCES, ...),
/// else 0.
#[no_mangle]
pub extern "C" fn smb3_last_error_errno() -> c_int {
    LAST.with(|l| l.borrow().as_ref().map_or(0, |last| last.errno))
}

/// A constant name for an error kind (`"SMB3_ERR_NOT_FOUND"`); static, never freed.
#[no_mangle]
pub extern "C" fn smb3_error_kind_name(code: c_int) -> *const c_char {
    let name: &'static [u8] = match code {
        0 => b"SMB3_OK\0",
        -1 => b"SMB3_ERR_INVALID_ARGUMENT\0",
        -2 => b"SMB3_ERR_NOT_FOUND\0",
        -3 => b"SMB3_ERR_ACCESS_DENIED\0",
        -4 => b"SMB3_ERR_EXISTS\0",
        -5 => b"SMB3_ERR_AUTH\0",
        -6 => b"SMB3_ERR_STATUS\0",
        -7 => b"SMB3_ERR_NETWORK\0",
        -8 => b"SMB3_ERR_TIMEOUT\0",
        -9 => b"SMB3_ERR_PROTOCOL\0",
        -10 => b"SMB3_ERR_UNSUPPORTED\0",
        -11 => b"SMB3_ERR_CANCELLED\0",
        -12 => b"SMB3_ERR_LOCAL_IO\0",
        -13 => b"SMB3_ERR_PANIC\0",
        -14 => b"SMB3_ERR_SOURCE_CHANGED\0",
        _ => b"SMB3_ERR_UNKNOWN\0",
    };
    name.as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn message() -> String {
        // SAFETY: smb3_last_error_message never returns NULL and the string stays valid until
        // the next call on this thread.
        unsafe { CStr::from_ptr(smb3_last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_status_error_keeps_its_ntstatus_kind_and_errno() {
        let code = guard(|| {
            Err(Error::Status {
                status: NtStatus::OBJECT_NAME_NOT_FOUND,
                command: smb3_client::Command::CREATE,
                path: Some("a/b".into()),
            }
            .into())
        });
        assert_eq!(code, SMB3_ERR_NOT_FOUND as c_int);
        assert_eq!(smb3_last_error_ntstatus(), 0xC000_0034);
        assert_eq!(smb3_last_error_errno(), 2);
        assert!(message().contains("a/b"), "{}", message());
        // A success afterwards leaves it for the caller to report, as errno does.
        assert_eq!(guard(|| Ok(())), 0);
        assert!(message().contains("a/b"), "{}", message());
        assert_eq!(smb3_last_error_ntstatus(), 0xC000_0034);
    }

    #[test]
    fn a_wrong_password_is_an_auth_error() {
        let e = Error::Status {
            status: NtStatus::LOGON_FAILURE,
            command: smb3_client::Command::SESSION_SETUP,
            path: None,
        };
        assert_eq!(kind_of(&e), SMB3_ERR_AUTH);
    }

    #[test]
    fn a_panic_becomes_an_error_code_not_an_unwind() {
        let code = guard(|| panic!("boom {}", 42));
        assert_eq!(code, SMB3_ERR_PANIC as c_int);
        assert!(message().contains("boom 42"), "{}", message());
    }

    #[test]
    fn a_nul_inside_a_message_cuts_it_there() {
        let code = guard(|| bad_arg("before\0after"));
        assert_eq!(code, SMB3_ERR_INVALID_ARGUMENT as c_int);
        assert_eq!(message(), "before");
    }

    #[test]
    fn every_kind_has_a_name() {
        for code in -14..=0 {
            // SAFETY: the names are static NUL-terminated strings.
            let name = unsafe { CStr::from_ptr(smb3_error_kind_name(code)) };
            assert!(name.to_str().unwrap().starts_with("SMB3_"), "{code}");
            assert_ne!(name.to_str().unwrap(), "SMB3_ERR_UNKNOWN", "{code}");
        }
    }
}
