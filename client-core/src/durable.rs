//! What an open file needs to survive the loss of every channel: its state behind a shared,
//! swappable FileId, and the session-wide table of durable opens that a reconnect walks.
//!
//! Reclaiming a durable v2 open (MS-SMB2 3.2.4.4, 3.2.5.5) is a CREATE of the same path with
//! the same desired access, share access and create options, carrying DH2C (the old FileId,
//! the CreateGuid and the durable flags, 2.2.13.2.12) and the lease context with the same
//! lease key (3.2.4.3.8). The reply's FileId then replaces the old one in place, so every
//! clone of the `File` keeps working. When the server refuses the reclaim, the file is opened
//! again by path and kept only if it is provably the same file ([`FileIdentity`]); the
//! reconnect itself is in `background::reconnect`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rand::RngCore;
use smb3_proto::msg::create::{CreateContextRequest, CreateRequest};

use crate::addressing::OpenState;

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

/// Add DH2Q (MS-SMB2 2.2.13.2.11) with a fresh CreateGuid, which is returned. Timeout 0
/// lets the server choose (Samba: 60 s).
pub(crate) fn request_durable(req: &mut CreateRequest) -> [u8; 16] {
    let mut create_guid = [0u8; 16];
    rand::rng().fill_bytes(&mut create_guid);
    req.contexts.push(CreateContextRequest::DurableHandleV2 {
        timeout_ms: 0,
        flags: 0,
        create_guid,
    });
    create_guid
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addressing::{DurableGrant, FileIdentity, OpenParams, ServerHandle, TreeContext};
    use smb3_proto::msg::FileId;

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
                timewarp: None,
                file_id_name: None,
                posix: false,
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
