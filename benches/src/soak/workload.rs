//! The soak's workload through the library: uploaders, downloaders and a metadata loop, each
//! a task that repeats its operation until told to stop. Every byte is checked: an upload
//! against the server's disk, a download against the content the file was seeded with.
//!
//! A failure is a byte or size mismatch, an operation not done within [`OP_LIMIT`], and any
//! error at all: the faults are ones the library survives (a listing whose QUERY_DIRECTORY is
//! lost with its channel goes on from a new handle, docs/FAILOVER.md), so none may reach the
//! caller.
//!
//! File contents are made chunk by chunk from a seed, so a 64 MiB file is never held whole in
//! memory (RSS is measured) and its SHA-256 is known before it is written or read.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use smb3_client::{OpenOptions, Share};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::data::{fingerprint, hex};

/// Longest one operation may take before it counts as lost. A 64 MiB transfer on the slowest
/// plan (one worker's share of three 100 Mbit/s links beside five others) takes about 15 s,
/// an smbd restart or a re-established session adds a few seconds, and a request waits at
/// most `failover_wait` (30 s) for a channel: three minutes is far beyond all of that.
pub(crate) const OP_LIMIT: Duration = Duration::from_secs(180);

/// Bytes per generated chunk: one `write_at`/`read_at`, eight 1 MiB requests.
const CHUNK: usize = 8 << 20;

/// File sizes the workload mixes: empty, one small request, odd (a multiple of nothing),
/// medium, and large enough to spread over every channel.
const SIZES: [usize; 8] = [
    0,
    4 << 10,
    100_003,
    1 << 20,
    (3 << 20) + 17,
    16 << 20,
    (33 << 20) + 4097,
    64 << 20,
];

/// Files each uploader overwrites in turn, so the share never fills.
const NAMES_PER_UPLOADER: usize = 4;

/// Chunk `index` of the file with content `seed` and length `size` (shorter at the end): a
/// different stream per chunk, the golden-ratio step keeping neighbours unrelated.
fn chunk(seed: u64, size: usize, index: usize) -> Bytes {
    let len = CHUNK.min(size.saturating_sub(index * CHUNK));
    let chunk_seed = seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    Bytes::from(smb3_tests::pattern(chunk_seed, len))
}

fn chunks(size: usize) -> usize {
    size.div_ceil(CHUNK)
}

/// SHA-256 (hex) of the content `seed` of length `size`.
fn sha256(seed: u64, size: usize) -> String {
    let mut h = Sha256::new();
    for i in 0..chunks(size) {
        h.update(chunk(seed, size, i));
    }
    hex(&h.finalize())
}

/// One file seeded on the server for the downloaders.
#[derive(Debug, Clone)]
pub(crate) struct Seeded {
    /// Share-relative path.
    path: String,
    size: usize,
    sha256: String,
}

/// Puts one file of every size in [`SIZES`] (and a second of the largest) into `down/` on
/// the server's disk under `share_root`, and makes `up/` for the uploaders.
pub(crate) fn seed_files(share_root: &Path, seed: u64) -> std::io::Result<Vec<Seeded>> {
    use std::os::unix::fs::PermissionsExt;
    // Made by root here; smbd acts as the test user, who must be able to write in them.
    for d in ["down", "up"] {
        std::fs::create_dir_all(share_root.join(d))?;
        std::fs::set_permissions(share_root.join(d), std::fs::Permissions::from_mode(0o777))?;
    }
    let sizes = SIZES.iter().copied().chain([SIZES[SIZES.len() - 1]]);
    let mut out = Vec::new();
    for (i, size) in sizes.enumerate() {
        let file_seed = seed ^ ((i as u64 + 1) << 40);
        let mut data = Vec::with_capacity(size);
        for c in 0..chunks(size) {
            data.extend_from_slice(&chunk(file_seed, size, c));
        }
        std::fs::write(share_root.join(format!("down/f{i}.bin")), &data)?;
        out.push(Seeded {
            path: format!("down/f{i}.bin"),
            size,
            sha256: hex(&Sha256::digest(&data)),
        });
    }
    Ok(out)
}

/// Counts shared by the workers, the sampler and the report.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Verified on the server's disk (through a mount: fio write+verify jobs).
    pub(crate) uploads: AtomicU64,
    /// Verified against the seeded content (through a mount: renamed-file read-backs).
    pub(crate) downloads: AtomicU64,
    /// Listings and stats that checked out.
    pub(crate) metadata_ops: AtomicU64,
    pub(crate) bytes_up: AtomicU64,
    pub(crate) bytes_down: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// Every failure, with the time and the worker.
    pub(crate) failures: Mutex<Vec<String>>,
}

impl Tally {
    pub(crate) fn ops(&self) -> u64 {
        [&self.uploads, &self.downloads, &self.metadata_ops]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes_up.load(Ordering::Relaxed) + self.bytes_down.load(Ordering::Relaxed)
    }

    /// Records a failure of `who`, stamped with the time since `t0`.
    pub(crate) fn fail(&self, t0: Instant, who: &str, what: String) {
        let line = format!("{:7.1} s {who}: {what}", t0.elapsed().as_secs_f64());
        eprintln!("soak FAILURE {line}");
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }
}

/// What every worker gets.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) share: Share,
    /// The share's directory on the server's disk, to verify uploads.
    pub(crate) share_root: PathBuf,
    pub(crate) seeded: Arc<Vec<Seeded>>,
    pub(crate) tally: Arc<Tally>,
    /// Set when the run is over: workers finish their operation and return.
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) t0: Instant,
}

/// Runs `op` bounded by [`OP_LIMIT`] and books what it verified, or its failure.
async fn book(
    ctx: &Ctx,
    who: &str,
    what: &str,
    counters: [&AtomicU64; 2],
    op: impl Future<Output = Result<u64, String>>,
) {
    let failure = match tokio::time::timeout(OP_LIMIT, op).await {
        Ok(Ok(bytes)) => {
            counters[0].fetch_add(1, Ordering::Relaxed);
            counters[1].fetch_add(bytes, Ordering::Relaxed);
            return;
        }
        Ok(Err(e)) => e,
        Err(_) => format!("not done after {OP_LIMIT:?}"),
    };
    ctx.tally.fail(ctx.t0, who, format!("{what}: {failure}"));
    // A worker that fails at once every time (a broken setup) must not flood the log.
    tokio::time::sleep(Duration::from_secs(1)).await;
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn mode(streaming: bool) -> &'static str {
    if streaming {
        "streamed"
    } else {
        "write_at/read_at"
    }
}

/// Uploader `id`: a file of a random size under one of its names, written by `write_at` in
/// 8 MiB pieces or through the streaming writer (whose errors wrap the library's in an
/// `io::Error`), closed, and its SHA-256 on the server's disk compared.
pub(crate) async fn uploader(ctx: Ctx, id: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let who = format!("uploader {id}");
    while !ctx.stop.load(Ordering::Relaxed) {
        let path = format!("up/u{id}-{}.bin", rng.random_range(0..NAMES_PER_UPLOADER));
        let size = SIZES[rng.random_range(0..SIZES.len())];
        let (file_seed, streaming): (u64, bool) = (rng.random(), rng.random_bool(0.5));
        let what = format!("upload {path} ({size} bytes, {})", mode(streaming));
        let op = upload(&ctx, &path, file_seed, size, streaming);
        book(
            &ctx,
            &who,
            &what,
            [&ctx.tally.uploads, &ctx.tally.bytes_up],
            op,
        )
        .await;
    }
}

async fn upload(
    ctx: &Ctx,
    path: &str,
    seed: u64,
    size: usize,
    streaming: bool,
) -> Result<u64, String> {
    let opts = OpenOptions::new().write(true).create(true).truncate(true);
    let f = ctx.share.open(path, &opts).await.map_err(text)?;
    if streaming {
        let mut w = f.writer();
        for i in 0..chunks(size) {
            w.write_all(&chunk(seed, size, i))
                .await
                .map_err(|e| format!("streamed write: {e}"))?;
        }
        w.shutdown()
            .await
            .map_err(|e| format!("streamed write: {e}"))?;
    } else {
        for i in 0..chunks(size) {
            f.write_at((i * CHUNK) as u64, chunk(seed, size, i))
                .await
                .map_err(text)?;
        }
    }
    f.close().await.map_err(text)?;
    let disk = ctx.share_root.join(path);
    let got = tokio::task::spawn_blocking(move || fingerprint(&disk))
        .await
        .map_err(|e| format!("hash task: {e}"))?;
    let fp = got.map_err(|e| format!("cannot read the server's file: {e}"))?;
    if fp.sha256 != sha256(seed, size) || fp.len != size as u64 {
        return Err(format!(
            "the server's file differs from what was written ({} bytes on disk)",
            fp.len
        ));
    }
    Ok(size as u64)
}

/// Downloader `id`: a random seeded file read whole by `read_at` in 8 MiB pieces or through
/// the streaming reader; its SHA-256 and length compared.
pub(crate) async fn downloader(ctx: Ctx, id: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let who = format!("downloader {id}");
    while !ctx.stop.load(Ordering::Relaxed) {
        let file = ctx.seeded[rng.random_range(0..ctx.seeded.len())].clone();
        let streaming = rng.random_bool(0.5);
        let what = format!(
            "download {} ({} bytes, {})",
            file.path,
            file.size,
            mode(streaming)
        );
        let op = download(&ctx, &file, streaming);
        book(
            &ctx,
            &who,
            &what,
            [&ctx.tally.downloads, &ctx.tally.bytes_down],
            op,
        )
        .await;
    }
}

async fn download(ctx: &Ctx, file: &Seeded, streaming: bool) -> Result<u64, String> {
    let f = ctx
        .share
        .open(&file.path, &OpenOptions::new().read(true))
        .await
        .map_err(text)?;
    let (mut h, mut total) = (Sha256::new(), 0u64);
    if streaming {
        let (mut r, mut buf) = (f.reader(), vec![0u8; 1 << 20]);
        loop {
            match r
                .read(&mut buf)
                .await
                .map_err(|e| format!("streamed read: {e}"))?
            {
                0 => break,
                n => {
                    h.update(&buf[..n]);
                    total += n as u64;
                }
            }
        }
    } else {
        // Asks for a little more than the file holds at the end, so a file that grew shows.
        while total < file.size as u64 + 1 {
            let b = f.read_at(total, CHUNK).await.map_err(text)?;
            if b.is_empty() {
                break;
            }
            h.update(&b);
            total += b.len() as u64;
        }
    }
    f.close().await.map_err(text)?;
    if total != file.size as u64 {
        return Err(format!("read {total} bytes"));
    }
    if hex(&h.finalize()) != file.sha256 {
        return Err("the bytes read differ from the file's".into());
    }
    Ok(total)
}

/// Metadata loop: list `down/` (every seeded name there), stat a random seeded file (its size
/// right), list `up/`, and now and then the volume's sizes. A round every 100 ms: this loop
/// is about surviving, not load.
pub(crate) async fn metadata_loop(ctx: Ctx, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let unused = AtomicU64::new(0);
    while !ctx.stop.load(Ordering::Relaxed) {
        let file = ctx.seeded[rng.random_range(0..ctx.seeded.len())].clone();
        let op = metadata_round(&ctx, &file, rng.random_bool(0.1));
        book(
            &ctx,
            "metadata",
            "metadata round",
            [&ctx.tally.metadata_ops, &unused],
            op,
        )
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn metadata_round(ctx: &Ctx, file: &Seeded, fs_info: bool) -> Result<u64, String> {
    let listing = ctx.share.read_dir("down").await.map_err(text)?;
    for name in ctx
        .seeded
        .iter()
        .map(|s| s.path.trim_start_matches("down/"))
    {
        if !listing.iter().any(|e| e.name == name) {
            return Err(format!("listing of down/ lacks {name}"));
        }
    }
    let len = ctx.share.metadata(&file.path).await.map_err(text)?.len;
    if len != file.size as u64 {
        return Err(format!("{}: size {len} listed", file.path));
    }
    ctx.share.read_dir("up").await.map_err(text)?;
    if fs_info {
        ctx.share.fs_info().await.map_err(text)?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_size_and_depend_on_seed_and_index() {
        for size in SIZES {
            assert_eq!(
                (0..chunks(size))
                    .map(|i| chunk(7, size, i).len())
                    .sum::<usize>(),
                size
            );
        }
        let size = 2 * CHUNK;
        assert_eq!(chunk(1, size, 0), chunk(1, size, 0));
        assert_ne!(chunk(1, size, 0), chunk(2, size, 0));
        assert_ne!(chunk(1, size, 0), chunk(1, size, 1));
        assert_ne!(sha256(1, 100), sha256(1, 101));
    }
}
