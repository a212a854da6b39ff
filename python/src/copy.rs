//! Whole-file and whole-tree copies between a share and the local file system, the way
//! smbcp and the C API copy: chunks of `io_size` bytes, as many in flight as keep every
//! channel busy (while channels are still binding only what the usable ones carry, then at
//! least 16, more when more channels are up), local writes on tokio's blocking pool; a tree
//! copy runs four files at once. The first error stops the copy; a destination file that was
//! not copied whole is removed (also when the copy is interrupted by Ctrl-C).

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use pyo3::prelude::*;
use smb3_client::{check_name, Error, OpenOptions, Share, WalkOptions};

use crate::errors;
use crate::runtime::Ctx;

/// Files copied at once by a tree copy (smbcp's default `--jobs`).
const JOBS: usize = 4;
/// Chunks in flight per file at least once the channels are bound (smbcp's `--depth`).
const MIN_DEPTH: usize = 16;

/// Which way a copy goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Share to local.
    Download,
    /// Local to share.
    Upload,
}

/// Why a copy failed.
#[derive(Debug)]
enum CopyError {
    Client(Error),
    Local(PathBuf, std::io::Error),
    Changed(String),
}

impl From<Error> for CopyError {
    fn from(e: Error) -> CopyError {
        CopyError::Client(e)
    }
}

type CopyResult<T> = Result<T, CopyError>;

impl CopyError {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            CopyError::Client(e) => errors::from_client(py, &e),
            CopyError::Local(path, e) => errors::local(&path, &e),
            CopyError::Changed(m) => errors::make(py, "SMBError", 5, &m, None, None),
        }
    }
}

fn local_err(path: &Path) -> impl FnOnce(std::io::Error) -> CopyError + '_ {
    move |e| CopyError::Local(path.to_path_buf(), e)
}

/// What every part of one copy shares.
#[derive(Debug)]
struct Job {
    share: Share,
    io_size: u32,
    overwrite: bool,
}

impl Job {
    /// Chunks to keep in flight now (asked again as each chunk lands).
    fn depth(&self) -> usize {
        let client = self.share.client();
        let busy = client.busy_depth();
        if client.binding_channels() {
            busy.max(1)
        } else {
            busy.max(MIN_DEPTH)
        }
    }
}

/// Removes a destination that was not completed: on an error, or when the copy's task is
/// dropped (interrupted). Disarmed once the copy is whole.
struct Unfinished {
    local: Option<PathBuf>,
    remote: Option<(Share, String)>,
}

impl Unfinished {
    fn done(mut self) {
        self.local = None;
        self.remote = None;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(path) = self.local.take() {
            let _ = fs::remove_file(path);
        }
        if let Some((share, path)) = self.remote.take() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = share.remove_file(&path).await;
                });
            }
        }
    }
}

/// Move `size` bytes in chunks of `io_size`, each by `step(offset, len)`, as many at once as
/// [`Job::depth`] says, stopping at the first error.
async fn chunks<F, Fut>(job: &Job, size: u64, step: F) -> CopyResult<()>
where
    F: Fn(u64, usize) -> Fut,
    Fut: std::future::Future<Output = CopyResult<()>>,
{
    let chunk = u64::from(job.io_size);
    let mut offsets = (0..size.div_ceil(chunk)).map(|i| i * chunk);
    let mut in_flight = FuturesUnordered::new();
    loop {
        while in_flight.len() < job.depth() {
            match offsets.next() {
                Some(off) => in_flight.push(step(off, chunk.min(size - off) as usize)),
                None => break,
            }
        }
        match in_flight.next().await {
            Some(r) => r?,
            None => return Ok(()),
        }
    }
}

fn create_local(job: &Job, path: &Path) -> CopyResult<fs::File> {
    let mut o = fs::OpenOptions::new();
    o.write(true);
    if job.overwrite {
        o.create(true).truncate(true);
    } else {
        o.create_new(true);
    }
    o.open(path).map_err(local_err(path))
}

async fn download_file(job: Arc<Job>, remote: String, local: PathBuf) -> CopyResult<u64> {
    let file = job
        .share
        .open(&remote, &OpenOptions::new().read(true))
        .await?;
    let size = file.size_at_open();
    let out = match create_local(&job, &local) {
        Ok(f) => Arc::new(f),
        Err(e) => {
            let _ = file.close().await;
            return Err(e);
        }
    };
    let unfinished = Unfinished {
        local: Some(local.clone()),
        remote: None,
    };
    let copied = chunks(&job, size, |off, len| {
        let (out, file, remote, local) = (out.clone(), &file, &remote, &local);
        async move {
            let data = file.read_at(off, len).await?;
            if data.len() != len {
                return Err(CopyError::Changed(format!(
                    "{remote}: the file shrank while being copied (short read at offset {off})"
                )));
            }
            tokio::task::spawn_blocking(move || out.write_all_at(&data, off))
                .await
                .map_err(|e| CopyError::Local(local.clone(), std::io::Error::other(e)))?
                .map_err(local_err(local))
        }
    })
    .await;
    let closed = file.close().await;
    copied?;
    closed?;
    unfinished.done();
    Ok(size)
}

async fn upload_file(job: Arc<Job>, local: PathBuf, remote: String) -> CopyResult<u64> {
    let src = Arc::new(fs::File::open(&local).map_err(local_err(&local))?);
    let size = src.metadata().map_err(local_err(&local))?.len();
    let opts = OpenOptions::new()
        .write(true)
        .create(job.overwrite)
        .truncate(job.overwrite)
        .create_new(!job.overwrite);
    let file = job.share.open(&remote, &opts).await?;
    let unfinished = Unfinished {
        local: None,
        remote: Some((job.share.clone(), remote.clone())),
    };
    let copied = chunks(&job, size, |off, len| {
        let (src, file, local) = (src.clone(), &file, &local);
        async move {
            let data = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; len];
                src.read_exact_at(&mut buf, off).map(|()| Bytes::from(buf))
            })
            .await
            .map_err(|e| CopyError::Local(local.clone(), std::io::Error::other(e)))?
            .map_err(local_err(local))?;
            Ok(file.write_at(off, data).await?)
        }
    })
    .await;
    let closed = file.close().await;
    copied?;
    closed?;
    unfinished.done();
    Ok(size)
}

/// The share-relative `path` of a walk entry below `root` as a local path below `dest`, each
/// name checked to be one plain component (a hostile server cannot write elsewhere).
fn local_below(dest: &Path, root: &str, path: &str) -> CopyResult<PathBuf> {
    let rel = if root.is_empty() {
        path
    } else {
        path.strip_prefix(root)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or(path)
    };
    let mut out = dest.to_path_buf();
    for name in rel.split('/') {
        check_name(name).map_err(|reason| {
            CopyError::Client(Error::UnsafeName {
                dir: root.to_string(),
                name: name.to_string(),
                reason,
            })
        })?;
        out.push(name);
    }
    Ok(out)
}

/// Copies of files side by side, at most [`JOBS`]; the first error is kept.
struct Workers {
    set: tokio::task::JoinSet<CopyResult<u64>>,
    first_error: Option<CopyError>,
    files: u64,
    bytes: u64,
}

impl Workers {
    fn new() -> Workers {
        Workers {
            set: tokio::task::JoinSet::new(),
            first_error: None,
            files: 0,
            bytes: 0,
        }
    }

    fn result(&mut self, r: Result<CopyResult<u64>, tokio::task::JoinError>) {
        let e = match r {
            Ok(Ok(n)) => {
                self.files += 1;
                self.bytes += n;
                return;
            }
            Ok(Err(e)) => e,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => CopyError::Changed(format!("a copy task stopped: {e}")),
        };
        self.first_error.get_or_insert(e);
    }

    async fn spawn(
        &mut self,
        copy: impl std::future::Future<Output = CopyResult<u64>> + Send + 'static,
    ) {
        while self.set.len() >= JOBS {
            if let Some(r) = self.set.join_next().await {
                self.result(r);
            }
        }
        self.set.spawn(copy);
    }

    async fn finish(mut self) -> CopyResult<(u64, u64)> {
        while let Some(r) = self.set.join_next().await {
            self.result(r);
        }
        match self.first_error {
            Some(e) => Err(e),
            None => Ok((self.files, self.bytes)),
        }
    }
}

async fn download_tree(job: Arc<Job>, root: String, dest: PathBuf) -> CopyResult<(u64, u64)> {
    fs::create_dir_all(&dest).map_err(local_err(&dest))?;
    let mut walk = job.share.walk(&root, WalkOptions::default());
    let mut workers = Workers::new();
    while let Some(item) = walk.next().await {
        if workers.first_error.is_some() {
            break;
        }
        let entry = item.map_err(|e| CopyError::Client(e.error))?;
        let local = local_below(&dest, &root, &entry.path)?;
        if entry.entry.metadata.is_dir() {
            fs::create_dir_all(&local).map_err(local_err(&local))?;
        } else {
            // The walk may give a file before its directory's entry: make the parents.
            if let Some(parent) = local.parent() {
                fs::create_dir_all(parent).map_err(local_err(parent))?;
            }
            workers
                .spawn(download_file(job.clone(), entry.path, local))
                .await;
        }
    }
    workers.finish().await
}

/// The directories and regular files under `src` (relative, `/`-separated), parents first.
fn local_tree(src: &Path) -> CopyResult<(Vec<String>, Vec<String>)> {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut todo = vec![(src.to_path_buf(), String::new())];
    while let Some((dir, rel)) = todo.pop() {
        for entry in fs::read_dir(&dir).map_err(local_err(&dir))? {
            let entry = entry.map_err(local_err(&dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel_child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ty = entry.file_type().map_err(local_err(&entry.path()))?;
            if ty.is_dir() {
                dirs.push(rel_child.clone());
                todo.push((entry.path(), rel_child));
            } else if ty.is_file() {
                files.push(rel_child);
            }
        }
    }
    dirs.sort();
    Ok((dirs, files))
}

async fn upload_tree(job: Arc<Job>, src: PathBuf, root: String) -> CopyResult<(u64, u64)> {
    let s = src.clone();
    let (dirs, files) = tokio::task::spawn_blocking(move || local_tree(&s))
        .await
        .map_err(|e| CopyError::Local(src.clone(), std::io::Error::other(e)))??;
    let join = |rel: &str| {
        if root.is_empty() {
            rel.to_string()
        } else {
            format!("{root}/{rel}")
        }
    };
    if !root.is_empty() {
        job.share.create_dir_all(&root).await?;
    }
    for d in &dirs {
        match job.share.create_dir(&join(d)).await {
            Ok(()) => {}
            Err(e) if e.to_errno() == 17 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut workers = Workers::new();
    for f in files {
        if workers.first_error.is_some() {
            break;
        }
        workers
            .spawn(upload_file(job.clone(), src.join(&f), join(&f)))
            .await;
    }
    workers.finish().await
}

/// Which share a copy goes to or comes from, the runtime that drives it and its I/O size.
pub(crate) struct Endpoint<'a> {
    pub(crate) ctx: &'a Ctx,
    pub(crate) share: &'a Share,
    pub(crate) io_size: u32,
}

fn job_of(end: &Endpoint<'_>, overwrite: bool) -> Arc<Job> {
    Arc::new(Job {
        share: end.share.clone(),
        io_size: end.io_size,
        overwrite,
    })
}

/// Copy one file; returns the bytes copied.
pub(crate) fn run_file(
    py: Python<'_>,
    end: Endpoint<'_>,
    dir: Direction,
    remote: String,
    local: PathBuf,
    overwrite: bool,
) -> PyResult<u64> {
    let job = job_of(&end, overwrite);
    let done = match dir {
        Direction::Download => end.ctx.run(py, download_file(job, remote, local))?,
        Direction::Upload => end.ctx.run(py, upload_file(job, local, remote))?,
    };
    done.map_err(|e| e.into_py(py))
}

/// Copy a tree; returns (files, bytes).
pub(crate) fn run_tree(
    py: Python<'_>,
    end: Endpoint<'_>,
    dir: Direction,
    remote: String,
    local: PathBuf,
    overwrite: bool,
) -> PyResult<(u64, u64)> {
    let job = job_of(&end, overwrite);
    let done = match dir {
        Direction::Download => end.ctx.run(py, download_tree(job, remote, local))?,
        Direction::Upload => end.ctx.run(py, upload_tree(job, local, remote))?,
    };
    done.map_err(|e| e.into_py(py))
}
