//! Change notify watches on open directories (what CHANGE_NOTIFY, `ops::notify`, arms): the
//! changes the handlers report to them, the changes they keep between two requests, and the
//! responses that complete their waiting requests.
//!
//! A watch keeps the first request's CompletionFilter, SMB2_WATCH_TREE flag and
//! OutputBufferLength for the open's life, as NTFS and Samba do. A waiting request ends with
//! the next change the watch wants, made through any session or connection; with
//! STATUS_CANCELLED when cancelled; with STATUS_NOTIFY_CLEANUP when its handle is closed; and
//! unanswered when its connection is lost.
//!
//! Changes that happen while no request waits are kept and returned by the next request at
//! once (the buffer MS-CIFS 3.3.5.59.4 describes, which Windows and Samba keep for SMB2 as
//! well), so a client that asks again after each answer misses nothing. More than the buffer
//! holds, or more than the request can take, is answered STATUS_NOTIFY_ENUM_DIR with no data:
//! "list the directory again".
//!
//! What each operation reports follows Samba, which the client's e2e tests run against: a
//! create is ADDED, a delete REMOVED once the file is gone, a rename RENAMED_OLD_NAME and
//! RENAMED_NEW_NAME within a directory and REMOVED and ADDED across two (smbd's
//! `notify_rename`), and a write, truncation or SET_INFO of times or attributes MODIFIED, with
//! the FILE_NOTIFY_CHANGE_* kinds that tell a filter whether it wants it.

use std::collections::{HashMap, VecDeque};

use bytes::{BufMut, BytesMut};
use smb3_proto::NtStatus;

use crate::files::{Files, Node, NodeId, ROOT};
use crate::protection::Protection;
use crate::reply::{error_body, frame_replies, AsyncRequest, Built, Outboxes, Outcome};
use crate::wire::{body_offset, pad, put_utf16, utf16_len};

/// FILE_NOTIFY_CHANGE_* (MS-SMB2 2.2.35 CompletionFilter): the kinds a change is of.
pub(crate) mod kind {
    pub(crate) const FILE_NAME: u32 = 0x0001;
    pub(crate) const DIR_NAME: u32 = 0x0002;
    pub(crate) const ATTRIBUTES: u32 = 0x0004;
    pub(crate) const SIZE: u32 = 0x0008;
    pub(crate) const LAST_WRITE: u32 = 0x0010;
    pub(crate) const LAST_ACCESS: u32 = 0x0020;
    pub(crate) const CREATION: u32 = 0x0040;
    /// FILE_NOTIFY_VALID_MASK: a filter with other bits, or none, is refused (MS-FSA 2.1.5.10).
    pub(crate) const VALID: u32 = 0x0FFF;
}

/// FILE_ACTION_* (MS-FSCC 2.7.1 Action): what happened to an entry.
pub(crate) mod action {
    pub(crate) const ADDED: u32 = 1;
    pub(crate) const REMOVED: u32 = 2;
    pub(crate) const MODIFIED: u32 = 3;
    pub(crate) const RENAMED_OLD_NAME: u32 = 4;
    pub(crate) const RENAMED_NEW_NAME: u32 = 5;
}

/// NextEntryOffset, Action and FileNameLength: the fixed part of a FILE_NOTIFY_INFORMATION.
const ENTRY_FIXED: usize = 12;

/// One change to a share's tree, as the operation that made it reports it: what happened to
/// the entry `name` of directory `dir`, and the kinds of change it is. Each watch works out
/// the path relative to its own directory when it is reported.
#[derive(Clone, Debug)]
pub(crate) struct Change {
    dir: NodeId,
    name: String,
    action: u32,
    kinds: u32,
}

impl Change {
    /// `node` appeared, went or was renamed (`action`): a FILE_NAME change for a file, a
    /// DIR_NAME change for a directory. Made before the node goes, for a removal or the old
    /// name of a rename.
    pub(crate) fn named(files: &Files, node: NodeId, action: u32) -> Option<Change> {
        let n = files.get(node)?;
        let kinds = if n.is_dir() {
            kind::DIR_NAME
        } else {
            kind::FILE_NAME
        };
        Change::at(n, action, kinds)
    }

    /// `node` was modified in the ways `kinds` names (none: nothing to report).
    pub(crate) fn modified(files: &Files, node: NodeId, kinds: u32) -> Option<Change> {
        Change::at(files.get(node)?, action::MODIFIED, kinds)
    }

    fn at(node: &Node, action: u32, kinds: u32) -> Option<Change> {
        // The share's root is in no directory a watch could be on.
        (node.id != ROOT && kinds != 0).then(|| Change {
            dir: node.parent,
            name: node.name.clone(),
            action,
            kinds,
        })
    }
}

/// A CHANGE_NOTIFY answered STATUS_PENDING: what its final response needs.
pub(crate) struct Waiting {
    pub(crate) request: AsyncRequest,
    /// The connection it came on, the only one its response may go out on.
    pub(crate) conn: u64,
    /// The request's OutputBufferLength.
    pub(crate) output_len: usize,
    pub(crate) protection: Protection,
}

/// What the server keeps for a directory open once a CHANGE_NOTIFY arrived on it.
pub(crate) struct Watch {
    share: String,
    dir: NodeId,
    filter: u32,
    subtree: bool,
    /// The most bytes of FILE_NOTIFY_INFORMATION kept between requests: the first request's
    /// OutputBufferLength, as NTFS sizes its buffer (MS-CIFS 3.3.5.59.4).
    capacity: usize,
    /// Changes not yet returned: Action and the name relative to `dir`.
    kept: Vec<(u32, String)>,
    /// Bytes `kept` takes on the wire, each entry padded to 4.
    kept_len: usize,
    /// More changes happened than `capacity` holds: they are lost, and the next answer says
    /// so (STATUS_NOTIFY_ENUM_DIR).
    overflowed: bool,
    /// Requests waiting for a change, oldest first.
    waiting: VecDeque<Waiting>,
}

impl Watch {
    /// Whether a request can be answered at once.
    pub(crate) fn has_news(&self) -> bool {
        self.overflowed || !self.kept.is_empty()
    }

    /// Hold `request` until the next change (or its cancel, or the handle's close).
    pub(crate) fn wait(&mut self, request: Waiting) {
        self.waiting.push_back(request);
    }

    fn keep(&mut self, action: u32, name: String) {
        if self.overflowed {
            return;
        }
        // A file written in many WRITEs reports a MODIFIED for each; one in a row says it all
        // and keeps a large copy from overflowing the buffer.
        if self
            .kept
            .last()
            .is_some_and(|(a, n)| *a == action && *n == name)
        {
            return;
        }
        let cost = (ENTRY_FIXED + utf16_len(&name)).next_multiple_of(4);
        if self.kept_len + cost > self.capacity {
            self.overflowed = true;
            self.kept.clear();
            self.kept_len = 0;
            return;
        }
        self.kept_len += cost;
        self.kept.push((action, name));
    }

    /// The answer to a request that takes up to `output_len` bytes: the changes kept, or
    /// STATUS_NOTIFY_ENUM_DIR when they were lost or do not fit. Either way the watch starts
    /// afresh.
    pub(crate) fn take_answer(&mut self, output_len: usize) -> (NtStatus, BytesMut) {
        let kept = std::mem::take(&mut self.kept);
        self.kept_len = 0;
        let overflowed = std::mem::replace(&mut self.overflowed, false);
        let entries = encode_entries(&kept);
        // As smbd (change_notify_reply): no more than the smaller of the two buffers.
        if overflowed || entries.len() > output_len.min(self.capacity) {
            return (NtStatus::NOTIFY_ENUM_DIR, error_body());
        }
        // CHANGE_NOTIFY Response (MS-SMB2 2.2.36).
        let mut body = BytesMut::with_capacity(8 + entries.len());
        body.put_u16_le(9);
        body.put_u16_le(body_offset(8));
        body.put_u32_le(entries.len() as u32);
        body.put_slice(&entries);
        if entries.is_empty() {
            body.put_u8(0);
        }
        (NtStatus::SUCCESS, body)
    }
}

/// FILE_NOTIFY_INFORMATION entries (MS-FSCC 2.7.1), chained by NextEntryOffset, each starting
/// on a 4-byte boundary; the last one's NextEntryOffset is 0.
fn encode_entries(entries: &[(u32, String)]) -> BytesMut {
    let mut out = BytesMut::new();
    let mut previous: Option<usize> = None;
    for (action, name) in entries {
        pad(&mut out, 4);
        let start = out.len();
        if let Some(prev) = previous {
            let next = (start - prev) as u32;
            out[prev..prev + 4].copy_from_slice(&next.to_le_bytes());
        }
        out.put_u32_le(0);
        out.put_u32_le(*action);
        out.put_u32_le(utf16_len(name) as u32);
        put_utf16(&mut out, name);
        previous = Some(start);
    }
    out
}

/// What the first CHANGE_NOTIFY on an open asks to watch.
pub(crate) struct Arming {
    pub(crate) share: String,
    pub(crate) dir: NodeId,
    pub(crate) filter: u32,
    pub(crate) subtree: bool,
    pub(crate) capacity: usize,
}

/// Every watch of the server, by the FileId.Volatile of the open it is on.
#[derive(Default)]
pub(crate) struct Watches {
    by_open: HashMap<u64, Watch>,
    next_async_id: u64,
}

impl Watches {
    /// The watch on `open`, armed as `a` asks if it has none yet (a later request's filter,
    /// flags and buffer size are not the watch's).
    pub(crate) fn arm(&mut self, open: u64, a: Arming) -> &mut Watch {
        self.by_open.entry(open).or_insert_with(|| Watch {
            share: a.share,
            dir: a.dir,
            filter: a.filter,
            subtree: a.subtree,
            capacity: a.capacity,
            kept: Vec::new(),
            kept_len: 0,
            overflowed: false,
            waiting: VecDeque::new(),
        })
    }

    pub(crate) fn get_mut(&mut self, open: u64) -> Option<&mut Watch> {
        self.by_open.get_mut(&open)
    }

    /// An AsyncId for a request that goes async (MS-SMB2 3.3.4.2), unique on the server.
    pub(crate) fn new_async_id(&mut self) -> u64 {
        self.next_async_id += 1;
        self.next_async_id
    }

    /// Report `changes`, made in `share` (whose tree is `files`) by one operation, to the
    /// watches they concern. They complete a waiting request together: the two halves of a
    /// rename arrive in one answer.
    pub(crate) fn report(
        &mut self,
        files: &Files,
        share: &str,
        changes: &[Option<Change>],
        outboxes: &Outboxes,
    ) {
        for watch in self.by_open.values_mut().filter(|w| w.share == share) {
            for change in changes.iter().flatten() {
                if change.kinds & watch.filter == 0 {
                    continue;
                }
                if let Some(path) = relative_path(files, watch.dir, change, watch.subtree) {
                    watch.keep(change.action, path);
                }
            }
            if !watch.has_news() {
                continue;
            }
            if let Some(waiting) = watch.waiting.pop_front() {
                let (status, body) = watch.take_answer(waiting.output_len);
                send_final(outboxes, &waiting, status, &body);
            }
        }
    }

    /// CANCEL (MS-SMB2 3.3.5.16): the waiting request that came on `conn` and that `names`
    /// picks ends with STATUS_CANCELLED. A request already answered is not found, and nothing
    /// is sent.
    pub(crate) fn cancel(
        &mut self,
        conn: u64,
        names: impl Fn(&AsyncRequest) -> bool,
        outboxes: &Outboxes,
    ) {
        for watch in self.by_open.values_mut() {
            let found = watch
                .waiting
                .iter()
                .position(|w| w.conn == conn && names(&w.request));
            if let Some(waiting) = found.and_then(|i| watch.waiting.remove(i)) {
                send_final(outboxes, &waiting, NtStatus::CANCELLED, &error_body());
                return;
            }
        }
    }

    /// Open `open` is being closed: its watch goes, and the requests waiting on it end with
    /// STATUS_NOTIFY_CLEANUP, as closing an Open completes its pending requests (MS-SMB2
    /// 3.3.4.17).
    pub(crate) fn open_closed(&mut self, open: u64, outboxes: &Outboxes) {
        let Some(watch) = self.by_open.remove(&open) else {
            return;
        };
        for waiting in &watch.waiting {
            send_final(outboxes, waiting, NtStatus::NOTIFY_CLEANUP, &error_body());
        }
    }

    /// Connection `conn` is gone: the requests that came on it can no longer be answered and
    /// are dropped. Their watches stay with their opens, which may outlive the connection (a
    /// session bound to another channel).
    pub(crate) fn connection_lost(&mut self, conn: u64) {
        for watch in self.by_open.values_mut() {
            watch.waiting.retain(|w| w.conn != conn);
        }
    }

    /// Requests answered STATUS_PENDING and not yet completed.
    pub(crate) fn waiting_requests(&self) -> usize {
        self.by_open.values().map(|w| w.waiting.len()).sum()
    }
}

/// The path of `change`'s entry relative to the watched directory `watched` (`sub\name`), or
/// None when the watch does not see it: outside the directory, or below it without
/// SMB2_WATCH_TREE.
fn relative_path(files: &Files, watched: NodeId, change: &Change, subtree: bool) -> Option<String> {
    let mut parts = vec![change.name.as_str()];
    let mut at = change.dir;
    while at != watched {
        if !subtree || at == ROOT {
            return None;
        }
        let dir = files.get(at)?;
        parts.push(&dir.name);
        at = dir.parent;
    }
    parts.reverse();
    Some(parts.join("\\"))
}

/// The final response to `waiting`, signed and sealed as its request was, queued on its
/// connection.
fn send_final(outboxes: &Outboxes, waiting: &Waiting, status: NtStatus, body: &[u8]) {
    let msg = waiting.request.final_response(status, body);
    let built = Built::new(msg, waiting.protection.sign_with());
    let Some(frame) = frame_replies(vec![built], waiting.protection.sealing.as_deref()) else {
        return;
    };
    if let Some(outbox) = outboxes.get(&waiting.conn) {
        let _ = outbox.send(Outcome::Send(frame));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(capacity: usize) -> Watch {
        let mut watches = Watches::default();
        watches.arm(
            1,
            Arming {
                share: "data".into(),
                dir: ROOT,
                filter: kind::VALID,
                subtree: false,
                capacity,
            },
        );
        watches.by_open.remove(&1).expect("armed")
    }

    #[test]
    fn entries_are_chained_on_4_byte_boundaries() {
        let out = encode_entries(&[
            (action::ADDED, "a.txt".into()),
            (action::RENAMED_OLD_NAME, "é".into()),
            (action::RENAMED_NEW_NAME, "d\\x".into()),
        ]);
        // 12 + 10 bytes padded to 24, 12 + 2 padded to 16, then 12 + 6 unpadded.
        assert_eq!(out.len(), 24 + 16 + 18);
        assert_eq!(&out[0..4], &24u32.to_le_bytes());
        assert_eq!(&out[4..8], &action::ADDED.to_le_bytes());
        assert_eq!(&out[8..12], &10u32.to_le_bytes());
        assert_eq!(&out[24..28], &16u32.to_le_bytes());
        assert_eq!(&out[40..44], &0u32.to_le_bytes());
        assert_eq!(&out[44..48], &action::RENAMED_NEW_NAME.to_le_bytes());
    }

    #[test]
    fn kept_changes_overflow_into_enum_dir() {
        let mut w = watch(64);
        w.keep(action::ADDED, "one".into());
        w.keep(action::MODIFIED, "one".into());
        w.keep(action::MODIFIED, "one".into());
        assert_eq!(w.kept.len(), 2, "a repeated change is kept once");
        let (status, body) = w.take_answer(4096);
        assert_eq!(status, NtStatus::SUCCESS);
        assert_eq!(
            &body[4..8],
            &38u32.to_le_bytes(),
            "20 + 18 bytes: no pad after the last"
        );
        assert!(!w.has_news());

        for i in 0..4 {
            w.keep(action::ADDED, format!("file{i}"));
        }
        assert!(w.overflowed, "three 24-byte entries exceed 64");
        assert_eq!(w.take_answer(4096).0, NtStatus::NOTIFY_ENUM_DIR);
        w.keep(action::ADDED, "x".into());
        assert_eq!(
            w.take_answer(8).0,
            NtStatus::NOTIFY_ENUM_DIR,
            "more than the request takes"
        );
        assert!(!w.has_news(), "the watch starts afresh");
    }
}
