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
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use smb3_client::{ClientConfig, OpenOptions, Share};
use smb3_tests::{client_block_on, Testbed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{heap, Ctx, Settings, Subject};
use crate::data::{fingerprint, Fingerprint, Hashing};
use crate::Context;

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

fn chunks(seed: u64, size: usize) -> impl Iterator<Item = Bytes> {
    (0..size.div_ceil(CHUNK)).map(move |i| chunk(seed, size, i))
}

/// One file seeded on the server for the downloaders: share-relative path, size and SHA-256.
type Seeded = (String, Fingerprint);

/// The in-process client: its runtime in the client namespace, its session, and the files
/// seeded for the downloaders.
pub(crate) struct Library {
    rt: tokio::runtime::Runtime,
    client: smb3_client::Client,
    share: Share,
    share_root: PathBuf,
    seeded: Arc<Vec<Seeded>>,
}

impl Library {
    /// Seeds the files and connects one session, its interface re-query (the library's own
    /// poll, shortened from 15 minutes) every sampling interval; a loaded machine must not
    /// stall binding for 10 s a try.
    pub(crate) fn start(tb: &Testbed, s: &Settings) -> Result<Library, String> {
        let share_root = tb.share_path("plain");
        let seeded = seed_files(&share_root, s.seed).ctx("seed files")?;
        let rt = tb.client_runtime();
        let mut cfg = ClientConfig::default();
        cfg.interface_poll = s.sample_every;
        (cfg.bind_timeout, cfg.connect_timeout) = (Duration::from_secs(3), Duration::from_secs(2));
        let (client, share) = client_block_on(&rt, crate::session::connect_plain(tb, cfg))?;
        Ok(Library {
            rt,
            client,
            share,
            share_root,
            seeded: Arc::new(seeded),
        })
    }

    /// The client as the checks see it: what the checks read of a mount's status document
    /// (`smbctl status --json`), the runtime's live tasks, and reply buffers released after
    /// 10 s unused (checked every 250 ms).
    pub(crate) fn subject(&self) -> Subject {
        let client = self.client.clone();
        let status = move || {
            let (mc, tasks) = (client.multichannel(), smb3_client::tasks::live());
            let f = &mc.failover;
            let failover = json!({"channel_losses": f.channel_losses, "silent_losses": f.silent_losses,
                "false_alarms": f.false_alarms, "replays": f.replays, "not_replayed": f.not_replayed,
                "reconnects": f.reconnects, "sessions_reestablished": f.sessions_reestablished,
                "opens_reclaimed": f.opens_reclaimed, "opens_reopened": f.opens_reopened,
                "opens_lost": f.opens_lost, "listings_resumed": f.listings_resumed});
            let channels: Vec<_> = client
                .channels()
                .iter()
                .map(|c| json!({"state": c.state.to_string()}))
                .collect();
            let tasks = tasks
                .iter()
                .map(|c| (c.kind.label().to_string(), json!({"live": c.live})));
            let (tasks, heap) = (tasks.collect::<serde_json::Map<_, _>>(), heap::live_bytes());
            let mc = json!({"planned": mc.planned(), "interface_queries": mc.interface_queries, "failover": failover});
            Some(
                json!({"channels": channels, "multichannel": mc, "library_tasks": tasks, "heap_in_use_bytes": heap}),
            )
        };
        let runtime = Some(self.rt.handle().clone());
        Subject {
            status: Arc::new(status),
            pid: "self".into(),
            runtime,
            release: Duration::from_secs(11),
        }
    }

    /// Starts the uploaders, the downloaders and the metadata loop, each awaited on a thread.
    pub(crate) fn workers(&self, ctx: &Ctx, s: &Settings) -> Vec<std::thread::JoinHandle<()>> {
        let worker = |seed: u64, kind: u8, id: usize| {
            let (ctx, rng) = (
                ctx.clone(),
                StdRng::seed_from_u64(s.seed.wrapping_add(seed + id as u64)),
            );
            let (share, root, seeded) = (
                self.share.clone(),
                self.share_root.clone(),
                self.seeded.clone(),
            );
            let task = self.rt.spawn(async move {
                match kind {
                    0 => uploader(ctx, rng, &share, &root, id).await,
                    1 => downloader(ctx, rng, &share, &seeded, id).await,
                    _ => metadata_loop(ctx, rng, &share, &seeded).await,
                }
            });
            let handle = self.rt.handle().clone();
            std::thread::spawn(move || handle.block_on(task).expect("a worker ended abnormally"))
        };
        let up = (0..s.uploaders).map(|i| worker(1000, 0, i));
        let down = (0..s.downloaders).map(|i| worker(2000, 1, i));
        up.chain(down).chain([worker(3000, 2, 0)]).collect()
    }

    pub(crate) fn finish(self) {
        let client = self.client;
        let _ = client_block_on(&self.rt, async move { client.logoff().await });
    }
}

/// Puts one file of every size in [`SIZES`] (and a second of the largest) into `down/` on
/// the server's disk under `share_root`, and makes `up/` for the uploaders.
fn seed_files(share_root: &Path, seed: u64) -> std::io::Result<Vec<Seeded>> {
    // Made by root here; smbd acts as the test user, who must be able to write in them.
    for d in ["down", "up"] {
        std::fs::create_dir_all(share_root.join(d))?;
        std::fs::set_permissions(share_root.join(d), std::fs::Permissions::from_mode(0o777))?;
    }
    let sizes = SIZES.iter().chain([&SIZES[SIZES.len() - 1]]);
    let mut out = Vec::new();
    for (i, &size) in sizes.enumerate() {
        let data: Vec<u8> = chunks(seed ^ ((i as u64 + 1) << 40), size)
            .flatten()
            .collect();
        std::fs::write(share_root.join(format!("down/f{i}.bin")), &data)?;
        let mut hashing = Hashing::default();
        hashing.update(&data);
        out.push((format!("down/f{i}.bin"), hashing.finish()));
    }
    Ok(out)
}

/// Runs `op` bounded by [`OP_LIMIT`] and books what it verified (once in `counters[0]`, its
/// bytes in `counters[1]`), or its failure.
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
async fn uploader(ctx: Ctx, mut rng: StdRng, share: &Share, root: &Path, id: usize) {
    let who = format!("uploader {id}");
    while !ctx.stopped() {
        let path = format!("up/u{id}-{}.bin", rng.random_range(0..NAMES_PER_UPLOADER));
        let size = SIZES[rng.random_range(0..SIZES.len())];
        let (seed, streaming): (u64, bool) = (rng.random(), rng.random_bool(0.5));
        let what = format!("upload {path} ({size} bytes, {})", mode(streaming));
        let op = upload(share, root, &path, seed, size, streaming);
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
    share: &Share,
    root: &Path,
    path: &str,
    seed: u64,
    size: usize,
    streaming: bool,
) -> Result<u64, String> {
    let f = share
        .open(
            path,
            &OpenOptions::new().write(true).create(true).truncate(true),
        )
        .await
        .map_err(text)?;
    if streaming {
        let mut w = f.writer();
        for c in chunks(seed, size) {
            w.write_all(&c).await.ctx("streamed write")?;
        }
        w.shutdown().await.ctx("streamed write")?;
    } else {
        for (i, c) in chunks(seed, size).enumerate() {
            f.write_at((i * CHUNK) as u64, c).await.map_err(text)?;
        }
    }
    f.close().await.map_err(text)?;
    let disk = root.join(path);
    let got = tokio::task::spawn_blocking(move || fingerprint(&disk))
        .await
        .ctx("hash task")?;
    let fp = got.ctx("cannot read the server's file")?;
    let mut sent = Hashing::default();
    chunks(seed, size).for_each(|c| sent.update(&c));
    if fp != sent.finish() {
        return Err(format!(
            "the server's file differs from what was written ({} bytes on disk)",
            fp.len
        ));
    }
    Ok(size as u64)
}

/// Downloader `id`: a random seeded file read whole by `read_at` in 8 MiB pieces or through
/// the streaming reader; its SHA-256 and length compared.
async fn downloader(ctx: Ctx, mut rng: StdRng, share: &Share, seeded: &[Seeded], id: usize) {
    let who = format!("downloader {id}");
    while !ctx.stopped() {
        let file = &seeded[rng.random_range(0..seeded.len())];
        let streaming = rng.random_bool(0.5);
        let what = format!(
            "download {} ({} bytes, {})",
            file.0,
            file.1.len,
            mode(streaming)
        );
        let op = download(share, file, streaming);
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

async fn download(
    share: &Share,
    (path, expected): &Seeded,
    streaming: bool,
) -> Result<u64, String> {
    let f = share
        .open(path, &OpenOptions::new().read(true))
        .await
        .map_err(text)?;
    let mut h = Hashing::default();
    if streaming {
        let (mut r, mut buf) = (f.reader(), vec![0u8; 1 << 20]);
        loop {
            match r.read(&mut buf).await.ctx("streamed read")? {
                0 => break,
                n => h.update(&buf[..n]),
            }
        }
    } else {
        // Asks for a little more than the file holds at the end, so a file that grew shows.
        while h.bytes() < expected.len + 1 {
            let b = f.read_at(h.bytes(), CHUNK).await.map_err(text)?;
            if b.is_empty() {
                break;
            }
            h.update(&b);
        }
    }
    f.close().await.map_err(text)?;
    match h.finish() {
        got if got.len != expected.len => Err(format!("read {} bytes", got.len)),
        got if got != *expected => Err("the bytes read differ from the file's".into()),
        got => Ok(got.len),
    }
}

/// Metadata loop: list `down/` (every seeded name there), stat a random seeded file (its size
/// right), list `up/`, and now and then the volume's sizes. A round every 100 ms: this loop
/// is about surviving, not load.
async fn metadata_loop(ctx: Ctx, mut rng: StdRng, share: &Share, seeded: &[Seeded]) {
    let unused = AtomicU64::new(0);
    while !ctx.stopped() {
        let file = &seeded[rng.random_range(0..seeded.len())];
        let op = metadata_round(share, seeded, file, rng.random_bool(0.1));
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

async fn metadata_round(
    share: &Share,
    seeded: &[Seeded],
    file: &Seeded,
    fs_info: bool,
) -> Result<u64, String> {
    let listing = share.read_dir("down").await.map_err(text)?;
    for name in seeded.iter().map(|s| s.0.trim_start_matches("down/")) {
        if !listing.iter().any(|e| e.name == name) {
            return Err(format!("listing of down/ lacks {name}"));
        }
    }
    let len = share.metadata(&file.0).await.map_err(text)?.len;
    if len != file.1.len {
        return Err(format!("{}: size {len} listed", file.0));
    }
    share.read_dir("up").await.map_err(text)?;
    if fs_info {
        share.fs_info().await.map_err(text)?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_size_and_depend_on_seed_and_index() {
        for size in SIZES {
            assert_eq!(chunks(7, size).map(|c| c.len()).sum::<usize>(), size);
        }
        let size = 2 * CHUNK;
        assert_eq!(chunk(1, size, 0), chunk(1, size, 0));
        assert_ne!(chunk(1, size, 0), chunk(2, size, 0));
        assert_ne!(chunk(1, size, 0), chunk(1, size, 1));
    }
}
