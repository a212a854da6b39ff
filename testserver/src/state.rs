//! What the server remembers across connections: sessions, tree connects, opens, the shares'
//! file trees, and the faults a test asked for.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use smb3_proto::crypto::Signer;
use smb3_proto::{Command, Dialect, NtStatus};

use crate::files::{Files, NodeId};
use crate::protection::Sealing;
use crate::reply::{Outboxes, Outcome};
use crate::watches::{action, Change, Watches};
use crate::Fault;

/// DesiredAccess bits (MS-SMB2 2.2.13.1) folded into the three rights the server checks.
pub(crate) mod access {
    pub(crate) const READ: u32 = 1;
    pub(crate) const WRITE: u32 = 2;
    pub(crate) const DELETE: u32 = 4;

    const FILE_READ_DATA: u32 = 0x0000_0001;
    const FILE_WRITE_DATA: u32 = 0x0000_0002;
    const FILE_APPEND_DATA: u32 = 0x0000_0004;
    const DELETE_RIGHT: u32 = 0x0001_0000;
    const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
    const GENERIC_ALL: u32 = 0x1000_0000;
    const GENERIC_WRITE: u32 = 0x4000_0000;
    const GENERIC_READ: u32 = 0x8000_0000;

    /// What `desired` grants, in the server's three rights.
    pub(crate) fn rights(desired: u32) -> u32 {
        let all = desired & (MAXIMUM_ALLOWED | GENERIC_ALL) != 0;
        let mut r = 0;
        if all || desired & (FILE_READ_DATA | GENERIC_READ) != 0 {
            r |= READ;
        }
        if all || desired & (FILE_WRITE_DATA | FILE_APPEND_DATA | GENERIC_WRITE) != 0 {
            r |= WRITE;
        }
        if all || desired & DELETE_RIGHT != 0 {
            r |= DELETE;
        }
        r
    }
}

/// ShareAccess bits (MS-SMB2 2.2.13): the same three, in the same order.
pub(crate) mod share_access {
    pub(crate) const READ: u32 = 1;
    pub(crate) const WRITE: u32 = 2;
    pub(crate) const DELETE: u32 = 4;
}

pub(crate) struct Session {
    pub(crate) dialect: Dialect,
    /// Session.SigningKey: the first channel's, and what binding requests are signed with.
    pub(crate) signer: Arc<Signer>,
    /// Sealers for this session's messages: `open` keyed with the client's EncryptionKey,
    /// `seal` with its DecryptionKey. None without a cipher.
    pub(crate) sealing: Option<Arc<Sealing>>,
    /// Connections this session is established or bound on; it ends with the last.
    pub(crate) connections: usize,
    /// Its authentication has expired ([`crate::TestServer::expire_sessions`]): most
    /// requests are refused until it is authenticated again (MS-SMB2 3.3.5.2.9).
    pub(crate) expired: bool,
}

pub(crate) struct TreeConnect {
    pub(crate) session: u64,
    /// The share's key in `State::shares`.
    pub(crate) share: String,
}

/// One byte-range lock (MS-SMB2 2.2.26.1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ByteRange {
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) exclusive: bool,
}

impl ByteRange {
    pub(crate) fn overlaps(&self, offset: u64, length: u64) -> bool {
        if self.length == 0 || length == 0 {
            return false;
        }
        let end = self.offset.saturating_add(self.length);
        let other_end = offset.saturating_add(length);
        self.offset < other_end && offset < end
    }
}

/// A QUERY_DIRECTORY enumeration in progress: the entries from its (re)start, and how many
/// were returned.
pub(crate) struct Enumeration {
    pub(crate) entries: Vec<(String, NodeId)>,
    pub(crate) next: usize,
}

/// A lease is named by the client that asked for it and its key (MS-SMB2 3.3.1.4).
pub(crate) type LeaseId = ([u8; 16], [u8; 16]);

/// Lease states (MS-SMB2 2.2.13.2.8).
pub(crate) mod caching {
    pub(crate) const READ: u32 = 0x01;
    pub(crate) const HANDLE: u32 = 0x02;
    pub(crate) const WRITE: u32 = 0x04;
}

pub(crate) struct Lease {
    pub(crate) share: String,
    pub(crate) node: NodeId,
    pub(crate) state: u32,
    pub(crate) epoch: u16,
    /// Asked for with the v2 context (its reply and breaks carry an epoch).
    pub(crate) v2: bool,
    /// A break sent and not acknowledged yet: the state it lowers the lease to.
    pub(crate) breaking_to: Option<u32>,
    /// The connection breaks are sent on: the one the lease was last granted on.
    pub(crate) conn: u64,
}

/// What makes an open durable (MS-SMB2 3.3.5.9.10): it outlives its connection for
/// `timeout`, to be reclaimed by the same client with the same CreateGuid.
#[derive(Clone, Copy)]
pub(crate) struct Durability {
    pub(crate) create_guid: [u8; 16],
    pub(crate) client_guid: [u8; 16],
    pub(crate) timeout: Duration,
    /// When its session ended without closing it; None while it has one.
    pub(crate) orphaned_at: Option<Instant>,
}

pub(crate) struct Open {
    /// 0 while a durable open waits to be reclaimed.
    pub(crate) session: u64,
    pub(crate) tree: u32,
    pub(crate) share: String,
    pub(crate) node: NodeId,
    /// What the DesiredAccess grants (see [`access`]).
    pub(crate) rights: u32,
    pub(crate) share_access: u32,
    pub(crate) delete_on_close: bool,
    pub(crate) enumeration: Option<Enumeration>,
    pub(crate) locks: Vec<ByteRange>,
    pub(crate) lease: Option<LeaseId>,
    pub(crate) durable: Option<Durability>,
    /// The CreateGuid of the DH2Q it was asked with, durable or not: while it is open a
    /// replay of that CREATE is answered with it (Samba's replay cache does the same).
    pub(crate) create_guid: Option<[u8; 16]>,
}

/// Everything behind the server's one lock. Handlers run to completion under it: a test
/// server has no need for finer locking, and one lock makes every operation atomic, as the
/// tests' reference models assume.
pub(crate) struct State {
    next_session_id: u64,
    pub(crate) sessions: HashMap<u64, Session>,
    next_tree_id: u32,
    pub(crate) trees: HashMap<u32, TreeConnect>,
    next_volatile: u64,
    /// Opens by FileId.Volatile (the persistent half is the same number).
    pub(crate) opens: HashMap<u64, Open>,
    /// Shares by lower-cased name.
    pub(crate) shares: HashMap<String, Files>,
    pub(crate) faults: Vec<Fault>,
    /// Requests seen, by command.
    pub(crate) requests: HashMap<Command, u64>,
    pub(crate) leases: HashMap<LeaseId, Lease>,
    pub(crate) outboxes: Outboxes,
    next_conn_id: u64,
    /// The change notify watches on open directories.
    pub(crate) watches: Watches,
}

impl State {
    pub(crate) fn new(shares: &[String]) -> State {
        State {
            next_session_id: 0x1000,
            sessions: HashMap::new(),
            next_tree_id: 1,
            trees: HashMap::new(),
            next_volatile: 1,
            opens: HashMap::new(),
            shares: shares
                .iter()
                .map(|s| (s.to_lowercase(), Files::new()))
                .collect(),
            faults: Vec::new(),
            requests: HashMap::new(),
            leases: HashMap::new(),
            outboxes: HashMap::new(),
            next_conn_id: 0,
            watches: Watches::default(),
        }
    }

    pub(crate) fn new_session_id(&mut self) -> u64 {
        self.next_session_id += 1;
        self.next_session_id
    }

    pub(crate) fn new_tree_id(&mut self) -> u32 {
        self.next_tree_id += 1;
        self.next_tree_id
    }

    /// A new connection's id and the queue its unasked frames arrive on.
    pub(crate) fn new_connection(&mut self) -> (u64, mpsc::UnboundedReceiver<Outcome>) {
        self.next_conn_id += 1;
        let (tx, rx) = mpsc::unbounded_channel();
        self.outboxes.insert(self.next_conn_id, tx);
        (self.next_conn_id, rx)
    }

    pub(crate) fn new_open_id(&mut self) -> u64 {
        self.next_volatile += 1;
        self.next_volatile
    }

    /// The opens of `node` in `share` other than `except`.
    pub(crate) fn other_opens<'a>(
        &'a self,
        share: &'a str,
        node: NodeId,
        except: Option<u64>,
    ) -> impl Iterator<Item = (&'a u64, &'a Open)> + 'a {
        self.opens
            .iter()
            .filter(move |(id, o)| o.share == share && o.node == node && Some(**id) != except)
    }

    /// Close an open: its locks and its change notify watch go with it, and a file marked
    /// for deletion goes once its last open is closed (MS-FSA 2.1.5.4).
    pub(crate) fn close_open(&mut self, id: u64) -> Option<Open> {
        let open = self.opens.remove(&id)?;
        self.watches.open_closed(id, &self.outboxes);
        let still_open = self
            .other_opens(&open.share, open.node, None)
            .next()
            .is_some();
        if let Some(files) = self.shares.get_mut(&open.share) {
            if open.delete_on_close {
                if let Some(node) = files.get_mut(open.node) {
                    let empty_or_file = node.children().is_none_or(|c| c.is_empty());
                    if empty_or_file {
                        node.delete_pending = true;
                    }
                }
            }
            let pending = files.get(open.node).is_some_and(|n| n.delete_pending);
            if pending && !still_open {
                let removed = Change::named(files, open.node, action::REMOVED);
                files.remove(open.node);
                self.report_changes(&open.share, &[removed]);
            }
        }
        Some(open)
    }

    /// Tell the watches on `share` of `changes`, made by one operation.
    pub(crate) fn report_changes(&mut self, share: &str, changes: &[Option<Change>]) {
        if let Some(files) = self.shares.get(share) {
            self.watches.report(files, share, changes, &self.outboxes);
        }
    }

    /// End a tree connect and close what was opened through it.
    pub(crate) fn disconnect_tree(&mut self, tree: u32) {
        self.trees.remove(&tree);
        let opens: Vec<u64> = self
            .opens
            .iter()
            .filter(|(_, o)| o.tree == tree)
            .map(|(id, _)| *id)
            .collect();
        for id in opens {
            self.close_open(id);
        }
    }

    /// End a session with its tree connects and opens. When the session was lost rather than
    /// logged off (`keep_durable`), its durable opens stay, without a session, to be reclaimed.
    pub(crate) fn end_session(&mut self, session: u64, keep_durable: bool) {
        self.sessions.remove(&session);
        if keep_durable {
            let now = Instant::now();
            for open in self.opens.values_mut().filter(|o| o.session == session) {
                if let Some(d) = open.durable.as_mut() {
                    d.orphaned_at = Some(now);
                    open.session = 0;
                    open.tree = 0;
                    open.enumeration = None;
                }
            }
        }
        let trees: Vec<u32> = self
            .trees
            .iter()
            .filter(|(_, t)| t.session == session)
            .map(|(id, _)| *id)
            .collect();
        for tree in trees {
            self.disconnect_tree(tree);
        }
    }

    /// Close the durable opens nobody reclaimed in time.
    pub(crate) fn expire_durable(&mut self) {
        let now = Instant::now();
        let expired: Vec<u64> = self
            .opens
            .iter()
            .filter(|(_, o)| {
                o.durable
                    .and_then(|d| Some(now.duration_since(d.orphaned_at?) > d.timeout))
                    .unwrap_or(false)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.close_open(id);
        }
    }

    /// A fault planned for this request, if any; each use counts down its budget.
    pub(crate) fn take_fault(
        &mut self,
        command: Command,
        path: Option<&str>,
    ) -> Option<crate::FaultAction> {
        let i = self.faults.iter().position(|f| f.matches(command, path))?;
        let fault = &mut self.faults[i];
        let action = fault.action;
        fault.times -= 1;
        if fault.times == 0 {
            self.faults.remove(i);
        }
        Some(action)
    }
}

/// A status for a request naming a tree this session did not connect.
pub(crate) fn bad_tree() -> NtStatus {
    NtStatus::NETWORK_NAME_DELETED
}
