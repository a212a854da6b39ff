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

#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![forbid(unsafe_code)]

mod addressing;
mod auth;
mod channel;
mod client;
mod config;
mod durable;
mod error;
mod failover;
mod file;
mod lease;
mod multichannel;
mod security;
mod session;
mod share;
mod types;

pub use auth::UserCredentials;
pub use client::Client;
pub use config::{ClientConfig, Dispatch, NicOverride};
pub use error::{AuthFailure, ConfigError, Error, ProtocolError, Result};
pub use failover::FailoverCounters;
pub use file::{File, FileReader, FileWriter};
pub use lease::LeaseCaching;
pub use multichannel::status::{
    ChannelInfo, ChannelState, LocalNic, MultichannelStatus, PairStatus, ServerNic,
};
pub use share::Share;
pub use smb3_proto::{Cipher, Dialect, NtStatus, SigningAlgorithm};
pub use types::{DirEntry, FileType, FsInfo, Metadata, OpenOptions};
