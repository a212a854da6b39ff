//! What one connection knows: the dialect and algorithms NEGOTIATE settled, the preauth
//! hash, session setups in progress, and the signing key of each session on it.

use std::collections::HashMap;
use std::sync::Arc;

use smb3_proto::crypto::preauth::PreauthHash;
use smb3_proto::crypto::Signer;

use tokio::sync::mpsc;

use crate::reply::Outcome;
use crate::Shared;

/// What the connection knows after NEGOTIATE.
#[derive(Clone)]
pub(crate) struct Negotiated {
    pub(crate) dialect: smb3_proto::Dialect,
    pub(crate) signing: smb3_proto::SigningAlgorithm,
    pub(crate) cipher: Option<smb3_proto::Cipher>,
    pub(crate) client_guid: [u8; 16],
    pub(crate) client_security_mode: u16,
    pub(crate) client_capabilities: u32,
    pub(crate) client_dialects: Vec<u16>,
    pub(crate) server_security_mode: u16,
    pub(crate) server_capabilities: u32,
}

/// A session setup in progress on this connection.
pub(crate) struct PendingSetup {
    pub(crate) acceptor: crate::auth::Acceptor,
    pub(crate) preauth: Option<PreauthHash>,
    /// A session established on this connection authenticating again (MS-SMB2 3.3.5.5.3):
    /// its keys stay.
    pub(crate) reauth: bool,
}

pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
    /// This connection's id in `State::outboxes` and in the leases granted on it.
    pub(crate) id: u64,
    pub(crate) negotiated: Option<Negotiated>,
    /// Connection.PreauthIntegrityHashValue (3.1.1).
    pub(crate) preauth: PreauthHash,
    pub(crate) pending: HashMap<u64, PendingSetup>,
    /// Channel.SigningKey of each session established on this connection.
    pub(crate) signers: HashMap<u64, Arc<Signer>>,
}

impl Conn {
    /// A new connection, and the queue of frames to send on it unasked (lease breaks).
    pub(crate) fn new(shared: Arc<Shared>) -> (Conn, mpsc::UnboundedReceiver<Outcome>) {
        let (id, outbox) = shared.lock().new_connection();
        let conn = Conn {
            shared,
            id,
            negotiated: None,
            preauth: PreauthHash::new(),
            pending: HashMap::new(),
            signers: HashMap::new(),
        };
        (conn, outbox)
    }

    /// The connection is gone: the requests waiting on it are dropped unanswered, and
    /// sessions that lived only here end, with their opens.
    pub(crate) fn closed(&mut self) {
        let mut state = self.shared.lock();
        state.outboxes.remove(&self.id);
        state.watches.connection_lost(self.id);
        for session in self.signers.keys() {
            let last = match state.sessions.get_mut(session) {
                Some(s) => {
                    s.connections = s.connections.saturating_sub(1);
                    s.connections == 0
                }
                None => false,
            };
            if last {
                state.end_session(*session, true);
            }
        }
    }

    pub(crate) fn signing_required(&self) -> bool {
        self.shared.config.require_signing
            || self.negotiated.as_ref().is_some_and(|n| {
                n.client_security_mode & 0x0002 != 0 || n.dialect == smb3_proto::Dialect::Smb311
            })
    }
}
