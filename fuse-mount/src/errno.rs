//! Errors to errno values, and the error every file-system operation returns ([`FsError`]).
//!
//! The table itself is the library's [`smb3_client::Error::to_errno`] (one table for every
//! front end; its rustdoc lists each NTSTATUS). The numbers in it are Linux's; on other systems
//! [`to_host`] translates them to the local values.

use smb3_client::Error;

/// The errno for `e`, in this system's numbering.
pub fn errno_of(e: &Error) -> i32 {
    to_host(e.to_errno())
}

/// A Linux errno value as this system numbers it (the identity on Linux).
#[cfg(target_os = "linux")]
pub fn to_host(linux: i32) -> i32 {
    linux
}

/// A Linux errno value as this system numbers it. Values below 35 are the same on Linux and
/// the BSDs (macOS); the others differ.
#[cfg(not(target_os = "linux"))]
pub fn to_host(linux: i32) -> i32 {
    match linux {
        36 => libc::ENAMETOOLONG,
        38 => libc::ENOSYS,
        39 => libc::ENOTEMPTY,
        95 => libc::ENOTSUP,
        104 => libc::ECONNRESET,
        110 => libc::ETIMEDOUT,
        122 => libc::EDQUOT,
        // EKEYEXPIRED (a Kerberos ticket ran out) has no BSD counterpart.
        127 => libc::EACCES,
        n if n < 35 => n,
        _ => libc::EIO,
    }
}

/// A failed operation: the errno for the application and, when the server or network was
/// the cause, the library's error (for the log).
#[derive(Debug)]
pub struct FsError {
    /// The errno value to reply with.
    pub errno: i32,
    /// The underlying error, if any.
    pub error: Option<Error>,
}

impl FsError {
    /// An error with only an errno.
    pub fn new(errno: i32) -> Self {
        FsError { errno, error: None }
    }
}

impl From<Error> for FsError {
    fn from(e: Error) -> Self {
        FsError {
            errno: errno_of(&e),
            error: Some(e),
        }
    }
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            Some(e) => write!(f, "{e} (errno {})", self.errno),
            None => write!(f, "errno {}", self.errno),
        }
    }
}

/// Result of a file system operation.
pub type FsResult<T> = Result<T, FsError>;

#[cfg(test)]
mod tests {
    use super::*;
    use smb3_client::NtStatus;

    fn status(s: NtStatus) -> i32 {
        errno_of(&Error::Status {
            status: s,
            command: smb3_proto::Command::CREATE,
            path: None,
        })
    }

    #[test]
    fn common_statuses() {
        assert_eq!(status(NtStatus::OBJECT_NAME_NOT_FOUND), libc::ENOENT);
        assert_eq!(status(NtStatus::OBJECT_NAME_COLLISION), libc::EEXIST);
        assert_eq!(status(NtStatus::DIRECTORY_NOT_EMPTY), libc::ENOTEMPTY);
        assert_eq!(status(NtStatus::ACCESS_DENIED), libc::EACCES);
        assert_eq!(status(NtStatus::NOT_A_DIRECTORY), libc::ENOTDIR);
        assert_eq!(status(NtStatus::FILE_IS_A_DIRECTORY), libc::EISDIR);
        assert_eq!(status(NtStatus::DISK_FULL), libc::ENOSPC);
    }
}
