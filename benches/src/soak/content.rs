//! What the soak's files hold: deterministic bytes made chunk by chunk, so a 64 MiB file is
//! never held whole in memory (RSS is one of the things measured) and its SHA-256 is known
//! before it is written or read.

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Bytes per generated chunk: one `write_at`/`read_at` of the soak, eight 1 MiB requests.
pub const CHUNK: usize = 8 << 20;

/// File sizes the workload mixes: tiny (one small request), odd (not a multiple of anything),
/// medium, and large enough to spread over every channel.
pub const SIZES: [usize; 8] = [
    0,
    4 << 10,
    100_003,
    1 << 20,
    (3 << 20) + 17,
    16 << 20,
    (33 << 20) + 4097,
    64 << 20,
];

/// Chunk `index` of the file with content `seed` and length `size` (shorter at the end).
pub fn chunk(seed: u64, size: usize, index: usize) -> Bytes {
    let start = index * CHUNK;
    let len = CHUNK.min(size.saturating_sub(start));
    // A different xorshift stream per chunk (the pattern needs a non-zero seed, and the
    // golden-ratio step keeps neighbouring chunks unrelated).
    let chunk_seed = seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    Bytes::from(smb3_tests::pattern(chunk_seed, len))
}

/// Number of chunks of a file of `size` bytes (0 for an empty file).
pub fn chunks(size: usize) -> usize {
    size.div_ceil(CHUNK)
}

/// SHA-256 of the whole content, computed chunk by chunk.
pub fn sha256(seed: u64, size: usize) -> [u8; 32] {
    let mut h = Sha256::new();
    for i in 0..chunks(size) {
        h.update(chunk(seed, size, i));
    }
    h.finalize().into()
}

/// SHA-256 and length of a file on the server's disk, read 1 MiB at a time.
pub fn sha256_of_path(path: &std::path::Path) -> std::io::Result<([u8; 32], u64)> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok((h.finalize().into(), total));
        }
        h.update(&buf[..n]);
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_size_exactly() {
        for size in SIZES {
            let total: usize = (0..chunks(size)).map(|i| chunk(7, size, i).len()).sum();
            assert_eq!(total, size);
        }
    }

    #[test]
    fn content_depends_on_seed_and_chunk() {
        let size = 2 * CHUNK;
        assert_eq!(chunk(1, size, 0), chunk(1, size, 0));
        assert_ne!(chunk(1, size, 0), chunk(2, size, 0));
        assert_ne!(chunk(1, size, 0), chunk(1, size, 1));
        assert_ne!(sha256(1, 100), sha256(1, 101));
    }
}
