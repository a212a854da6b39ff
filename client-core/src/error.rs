//! Errors, grouped by who is to blame (DESIGN §2).

use std::io;

use smb3_proto::msg::ioctl::{IoctlRequest, IoctlResponse};
use smb3_proto::{Command, DecodeError, NtStatus};

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, by blame.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server understood the request and said no.
    #[error("{}{command} failed: {status}", path_prefix(path))]
    Status {
        /// The NTSTATUS the server returned.
        status: NtStatus,
        /// The command that failed.
        command: Command,
        /// The share-relative path the request was about, when there is one.
        path: Option<String>,
    },
    /// The server broke the protocol (malformed or inconsistent reply, bad signature, ...).
    /// The connection it came from is dropped.
    #[error("protocol violation by the server: {0}")]
    Protocol(#[from] ProtocolError),
    /// Authentication could not be completed locally (bad credentials format, SSPI failure).
    /// A wrong password shows up as [`Error::Status`] with `LOGON_FAILURE`.
    #[error("authentication failed: {kind}: {detail}")]
    Auth {
        /// What kind of failure.
        kind: AuthFailure,
        /// Details from the security package.
        detail: String,
    },
    /// The network failed (connection refused, reset, unreachable).
    #[error("network error{}: {source}", addr_suffix(addr))]
    Io {
        /// Remote address involved, when known.
        addr: Option<std::net::SocketAddr>,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// No reply in time.
    #[error("timed out waiting for {what} after {after:?}")]
    Timeout {
        /// What was being waited for.
        what: &'static str,
        /// How long we waited.
        after: std::time::Duration,
    },
    /// The connection carrying the request was lost before the reply came. Nothing is known
    /// about whether the server executed the request.
    #[error("connection lost before {command} completed")]
    ConnectionLost {
        /// The command in flight.
        command: Command,
    },
    /// Every connection to the server was lost and the session was re-established, but this
    /// open could not be reclaimed (its durable handle expired, the server restarted, or it
    /// was never durable): nothing more can be read or written through it. `unwritten` names
    /// the byte range of the write that failed, when the error comes from one; writes
    /// answered before the loss are on the server.
    #[error(
        "{}open handle lost with the connection and not reclaimed: {reason}{}",
        path_prefix(path),
        unwritten_suffix(unwritten)
    )]
    HandleLost {
        /// The share-relative path of the open.
        path: Option<String>,
        /// Why the reclaim failed.
        reason: String,
        /// Bytes `start..end` a failed write did not write.
        unwritten: Option<std::ops::Range<u64>>,
    },
    /// A snapshot ("previous version") was asked for by a time at which the server has
    /// none: [`Share::snapshots`](crate::Share::snapshots) lists the ones it has.
    #[error(
        "{}the server has no snapshot {snapshot} (list them with Share::snapshots)",
        path_prefix(path)
    )]
    SnapshotNotFound {
        /// The share-relative path being opened in the snapshot.
        path: Option<String>,
        /// The snapshot asked for, as its `@GMT-YYYY.MM.DD-HH.MM.SS` token.
        snapshot: String,
    },
    /// The server does not offer something the caller asked for; `status` is how it said
    /// so.
    #[error(
        "{}the server does not support {feature} ({status})",
        path_prefix(path)
    )]
    Unsupported {
        /// What was asked for, in words.
        feature: &'static str,
        /// The server's answer.
        status: NtStatus,
        /// The share-relative path concerned, when there is one.
        path: Option<String>,
    },
    /// Invalid configuration or URL.
    #[error("configuration error: {0}")]
    Config(ConfigError),
    /// The caller used the API in a way it does not allow.
    #[error("API misuse: {0}")]
    ApiMisuse(&'static str),
}

fn path_prefix(path: &Option<String>) -> String {
    match path {
        Some(p) => format!("{p}: "),
        None => String::new(),
    }
}

fn unwritten_suffix(range: &Option<std::ops::Range<u64>>) -> String {
    match range {
        Some(r) => format!(
            "; bytes {}..{} ({} bytes) were not written",
            r.start,
            r.end,
            r.end - r.start
        ),
        None => String::new(),
    }
}

fn addr_suffix(addr: &Option<std::net::SocketAddr>) -> String {
    match addr {
        Some(a) => format!(" ({a})"),
        None => String::new(),
    }
}

/// Kinds of local authentication failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthFailure {
    /// The security package (sspi) reported an error.
    SecurityPackage,
    /// The server asked for more rounds than any mechanism needs.
    TooManyRounds,
    /// The server requires signing but the session produced no key (guest / anonymous).
    NoSessionKey,
    /// The server would only give a guest session and the caller did not allow that.
    GuestNotAllowed,
}

impl std::fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthFailure::SecurityPackage => "security package error",
            AuthFailure::TooManyRounds => "too many authentication rounds",
            AuthFailure::NoSessionKey => "no session key for signing",
            AuthFailure::GuestNotAllowed => "server offered only a guest session",
        })
    }
}

/// How the server broke the protocol.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A message could not be decoded.
    #[error("malformed {command} reply: {source}")]
    Decode {
        /// The command whose reply was malformed.
        command: Command,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// A frame could not be decoded before its command was known.
    #[error("malformed frame: {0}")]
    Frame(#[source] DecodeError),
    /// A signed reply did not verify, or a reply that must be signed was not.
    #[error("bad or missing signature on {command} reply (MessageId {message_id})")]
    BadSignature {
        /// The command.
        command: Command,
        /// Its MessageId.
        message_id: u64,
    },
    /// An encrypted frame failed to decrypt or authenticate.
    #[error("encrypted frame failed to decrypt")]
    Decrypt,
    /// A reply arrived for a MessageId that is not outstanding.
    #[error("reply for unknown MessageId {0}")]
    UnknownMessageId(u64),
    /// The frame length exceeds what the client accepts.
    #[error("frame of {0} bytes exceeds the limit")]
    FrameTooLarge(usize),
    /// The server left the client without credits and nothing in flight.
    #[error("server granted no credits")]
    NoCredits,
    /// A request needs more credits than the connection holds, with nothing in flight that
    /// could bring more: the server granted too few (waiting would hang forever).
    #[error("the server granted too few credits: the request needs {needed}, the connection holds {held}")]
    TooFewCredits {
        /// Credits the request needs (its CreditCharge, or the sum of a compound's).
        needed: u32,
        /// Credits the connection holds.
        held: u32,
    },
    /// A reply carries more output than its request allowed: an IOCTL's OutputCount above
    /// the MaxOutputResponse it was sent with, which a server must not exceed (MS-SMB2
    /// 3.3.5.15).
    #[error("{command} reply carries {got} bytes of output; the request allowed {allowed}")]
    TooMuchOutput {
        /// The command.
        command: Command,
        /// Output bytes in the reply.
        got: usize,
        /// The most the request allowed.
        allowed: u32,
    },
    /// A reply contradicts what was asked or negotiated.
    #[error("{0}")]
    Unexpected(&'static str),
}

/// Configuration and URL problems.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The URL could not be parsed.
    #[error("invalid URL {url:?}: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A setting is out of range or contradicts another.
    #[error("invalid setting {name}: {reason}")]
    Setting {
        /// The setting.
        name: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The server supports none of the dialects allowed by the configuration.
    #[error("no common dialect with the server")]
    NoCommonDialect,
}

impl Error {
    /// The NTSTATUS, if the server returned one.
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The closest POSIX errno, for the FUSE layer and exit codes.
    pub fn to_errno(&self) -> i32 {
        // Values from Linux asm-generic/errno-base.h and errno.h; stable ABI numbers.
        const EPERM: i32 = 1;
        const ENOENT: i32 = 2;
        const EIO: i32 = 5;
        const EBADF: i32 = 9;
        const ENOMEM: i32 = 12;
        const EACCES: i32 = 13;
        const EBUSY: i32 = 16;
        const EEXIST: i32 = 17;
        const EXDEV: i32 = 18;
        const ENOTDIR: i32 = 20;
        const EISDIR: i32 = 21;
        const EINVAL: i32 = 22;
        const EMFILE: i32 = 24;
        const ENOSPC: i32 = 28;
        const EROFS: i32 = 30;
        const ENAMETOOLONG: i32 = 36;
        const ENOSYS: i32 = 38;
        const ENOTEMPTY: i32 = 39;
        const ENOTSUP: i32 = 95;
        const ECONNRESET: i32 = 104;
        const ETIMEDOUT: i32 = 110;
        const EDQUOT: i32 = 122;
        match self {
            Error::Status { status, .. } => match *status {
                NtStatus::OBJECT_NAME_NOT_FOUND
                | NtStatus::OBJECT_PATH_NOT_FOUND
                | NtStatus::NO_SUCH_FILE
                | NtStatus::BAD_NETWORK_NAME
                | NtStatus::NOT_FOUND => ENOENT,
                NtStatus::ACCESS_DENIED
                | NtStatus::LOGON_FAILURE
                | NtStatus::NETWORK_ACCESS_DENIED
                | NtStatus::CANNOT_DELETE => EACCES,
                NtStatus::PRIVILEGE_NOT_HELD | NtStatus::INVALID_OWNER => EPERM,
                NtStatus::OBJECT_NAME_COLLISION => EEXIST,
                NtStatus::FILE_IS_A_DIRECTORY => EISDIR,
                NtStatus::NOT_A_DIRECTORY => ENOTDIR,
                NtStatus::DIRECTORY_NOT_EMPTY => ENOTEMPTY,
                NtStatus::DISK_FULL => ENOSPC,
                NtStatus::QUOTA_EXCEEDED => EDQUOT,
                NtStatus::SHARING_VIOLATION
                | NtStatus::FILE_LOCK_CONFLICT
                | NtStatus::LOCK_NOT_GRANTED
                | NtStatus::DELETE_PENDING => EBUSY,
                NtStatus::INVALID_PARAMETER
                | NtStatus::OBJECT_NAME_INVALID
                | NtStatus::OBJECT_PATH_SYNTAX_BAD
                | NtStatus::INVALID_INFO_CLASS => EINVAL,
                NtStatus::NAME_TOO_LONG => ENAMETOOLONG,
                NtStatus::NOT_SAME_DEVICE => EXDEV,
                NtStatus::MEDIA_WRITE_PROTECTED => EROFS,
                NtStatus::TOO_MANY_OPENED_FILES => EMFILE,
                NtStatus::NO_MEMORY | NtStatus::INSUFFICIENT_RESOURCES => ENOMEM,
                NtStatus::NOT_SUPPORTED | NtStatus::NOT_IMPLEMENTED => ENOTSUP,
                NtStatus::INVALID_HANDLE | NtStatus::FILE_CLOSED => EBADF,
                NtStatus::IO_TIMEOUT => ETIMEDOUT,
                _ => EIO,
            },
            Error::Timeout { .. } => ETIMEDOUT,
            Error::ConnectionLost { .. } => ECONNRESET,
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(EIO),
            Error::Config(_) | Error::ApiMisuse(_) => EINVAL,
            Error::SnapshotNotFound { .. } => ENOENT,
            Error::Unsupported { .. } => ENOTSUP,
            Error::Auth { .. } => EACCES,
            Error::Protocol(_) => EIO,
            // The open is gone; what it was doing is lost (an NFS stale handle's EIO).
            Error::HandleLost { .. } => EIO,
            #[allow(unreachable_patterns)]
            _ => ENOSYS,
        }
    }

    pub(crate) fn io(addr: Option<std::net::SocketAddr>, source: io::Error) -> Error {
        Error::Io { addr, source }
    }

    /// Attach the share-relative path a status error is about.
    pub(crate) fn with_path(self, p: &str) -> Error {
        match self {
            Error::Status {
                status,
                command,
                path: None,
            } => Error::Status {
                status,
                command,
                path: Some(p.to_string()),
            },
            Error::HandleLost {
                path: _,
                reason,
                unwritten,
            } => Error::HandleLost {
                path: Some(p.to_string()),
                reason,
                unwritten,
            },
            other => other,
        }
    }

    /// Record that the failed request was a write of `len` bytes at `offset` (for
    /// [`Error::HandleLost`]).
    pub(crate) fn unwritten(self, offset: u64, len: u64) -> Error {
        match self {
            Error::HandleLost { path, reason, .. } => Error::HandleLost {
                path,
                reason,
                unwritten: Some(offset..offset + len),
            },
            other => other,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

/// Map a decode failure to a protocol error naming the command.
pub(crate) fn decode<T>(command: Command, r: std::result::Result<T, DecodeError>) -> Result<T> {
    r.map_err(|source| Error::Protocol(ProtocolError::Decode { command, source }))
}

/// Decode an IOCTL reply to `request`, refusing output beyond the request's
/// MaxOutputResponse: a hostile server could otherwise hand the caller as much as a frame
/// holds (16 MiB) where it asked for a few bytes.
pub(crate) fn decode_ioctl(request: &IoctlRequest, reply: &bytes::Bytes) -> Result<IoctlResponse> {
    let out = decode(Command::IOCTL, IoctlResponse::decode(reply))?;
    if out.output.len() > request.max_output_response as usize {
        return Err(Error::Protocol(ProtocolError::TooMuchOutput {
            command: Command::IOCTL,
            got: out.output.len(),
            allowed: request.max_output_response,
        }));
    }
    Ok(out)
}
