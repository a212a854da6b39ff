//! `DirWatch`: changes in a directory, one SMB2 CHANGE_NOTIFY round trip at a time
//! (MS-SMB2 3.2.4.14 / 3.3.5.19).
//!
//! The directory is opened once, and the first CHANGE_NOTIFY goes out before
//! [`Share::watch`](crate::Share::watch) returns: the call waits until the server has taken
//! the request on (its interim STATUS_PENDING reply), so a change made after `watch` returned
//! is reported. Servers start collecting changes on an open only with its first
//! CHANGE_NOTIFY; a watch that returned before that point would silently miss what happened in
//! between. Each [`DirWatch::next`] then waits for that request (or sends the next one).
//! Between two calls the server keeps collecting changes on the open, so nothing is missed
//! while the caller works on the last batch. The wait has no timeout. Dropping a `next()`
//! future sends a CANCEL for the outstanding request (see the channel); dropping the watch
//! also closes the directory, in the background.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use smb3_proto::msg::change_notify::{
    ChangeNotifyRequest, ChangeNotifyResponse, CompletionFilter, FileNotifyInformation,
    NotifyAction,
};
use smb3_proto::msg::FileId;
use smb3_proto::{Command, NtStatus};

use crate::channel::Response;
use crate::error::{decode, Result};
use crate::names::check_relative_path;
use crate::tree::Tree;

/// How much of the tree a watch covers (SMB2_WATCH_TREE, MS-SMB2 2.2.35).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchScope {
    /// The directory's own entries.
    Directory,
    /// The directory and everything below it.
    Subtree,
}

/// Which changes complete a watch (CompletionFilter, MS-SMB2 2.2.35). Combine with `|`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WatchFilter(u32);

impl WatchFilter {
    /// Files created, deleted or renamed.
    pub const FILE_NAME: WatchFilter = WatchFilter(CompletionFilter::FILE_NAME);
    /// Directories created, deleted or renamed.
    pub const DIR_NAME: WatchFilter = WatchFilter(CompletionFilter::DIR_NAME);
    /// Attributes changed.
    pub const ATTRIBUTES: WatchFilter = WatchFilter(CompletionFilter::ATTRIBUTES);
    /// A file's size changed.
    pub const SIZE: WatchFilter = WatchFilter(CompletionFilter::SIZE);
    /// Last write time changed.
    pub const LAST_WRITE: WatchFilter = WatchFilter(CompletionFilter::LAST_WRITE);
    /// Security descriptor changed.
    pub const SECURITY: WatchFilter = WatchFilter(CompletionFilter::SECURITY);
    /// Names appearing, disappearing or changing: [`FILE_NAME`](Self::FILE_NAME) |
    /// [`DIR_NAME`](Self::DIR_NAME).
    pub const NAMES: WatchFilter =
        WatchFilter(CompletionFilter::FILE_NAME | CompletionFilter::DIR_NAME);
    /// Every kind of change the protocol knows.
    pub const ALL: WatchFilter = WatchFilter(0x0000_0FFF);

    /// The raw CompletionFilter bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// A filter from raw FILE_NOTIFY_CHANGE_* bits.
    pub fn from_bits(bits: u32) -> WatchFilter {
        WatchFilter(bits)
    }
}

impl std::ops::BitOr for WatchFilter {
    type Output = WatchFilter;
    fn bitor(self, other: WatchFilter) -> WatchFilter {
        WatchFilter(self.0 | other.0)
    }
}

/// One change reported by a [`DirWatch`]. Paths are relative to the watched directory, with
/// `/` between components (a recursive watch reports changes in subdirectories too).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// A file or directory appeared.
    Added(String),
    /// A file or directory went away.
    Removed(String),
    /// Data, size, times or attributes changed.
    Modified(String),
    /// Renamed: the old name. The new name follows as [`Change::RenamedTo`].
    RenamedFrom(String),
    /// Renamed: the new name.
    RenamedTo(String),
    /// A named stream was added to the file.
    StreamAdded(String),
    /// A named stream was removed.
    StreamRemoved(String),
    /// A named stream was modified.
    StreamModified(String),
    /// An action this library does not name (MS-FSCC 2.7.1 Action), kept as sent.
    Other {
        /// The raw Action value.
        action: u32,
        /// The path.
        path: String,
    },
    /// The server could not keep track (more changes than fit, STATUS_NOTIFY_ENUM_DIR):
    /// anything may have changed, list the directory again.
    Rescan,
}

impl Change {
    /// The path the change is about (`None` for [`Change::Rescan`]).
    pub fn path(&self) -> Option<&str> {
        match self {
            Change::Added(p)
            | Change::Removed(p)
            | Change::Modified(p)
            | Change::RenamedFrom(p)
            | Change::RenamedTo(p)
            | Change::StreamAdded(p)
            | Change::StreamRemoved(p)
            | Change::StreamModified(p)
            | Change::Other { path: p, .. } => Some(p),
            Change::Rescan => None,
        }
    }

    fn from_wire(info: FileNotifyInformation) -> Change {
        let path = info.file_name.replace('\\', "/");
        // A name that is not a relative path of plain names (`..`, an empty component, a
        // `/` the server sent as such) is not passed on: the caller would join it to the
        // directory. Listing the directory again, through the listing's own check, is safe.
        if let Err(reason) = check_relative_path(&path) {
            // Samba 4.22 reports some changes of the watched directory itself with an empty
            // name: no attack, and a rescan is the right answer to it too.
            if path.is_empty() {
                tracing::debug!(
                    action = info.action.0,
                    "change notification without a name; asking for a rescan"
                );
            } else {
                tracing::warn!(name = ?info.file_name, %reason, "change notification for an unsafe name; asking for a rescan");
            }
            return Change::Rescan;
        }
        match info.action {
            NotifyAction::ADDED => Change::Added(path),
            NotifyAction::REMOVED => Change::Removed(path),
            NotifyAction::MODIFIED => Change::Modified(path),
            NotifyAction::RENAMED_OLD_NAME => Change::RenamedFrom(path),
            NotifyAction::RENAMED_NEW_NAME => Change::RenamedTo(path),
            NotifyAction::ADDED_STREAM => Change::StreamAdded(path),
            NotifyAction::REMOVED_STREAM => Change::StreamRemoved(path),
            NotifyAction::MODIFIED_STREAM => Change::StreamModified(path),
            NotifyAction(action) => Change::Other { action, path },
        }
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, path): (&str, &String) = match self {
            Change::Added(p) => ("added", p),
            Change::Removed(p) => ("removed", p),
            Change::Modified(p) => ("modified", p),
            Change::RenamedFrom(p) => ("renamed from", p),
            Change::RenamedTo(p) => ("renamed to", p),
            Change::StreamAdded(p) => ("stream added", p),
            Change::StreamRemoved(p) => ("stream removed", p),
            Change::StreamModified(p) => ("stream modified", p),
            Change::Other { action, path } => {
                return write!(f, "action {action:#x} {path}");
            }
            Change::Rescan => return f.write_str("too many changes: rescan"),
        };
        write!(f, "{what} {path}")
    }
}

/// The changes of one CHANGE_NOTIFY reply.
fn changes_of(resp: &Response) -> Result<Vec<Change>> {
    // STATUS_NOTIFY_ENUM_DIR, or success with nothing in it (what a server sends when its
    // buffer overflowed): the changes are lost, the caller must look again.
    if resp.header.status == NtStatus::NOTIFY_ENUM_DIR {
        return Ok(vec![Change::Rescan]);
    }
    let infos = decode(
        Command::CHANGE_NOTIFY,
        ChangeNotifyResponse::decode(&resp.msg).and_then(|r| r.changes()),
    )?;
    if infos.is_empty() {
        return Ok(vec![Change::Rescan]);
    }
    Ok(infos.into_iter().map(Change::from_wire).collect())
}

/// Largest change list asked for per round trip (one credit).
const NOTIFY_BUFFER: u32 = 64 * 1024;

/// A CHANGE_NOTIFY on its way: the future that ends with its final reply.
type InFlight = Pin<Box<dyn Future<Output = Result<Response>> + Send>>;

/// A watch on one directory, from [`Share::watch`]. Call [`DirWatch::next`] in a loop.
///
/// Dropping a pending `next()` future cancels that CHANGE_NOTIFY on the server (SMB2 CANCEL);
/// dropping the watch closes the directory in the background; [`DirWatch::close`] does it
/// now.
pub struct DirWatch {
    tree: Arc<Tree>,
    path: String,
    file_id: FileId,
    filter: WatchFilter,
    recursive: bool,
    closed: AtomicBool,
    /// The request `Share::watch` sent, until the first `next()` takes it.
    first: Option<InFlight>,
}

impl DirWatch {
    /// A watch on the open directory `file_id`, with its first CHANGE_NOTIFY already held by
    /// the server (or answered) when this returns; see the module notes for why.
    pub(crate) async fn start(
        tree: Arc<Tree>,
        path: String,
        file_id: FileId,
        filter: WatchFilter,
        recursive: bool,
    ) -> Result<DirWatch> {
        let mut watch = DirWatch {
            tree,
            path,
            file_id,
            filter,
            recursive,
            closed: AtomicBool::new(false),
            first: None,
        };
        let taken_on = Arc::new(tokio::sync::Notify::new());
        let mut first = watch.request(Some(taken_on.clone()));
        // A server that never sends the interim reply (MS-SMB2 3.3.4.2 says it SHOULD for a
        // request that may block indefinitely) is given as long as any small request.
        let patience = watch.tree.core.config.timeout_for(0);
        tokio::select! {
            biased;
            _ = taken_on.notified() => watch.first = Some(first),
            // Answered at once: a refusal fails the watch now (dropping it closes the
            // directory); changes are kept for the first `next()`.
            done = &mut first => {
                let done = done.map_err(|e| e.with_path(&watch.path))?;
                watch.first = Some(Box::pin(std::future::ready(Ok(done))));
            }
            _ = tokio::time::sleep(patience) => {
                tracing::debug!(path = %watch.path, "no interim reply to CHANGE_NOTIFY; watching anyway");
                watch.first = Some(first);
            }
        }
        Ok(watch)
    }

    /// A CHANGE_NOTIFY on the directory, to be awaited; `taken_on` hears of its interim reply.
    fn request(&self, taken_on: Option<Arc<tokio::sync::Notify>>) -> InFlight {
        let tree = self.tree.clone();
        let buffer = NOTIFY_BUFFER.min(tree.core.negotiated.max_transact.max(4096));
        let req = ChangeNotifyRequest::new(
            self.file_id,
            CompletionFilter(self.filter.0),
            self.recursive,
            buffer,
        );
        Box::pin(async move {
            let mut call = tree.call().allowing(&[NtStatus::NOTIFY_ENUM_DIR]);
            if let Some(told) = taken_on {
                call = call.telling_interim(told);
            }
            tree.core.send(&req, call).await
        })
    }

    /// The watched directory, as given to [`Share::watch`].
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Wait for the next batch of changes (one CHANGE_NOTIFY round trip; no timeout). Never
    /// empty: a batch the server could not report is `[Change::Rescan]`.
    ///
    /// Dropping the future before it completes cancels the request on the server (SMB2
    /// CANCEL); changes that happen afterwards are reported by the next call. A reply that was
    /// already on its way when the future was dropped is discarded with what it carried.
    pub async fn next(&mut self) -> Result<Vec<Change>> {
        let in_flight = match self.first.take() {
            Some(first) => first,
            None => self.request(None),
        };
        let resp = in_flight.await.map_err(|e| e.with_path(&self.path))?;
        changes_of(&resp)
    }

    /// Close the directory. A `next()` still pending elsewhere ends with STATUS_NOTIFY_CLEANUP.
    pub async fn close(mut self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        // Closing the directory completes the request the server holds for it
        // (STATUS_NOTIFY_CLEANUP), so the first one need not be cancelled: keep it until the
        // CLOSE is answered, then let it go.
        let first = self.first.take();
        let closed = self
            .tree
            .close(self.file_id)
            .await
            .map_err(|e| e.with_path(&self.path));
        drop(first);
        closed
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        // As for `File`: close in the background so the server drops the open (and any watch
        // on it) now rather than at the end of the session.
        let _ = self.tree.close_later(self.file_id);
    }
}

impl std::fmt::Debug for DirWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatch")
            .field("path", &self.path)
            .field("filter", &format_args!("{:#x}", self.filter.0))
            .field("recursive", &self.recursive)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_actions_become_changes_with_slash_paths() {
        let c = |action, name: &str| {
            Change::from_wire(FileNotifyInformation {
                action: NotifyAction(action),
                file_name: name.into(),
            })
        };
        assert_eq!(c(1, "a\\b.txt"), Change::Added("a/b.txt".into()));
        assert_eq!(c(2, "x"), Change::Removed("x".into()));
        assert_eq!(c(3, "x"), Change::Modified("x".into()));
        assert_eq!(c(4, "old"), Change::RenamedFrom("old".into()));
        assert_eq!(c(5, "new"), Change::RenamedTo("new".into()));
        assert_eq!(c(6, "s"), Change::StreamAdded("s".into()));
        assert_eq!(c(7, "s"), Change::StreamRemoved("s".into()));
        assert_eq!(c(8, "s"), Change::StreamModified("s".into()));
        assert_eq!(
            c(0x42, "z"),
            Change::Other {
                action: 0x42,
                path: "z".into()
            }
        );
        assert_eq!(c(1, "é").path(), Some("é"));
        assert_eq!(Change::Rescan.path(), None);
        assert_eq!(c(4, "d/e").to_string(), "renamed from d/e");
    }

    #[test]
    fn unsafe_names_become_a_rescan() {
        let added = |name: &str| {
            Change::from_wire(FileNotifyInformation {
                action: NotifyAction(1),
                file_name: name.into(),
            })
        };
        for name in [
            "..",
            "..\\..\\x",
            "\\abs",
            "a\\\\b",
            "",
            "a\0b",
            ".",
            "d\\..",
        ] {
            assert_eq!(added(name), Change::Rescan, "{name:?}");
        }
        assert_eq!(added("d\\e.txt"), Change::Added("d/e.txt".into()));
    }

    #[test]
    fn filters_combine() {
        assert_eq!(
            (WatchFilter::FILE_NAME | WatchFilter::DIR_NAME).bits(),
            WatchFilter::NAMES.bits()
        );
        assert_eq!(WatchFilter::from_bits(0x10), WatchFilter::LAST_WRITE);
    }
}
