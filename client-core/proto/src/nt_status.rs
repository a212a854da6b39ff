//! NTSTATUS values (MS-ERREF 2.3). Unknown values are kept as they are and print in hex.

use std::fmt;

/// A 32-bit NTSTATUS code as sent by the server. Never fails to decode: codes this crate has no
/// name for are kept and shown as `NtStatus(0x........)`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NtStatus(pub u32);

macro_rules! statuses {
    ($($name:ident = $value:expr, $words:expr;)*) => {
        impl NtStatus {
            $(
                #[doc = $words]
                pub const $name: NtStatus = NtStatus($value);
            )*

            /// The symbolic name, if this crate knows the code.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// A short description in words, if this crate knows the code.
            pub fn description(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some($words),)*
                    _ => None,
                }
            }
        }
    };
}

statuses! {
    SUCCESS = 0x0000_0000, "success";
    PENDING = 0x0000_0103, "operation pending";
    NOTIFY_CLEANUP = 0x0000_010B, "directory watch ended (handle closed)";
    NOTIFY_ENUM_DIR = 0x0000_010C, "too many changes to report";
    BUFFER_OVERFLOW = 0x8000_0005, "buffer overflow (partial data returned)";
    NO_MORE_FILES = 0x8000_0006, "no more files";
    STOPPED_ON_SYMLINK = 0x8000_002D, "stopped on a symbolic link";
    UNSUCCESSFUL = 0xC000_0001, "unsuccessful";
    NOT_IMPLEMENTED = 0xC000_0002, "not implemented";
    INVALID_INFO_CLASS = 0xC000_0003, "invalid information class";
    INFO_LENGTH_MISMATCH = 0xC000_0004, "information length mismatch";
    INVALID_HANDLE = 0xC000_0008, "invalid handle";
    INVALID_PARAMETER = 0xC000_000D, "invalid parameter";
    NO_SUCH_DEVICE = 0xC000_000E, "no such device";
    NO_SUCH_FILE = 0xC000_000F, "no such file";
    INVALID_DEVICE_REQUEST = 0xC000_0010, "invalid device request";
    END_OF_FILE = 0xC000_0011, "end of file";
    MORE_PROCESSING_REQUIRED = 0xC000_0016, "more processing required";
    NO_MEMORY = 0xC000_0017, "server out of memory";
    INVALID_VIEW_SIZE = 0xC000_001F, "range past the end of the file";
    ACCESS_DENIED = 0xC000_0022, "access denied";
    BUFFER_TOO_SMALL = 0xC000_0023, "buffer too small";
    OBJECT_NAME_INVALID = 0xC000_0033, "object name invalid";
    OBJECT_NAME_NOT_FOUND = 0xC000_0034, "no such file or directory";
    OBJECT_NAME_COLLISION = 0xC000_0035, "file already exists";
    OBJECT_PATH_INVALID = 0xC000_0039, "object path invalid";
    OBJECT_PATH_NOT_FOUND = 0xC000_003A, "path not found";
    OBJECT_PATH_SYNTAX_BAD = 0xC000_003B, "bad path syntax";
    SHARING_VIOLATION = 0xC000_0043, "sharing violation";
    DELETE_PENDING = 0xC000_0056, "delete pending";
    INVALID_OWNER = 0xC000_005A, "this user may not be made the owner";
    PRIVILEGE_NOT_HELD = 0xC000_0061, "privilege not held";
    LOGON_FAILURE = 0xC000_006D, "logon failure (wrong user name or password)";
    ACCOUNT_RESTRICTION = 0xC000_006E, "account restriction";
    PASSWORD_EXPIRED = 0xC000_0071, "password expired";
    ACCOUNT_DISABLED = 0xC000_0072, "account disabled";
    DISK_FULL = 0xC000_007F, "disk full";
    INSUFFICIENT_RESOURCES = 0xC000_009A, "insufficient server resources";
    FILE_IS_A_DIRECTORY = 0xC000_00BA, "is a directory";
    NOT_SUPPORTED = 0xC000_00BB, "not supported";
    NETWORK_NAME_DELETED = 0xC000_00C9, "network name deleted";
    BAD_NETWORK_NAME = 0xC000_00CC, "no such share";
    REQUEST_NOT_ACCEPTED = 0xC000_00D0, "request not accepted";
    DIRECTORY_NOT_EMPTY = 0xC000_0101, "directory not empty";
    NOT_A_DIRECTORY = 0xC000_0103, "not a directory";
    CANCELLED = 0xC000_0120, "cancelled";
    FILE_CLOSED = 0xC000_0128, "file closed";
    FILE_NOT_AVAILABLE = 0xC000_0467, "file not available (stale request after a channel loss)";
    USER_SESSION_DELETED = 0xC000_0203, "user session deleted";
    NETWORK_SESSION_EXPIRED = 0xC000_035C, "network session expired";
    NTLM_BLOCKED = 0xC000_0418, "NTLM authentication is disabled on the server (use Kerberos)";
    CONNECTION_DISCONNECTED = 0xC000_020C, "connection disconnected";
    CONNECTION_RESET = 0xC000_020D, "connection reset";
    NOT_FOUND = 0xC000_0225, "not found";
    PATH_NOT_COVERED = 0xC000_0257, "the path lies in another DFS target (a referral is needed)";
    CANT_ACCESS_DOMAIN_INFO = 0xC000_00DA, "the domain's DFS information cannot be reached";
    DFS_UNAVAILABLE = 0xC000_026D, "DFS is not available on the server";
    FS_DRIVER_REQUIRED = 0xC000_019C, "file system driver required";
    INVALID_DEVICE_STATE = 0xC000_0184, "invalid device state";
    ACCESS_VIOLATION = 0xC000_0005, "access violation";
    INVALID_NETWORK_RESPONSE = 0xC000_00C3, "invalid network response";
    NETWORK_ACCESS_DENIED = 0xC000_00CA, "network access denied";
    BAD_IMPERSONATION_LEVEL = 0xC000_00A5, "bad impersonation level";
    FILE_LOCK_CONFLICT = 0xC000_0054, "file lock conflict";
    LOCK_NOT_GRANTED = 0xC000_0055, "lock not granted";
    NOT_SAME_DEVICE = 0xC000_00D4, "not the same device";
    QUOTA_EXCEEDED = 0xC000_0044, "quota exceeded";
    CANNOT_DELETE = 0xC000_0121, "cannot delete";
    IO_TIMEOUT = 0xC000_00B5, "I/O timeout";
    MEDIA_WRITE_PROTECTED = 0xC000_00A2, "media write protected";
    TOO_MANY_OPENED_FILES = 0xC000_011F, "too many open files";
    INVALID_LOCK_SEQUENCE = 0xC000_001E, "invalid lock sequence";
    NO_SUCH_USER = 0xC000_0064, "no such user";
    WRONG_PASSWORD = 0xC000_006A, "wrong password";
    NAME_TOO_LONG = 0xC000_0106, "name too long";
    REVISION_MISMATCH = 0xC000_0059, "revision mismatch";
    ENCRYPTION_FAILED = 0xC000_028A, "encryption failed";
    DECRYPTION_FAILED = 0xC000_028B, "decryption failed";
    EAS_NOT_SUPPORTED = 0xC000_004F, "extended attributes not supported";
    EA_TOO_LARGE = 0xC000_0050, "extended attributes too large";
    NONEXISTENT_EA_ENTRY = 0xC000_0051, "no such extended attribute";
    NO_EAS_ON_FILE = 0xC000_0052, "no extended attributes on the file";
    INVALID_EA_NAME = 0x8000_0013, "invalid extended attribute name";
}

impl NtStatus {
    /// Severity is "error" (top two bits 11).
    pub fn is_error(self) -> bool {
        self.0 >> 30 == 0b11
    }

    /// Severity is "warning" (top two bits 10), e.g. BUFFER_OVERFLOW, NO_MORE_FILES.
    pub fn is_warning(self) -> bool {
        self.0 >> 30 == 0b10
    }
}

impl fmt::Debug for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "NtStatus({:#010x})", self.0),
        }
    }
}

impl fmt::Display for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name(), self.description()) {
            (Some(name), Some(words)) => write!(f, "{words} ({name})"),
            _ => write!(f, "unknown status {:#010x}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_codes_print_in_hex() {
        assert_eq!(
            format!("{:?}", NtStatus(0xC0DE_0001)),
            "NtStatus(0xc0de0001)"
        );
        assert_eq!(
            format!("{}", NtStatus(0xC0DE_0001)),
            "unknown status 0xc0de0001"
        );
        assert_eq!(format!("{:?}", NtStatus::ACCESS_DENIED), "ACCESS_DENIED");
        assert_eq!(
            NtStatus::LOGON_FAILURE.to_string(),
            "logon failure (wrong user name or password) (LOGON_FAILURE)"
        );
        assert!(NtStatus::ACCESS_DENIED.is_error());
        assert!(NtStatus::NO_MORE_FILES.is_warning());
    }
}
