//! Test data and its checks: incompressible bytes from a fixed-seed generator (every run moves
//! the same data, and a compressing or deduplicating path cannot flatter a result), and the
//! size and SHA-256 of what arrived.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::Path;

use crate::Context;
use sha2::{Digest, Sha256};

/// Seed of the benchmark's big file.
pub const BIG_SEED: u64 = 0x5eed_0000_b16f_11e5;
/// Seed of small files made next to it.
pub const SMALL_SEED: u64 = 0x5eed_0000_0000_4096;

const BLOCK: usize = 4 << 20;

/// xorshift64, the generator of `smb3_tests::pattern`, as a stream: a file of any size is
/// written without holding it in memory.
#[derive(Debug, Clone)]
pub struct Pattern(u64);

impl Pattern {
    /// The stream of `seed` (zero is mapped to a non-zero state).
    pub fn new(seed: u64) -> Self {
        Pattern(seed | 1)
    }

    /// The next 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Fills `buf` (a multiple of 8 bytes long) with the next bytes of the stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for word in buf.chunks_exact_mut(8) {
            word.copy_from_slice(&self.next_u64().to_le_bytes());
        }
    }
}

/// splitmix64's step: turns nearby seeds (task 0, 1, 2 ...) into unrelated ones. xorshift
/// seeded with values a few bits apart starts out correlated.
pub fn spread(seed: u64) -> u64 {
    mix(seed.wrapping_add(0x9e37_79b9_7f4a_7c15))
}

/// splitmix64's finalizer: every bit of `z` moves about half of the result's.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Size and SHA-256 (lower-case hex) of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// Bytes.
    pub len: u64,
    /// SHA-256 in hex.
    pub sha256: String,
}

/// Size and SHA-256 of the bytes written into it, counted as they go by.
#[derive(Debug, Clone, Default)]
pub struct Hashing(Sha256, u64);

impl Hashing {
    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
        self.1 += bytes.len() as u64;
    }

    /// Bytes added so far.
    pub fn bytes(&self) -> u64 {
        self.1
    }

    /// The fingerprint of everything added.
    pub fn finish(self) -> Fingerprint {
        Fingerprint {
            len: self.1,
            sha256: hex(&self.0.finalize()),
        }
    }
}

impl Write for Hashing {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `len` bytes (a multiple of 8) of the `seed` stream to `path`; their fingerprint.
pub fn write_pattern(path: &Path, seed: u64, len: u64) -> Result<Fingerprint, String> {
    assert_eq!(len % 8, 0, "pattern length must be a multiple of 8");
    let mut file = File::create(path).ctx(path.display())?;
    let (mut pattern, mut hashing, mut buf) =
        (Pattern::new(seed), Hashing::default(), vec![0u8; BLOCK]);
    for start in (0..len).step_by(BLOCK) {
        let chunk = &mut buf[..(len - start).min(BLOCK as u64) as usize];
        pattern.fill(chunk);
        hashing.update(chunk);
        file.write_all(chunk).ctx(path.display())?;
    }
    Ok(hashing.finish())
}

/// Size and SHA-256 of the file at `path`.
pub fn fingerprint(path: &Path) -> Result<Fingerprint, String> {
    let file = File::open(path).ctx(path.display())?;
    let mut hashing = Hashing::default();
    std::io::copy(&mut BufReader::with_capacity(1 << 20, file), &mut hashing)
        .ctx(path.display())?;
    Ok(hashing.finish())
}

/// Fails unless the file at `path` is exactly `expected`.
pub fn verify(path: &Path, expected: &Fingerprint) -> Result<(), String> {
    let got = fingerprint(path)?;
    if got == *expected {
        return Ok(());
    }
    Err(format!(
        "{} does not verify: {} bytes, sha256 {} (expected {} bytes, sha256 {})",
        path.display(),
        got.len,
        got.sha256,
        expected.len,
        expected.sha256
    ))
}

/// Removes the file or directory tree at `path`; one that is not there is no error (a copy
/// that failed may have left nothing).
pub fn remove_if_present(path: &Path) -> Result<(), String> {
    let removed = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        _ => std::fs::remove_file(path),
    };
    removed.ctx(format!("cannot remove {}", path.display()))
}

/// Lower-case hex of `bytes` (a digest).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_stream_is_the_testbeds_pattern() {
        let mut buf = vec![0u8; 64];
        Pattern::new(BIG_SEED).fill(&mut buf);
        assert_eq!(buf, smb3_tests::pattern(BIG_SEED, 64));
    }

    #[test]
    fn written_file_fingerprints_and_verifies() {
        let dir = std::env::temp_dir().join(format!("smb-bench-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p");
        let fp = write_pattern(&path, 7, 3 * BLOCK as u64 + 64).unwrap();
        assert_eq!(
            (fp.len, fingerprint(&path).unwrap()),
            (3 * BLOCK as u64 + 64, fp.clone())
        );
        verify(&path, &fp).unwrap();
        let other = Fingerprint {
            sha256: "00".repeat(32),
            ..fp
        };
        assert!(verify(&path, &other)
            .unwrap_err()
            .contains("does not verify"));
        remove_if_present(&dir).unwrap();
        remove_if_present(&dir).unwrap();
        assert!(!dir.exists());
    }
}
