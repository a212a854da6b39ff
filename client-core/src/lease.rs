//! Leases: the session's lease-key table and the queue break notifications arrive on; the
//! task that acknowledges them is `background::lease_breaks`.
//!
//! Every file opened through [`Share::open`](crate::Share::open) on SMB 3.x asks for a lease
//! (SMB2_CREATE_REQUEST_LEASE_V2, MS-SMB2 2.2.13.2.10) next to its durable-handle request:
//! Samba only makes an open durable when it holds a batch oplock or a lease with Handle
//! caching (MS-SMB2 3.3.5.9.10). We cache nothing on the client, so holding a lease costs
//! nothing except the duty to acknowledge its breaks at once, which the break handler
//! (`background::lease_breaks`) does for every channel of the session.
//!
//! Lease keys: MS-SMB2 3.2.4.3.8 has all opens of one file by one client share a lease key,
//! so our own opens of a file never break each other. [`LeaseTable`] maps (tree, case-folded
//! path) to (key, number of our opens); an entry goes away with the last open of its file,
//! so the table stays as small as the set of files open right now.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use rand::RngCore;
use smb3_proto::msg::create::LeaseState;
use tokio::sync::{mpsc, watch};

use crate::addressing::TreeContext;
use crate::channel::Unsolicited;
use crate::tasks::{self, TaskKind};

/// The caching a lease grants, as the server last told us (granted at open, lowered by
/// breaks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LeaseCaching {
    /// Read caching (R).
    pub read: bool,
    /// Handle caching (H): what makes Samba grant a durable handle.
    pub handle: bool,
    /// Write caching (W).
    pub write: bool,
}

impl LeaseCaching {
    pub(crate) fn from_state(state: LeaseState) -> LeaseCaching {
        LeaseCaching {
            read: state.has(LeaseState::READ_CACHING),
            handle: state.has(LeaseState::HANDLE_CACHING),
            write: state.has(LeaseState::WRITE_CACHING),
        }
    }
}

impl std::fmt::Display for LeaseCaching {
    /// The usual short form: `RWH`, `RH`, `R`, or `none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !(self.read || self.handle || self.write) {
            return f.write_str("none");
        }
        for (on, letter) in [(self.read, "R"), (self.write, "W"), (self.handle, "H")] {
            if on {
                f.write_str(letter)?;
            }
        }
        Ok(())
    }
}

/// A lease key: 16 bytes the client chooses (MS-SMB2 2.2.13.2.8).
pub(crate) type LeaseKey = [u8; 16];

/// Which file a lease is for, as the table tells files apart.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FileKey {
    /// The tree's handle (see `addressing`).
    tree: u32,
    /// The wire path, case-folded (see [`fold_case`]).
    folded_path: String,
}

/// One leased file.
#[derive(Debug)]
struct LeaseEntry {
    key: LeaseKey,
    /// Our opens of the file that use this key.
    opens: usize,
    /// The tree the opens are on: a LEASE_BREAK_ACK must name one (Samba refuses OPLOCK_BREAK
    /// without a valid TreeId) and be encrypted if that tree is.
    tree: TreeContext,
    /// The state the server last reported; `None` until the first CREATE reply.
    state: Option<LeaseState>,
    /// The v2 lease epoch that went with `state` (MS-SMB2 2.2.14.2.11).
    epoch: Option<u16>,
    /// Tells [`LeaseWatch`]es each new state; dropped with the entry, which ends them.
    changes: watch::Sender<Option<LeaseState>>,
}

#[derive(Debug, Default)]
struct Tables {
    by_file: HashMap<FileKey, LeaseEntry>,
    by_key: HashMap<LeaseKey, FileKey>,
    /// The tree of the latest open, for acknowledging a break whose key we do not know.
    last_tree: Option<TreeContext>,
}

/// The session's lease keys, one per open file.
#[derive(Debug, Default)]
pub(crate) struct LeaseTable {
    tables: Mutex<Tables>,
}

impl LeaseTable {
    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`LeaseTable::acquire_named`] on a tree that compares names case-insensitively.
    #[cfg(test)]
    pub(crate) fn acquire(self: &Arc<Self>, tree: TreeContext, wire_path: &str) -> LeaseRef {
        self.acquire_named(tree, wire_path, Names::CaseInsensitive)
    }

    /// Take a reference on the lease key of `wire_path` on `tree`, creating the entry (with a
    /// fresh random key) if this is our first open of the file. Call it before sending the
    /// CREATE, so a break that races with the reply already finds the key. Names compare as
    /// `names` says: on a POSIX share `foo` and `FOO` are two files and must not share a key (the server refuses one key
    /// for two files with INVALID_PARAMETER, MS-SMB2 3.3.5.9.8).
    pub(crate) fn acquire_named(
        self: &Arc<Self>,
        tree: TreeContext,
        wire_path: &str,
        names: Names,
    ) -> LeaseRef {
        let file = FileKey {
            tree: tree.handle,
            folded_path: names.key_of(wire_path),
        };
        let mut t = self.lock();
        t.last_tree = Some(tree);
        let key = match t.by_file.get_mut(&file) {
            Some(entry) => {
                entry.opens += 1;
                entry.key
            }
            None => {
                let key = loop {
                    let mut key = [0u8; 16];
                    rand::rng().fill_bytes(&mut key);
                    if !t.by_key.contains_key(&key) {
                        break key;
                    }
                };
                t.by_key.insert(key, file.clone());
                t.by_file.insert(
                    file.clone(),
                    LeaseEntry {
                        key,
                        opens: 1,
                        tree,
                        state: None,
                        epoch: None,
                        changes: watch::channel(None).0,
                    },
                );
                key
            }
        };
        LeaseRef {
            table: Arc::clone(self),
            key,
        }
    }

    /// One more hold on the file `key` is the lease key of, without an open of ours behind
    /// it; `None` when no file of ours has this key.
    pub(crate) fn hold(self: &Arc<Self>, key: &LeaseKey) -> Option<LeaseRef> {
        let mut t = self.lock();
        let file = t.by_key.get(key)?.clone();
        t.by_file.get_mut(&file)?.opens += 1;
        Some(LeaseRef {
            table: Arc::clone(self),
            key: *key,
        })
    }

    /// Stop offering `key` for its file: the next open of the path gets a fresh key. The
    /// holds still on `key` keep it and let go of nothing else when dropped.
    pub(crate) fn retire(&self, key: &LeaseKey) {
        let mut t = self.lock();
        let Some(file) = t.by_key.remove(key) else {
            return;
        };
        if t.by_file.get(&file).is_some_and(|entry| entry.key == *key) {
            t.by_file.remove(&file);
        }
    }

    /// `from` (a file or a directory) was renamed to `to` on `tree`: the keys of the files
    /// at or below `from` follow them to their new names, so that a new file created at an
    /// old name gets a fresh key rather than the key of the file that moved away. A name
    /// already taken under `to` keeps its own key and the moved one is retired.
    #[cfg(test)]
    pub(crate) fn renamed(&self, tree: TreeContext, from: &str, to: &str) {
        self.renamed_named(tree, from, to, Names::CaseInsensitive)
    }

    /// `path` on `tree` was deleted: a file made at that name from now on is another file and
    /// gets a key of its own, while opens of the deleted file (still open where the server
    /// deletes names at once, as a POSIX share does) keep theirs.
    pub(crate) fn deleted(&self, tree: TreeContext, path: &str, names: Names) {
        let file = FileKey {
            tree: tree.handle,
            folded_path: names.key_of(path),
        };
        let mut t = self.lock();
        if let Some(entry) = t.by_file.remove(&file) {
            t.by_key.remove(&entry.key);
        }
    }

    /// [`LeaseTable::renamed`] on a tree whose names compare as `names` say.
    pub(crate) fn renamed_named(&self, tree: TreeContext, from: &str, to: &str, names: Names) {
        let (from, to) = (names.key_of(from), names.key_of(to));
        let mut t = self.lock();
        let moved: Vec<FileKey> = t
            .by_file
            .keys()
            .filter(|f| {
                f.tree == tree.handle
                    && (f.folded_path == from
                        || f.folded_path
                            .strip_prefix(from.as_str())
                            .is_some_and(|rest| rest.starts_with('\\')))
            })
            .cloned()
            .collect();
        for old in moved {
            let Some(entry) = t.by_file.remove(&old) else {
                continue;
            };
            let new = FileKey {
                tree: old.tree,
                folded_path: format!("{to}{}", &old.folded_path[from.len()..]),
            };
            if t.by_file.contains_key(&new) {
                t.by_key.remove(&entry.key);
            } else {
                t.by_key.insert(entry.key, new.clone());
                t.by_file.insert(new, entry);
            }
        }
    }

    /// Drop one hold on `key`, wherever its file now is (see [`LeaseTable::renamed`]).
    fn release(&self, key: &LeaseKey) {
        let mut t = self.lock();
        let Some(file) = t.by_key.get(key).cloned() else {
            return; // a retired key
        };
        let Some(entry) = t.by_file.get_mut(&file).filter(|entry| entry.key == *key) else {
            return;
        };
        entry.opens = entry.opens.saturating_sub(1);
        if entry.opens == 0 {
            t.by_file.remove(&file);
            t.by_key.remove(key);
        }
    }

    /// Record a lease state the server reported for `key`. A v2 `epoch` older than the one
    /// already recorded means the report is stale (a reply overtaken by a break) and is
    /// ignored; `None` (v1, or a break acknowledgment's reply) always applies.
    pub(crate) fn record_state(&self, key: &LeaseKey, state: LeaseState, epoch: Option<u16>) {
        let mut t = self.lock();
        let Some(file) = t.by_key.get(key).cloned() else {
            return;
        };
        let Some(entry) = t.by_file.get_mut(&file) else {
            return;
        };
        if let (Some(new), Some(old)) = (epoch, entry.epoch) {
            // Epochs wrap (MS-SMB2 3.2.5.7.5 compares them modulo 2^16).
            if (new.wrapping_sub(old) as i16) < 0 {
                return;
            }
        }
        entry.state = Some(state);
        if epoch.is_some() {
            entry.epoch = epoch;
        }
        entry.changes.send_replace(Some(state));
    }

    /// Record a break of `key`'s lease to `new_state`, and return the state to acknowledge.
    /// Break notifications are unsigned by rule (MS-SMB2 3.2.5.1.3: MessageId 0xFFFF...), so
    /// a man in the middle can write one: a break may only take caching away, never grant it
    /// (MS-SMB2 3.3.4.7 breaks to a subset of the state held). What is kept is what both the
    /// recorded state and the notification allow; a key with no lease recorded keeps none.
    pub(crate) fn record_break(
        &self,
        key: &LeaseKey,
        new_state: LeaseState,
        epoch: Option<u16>,
    ) -> LeaseState {
        let held = {
            let t = self.lock();
            t.by_key
                .get(key)
                .and_then(|file| t.by_file.get(file))
                .and_then(|entry| entry.state)
        };
        let kept = LeaseState(held.map_or(LeaseState::NONE, |h| h.0) & new_state.0);
        if held.is_some() {
            self.record_state(key, kept, epoch);
        }
        kept
    }

    fn watch(&self, key: &LeaseKey) -> Option<LeaseWatch> {
        let t = self.lock();
        let file = t.by_key.get(key)?;
        t.by_file.get(file).map(|e| LeaseWatch {
            changes: e.changes.subscribe(),
        })
    }

    fn state(&self, key: &LeaseKey) -> Option<LeaseState> {
        let t = self.lock();
        t.by_file.get(t.by_key.get(key)?).and_then(|e| e.state)
    }

    /// The tree to acknowledge a break of `key` on: the key's own, or for a key we do not
    /// know, the tree of our latest open.
    pub(crate) fn tree_for(&self, key: &LeaseKey) -> Option<TreeContext> {
        let t = self.lock();
        t.by_key
            .get(key)
            .and_then(|f| t.by_file.get(f))
            .map(|e| e.tree)
            .or(t.last_tree)
    }

    pub(crate) fn is_known(&self, key: &LeaseKey) -> bool {
        self.lock().by_key.contains_key(key)
    }

    pub(crate) fn last_tree(&self) -> Option<TreeContext> {
        self.lock().last_tree
    }

    /// Number of files with a lease key in use.
    pub(crate) fn len(&self) -> usize {
        self.lock().by_file.len()
    }
}

/// One open's hold on its file's lease key. Dropping it releases the hold; the entry goes
/// when the last hold on it does.
#[derive(Debug)]
pub(crate) struct LeaseRef {
    table: Arc<LeaseTable>,
    key: LeaseKey,
}

impl LeaseRef {
    /// The lease key to send in the CREATE.
    pub(crate) fn key(&self) -> LeaseKey {
        self.key
    }

    /// The lease state the server last reported for the file.
    pub(crate) fn state(&self) -> Option<LeaseState> {
        self.table.state(&self.key)
    }

    /// Record the lease the CREATE reply granted.
    pub(crate) fn record_grant(&self, state: LeaseState, epoch: Option<u16>) {
        self.table.record_state(&self.key, state, epoch);
    }

    /// Follow the file's lease from now on.
    pub(crate) fn watch(&self) -> Option<LeaseWatch> {
        self.table.watch(&self.key)
    }
}

/// Follows one file's lease as the server changes it: the grant of an open, a break when
/// another client opens or writes the file, a reclaim after a reconnect. A cache of the file's
/// data kept beside an open (a FUSE mount's page cache) is valid only while the lease grants
/// Read caching; this says when that stops. Made by [`File::lease_changes`](crate::File::lease_changes).
#[derive(Debug)]
pub struct LeaseWatch {
    changes: watch::Receiver<Option<LeaseState>>,
}

impl LeaseWatch {
    /// The caching the lease grants now.
    pub fn current(&self) -> LeaseCaching {
        (*self.changes.borrow())
            .map(LeaseCaching::from_state)
            .unwrap_or_default()
    }

    /// Wait until the server changes the lease, and return what it grants then. `None` once
    /// this session's last open of the file is closed: the lease is gone, and with it any
    /// promise about the file.
    pub async fn changed(&mut self) -> Option<LeaseCaching> {
        self.changes.changed().await.ok()?;
        Some(self.current())
    }
}

impl Drop for LeaseRef {
    fn drop(&mut self) {
        self.table.release(&self.key);
    }
}

/// How a tree compares names: case-insensitively (Windows, Samba for Windows clients) or
/// exactly (a share with the SMB3 POSIX extensions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Names {
    /// `foo` and `FOO` name one file.
    CaseInsensitive,
    /// `foo` and `FOO` are two files.
    CaseSensitive,
}

impl Names {
    fn key_of(self, path: &str) -> String {
        match self {
            Names::CaseInsensitive => fold_case(path),
            Names::CaseSensitive => path.to_string(),
        }
    }
}

/// Case-fold a path the way the table compares names: Windows and Samba (for Windows clients)
/// treat names case-insensitively with a one-to-one upcase table, so each character maps to
/// its single-character uppercase form; characters whose uppercase is longer (`ß` → `SS`)
/// stay as they are, as they do in the NTFS upcase table.
pub(crate) fn fold_case(path: &str) -> String {
    path.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) => u,
                _ => c,
            }
        })
        .collect()
}

/// Where every channel delivers its unsolicited messages (break notifications).
pub(crate) type BreakSink = mpsc::UnboundedSender<Bytes>;

/// The receiving end of [`BreakSink`], read by the break handler.
pub(crate) type BreakQueue = mpsc::UnboundedReceiver<Bytes>;

/// The session's break queue. Create it before the first channel, so nothing that channel
/// receives is lost before the session exists.
pub(crate) fn break_queue() -> (BreakSink, BreakQueue) {
    mpsc::unbounded_channel()
}

/// Pass one channel's unsolicited messages on to the session's break queue, until the
/// channel closes.
pub(crate) fn forward_unsolicited(mut from: Unsolicited, to: BreakSink) {
    tasks::spawn(TaskKind::BreakForwarder, async move {
        while let Some(msg) = from.recv().await {
            if to.send(msg).is_err() {
                break;
            }
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    pub(crate) const RWH: u32 =
        LeaseState::READ_CACHING | LeaseState::WRITE_CACHING | LeaseState::HANDLE_CACHING;
    pub(crate) const RH: u32 = LeaseState::READ_CACHING | LeaseState::HANDLE_CACHING;

    /// A tree context whose id says whether it encrypts (even ids do).
    pub(crate) fn tree(id: u32) -> TreeContext {
        TreeContext {
            handle: id,
            encrypt: id % 2 == 0,
        }
    }

    #[test]
    fn a_renamed_file_keeps_its_key_and_its_old_name_gets_a_fresh_one() {
        let table = Arc::new(LeaseTable::default());
        let moved = table.acquire(tree(1), "dir\\a");
        let below = table.acquire(tree(1), "dir\\sub\\x");
        table.renamed(tree(1), "a", "elsewhere"); // not ours: nothing moves
        table.renamed(tree(1), "DIR", "new");
        let again = table.acquire(tree(1), "dir\\a");
        assert_ne!(again.key(), moved.key(), "a new file at the old name");
        assert_eq!(table.acquire(tree(1), "new\\a").key(), moved.key());
        assert_eq!(table.acquire(tree(1), "new\\sub\\x").key(), below.key());
        drop((moved, below, again));
        assert_eq!(table.len(), 0, "holds are released where their files went");
    }

    #[test]
    fn opens_of_one_file_share_a_key_until_the_last_closes() {
        let table = Arc::new(LeaseTable::default());
        let a = table.acquire(tree(1), "dir\\file.bin");
        let b = table.acquire(tree(1), "dir\\file.bin");
        assert_eq!(a.key(), b.key());
        assert_eq!(table.len(), 1);
        assert_eq!(table.lock().by_file.values().next().unwrap().opens, 2);

        let other = table.acquire(tree(1), "dir\\other.bin");
        assert_ne!(other.key(), a.key());
        assert_eq!(table.len(), 2);

        let key = a.key();
        drop(a);
        assert_eq!(table.len(), 2, "one open of the file is left");
        let c = table.acquire(tree(1), "dir\\file.bin");
        assert_eq!(c.key(), key, "still the same key while an open remains");
        drop(b);
        drop(c);
        assert_eq!(table.len(), 1);
        assert!(!table.is_known(&key));
        drop(other);
        assert_eq!(table.len(), 0);
        assert!(table.lock().by_key.is_empty());

        let fresh = table.acquire(tree(1), "dir\\file.bin");
        assert_ne!(fresh.key(), key, "a new key once the file was fully closed");
    }

    #[test]
    fn a_hold_keeps_the_key_of_a_file_after_its_last_open() {
        let table = Arc::new(LeaseTable::default());
        let open = table.acquire(tree(1), "big.bin");
        let key = open.key();
        let hold = table.hold(&key).expect("a key in use");
        drop(open);
        assert!(table.is_known(&key));
        let again = table.acquire(tree(1), "BIG.bin");
        assert_eq!(again.key(), key, "a new open takes the held key");
        drop(hold);
        assert!(table.is_known(&key), "held by the new open");
        drop(again);
        assert!(!table.is_known(&key));
        assert!(
            table.hold(&key).is_none(),
            "nothing to hold once the file is gone"
        );
    }

    #[test]
    fn a_retired_key_is_not_offered_again_and_its_holds_touch_nothing() {
        let table = Arc::new(LeaseTable::default());
        let lost = table.acquire(tree(1), "f.bin");
        let old = lost.key();
        table.retire(&old);
        assert!(!table.is_known(&old));
        let fresh = table.acquire(tree(1), "f.bin");
        assert_ne!(fresh.key(), old, "a fresh key for the path");
        drop(lost);
        assert!(
            table.is_known(&fresh.key()),
            "the lost open's drop leaves the new entry"
        );
        let again = table.acquire(tree(1), "f.bin");
        assert_eq!(again.key(), fresh.key());
        drop((fresh, again));
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn names_compare_case_insensitively_within_one_tree() {
        let table = Arc::new(LeaseTable::default());
        let a = table.acquire(tree(1), "Dir\\Ärger.TXT");
        let b = table.acquire(tree(1), "dIR\\äRGER.txt");
        assert_eq!(a.key(), b.key());
        let other_tree = table.acquire(tree(3), "Dir\\Ärger.TXT");
        assert_ne!(other_tree.key(), a.key());
        assert_eq!(table.len(), 2);

        assert_eq!(fold_case("a\\b"), "A\\B");
        assert_eq!(fold_case("straße"), "STRAßE", "no one-to-many folding");
        assert_eq!(fold_case("ファイル"), "ファイル");
    }

    #[test]
    fn records_granted_state_and_ignores_stale_epochs() {
        let table = Arc::new(LeaseTable::default());
        let a = table.acquire(tree(1), "f");
        assert_eq!(a.state(), None);
        a.record_grant(LeaseState(RWH), Some(1));
        assert_eq!(a.state(), Some(LeaseState(RWH)));
        table.record_state(&a.key(), LeaseState(RH), Some(2));
        assert_eq!(a.state(), Some(LeaseState(RH)));
        // A reply carrying the older epoch does not undo the break.
        a.record_grant(LeaseState(RWH), Some(1));
        assert_eq!(a.state(), Some(LeaseState(RH)));
        // Wrapping: 0 is newer than 65535.
        table.record_state(
            &a.key(),
            LeaseState(LeaseState::READ_CACHING),
            Some(u16::MAX),
        );
        table.record_state(&a.key(), LeaseState(RH), Some(0));
        assert_eq!(a.state(), Some(LeaseState(RH)));
        table.record_state(&a.key(), LeaseState(0), None);
        assert_eq!(a.state(), Some(LeaseState(0)));
        // Unknown keys are ignored.
        table.record_state(&[9; 16], LeaseState(RWH), None);
        assert_eq!(table.len(), 1);
    }

    #[tokio::test]
    async fn a_watch_sees_each_break_and_ends_with_the_last_open() {
        let table = Arc::new(LeaseTable::default());
        let a = table.acquire(tree(1), "f");
        let b = table.acquire(tree(1), "F");
        a.record_grant(LeaseState(RWH), Some(1));
        let mut watch = a.watch().expect("the file has an entry");
        assert_eq!(watch.current().to_string(), "RWH");
        table.record_state(&a.key(), LeaseState(RH), Some(2));
        assert_eq!(
            watch.changed().await.map(|c| c.to_string()).as_deref(),
            Some("RH")
        );
        table.record_state(&a.key(), LeaseState(0), Some(3));
        let now = watch.changed().await.expect("still open");
        assert!(!now.read, "Read caching is gone: {now}");
        drop(a);
        table.record_state(&b.key(), LeaseState(RH), Some(4));
        assert!(watch.changed().await.is_some(), "one open is left");
        drop(b);
        assert_eq!(watch.changed().await, None, "the last open closed");
    }

    #[tokio::test]
    async fn forwarding_ends_with_the_channel() {
        let (channel_tx, channel_rx) = mpsc::unbounded_channel();
        let (sink, mut queue) = break_queue();
        forward_unsolicited(channel_rx, sink);
        channel_tx.send(Bytes::from_static(b"one")).unwrap();
        assert_eq!(queue.recv().await, Some(Bytes::from_static(b"one")));
        drop(channel_tx);
        // The forwarder dropped its sender: the queue closes.
        let end = tokio::time::timeout(Duration::from_secs(5), queue.recv()).await;
        assert_eq!(end.expect("queue closed"), None);
    }

    #[test]
    fn caching_prints_like_windows() {
        let c = |s| LeaseCaching::from_state(LeaseState(s)).to_string();
        assert_eq!(c(RWH), "RWH");
        assert_eq!(c(RH), "RH");
        assert_eq!(c(LeaseState::READ_CACHING), "R");
        assert_eq!(c(0), "none");
    }

    #[test]
    fn on_a_case_sensitive_tree_names_differing_in_case_get_their_own_keys() {
        let table = Arc::new(LeaseTable::default());
        let lower = table.acquire_named(tree(1), "dir\\foo", Names::CaseSensitive);
        let upper = table.acquire_named(tree(1), "dir\\FOO", Names::CaseSensitive);
        assert_ne!(lower.key(), upper.key());
        let again = table.acquire_named(tree(1), "dir\\foo", Names::CaseSensitive);
        assert_eq!(again.key(), lower.key());
        table.renamed_named(tree(1), "dir\\foo", "dir\\Foo", Names::CaseSensitive);
        let moved = table.acquire_named(tree(1), "dir\\Foo", Names::CaseSensitive);
        assert_eq!(
            moved.key(),
            lower.key(),
            "the key follows a case-only rename"
        );
    }

    #[test]
    fn a_name_deleted_while_open_gets_a_fresh_key_for_its_next_file() {
        let table = Arc::new(LeaseTable::default());
        let held = table.acquire_named(tree(1), "f", Names::CaseSensitive);
        table.deleted(tree(1), "f", Names::CaseSensitive);
        let next = table.acquire_named(tree(1), "f", Names::CaseSensitive);
        assert_ne!(next.key(), held.key());
        drop(held);
        let again = table.acquire_named(tree(1), "f", Names::CaseSensitive);
        assert_eq!(
            again.key(),
            next.key(),
            "the old file's last close frees nothing of the new"
        );
    }
}
