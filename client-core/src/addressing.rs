//! What a request is addressed to — the session, a tree, an open — and how a session that was
//! re-established on a new connection points requests built before at what replaced them.
//!
//! After every channel is lost the session comes back under a new SessionId, each tree under
//! a new TreeId and each reclaimed open under a new FileId (MS-SMB2 3.2.4.4). Callers keep
//! stable client-side names instead: a [`TreeContext`] names a tree by a handle this table
//! maps to the server's current TreeId, and an open is an [`OpenState`] whose FileId is
//! swapped in place. [`Addressing::address`] stamps the current ids into a request just before
//! each send, so a request waiting for a channel across the reconnect goes out correct.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use smb3_proto::msg::file_id_offset;

use crate::channel::Request;
use crate::durable::OpenState;
use crate::error::{Error, Result};
use crate::security::SessionSecurity;

/// A tree as requests name it: a client-side handle that survives reconnects, and whether
/// the share requires encryption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TreeContext {
    pub(crate) handle: u32,
    pub(crate) encrypt: bool,
}

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

/// One connected tree.
#[derive(Clone, Debug)]
struct TreeEntry {
    share: String,
    server_id: u32,
}

/// The session's trees by handle.
#[derive(Debug)]
pub(crate) struct Trees {
    next: AtomicU32,
    entries: Mutex<HashMap<u32, TreeEntry>>,
}

impl Default for Trees {
    fn default() -> Self {
        Trees {
            next: AtomicU32::new(1),
            entries: Mutex::default(),
        }
    }
}

impl Trees {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, TreeEntry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// List a tree the server just connected as `server_id`.
    pub(crate) fn add(&self, share: &str, server_id: u32, encrypt: bool) -> TreeContext {
        let handle = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(
            handle,
            TreeEntry {
                share: share.to_string(),
                server_id,
            },
        );
        TreeContext { handle, encrypt }
    }

    /// Forget a tree nobody uses any more.
    pub(crate) fn remove(&self, handle: u32) {
        self.lock().remove(&handle);
    }

    /// The server's TreeId for `handle` now.
    pub(crate) fn server_id(&self, handle: u32) -> Option<u32> {
        self.lock().get(&handle).map(|e| e.server_id)
    }

    /// Every tree (handle, share name), for a reconnect to connect again.
    pub(crate) fn all(&self) -> Vec<(u32, String)> {
        let mut all: Vec<(u32, String)> = self
            .lock()
            .iter()
            .map(|(h, e)| (*h, e.share.clone()))
            .collect();
        all.sort();
        all
    }

    /// The tree was connected again on a re-established session.
    pub(crate) fn reconnected(&self, handle: u32, server_id: u32) {
        if let Some(e) = self.lock().get_mut(&handle) {
            e.server_id = server_id;
        }
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
            if let Some(reason) = open.lost() {
                return Err(Error::HandleLost {
                    path: Some(open.params.display_path()),
                    reason,
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
    fn tree_handles_outlive_server_ids() {
        let trees = Trees::default();
        let a = trees.add("data", 5, false);
        let b = trees.add("IPC$", 1, false);
        assert_ne!(a.handle, b.handle);
        assert_eq!(trees.server_id(a.handle), Some(5));
        trees.reconnected(a.handle, 9);
        assert_eq!(trees.server_id(a.handle), Some(9));
        assert_eq!(trees.server_id(b.handle), Some(1));
        assert_eq!(trees.all().len(), 2);
        trees.remove(a.handle);
        assert_eq!(trees.server_id(a.handle), None);
        assert_eq!(trees.all(), vec![(b.handle, "IPC$".to_string())]);
    }

    #[test]
    fn session_ids_are_replaced_together() {
        let ids = SessionIds::new(7, None);
        assert_eq!((ids.id(), ids.generation()), (7, 0));
        ids.replace(8, None);
        assert_eq!((ids.id(), ids.generation()), (8, 1));
    }
}
