//! `SmbFs`: the file system the mount serves, in terms of node ids, handles and plain values;
//! no FUSE types, so it is driven directly by tests. The FUSE adapter (`adapter.rs`) only
//! translates requests and replies.
//!
//! Every operation is an `async fn` on `&self`: the adapter runs each request as its own
//! tokio task, so slow requests never hold up others.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use smb3_client::{
    DirEntry, Error, File, FileTimes, IfExists, IfLocked, LockKind, Metadata, NtStatus,
    OpenOptions, ReadDir, Share,
};

use crate::deferred_close::{DeferredCloses, DEFERRED_CLOSE};
use crate::dir_stream::{DirCursor, Lister};
use crate::dir_watch::{DirWatches, StaleSink};
pub use crate::errno::{FsError, FsResult};
use crate::inode::{at_or_below, InodeTable};
use crate::io_stats::IoStats;
use crate::prefetch::{Limits, PrefetchBudget, PrefetchStats, Prefetcher};
use crate::write_behind::{Budget, WriteBehind};

/// How the file system presents itself.
#[derive(Clone, Debug)]
pub struct FsConfig {
    /// Owner of every file (mount.cifs `uid=`).
    pub uid: u32,
    /// Group of every file (`gid=`).
    pub gid: u32,
    /// Permission bits of files (`file_mode=`); write bits are hidden on read-only files.
    pub file_mode: u32,
    /// Permission bits of directories (`dir_mode=`).
    pub dir_mode: u32,
    /// How long the kernel may cache attributes and names (`actimeo=`).
    pub ttl: Duration,
    /// Refuse every change with EROFS (`ro`).
    pub read_only: bool,
    /// Retry operations the server did not answer because it was unreachable (`hard`).
    pub hard: bool,
    /// Bytes of writes kept in flight behind the applications, for the whole mount
    /// (`write_behind=`); 0 sends each write before answering it.
    pub write_behind: u64,
    /// Directories watched for changes made by other clients at most (`watch_dirs=`; 0:
    /// none), see [`crate::dir_watch`].
    pub watch_dirs: usize,
    /// How long a read-only handle is kept open after its last close (`closetimeo=`; 0:
    /// closed at once), see [`crate::deferred_close`].
    pub close_delay: Duration,
    /// The largest read-ahead window of one sequential reader in the daemon (`prefetch=`;
    /// 0: none), see [`crate::prefetch`]. The mount as a whole keeps at most four such
    /// windows fetched.
    pub prefetch: u64,
    /// Bytes per READ the library sends (its I/O size): the size of a prefetched part.
    pub io_size: u32,
    /// The kernel's read-ahead window (`max_readahead=`; 0 with `cache=none`).
    pub kernel_readahead: u64,
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            uid: 0,
            gid: 0,
            file_mode: 0o755,
            dir_mode: 0o755,
            ttl: Duration::from_secs(1),
            read_only: false,
            hard: false,
            write_behind: 64 << 20,
            watch_dirs: 32,
            close_delay: DEFERRED_CLOSE,
            prefetch: 64 << 20,
            io_size: 1 << 20,
            kernel_readahead: 0,
        }
    }
}

/// File or directory (SMB has no other kinds without POSIX extensions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
}

/// An open handle, as OPEN returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The handle number.
    pub fh: u64,
    /// The kernel may keep the pages it cached of the file (FOPEN_KEEP_CACHE).
    pub keep_cache: bool,
}

/// What `stat` shows for a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Node id, also `st_ino`.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Last access.
    pub atime: SystemTime,
    /// Last modification.
    pub mtime: SystemTime,
    /// Last status change.
    pub ctime: SystemTime,
    /// Creation.
    pub crtime: SystemTime,
    /// File or directory.
    pub kind: Kind,
    /// Permission bits.
    pub perm: u16,
    /// Link count.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Preferred I/O size.
    pub blksize: u32,
}

/// Changes asked for by `setattr`. `None` leaves a value as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    /// New permission bits (only the write bits mean anything: none = read-only attribute).
    pub mode: Option<u32>,
    /// New owner (accepted and ignored, as mount.cifs without POSIX extensions).
    pub uid: Option<u32>,
    /// New group (accepted and ignored).
    pub gid: Option<u32>,
    /// New size.
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SystemTime>,
    /// New modification time.
    pub mtime: Option<SystemTime>,
}

/// How a file is opened.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenMode {
    /// For reading.
    pub read: bool,
    /// For writing.
    pub write: bool,
    /// Truncate to 0 on open (O_TRUNC).
    pub truncate: bool,
    /// Fail if it exists (O_EXCL, create only).
    pub exclusive: bool,
}

impl OpenMode {
    /// From open(2) flags.
    pub fn from_flags(flags: i32) -> Self {
        let acc = flags & libc::O_ACCMODE;
        OpenMode {
            read: acc == libc::O_RDONLY || acc == libc::O_RDWR,
            write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
            truncate: flags & libc::O_TRUNC != 0,
            exclusive: flags & libc::O_EXCL != 0,
        }
    }
}

/// One directory entry as READDIR(PLUS) returns it.
#[derive(Clone, Debug)]
pub struct Listed {
    /// Name within the directory.
    pub name: String,
    /// File or directory.
    pub kind: Kind,
    /// The server's file id (0 if none).
    pub file_id: u64,
    /// Its attributes, `ino` not yet assigned (0).
    pub attr: Attr,
}

/// A directory opened by OPENDIR: where its listing stands.
struct OpenDir {
    /// Its path on the share.
    path: String,
    cursor: tokio::sync::Mutex<DirCursor<ReadDir>>,
}

impl OpenDir {
    /// Close the listing at the server if it is still open.
    async fn close(&self) {
        let listing = self.cursor.lock().await.take_listing();
        if let Some(listing) = listing {
            if let Err(e) = listing.close().await {
                tracing::debug!(path = self.path, error = %e, "closing a listing");
            }
        }
    }
}

/// Starts listings of one directory of the share, retried as every request (`hard`).
struct ShareLister<'a> {
    fs: &'a SmbFs,
    path: &'a str,
}

impl Lister for ShareLister<'_> {
    type Pages = ReadDir;
    async fn open(&self) -> Result<ReadDir, Error> {
        self.fs.retry(|| self.fs.share.list(self.path)).await
    }
}

/// `statfs` numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Total blocks of `bsize`.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Blocks available to the user.
    pub bavail: u64,
    /// Block size.
    pub bsize: u32,
    /// Longest name.
    pub namelen: u32,
}

struct OpenFile {
    file: File,
    writable: bool,
    ino: u64,
    /// Times set explicitly while this handle was open for writing, to set again once it is
    /// closed: Samba moves the write time of a written file 2 s after the first write and at
    /// close, over a time set meanwhile (through this handle or the path), which would undo
    /// `cp -a`, `tar -x` and `touch` on a file being written. A later write cancels them.
    pending_times: Mutex<Option<FileTimes>>,
    /// Held by RELEASE from its first step until the handle is closed on the server and the
    /// pending times are set again; anything that must not race that close (setting times,
    /// reading attributes, renaming the file) waits for it. The handle stays in the table
    /// meanwhile, so times set during the close are still recorded on it.
    closing: tokio::sync::Mutex<bool>,
    /// Its writes in flight (write-behind).
    wb: Arc<WriteBehind>,
    /// Its read-ahead (`None` with `prefetch=0`).
    prefetch: Option<Prefetcher>,
    /// Byte-range locks held through this handle, by lock owner; the async mutex also puts
    /// the handle's lock requests in order.
    locks: tokio::sync::Mutex<Vec<Held>>,
}

/// A lock held on the server through one handle, for one POSIX lock owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    start: u64,
    /// Exclusive end.
    end: u64,
    kind: LockKind,
    owner: u64,
}

/// A POSIX lock request's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockType {
    /// F_RDLCK.
    Read,
    /// F_WRLCK.
    Write,
    /// F_UNLCK.
    Unlock,
}

/// Attempts of a waiting lock (F_SETLKW, flock) each bounded by the library's request
/// timeout, before EINTR is returned.
const LOCK_WAIT_ATTEMPTS: u32 = 60;

/// How many times RELEASE sets pending times again when SETATTRs keep recording new ones
/// while it does: each round needs another SETATTR by path during the previous round's, so
/// this only bounds a pathological loop.
const RESET_TIMES_ROUNDS: u32 = 8;

fn lock_refused(e: &Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::LOCK_NOT_GRANTED | NtStatus::FILE_LOCK_CONFLICT)
    )
}

/// The mounted share.
pub struct SmbFs {
    share: Share,
    /// The mounted directory inside the share ("" for its root), `/`-separated.
    prefix: String,
    cfg: FsConfig,
    inodes: Arc<Mutex<InodeTable>>,
    /// Watches on directories in use, which drop what the kernel caches of them when the
    /// server says they changed.
    watches: DirWatches,
    /// Open handles by FUSE handle number (shared with the lease-following tasks).
    files: Arc<Mutex<HashMap<u64, Arc<OpenFile>>>>,
    dirs: Mutex<HashMap<u64, Arc<OpenDir>>>,
    next_fh: AtomicU64,
    /// Write-behind's memory budget; `None` when it is off.
    budget: Option<Budget>,
    /// Drops the kernel's cached pages of a node (see [`SmbFs::on_lease_break`]).
    drop_pages: OnceLock<PageDropper>,
    /// Read-only handles kept open a moment after their last close (with the page cache on).
    deferred: Arc<DeferredCloses>,
    /// Sizes of the kernel's READs and WRITEs.
    io: IoStats,
    /// What the prefetchers may hold, for the whole mount.
    prefetch_budget: PrefetchBudget,
    prefetch_stats: Arc<PrefetchStats>,
    /// [`SmbFs::prefetch_cap`] and when it was worked out.
    prefetch_cap: Mutex<Option<(std::time::Instant, u64)>>,
}

/// What drops the kernel's cached pages of a node: FUSE's inode invalidation.
type PageDropper = Arc<dyn Fn(u64) + Send + Sync>;

impl std::fmt::Debug for SmbFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmbFs")
            .field("share", &self.share.name())
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// How long a directory nobody uses stays watched.
const WATCH_IDLE: Duration = Duration::from_secs(60);

/// Attempts of one operation under `hard` before the error is returned after all (about an
/// hour with the library's own timeouts in between).
const HARD_ATTEMPTS: u32 = 120;

/// Whether `e` says the server could not be reached (worth retrying under `hard`).
fn unreachable(e: &Error) -> bool {
    matches!(
        e,
        Error::ConnectionLost { .. } | Error::Timeout { .. } | Error::Io { .. }
    )
}

/// A name whose file is being deleted (unlinked while some handle, often ours before the
/// kernel's asynchronous RELEASE, still has it open) is gone for POSIX.
/// Drop what was fetched ahead for every handle of `ino`: its bytes changed, or may have.
fn drop_prefetched(files: &Mutex<HashMap<u64, Arc<OpenFile>>>, ino: u64) {
    let files = files.lock().unwrap();
    for h in files.values().filter(|h| h.ino == ino) {
        if let Some(p) = &h.prefetch {
            p.drop_streak();
        }
    }
}

fn gone_if_deleted(e: Error) -> FsError {
    if e.status() == Some(NtStatus::DELETE_PENDING) {
        FsError::new(libc::ENOENT)
    } else {
        e.into()
    }
}

/// How long an open of a name that is being deleted waits for the delete to finish.
const DELETE_PENDING_WAIT: Duration = Duration::from_secs(5);

/// Run `op` (an open) again while it fails with DELETE_PENDING: the name is free once the
/// last handle of the deleted file is closed, usually a RELEASE that is on its way. Bounded by
/// [`DELETE_PENDING_WAIT`].
async fn until_deleted<T, Fut, F>(mut op: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let start = std::time::Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        match op().await {
            Err(e)
                if e.status() == Some(NtStatus::DELETE_PENDING)
                    && start.elapsed() < DELETE_PENDING_WAIT =>
            {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

fn erofs() -> FsError {
    FsError::new(libc::EROFS)
}

fn enoent() -> FsError {
    FsError::new(libc::ENOENT)
}

impl SmbFs {
    /// Serve `prefix` (a directory of `share`, "" for its root).
    pub fn new(share: Share, prefix: &str, cfg: FsConfig) -> SmbFs {
        let prefix = prefix
            .split('/')
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("/");
        let inodes = Arc::new(Mutex::new(InodeTable::new()));
        SmbFs {
            watches: DirWatches::new(share.clone(), inodes.clone(), cfg.watch_dirs, WATCH_IDLE),
            share,
            prefix,
            inodes,
            files: Arc::new(Mutex::new(HashMap::new())),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            budget: (cfg.write_behind > 0).then(|| Budget::new(cfg.write_behind)),
            drop_pages: OnceLock::new(),
            deferred: Arc::new(DeferredCloses::new(cfg.close_delay)),
            io: IoStats::default(),
            prefetch_budget: PrefetchBudget::new(cfg.prefetch.saturating_mul(4)),
            prefetch_stats: Arc::new(PrefetchStats::default()),
            prefetch_cap: Mutex::new(None),
            cfg,
        }
    }

    /// Keep the kernel's page cache true to the server: from now on, every file opened with
    /// a lease that grants Read caching is followed, and when the server takes that away (a
    /// break: another client opened the file to change it, or wrote it), `drop_pages` is
    /// called with the file's node at once, so the next read comes from the server. Set once,
    /// by the mount when the page cache is on (`cache=strict`).
    pub fn on_lease_break(&self, drop_pages: impl Fn(u64) + Send + Sync + 'static) {
        let _ = self.drop_pages.set(Arc::new(drop_pages));
    }

    /// Follow `file`'s lease and drop `ino`'s cached pages when it stops granting Read
    /// caching. The task ends with the session's last open of the file.
    /// Also drops what the daemon fetched ahead of `ino`'s readers (with or without the
    /// page cache).
    fn follow_lease(&self, ino: u64, file: &File) {
        let Some(mut lease) = file.lease_changes() else {
            return;
        };
        let drop_pages = self.drop_pages.get().cloned();
        let deferred = self.deferred.clone();
        let files = self.files.clone();
        tokio::spawn(async move {
            let mut read = lease.current().read;
            while let Some(now) = lease.changed().await {
                if read && !now.read {
                    tracing::debug!(ino, lease = %now, "lease break: dropping cached pages");
                    drop_prefetched(&files, ino);
                    if let Some(drop_pages) = &drop_pages {
                        drop_pages(ino);
                    }
                }
                read = now.read;
                if !(now.read && now.handle) {
                    // A parked handle needs both: without Handle caching another client waits
                    // for it to go, without Read caching its pages are no longer vouched for.
                    deferred.close_now(ino).await;
                }
            }
        });
    }

    /// Keep the kernel's cached names and attributes true to the server: from now on, the
    /// directories in use are watched, and what the server says changed in them is sent to
    /// `sink` to be forgotten. Set once, by the mount.
    pub fn on_server_change(&self, sink: StaleSink) {
        self.watches.deliver_to(sink);
    }

    /// Directories watched now.
    pub fn watched_dirs(&self) -> usize {
        self.watches.count()
    }

    /// `dir` is in use: make sure it is watched (in the background).
    fn keep_watching(&self, dir: u64) {
        if self.watches.wants(dir) {
            if let Ok(path) = self.path_of(dir) {
                self.watches.start(dir, path);
            }
        }
    }

    /// The share served.
    pub fn share(&self) -> &Share {
        &self.share
    }

    /// The settings.
    pub fn config(&self) -> &FsConfig {
        &self.cfg
    }

    /// Sizes of the kernel's READ and WRITE requests so far.
    pub fn io_stats(&self) -> &IoStats {
        &self.io
    }

    /// Read-only handles parked after their last close, to be reused (see
    /// [`crate::deferred_close`]).
    pub fn parked_handles(&self) -> usize {
        self.deferred.count()
    }

    /// Files open through the mount now.
    pub fn open_files(&self) -> usize {
        self.files.lock().unwrap().len()
    }

    /// Nodes the kernel holds (the root included).
    pub fn known_nodes(&self) -> usize {
        self.inodes.lock().unwrap().len()
    }

    /// Run `op`, again while it fails for want of the server if mounted `hard`.
    async fn retry<T, Fut, F>(&self, mut op: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut attempt = 1;
        loop {
            match op().await {
                Err(e) if self.cfg.hard && unreachable(&e) && attempt < HARD_ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "server unreachable; retrying (hard)");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The share path of a mount-relative path.
    fn on_share(&self, rel: &str) -> String {
        match (self.prefix.is_empty(), rel.is_empty()) {
            (true, _) => rel.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}/{rel}", self.prefix),
        }
    }

    fn path_of(&self, ino: u64) -> FsResult<String> {
        let rel = self.inodes.lock().unwrap().path(ino).ok_or_else(enoent)?;
        Ok(self.on_share(&rel))
    }

    fn child_of(&self, parent: u64, name: &str) -> FsResult<String> {
        // NAME_MAX: the server would call a longer name invalid (EINVAL), POSIX says this.
        if name.len() > 255 {
            return Err(FsError::new(libc::ENAMETOOLONG));
        }
        let rel = self
            .inodes
            .lock()
            .unwrap()
            .child_path(parent, name)
            .ok_or_else(enoent)?;
        Ok(self.on_share(&rel))
    }

    fn handle(&self, fh: u64) -> FsResult<Arc<OpenFile>> {
        self.files
            .lock()
            .unwrap()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::new(libc::EBADF))
    }

    fn writable(&self) -> FsResult<()> {
        if self.cfg.read_only {
            Err(erofs())
        } else {
            Ok(())
        }
    }

    /// What `stat` shows for metadata `m` of node `ino`.
    pub fn attr(&self, ino: u64, m: &Metadata) -> Attr {
        let dir = m.is_dir();
        let mut perm = if dir {
            self.cfg.dir_mode
        } else {
            self.cfg.file_mode
        };
        // mount.cifs: the read-only attribute hides the write bits of a file.
        if !dir && m.is_readonly() {
            perm &= !0o222;
        }
        let mtime = m.modified.unwrap_or(UNIX_EPOCH);
        Attr {
            ino,
            size: m.len,
            blocks: m.allocation_size.div_ceil(512),
            atime: m.accessed.unwrap_or(mtime),
            mtime,
            ctime: m.changed.unwrap_or(mtime),
            crtime: m.created.unwrap_or(mtime),
            kind: if dir { Kind::Directory } else { Kind::File },
            perm: perm as u16,
            nlink: if dir { 2 } else { m.links.max(1) },
            uid: self.cfg.uid,
            gid: self.cfg.gid,
            blksize: 1 << 20,
        }
    }

    /// Stat `path` and take one lookup of `(parent, name)` for the kernel.
    async fn entry(&self, parent: u64, name: &str, path: &str) -> FsResult<Attr> {
        // A node known under this name with writes or a close under way: its size and times
        // are the server's only once they are done (as for GETATTR).
        let known = self.inodes.lock().unwrap().child(parent, name);
        if let Some(ino) = known {
            self.drain_ino(ino).await;
        }
        let m = self
            .retry(|| self.share.metadata(path))
            .await
            .map_err(gone_if_deleted)?;
        let ino = self
            .inodes
            .lock()
            .unwrap()
            .remember(parent, name, m.file_id);
        Ok(self.attr(ino, &m))
    }

    /// LOOKUP: the entry `name` in directory `parent`.
    pub async fn lookup(&self, parent: u64, name: &str) -> FsResult<Attr> {
        let path = self.child_of(parent, name)?;
        let found = self.entry(parent, name, &path).await;
        if found.is_ok() {
            self.keep_watching(parent);
        }
        found
    }

    /// FORGET: the kernel dropped `n` lookups of `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        self.inodes.lock().unwrap().forget(ino, n);
    }

    /// Record one lookup of `(parent, name)` (a READDIRPLUS entry); returns its node id.
    pub fn remember(&self, parent: u64, name: &str, file_id: u64) -> u64 {
        self.inodes.lock().unwrap().remember(parent, name, file_id)
    }

    /// GETATTR, through the open handle `fh` when there is one (so an unlinked open file
    /// still answers).
    pub async fn getattr(&self, ino: u64, fh: Option<u64>) -> FsResult<Attr> {
        self.drain_ino(ino).await;
        if let Some(h) = fh.and_then(|fh| self.handle(fh).ok()) {
            let m = self.retry(|| h.file.metadata()).await?;
            return Ok(self.attr(ino, &m));
        }
        let path = self.path_of(ino)?;
        let m = self
            .retry(|| self.share.metadata(&path))
            .await
            .map_err(gone_if_deleted)?;
        Ok(self.attr(ino, &m))
    }

    /// SETATTR: size, times and the read-only attribute; owner and group are accepted and
    /// ignored (mount.cifs without POSIX extensions does the same).
    pub async fn setattr(&self, ino: u64, fh: Option<u64>, set: SetAttr) -> FsResult<Attr> {
        let changes =
            set.size.is_some() || set.atime.is_some() || set.mtime.is_some() || set.mode.is_some();
        if changes {
            self.writable()?;
        }
        self.drain_ino(ino).await;
        let path = self.path_of(ino);
        let handle = fh
            .and_then(|fh| self.handle(fh).ok())
            .filter(|h| h.writable);
        if let Some(size) = set.size {
            drop_prefetched(&self.files, ino);
            match &handle {
                Some(h) => self.retry(|| h.file.set_len(size)).await?,
                None => {
                    let path = path.as_ref().map_err(|e| FsError::new(e.errno))?;
                    let f = self
                        .share
                        .open(path, &OpenOptions::new().write(true))
                        .await?;
                    let r = f.set_len(size).await;
                    let closed = f.close().await;
                    r?;
                    closed?;
                }
            }
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let times = FileTimes {
                accessed: set.atime,
                modified: set.mtime,
                ..FileTimes::default()
            };
            // Recorded before they are sent: a close of a handle on this file that is
            // under way then either sees them (and sets them again after it) or ended
            // before they reach the server.
            self.times_set(ino, &times);
            match &handle {
                Some(h) => self.retry(|| h.file.set_times(&times)).await?,
                None => {
                    let path = path.as_ref().map_err(|e| FsError::new(e.errno))?;
                    self.retry(|| self.share.set_times(path, &times)).await?
                }
            }
        }
        if let Some(mode) = set.mode {
            let path = path.as_ref().map_err(|e| FsError::new(e.errno))?;
            let m = self.share.metadata(path).await?;
            if !m.is_dir() {
                self.share.set_readonly(path, mode & 0o222 == 0).await?;
            }
        }
        self.getattr(ino, fh).await
    }

    /// MKDIR.
    pub async fn mkdir(&self, parent: u64, name: &str) -> FsResult<Attr> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        self.share.create_dir(&path).await?;
        self.entry(parent, name, &path).await
    }

    /// MKNOD: regular files only (SMB has no device, FIFO or socket files: EPERM).
    pub async fn mknod(&self, parent: u64, name: &str, mode: u32) -> FsResult<Attr> {
        self.writable()?;
        // mode_t is u16 on macOS: the casts are needed there.
        #[allow(clippy::unnecessary_cast)]
        let (fmt, reg) = (libc::S_IFMT as u32, libc::S_IFREG as u32);
        if mode & fmt != reg {
            return Err(FsError::new(libc::EPERM));
        }
        let path = self.child_of(parent, name)?;
        let f = self
            .share
            .open(&path, &OpenOptions::new().write(true).create_new(true))
            .await?;
        f.close().await?;
        self.entry(parent, name, &path).await
    }

    /// UNLINK. A read-only file is made writable first, as POSIX lets anyone who may write
    /// the directory remove it.
    pub async fn unlink(&self, parent: u64, name: &str) -> FsResult<()> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        let node = self.inodes.lock().unwrap().child(parent, name);
        self.close_parked_at(&path).await;
        match self.share.remove_file(&path).await {
            Err(e) if e.status() == Some(NtStatus::CANNOT_DELETE) => {
                self.share.set_readonly(&path, false).await?;
                self.share.remove_file(&path).await?;
            }
            r => r?,
        }
        self.inodes.lock().unwrap().unlinked(parent, name);
        if let Some(ino) = node {
            // A handle of the file parked while it was being deleted (see
            // `DeferredCloses::park`): the name is gone on the server only once it is closed.
            self.deferred.close_now(ino).await;
        }
        Ok(())
    }

    /// RMDIR.
    pub async fn rmdir(&self, parent: u64, name: &str) -> FsResult<()> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        self.close_parked_at(&path).await;
        self.end_watches_at(&path).await;
        self.share.remove_dir(&path).await?;
        self.inodes.lock().unwrap().unlinked(parent, name);
        Ok(())
    }

    /// RENAME, replacing an existing target unless `noreplace`. A directory replaces an empty
    /// directory (POSIX) by removing it first, which SMB cannot do in one step.
    pub async fn rename(
        &self,
        parent: u64,
        name: &str,
        new_parent: u64,
        new_name: &str,
        noreplace: bool,
    ) -> FsResult<()> {
        self.writable()?;
        let from = self.child_of(parent, name)?;
        let to = self.child_of(new_parent, new_name)?;
        self.close_parked_at(&from).await;
        self.close_parked_at(&to).await;
        self.end_watches_at(&from).await;
        self.end_watches_at(&to).await;
        // Held until the inode table has the new name: a RELEASE of a file being renamed
        // (rsync renames its temporary file while the kernel's RELEASE of it is still on its
        // way) then sets its pending times by the name the server has at that moment.
        let writers = self.writers_under(&from);
        let mut closes_held = Vec::with_capacity(writers.len());
        for h in &writers {
            closes_held.push(h.closing.lock().await);
        }
        let if_exists = if noreplace {
            IfExists::Fail
        } else {
            IfExists::Replace
        };
        let mut renamed = self.share.rename(&from, &to, if_exists).await;
        // A lookup below `from` may have started a watch there meanwhile, which the server
        // counts as an open handle below: end it and try once more.
        if matches!(&renamed, Err(e) if e.status() == Some(NtStatus::ACCESS_DENIED))
            && self.end_watches_at(&from).await > 0
        {
            renamed = self.share.rename(&from, &to, if_exists).await;
        }
        match renamed {
            Ok(()) => {}
            Err(e)
                if !noreplace
                    && matches!(
                        e.status(),
                        Some(NtStatus::ACCESS_DENIED | NtStatus::OBJECT_NAME_COLLISION)
                    ) =>
            {
                let (src, dst) = (
                    self.share.metadata(&from).await?,
                    self.share.metadata(&to).await,
                );
                match dst {
                    Ok(dst) if dst.is_dir() && src.is_dir() => {
                        self.share.remove_dir(&to).await?;
                        self.share.rename(&from, &to, IfExists::Fail).await?;
                    }
                    Ok(dst) if dst.is_dir() => return Err(FsError::new(libc::EISDIR)),
                    Ok(_) if src.is_dir() => return Err(FsError::new(libc::ENOTDIR)),
                    _ => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
        self.inodes
            .lock()
            .unwrap()
            .renamed(parent, name, new_parent, new_name);
        drop(closes_held);
        Ok(())
    }

    /// LINK: a new name for the file `ino`.
    pub async fn link(&self, ino: u64, new_parent: u64, new_name: &str) -> FsResult<Attr> {
        self.writable()?;
        let existing = self.path_of(ino)?;
        let new = self.child_of(new_parent, new_name)?;
        self.share
            .hard_link(&existing, &new, IfExists::Fail)
            .await?;
        self.entry(new_parent, new_name, &new).await
    }

    fn add_handle(&self, ino: u64, file: File, writable: bool) -> u64 {
        self.follow_lease(ino, &file);
        self.insert_handle(ino, file, writable)
    }

    /// A handle in the table; its lease is followed already (a new one) or still (a parked
    /// one taken back).
    fn insert_handle(&self, ino: u64, file: File, writable: bool) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let h = OpenFile {
            file,
            writable,
            ino,
            pending_times: Mutex::new(None),
            closing: tokio::sync::Mutex::new(false),
            wb: Arc::new(WriteBehind::default()),
            locks: tokio::sync::Mutex::new(Vec::new()),
            prefetch: (self.cfg.prefetch > 0).then(|| {
                Prefetcher::new(self.prefetch_budget.clone(), self.prefetch_stats.clone())
            }),
        };
        self.files.lock().unwrap().insert(fh, Arc::new(h));
        fh
    }

    /// Wait for the writes in flight and the closes under way on every handle open for
    /// writing on `ino` (before reading the file or its size from the server, or setting
    /// its times: Samba moves the write time of a written file when it is closed).
    /// Returns how many such handles there were.
    async fn drain_ino(&self, ino: u64) -> usize {
        let handles: Vec<_> = self
            .files
            .lock()
            .unwrap()
            .values()
            .filter(|h| h.ino == ino && h.writable)
            .cloned()
            .collect();
        let writers = handles.len();
        for h in handles {
            h.wb.drain().await;
            drop(h.closing.lock().await);
        }
        writers
    }

    /// The handles open for writing on `path` or on anything under it, in one order (by
    /// handle number) so that two renames take their close gates without deadlock.
    fn writers_under(&self, path: &str) -> Vec<Arc<OpenFile>> {
        let mut handles: Vec<(u64, Arc<OpenFile>)> = self
            .files
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, h)| h.writable)
            .map(|(fh, h)| (*fh, h.clone()))
            .collect();
        handles.sort_by_key(|(fh, _)| *fh);
        handles
            .into_iter()
            .filter(|(_, h)| self.path_of(h.ino).is_ok_and(|p| at_or_below(&p, path)))
            .map(|(_, h)| h)
            .collect()
    }

    /// Remember `times` on every handle open for writing on `ino` (see `pending_times`).
    fn times_set(&self, ino: u64, times: &FileTimes) {
        for h in self.files.lock().unwrap().values() {
            if h.ino == ino && h.writable {
                let mut p = h.pending_times.lock().unwrap();
                let mut merged = p.unwrap_or_default();
                merged.accessed = times.accessed.or(merged.accessed);
                merged.modified = times.modified.or(merged.modified);
                *p = Some(merged);
            }
        }
    }

    /// OPEN: a handle on the server for the file `ino`. A read-only open takes back a handle
    /// parked for the file, and then keeps the kernel's cached pages: the lease that vouches
    /// for them has been held without a gap (see [`crate::deferred_close`]).
    pub async fn open(&self, ino: u64, mode: OpenMode) -> FsResult<Opened> {
        if mode.write || mode.truncate {
            self.writable()?;
        }
        if !mode.write && !mode.truncate {
            if let Some(file) = self.deferred.reuse(ino) {
                return Ok(Opened {
                    fh: self.insert_handle(ino, file, false),
                    keep_cache: true,
                });
            }
        } else {
            self.deferred.retire(ino);
        }
        let path = self.path_of(ino)?;
        let opts = OpenOptions::new()
            .read(mode.read)
            .write(mode.write)
            .truncate(mode.truncate);
        let file = self
            .retry(|| until_deleted(|| self.share.open(&path, &opts)))
            .await?;
        Ok(Opened {
            fh: self.add_handle(ino, file, mode.write),
            keep_cache: false,
        })
    }

    /// CREATE: create (or open, without `exclusive`) `name` in `parent` and open it.
    pub async fn create(&self, parent: u64, name: &str, mode: OpenMode) -> FsResult<(Attr, u64)> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        let opts = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .create_new(mode.exclusive)
            .truncate(mode.truncate);
        let file = until_deleted(|| self.share.open(&path, &opts)).await?;
        let m = match file.metadata().await {
            Ok(m) => m,
            Err(e) => {
                let _ = file.close().await;
                return Err(e.into());
            }
        };
        let ino = self
            .inodes
            .lock()
            .unwrap()
            .remember(parent, name, m.file_id);
        self.deferred.retire(ino);
        Ok((self.attr(ino, &m), self.add_handle(ino, file, true)))
    }

    /// READ up to `size` bytes at `offset` (fewer only at end of file).
    pub async fn read(&self, fh: u64, offset: u64, size: u32) -> FsResult<Bytes> {
        self.io.reads.count(size);
        let h = self.handle(fh)?;
        // The server must have this mount's writes before it is asked for the bytes (the
        // writes may be in flight on other channels); and while the file is open for
        // writing here nothing is fetched ahead, as those bytes could be overwritten.
        let epoch = h.prefetch.as_ref().map(Prefetcher::epoch);
        if self.drain_ino(h.ino).await == 0 {
            if let (Some(prefetcher), Some(epoch)) = (&h.prefetch, epoch) {
                let limits = Limits {
                    part: self.cfg.io_size,
                    size_hint: h.file.size_at_open(),
                    ttl: self.cfg.ttl,
                    kernel_window: self.cfg.kernel_readahead,
                };
                let cap = || self.prefetch_cap();
                let read = prefetcher.read(&h.file, epoch, offset, size, &limits, cap);
                if let Some(data) = read.await {
                    return Ok(data);
                }
            }
        }
        Ok(self.retry(|| h.file.read_at(offset, size as usize)).await?)
    }

    /// The largest read-ahead window of the daemon now: what it takes to keep every
    /// channel busy beyond what the kernel's own read-ahead already keeps in flight, within
    /// `prefetch=`. Without the page cache that is four READs per channel, as the library
    /// keeps for one large read. With it, two per channel: the kernel refills its window
    /// as the reader moves, and measured, an 8 MiB window (eight READs) keeps four 1 Gbit/s
    /// links at their line rate while a daemon window on top of it changed nothing but
    /// fetched 2.7 % of the bytes twice. So with the defaults the daemon reads ahead on top
    /// of the page cache only with more than four channels. Worked out at most once a second
    /// (the channel list is not free).
    fn prefetch_cap(&self) -> u64 {
        let mut cached = self.prefetch_cap.lock().unwrap();
        if let Some((at, cap)) = *cached {
            if at.elapsed() < Duration::from_secs(1) {
                return cap;
            }
        }
        let channels = self.share.client().channels().len().max(1) as u64;
        let reads_per_channel = if self.cfg.kernel_readahead > 0 { 2 } else { 4 };
        let busy = channels * reads_per_channel * u64::from(self.cfg.io_size);
        let cap = self
            .cfg
            .prefetch
            .min(busy.saturating_sub(self.cfg.kernel_readahead));
        *cached = Some((std::time::Instant::now(), cap));
        cap
    }

    /// What the daemon's read-ahead did, for the status socket.
    pub fn prefetch_stats(&self) -> &PrefetchStats {
        &self.prefetch_stats
    }

    /// WRITE all of `data` at `offset`; returns the bytes written once the server has them.
    pub async fn write(&self, fh: u64, offset: u64, data: Bytes) -> FsResult<u32> {
        let h = self.handle(fh)?;
        if !h.writable {
            return Err(FsError::new(libc::EBADF));
        }
        let len = data.len() as u32;
        self.io.writes.count(len);
        drop_prefetched(&self.files, h.ino);
        h.pending_times.lock().unwrap().take();
        match &self.budget {
            Some(budget) => h.wb.write(&h.file, budget, offset, data).await?,
            None => {
                if let Some(e) = h.wb.take_error() {
                    return Err(e);
                }
                self.retry(|| h.file.write_at(offset, data.clone())).await?
            }
        }
        Ok(len)
    }

    /// FLUSH (every close(2) of a descriptor): wait for the writes in flight and report a
    /// failure among them.
    /// POSIX: closing any descriptor of a file drops the closing process's locks on it, so
    /// the locks of `lock_owner` on this handle are released too.
    pub async fn flush(&self, fh: u64, lock_owner: Option<u64>) -> FsResult<()> {
        let h = self.handle(fh)?;
        let written = h.wb.settle().await;
        if let Some(owner) = lock_owner {
            let has = h.locks.lock().await.iter().any(|l| l.owner == owner);
            if has {
                self.setlk(fh, owner, 0, u64::MAX, LockType::Unlock, false)
                    .await?;
            }
        }
        written
    }

    /// SETLK / SETLKW: take or release the POSIX lock of `owner` on bytes `start..=end`
    /// (`sleep`: wait for it). Mapped onto SMB2 LOCK, which neither splits, merges nor
    /// converts locks: the owner's locks overlapping the range are released first and what
    /// lies outside the range is locked again, then the new lock is taken. Releasing waits
    /// for the handle's writes in flight, so another client that gets the lock next reads
    /// them.
    pub async fn setlk(
        &self,
        fh: u64,
        owner: u64,
        start: u64,
        end: u64,
        typ: LockType,
        sleep: bool,
    ) -> FsResult<()> {
        let h = self.handle(fh)?;
        if typ != LockType::Unlock {
            // A program that takes a lock expects to read what the last holder wrote.
            drop_prefetched(&self.files, h.ino);
        }
        let end = end.saturating_add(1).max(start + 1);
        let mut held = h.locks.lock().await;
        h.wb.settle().await?;
        let mut keep = Vec::with_capacity(held.len());
        let mut relock = Vec::new();
        for l in held.drain(..) {
            if l.owner == owner && l.start < end && start < l.end {
                if let Err(e) = h.file.unlock(l.start, l.end - l.start).await {
                    tracing::debug!(error = %e, "unlock");
                }
                if l.start < start {
                    relock.push(Held { end: start, ..l });
                }
                if end < l.end {
                    relock.push(Held { start: end, ..l });
                }
            } else {
                keep.push(l);
            }
        }
        for r in relock {
            match h
                .file
                .lock(r.start, r.end - r.start, r.kind, IfLocked::Fail)
                .await
            {
                Ok(()) => keep.push(r),
                Err(e) => tracing::warn!(error = %e, "re-locking the rest of a range failed"),
            }
        }
        *held = keep;
        let kind = match typ {
            LockType::Unlock => return Ok(()),
            LockType::Read => LockKind::Shared,
            LockType::Write => LockKind::Exclusive,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match h
                .file
                .lock(
                    start,
                    end - start,
                    kind,
                    if sleep {
                        IfLocked::Wait
                    } else {
                        IfLocked::Fail
                    },
                )
                .await
            {
                Ok(()) => {
                    held.push(Held {
                        start,
                        end,
                        kind,
                        owner,
                    });
                    return Ok(());
                }
                Err(e) if lock_refused(&e) => return Err(FsError::new(libc::EAGAIN)),
                Err(Error::Timeout { .. }) if sleep && attempt < LOCK_WAIT_ATTEMPTS => {}
                Err(Error::Timeout { .. }) if sleep => return Err(FsError::new(libc::EINTR)),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// GETLK: whether `owner` could take the lock; `None` if so, else the range and type of
    /// a conflicting lock (SMB does not say whose, nor exactly where: the asked range is
    /// reported as write-locked).
    pub async fn getlk(
        &self,
        fh: u64,
        owner: u64,
        start: u64,
        end: u64,
        typ: LockType,
    ) -> FsResult<Option<(u64, u64, LockType)>> {
        let h = self.handle(fh)?;
        let kind = match typ {
            LockType::Unlock => return Ok(None),
            LockType::Read => LockKind::Shared,
            LockType::Write => LockKind::Exclusive,
        };
        let end_x = end.saturating_add(1).max(start + 1);
        let held = h.locks.lock().await;
        // Locks of this handle would answer for themselves; POSIX never reports the
        // asking process's own locks, and other owners on one handle are not told apart.
        if held.iter().any(|l| l.start < end_x && start < l.end) {
            let _ = owner;
            return Ok(None);
        }
        match h
            .file
            .lock(start, end_x - start, kind, IfLocked::Fail)
            .await
        {
            Ok(()) => {
                let _ = h.file.unlock(start, end_x - start).await;
                Ok(None)
            }
            Err(e) if lock_refused(&e) => Ok(Some((start, end, LockType::Write))),
            Err(e) => Err(e.into()),
        }
    }

    /// FSYNC: ask the server to put the file on stable storage.
    pub async fn fsync(&self, fh: u64) -> FsResult<()> {
        let h = self.handle(fh)?;
        if !h.writable {
            return Ok(());
        }
        h.wb.settle().await?;
        Ok(self.retry(|| h.file.flush()).await?)
    }

    /// RELEASE: the last descriptor of the open is closed; close the handle on the server.
    pub async fn release(&self, fh: u64) -> FsResult<()> {
        let Some(h) = self.files.lock().unwrap().get(&fh).cloned() else {
            return Ok(());
        };
        let mut closing = h.closing.lock().await;
        *closing = true;
        if self.parks(&h).await {
            self.files.lock().unwrap().remove(&fh);
            let still_named = || self.path_of(h.ino).is_ok();
            if let Some(not_parked) = self.deferred.park(h.ino, h.file.clone(), still_named) {
                not_parked.close().await?;
            }
            return Ok(());
        }
        let written = h.wb.settle().await;
        let closed = h.file.clone().close().await;
        if closed.is_err() || written.is_err() {
            self.files.lock().unwrap().remove(&fh);
            closed?;
            written?;
        }
        // The CLOSE moved the write time (Samba does): set the pending times again by the
        // file's path now, not at open (it may have been renamed while open). The handle
        // leaves the table only once no times are pending, in the same step (under the
        // table's lock) as the last look: until then GETATTR and SETATTR of the file wait for
        // this close (`drain_ino`), so none reads the time the CLOSE left; a SETATTR that got
        // past that wait before this close began either records its times on the handle,
        // and they are set again here, or finds the handle gone and sends them after ours.
        for _ in 0..RESET_TIMES_ROUNDS {
            let pending = {
                let mut files = self.files.lock().unwrap();
                let pending = h.pending_times.lock().unwrap().take();
                if pending.is_none() {
                    files.remove(&fh);
                }
                pending
            };
            let Some(times) = pending else {
                return Ok(());
            };
            let path = self
                .path_of(h.ino)
                .unwrap_or_else(|_| h.file.path().to_string());
            if let Err(e) = self.share.set_times(&path, &times).await {
                tracing::debug!(path, error = %e, "setting times after close");
            }
        }
        self.files.lock().unwrap().remove(&fh);
        Ok(())
    }

    /// Whether the released handle `h` is parked rather than closed: only read from, no lock
    /// left on it, the page cache on, and a lease granting Read and Handle caching.
    async fn parks(&self, h: &OpenFile) -> bool {
        !h.writable
            && !self.cfg.close_delay.is_zero()
            && self.drop_pages.get().is_some()
            && DeferredCloses::may_park(&h.file)
            && h.locks.lock().await.is_empty()
    }

    /// Close the parked handles of what a rename or delete of `path` touches: the node itself
    /// and, for a directory, every node below it (Samba refuses to rename a directory with
    /// open files below it, and a file deleted while a handle is open stays until it closes).
    async fn close_parked_at(&self, path: &str) {
        if self.deferred.count() == 0 {
            return;
        }
        self.deferred
            .close_where(|ino| self.path_of(ino).is_ok_and(|p| at_or_below(&p, path)))
            .await;
    }

    /// End the directory watches at and below `path`, closing their directories, before
    /// removing or renaming it (see `dir_watch`'s module notes); returns how many ended.
    async fn end_watches_at(&self, path: &str) -> usize {
        let inodes = &self.inodes;
        self.watches
            .end_at_or_below(path, |dir| inodes.lock().unwrap().path(dir))
            .await
    }

    /// OPENDIR: open a listing of the directory and read its first page (a directory that
    /// cannot be listed fails here); READDIR reads on, a page at a time.
    pub async fn opendir(&self, ino: u64) -> FsResult<u64> {
        let path = self.path_of(ino)?;
        let lister = ShareLister {
            fs: self,
            path: &path,
        };
        let mut cursor = DirCursor::new(lister.open().await?);
        cursor.prime(&lister).await?;
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let dir = OpenDir {
            path,
            cursor: tokio::sync::Mutex::new(cursor),
        };
        self.dirs.lock().unwrap().insert(fh, Arc::new(dir));
        self.keep_watching(ino);
        Ok(fh)
    }

    /// READDIR of the open directory `fh` from entry `index` (`.` and `..` not counted):
    /// `add` gets each entry with its index until it says the reply is full (see
    /// [`DirCursor::read_at`]). Returns how many entries `add` took.
    pub async fn read_dir_at(
        &self,
        fh: u64,
        index: u64,
        mut add: impl FnMut(u64, &Listed) -> bool,
    ) -> FsResult<u64> {
        let dir = self
            .dirs
            .lock()
            .unwrap()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::new(libc::EBADF))?;
        let lister = ShareLister {
            fs: self,
            path: &dir.path,
        };
        let mut cursor = dir.cursor.lock().await;
        let taken = cursor
            .read_at(&lister, index, |i, entry| add(i, &self.listed(entry)))
            .await?;
        Ok(taken)
    }

    fn listed(&self, entry: &DirEntry) -> Listed {
        let attr = self.attr(0, &entry.metadata);
        Listed {
            kind: attr.kind,
            file_id: entry.file_id,
            name: entry.name.clone(),
            attr,
        }
    }

    /// The node id a plain READDIR shows for an entry (no lookup taken).
    pub fn peek_ino(&self, parent: u64, name: &str, file_id: u64) -> u64 {
        self.inodes.lock().unwrap().peek(parent, name, file_id)
    }

    /// RELEASEDIR: a listing not read to its end is closed at the server.
    pub async fn releasedir(&self, fh: u64) {
        let dir = self.dirs.lock().unwrap().remove(&fh);
        if let Some(dir) = dir {
            dir.close().await;
        }
    }

    /// STATFS.
    pub async fn statfs(&self) -> FsResult<StatFs> {
        let info = self.retry(|| self.share.fs_info()).await?;
        let bsize = info.block_size.clamp(512, 1 << 20);
        Ok(StatFs {
            blocks: info.total_bytes / bsize,
            bfree: info.free_bytes / bsize,
            bavail: info.available_bytes / bsize,
            bsize: bsize as u32,
            namelen: 255,
        })
    }

    /// Close every open handle (flushing nothing further: writes are on the server) and log
    /// off. Called once the kernel has let go of the mount.
    pub async fn shutdown(&self) {
        let files: Vec<_> = self.files.lock().unwrap().drain().map(|(_, h)| h).collect();
        for h in files {
            // A RELEASE under way closes its handle itself.
            if *h.closing.lock().await {
                continue;
            }
            if let Err(e) = h.wb.settle().await {
                tracing::warn!(path = h.file.path(), error = %e, "a write failed before unmount");
            }
            if let Err(e) = h.file.clone().close().await {
                tracing::warn!(path = h.file.path(), error = %e, "close at unmount failed");
            }
        }
        let dirs: Vec<_> = self.dirs.lock().unwrap().drain().map(|(_, d)| d).collect();
        for dir in dirs {
            dir.close().await;
        }
        self.deferred.close_all().await;
        self.watches.end_all().await;
        if let Err(e) = self.share.client().logoff().await {
            tracing::debug!(error = %e, "logoff at unmount failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_modes() {
        let m = OpenMode::from_flags(libc::O_RDONLY);
        assert!(m.read && !m.write && !m.truncate);
        let m = OpenMode::from_flags(libc::O_WRONLY | libc::O_TRUNC | libc::O_EXCL);
        assert!(!m.read && m.write && m.truncate && m.exclusive);
        let m = OpenMode::from_flags(libc::O_RDWR);
        assert!(m.read && m.write);
    }

    #[test]
    fn local_errors_are_not_retried() {
        let e = Error::ApiMisuse("x");
        assert!(!unreachable(&e));
    }
}
