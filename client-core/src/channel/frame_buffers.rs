//! Reusable buffers for large received frames (READ replies of more than 256 KiB), and for
//! embedders' own payloads (smbcp reads its upload chunks into them).
//!
//! Each such frame gets a buffer of its own that the socket reads into, and its payload reaches
//! the caller as `Bytes` without a copy. Allocated fresh every time, those buffers cost page
//! faults and zeroing in the kernel whenever the allocator has handed the previous ones back to
//! the system, which glibc does by default for blocks this large: about 90,000 page faults and
//! 45 % more CPU per GiB downloaded (smbcp with its own allocator tuning switched off). So the
//! buffers come from a pool shared by all channels of a client, and return to it when the last
//! `Bytes` that refers to one is dropped.
//!
//! The pool does not keep its buffers for ever: once none was taken or given back for
//! [`QUIET_BEFORE_RELEASE`], the session's periodic check empties it, so a client at rest
//! holds no idle buffers (up to the pool's limit, 64 MiB by default, while it is busy).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Buffers are made in multiples of this, so frames of nearly the same size share them.
const GRAIN: usize = 64 * 1024;

/// How long the pool must go unused before its idle buffers are released. Long enough that
/// a transfer's pauses (a file closed, the next opened) keep them; short enough that a
/// client at rest returns them soon.
pub(crate) const QUIET_BEFORE_RELEASE: Duration = Duration::from_secs(10);

/// A pool of byte buffers that come back when the last `Bytes` made from one is dropped.
///
/// The client reads large replies into one of these (`ClientConfig::reply_buffer_pool`); an
/// embedder can fill WRITE payloads from its own: [`take`](Self::take) a buffer, fill it,
/// [`into_bytes`](Self::into_bytes), hand the `Bytes` to `File::write_at`, and the buffer
/// returns once the request is done with it. Cloning shares the pool.
#[derive(Clone)]
pub struct BufferPool(Arc<Pool>);

struct Pool {
    limit: usize,
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
    /// When a buffer was last taken or given back.
    last_used: Option<Instant>,
}

impl BufferPool {
    /// A pool that keeps up to `limit` bytes of idle buffers (0: never keeps any).
    pub fn new(limit: usize) -> BufferPool {
        BufferPool(Arc::new(Pool {
            limit,
            idle: Mutex::new(Idle::default()),
        }))
    }

    /// An initialised buffer of at least `len` bytes (its contents are whatever it held
    /// last): an idle one no more than twice that size, or a new zeroed one.
    pub fn take(&self, len: usize) -> Vec<u8> {
        {
            let mut idle = self.idle();
            idle.last_used = Some(Instant::now());
            let fits = idle
                .buffers
                .iter()
                .position(|b| b.len() >= len && b.len() <= len.saturating_mul(2));
            if let Some(i) = fits {
                let buf = idle.buffers.swap_remove(i);
                idle.bytes -= buf.len();
                return buf;
            }
        }
        vec![0; len.div_ceil(GRAIN) * GRAIN]
    }

    /// The first `len` bytes of `buf` (a buffer from [`take`](Self::take)) as `Bytes`;
    /// the buffer returns to this pool when the last clone or slice is dropped.
    ///
    /// # Panics
    /// If `len` exceeds the buffer.
    pub fn into_bytes(&self, buf: Vec<u8>, len: usize) -> bytes::Bytes {
        bytes::Bytes::from_owner(PooledFrame::new(buf, len, self.clone()))
    }

    /// Bytes of buffers waiting for reuse.
    pub fn idle_bytes(&self) -> usize {
        self.idle().bytes
    }

    /// Keep `buf` for a later frame if the pool has room for it.
    fn give_back(&self, buf: Vec<u8>) {
        let mut idle = self.idle();
        idle.last_used = Some(Instant::now());
        if idle.bytes + buf.len() <= self.0.limit {
            idle.bytes += buf.len();
            idle.buffers.push(buf);
        }
    }

    /// Drop the idle buffers if none was taken or given back for `quiet` before `now`.
    pub(crate) fn release_if_quiet(&self, now: Instant, quiet: Duration) {
        let mut idle = self.idle();
        let unused_since = idle
            .last_used
            .is_none_or(|t| now.saturating_duration_since(t) >= quiet);
        if unused_since && !idle.buffers.is_empty() {
            idle.buffers = Vec::new();
            idle.bytes = 0;
        }
    }

    fn idle(&self) -> MutexGuard<'_, Idle> {
        // Pushes and pops cannot leave the list half-changed: a poisoned lock is still sound.
        self.0.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle();
        f.debug_struct("BufferPool")
            .field("idle", &idle.buffers.len())
            .field("idle_bytes", &idle.bytes)
            .field("limit", &self.0.limit)
            .finish()
    }
}

/// A frame in a pooled buffer: bytes `start..end` of it. Dropping it (or the last `Bytes`
/// made from it) returns the buffer to its pool.
pub(crate) struct PooledFrame {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    pool: BufferPool,
}

impl PooledFrame {
    /// The first `len` bytes of `buf`, a buffer taken from `pool`.
    pub(crate) fn new(buf: Vec<u8>, len: usize, pool: BufferPool) -> PooledFrame {
        assert!(len <= buf.len(), "frame longer than its buffer");
        PooledFrame {
            buf,
            start: 0,
            end: len,
            pool,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.end]
    }

    /// Drop `n` bytes from the front (at most all of them).
    pub(crate) fn advance(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }
}

impl AsRef<[u8]> for PooledFrame {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}

impl Drop for PooledFrame {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn buffers_come_back_when_the_last_bytes_is_dropped() {
        let pool = BufferPool::new(4 * 1024 * 1024);
        let mut buf = pool.take(1_000_000);
        assert_eq!(buf.len(), 16 * GRAIN, "rounded up to the grain");
        buf[..3].copy_from_slice(b"abc");
        let mut frame = PooledFrame::new(buf, 1_000_000, pool.clone());
        frame.advance(1);
        let bytes = Bytes::from_owner(frame);
        assert_eq!(bytes.len(), 999_999);
        assert_eq!(&bytes[..2], b"bc");
        let payload = bytes.slice(1..10);
        drop(bytes);
        assert_eq!(pool.idle_bytes(), 0, "a slice still holds the buffer");
        drop(payload);
        assert_eq!(pool.idle_bytes(), 16 * GRAIN);
        // Reused for a frame of about the same size, not for one less than half its size.
        assert_eq!(pool.take(400_000).len(), 7 * GRAIN);
        assert_eq!(pool.idle_bytes(), 16 * GRAIN);
        assert_eq!(pool.take(900_000).len(), 16 * GRAIN);
        assert_eq!(pool.idle_bytes(), 0);
    }

    #[test]
    fn idle_buffers_are_released_once_the_pool_went_unused_for_a_while() {
        let pool = BufferPool::new(4 * GRAIN);
        drop(PooledFrame::new(pool.take(GRAIN), GRAIN, pool.clone()));
        assert_eq!(pool.idle_bytes(), GRAIN);
        let quiet = Duration::from_secs(10);
        let now = Instant::now();
        pool.release_if_quiet(now, quiet);
        assert_eq!(pool.idle_bytes(), GRAIN, "just used: kept");
        pool.release_if_quiet(now + quiet, quiet);
        assert_eq!(pool.idle_bytes(), 0, "unused for the quiet time: released");
        // Taking a buffer counts as use, too.
        let buf = pool.take(GRAIN);
        pool.give_back(buf);
        pool.release_if_quiet(Instant::now() + quiet / 2, quiet);
        assert_eq!(pool.idle_bytes(), GRAIN);
    }

    #[test]
    fn the_pool_keeps_no_more_than_its_limit() {
        let pool = BufferPool::new(3 * GRAIN);
        let frames: Vec<_> = (0..3)
            .map(|_| PooledFrame::new(pool.take(2 * GRAIN), 2 * GRAIN, pool.clone()))
            .collect();
        drop(frames);
        assert_eq!(
            pool.idle_bytes(),
            2 * GRAIN,
            "one fits, the others are freed"
        );
        let none = BufferPool::new(0);
        drop(PooledFrame::new(none.take(GRAIN), GRAIN, none.clone()));
        assert_eq!(none.idle_bytes(), 0);
    }
}
