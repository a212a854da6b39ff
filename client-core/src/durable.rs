//! What an open file needs to survive the loss of every channel: its state behind a shared,
//! swappable FileId, and the session-wide table of durable opens that a reconnect walks.
//!
//! Reclaiming a durable v2 open (MS-SMB2 3.2.4.4, 3.2.5.5) is a CREATE of the same path with
//! the same desired access, share access and create options, carrying DH2C (the old FileId,
//! the CreateGuid and the durable flags, 2.2.13.2.12) and the lease context with the same
//! lease key (3.2.4.3.8). The reply's FileId then replaces the old one in place, so every
//! clone of the `File` keeps working. When the server refuses the reclaim, the file is opened
//! again by path and kept only if it is provably the same file ([`FileIdentity`]); the
//! reconnect itself is in `failover::reconnect`.

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

/// The server's side of an open: what requests name it by, and what reclaims it. A reclaim
/// replaces the FileId; a reopen after a refused reclaim replaces all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ServerHandle {
    pub(crate) file_id: FileId,
    /// CreateGuid sent in DH2Q: names the open in DH2C and in replays of the CREATE.
    pub(crate) create_guid: Option<[u8; 16]>,
    /// Set when the server made the open durable.
    pub(crate) durable: Option<DurableGrant>,
}

/// What tells that a file opened again by path is the file that was open before: the
/// server's on-disk id (QFid, MS-SMB2 2.2.14.2.9) and the creation time. A file deleted and
/// created again under the same name differs in both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    /// CreationTime (FILETIME); 0 when the server did not say.
    pub(crate) creation_time: u64,
    /// DiskFileId and VolumeId, when the server answered QFid.
    pub(crate) disk_id: Option<[u8; 32]>,
}

impl FileIdentity {
    /// Whether `now` is provably the same file: every fact both sides have agrees, and at
    /// least one fact was compared. With nothing to compare, the answer is no: writing the
    /// lost requests into a file that may be another one would corrupt it.
    pub(crate) fn same_file(&self, now: &FileIdentity) -> Result<(), &'static str> {
        let mut compared = false;
        if let (Some(a), Some(b)) = (self.disk_id, now.disk_id) {
            if a != b {
                return Err("its on-disk id changed");
            }
            compared = true;
        }
        if self.creation_time != 0 && now.creation_time != 0 {
            if self.creation_time != now.creation_time {
                return Err("its creation time changed");
            }
            compared = true;
        }
        if compared {
            Ok(())
        } else {
            Err("the server gave nothing to prove it is the same file")
        }
    }
}

/// One open handle's identity and the parameters that reopen it.
#[derive(Debug)]
pub(crate) struct OpenState {
    /// The server's handle; a reconnect swaps it for the reclaimed or reopened one.
    handle: Mutex<ServerHandle>,
    /// The tree the open belongs to.
    pub(crate) tree: TreeContext,
    pub(crate) params: OpenParams,
    /// The lease key the open was made with, if it asked for a lease.
    pub(crate) lease_key: Option<[u8; 16]>,
    /// The file as it was when first opened, to recognise it when opened again.
    pub(crate) identity: FileIdentity,
    /// Set when a reconnect could not reclaim the open: why.
    lost: Mutex<Option<String>>,
}

impl OpenState {
    pub(crate) fn new(
        handle: ServerHandle,
        tree: TreeContext,
        params: OpenParams,
        lease_key: Option<[u8; 16]>,
        identity: FileIdentity,
    ) -> OpenState {
        OpenState {
            handle: Mutex::new(handle),
            tree,
            params,
            lease_key,
            identity,
            lost: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ServerHandle> {
        self.handle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server's handle now.
    pub(crate) fn handle(&self) -> ServerHandle {
        *self.lock()
    }

    /// The FileId to put in the next request.
    pub(crate) fn file_id(&self) -> FileId {
        self.lock().file_id
    }

    /// Replace the FileId after the open was reclaimed on a new connection.
    pub(crate) fn replace_file_id(&self, new: FileId) -> FileId {
        std::mem::replace(&mut self.lock().file_id, new)
    }

    /// Replace the whole handle after the file was opened again by path.
    pub(crate) fn replace_handle(&self, new: ServerHandle) {
        *self.lock() = new;
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
            .filter(|o| o.handle().durable.is_some())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(persistent: u64) -> Arc<OpenState> {
        Arc::new(OpenState::new(
            ServerHandle {
                file_id: FileId {
                    persistent,
                    volatile: 1,
                },
                create_guid: Some([6; 16]),
                durable: Some(DurableGrant {
                    timeout_ms: 60_000,
                    flags: 0,
                }),
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
            Some([5; 16]),
            FileIdentity {
                creation_time: 1,
                disk_id: None,
            },
        ))
    }

    #[test]
    fn a_file_is_the_same_only_when_what_both_sides_know_agrees() {
        let id = |creation_time, disk: Option<u8>| FileIdentity {
            creation_time,
            disk_id: disk.map(|b| [b; 32]),
        };
        assert_eq!(id(5, Some(1)).same_file(&id(5, Some(1))), Ok(()));
        // One fact is enough when the other is missing on either side.
        assert_eq!(id(5, None).same_file(&id(5, Some(1))), Ok(()));
        assert_eq!(id(0, Some(1)).same_file(&id(9, Some(1))), Ok(()));
        // Any disagreement, or nothing to compare, is not the same file.
        assert!(id(5, Some(1)).same_file(&id(5, Some(2))).is_err());
        assert!(id(5, Some(1)).same_file(&id(6, Some(1))).is_err());
        assert!(id(5, None).same_file(&id(0, Some(1))).is_err());
        assert!(id(0, None).same_file(&id(0, None)).is_err());
    }

    #[test]
    fn a_reopen_replaces_the_whole_handle() {
        let a = open(10);
        let new = ServerHandle {
            file_id: FileId {
                persistent: 30,
                volatile: 3,
            },
            create_guid: Some([9; 16]),
            durable: None,
        };
        a.replace_handle(new);
        assert_eq!(a.handle(), new);
        assert_eq!(a.file_id().persistent, 30);
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
