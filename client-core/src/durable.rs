//! What an open file needs to survive the loss of every channel: its state behind a shared,
//! swappable FileId, and the session-wide table of durable opens that a reconnect walks.
//!
//! Reclaiming a durable v2 open (MS-SMB2 3.2.4.4, 3.2.5.5) is a CREATE of the same path with
//! the same desired access, share access and create options, carrying DH2C (the old FileId,
//! the CreateGuid and the durable flags, 2.2.13.2.12) and the lease context with the same
//! lease key (3.2.4.3.8). The reply's FileId then replaces the old one in place, so every
//! clone of the `File` keeps working. The reconnect itself is in `failover::reconnect`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use smb3_proto::msg::FileId;

use crate::addressing::TreeContext;
use crate::client::Client;

/// What the CREATE asked for, kept to ask for the same again on reclaim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpenParams {
    /// The path as sent (share-relative, backslashes).
    pub(crate) wire_path: String,
    pub(crate) desired_access: u32,
    pub(crate) share_access: u32,
    pub(crate) create_options: u32,
    pub(crate) file_attributes: u32,
}

impl OpenParams {
    /// The path for messages, with forward slashes.
    pub(crate) fn display_path(&self) -> String {
        self.wire_path.replace('\\', "/")
    }
}

/// The durable handle the server granted (DH2Q response, MS-SMB2 2.2.14.2.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DurableGrant {
    /// How long the server keeps the open after a disconnect, in milliseconds.
    pub(crate) timeout_ms: u32,
    /// Flags (SMB2_DHANDLE_FLAG_PERSISTENT).
    pub(crate) flags: u32,
}

/// One open handle's identity and the parameters that reopen it.
#[derive(Debug)]
pub(crate) struct OpenState {
    /// The server's FileId; a reconnect swaps it for the reclaimed one.
    file_id: Mutex<FileId>,
    /// The tree the open belongs to.
    pub(crate) tree: TreeContext,
    pub(crate) params: OpenParams,
    /// CreateGuid sent in DH2Q: names the open in DH2C and in replays of the CREATE.
    pub(crate) create_guid: Option<[u8; 16]>,
    /// The lease key the open was made with, if it asked for a lease.
    pub(crate) lease_key: Option<[u8; 16]>,
    /// Set when the server made the open durable.
    pub(crate) durable: Option<DurableGrant>,
    /// Set when a reconnect could not reclaim the open: why.
    lost: Mutex<Option<String>>,
}

impl OpenState {
    pub(crate) fn new(
        file_id: FileId,
        tree: TreeContext,
        params: OpenParams,
        create_guid: Option<[u8; 16]>,
        lease_key: Option<[u8; 16]>,
        durable: Option<DurableGrant>,
    ) -> OpenState {
        OpenState {
            file_id: Mutex::new(file_id),
            tree,
            params,
            create_guid,
            lease_key,
            durable,
            lost: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, FileId> {
        self.file_id.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The FileId to put in the next request.
    pub(crate) fn file_id(&self) -> FileId {
        *self.lock()
    }

    /// Replace the FileId after the open was reclaimed on a new connection.
    pub(crate) fn replace_file_id(&self, new: FileId) -> FileId {
        std::mem::replace(&mut *self.lock(), new)
    }

    /// The open could not be reclaimed: every later request on it fails with `reason`.
    pub(crate) fn mark_lost(&self, reason: String) {
        *self.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
    }

    /// Why the open was lost, if it was.
    pub(crate) fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The session's open files (every open made by `Share::open`), held weakly: the table never
/// keeps a file open. A reconnect reclaims the durable ones and marks the others lost.
#[derive(Debug, Default)]
pub(crate) struct DurableOpens {
    next: AtomicU64,
    opens: Mutex<HashMap<u64, Weak<OpenState>>>,
}

impl DurableOpens {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Weak<OpenState>>> {
        self.opens.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Add an open; it stays listed until the returned registration is dropped (when the
    /// handle is closed).
    pub(crate) fn register(self: &Arc<Self>, open: &Arc<OpenState>) -> DurableRegistration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, Arc::downgrade(open));
        DurableRegistration {
            table: Arc::clone(self),
            id,
        }
    }

    /// Every open still alive, for a reconnect to reclaim.
    pub(crate) fn live(&self) -> Vec<Arc<OpenState>> {
        self.lock().values().filter_map(Weak::upgrade).collect()
    }

    /// Number of registered opens.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// An open's place in [`DurableOpens`]; dropping it removes the entry.
#[derive(Debug)]
pub(crate) struct DurableRegistration {
    table: Arc<DurableOpens>,
    id: u64,
}

impl Drop for DurableRegistration {
    fn drop(&mut self) {
        self.table.lock().remove(&self.id);
    }
}

impl Client {
    /// Number of open files the server made durable in this session (handles that a later
    /// reconnect could reclaim). Zero once they are all closed.
    pub fn durable_opens(&self) -> usize {
        self.inner
            .durable
            .live()
            .iter()
            .filter(|o| o.durable.is_some())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(persistent: u64) -> Arc<OpenState> {
        Arc::new(OpenState::new(
            FileId {
                persistent,
                volatile: 1,
            },
            TreeContext {
                handle: 1,
                encrypt: false,
            },
            OpenParams {
                wire_path: "a\\b".into(),
                desired_access: 3,
                share_access: 7,
                create_options: 0x40,
                file_attributes: 0x80,
            },
            Some([6; 16]),
            Some([5; 16]),
            Some(DurableGrant {
                timeout_ms: 60_000,
                flags: 0,
            }),
        ))
    }

    #[test]
    fn file_id_is_swapped_in_place_for_every_holder() {
        let a = open(10);
        let clone = Arc::clone(&a);
        let old = a.replace_file_id(FileId {
            persistent: 20,
            volatile: 2,
        });
        assert_eq!(old.persistent, 10);
        assert_eq!(
            clone.file_id(),
            FileId {
                persistent: 20,
                volatile: 2
            }
        );
    }

    #[test]
    fn registry_lists_live_opens_and_forgets_closed_ones() {
        let table = Arc::new(DurableOpens::default());
        let a = open(1);
        let b = open(2);
        let ra = table.register(&a);
        let rb = table.register(&b);
        assert_eq!(table.len(), 2);
        let mut live: Vec<u64> = table
            .live()
            .iter()
            .map(|o| o.file_id().persistent)
            .collect();
        live.sort();
        assert_eq!(live, vec![1, 2]);

        // Weak: an open dropped without deregistering is not kept alive or listed.
        drop(b);
        assert_eq!(table.live().len(), 1);
        drop(rb);
        drop(ra);
        assert_eq!(table.len(), 0);
        assert!(table.live().is_empty());
        assert_eq!(Arc::strong_count(&a), 1);
    }
}
