//! An async SMB 2.1/3.x client for tokio.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod channel;
mod error;

pub use error::{AuthFailure, ConfigError, Error, ProtocolError, Result};
