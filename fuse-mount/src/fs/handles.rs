//! The table of open files: what each handle carries (its writes in flight, its read-ahead,
//! the times to set again after its close, its byte-range locks), and the questions asked of
//! the table as a whole (the handles of a node, the writers below a path).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use smb3_client::{File, FileTimes};

use super::locks::Held;
use super::SmbFs;
use crate::errno::{FsError, FsResult};
use crate::inode::at_or_below;
use crate::prefetch::Prefetcher;
use crate::write_behind::WriteBehind;

/// A file opened through the mount, under its FUSE handle number in `SmbFs::files`.
pub(super) struct OpenFile {
    pub(super) file: File,
    pub(super) writable: bool,
    pub(super) ino: u64,
    /// Times set explicitly while this handle was open for writing, to set again once it is
    /// closed: Samba moves the write time of a written file 2 s after the first write and at
    /// close, over a time set meanwhile (through this handle or the path), which would undo
    /// `cp -a`, `tar -x` and `touch` on a file being written. A later write cancels them.
    pub(super) pending_times: Mutex<Option<FileTimes>>,
    /// Held by RELEASE from its first step until the handle is closed on the server and the
    /// pending times are set again; anything that must not race that close (setting times,
    /// reading attributes, renaming the file) waits for it. The handle stays in the table
    /// meanwhile, so times set during the close are still recorded on it.
    pub(super) closing: tokio::sync::Mutex<bool>,
    /// Its writes in flight (write-behind).
    pub(super) wb: Arc<WriteBehind>,
    /// Its read-ahead (`None` with `prefetch=0`).
    pub(super) prefetch: Option<Prefetcher>,
    /// Byte-range locks held through this handle, by lock owner; the async mutex also puts
    /// the handle's lock requests in order.
    pub(super) locks: tokio::sync::Mutex<Vec<Held>>,
}

/// [`SmbFs::drop_prefetched`] on the table itself, for a task that holds the table and not
/// the file system.
fn drop_prefetched(files: &Mutex<HashMap<u64, Arc<OpenFile>>>, ino: u64) {
    let files = files.lock().unwrap();
    for h in files.values().filter(|h| h.ino == ino) {
        if let Some(p) = &h.prefetch {
            p.drop_streak();
        }
    }
}

impl SmbFs {
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

    pub(super) fn handle(&self, fh: u64) -> FsResult<Arc<OpenFile>> {
        self.files
            .lock()
            .unwrap()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::new(libc::EBADF))
    }

    /// A handle open on `ino`, if there is one.
    pub(super) fn any_handle_of(&self, ino: u64) -> Option<Arc<OpenFile>> {
        self.files
            .lock()
            .unwrap()
            .values()
            .find(|h| h.ino == ino)
            .cloned()
    }

    pub(super) fn add_handle(&self, ino: u64, file: File, writable: bool) -> u64 {
        self.follow_lease(ino, &file);
        self.insert_handle(ino, file, writable)
    }

    /// A handle in the table; its lease is followed already (a new one) or still (a parked
    /// one taken back).
    pub(super) fn insert_handle(&self, ino: u64, file: File, writable: bool) -> u64 {
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
    pub(super) async fn drain_ino(&self, ino: u64) -> usize {
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
    pub(super) fn writers_under(&self, path: &str) -> Vec<Arc<OpenFile>> {
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
    pub(super) fn times_set(&self, ino: u64, times: &FileTimes) {
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

    /// Drop what was fetched ahead for every handle of `ino`: its bytes changed, or may have.
    pub(super) fn drop_prefetched(&self, ino: u64) {
        drop_prefetched(&self.files, ino);
    }
}
