//! The error in a few words, for a line that already names the file and the server.

use std::fmt;

use smb3_proto::NtStatus;

use super::{AuthDetail, Error};

/// [`Error::brief`]: an error as one short phrase.
#[derive(Debug, Clone, Copy)]
pub struct ErrorBrief<'a>(&'a Error);

impl fmt::Display for ErrorBrief<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Error::Status {
                status: NtStatus::LOGON_FAILURE,
                ..
            } => f.write_str("logon failure: wrong user name or password (LOGON_FAILURE)"),
            Error::Status {
                status: NtStatus::BAD_NETWORK_NAME,
                ..
            } => f.write_str("no such share (BAD_NETWORK_NAME)"),
            Error::Status { status, .. } => write!(f, "{status}"),
            Error::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    f.write_str("connection refused (is an SMB server listening on that port?)")
                }
                _ => write!(f, "{source}"),
            },
            // Kerberos from a cache or keytab: the detail leads with what to do ("no
            // Kerberos ticket in FILE:/tmp/krb5cc_0 (run kinit): ...").
            Error::Auth {
                detail: detail @ AuthDetail::KerberosCache { .. },
                ..
            } => write!(f, "{detail}"),
            other => write!(f, "{other}"),
        }
    }
}

impl Error {
    /// The error as one short phrase for a person, to follow the name of the file or server
    /// it concerns: a status as its words and name (`access denied (ACCESS_DENIED)`) without
    /// the command and path that [`Display`](fmt::Display) adds, a refused connection with a
    /// hint, the rest as `Display` has it.
    pub fn brief(&self) -> ErrorBrief<'_> {
        ErrorBrief(self)
    }

    /// Which variant this is, as a stable `snake_case` label for logs and machine-readable
    /// output: `status`, `protocol`, `auth`, `io`, `timeout`, `connection_lost`,
    /// `handle_lost`, `snapshot_not_found`, `unsupported`, `unsafe_name`, `not_a_link`,
    /// `certificate`, `config` or `api_misuse`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Status { .. } => "status",
            Error::Protocol(_) => "protocol",
            Error::Auth { .. } => "auth",
            Error::Io { .. } => "io",
            Error::Timeout { .. } => "timeout",
            Error::ConnectionLost { .. } => "connection_lost",
            Error::HandleLost { .. } => "handle_lost",
            Error::SnapshotNotFound { .. } => "snapshot_not_found",
            Error::Unsupported { .. } => "unsupported",
            Error::UnsafeName { .. } => "unsafe_name",
            Error::NotALink { .. } => "not_a_link",
            Error::DifferentShares { .. } => "different_shares",
            Error::Certificate { .. } => "certificate",
            Error::Config(_) => "config",
            Error::ApiMisuse(_) => "api_misuse",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb3_proto::Command;

    fn status(s: NtStatus) -> Error {
        Error::Status {
            status: s,
            command: Command::CREATE,
            path: Some("a/b".into()),
        }
    }

    #[test]
    fn a_brief_error_is_the_status_in_words_without_command_or_path() {
        let e = status(NtStatus::ACCESS_DENIED);
        assert_eq!(e.brief().to_string(), NtStatus::ACCESS_DENIED.to_string());
        assert!(!e.brief().to_string().contains("a/b"));
        assert_eq!(e.kind(), "status");
        assert_eq!(
            status(NtStatus::LOGON_FAILURE).brief().to_string(),
            "logon failure: wrong user name or password (LOGON_FAILURE)"
        );
        assert_eq!(
            status(NtStatus::BAD_NETWORK_NAME).brief().to_string(),
            "no such share (BAD_NETWORK_NAME)"
        );
        let refused = Error::io(
            None,
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        );
        assert_eq!(
            refused.brief().to_string(),
            "connection refused (is an SMB server listening on that port?)"
        );
        assert_eq!(refused.kind(), "io");
        let misuse = Error::ApiMisuse("no");
        assert_eq!(misuse.brief().to_string(), misuse.to_string());
        assert_eq!(misuse.kind(), "api_misuse");
    }
}
