//! How large the kernel's READ and WRITE requests are: the mount is fast only when a
//! sequential reader or writer reaches it in requests of the largest size (1 MiB), so the
//! status socket reports the share of requests that were.

use std::sync::atomic::{AtomicU64, Ordering};

/// The size counted as full: the kernel's largest FUSE request.
pub const FULL_REQUEST: u32 = 1 << 20;

/// Counters of one kind of request.
#[derive(Debug, Default)]
pub struct RequestSizes {
    requests: AtomicU64,
    full: AtomicU64,
    bytes: AtomicU64,
}

impl RequestSizes {
    /// Count one request of `len` bytes.
    pub fn count(&self, len: u32) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(u64::from(len), Ordering::Relaxed);
        if len >= FULL_REQUEST {
            self.full.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests counted.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The counts as JSON: `{"requests", "full_size", "bytes"}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "requests": self.requests.load(Ordering::Relaxed),
            "full_size": self.full.load(Ordering::Relaxed),
            "bytes": self.bytes.load(Ordering::Relaxed),
        })
    }
}

/// READ and WRITE sizes since the mount.
#[derive(Debug, Default)]
pub struct IoStats {
    /// READ requests, by the size the kernel asked for.
    pub reads: RequestSizes,
    /// WRITE requests, by the size the kernel sent.
    pub writes: RequestSizes,
}

impl IoStats {
    /// The counts as JSON, with the size counted as full.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "full_size_bytes": FULL_REQUEST,
            "read": self.reads.json(),
            "write": self.writes.json(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_full_ones_and_bytes() {
        let s = IoStats::default();
        s.reads.count(FULL_REQUEST);
        s.reads.count(4096);
        s.writes.count(FULL_REQUEST);
        let j = s.json();
        assert_eq!(j["read"]["requests"], 2);
        assert_eq!(j["read"]["full_size"], 1);
        assert_eq!(j["read"]["bytes"], u64::from(FULL_REQUEST) + 4096);
        assert_eq!(j["write"]["full_size"], 1);
    }
}
