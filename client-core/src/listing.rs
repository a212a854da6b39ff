//! Directory listings that arrive page by page ([`ReadDir`]), and a breadth-first walk of a
//! whole tree ([`Walk`]).
//!
//! A directory of a million entries is never held whole: each QUERY_DIRECTORY reply (at most
//! 64 KiB of entries, a few hundred names) is handed over before the next is asked for, and
//! the walk's entries pass through a bounded queue, so a walker that stops reading stops the
//! listing too. What a walk holds besides that is the paths of the directories it has found
//! and not yet listed.
//!
//! A listing survives the loss of its QUERY_DIRECTORY. That request is never sent twice (the
//! server's enumeration cursor may already have moved past the page whose reply was lost,
//! docs/FAILOVER.md), so when it is lost with its channel, or the handle is gone with a
//! re-established session, the listing opens the directory again, enumerates it from its
//! start and skips every name it has already handed out. To know those names it keeps a
//! 128-bit keyed digest of each (16 bytes per entry: 16 MiB for a million), not the names
//! themselves.

use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;

use smb3_proto::msg::create::{AccessMask, CreateOptions};
use smb3_proto::msg::fscc::FileInformationClass;
use smb3_proto::msg::query_directory::{QueryDirectoryRequest, QueryDirectoryResponse};
use smb3_proto::msg::reparse::IO_REPARSE_TAG_DFS;
use smb3_proto::msg::FileId;
use smb3_proto::{Command, NtStatus};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::attributes::DosAttributes;
use crate::error::{decode, Error, Result};
use crate::metadata::DirEntry;
use crate::names::check_entry;
use crate::share::{handle_gone, Share, DIR_BUFFER};
use crate::tasks::{self, TaskKind};
use crate::tree::Tree;

/// An open directory whose entries are read a page (one QUERY_DIRECTORY) at a time, from
/// [`Share::list`]. The handle is closed at the end of the listing, by [`ReadDir::close`], or
/// in the background when the `ReadDir` is dropped.
pub struct ReadDir {
    /// The directory as the caller named it.
    path: String,
    /// The directory in `share`: `path`, or where the DFS links on its way lead.
    path_there: String,
    handle: Option<DirHandle>,
    page: std::vec::IntoIter<DirEntry>,
    /// Entries of the pages read whose names are not single path components
    /// ([`Error::UnsafeName`]), each handed out as one error before the next page is read.
    refused: VecDeque<Error>,
    /// Whether the directory's own `.` and `..` entries were listed: left out once each; a
    /// second one is no entry of a real directory and is refused like any unsafe name.
    seen_dot: bool,
    seen_dot_dot: bool,
    /// To open the directory again after a lost QUERY_DIRECTORY.
    share: Share,
    /// Digests of the names handed out (or refused), skipped after a resumption.
    delivered: NameDigests,
    /// Times this listing was resumed (bounded by [`MAX_RESUMPTIONS`]).
    resumptions: u32,
}

/// How many times one listing opens its directory again before the loss is the caller's.
/// Each resumption follows a lost channel or session; a listing that keeps losing them is
/// better told so than retried forever.
const MAX_RESUMPTIONS: u32 = 8;

/// The names a listing has handed out, kept as 128-bit digests keyed at random per listing: a
/// server cannot choose names that collide, and two names collide by chance with a
/// probability of about n² / 2¹²⁹ (nothing for any real directory). 16 bytes per name, in
/// two vectors rather than a hash set (which would take twice that and more while it grows):
/// what was handed out since the last resumption is only appended to, and sorted into the
/// rest when the listing is resumed, which is the only time it is searched.
#[derive(Default)]
struct NameDigests {
    keys: (std::hash::RandomState, std::hash::RandomState),
    /// Handed out before the last resumption: sorted, no duplicates.
    before_resumption: Vec<u128>,
    /// Handed out since.
    since_resumption: Vec<u128>,
}

impl NameDigests {
    fn digest(&self, name: &str) -> u128 {
        (u128::from(self.keys.0.hash_one(name)) << 64) | u128::from(self.keys.1.hash_one(name))
    }

    /// Record `name` as handed out.
    fn record(&mut self, name: &str) {
        let d = self.digest(name);
        self.since_resumption.push(d);
    }

    /// Whether `name` was handed out before the last resumption.
    fn handed_out_before_resumption(&self, name: &str) -> bool {
        self.before_resumption
            .binary_search(&self.digest(name))
            .is_ok()
    }

    /// The listing starts over: everything recorded so far is to be skipped.
    fn resumption(&mut self) {
        self.before_resumption.append(&mut self.since_resumption);
        self.before_resumption.sort_unstable();
        self.before_resumption.dedup();
    }
}

/// Whether a failed QUERY_DIRECTORY leaves the listing able to go on from a new handle: the
/// request was lost with its channel and not sent again, or the handle did not survive a
/// re-established session. Anything the server answered about the directory itself (access
/// denied, not found) is the caller's.
fn resumable(e: &Error) -> bool {
    matches!(e, Error::ConnectionLost { command, .. } if *command == Command::QUERY_DIRECTORY)
        || handle_gone(e)
}

impl std::fmt::Debug for ReadDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadDir")
            .field("path", &self.path)
            .field("open", &self.handle.is_some())
            .finish()
    }
}

/// The open directory; closed in the background if dropped open, and counted among the
/// handles closed for a caller that gave up (`Client::abandoned_handles_closed`): a listing
/// dropped before its end is one, e.g. `read_dir` cancelled by a timeout.
struct DirHandle {
    tree: Arc<Tree>,
    id: FileId,
    open: bool,
}

impl Drop for DirHandle {
    fn drop(&mut self) {
        if self.open {
            self.tree.close_orphan(self.id);
        }
    }
}

impl DirHandle {
    async fn close(mut self) -> Result<()> {
        self.open = false;
        self.tree.close(self.id).await
    }
}

impl Share {
    /// Open the directory `path` for a listing that arrives page by page: what it holds is
    /// one page and a 16-byte digest per name handed out (so that it can go on after a lost
    /// channel without repeating a name), whatever the directory's size (see [`ReadDir`]).
    /// `.` and `..` are left out.
    pub async fn list(&self, path: &str) -> Result<ReadDir> {
        let mut listing = self
            .across_links(
                path,
                |s: Share, p: String| async move { s.list_here(&p).await },
            )
            .await?;
        listing.path = path.to_string();
        Ok(listing)
    }

    /// [`Share::list`] on this share, with no DFS link on the way.
    async fn list_here(&self, path: &str) -> Result<ReadDir> {
        let handle = self.open_dir(path).await?;
        Ok(ReadDir {
            path: path.to_string(),
            path_there: path.to_string(),
            handle: Some(handle),
            page: Vec::new().into_iter(),
            refused: VecDeque::new(),
            seen_dot: false,
            seen_dot_dot: false,
            share: self.clone(),
            delivered: NameDigests::default(),
            resumptions: 0,
        })
    }

    async fn open_dir(&self, path: &str) -> Result<DirHandle> {
        let id = self
            .open_kept(
                path,
                AccessMask::FILE_LIST_DIRECTORY
                    | AccessMask::FILE_READ_ATTRIBUTES
                    | AccessMask::SYNCHRONIZE,
                CreateOptions::DIRECTORY_FILE,
            )
            .await
            .map_err(|e| e.with_path(path))?;
        Ok(DirHandle {
            tree: self.tree.clone(),
            id,
            open: true,
        })
    }

    /// Walk the tree below `root` breadth-first (see [`Walk`]).
    pub fn walk(&self, root: &str, options: WalkOptions) -> Walk {
        let (tx, rx) = mpsc::channel(WALK_QUEUE);
        let driver = tasks::spawn(
            TaskKind::WalkDriver,
            drive(self.clone(), root.to_string(), options, tx),
        );
        Walk { rx, driver }
    }
}

impl ReadDir {
    /// The directory listed.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The next page of entries (one QUERY_DIRECTORY reply); `None` once the directory is
    /// exhausted, when the handle has been closed. A page may be empty only in name: entries
    /// `.` and `..` are dropped, so a page of just those is skipped.
    ///
    /// An entry whose name is not a single path component (`../x`, `a/b`, see
    /// [`check_name`](crate::check_name)) is never handed out: after the page it came in,
    /// each such entry is one `Err(`[`Error::UnsafeName`]`)`, and the listing goes on with
    /// the next call.
    ///
    /// A QUERY_DIRECTORY lost with its channel is no error: the listing goes on from the
    /// directory opened again, without repeating a name (see the module's documentation;
    /// counted in [`FailoverCounters::listings_resumed`](crate::FailoverCounters)).
    pub async fn next_page(&mut self) -> Result<Option<Vec<DirEntry>>> {
        loop {
            let rest: Vec<DirEntry> = self.page.by_ref().collect();
            if !rest.is_empty() {
                return Ok(Some(rest));
            }
            if let Some(refused) = self.refused.pop_front() {
                return Err(refused);
            }
            let Some(handle) = &self.handle else {
                return Ok(None);
            };
            let mut req = QueryDirectoryRequest::new(handle.id, "*", DIR_BUFFER);
            let posix = handle.tree.is_posix();
            if posix {
                // The directory was opened as a POSIX open (`open_kept`), which this class needs.
                req.file_information_class = FileInformationClass::POSIX;
            }
            let tree = handle.tree.clone();
            let resp = match tree
                .core
                .send(&req, tree.call().allowing(&[NtStatus::NO_MORE_FILES]))
                .await
            {
                Ok(resp) => resp,
                Err(e) if resumable(&e) && self.resumptions < MAX_RESUMPTIONS => {
                    self.resume(&e).await?;
                    continue;
                }
                Err(e) => return Err(e.with_path(&self.path)),
            };
            let page: Vec<DirEntry> = if resp.header.status == NtStatus::NO_MORE_FILES {
                Vec::new()
            } else if posix {
                decode(
                    Command::QUERY_DIRECTORY,
                    QueryDirectoryResponse::decode(&resp.msg).and_then(|r| r.posix_entries()),
                )?
                .into_iter()
                .map(DirEntry::from)
                .collect()
            } else {
                decode(
                    Command::QUERY_DIRECTORY,
                    QueryDirectoryResponse::decode(&resp.msg).and_then(|r| r.id_both_entries()),
                )?
                .into_iter()
                .map(DirEntry::from)
                .collect()
            };
            if page.is_empty() {
                self.close_handle().await?;
                return Ok(None);
            }
            let mut entries = Vec::with_capacity(page.len());
            for e in page {
                let own = match e.name.as_str() {
                    "." => Some(&mut self.seen_dot),
                    ".." => Some(&mut self.seen_dot_dot),
                    _ => None,
                };
                if let Some(seen) = own {
                    if !std::mem::replace(seen, true) {
                        continue;
                    }
                }
                if self.resumptions > 0 && self.delivered.handed_out_before_resumption(&e.name) {
                    continue;
                }
                self.delivered.record(&e.name);
                match check_entry(&self.path, &e.name) {
                    Ok(()) => entries.push(e),
                    Err(refused) => {
                        tracing::warn!(error = %refused, "directory entry refused");
                        self.refused.push_back(refused);
                    }
                }
            }
            self.page = entries.into_iter();
        }
    }

    /// Open the directory again after `lost` and start over, skipping what was handed out.
    async fn resume(&mut self, lost: &Error) -> Result<()> {
        self.resumptions += 1;
        tracing::info!(
            path = %self.path_there,
            error = %lost,
            resumption = self.resumptions,
            "directory listing lost its request; opening the directory again"
        );
        // The old handle, if the server still has it, is closed in the background.
        drop(self.handle.take());
        let handle = self.share.open_dir(&self.path_there).await?;
        self.handle = Some(handle);
        self.delivered.resumption();
        // The new enumeration lists the directory's own entries again.
        self.seen_dot = false;
        self.seen_dot_dot = false;
        self.share.tree.core.multichannel.failover.listing_resumed();
        Ok(())
    }

    /// The next entry; `None` at the end. An entry refused for its name is one
    /// `Err(`[`Error::UnsafeName`]`)` and the listing goes on (see [`ReadDir::next_page`]).
    pub async fn next_entry(&mut self) -> Result<Option<DirEntry>> {
        loop {
            if let Some(e) = self.page.next() {
                return Ok(Some(e));
            }
            match self.next_page().await? {
                Some(page) => self.page = page.into_iter(),
                None => return Ok(None),
            }
        }
    }

    /// Stop listing and close the directory, waiting for the server's answer.
    pub async fn close(mut self) -> Result<()> {
        self.close_handle().await
    }

    async fn close_handle(&mut self) -> Result<()> {
        match self.handle.take() {
            Some(h) => h.close().await.map_err(|e| e.with_path(&self.path)),
            None => Ok(()),
        }
    }
}

/// Entries a walk keeps ready for its reader; listings wait while it is full.
const WALK_QUEUE: usize = 1024;

/// How a [`Walk`] goes.
#[derive(Clone, Copy, Debug)]
pub struct WalkOptions {
    /// Directories listed at the same time (at least 1).
    pub concurrency: usize,
    /// Levels below the root to go into: 1 lists only the root, `None` has no limit.
    pub max_depth: Option<usize>,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            concurrency: 4,
            max_depth: None,
        }
    }
}

/// An entry found by a [`Walk`].
#[derive(Clone, Debug)]
pub struct WalkEntry {
    /// Its path in the share (`root/dir/name`).
    pub path: String,
    /// 1 for an entry of the root, 2 below that, and so on.
    pub depth: usize,
    /// The entry as the listing gave it.
    pub entry: DirEntry,
}

/// A directory a [`Walk`] could not list (whole or in part); the walk goes on without it.
#[derive(Debug)]
pub struct WalkError {
    /// The directory.
    pub path: String,
    /// Why.
    pub error: Error,
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.error)
    }
}

impl std::error::Error for WalkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// A breadth-first walk of a tree, from [`Share::walk`]: directories are listed in the order
/// they were found, `concurrency` at a time, and every entry below the root (directories
/// included, before what they hold) comes out of [`Walk::next`]. A directory that cannot be
/// listed gives one [`WalkError`] and the walk goes on; so does each entry refused for its
/// name ([`Error::UnsafeName`], its `path` the directory that listed it), and the rest of that
/// directory is still walked. Nothing leads the walk in a circle:
/// reparse points (symbolic links, junctions, as Windows reports them) are reported but not
/// entered (but for DFS links, which lead into the share behind them), and a directory whose file id was already walked is reported but not entered
/// again (a server such as Samba shows a symbolic link to a directory as that directory,
/// with its id). Dropping the walk stops it and closes what it had open.
pub struct Walk {
    rx: mpsc::Receiver<std::result::Result<WalkEntry, WalkError>>,
    driver: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Walk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Walk").finish_non_exhaustive()
    }
}

impl Walk {
    /// The next entry or error; `None` once the whole tree was listed.
    pub async fn next(&mut self) -> Option<std::result::Result<WalkEntry, WalkError>> {
        self.rx.recv().await
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

type WalkSender = mpsc::Sender<std::result::Result<WalkEntry, WalkError>>;

/// Hand out directories to list, `concurrency` at a time, queueing the subdirectories each
/// listing finds, until none is left or the reader is gone.
async fn drive(share: Share, root: String, options: WalkOptions, tx: WalkSender) {
    // Directories entered, by the server's file id (0: the server gave none) and, in a DFS
    // namespace, the link they lie behind: file ids count one share's files, and one
    // directory reached through two links is walked under both names.
    let mut entered = HashSet::new();
    match share.metadata(&root).await {
        Ok(m) => {
            entered.insert((share.link_of(&root), m.file_id));
        }
        Err(error) => {
            let _ = tx.send(Err(WalkError { path: root, error })).await;
            return;
        }
    }
    let mut queue = VecDeque::from([(root, 0usize)]);
    let mut listings = JoinSet::new();
    loop {
        while listings.len() < options.concurrency.max(1) {
            let Some((dir, depth)) = queue.pop_front() else {
                break;
            };
            tasks::spawn_into(
                &mut listings,
                TaskKind::WalkListing,
                list_one(share.clone(), dir, depth, options, tx.clone()),
            );
        }
        match listings.join_next().await {
            Some(Ok(Some(found))) => queue.extend(
                found
                    .into_iter()
                    .filter(|(path, _, id)| *id == 0 || entered.insert((share.link_of(path), *id)))
                    .map(|(path, depth, _)| (path, depth)),
            ),
            Some(Ok(None)) => return, // the reader is gone
            Some(Err(e)) => tracing::debug!(error = %e, "a walk's listing ended early"),
            None => return,
        }
    }
}

/// List `dir` (at `depth`) into `tx`; returns the subdirectories to go into (path, depth,
/// file id), or `None` when the reader is gone.
async fn list_one(
    share: Share,
    dir: String,
    depth: usize,
    options: WalkOptions,
    tx: WalkSender,
) -> Option<Vec<(String, usize, u64)>> {
    let mut found = Vec::new();
    let fail = |error| {
        Err(WalkError {
            path: dir.clone(),
            error,
        })
    };
    let mut listing = match share.list(&dir).await {
        Ok(l) => l,
        Err(e) => {
            tx.send(fail(e)).await.ok()?;
            return Some(found);
        }
    };
    let deeper = options.max_depth.is_none_or(|max| depth + 1 < max);
    loop {
        match listing.next_page().await {
            Ok(Some(page)) => {
                for entry in page {
                    let path = join(&dir, &entry.name);
                    let reparse = entry
                        .metadata
                        .attributes
                        .contains(DosAttributes::REPARSE_POINT);
                    // A DFS link leads into the share behind it, which the listing reaches
                    // by itself (`share::links`); any other reparse point stays closed.
                    let dfs_link = entry.reparse_tag == IO_REPARSE_TAG_DFS && share.follows_links();
                    if deeper && entry.metadata.is_dir() && (!reparse || dfs_link) {
                        found.push((path.clone(), depth + 1, entry.file_id));
                    }
                    let item = WalkEntry {
                        path,
                        depth: depth + 1,
                        entry,
                    };
                    tx.send(Ok(item)).await.ok()?;
                }
            }
            Ok(None) => return Some(found),
            // One entry left out for its name: say so, and list the rest.
            Err(e @ Error::UnsafeName { .. }) => tx.send(fail(e)).await.ok()?,
            Err(e) => {
                tx.send(fail(e)).await.ok()?;
                return Some(found);
            }
        }
    }
}

/// `dir/name`, with no leading slash for the share's root (`""`).
fn join(dir: &str, name: &str) -> String {
    let dir = dir.trim_end_matches(['/', '\\']);
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::{join, resumable, NameDigests};
    use crate::error::{ConnectionLossCause, Error};
    use smb3_proto::{Command, NtStatus};

    #[test]
    fn names_handed_out_are_known_after_a_resumption_and_differ_by_case() {
        let mut names = NameDigests::default();
        names.record("report.txt");
        names.record("b");
        assert!(
            !names.handed_out_before_resumption("report.txt"),
            "nothing to skip before a resumption"
        );
        names.resumption();
        assert!(names.handed_out_before_resumption("report.txt"));
        assert!(names.handed_out_before_resumption("b"));
        assert!(
            !names.handed_out_before_resumption("Report.txt"),
            "names are compared exactly"
        );
        names.record("c");
        assert!(!names.handed_out_before_resumption("c"));
        names.resumption();
        assert!(names.handed_out_before_resumption("c"));
        assert!(names.handed_out_before_resumption("report.txt"));
        // Two listings key their digests differently.
        let other = NameDigests::default();
        assert_ne!(names.digest("report.txt"), other.digest("report.txt"));
    }

    #[test]
    fn only_a_lost_query_or_a_lost_handle_resumes_a_listing() {
        let lost = |command| Error::ConnectionLost {
            command,
            cause: ConnectionLossCause::ClosedByServer,
        };
        assert!(resumable(&lost(Command::QUERY_DIRECTORY)));
        assert!(!resumable(&lost(Command::CREATE)));
        let status = |status| Error::Status {
            status,
            command: Command::QUERY_DIRECTORY,
            path: None,
        };
        assert!(resumable(&status(NtStatus::FILE_CLOSED)));
        assert!(resumable(&status(NtStatus::INVALID_HANDLE)));
        assert!(!resumable(&status(NtStatus::ACCESS_DENIED)));
        assert!(!resumable(&Error::ApiMisuse("x")));
    }

    #[test]
    fn paths_join_without_doubled_or_leading_slashes() {
        assert_eq!(join("", "a"), "a");
        assert_eq!(join("/", "a"), "a");
        assert_eq!(join("d", "a"), "d/a");
        assert_eq!(join("d/", "a"), "d/a");
    }
}
