//! What a request is addressed to — the session, a tree, an open — and how a session that was
//! re-established on a new connection points requests built before at what replaced them.
//!
//! After every channel is lost the session comes back under a new SessionId, each tree under
//! a new TreeId and each reclaimed open under a new FileId (MS-SMB2 3.2.4.4). Callers keep
//! stable client-side names instead: a [`TreeContext`] names a tree by a handle this table
//! maps to the server's current TreeId, and an open is an [`OpenState`] whose FileId is
//! swapped in place. [`Addressing::address`] stamps the current ids into a request just before
//! each send, so a request waiting for a channel across the reconnect goes out correct.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use smb3_proto::msg::file_id_offset;

use crate::channel::Request;
use crate::error::{Error, Result};
use crate::security::SessionSecurity;

mod open;
mod tree;

pub(crate) use open::{DurableGrant, FileIdentity, OpenParams, OpenState, ServerHandle};
pub(crate) use tree::{TreeContext, Trees};

/// What one request is about, beyond its session.
#[derive(Clone, Debug, Default)]
pub(crate) struct Target {
    pub(crate) tree: Option<TreeContext>,
    /// The open whose FileId the request carries, when it is a durable-capable open that a
    /// reconnect may give a new FileId.
    pub(crate) open: Option<Arc<OpenState>>,
}

impl Target {
    pub(crate) fn tree(tree: Option<TreeContext>) -> Target {
        Target { tree, open: None }
    }
}

/// The session's identity on the server: its SessionId and keys, both replaced when the
/// session is re-established after every channel was lost.
pub(crate) struct SessionIds {
    id: AtomicU64,
    security: RwLock<Option<Arc<SessionSecurity>>>,
    /// How many times the session was re-established.
    generation: AtomicU32,
}

impl std::fmt::Debug for SessionIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionIds")
            .field("id", &format_args!("{:#x}", self.id()))
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl SessionIds {
    pub(crate) fn new(id: u64, security: Option<Arc<SessionSecurity>>) -> SessionIds {
        SessionIds {
            id: AtomicU64::new(id),
            security: RwLock::new(security),
            generation: AtomicU32::new(0),
        }
    }

    /// The SessionId requests carry now.
    pub(crate) fn id(&self) -> u64 {
        self.id.load(Ordering::Acquire)
    }

    /// The session's keys now (`None` for a guest session).
    pub(crate) fn security(&self) -> Option<Arc<SessionSecurity>> {
        self.security
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Number of times the session was re-established on a new connection.
    pub(crate) fn generation(&self) -> u32 {
        self.generation.load(Ordering::Acquire)
    }

    /// The session now lives under a new SessionId and keys.
    pub(crate) fn replace(&self, id: u64, security: Option<Arc<SessionSecurity>>) {
        *self.security.write().unwrap_or_else(|e| e.into_inner()) = security;
        self.id.store(id, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// The session's ids and its trees.
#[derive(Debug)]
pub(crate) struct Addressing {
    pub(crate) session: SessionIds,
    pub(crate) trees: Trees,
}

impl Addressing {
    pub(crate) fn new(session_id: u64, security: Option<Arc<SessionSecurity>>) -> Addressing {
        Addressing {
            session: SessionIds::new(session_id, security),
            trees: Trees::default(),
        }
    }

    /// Stamp the current SessionId, TreeId and FileId into `req`. Fails when the request's
    /// open was lost with the connection and could not be reclaimed.
    pub(crate) fn address(&self, req: &mut Request, target: &Target) -> Result<()> {
        req.session_id = self.session.id();
        if let Some(tree) = target.tree {
            // A tree is listed while any share or open uses it; 0 would only reach the
            // server (and be refused) if that rule were broken.
            req.tree_id = self.trees.server_id(tree.handle).unwrap_or(0);
        }
        if let Some(open) = &target.open {
            if let Some(cause) = open.lost() {
                return Err(Error::HandleLost {
                    path: Some(open.params.display_path()),
                    cause,
                    unwritten: None,
                });
            }
            if let Some(offset) = file_id_offset(req.command()) {
                req.set_file_id(offset, open.file_id());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_replaced_together() {
        let ids = SessionIds::new(7, None);
        assert_eq!((ids.id(), ids.generation()), (7, 0));
        ids.replace(8, None);
        assert_eq!((ids.id(), ids.generation()), (8, 1));
    }
}
