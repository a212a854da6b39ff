//! Sans-IO core of the SMB3 client: the SMB2/SMB3 wire format (one module per command) and the
//! cryptography it needs. Nothing here touches sockets, clocks or an async runtime; the
//! `smb3-client` crate drives it.

#![warn(missing_docs, unreachable_pub)]

pub mod codec;
pub mod crypto;
pub mod dialect;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod header;
pub mod msg;
pub mod nt_status;
pub mod replay;

pub use codec::DecodeError;
pub use dialect::{Cipher, Dialect, SigningAlgorithm};
pub use header::{Command, Header, HeaderFlags};
pub use nt_status::NtStatus;
