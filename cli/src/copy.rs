//! The copy engine of `smbcp`: plan the file list, then copy several files at once, each with
//! many chunks in flight. A file is written under a temporary name and renamed into place only
//! when complete, so a failed copy never leaves a short file under the real name. A file
//! whose open the server lost (it restarted and forgot its durable handles, see
//! `Error::HandleLost`) is copied again from the start, up to `CopyOptions::retries` times.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{self, StreamExt, TryStreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use smb3_client::{BufferPool, Error, OpenOptions, Share};

use crate::chunk_read::{read_chunk, ChunkSource};
use crate::describe;

/// How to copy.
#[derive(Clone, Debug)]
pub struct CopyOptions {
    /// Copy directories recursively.
    pub recursive: bool,
    /// Files copied at the same time.
    pub jobs: usize,
    /// Bytes per chunk request.
    pub chunk: u32,
    /// Chunks in flight per file.
    pub depth: usize,
    /// Show a progress bar.
    pub progress: bool,
    /// How many times a file is copied again from the start after the server lost its open.
    pub retries: u32,
}

/// What a copy did.
#[derive(Debug, Default)]
pub struct CopyReport {
    /// Bytes copied.
    pub bytes: u64,
    /// Files copied.
    pub files: u64,
    /// Wall time.
    pub seconds: f64,
    /// One line per failed file.
    pub failures: Vec<String>,
    /// Files started again from the beginning because the server lost their open, with the
    /// reason, one line each (the copy then succeeded or is also in `failures`).
    pub retried: Vec<String>,
}

/// Direction of one file's copy.
#[derive(Clone, Debug)]
enum Job {
    Download {
        remote: String,
        local: PathBuf,
        size: u64,
    },
    Upload {
        local: PathBuf,
        remote: String,
        size: u64,
    },
}

impl Job {
    fn size(&self) -> u64 {
        match self {
            Job::Download { size, .. } | Job::Upload { size, .. } => *size,
        }
    }
}

fn join_remote(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn base_name_remote(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Plan and run a download of remote `sources` (share-relative paths) into `dest`.
pub async fn download(
    share: &Share,
    sources: &[String],
    dest: &Path,
    opts: &CopyOptions,
) -> CopyReport {
    let mut report = CopyReport::default();
    let mut jobs = Vec::new();
    let dest_is_dir = dest.is_dir();
    if sources.len() > 1 && !dest_is_dir {
        report.failures.push(format!(
            "{}: destination must be an existing directory for several sources",
            dest.display()
        ));
        return report;
    }
    for src in sources {
        let md = match share.metadata(src).await {
            Ok(md) => md,
            Err(e) => {
                report
                    .failures
                    .push(format!("{}: {}", remote_name(share, src), describe(&e)));
                continue;
            }
        };
        let target = if dest_is_dir {
            dest.join(base_name_remote(src))
        } else {
            dest.to_path_buf()
        };
        if md.is_dir() {
            if !opts.recursive {
                report.failures.push(format!(
                    "{}: is a directory (use -r)",
                    remote_name(share, src)
                ));
                continue;
            }
            if let Err(e) = plan_remote_tree(share, src, &target, &mut jobs).await {
                report.failures.push(e);
            }
        } else {
            jobs.push(Job::Download {
                remote: src.clone(),
                local: target,
                size: md.len,
            });
        }
    }
    run(share, jobs, opts, report).await
}

/// Walk a remote directory, creating local directories and listing files to fetch.
async fn plan_remote_tree(
    share: &Share,
    dir: &str,
    local: &Path,
    jobs: &mut Vec<Job>,
) -> Result<(), String> {
    let mut stack = vec![(dir.to_string(), local.to_path_buf())];
    while let Some((rdir, ldir)) = stack.pop() {
        std::fs::create_dir_all(&ldir).map_err(|e| format!("{}: {e}", ldir.display()))?;
        let entries = share
            .read_dir(&rdir)
            .await
            .map_err(|e| format!("{}: {}", remote_name(share, &rdir), describe(&e)))?;
        for e in entries {
            let r = join_remote(&rdir, &e.name);
            let l = ldir.join(&e.name);
            if e.metadata.is_dir() {
                stack.push((r, l));
            } else {
                jobs.push(Job::Download {
                    remote: r,
                    local: l,
                    size: e.metadata.len,
                });
            }
        }
    }
    Ok(())
}

/// Plan and run an upload of local `sources` into the share-relative directory or file `dest`.
pub async fn upload(
    share: &Share,
    sources: &[PathBuf],
    dest: &str,
    opts: &CopyOptions,
) -> CopyReport {
    let mut report = CopyReport::default();
    let mut jobs = Vec::new();
    let dest_is_dir = match share.metadata(dest).await {
        Ok(md) => md.is_dir(),
        Err(e) if e.to_errno() == 2 => false,
        Err(e) => {
            report
                .failures
                .push(format!("{}: {}", remote_name(share, dest), describe(&e)));
            return report;
        }
    };
    if sources.len() > 1 && !dest_is_dir {
        report.failures.push(format!(
            "{}: destination must be an existing directory for several sources",
            remote_name(share, dest)
        ));
        return report;
    }
    for src in sources {
        let md = match std::fs::metadata(src) {
            Ok(md) => md,
            Err(e) => {
                report.failures.push(format!("{}: {e}", src.display()));
                continue;
            }
        };
        let name = src
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let target = if dest_is_dir {
            join_remote(dest, &name)
        } else {
            dest.to_string()
        };
        if md.is_dir() {
            if !opts.recursive {
                report
                    .failures
                    .push(format!("{}: is a directory (use -r)", src.display()));
                continue;
            }
            if let Err(e) = plan_local_tree(share, src, &target, &mut jobs).await {
                report.failures.push(e);
            }
        } else {
            jobs.push(Job::Upload {
                local: src.clone(),
                remote: target,
                size: md.len(),
            });
        }
    }
    run(share, jobs, opts, report).await
}

async fn plan_local_tree(
    share: &Share,
    dir: &Path,
    remote: &str,
    jobs: &mut Vec<Job>,
) -> Result<(), String> {
    let mut stack = vec![(dir.to_path_buf(), remote.to_string())];
    while let Some((ldir, rdir)) = stack.pop() {
        share
            .create_dir_all(&rdir)
            .await
            .map_err(|e| format!("{}: {}", remote_name(share, &rdir), describe(&e)))?;
        let entries = std::fs::read_dir(&ldir).map_err(|e| format!("{}: {e}", ldir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", ldir.display()))?;
            let md = entry
                .metadata()
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let r = join_remote(&rdir, &name);
            if md.is_dir() {
                stack.push((entry.path(), r));
            } else if md.is_file() {
                jobs.push(Job::Upload {
                    local: entry.path(),
                    remote: r,
                    size: md.len(),
                });
            }
        }
    }
    Ok(())
}

fn remote_name(share: &Share, path: &str) -> String {
    format!(
        "//{}/{}/{}",
        share.client().server_addr().ip(),
        share.name(),
        path
    )
}

async fn run(
    share: &Share,
    jobs: Vec<Job>,
    opts: &CopyOptions,
    mut report: CopyReport,
) -> CopyReport {
    let total: u64 = jobs.iter().map(Job::size).sum();
    let bar = if opts.progress {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template(
                "{bytes:>10}/{total_bytes} {wide_bar} {binary_bytes_per_sec:>12} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let moved = Arc::new(AtomicU64::new(0));
    // Upload chunks in flight at once, at most: the pool keeps that many buffers for reuse.
    let in_flight = opts.jobs.max(1) * opts.depth.max(1);
    let buffers = &BufferPool::new(in_flight.saturating_mul(opts.chunk as usize));
    let start = Instant::now();
    let results: Vec<(Result<u64, String>, Vec<String>)> = stream::iter(jobs)
        .map(|job| {
            let progress = Progress {
                bar: bar.clone(),
                moved: moved.clone(),
                attempt: Arc::new(AtomicU64::new(0)),
            };
            async move { copy_with_retries(share, job, opts, buffers, progress).await }
        })
        .buffer_unordered(opts.jobs.max(1))
        .collect()
        .await;
    report.seconds = start.elapsed().as_secs_f64();
    for (r, retried) in results {
        report.retried.extend(retried);
        match r {
            Ok(bytes) => {
                report.bytes += bytes;
                report.files += 1;
            }
            Err(line) => report.failures.push(line),
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    report
}

#[derive(Clone)]
struct Progress {
    bar: Option<ProgressBar>,
    moved: Arc<AtomicU64>,
    /// Bytes of the current attempt at one file, taken back if it starts over.
    attempt: Arc<AtomicU64>,
}

impl Progress {
    fn add(&self, n: u64) {
        self.moved.fetch_add(n, Ordering::Relaxed);
        self.attempt.fetch_add(n, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// The same counters, with a fresh count for one file's attempt.
    fn for_file(&self) -> Progress {
        Progress {
            attempt: Arc::new(AtomicU64::new(0)),
            ..self.clone()
        }
    }

    /// Take back what the current attempt added: the file starts over.
    fn rewind(&self) {
        let n = self.attempt.swap(0, Ordering::Relaxed);
        self.moved.fetch_sub(n, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.dec(n);
        }
    }
}

fn partial_local(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.smbcp-partial"))
}

fn partial_remote(target: &str) -> String {
    match target.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.{name}.smbcp-partial"),
        None => format!(".{target}.smbcp-partial"),
    }
}

/// Split `len` bytes into `(offset, length)` chunks.
fn chunks(len: u64, chunk: u32) -> impl Iterator<Item = (u64, u32)> {
    let c = u64::from(chunk.max(1));
    (0..len.div_ceil(c)).map(move |i| (i * c, (len - i * c).min(c) as u32))
}

/// Copy one file, starting over (up to `opts.retries` times) when the server lost its open.
/// Returns the outcome and one line per restart.
async fn copy_with_retries(
    share: &Share,
    job: Job,
    opts: &CopyOptions,
    buffers: &BufferPool,
    progress: Progress,
) -> (Result<u64, String>, Vec<String>) {
    let mut restarts = Vec::new();
    loop {
        let attempt = progress.for_file();
        match copy_one(share, &job, opts, buffers, &attempt).await {
            Ok(n) => return (Ok(n), restarts),
            Err(e) if e.lost_handle && restarts.len() < opts.retries as usize => {
                attempt.rewind();
                restarts.push(format!(
                    "{}; copying it again from the start (retry {} of {})",
                    e.cause,
                    restarts.len() + 1,
                    opts.retries
                ));
            }
            Err(e) => {
                attempt.rewind();
                return (Err(e.line), restarts);
            }
        }
    }
}

/// Why one attempt at a file failed.
struct FileError {
    /// The one line for the user, naming the file and what was not written.
    line: String,
    /// The file and what went wrong, without the consequence.
    cause: String,
    /// The server lost the open (`Error::HandleLost`): starting over may succeed.
    lost_handle: bool,
}

async fn copy_one(
    share: &Share,
    job: &Job,
    opts: &CopyOptions,
    buffers: &BufferPool,
    progress: &Progress,
) -> Result<u64, FileError> {
    match job {
        Job::Download { remote, local, .. } => {
            let partial = partial_local(local);
            match download_file(share, remote, &partial, opts, progress).await {
                Ok(n) => std::fs::rename(&partial, local).map(|_| n).map_err(|e| {
                    let cause = format!("{}: {e}", local.display());
                    FileError {
                        line: cause.clone(),
                        cause,
                        lost_handle: false,
                    }
                }),
                Err(e) => {
                    let _ = std::fs::remove_file(&partial);
                    let cause = format!("{}: {}", remote_name(share, remote), e.line);
                    Err(FileError {
                        line: format!("{cause}; {} was not written", local.display()),
                        cause,
                        lost_handle: e.lost_handle,
                    })
                }
            }
        }
        Job::Upload { local, remote, .. } => {
            let partial = partial_remote(remote);
            let result = match upload_file(share, local, &partial, opts, buffers, progress).await {
                Ok(n) => share
                    .rename(&partial, remote, true)
                    .await
                    .map(|_| n)
                    .map_err(|e| TransferError::request(&e)),
                Err(e) => Err(e),
            };
            let e = match result {
                Ok(n) => return Ok(n),
                Err(e) => e,
            };
            let leftover = e.partial_created && share.remove_file(&partial).await.is_err();
            let cause = format!("{}: {}", local.display(), e.line);
            Err(FileError {
                line: format!(
                    "{cause}; {} was not written{}",
                    remote_name(share, remote),
                    if leftover {
                        format!(
                            " (a partial upload remains as {})",
                            remote_name(share, &partial)
                        )
                    } else {
                        String::new()
                    }
                ),
                cause,
                lost_handle: e.lost_handle,
            })
        }
    }
}

/// Why one transfer (a download or an upload) failed.
struct TransferError {
    line: String,
    /// The remote partial file may exist (uploads; downloads always remove theirs).
    partial_created: bool,
    /// The server lost the open (`Error::HandleLost`): starting over may succeed.
    lost_handle: bool,
}

impl TransferError {
    /// A failure before anything was created.
    fn before(line: String) -> Self {
        TransferError {
            line,
            partial_created: false,
            lost_handle: false,
        }
    }

    /// A local failure (reading or writing the local file) once the transfer started.
    fn local(line: String) -> Self {
        TransferError {
            line,
            partial_created: true,
            lost_handle: false,
        }
    }

    /// A failed request once the transfer started.
    fn request(e: &Error) -> Self {
        TransferError {
            line: describe(e),
            partial_created: true,
            lost_handle: matches!(e, Error::HandleLost { .. }),
        }
    }
}

async fn download_file(
    share: &Share,
    remote: &str,
    partial: &Path,
    opts: &CopyOptions,
    progress: &Progress,
) -> Result<u64, TransferError> {
    let file = share
        .open(remote, &OpenOptions::new().read(true))
        .await
        .map_err(|e| TransferError::request(&e))?;
    let size = file.size_at_open();
    let out = Arc::new(
        std::fs::File::create(partial)
            .map_err(|e| TransferError::local(format!("{}: {e}", partial.display())))?,
    );
    let file_ref = &file;
    let mut pieces = stream::iter(chunks(size, opts.chunk))
        .map(|(off, len)| async move {
            file_ref
                .read_at(off, len as usize)
                .await
                .map(|d| (off, len, d))
        })
        // Chunks land with positional writes, so they need not arrive in order: a chunk late
        // on one channel does not hold back the others' (head-of-line blocking).
        .buffer_unordered(opts.depth.max(1));
    let mut written = 0u64;
    while let Some(piece) = pieces.next().await {
        let (off, len, data) = piece.map_err(|e| TransferError::request(&e))?;
        if data.len() != len as usize {
            return Err(TransferError::local(format!(
                "file shrank while being copied (short read at offset {off})"
            )));
        }
        let out = out.clone();
        let n = data.len() as u64;
        tokio::task::spawn_blocking(move || out.write_all_at(&data, off))
            .await
            .map_err(|e| TransferError::local(e.to_string()))?
            .map_err(|e| TransferError::local(format!("{}: {e}", partial.display())))?;
        written += n;
        progress.add(n);
    }
    drop(pieces);
    file.close().await.map_err(|e| TransferError::request(&e))?;
    Ok(written)
}

async fn upload_file(
    share: &Share,
    local: &Path,
    partial: &str,
    opts: &CopyOptions,
    buffers: &BufferPool,
    progress: &Progress,
) -> Result<u64, TransferError> {
    let src = ChunkSource::new(
        std::fs::File::open(local).map_err(|e| TransferError::before(e.to_string()))?,
    );
    let size = src
        .file()
        .metadata()
        .map_err(|e| TransferError::before(e.to_string()))?
        .len();
    let file = share
        .open(
            partial,
            &OpenOptions::new().write(true).create(true).truncate(true),
        )
        .await
        .map_err(|e| TransferError::before(describe(&e)))?;
    let (file_ref, src) = (&file, &src);
    stream::iter(chunks(size, opts.chunk))
        .map(|(off, len)| async move {
            let data = read_chunk(buffers, src, off, len as usize)
                .await
                .map_err(|e| TransferError::local(format!("{}: {e}", local.display())))?;
            file_ref
                .write_at(off, data)
                .await
                .map_err(|e| TransferError::request(&e))?;
            progress.add(u64::from(len));
            Ok::<(), TransferError>(())
        })
        .buffer_unordered(opts.depth.max(1))
        .try_collect::<()>()
        .await?;
    file.close().await.map_err(|e| TransferError::request(&e))?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_names() {
        assert_eq!(partial_remote("a/b/c.bin"), "a/b/.c.bin.smbcp-partial");
        assert_eq!(partial_remote("c.bin"), ".c.bin.smbcp-partial");
        assert_eq!(
            partial_local(Path::new("/x/y.txt")),
            PathBuf::from("/x/.y.txt.smbcp-partial")
        );
    }

    #[test]
    fn chunking() {
        assert_eq!(chunks(0, 4).count(), 0);
        assert_eq!(
            chunks(9, 4).collect::<Vec<_>>(),
            vec![(0, 4), (4, 4), (8, 1)]
        );
    }
}
