//! Read-only handles kept open for a moment after their last close, so that the next open of
//! the same file reuses the handle and keeps the file's cached pages.
//!
//! Programs open the same files again and again (a build reading headers, `git status`, an
//! editor). Each open would cost a CREATE round trip, and each would start with the kernel's
//! pages dropped: once the last handle is closed the lease goes with it, and without a lease
//! nothing says whether another client changed the file meanwhile. A handle whose lease grants
//! Read and Handle caching (RH) may stay open instead (MS-SMB2 3.3.4.7: the server breaks
//! Handle caching before another client's open that would conflict with it): it is parked
//! here for [`DEFERRED_CLOSE`] and closed then, or at once when the lease loses Read or Handle
//! caching, before this mount renames or deletes the file, and at unmount. While a handle is
//! parked the lease is held without a gap, so an open that finds one may keep the pages the
//! kernel cached under that lease (FOPEN_KEEP_CACHE), as mount.cifs does with `cache=strict`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smb3_client::File;

/// How long a parked handle stays open after its last close by default (`closetimeo=`;
/// mount.cifs's defaults to 1 s, but a build's repeated opens of one header are often
/// seconds apart).
pub const DEFERRED_CLOSE: Duration = Duration::from_secs(5);

struct Parked {
    file: File,
    /// Which parking this is: the timer closes only its own.
    generation: u64,
}

/// The parked handles of a mount, one per node at most.
pub struct DeferredCloses {
    parked: Mutex<HashMap<u64, Parked>>,
    next_generation: AtomicU64,
    delay: Duration,
}

impl DeferredCloses {
    /// Handles parked for `delay`.
    pub fn new(delay: Duration) -> DeferredCloses {
        DeferredCloses {
            parked: Mutex::new(HashMap::new()),
            next_generation: AtomicU64::new(1),
            delay,
        }
    }

    /// Whether a handle on the server may be parked instead of closed: its lease grants Read
    /// and Handle caching now.
    pub fn may_park(file: &File) -> bool {
        file.lease().is_some_and(|l| l.read && l.handle)
    }

    /// Park `file`, the handle of node `ino`, and close it after the delay unless an open
    /// takes it back first. `still_named` is asked under the same lock that
    /// [`DeferredCloses::close_now`] takes: a delete that forgets the node's last name and
    /// then closes what is parked cannot miss a handle parked meanwhile (a file deleted with a
    /// handle open stays on the server, DELETE_PENDING, until the handle closes). Returns the
    /// file when it is not parked (one is parked for `ino` already, or the node has no name
    /// left): the caller closes it. Must run inside the tokio runtime.
    pub fn park(
        self: &Arc<Self>,
        ino: u64,
        file: File,
        still_named: impl FnOnce() -> bool,
    ) -> Option<File> {
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        {
            let mut parked = self.parked.lock().unwrap();
            if parked.contains_key(&ino) || !still_named() {
                return Some(file);
            }
            parked.insert(ino, Parked { file, generation });
        }
        let me = Arc::downgrade(self);
        let delay = self.delay;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let Some(me) = me.upgrade() else { return };
            let due = {
                let mut parked = me.parked.lock().unwrap();
                match parked.get(&ino) {
                    Some(p) if p.generation == generation => parked.remove(&ino),
                    _ => None,
                }
            };
            if let Some(p) = due {
                close(p.file).await;
            }
        });
        None
    }

    fn take(&self, ino: u64) -> Option<File> {
        self.parked.lock().unwrap().remove(&ino).map(|p| p.file)
    }

    /// Take back the handle parked for `ino`, to serve a read-only open with it, if its lease
    /// still grants RH (checked again: a break may be on its way to closing it; a handle
    /// that lost it is closed in the background).
    pub fn reuse(&self, ino: u64) -> Option<File> {
        let file = self.take(ino)?;
        if Self::may_park(&file) {
            return Some(file);
        }
        tokio::spawn(close(file));
        None
    }

    /// The file `ino` is opened for writing: its parked handle may no longer serve a later
    /// open with the cached pages (a write the server refused would live on in them), so it
    /// is closed, in the background.
    pub fn retire(&self, ino: u64) {
        if let Some(file) = self.take(ino) {
            tokio::spawn(close(file));
        }
    }

    /// Close the handle parked for `ino` now, if there is one (the lease lost Read or Handle
    /// caching, or this mount is about to rename or delete the file).
    pub async fn close_now(&self, ino: u64) {
        if let Some(file) = self.take(ino) {
            close(file).await;
        }
    }

    /// Close now every parked handle whose node `under` accepts (a directory about to be
    /// renamed: Samba refuses to rename a directory with open files below it).
    pub async fn close_where(&self, under: impl Fn(u64) -> bool) {
        let due: Vec<File> = {
            let mut parked = self.parked.lock().unwrap();
            let inos: Vec<u64> = parked.keys().copied().filter(|&i| under(i)).collect();
            inos.iter()
                .filter_map(|i| parked.remove(i))
                .map(|p| p.file)
                .collect()
        };
        for file in due {
            close(file).await;
        }
    }

    /// Close every parked handle (at unmount).
    pub async fn close_all(&self) {
        self.close_where(|_| true).await;
    }

    /// Handles parked now.
    pub fn count(&self) -> usize {
        self.parked.lock().unwrap().len()
    }
}

async fn close(file: File) {
    let path = file.path().to_string();
    if let Err(e) = file.close().await {
        // Only read through: nothing written is lost; the server drops the handle with the
        // session at the latest.
        tracing::debug!(path, error = %e, "closing a parked handle");
    }
}
