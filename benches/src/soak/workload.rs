//! The soak's workload through the library: uploaders, downloaders and a metadata loop, each
//! a task that repeats its operation until told to stop. Every byte is checked: an upload
//! against the server's disk, a download against the content the file was seeded with.
//!
//! What counts as a failure: a byte or size mismatch, an operation that does not finish
//! within [`OP_LIMIT`], and any error at all: the faults are ones the library survives (a
//! listing whose QUERY_DIRECTORY is lost with its channel goes on from a new handle, see
//! docs/FAILOVER.md), so none may reach the caller.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use smb3_client::{Error, OpenOptions, Share};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::content::{self, SIZES};

/// Longest one operation may take before it counts as lost. A 64 MiB transfer on the slowest
/// plan (one worker's share of three links at 100 Mbit/s beside five others) takes about
/// 15 s; an smbd restart or a re-established session adds a few seconds; a request waits at
/// most `failover_wait` (30 s) for a channel. Three minutes is far beyond all of that.
pub const OP_LIMIT: Duration = Duration::from_secs(180);

/// Files each uploader overwrites in turn (so the share never fills).
const NAMES_PER_UPLOADER: usize = 4;

/// One file seeded on the server for the downloaders.
#[derive(Debug, Clone)]
pub struct Seeded {
    /// Share-relative path.
    pub path: String,
    /// Content seed and size (see [`content::chunk`]).
    pub seed: u64,
    /// Length in bytes.
    pub size: usize,
    /// Expected SHA-256.
    pub sha256: [u8; 32],
}

/// Put one file of every size in [`SIZES`] (and a second of the largest) into `dir` on the
/// server's disk, under the share at `share_root`, as `down/f<i>.bin`.
pub fn seed_files(share_root: &std::path::Path, seed: u64) -> std::io::Result<Vec<Seeded>> {
    use std::os::unix::fs::PermissionsExt;
    let dir = share_root.join("down");
    // Made by root here; smbd acts as the test user, who must be able to write in them.
    for d in [dir.clone(), share_root.join("up")] {
        std::fs::create_dir_all(&d)?;
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777))?;
    }
    let mut out = Vec::new();
    let sizes = SIZES.iter().copied().chain([SIZES[SIZES.len() - 1]]);
    for (i, size) in sizes.enumerate() {
        let file_seed = seed ^ ((i as u64 + 1) << 40);
        let mut data = Vec::with_capacity(size);
        for c in 0..content::chunks(size) {
            data.extend_from_slice(&content::chunk(file_seed, size, c));
        }
        std::fs::write(dir.join(format!("f{i}.bin")), &data)?;
        out.push(Seeded {
            path: format!("down/f{i}.bin"),
            seed: file_seed,
            size,
            sha256: Sha256::digest(&data).into(),
        });
    }
    Ok(out)
}

/// Counts shared by the workers, the sampler and the report.
#[derive(Debug, Default)]
pub struct Tally {
    /// Uploads verified on the server's disk.
    pub uploads: AtomicU64,
    /// Downloads verified against the seeded content.
    pub downloads: AtomicU64,
    /// Metadata rounds (listing, stat) that checked out.
    pub metadata_ops: AtomicU64,
    /// Bytes uploaded and verified.
    pub bytes_up: AtomicU64,
    /// Bytes downloaded and verified.
    pub bytes_down: AtomicU64,
    /// Failures (each also in `failures`).
    pub failed: AtomicU64,
    /// Every failure, with the time and the worker.
    pub failures: Mutex<Vec<String>>,
}

impl Tally {
    /// Operations that completed and verified.
    pub fn ops(&self) -> u64 {
        self.uploads.load(Ordering::Relaxed)
            + self.downloads.load(Ordering::Relaxed)
            + self.metadata_ops.load(Ordering::Relaxed)
    }

    /// Bytes verified in both directions.
    pub fn bytes(&self) -> u64 {
        self.bytes_up.load(Ordering::Relaxed) + self.bytes_down.load(Ordering::Relaxed)
    }

    /// Record a failure of `who`, with the time since `t0`.
    pub fn fail(&self, t0: Instant, who: &str, what: String) {
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
pub struct Ctx {
    /// The share the workload runs on.
    pub share: Share,
    /// The share's directory on the server's disk (for verifying uploads).
    pub share_root: PathBuf,
    /// The files seeded for downloads.
    pub seeded: Arc<Vec<Seeded>>,
    /// The counts.
    pub tally: Arc<Tally>,
    /// Set when the run is over: workers finish their operation and return.
    pub stop: Arc<AtomicBool>,
    /// Start of the run (timestamps of failures).
    pub t0: Instant,
}

/// How one operation ended.
enum Outcome {
    /// Done and verified; bytes moved.
    Verified(u64),
    /// The library returned an error.
    Error(Error),
    /// The bytes or sizes are wrong, or the streaming reader/writer failed (it wraps the
    /// library's error in an `io::Error`, so it cannot be told apart as tolerated).
    Failed(String),
}

/// Run `op` bounded by [`OP_LIMIT`] and book its outcome.
async fn book<F>(ctx: &Ctx, who: &str, what: &str, counter: &AtomicU64, bytes: &AtomicU64, op: F)
where
    F: std::future::Future<Output = Outcome>,
{
    let before = ctx.tally.failed.load(Ordering::Relaxed);
    match tokio::time::timeout(OP_LIMIT, op).await {
        Ok(Outcome::Verified(n)) => {
            counter.fetch_add(1, Ordering::Relaxed);
            bytes.fetch_add(n, Ordering::Relaxed);
        }
        Ok(Outcome::Failed(m)) => ctx.tally.fail(ctx.t0, who, format!("{what}: {m}")),
        Ok(Outcome::Error(e)) => ctx.tally.fail(ctx.t0, who, format!("{what}: {e}")),
        Err(_) => ctx
            .tally
            .fail(ctx.t0, who, format!("{what}: not done after {OP_LIMIT:?}")),
    }
    if ctx.tally.failed.load(Ordering::Relaxed) > before {
        // A worker that fails at once every time (a broken setup) must not flood the log.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Upload loop of worker `id`: a file of a random size under a random one of its names,
/// written by `write_at` in 8 MiB pieces or through the streaming writer, closed, and its
/// SHA-256 on the server's disk compared.
pub async fn uploader(ctx: Ctx, id: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let who = format!("uploader {id}");
    let tally = ctx.tally.clone();
    while !ctx.stop.load(Ordering::Relaxed) {
        let path = format!("up/u{id}-{}.bin", rng.random_range(0..NAMES_PER_UPLOADER));
        let size = SIZES[rng.random_range(0..SIZES.len())];
        let file_seed: u64 = rng.random();
        let streaming = rng.random_bool(0.5);
        let what = format!("upload {path} ({size} bytes, {})", mode(streaming));
        let op = upload(&ctx, &path, file_seed, size, streaming);
        book(&ctx, &who, &what, &tally.uploads, &tally.bytes_up, op).await;
    }
}

fn mode(streaming: bool) -> &'static str {
    if streaming {
        "streamed"
    } else {
        "write_at/read_at"
    }
}

async fn upload(ctx: &Ctx, path: &str, seed: u64, size: usize, streaming: bool) -> Outcome {
    let opts = OpenOptions::new().write(true).create(true).truncate(true);
    let f = match ctx.share.open(path, &opts).await {
        Ok(f) => f,
        Err(e) => return Outcome::Error(e),
    };
    let written = if streaming {
        let mut w = f.writer();
        let mut r = Ok(());
        for i in 0..content::chunks(size) {
            r = w.write_all(&content::chunk(seed, size, i)).await;
            if r.is_err() {
                break;
            }
        }
        match r {
            Ok(()) => w.shutdown().await,
            Err(e) => Err(e),
        }
        .map_err(|e| format!("streamed write: {e}"))
    } else {
        let mut r = Ok(());
        for i in 0..content::chunks(size) {
            let off = (i * content::CHUNK) as u64;
            if let Err(e) = f.write_at(off, content::chunk(seed, size, i)).await {
                r = Err(e);
                break;
            }
        }
        match r {
            Ok(()) => Ok(()),
            Err(e) => return Outcome::Error(e),
        }
    };
    if let Err(e) = written {
        return Outcome::Failed(e);
    }
    if let Err(e) = f.close().await {
        return Outcome::Error(e);
    }
    let disk = ctx.share_root.join(path);
    let want = content::sha256(seed, size);
    let got = tokio::task::spawn_blocking(move || content::sha256_of_path(&disk)).await;
    match got {
        Ok(Ok((sha, len))) if sha == want && len == size as u64 => Outcome::Verified(size as u64),
        Ok(Ok((_, len))) => Outcome::Failed(format!(
            "the server's file differs from what was written ({len} bytes on disk)"
        )),
        Ok(Err(e)) => Outcome::Failed(format!("cannot read the server's file: {e}")),
        Err(e) => Outcome::Failed(format!("hash task: {e}")),
    }
}

/// Download loop of worker `id`: a random seeded file read whole by `read_at` in 8 MiB pieces
/// or through the streaming reader; its SHA-256 and length compared.
pub async fn downloader(ctx: Ctx, id: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let who = format!("downloader {id}");
    let tally = ctx.tally.clone();
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
        book(&ctx, &who, &what, &tally.downloads, &tally.bytes_down, op).await;
    }
}

async fn download(ctx: &Ctx, file: &Seeded, streaming: bool) -> Outcome {
    let f = match ctx
        .share
        .open(&file.path, &OpenOptions::new().read(true))
        .await
    {
        Ok(f) => f,
        Err(e) => return Outcome::Error(e),
    };
    let mut h = Sha256::new();
    let mut total = 0u64;
    if streaming {
        let mut r = f.reader();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            match r.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => {
                    h.update(&buf[..n]);
                    total += n as u64;
                }
                Err(e) => return Outcome::Failed(format!("streamed read: {e}")),
            }
        }
    } else {
        // Ask for a little more than the file holds at the end, so a file that grew shows.
        while total < file.size as u64 + 1 {
            match f.read_at(total, content::CHUNK).await {
                Ok(b) if b.is_empty() => break,
                Ok(b) => {
                    h.update(&b);
                    total += b.len() as u64;
                }
                Err(e) => return Outcome::Error(e),
            }
        }
    }
    if let Err(e) = f.close().await {
        return Outcome::Error(e);
    }
    let sha: [u8; 32] = h.finalize().into();
    if total != file.size as u64 {
        Outcome::Failed(format!("read {total} bytes"))
    } else if sha != file.sha256 {
        Outcome::Failed("the bytes read differ from the file's".to_string())
    } else {
        Outcome::Verified(total)
    }
}

/// Metadata loop: list `down/` (every seeded name must be there), stat a random seeded file
/// (its size must match), list `up/`, and now and then ask for the volume's sizes.
pub async fn metadata_loop(ctx: Ctx, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let tally = ctx.tally.clone();
    let unused = AtomicU64::new(0);
    while !ctx.stop.load(Ordering::Relaxed) {
        let file = ctx.seeded[rng.random_range(0..ctx.seeded.len())].clone();
        let fs_info = rng.random_bool(0.1);
        let op = metadata_round(&ctx, &file, fs_info);
        book(
            &ctx,
            "metadata",
            "metadata round",
            &tally.metadata_ops,
            &unused,
            op,
        )
        .await;
        // A listing every 100 ms is plenty; this loop is about surviving, not load.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn metadata_round(ctx: &Ctx, file: &Seeded, fs_info: bool) -> Outcome {
    let listing = match ctx.share.read_dir("down").await {
        Ok(l) => l,
        Err(e) => return Outcome::Error(e),
    };
    for s in ctx.seeded.iter() {
        let name = s.path.trim_start_matches("down/");
        if !listing.iter().any(|e| e.name == name) {
            return Outcome::Failed(format!("listing of down/ lacks {name}"));
        }
    }
    match ctx.share.metadata(&file.path).await {
        Ok(m) if m.len == file.size as u64 => {}
        Ok(m) => return Outcome::Failed(format!("{}: size {} listed", file.path, m.len)),
        Err(e) => return Outcome::Error(e),
    }
    if let Err(e) = ctx.share.read_dir("up").await {
        return Outcome::Error(e);
    }
    if fs_info {
        if let Err(e) = ctx.share.fs_info().await {
            return Outcome::Error(e);
        }
    }
    Outcome::Verified(0)
}
