//! `SmbFs`: the file system the mount serves, in terms of node ids, handles and plain values;
//! no FUSE types, so it is driven directly by tests. The FUSE adapter (`adapter.rs`) only
//! translates requests and replies.
//!
//! Every operation is an `async fn` on `&self`: the adapter runs each request as its own
//! tokio task, so slow requests never hold up others.
//!
//! Here are `SmbFs` itself and what every operation uses (the share path of a node, `hard`
//! retries, the read-only check); the rest has one file per job:
//! - `config`: [`FsConfig`], how the file system presents itself;
//! - `attr`: what `stat` and `statfs` show ([`Attr`], [`StatFs`]): GETATTR, SETATTR, STATFS;
//! - `names`: the names in directories: LOOKUP, FORGET, MKDIR, MKNOD, UNLINK, RMDIR, RENAME,
//!   LINK;
//! - `handles`: the table of open files and what each handle carries (writes in flight,
//!   read-ahead, times to set again, locks);
//! - `files`: OPEN, CREATE, READ, WRITE, FLUSH, FSYNC, RELEASE;
//! - `locks`: POSIX byte-range locks over SMB2 LOCK: SETLK, GETLK;
//! - `dirs`: directory listings: OPENDIR, READDIR, RELEASEDIR;
//! - `silly`: files unlinked or replaced while open here, kept under a hidden name until
//!   their last close (shares without the POSIX extensions);
//! - `mfsymlinks`: symbolic links as Minshall+French files (`-o mfsymlinks`);
//! - `space`: FALLOCATE and LSEEK's SEEK_DATA/SEEK_HOLE;
//! - `xattrs`: `user.*` extended attributes as SMB EAs;
//! - `reparse`: symbolic links and special files as reparse points on shares without the
//!   POSIX extensions (`-o reparse=`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use smb3_client::{Error, NtStatus, Share};

use self::dirs::OpenDir;
use self::handles::OpenFile;
use self::silly::Silly;
use crate::deferred_close::DeferredCloses;
use crate::dir_watch::{DirWatches, StaleSink};
use crate::inode::InodeTable;
use crate::io_stats::IoStats;
use crate::prefetch::{PrefetchBudget, PrefetchStats};
use crate::sfm::NameMap;
use crate::write_behind::Budget;

mod attr;
mod config;
mod dirs;
mod files;
mod handles;
mod locks;
mod mfsymlinks;
mod names;
mod reparse;
mod silly;
mod space;
mod xattrs;

pub use self::attr::{Attr, Kind, SetAttr, StatFs};
pub use self::config::{FsConfig, ReparseForm};
pub use self::dirs::Listed;
pub use self::files::{OpenMode, Opened};
pub use self::locks::LockType;
pub use self::space::{SEEK_DATA, SEEK_HOLE};
pub use self::xattrs::ea_name;
pub use crate::errno::{FsError, FsResult};

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
    /// How names are sent and shown: the SFM mapping with `mapposix` on a share without
    /// the POSIX extensions (see [`crate::sfm`]).
    names: NameMap,
    /// Files unlinked or replaced while open here, under their hidden names, by node (see
    /// `silly`).
    sillies: Mutex<HashMap<u64, Silly>>,
    /// The server refused to keep a reparse point as unsupported: links and special files
    /// are EPERM from then on without asking again (see `reparse`).
    no_reparse_points: std::sync::atomic::AtomicBool,
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
fn gone_if_deleted(e: Error) -> FsError {
    if e.status() == Some(NtStatus::DELETE_PENDING) {
        FsError::new(libc::ENOENT)
    } else {
        e.into()
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
        // With the POSIX extensions the server takes every name a Linux program makes.
        let names = NameMap::new(cfg.mapposix && !share.is_posix());
        SmbFs {
            watches: DirWatches::new(
                share.clone(),
                inodes.clone(),
                cfg.watch_dirs,
                WATCH_IDLE,
                names,
            ),
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
            names,
            sillies: Mutex::new(HashMap::new()),
            no_reparse_points: Default::default(),
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

    /// The share path of a mount-relative path (its names as the server gets them, see
    /// [`crate::sfm`]).
    fn on_share(&self, rel: &str) -> String {
        let mapped;
        let rel = if self.names.sfm {
            mapped = rel
                .split('/')
                .map(|n| self.names.to_server(n))
                .collect::<Vec<_>>()
                .join("/");
            mapped.as_str()
        } else {
            rel
        };
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
        // Without the mapping, a `\` would make two names of one on the server, and a
        // trailing dot or space a name the server shows only mangled (8.3).
        if !self.names.sendable(name) && !self.share.is_posix() {
            return Err(FsError::new(libc::EINVAL));
        }
        let rel = self
            .inodes
            .lock()
            .unwrap()
            .child_path(parent, name)
            .ok_or_else(enoent)?;
        Ok(self.on_share(&rel))
    }

    fn writable(&self) -> FsResult<()> {
        if self.cfg.read_only {
            Err(erofs())
        } else {
            Ok(())
        }
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
        self.delete_all_sillies().await;
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
    fn local_errors_are_not_retried() {
        let e = Error::ApiMisuse("x");
        assert!(!unreachable(&e));
    }
}
