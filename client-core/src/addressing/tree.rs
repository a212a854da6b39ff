//! The session's trees: a client-side handle per connected tree that survives reconnects,
//! mapped to the server's TreeId of now.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A tree as requests name it: a client-side handle that survives reconnects, and whether
/// the share requires encryption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TreeContext {
    pub(crate) handle: u32,
    pub(crate) encrypt: bool,
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
}
