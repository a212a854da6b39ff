//! What makes a queue-depth number trustworthy: every read compared with the file as it is on
//! the server's disk, and the written file checked block by block after the run.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::data::Pattern;

use super::offsets::{written_block, BLOCK};

/// The file the reads run against, opened on the host (the tmpfs behind the share), to
/// compare each read with.
#[derive(Debug)]
pub struct ReadReference {
    path: PathBuf,
    file: File,
}

impl ReadReference {
    /// Opens the host side of the read file.
    pub fn open(path: &Path) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(ReadReference {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Fails unless `data` is exactly the block at `offset`. A pread from tmpfs and a memcmp:
    /// about a microsecond, against the hundred or more a round trip takes.
    pub fn check(&self, offset: u64, data: &[u8]) -> Result<(), String> {
        let mut expected = [0u8; BLOCK];
        self.file
            .read_exact_at(&mut expected, offset)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        if data != expected {
            return Err(format!(
                "a 4 KiB read at offset {offset} returned wrong data ({} bytes, {})",
                data.len(),
                if data.len() == BLOCK {
                    "same length, other bytes"
                } else {
                    "wrong length"
                }
            ));
        }
        Ok(())
    }
}

/// Which blocks of the write file the run wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenBlocks {
    written: Vec<bool>,
}

impl WrittenBlocks {
    /// None written yet, in a file of `blocks` blocks.
    pub fn new(blocks: u64) -> Self {
        WrittenBlocks {
            written: vec![false; blocks as usize],
        }
    }

    /// Records a write at byte `offset` (ignored past the end: offsets come from an
    /// [`OffsetStream`](super::offsets::OffsetStream) over the same size, so never).
    pub fn mark(&mut self, offset: u64) {
        if let Some(w) = self.written.get_mut((offset / BLOCK as u64) as usize) {
            *w = true;
        }
    }

    /// Blocks written at least once.
    pub fn count(&self) -> usize {
        self.written.iter().filter(|w| **w).count()
    }

    fn is_written(&self, block: u64) -> bool {
        self.written.get(block as usize).copied().unwrap_or(false)
    }
}

/// Checks the write file on the host after the run: `size` bytes, where every written block
/// holds [`written_block`] and every other block still holds the reference data (the `seed`
/// stream the file was made from). The first block that is wrong is named in the error.
pub fn verify_written(
    path: &Path,
    seed: u64,
    size: u64,
    written: &WrittenBlocks,
) -> Result<(), String> {
    let shown = path.display();
    let len = std::fs::metadata(path)
        .map_err(|e| format!("{shown}: {e}"))?
        .len();
    if len != size {
        return Err(format!(
            "{shown} is {len} bytes after the write runs, not {size}"
        ));
    }
    let mut file = File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut reference = Pattern::new(seed);
    let mut got = vec![0u8; BLOCK];
    let mut expected = vec![0u8; BLOCK];
    for block in 0..size / BLOCK as u64 {
        file.read_exact(&mut got)
            .map_err(|e| format!("{shown}: {e}"))?;
        // The reference stream advances over every block, written or not.
        for word in expected.chunks_exact_mut(8) {
            word.copy_from_slice(&reference.next_u64().to_le_bytes());
        }
        let offset = block * BLOCK as u64;
        if written.is_written(block) {
            if got != written_block(block) {
                return Err(format!(
                    "{shown}: the block at offset {offset} was written by the run but holds \
                     other data"
                ));
            }
        } else if got != expected {
            return Err(format!(
                "{shown}: the block at offset {offset} was never written by the run but no \
                 longer holds the original data"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::write_pattern;

    const SEED: u64 = 99;
    const SIZE: u64 = 16 * BLOCK as u64;

    struct TempDir(PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> (TempDir, PathBuf) {
        let dir = std::env::temp_dir().join(format!("qd-check-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        write_pattern(&path, SEED, SIZE).unwrap();
        (TempDir(dir), path)
    }

    fn put(path: &Path, block: u64, data: &[u8]) {
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(data, block * BLOCK as u64).unwrap();
    }

    #[test]
    fn reads_are_compared_with_the_file() {
        let (_dir, path) = scratch("read");
        let bytes = std::fs::read(&path).unwrap();
        let r = ReadReference::open(&path).unwrap();
        r.check(3 * BLOCK as u64, &bytes[3 * BLOCK..4 * BLOCK])
            .unwrap();
        // The right bytes from the wrong place, and a short read, both fail.
        let wrong = r.check(4 * BLOCK as u64, &bytes[3 * BLOCK..4 * BLOCK]);
        assert!(wrong.unwrap_err().contains("offset 16384"));
        assert!(r
            .check(0, &bytes[..100])
            .unwrap_err()
            .contains("wrong length"));
    }

    #[test]
    fn written_file_verifies_only_when_every_block_is_right() {
        let (_dir, path) = scratch("write");
        put(&path, 2, &written_block(2));
        put(&path, 5, &written_block(5));
        let mut written = WrittenBlocks::new(SIZE / BLOCK as u64);
        written.mark(2 * BLOCK as u64);
        written.mark(5 * BLOCK as u64);
        assert_eq!(written.count(), 2);
        verify_written(&path, SEED, SIZE, &written).unwrap();

        // A write the run made but the record lacks: block 5 is no longer the original.
        let mut missing = WrittenBlocks::new(SIZE / BLOCK as u64);
        missing.mark(2 * BLOCK as u64);
        let e = verify_written(&path, SEED, SIZE, &missing).unwrap_err();
        assert!(
            e.contains("offset 20480") && e.contains("never written"),
            "{e}"
        );

        // A write that never reached the file.
        let mut extra = written.clone();
        extra.mark(7 * BLOCK as u64);
        let e = verify_written(&path, SEED, SIZE, &extra).unwrap_err();
        assert!(
            e.contains("offset 28672") && e.contains("holds other data"),
            "{e}"
        );

        // Block 5's bytes landing at block 6.
        put(&path, 6, &written_block(5));
        let mut both = written.clone();
        both.mark(6 * BLOCK as u64);
        assert!(verify_written(&path, SEED, SIZE, &both).is_err());

        assert!(verify_written(&path, SEED, SIZE + BLOCK as u64, &written)
            .unwrap_err()
            .contains("bytes after the write runs"));
    }
}
