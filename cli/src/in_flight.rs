//! One budget of chunk bytes in flight for a whole run, shared by every file copied at once.
//!
//! Each file keeps up to `depth` chunks in flight (at least the library's
//! `Client::busy_depth`, so every channel stays busy), within the 64 MiB span of
//! `window.rs`. With many files at once (`-j 64`) that would be up to 64 times as much memory
//! for no more speed: the channels are as busy with a few files' chunks as with all of them.
//! So a chunk also takes its bytes from this budget before it is read, and gives them back
//! once written; a file waits when the budget is spent. Waiters are served in order (tokio's
//! semaphore is fair), and a chunk never needs more than the whole budget, so every chunk gets
//! its turn.

use smb3_client::BufferPool;
use tokio::sync::{Semaphore, SemaphorePermit};

/// The budget when none is given (`--max-in-flight`): 16 channels with eight 1 MiB chunks
/// each, twice what keeps them busy.
pub const DEFAULT_MAX_IN_FLIGHT: u64 = 128 << 20;

/// The memory a run's chunks use: the budget, and the pool upload buffers come from (it
/// keeps as many bytes for reuse as the budget lets be in flight, no more).
pub(crate) struct ChunkMemory {
    pub(crate) in_flight: InFlight,
    pub(crate) pool: BufferPool,
}

impl ChunkMemory {
    /// `max_in_flight` bytes (0: [`DEFAULT_MAX_IN_FLIGHT`]) for chunks of `chunk` bytes.
    pub(crate) fn new(max_in_flight: u64, chunk: u32) -> ChunkMemory {
        let bytes = if max_in_flight == 0 {
            DEFAULT_MAX_IN_FLIGHT
        } else {
            max_in_flight
        };
        let in_flight = InFlight::new(bytes, chunk);
        let pool = BufferPool::new(in_flight.bytes() as usize);
        ChunkMemory { in_flight, pool }
    }
}

/// The budget's unit: chunk sizes are whole KiB.
const UNIT: u64 = 1024;

/// Chunk bytes a run may hold in flight.
pub(crate) struct InFlight {
    permits: Semaphore,
    /// The budget in units.
    units: u64,
}

impl InFlight {
    /// A budget of `bytes`, at least one chunk of `chunk` bytes.
    pub(crate) fn new(bytes: u64, chunk: u32) -> InFlight {
        let units = bytes.max(u64::from(chunk)).div_ceil(UNIT).max(1);
        InFlight {
            permits: Semaphore::new(units as usize),
            units,
        }
    }

    /// The budget in bytes.
    pub(crate) fn bytes(&self) -> u64 {
        self.units * UNIT
    }

    /// Wait until `len` bytes of the budget are free and hold them until the permit drops.
    pub(crate) async fn take(&self, len: u32) -> SemaphorePermit<'_> {
        let units = u64::from(len).div_ceil(UNIT).clamp(1, self.units) as u32;
        self.permits
            .acquire_many(units)
            .await
            .expect("the budget's semaphore is never closed")
    }
}

/// This process's peak resident set in bytes, for `--json` (`VmHWM` of `/proc/self/status`;
/// `None` where there is no such file).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn chunks_in_flight_never_exceed_the_budget() {
        let budget = InFlight::new(8 << 20, 1 << 20);
        let (now, peak) = (AtomicU64::new(0), AtomicU64::new(0));
        let chunk = |len: u32| {
            let (budget, now, peak) = (&budget, &now, &peak);
            async move {
                let _held = budget.take(len).await;
                let held = now.fetch_add(u64::from(len), Ordering::SeqCst) + u64::from(len);
                peak.fetch_max(held, Ordering::SeqCst);
                tokio::task::yield_now().await;
                now.fetch_sub(u64::from(len), Ordering::SeqCst);
            }
        };
        let all: Vec<_> = (0..200)
            .map(|i| chunk(if i % 3 == 0 { 3 << 20 } else { 1 << 20 }))
            .collect();
        futures_util::future::join_all(all).await;
        let peak = peak.load(Ordering::SeqCst);
        assert!(peak <= 8 << 20, "{peak}");
        assert!(peak >= 6 << 20, "the budget was used: {peak}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_peak_resident_set_is_read() {
        let peak = peak_rss_bytes().expect("VmHWM on Linux");
        assert!(peak > 1 << 20, "{peak}");
    }

    #[tokio::test]
    async fn a_chunk_larger_than_the_budget_still_runs() {
        let budget = InFlight::new(1 << 20, 4 << 20);
        assert_eq!(budget.bytes(), 4 << 20);
        let _one = budget.take(8 << 20).await;
    }
}
