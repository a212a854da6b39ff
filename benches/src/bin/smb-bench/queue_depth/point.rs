//! One point of the sweep, and what makes its number trustworthy.
//!
//! `depth` tasks each loop on an offset stream of their own, issuing the next operation the
//! moment the last one completes, so the queue never drains until the end. Operations that
//! complete inside the window (after the warm-up) are counted and timed; smbd's CPU time and
//! this process's are read at the window's ends. Every read is compared with the file on the
//! server's disk; every write puts a block the check can recompute, and the written file is
//! checked block by block afterwards.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smb3_benches::data::{spread, Pattern};
use smb3_benches::Context;
use tokio::task::JoinSet;

use super::{Op, Sample};
use crate::machine::{process_cpu, ServerMeter};

/// Size of every operation and alignment of every offset.
pub(crate) const BLOCK: usize = 4096;
/// Seed of what the writes put into the blocks.
const WRITE_SEED: u64 = 0x5eed_0000_0000_0417;

/// Task `task`'s stream of block indexes, uniform over `0..blocks`: the high half of a
/// 64x64-bit product maps the generator's range evenly.
fn blocks_of(seed: u64, task: u64, blocks: u64) -> impl FnMut() -> u64 {
    let (mut rng, blocks) = (Pattern::new(spread(seed ^ spread(task))), blocks.max(1));
    move || ((u128::from(rng.next_u64()) * u128::from(blocks)) >> 64) as u64
}

/// What a write puts at block `block`: different for every block and from the reference
/// data, so the check tells a written block from an unwritten one, and one written at the
/// wrong place from a right one.
pub(crate) fn written_block(block: u64) -> Vec<u8> {
    let mut out = vec![0u8; BLOCK];
    Pattern::new(spread(WRITE_SEED ^ spread(block))).fill(&mut out);
    out
}

/// What one point runs and for how long.
#[derive(Debug, Clone)]
pub(crate) struct PointPlan {
    pub(crate) op: Op,
    pub(crate) depth: usize,
    /// Seed of the tasks' offset streams.
    pub(crate) seed: u64,
    pub(crate) blocks: u64,
    /// Before the window opens: channels fill their credit windows, smbd warms up.
    pub(crate) warmup: Duration,
    pub(crate) window: Duration,
    pub(crate) smbd_pid: u32,
}

/// Runs one point on `file`, checking every read against `reference` (the file on the
/// server's disk). The sample and the blocks written (warm-up included).
pub(crate) async fn run_point(
    file: &smb3_client::File,
    reference: &Arc<File>,
    plan: &PointPlan,
) -> Result<(Sample, Vec<u64>), String> {
    let opens = Instant::now() + plan.warmup;
    let closes = opens + plan.window;
    let mut tasks = JoinSet::new();
    for task in 0..plan.depth {
        let (file, reference, op) = (file.clone(), reference.clone(), plan.op);
        let next_block = blocks_of(plan.seed, task as u64, plan.blocks);
        tasks.spawn(task_loop(file, reference, op, next_block, (opens, closes)));
    }
    tokio::time::sleep_until(opens.into()).await;
    let own_cpu =
        || process_cpu(std::process::id()).ok_or_else(|| "cannot read /proc/self/stat".to_string());
    let (meter, client_before) = (ServerMeter::start(plan.smbd_pid)?, own_cpu()?);
    tokio::time::sleep_until(closes.into()).await;
    let client = own_cpu()?.saturating_sub(client_before);
    let cpu = (meter.stop()?, client);
    let (mut latencies, mut written, mut failure) = (Vec::new(), Vec::new(), None);
    while let Some(joined) = tasks.join_next().await {
        // The first failure is reported; the other tasks end on their own.
        match joined.ctx("an I/O task ended abnormally") {
            Ok(Ok((l, w))) => {
                latencies.extend(l);
                written.extend(w);
            }
            Ok(Err(e)) | Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    match failure {
        Some(e) => Err(format!("{} at queue depth {}: {e}", plan.op, plan.depth)),
        None => Ok((Sample::new(&latencies, plan.window, cpu), written)),
    }
}

/// One task: operations back to back until the window closes. Latencies (µs) inside the
/// window, and every block written.
async fn task_loop(
    file: smb3_client::File,
    reference: Arc<File>,
    op: Op,
    mut next_block: impl FnMut() -> u64,
    (opens, closes): (Instant, Instant),
) -> Result<(Vec<f64>, Vec<u64>), String> {
    let (mut latencies, mut written) = (Vec::new(), Vec::new());
    let mut expected = vec![0u8; BLOCK];
    loop {
        let block = next_block();
        let offset = block * BLOCK as u64;
        // Made before the clock starts: the pattern costs the client, not the round trip.
        let payload = (op == Op::Write).then(|| Bytes::from(written_block(block)));
        let issued = Instant::now();
        if issued >= closes {
            return Ok((latencies, written));
        }
        let read = match payload {
            None => Some(
                file.read_at(offset, BLOCK)
                    .await
                    .ctx(format!("read_at({offset})"))?,
            ),
            Some(data) => {
                file.write_at(offset, data)
                    .await
                    .ctx(format!("write_at({offset})"))?;
                written.push(block);
                None
            }
        };
        let done = Instant::now();
        if done > opens && done <= closes {
            latencies.push(done.duration_since(issued).as_secs_f64() * 1e6);
        }
        // A pread from tmpfs and a memcmp: about a microsecond, against the hundred or more a
        // round trip takes.
        if let Some(data) = read {
            reference
                .read_exact_at(&mut expected, offset)
                .ctx("the read file on the server")?;
            if data[..] != expected[..] {
                let how = if data.len() == BLOCK {
                    "same length, other bytes"
                } else {
                    "wrong length"
                };
                return Err(format!(
                    "a 4 KiB read at offset {offset} returned wrong data ({} bytes, {how})",
                    data.len()
                ));
            }
        }
    }
}

/// Checks the written file on the host after the run: `size` bytes, every written block
/// holding [`written_block`] and every other still the `seed` stream it was made from. The
/// first block that is wrong is named.
pub(crate) fn verify_written(
    path: &Path,
    seed: u64,
    size: u64,
    written: &[bool],
) -> Result<(), String> {
    let shown = path.display();
    let len = std::fs::metadata(path).ctx(&shown)?.len();
    if len != size {
        return Err(format!(
            "{shown} is {len} bytes after the write runs, not {size}"
        ));
    }
    let mut file = File::open(path).ctx(&shown)?;
    let (mut reference, mut got, mut expected) =
        (Pattern::new(seed), vec![0u8; BLOCK], vec![0u8; BLOCK]);
    for block in 0..size / BLOCK as u64 {
        file.read_exact(&mut got).ctx(&shown)?;
        // The reference stream advances over every block, written or not.
        reference.fill(&mut expected);
        let offset = block * BLOCK as u64;
        match written.get(block as usize).copied().unwrap_or(false) {
            true if got != written_block(block) => {
                return Err(format!("{shown}: the block at offset {offset} was written by the run but holds other data"));
            }
            false if got != expected => {
                return Err(format!(
                    "{shown}: the block at offset {offset} was never written by the run but no longer holds the original data"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb3_benches::data::write_pattern;

    #[test]
    fn offsets_are_even_repeatable_and_unrelated_between_tasks() {
        let (mut a, mut b) = (blocks_of(7, 3, 1000), blocks_of(7, 3, 1000));
        assert!((0..10_000).all(|_| {
            let x = a();
            x < 1000 && x == b()
        }));
        let mut s = blocks_of(1, 0, 16);
        let mut hits = [0u32; 16];
        for _ in 0..16_000 {
            hits[s() as usize] += 1;
        }
        // 1000 expected per block; a skewed mapping falls far outside this band.
        assert!(hits.iter().all(|&h| (850..1150).contains(&h)), "{hits:?}");
        let firsts: Vec<u64> = (0..8).map(|task| blocks_of(42, task, 1 << 18)()).collect();
        let distinct: std::collections::BTreeSet<_> = firsts.iter().collect();
        assert_eq!(distinct.len(), 8, "{firsts:?}");
        assert!((0..100).all(|_| blocks_of(9, 9, 0)() == 0));
        let w = written_block(5);
        assert!(
            w.len() == BLOCK
                && w == written_block(5)
                && w != written_block(6)
                && w[..8] != w[8..16]
        );
    }

    #[test]
    fn the_written_file_verifies_only_when_every_block_is_right() {
        const SEED: u64 = 99;
        const SIZE: u64 = 16 * BLOCK as u64;
        let dir = std::env::temp_dir().join(format!("qd-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        write_pattern(&path, SEED, SIZE).unwrap();
        let put = |block: u64, data: &[u8]| {
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all_at(data, block * BLOCK as u64).unwrap();
        };
        put(2, &written_block(2));
        put(5, &written_block(5));
        let marked = |blocks: &[usize]| (0..16).map(|b| blocks.contains(&b)).collect::<Vec<bool>>();
        verify_written(&path, SEED, SIZE, &marked(&[2, 5])).unwrap();
        // A write the record lacks, and one that never reached the file.
        let e = verify_written(&path, SEED, SIZE, &marked(&[2])).unwrap_err();
        assert!(
            e.contains("offset 20480") && e.contains("never written"),
            "{e}"
        );
        let e = verify_written(&path, SEED, SIZE, &marked(&[2, 5, 7])).unwrap_err();
        assert!(
            e.contains("offset 28672") && e.contains("holds other data"),
            "{e}"
        );
        // Block 5's bytes landing at block 6.
        put(6, &written_block(5));
        assert!(verify_written(&path, SEED, SIZE, &marked(&[2, 5, 6])).is_err());
        assert!(
            verify_written(&path, SEED, SIZE + BLOCK as u64, &marked(&[2, 5]))
                .unwrap_err()
                .contains("bytes after")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
