//! What NEGOTIATE settled for one connection (MS-SMB2 3.2.5.2): the dialect, the server's
//! limits and capabilities, and the algorithms both sides will use.

use bytes::Bytes;
use smb3_proto::crypto::preauth::PreauthHash;
use smb3_proto::msg::negotiate::{Capabilities, SecurityMode};
use smb3_proto::{Cipher, Dialect, SigningAlgorithm};

/// What NEGOTIATE settled for one connection.
#[derive(Clone, Debug)]
pub(crate) struct Negotiated {
    pub(crate) dialect: Dialect,
    pub(crate) server_guid: [u8; 16],
    pub(crate) server_capabilities: Capabilities,
    pub(crate) server_security_mode: SecurityMode,
    pub(crate) max_read: u32,
    pub(crate) max_write: u32,
    pub(crate) max_transact: u32,
    pub(crate) cipher: Option<Cipher>,
    pub(crate) signing_algorithm: SigningAlgorithm,
    /// The connection's preauth integrity hash after NEGOTIATE (3.1.1 only).
    pub(crate) preauth: Option<PreauthHash>,
    /// The server's initial SPNEGO token.
    pub(crate) gss_token: Bytes,
    /// The server offers the SMB3 POSIX extensions and we asked for them.
    pub(crate) posix_extensions: bool,
}
