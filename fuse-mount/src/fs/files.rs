//! Operations on open files: OPEN, CREATE, READ (with the daemon's read-ahead), WRITE
//! (with write-behind), FLUSH, FSYNC and RELEASE (which may park a read-only handle for a
//! moment instead of closing it).

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use smb3_client::{Error, NtStatus, OpenOptions};

use super::attr::Attr;
use super::handles::OpenFile;
use super::locks::LockType;
use super::SmbFs;
use crate::deferred_close::DeferredCloses;
use crate::errno::{FsError, FsResult};
use crate::prefetch::{Limits, PrefetchStats, Prefetcher};

/// An open handle, as OPEN returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The handle number.
    pub fh: u64,
    /// The kernel may keep the pages it cached of the file (FOPEN_KEEP_CACHE).
    pub keep_cache: bool,
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

/// How many times RELEASE sets pending times again when SETATTRs keep recording new ones
/// while it does: each round needs another SETATTR by path during the previous round's, so
/// this only bounds a pathological loop.
const RESET_TIMES_ROUNDS: u32 = 8;

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

impl SmbFs {
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

    /// CREATE: create (or open, without `exclusive`) `name` in `parent` and open it; a new
    /// file gets `permissions` (umask applied) on a POSIX share.
    pub async fn create(
        &self,
        parent: u64,
        name: &str,
        mode: OpenMode,
        permissions: u32,
    ) -> FsResult<(Attr, u64)> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        let opts = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .create_new(mode.exclusive)
            .truncate(mode.truncate)
            .mode(permissions);
        let file = if !mode.exclusive && !self.share.is_posix() {
            self.create_exactly(name, &path, &opts).await?
        } else {
            until_deleted(|| self.share.open(&path, &opts)).await?
        };
        let m = match file.metadata().await {
            Ok(m) => m,
            Err(e) => {
                let _ = file.close().await;
                return Err(e.into());
            }
        };
        let id = self.server_id(&path, m.file_id);
        let ino = self.inodes.lock().unwrap().remember(parent, name, id);
        self.deferred.retire(ino);
        Ok((self.attr(ino, &m), self.add_handle(ino, file, true)))
    }

    /// CREATE without O_EXCL on a share without the POSIX extensions. The kernel asks for it
    /// only when its lookup found no `name`; on a case-insensitive share an open-or-create
    /// would then open (and with O_TRUNC empty) a file stored as `Name` or `NAME`. So the file
    /// is created exclusively first; if something is there, it is opened only when its stored
    /// name is `name` itself (made by another client meanwhile), and otherwise the create
    /// fails with EEXIST: `foo` and `FOO` cannot both exist there.
    async fn create_exactly(
        &self,
        name: &str,
        path: &str,
        opts: &OpenOptions,
    ) -> FsResult<smb3_client::File> {
        let exclusive = opts.clone().create_new(true);
        match until_deleted(|| self.share.open(path, &exclusive)).await {
            Err(e) if e.status() == Some(NtStatus::OBJECT_NAME_COLLISION) => {
                let (_, stored) = self.share.metadata_and_name(path).await?;
                let kept = stored.as_deref().and_then(|s| s.rsplit(['\\', '/']).next());
                if kept.is_some_and(|k| !k.is_empty() && k != self.names.to_server(name)) {
                    return Err(FsError::new(libc::EEXIST));
                }
                Ok(until_deleted(|| self.share.open(path, opts)).await?)
            }
            other => Ok(other?),
        }
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
    /// `prefetch=`. Without the page cache that is what the library keeps for one large read
    /// (`Client::busy_depth`: four READs per usable channel). With it, half as many: the
    /// kernel refills its window as the reader moves, and measured, an 8 MiB window (eight
    /// READs) keeps four 1 Gbit/s links at their line rate while a daemon window on top of it
    /// changed nothing but fetched 2.7 % of the bytes twice. So with the defaults the daemon
    /// reads ahead on top of the page cache only with more than four channels. Worked out at
    /// most once a second (the count takes the channel set's lock).
    fn prefetch_cap(&self) -> u64 {
        let mut cached = self.prefetch_cap.lock().unwrap();
        if let Some((at, cap)) = *cached {
            if at.elapsed() < Duration::from_secs(1) {
                return cap;
            }
        }
        let mut reads = self.share.client().busy_depth() as u64;
        if self.cfg.kernel_readahead > 0 {
            reads = reads.div_ceil(2);
        }
        let busy = reads * u64::from(self.cfg.io_size);
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
        self.drop_prefetched(h.ino);
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
    /// A file unlinked while open (see `silly`) is deleted once its last handle is released.
    pub async fn release(&self, fh: u64) -> FsResult<()> {
        let Some(ino) = self.files.lock().unwrap().get(&fh).map(|h| h.ino) else {
            return Ok(());
        };
        let released = self.release_handle(fh).await;
        self.reap(ino).await;
        released
    }

    async fn release_handle(&self, fh: u64) -> FsResult<()> {
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
            && !self.is_silly(h.ino)
            && !self.cfg.close_delay.is_zero()
            && self.drop_pages.get().is_some()
            && DeferredCloses::may_park(&h.file)
            && h.locks.lock().await.is_empty()
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
}
