//! Memory back to the system when the mount goes quiet. While files are copied the daemon's
//! buffers (FUSE requests of 1 MiB, write-behind, read-ahead, the library's reply buffers) come
//! and go by the hundred megabytes, and glibc keeps what is freed in its arenas for reuse, which
//! is what a busy mount wants. A mount then left idle for hours would keep that memory: so once
//! no READ or WRITE has come from the kernel for [`QUIET`], the C allocator is asked once to
//! give its free memory back (`malloc_trim`), until the next activity.
//!
//! The status socket also reports the heap in use (the C allocator's own count), so a memory
//! that stays high at rest can be told apart: blocks still in use, or freed memory kept.
//!
//! Both calls need unsafe code, which this library forbids: the `smbfuse` program hands them in
//! with [`set_allocator`]. Without them, nothing is released and no heap figure is shown.

use std::sync::OnceLock;
use std::time::Duration;

use crate::io_stats::IoStats;

/// How long the mount must go without a READ or WRITE before memory is given back: beyond the
/// library's 10 s after which its idle reply buffers are dropped, so those go back too.
pub const QUIET: Duration = Duration::from_secs(15);

/// How often the activity is looked at.
const TICK: Duration = Duration::from_secs(5);

/// What the C allocator can be asked.
#[derive(Debug, Clone, Copy)]
pub struct Allocator {
    /// Give the free memory it holds back to the system.
    pub release_free_memory: fn(),
    /// Bytes in use: allocated and not freed.
    pub in_use: fn() -> u64,
}

static ALLOCATOR: OnceLock<Allocator> = OnceLock::new();

/// Use `allocator`'s calls (set once, before mounting).
pub fn set_allocator(allocator: Allocator) {
    let _ = ALLOCATOR.set(allocator);
}

/// The heap in use, when the program said how to know it.
pub fn heap_in_use() -> Option<u64> {
    ALLOCATOR.get().map(|a| (a.in_use)())
}

/// The READ and WRITE requests counted so far: changes whenever the mount is used for I/O.
fn activity(stats: &IoStats) -> u64 {
    stats.reads.requests() + stats.writes.requests()
}

/// What the watch does at one tick.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Quiet {
    last_seen: u64,
    quiet_ticks: u32,
    released: bool,
}

impl Quiet {
    /// Look at the activity counter; `true` when memory should be given back now: no
    /// activity for [`QUIET`], and not given back since the last activity.
    pub(crate) fn tick(&mut self, seen: u64) -> bool {
        if seen != self.last_seen {
            self.last_seen = seen;
            self.quiet_ticks = 0;
            self.released = false;
            return false;
        }
        self.quiet_ticks = self.quiet_ticks.saturating_add(1);
        let quiet_for = TICK * self.quiet_ticks;
        if quiet_for >= QUIET && !self.released {
            self.released = true;
            return true;
        }
        false
    }
}

/// Watch `stats` on `rt` and give memory back when the mount goes quiet (if a releaser was
/// set); ends with the runtime.
pub fn watch(rt: &tokio::runtime::Handle, stats: impl Fn() -> u64 + Send + 'static) {
    let Some(release) = ALLOCATOR.get().map(|a| a.release_free_memory) else {
        return;
    };
    rt.spawn(async move {
        let mut quiet = Quiet::default();
        let mut ticker = tokio::time::interval(TICK);
        loop {
            ticker.tick().await;
            if quiet.tick(stats()) {
                tracing::debug!("mount quiet: returning free memory to the system");
                // malloc_trim walks the whole heap: off the runtime's worker threads.
                let _ = tokio::task::spawn_blocking(release).await;
            }
        }
    });
}

/// [`watch`] over the file system's own READ and WRITE counters.
pub fn watch_io(rt: &tokio::runtime::Handle, fs: std::sync::Arc<crate::fs::SmbFs>) {
    watch(rt, move || activity(fs.io_stats()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_goes_back_once_per_quiet_spell() {
        let mut q = Quiet::default();
        assert!(!q.tick(5), "activity");
        let ticks_to_quiet = (QUIET.as_secs() / TICK.as_secs()) as usize;
        let released: Vec<bool> = (0..ticks_to_quiet + 3).map(|_| q.tick(5)).collect();
        assert_eq!(released.iter().filter(|r| **r).count(), 1);
        assert!(released[ticks_to_quiet - 1], "{released:?}");
        assert!(!q.tick(6), "new activity");
        let again = (0..ticks_to_quiet).filter(|_| q.tick(6)).count();
        assert_eq!(again, 1, "and once more after it");
    }
}
