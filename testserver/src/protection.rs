//! How a session's messages are protected: its sealers, and what the replies to one request
//! are signed or sealed with.

use std::sync::Arc;

use smb3_proto::crypto::{Sealer, Signer};

/// A session's sealers: `open` keyed with the client's EncryptionKey (requests), `seal` with
/// its DecryptionKey (replies).
pub(crate) struct Sealing {
    pub(crate) open: Sealer,
    pub(crate) seal: Sealer,
}

/// How the replies to one request are protected: signed with the signing key of its session
/// on the connection it came on, and sealed when it came sealed (MS-SMB2 3.3.4.1.1,
/// 3.3.4.1.4). A response sent later, apart from the request's frame, needs the same.
#[derive(Clone, Default)]
pub(crate) struct Protection {
    /// Channel.SigningKey of the request's session on its connection, when established.
    pub(crate) signer: Option<Arc<Signer>>,
    /// The session's sealers, when the request came sealed.
    pub(crate) sealing: Option<Arc<Sealing>>,
}

impl Protection {
    /// What a reply is signed with: nothing when it is sealed, the seal authenticates it.
    pub(crate) fn sign_with(&self) -> Option<Arc<Signer>> {
        self.signer.clone().filter(|_| self.sealing.is_none())
    }
}
