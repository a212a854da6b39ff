//! An async SMB 2.1/3.x client for tokio.
//!
//! ```no_run
//! # async fn demo() -> smb3_client::Result<()> {
//! use smb3_client::{Client, ClientConfig, OpenOptions, UserCredentials};
//! let creds = UserCredentials { user: "alice".into(), domain: String::new(), password: "secret".into() };
//! let client = Client::connect("nas.example:445", &creds, ClientConfig::default()).await?;
//! let share = client.share("data").await?;
//! let file = share.open("reports/q3.csv", &OpenOptions::new().read(true)).await?;
//! let head = file.read_at(0, 4096).await?;
//! println!("{} bytes", head.len());
//! file.close().await?;
//! # Ok(()) }
//! ```
//!
//! # Cancelling
//!
//! Every operation is an ordinary future: to give up on one, drop it (leave a `select!`, put
//! it under `tokio::time::timeout`, abort its task). Nothing is left wedged: the reply, when it
//! comes, returns its credits and is discarded; and if the server had answered the request
//! with STATUS_PENDING (a [`DirWatch`] waiting for changes, an open waiting for another
//! client's lease to break), the client sends an SMB2 CANCEL so the server stops working on
//! it. [`ChannelInfo::cancels_sent`] counts them. A cancelled request is never replayed on
//! another channel.
//!
//! Giving up never leaves a handle open at the server: an open the server carried out after
//! its caller left (the CANCEL came too late, or the request was already answered) is closed
//! in the background, and so is the handle of a listing, delete or rename dropped half-way.
//! [`Client::abandoned_handles_closed`] counts them.

#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![forbid(unsafe_code)]

mod addressing;
mod attributes;
mod auth;
mod background;
pub mod blocking;
mod byte_locks;
mod channel;
mod client;
mod config;
pub mod credentials_file;
pub mod dfs;
mod durable;
mod engine;
mod error;
mod extended_attributes;
mod failover;
mod file;
mod file_security;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod identity;
mod info_query;
mod key_log;
mod lease;
mod listing;
pub mod location;
pub mod log_filter;
mod logoff_wait;
mod metadata;
#[cfg(feature = "microbench")]
#[doc(hidden)]
pub mod microbench;
mod multichannel;
mod names;
mod negotiated;
mod open_options;
mod orphans;
mod password;
mod posix;
mod posix_modes;
mod referral;
mod security;
mod server_copy;
mod session;
mod set_info;
mod share;
mod sid_modes;
mod small_files;
mod snapshots;
mod sparse;
mod streams;
mod symlinks;
pub mod tasks;
mod timewarp;
mod tree;
mod watch;

pub use attributes::DosAttributes;
pub use auth::{kerberos_ticket, AuthMechanism, KerberosTicket, UserCredentials};
pub use byte_locks::{IfLocked, LockKind};
pub use channel::frame_buffers::BufferPool;
pub use client::{Client, MaxIo, Reauthentications, TrafficCounters};
pub use config::{Auth, ClientConfig, Dispatch, NicOverride, QuicConfig, Transport};
pub use error::{
    AuthDetail, AuthFailure, AuthSource, CertificateProblem, ConfigError, ConnectionLossCause,
    EncryptionRequiredBy, Error, ErrorBrief, FileChange, HandleLossCause, KerberosHint, LossSign,
    ProtocolError, ReclaimRefusal, ReopenFailure, Result, ServerCopyFault, SnapshotListFault,
    UnsafeNameReason,
};
pub use extended_attributes::{ExtendedAttribute, MAX_EA_NAME_LEN, MAX_EA_VALUE_LEN};
pub use failover::FailoverCounters;
pub use file::{File, FileReader, FileWriter, CHUNKS_PER_CHANNEL};
pub use file_security::{FileSecurity, SecurityParts};
pub use identity::SessionIdentity;
pub use key_log::{KeyLog, SessionKeys};
pub use lease::{LeaseCaching, LeaseWatch};
pub use listing::{ReadDir, Walk, WalkEntry, WalkError, WalkOptions};
pub use metadata::{DirEntry, FileType, FsAttributes, FsInfo, Metadata};
pub use multichannel::report::{
    ChannelInfo, ChannelState, LocalNic, MultichannelStatus, PairStatus, ServerNic,
};
pub use names::check_name;
pub use open_options::{IfExists, OpenOptions, ShareMode};
pub use password::Password;
pub use posix::{PosixMetadata, DEFAULT_DIR_MODE, DEFAULT_FILE_MODE};
pub use set_info::FileTimes;
pub use share::Share;
pub use sid_modes::{mode_from_descriptor, mode_in_dacl};
pub use smb3_proto::msg::posix::PosixFileType;
pub use smb3_proto::msg::reparse::{
    NfsReparse, ReparseData, SymlinkReparse, IO_REPARSE_TAG_NFS, IO_REPARSE_TAG_SYMLINK,
};
pub use smb3_proto::msg::security_descriptor::{
    ace_flags, control as sd_control, Ace, AceType, Acl, SecurityDescriptor,
    SecurityDescriptorError, Sid,
};
pub use smb3_proto::replay::ReplayHazard;
pub use smb3_proto::{Cipher, Command, Dialect, NtStatus, SigningAlgorithm};
pub use snapshots::Snapshot;
pub use sparse::AllocatedRange;
pub use streams::StreamInfo;
pub use symlinks::{link_target_in, LinkForm, SpecialKind, MAX_LINK_TARGET, MAX_TARGET_READ};
pub use watch::{Change, DirWatch, WatchFilter, WatchScope};
