//! Errors, grouped by who is to blame (DESIGN §2).

use std::io;

use smb3_proto::msg::ioctl::{IoctlRequest, IoctlResponse};
use smb3_proto::{Command, DecodeError, NtStatus};

mod auth_detail;
mod brief;
mod connection_loss;
mod handle_loss;
mod unsafe_name;

pub use auth_detail::{AuthDetail, AuthSource, KerberosHint};
pub use brief::ErrorBrief;
pub use connection_loss::{ConnectionLossCause, LossSign};
pub use handle_loss::{FileChange, HandleLossCause, ReclaimRefusal, ReopenFailure};
pub use unsafe_name::UnsafeNameReason;

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
        /// What exactly went wrong; the security package's own error is its source.
        #[source]
        detail: AuthDetail,
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
    /// The connection carrying the request was lost before the reply came, and the request
    /// was not (or could not be) sent again on another. Nothing is known about whether the
    /// server executed it.
    #[error("connection lost before {command} completed: {cause}")]
    ConnectionLost {
        /// The command in flight.
        command: Command,
        /// How the connection was lost, and why the request was not sent again.
        cause: ConnectionLossCause,
    },
    /// Every connection to the server was lost and the session was re-established, but this
    /// open could not be reclaimed (its durable handle expired, the server restarted, or it
    /// was never durable): nothing more can be read or written through it. `unwritten` names
    /// the byte range of the write that failed, when the error comes from one; writes
    /// answered before the loss are on the server.
    #[error(
        "{}open handle lost with the connection and not reclaimed: {cause}{}",
        path_prefix(path),
        unwritten_suffix(unwritten)
    )]
    HandleLost {
        /// The share-relative path of the open.
        path: Option<String>,
        /// Why the open did not come back.
        cause: HandleLossCause,
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
    /// The server gave a name that cannot be one path component (`..`, `a/b`, `/tmp/x`, a
    /// NUL, ...; see [`check_name`](crate::check_name)) as an entry of the directory `dir`.
    /// The entry is left out; a listing or walk goes on with the rest. Only a hostile or
    /// broken server sends one: MS-FSCC 2.1.5 forbids such names.
    #[error(
        "{}: the server listed an entry named {name:?}, which is not a single file name \
         ({reason}); refused",
        shown_dir(dir)
    )]
    UnsafeName {
        /// The share-relative directory listed (`""` for the share's root).
        dir: String,
        /// The name exactly as the server sent it.
        name: String,
        /// What is wrong with it.
        reason: UnsafeNameReason,
    },
    /// [`Share::read_link`](crate::Share::read_link) of a file that is not a symbolic link:
    /// a plain file or directory (`reparse_tag` 0), or a reparse point of another kind (a
    /// FIFO, socket or device stored as an NFS reparse point, or a tag this library does not
    /// read as a link). `readlink(2)` says EINVAL.
    #[error("{path}: not a symbolic link{}", reparse_tag_suffix(*reparse_tag))]
    NotALink {
        /// The share-relative path.
        path: String,
        /// The file's reparse tag (MS-FSCC 2.1.2.1); 0 when it has none.
        reparse_tag: u32,
    },
    /// A rename or hard link between two paths of a DFS namespace that lead to different
    /// shares, or servers, behind its links: no server moves a file from one share to
    /// another. `rename(2)` says EXDEV, so `mv` copies instead.
    #[error(
        "{from} and {to} lie behind DFS links on different shares: a file cannot be renamed \
         or linked from one to the other"
    )]
    DifferentShares {
        /// The existing path, as the caller gave it.
        from: String,
        /// The new path, as the caller gave it.
        to: String,
    },
    /// The server's certificate was refused when connecting over QUIC (SMB over QUIC): it
    /// is not signed by a trusted CA, does not name `host`, is out of its validity period, or
    /// does not carry a pinned key. Nothing was sent to the server.
    #[error("certificate of {host} refused: {problem} ({detail})")]
    Certificate {
        /// The name the certificate was checked against: the host the caller gave, or the
        /// configured [`QuicConfig::server_name`](crate::QuicConfig::server_name).
        host: String,
        /// What is wrong with it.
        problem: CertificateProblem,
        /// The TLS library's own words for it.
        detail: String,
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

fn reparse_tag_suffix(tag: u32) -> String {
    match tag {
        0 => String::new(),
        tag => format!(" (a reparse point with tag {tag:#010x})"),
    }
}

fn dialect_name(code: u16) -> String {
    match smb3_proto::Dialect::from_code(code) {
        Some(d) => d.to_string(),
        None => format!("{code:#06x}"),
    }
}

fn cipher_name(id: u16) -> String {
    match smb3_proto::Cipher::from_id(id) {
        Some(c) => format!("{c:?}"),
        None => format!("{id:#06x}"),
    }
}

fn signing_name(id: u16) -> String {
    match smb3_proto::SigningAlgorithm::from_id(id) {
        Some(a) => format!("{a:?}"),
        None => format!("{id:#06x}"),
    }
}

fn shown_dir(dir: &str) -> &str {
    if dir.is_empty() {
        "(share root)"
    } else {
        dir
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
    /// The server did not prove who it is (Kerberos mutual authentication failed).
    MutualAuthentication,
}

impl std::fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthFailure::SecurityPackage => "security package error",
            AuthFailure::TooManyRounds => "too many authentication rounds",
            AuthFailure::NoSessionKey => "no session key for signing",
            AuthFailure::GuestNotAllowed => "server offered only a guest session",
            AuthFailure::MutualAuthentication => "the server did not authenticate itself",
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
    /// A frame's transport header (MS-SMB2 2.1) does not start with a zero byte.
    #[error("bad transport header byte {0:#x}")]
    BadTransportHeader(u8),
    /// A frame could not be decoded before its command was known.
    #[error("malformed frame: {0}")]
    Frame(#[source] DecodeError),
    /// A signed reply did not verify: it was changed on the way, or signed with another key.
    #[error("bad signature on {command} reply (MessageId {message_id})")]
    BadSignature {
        /// The command.
        command: Command,
        /// Its MessageId.
        message_id: u64,
    },
    /// A reply came unsigned where signing is required (MS-SMB2 3.2.5.1.3): a man in the
    /// middle may have stripped its signature to change it. Signing is required by default
    /// ([`ClientConfig::require_signing`](crate::ClientConfig)).
    #[error(
        "unsigned {command} reply (MessageId {message_id}) where signing is required: \
         refused (it may have been altered on the way)"
    )]
    UnsignedReply {
        /// The command.
        command: Command,
        /// Its MessageId.
        message_id: u64,
    },
    /// A reply to an encrypted request came in plaintext: the server must encrypt every
    /// response to an encrypted request (MS-SMB2 3.3.4.1.4), so a man in the middle wrote it.
    #[error(
        "{command} reply (MessageId {message_id}) came unencrypted on an encrypted session \
         or share: refused"
    )]
    UnsealedReply {
        /// The command.
        command: Command,
        /// Its MessageId.
        message_id: u64,
    },
    /// The server chose a dialect the client did not offer (MS-SMB2 3.2.5.2), for instance
    /// 2.1 when the client's lowest is 3.0: a man in the middle rewrote the NEGOTIATE
    /// request to downgrade the connection.
    #[error(
        "the server chose dialect {}, which the client did not offer (offered {lowest} to \
         {highest}): possible downgrade attack",
        dialect_name(*chosen)
    )]
    DialectNotOffered {
        /// The DialectRevision the server sent.
        chosen: u16,
        /// The lowest dialect offered.
        lowest: smb3_proto::Dialect,
        /// The highest dialect offered.
        highest: smb3_proto::Dialect,
    },
    /// The server chose a cipher the client did not offer (MS-SMB2 3.2.5.2: the response's
    /// cipher must be one of the request's).
    #[error(
        "the server chose cipher {}, which the client did not offer",
        cipher_name(*.0)
    )]
    CipherNotOffered(u16),
    /// The server chose a signing algorithm the client did not offer (MS-SMB2 3.2.5.2).
    #[error(
        "the server chose signing algorithm {}, which the client did not offer",
        signing_name(*.0)
    )]
    SigningAlgorithmNotOffered(u16),
    /// A FSCTL_VALIDATE_NEGOTIATE_INFO reply came neither signed nor encrypted; MS-SMB2
    /// 3.2.5.14.12 has the client drop the connection.
    #[error("the VALIDATE_NEGOTIATE_INFO reply was neither signed nor encrypted")]
    UnprotectedNegotiateValidation,
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
    /// 3.3.5.15), or a READ's data beyond the Length asked for (3.3.5.12).
    #[error("{command} reply carries {got} bytes of output; the request allowed {allowed}")]
    TooMuchOutput {
        /// The command.
        command: Command,
        /// Output bytes in the reply.
        got: usize,
        /// The most the request allowed.
        allowed: u32,
    },
    /// A frame came encrypted where no cipher was negotiated, or before the session had
    /// keys to decrypt it (MS-SMB2 3.2.5.1.1).
    #[error("encrypted frame where no cipher or session key is in force")]
    EncryptedWithoutKeys,
    /// The server sent a request where only replies may come.
    #[error("the server sent a request")]
    RequestFromServer,
    /// A reply names another command than the request with its MessageId.
    #[error("{got} reply to a {sent} request")]
    CommandMismatch {
        /// The request's command.
        sent: Command,
        /// The reply's command.
        got: Command,
    },
    /// The server wrote fewer bytes than it was given (a WRITE's Count, MS-SMB2 2.2.22), or
    /// copied fewer than asked (a server-side copy's TotalBytesWritten, MS-SMB2 2.2.32.1).
    #[error("{command}: the server wrote {written} bytes of {sent}")]
    IncompleteWrite {
        /// WRITE, or IOCTL for a server-side copy.
        command: Command,
        /// Bytes sent or asked to be copied.
        sent: u64,
        /// Bytes the server says it wrote.
        written: u64,
    },
    /// A server-side copy (FSCTL_SRV_COPYCHUNK, MS-SMB2 3.3.5.15.6) went wrong.
    #[error("server-side copy: {0}")]
    ServerCopy(ServerCopyFault),
    /// The server's list of snapshots (FSCTL_SRV_ENUMERATE_SNAPSHOTS, MS-SMB2 3.3.5.15.1)
    /// could not be read.
    #[error("FSCTL_SRV_ENUMERATE_SNAPSHOTS: {0}")]
    SnapshotList(SnapshotListFault),
    /// A DFS referral (MS-DFSC 2.2.4) that cannot be followed for the path: a target that is
    /// not `\\server\share[\path]`, a PathConsumed that does not fit the path, a chain of
    /// referrals that goes in a circle or on too long.
    #[error("DFS referral for {path}: {why}")]
    BadReferral {
        /// The path the referral was asked for.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// FSCTL_QUERY_ALLOCATED_RANGES answered with ranges out of order, overlapping, or
    /// outside the range asked about (MS-FSCC 2.3.40).
    #[error("the server's allocated ranges are out of order or outside the query")]
    DisorderedRanges,
    /// Encryption is required, but the server agreed no cipher (MS-SMB2 3.2.5.2).
    #[error("{0} requires encryption but no cipher was negotiated")]
    NoCipher(EncryptionRequiredBy),
    /// A 3.1.1 NEGOTIATE reply without the preauth integrity context it must carry
    /// (MS-SMB2 3.2.5.2).
    #[error("3.1.1 NEGOTIATE without preauth context")]
    NoPreauthIntegrity,
    /// The NEGOTIATE reply chose a preauth hash the client did not offer (only SHA-512
    /// exists, MS-SMB2 2.2.3.1.1).
    #[error("unsupported preauth hash algorithm {0:#06x}")]
    UnknownPreauthHash(u16),
    /// The security package finished while the server still asked for more
    /// (MORE_PROCESSING_REQUIRED).
    #[error("authentication ended before the server accepted it")]
    AuthIncomplete,
    /// A channel binding reply names another session than the one bound (MS-SMB2
    /// 3.2.5.3.1).
    #[error("binding reply names session {got:#x}, not {expected:#x}")]
    SessionIdMismatch {
        /// The session being bound.
        expected: u64,
        /// The SessionId in the reply.
        got: u64,
    },
    /// VALIDATE_NEGOTIATE_INFO does not match what NEGOTIATE said (MS-SMB2 3.2.5.14.12): the
    /// NEGOTIATE may have been tampered with (a downgrade attack).
    #[error("VALIDATE_NEGOTIATE_INFO does not match NEGOTIATE (possible downgrade attack)")]
    NegotiateValidation,
    /// An oddity no caller could do anything about and that does not depend on what the
    /// server sends (a local cipher failing with valid keys, a channel answering a compound
    /// with another number of replies than it has requests); the words say which.
    #[error("{0}")]
    Unexpected(&'static str),
}

/// How a server-side copy went wrong ([`ProtocolError::ServerCopy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerCopyFault {
    /// The server refused a copy request within the limits it gave.
    #[error("the server refused a copy request within the limits it gave")]
    RefusedWithinLimits,
    /// The server gave copy limits of zero.
    #[error("the server gave copy limits of zero")]
    ZeroLimits,
    /// The server changed its limits while the copy went on.
    #[error("the server changed its copy limits during a copy")]
    LimitsChanged,
}

/// How reading the server's snapshot list went wrong ([`ProtocolError::SnapshotList`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotListFault {
    /// Tokens missing from a reply with room for them.
    #[error("tokens missing from a reply with room for them")]
    TokensMissing,
    /// The list is larger than the client accepts.
    #[error("the snapshot list is larger than the client accepts")]
    TooLarge,
    /// The list changed size every time it was asked for.
    #[error("the snapshot list kept changing size")]
    KeptChangingSize,
    /// The server refused the 16-byte probe for the list's size as too small.
    #[error("the server refused a 16-byte probe as too small")]
    ProbeRefused,
}

/// What requires encryption ([`ProtocolError::NoCipher`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncryptionRequiredBy {
    /// The session: the configuration asked for it, or the server flagged the session.
    Session,
    /// The share (SMB2_SHAREFLAG_ENCRYPT_DATA).
    Share,
}

impl std::fmt::Display for EncryptionRequiredBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EncryptionRequiredBy::Session => "the session",
            EncryptionRequiredBy::Share => "the share",
        })
    }
}

/// Why a server's certificate was refused ([`Error::Certificate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CertificateProblem {
    /// Not issued by a CA the client trusts (the CA file given, or the system's roots).
    UnknownIssuer,
    /// Valid, but not for the host name (or address) the client connected to.
    NameMismatch,
    /// Past its validity period.
    Expired,
    /// Before its validity period.
    NotYetValid,
    /// Refused for another reason (revoked, bad signature, malformed, wrong usage).
    Invalid,
    /// Keys are pinned ([`QuicConfig::pinned_sha256`](crate::QuicConfig::pinned_sha256)) and
    /// the server's public key is none of them; the error's detail gives the key's SHA-256.
    PinMismatch,
}

impl std::fmt::Display for CertificateProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CertificateProblem::UnknownIssuer => "issued by an unknown CA",
            CertificateProblem::NameMismatch => "not valid for this name",
            CertificateProblem::Expired => "expired",
            CertificateProblem::NotYetValid => "not yet valid",
            CertificateProblem::Invalid => "invalid",
            CertificateProblem::PinMismatch => "its public key is not a pinned one",
        })
    }
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
        const E2BIG: i32 = 7;
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
        const ENODATA: i32 = 61;
        const ENOTSUP: i32 = 95;
        const ECONNRESET: i32 = 104;
        const ETIMEDOUT: i32 = 110;
        const EDQUOT: i32 = 122;
        const EKEYEXPIRED: i32 = 127;
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
                NtStatus::NOT_SUPPORTED
                | NtStatus::NOT_IMPLEMENTED
                | NtStatus::EAS_NOT_SUPPORTED => ENOTSUP,
                NtStatus::NONEXISTENT_EA_ENTRY | NtStatus::NO_EAS_ON_FILE => ENODATA,
                NtStatus::INVALID_EA_NAME => EINVAL,
                NtStatus::EA_TOO_LARGE => E2BIG,
                NtStatus::INVALID_HANDLE | NtStatus::FILE_CLOSED => EBADF,
                NtStatus::IO_TIMEOUT => ETIMEDOUT,
                _ => EIO,
            },
            Error::Timeout { .. } => ETIMEDOUT,
            Error::ConnectionLost { .. } => ECONNRESET,
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(EIO),
            Error::Config(_) | Error::ApiMisuse(_) | Error::NotALink { .. } => EINVAL,
            Error::DifferentShares { .. } => EXDEV,
            Error::Certificate { .. } => EACCES,
            Error::SnapshotNotFound { .. } => ENOENT,
            Error::Unsupported { .. } => ENOTSUP,
            // The kernel client's errno for a Kerberos ticket that ran out (run kinit).
            Error::Auth {
                detail:
                    AuthDetail::KerberosCache {
                        hint: Some(KerberosHint::TicketExpired),
                        ..
                    },
                ..
            } => EKEYEXPIRED,
            Error::Auth { .. } => EACCES,
            Error::Protocol(_) | Error::UnsafeName { .. } => EIO,
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
                cause,
                unwritten,
            } => Error::HandleLost {
                path: Some(p.to_string()),
                cause,
                unwritten,
            },
            other => other,
        }
    }

    /// This error naming `p` as its path in place of the one it has: a path operation that
    /// crossed a DFS link failed at the target's path, and the caller knows only its own.
    pub(crate) fn shown_at(self, p: &str) -> Error {
        match self {
            Error::Status {
                status, command, ..
            } => Error::Status {
                status,
                command,
                path: Some(p.to_string()),
            },
            other => other.with_path(p),
        }
    }

    /// Record that the failed request was a write of `len` bytes at `offset` (for
    /// [`Error::HandleLost`]).
    pub(crate) fn unwritten(self, offset: u64, len: u64) -> Error {
        match self {
            Error::HandleLost { path, cause, .. } => Error::HandleLost {
                path,
                cause,
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
