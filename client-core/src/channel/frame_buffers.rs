//! Reusable buffers for large received frames (READ replies of more than 256 KiB).
//!
//! Each such frame gets a buffer of its own that the socket reads into, and its payload reaches
//! the caller as `Bytes` without a copy. Allocated fresh every time, those buffers cost page
//! faults and zeroing in the kernel whenever the allocator has handed the previous ones back to
//! the system, which glibc does by default for blocks this large: about 90,000 page faults and
//! 45 % more CPU per GiB downloaded (smbcp with its own allocator tuning switched off). So the
//! buffers come from a pool shared by all channels of a client, and return to it when the last
//! `Bytes` that refers to one is dropped.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Buffers are made in multiples of this, so frames of nearly the same size share them.
const GRAIN: usize = 64 * 1024;

/// A client's pool of frame buffers, keeping at most `limit` bytes of idle buffers.
#[derive(Clone)]
pub(crate) struct FrameBuffers(Arc<Pool>);

struct Pool {
    limit: usize,
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl FrameBuffers {
    /// A pool that keeps up to `limit` bytes of buffers between frames (0: never keeps any).
    pub(crate) fn new(limit: usize) -> FrameBuffers {
        FrameBuffers(Arc::new(Pool {
            limit,
            idle: Mutex::new(Idle::default()),
        }))
    }

    /// An initialised buffer of at least `len` bytes: an idle one no more than twice that
    /// size, or a new one.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        {
            let mut idle = self.idle();
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

    /// Keep `buf` for a later frame if the pool has room for it.
    fn give_back(&self, buf: Vec<u8>) {
        let mut idle = self.idle();
        if idle.bytes + buf.len() <= self.0.limit {
            idle.bytes += buf.len();
            idle.buffers.push(buf);
        }
    }

    fn idle(&self) -> MutexGuard<'_, Idle> {
        // Pushes and pops cannot leave the list half-changed: a poisoned lock is still sound.
        self.0.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes of idle buffers (for tests).
    #[cfg(test)]
    pub(crate) fn idle_bytes(&self) -> usize {
        self.idle().bytes
    }
}

impl std::fmt::Debug for FrameBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle();
        f.debug_struct("FrameBuffers")
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
    pool: FrameBuffers,
}

impl PooledFrame {
    /// The first `len` bytes of `buf`, a buffer taken from `pool`.
    pub(crate) fn new(buf: Vec<u8>, len: usize, pool: FrameBuffers) -> PooledFrame {
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
        let pool = FrameBuffers::new(4 * 1024 * 1024);
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
    fn the_pool_keeps_no_more_than_its_limit() {
        let pool = FrameBuffers::new(3 * GRAIN);
        let frames: Vec<_> = (0..3)
            .map(|_| PooledFrame::new(pool.take(2 * GRAIN), 2 * GRAIN, pool.clone()))
            .collect();
        drop(frames);
        assert_eq!(
            pool.idle_bytes(),
            2 * GRAIN,
            "one fits, the others are freed"
        );
        let none = FrameBuffers::new(0);
        drop(PooledFrame::new(none.take(GRAIN), GRAIN, none.clone()));
        assert_eq!(none.idle_bytes(), 0);
    }
}
