//! Where each operation goes and what each write puts there: pure, so the same seed gives the
//! same offsets and a written block can be recomputed when the file is checked.

use crate::data::Pattern;

/// Size of every operation, and the alignment of every offset.
pub const BLOCK: usize = 4096;

/// splitmix64's step: turns nearby seeds (task 0, 1, 2 ...) into unrelated ones. xorshift
/// seeded with values a few bits apart would start out correlated, and the tasks of one point
/// would then hit the same blocks at first.
fn spread(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Random block-aligned offsets inside a file of `blocks` blocks, one stream per task.
#[derive(Debug, Clone)]
pub struct OffsetStream {
    rng: Pattern,
    blocks: u64,
}

impl OffsetStream {
    /// The stream of task `task` of the run seeded with `seed`, over `blocks` blocks (at
    /// least one).
    pub fn new(seed: u64, task: u64, blocks: u64) -> Self {
        OffsetStream {
            rng: Pattern::new(spread(seed ^ spread(task))),
            blocks: blocks.max(1),
        }
    }

    /// The next block index, uniform over `0..blocks`: the high half of a 64x64-bit product,
    /// which maps the generator's range evenly (no modulo bias worth the name for any file
    /// size here).
    pub fn next_block(&mut self) -> u64 {
        ((u128::from(self.rng.next_u64()) * u128::from(self.blocks)) >> 64) as u64
    }

    /// The next byte offset (a multiple of [`BLOCK`]).
    pub fn next_offset(&mut self) -> u64 {
        self.next_block() * BLOCK as u64
    }
}

/// Seed of the bytes the write runs put into block `b`.
const WRITE_SEED: u64 = 0x5eed_0000_0000_0417;

/// The 4 KiB a write puts at block `block`: different for every block and from the reference
/// data, so the file check can tell a block that was written from one that was not, and a
/// block written at the wrong place from a right one.
pub fn written_block(block: u64) -> Vec<u8> {
    let mut rng = Pattern::new(spread(WRITE_SEED ^ spread(block)));
    let mut out = Vec::with_capacity(BLOCK);
    while out.len() < BLOCK {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_aligned_inside_the_file_and_repeatable() {
        let blocks = 1000;
        let mut a = OffsetStream::new(7, 3, blocks);
        let mut b = OffsetStream::new(7, 3, blocks);
        for _ in 0..10_000 {
            let off = a.next_offset();
            assert_eq!(off % BLOCK as u64, 0);
            assert!(off <= (blocks - 1) * BLOCK as u64, "{off} past the end");
            assert_eq!(off, b.next_offset());
        }
    }

    #[test]
    fn offsets_cover_the_file_evenly() {
        let blocks = 16u64;
        let mut s = OffsetStream::new(1, 0, blocks);
        let mut hits = vec![0u32; blocks as usize];
        for _ in 0..16_000 {
            hits[s.next_block() as usize] += 1;
        }
        // 1000 expected per block; a skewed mapping (e.g. only low bits used badly, or the
        // last block never reached) falls far outside this band.
        assert!(hits.iter().all(|&h| (850..1150).contains(&h)), "{hits:?}");
    }

    #[test]
    fn tasks_get_unrelated_streams() {
        let firsts: Vec<Vec<u64>> = (0..8)
            .map(|task| {
                let mut s = OffsetStream::new(42, task, 1 << 18);
                (0..4).map(|_| s.next_block()).collect()
            })
            .collect();
        for i in 0..firsts.len() {
            for j in i + 1..firsts.len() {
                assert_ne!(firsts[i][0], firsts[j][0], "tasks {i} and {j} start alike");
            }
        }
        // Another seed, another stream.
        let mut other = OffsetStream::new(43, 0, 1 << 18);
        assert_ne!(other.next_block(), firsts[0][0]);
    }

    #[test]
    fn single_block_file_always_gives_offset_zero() {
        let mut s = OffsetStream::new(9, 9, 1);
        assert!((0..100).all(|_| s.next_offset() == 0));
        let mut empty = OffsetStream::new(9, 9, 0);
        assert_eq!(empty.next_offset(), 0);
    }

    #[test]
    fn written_blocks_differ_per_block_and_repeat() {
        let a = written_block(5);
        assert_eq!(a.len(), BLOCK);
        assert_eq!(a, written_block(5));
        assert_ne!(a, written_block(6));
        assert_ne!(a[..8], a[8..16]);
    }
}
