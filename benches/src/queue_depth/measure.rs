//! One point of the sweep: exactly `depth` 4 KiB operations in flight for a fixed time.
//!
//! `depth` tasks each loop on their own offset stream, issuing the next operation the moment
//! the last one completes, so the queue never drains until the end. Operations that complete
//! inside the measuring window (after the warm-up) are counted and timed; smbd's CPU time and
//! this process's (the client's) are read at the window's two ends. When the window closes
//! the tasks stop issuing and the queue drains.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smb3_client::File;
use tokio::task::JoinSet;

use crate::server_cpu::{process_cpu, ServerMeter};

use super::check::ReadReference;
use super::offsets::{written_block, OffsetStream, BLOCK};
use super::report::{CpuUse, Op, Sample};

/// What one point runs against and for how long.
#[derive(Debug, Clone)]
pub struct PointPlan {
    /// Reads or writes.
    pub op: Op,
    /// Operations in flight.
    pub depth: usize,
    /// Seed of the offset streams (one stream per task derived from it).
    pub seed: u64,
    /// Blocks in the file.
    pub blocks: u64,
    /// Time before the window opens: channels fill their credit windows, smbd warms up.
    pub warmup: Duration,
    /// The measuring window.
    pub window: Duration,
    /// smbd's parent process, whose tree's CPU time is read.
    pub smbd_pid: u32,
}

/// What one task brings back.
#[derive(Debug, Default)]
struct TaskResult {
    /// Latencies of the operations that completed inside the window, microseconds.
    latencies_us: Vec<f64>,
    /// Offsets written (all of them, warm-up included: the file check needs every one).
    written: Vec<u64>,
}

/// Runs one point on `file` (opened for reading, or for writing when `plan.op` is a write),
/// checking every read against `reference`. Returns the sample and the offsets written.
pub async fn run_point(
    file: &File,
    reference: &Arc<ReadReference>,
    plan: &PointPlan,
) -> Result<(Sample, Vec<u64>), String> {
    let start = Instant::now();
    let opens = start + plan.warmup;
    let closes = opens + plan.window;
    let mut tasks = JoinSet::new();
    for task in 0..plan.depth {
        let file = file.clone();
        let reference = Arc::clone(reference);
        let offsets = OffsetStream::new(plan.seed, task as u64, plan.blocks);
        let op = plan.op;
        tasks.spawn(async move { task_loop(file, reference, op, offsets, (opens, closes)).await });
    }
    tokio::time::sleep_until(opens.into()).await;
    let meter = ServerMeter::start(plan.smbd_pid)?;
    let client_before = own_cpu()?;
    tokio::time::sleep_until(closes.into()).await;
    let client = own_cpu()?.saturating_sub(client_before);
    let cpu = CpuUse {
        smbd: meter.stop()?,
        client,
    };

    let mut latencies_us = Vec::new();
    let mut written = Vec::new();
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(r)) => {
                latencies_us.extend(r.latencies_us);
                written.extend(r.written);
            }
            // The first failure is reported; the other tasks still end on their own.
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(e) => {
                failure.get_or_insert(format!("an I/O task ended abnormally: {e}"));
            }
        }
    }
    if let Some(e) = failure {
        return Err(format!("{} at queue depth {}: {e}", plan.op, plan.depth));
    }
    Ok((Sample::new(&latencies_us, plan.window, cpu), written))
}

/// CPU time this process (the client) has used so far.
fn own_cpu() -> Result<Duration, String> {
    process_cpu(std::process::id()).ok_or_else(|| "cannot read /proc/self/stat".to_string())
}

/// One task: operations back to back until the window closes.
async fn task_loop(
    file: File,
    reference: Arc<ReadReference>,
    op: Op,
    mut offsets: OffsetStream,
    (opens, closes): (Instant, Instant),
) -> Result<TaskResult, String> {
    let mut out = TaskResult::default();
    loop {
        let offset = offsets.next_offset();
        // Made before the clock starts: the pattern costs the client, not the round trip.
        let payload = match op {
            Op::Read => None,
            Op::Write => Some(Bytes::from(written_block(offset / BLOCK as u64))),
        };
        let issued = Instant::now();
        if issued >= closes {
            return Ok(out);
        }
        let read = match payload {
            None => Some(
                file.read_at(offset, BLOCK)
                    .await
                    .map_err(|e| format!("read_at({offset}): {e}"))?,
            ),
            Some(data) => {
                file.write_at(offset, data)
                    .await
                    .map_err(|e| format!("write_at({offset}): {e}"))?;
                out.written.push(offset);
                None
            }
        };
        let done = Instant::now();
        if done > opens && done <= closes {
            out.latencies_us
                .push(done.duration_since(issued).as_secs_f64() * 1e6);
        }
        if let Some(data) = read {
            reference.check(offset, &data)?;
        }
    }
}
