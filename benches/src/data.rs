//! The benchmark's test data: incompressible bytes from a fixed-seed generator (so every run
//! moves the same file and a compressing or deduplicating path cannot flatter a result), and
//! SHA-256 checks of what arrived.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

/// Seed of the big file.
pub const BIG_SEED: u64 = 0x5eed_0000_b16f_11e5;
/// Seed of the small (4 KiB) file used for latency.
pub const SMALL_SEED: u64 = 0x5eed_0000_0000_4096;

const BLOCK: usize = 4 << 20;

/// xorshift64: fast, deterministic, and nothing a compressor can shrink.
#[derive(Debug, Clone)]
pub struct Pattern {
    state: u64,
}

impl Pattern {
    /// A generator for `seed` (any value; zero is mapped to a non-zero state).
    pub fn new(seed: u64) -> Self {
        Pattern { state: seed | 1 }
    }

    /// The next 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// Fills `buf` with the next bytes of the stream (`buf.len()` a multiple of 8).
    fn fill(&mut self, buf: &mut [u8]) {
        for word in buf.chunks_exact_mut(8) {
            word.copy_from_slice(&self.next_u64().to_le_bytes());
        }
    }
}

/// What a correct copy of the reference file looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// Size in bytes.
    pub len: u64,
    /// SHA-256, lower-case hex.
    pub sha256: String,
}

/// Writes `len` bytes (a multiple of 8) of the `seed` stream to `path` and returns their
/// fingerprint.
pub fn write_pattern(path: &Path, seed: u64, len: u64) -> Result<Fingerprint, String> {
    assert_eq!(len % 8, 0, "pattern length must be a multiple of 8");
    let mut file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut pattern = Pattern::new(seed);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; BLOCK];
    let mut left = len;
    while left > 0 {
        let n = left.min(BLOCK as u64) as usize;
        pattern.fill(&mut buf[..n]);
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n])
            .map_err(|e| format!("{}: {e}", path.display()))?;
        left -= n as u64;
    }
    Ok(Fingerprint {
        len,
        sha256: hex(&hasher.finalize()),
    })
}

/// Size and SHA-256 of the file at `path`.
pub fn fingerprint(path: &Path) -> Result<Fingerprint, String> {
    let mut file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; BLOCK];
    let mut len = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok(Fingerprint {
        len,
        sha256: hex(&hasher.finalize()),
    })
}

/// Fails unless the file at `path` is exactly `expected`.
pub fn verify(path: &Path, expected: &Fingerprint) -> Result<(), String> {
    let got = fingerprint(path)?;
    if got == *expected {
        Ok(())
    } else {
        Err(format!(
            "{} does not verify: {} bytes, sha256 {} (expected {} bytes, sha256 {})",
            path.display(),
            got.len,
            got.sha256,
            expected.len,
            expected.sha256
        ))
    }
}

/// Removes the file at `path`; a file that is not there is no error (a copy that failed may
/// have left nothing).
pub fn remove_if_present(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_deterministic_and_not_flat() {
        let mut a = Pattern::new(BIG_SEED);
        let mut b = Pattern::new(BIG_SEED);
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
        assert_ne!(Pattern::new(0).next_u64(), 0);
    }

    #[test]
    fn written_file_fingerprints_and_verifies() {
        let dir = std::env::temp_dir().join(format!("smb-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p");
        let fp = write_pattern(&path, 7, 3 * BLOCK as u64 + 64).unwrap();
        assert_eq!(fp.len, 3 * BLOCK as u64 + 64);
        assert_eq!(fingerprint(&path).unwrap(), fp);
        verify(&path, &fp).unwrap();
        let other = Fingerprint {
            len: fp.len,
            sha256: "00".repeat(32),
        };
        assert!(verify(&path, &other)
            .unwrap_err()
            .contains("does not verify"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
