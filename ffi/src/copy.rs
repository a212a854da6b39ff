//! Whole-file and whole-tree copies between a share and the local file system, with a
//! progress callback and cancellation.
//!
//! A copy runs as one task on the client's runtime: chunks of `io_size` bytes, as many in
//! flight as keep every channel busy (at least 16, four per usable channel when that is more,
//! as smbcp does), local writes on tokio's blocking pool. A tree copy walks the share (or the
//! local directory) and copies up to four files at once. The task reports progress over a
//! channel to the calling thread, which calls the C callback there, outside the runtime: the
//! callback never runs on a library thread, needs no locking, and may call the library.
//!
//! Errors: the first one stops the copy (files being copied at that moment stop at their
//! next chunk) and is returned; a file that was not copied whole is removed, so a destination
//! file is either complete or absent. Directories already made stay.

use std::ffi::{c_char, c_int, c_void, CString};
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use smb3_client::{check_name, FileTimes, Metadata, OpenOptions, Share, WalkOptions};

use crate::client::smb3_share;
use crate::error::{bad_arg, guard, FfiError, FfiResult};
use crate::ptr::{handle, str_arg};
use crate::types::*;

/// Files copied at once by a tree copy (smbcp's default `--jobs`).
const JOBS: usize = 4;
/// Chunks in flight per file at least (smbcp's default `--depth`).
const MIN_DEPTH: usize = 16;

/// A cancellation token: `smb3_cancel_request` from any thread (or a signal handler: it is
/// one atomic store) makes every copy given this token stop at its next chunk and return
/// `SMB3_ERR_CANCELLED`. Free with `smb3_cancel_free` once no copy uses it.
#[derive(Debug)]
pub struct smb3_cancel {
    flag: Arc<AtomicBool>,
}

/// A new cancellation token, not yet cancelled. Never NULL; free with `smb3_cancel_free`.
#[no_mangle]
pub extern "C" fn smb3_cancel_new() -> *mut smb3_cancel {
    Box::into_raw(Box::new(smb3_cancel {
        flag: Arc::new(AtomicBool::new(false)),
    }))
}

/// Cancel: copies using the token stop at their next chunk. NULL is ignored.
///
/// # Safety
/// `cancel` is NULL or a live token.
#[no_mangle]
pub unsafe extern "C" fn smb3_cancel_request(cancel: *const smb3_cancel) {
    if !cancel.is_null() {
        // SAFETY: not NULL; a live token by the caller's contract.
        unsafe { &*cancel }.flag.store(true, Ordering::SeqCst);
    }
}

/// Free a token. NULL is ignored.
///
/// # Safety
/// `cancel` is NULL or a live token that no call in progress was given.
#[no_mangle]
pub unsafe extern "C" fn smb3_cancel_free(cancel: *mut smb3_cancel) {
    if !cancel.is_null() {
        // SAFETY: made by Box::into_raw in smb3_cancel_new, freed once.
        drop(unsafe { Box::from_raw(cancel) });
    }
}

/// What the copy task tells the calling thread.
enum Event {
    /// One more file to copy was found.
    Found,
    /// `path` (`total` bytes) moved on to `done` bytes; `delta` new ones.
    Data {
        path: String,
        done: u64,
        total: u64,
        delta: u64,
    },
    /// `path` is complete; the caller answers on `ack` whether to go on, after it has
    /// called the callback for this and every earlier event: so a callback that asked to
    /// cancel always cancels, even when the data was all there already.
    Done {
        path: String,
        total: u64,
        ack: tokio::sync::oneshot::Sender<bool>,
    },
}

/// What every part of one copy shares.
struct Job {
    share: Share,
    io_size: u32,
    flags: u32,
    /// Set by the callback, by the first error of a tree copy, or the caller's token.
    stop: Arc<AtomicBool>,
    token: Option<Arc<AtomicBool>>,
    events: mpsc::Sender<Event>,
}

impl Job {
    fn check(&self) -> FfiResult<()> {
        let token = self
            .token
            .as_ref()
            .is_some_and(|t| t.load(Ordering::SeqCst));
        if token || self.stop.load(Ordering::SeqCst) {
            Err(FfiError::Cancelled)
        } else {
            Ok(())
        }
    }

    fn tell(&self, event: Event) {
        // The caller stops listening only once the task is over.
        let _ = self.events.send(event);
    }

    /// Report `path` complete and wait for the caller's word (see [`Event::Done`]).
    async fn done(&self, path: &str, total: u64) -> FfiResult<()> {
        let (ack, answer) = tokio::sync::oneshot::channel();
        self.tell(Event::Done {
            path: path.to_string(),
            total,
            ack,
        });
        if answer.await.unwrap_or(false) {
            self.check()
        } else {
            Err(FfiError::Cancelled)
        }
    }

    fn flag(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Chunks to keep in flight now, by smbcp's rule: while channels are still binding,
    /// only what keeps the usable ones busy (no backlog queued on the first channel), then at
    /// least [`MIN_DEPTH`], more when more channels are up. Asked again as each chunk lands.
    fn depth(&self) -> usize {
        let client = self.share.client();
        let busy = client.busy_depth();
        if client.binding_channels() {
            busy
        } else {
            busy.max(MIN_DEPTH)
        }
    }
}

fn local_err(path: &Path, e: std::io::Error) -> FfiError {
    FfiError::Local(path.display().to_string(), e)
}

/// Open the local destination file as the flags say.
fn create_local(job: &Job, path: &Path) -> FfiResult<fs::File> {
    let mut o = fs::OpenOptions::new();
    o.write(true);
    if job.flag(SMB3_COPY_OVERWRITE) {
        o.create(true).truncate(true);
    } else {
        o.create_new(true);
    }
    o.open(path).map_err(|e| local_err(path, e))
}

/// Download the share's `remote` into the local `local`; returns the bytes copied.
async fn download_file(job: Arc<Job>, remote: String, local: PathBuf) -> FfiResult<u64> {
    job.check()?;
    let mut opts = OpenOptions::new().read(true);
    if job.flag(SMB3_COPY_BACKUP_INTENT) {
        opts = opts.backup_intent();
    }
    let file = job.share.open(&remote, &opts).await?;
    let size = file.size_at_open();
    let out = match create_local(&job, &local) {
        Ok(f) => Arc::new(f),
        Err(e) => {
            let _ = file.close().await;
            return Err(e);
        }
    };
    let copied = async {
        let (file_ref, remote_ref, local_ref) = (&file, &remote, &local);
        chunks(&job, &remote, size, |off, len| {
            let out = out.clone();
            async move {
                let data = file_ref.read_at(off, len).await?;
                if data.len() != len {
                    return Err(FfiError::SourceChanged(format!(
                        "{remote_ref}: the file shrank while being copied (short read at \
                         offset {off})"
                    )));
                }
                tokio::task::spawn_blocking(move || out.write_all_at(&data, off))
                    .await
                    .map_err(|e| local_err(local_ref, std::io::Error::other(e)))?
                    .map_err(|e| local_err(local_ref, e))
            }
        })
        .await?;
        if job.flag(SMB3_COPY_PRESERVE_TIMES) {
            set_local_times(&out, &local, file.metadata_at_open())?;
        }
        job.done(&remote, size).await?;
        Ok(size)
    }
    .await;
    let closed = file.close().await;
    match copied.and_then(|size| closed.map(|()| size).map_err(FfiError::from)) {
        Ok(size) => Ok(size),
        Err(e) => {
            // Never leave a part of a file that looks like a copy.
            drop(out);
            let _ = fs::remove_file(&local);
            Err(e)
        }
    }
}

/// Move the `size` bytes of the file `path` in chunks of `io_size`, each by `step(offset,
/// len)`, as many at once as keep every channel busy, reporting progress as each lands and
/// stopping at the first error or cancellation.
async fn chunks<F, Fut>(job: &Job, path: &str, size: u64, step: F) -> FfiResult<()>
where
    F: Fn(u64, usize) -> Fut,
    Fut: std::future::Future<Output = FfiResult<()>>,
{
    job.tell(Event::Data {
        path: path.to_string(),
        done: 0,
        total: size,
        delta: 0,
    });
    let done = AtomicU64::new(0);
    let chunk = u64::from(job.io_size);
    let (step, done) = (&step, &done);
    let one = |off: u64| async move {
        job.check()?;
        let len = chunk.min(size - off);
        step(off, len as usize).await?;
        let now = done.fetch_add(len, Ordering::Relaxed) + len;
        job.tell(Event::Data {
            path: path.to_string(),
            done: now,
            total: size,
            delta: len,
        });
        Ok::<(), FfiError>(())
    };
    // A window that follows the channels as they bind (a fixed `buffer_unordered` would keep
    // the depth of the moment the file started).
    let mut offsets = (0..size.div_ceil(chunk)).map(|i| i * chunk);
    let mut in_flight = FuturesUnordered::new();
    loop {
        while in_flight.len() < job.depth() {
            match offsets.next() {
                Some(off) => in_flight.push(one(off)),
                None => break,
            }
        }
        match in_flight.next().await {
            Some(r) => r?,
            None => return Ok(()),
        }
    }
}

/// Give a local file (or directory) the access and modification times of `m`.
fn set_local_times(f: &fs::File, path: &Path, m: &Metadata) -> FfiResult<()> {
    let mut times = fs::FileTimes::new();
    if let Some(t) = m.accessed {
        times = times.set_accessed(t);
    }
    if let Some(t) = m.modified {
        times = times.set_modified(t);
    }
    f.set_times(times).map_err(|e| local_err(path, e))
}

/// Upload the local `local` into the share's `remote`; returns the bytes copied.
async fn upload_file(job: Arc<Job>, local: PathBuf, remote: String) -> FfiResult<u64> {
    job.check()?;
    let src = Arc::new(fs::File::open(&local).map_err(|e| local_err(&local, e))?);
    let meta = src.metadata().map_err(|e| local_err(&local, e))?;
    let size = meta.len();
    let overwrite = job.flag(SMB3_COPY_OVERWRITE);
    let mut opts = OpenOptions::new()
        .write(true)
        .create(overwrite)
        .truncate(overwrite)
        .create_new(!overwrite);
    if job.flag(SMB3_COPY_BACKUP_INTENT) {
        opts = opts.backup_intent();
    }
    let file = job.share.open(&remote, &opts).await?;
    let copied = async {
        let (file_ref, local_ref) = (&file, &local);
        chunks(&job, &remote, size, |off, len| {
            let src = src.clone();
            async move {
                let data = tokio::task::spawn_blocking(move || {
                    let mut buf = vec![0u8; len];
                    src.read_exact_at(&mut buf, off).map(|()| Bytes::from(buf))
                })
                .await
                .map_err(|e| local_err(local_ref, std::io::Error::other(e)))?
                .map_err(|e| local_err(local_ref, e))?;
                Ok(file_ref.write_at(off, data).await?)
            }
        })
        .await?;
        if job.flag(SMB3_COPY_PRESERVE_TIMES) {
            let mut times = FileTimes::new();
            times.modified = meta.modified().ok();
            times.accessed = meta.accessed().ok();
            file.set_times(&times).await?;
        }
        job.done(&remote, size).await?;
        Ok(size)
    }
    .await;
    let closed = file.close().await;
    match copied.and_then(|size| closed.map(|()| size).map_err(FfiError::from)) {
        Ok(size) => Ok(size),
        Err(e) => {
            let _ = job.share.remove_file(&remote).await;
            Err(e)
        }
    }
}

/// Copies of files running side by side, at most [`JOBS`]; the first error stops the rest.
struct Workers {
    set: tokio::task::JoinSet<FfiResult<u64>>,
    first_error: Option<FfiError>,
}

impl Workers {
    fn new() -> Workers {
        Workers {
            set: tokio::task::JoinSet::new(),
            first_error: None,
        }
    }

    fn result(&mut self, job: &Job, r: Result<FfiResult<u64>, tokio::task::JoinError>) {
        let e = match r {
            Ok(Ok(_)) => return,
            Ok(Err(e)) => e,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => FfiError::Local("a copy task".into(), std::io::Error::other(e)),
        };
        // Later errors are most often the cancellation the first one caused.
        if self.first_error.is_none() {
            self.first_error = Some(e);
            job.stop.store(true, Ordering::SeqCst);
        }
    }

    /// Start `copy` once fewer than [`JOBS`] run.
    async fn spawn(
        &mut self,
        job: &Job,
        copy: impl std::future::Future<Output = FfiResult<u64>> + Send + 'static,
    ) {
        while self.set.len() >= JOBS {
            if let Some(r) = self.set.join_next().await {
                self.result(job, r);
            }
        }
        self.set.spawn(copy);
    }

    /// Wait for every copy; the first error, if any.
    async fn finish(mut self, job: &Job) -> FfiResult<()> {
        while let Some(r) = self.set.join_next().await {
            self.result(job, r);
        }
        match self.first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The share-relative `path` of a walk entry below `root`, as a local path below `dest`:
/// each name checked to be one plain component (a hostile server cannot write elsewhere).
fn local_below(dest: &Path, root: &str, path: &str) -> FfiResult<PathBuf> {
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
            FfiError::Client(smb3_client::Error::UnsafeName {
                dir: root.to_string(),
                name: name.to_string(),
                reason,
            })
        })?;
        out.push(name);
    }
    Ok(out)
}

/// Download the tree under the share's `root` into the local directory `dest`.
async fn download_tree(job: Arc<Job>, root: String, dest: PathBuf) -> FfiResult<()> {
    fs::create_dir_all(&dest).map_err(|e| local_err(&dest, e))?;
    let root = root.trim_matches('/').to_string();
    let mut walk = job.share.walk(&root, WalkOptions::default());
    let mut dirs: Vec<(PathBuf, usize, Metadata)> = Vec::new();
    let mut workers = Workers::new();
    while let Some(item) = walk.next().await {
        if let Err(e) = job.check() {
            workers.first_error.get_or_insert(e);
            break;
        }
        let entry = match item {
            Ok(entry) => entry,
            Err(e) => {
                workers
                    .first_error
                    .get_or_insert(FfiError::Client(crate::listing::naming_the_directory(e)));
                job.stop.store(true, Ordering::SeqCst);
                break;
            }
        };
        let local = match local_below(&dest, &root, &entry.path) {
            Ok(l) => l,
            Err(e) => {
                workers.first_error.get_or_insert(e);
                job.stop.store(true, Ordering::SeqCst);
                break;
            }
        };
        if entry.entry.metadata.is_dir() {
            if let Err(e) = fs::create_dir(&local) {
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    workers.first_error.get_or_insert(local_err(&local, e));
                    job.stop.store(true, Ordering::SeqCst);
                    break;
                }
            }
            dirs.push((local, entry.depth, entry.entry.metadata));
        } else {
            job.tell(Event::Found);
            let copy = download_file(job.clone(), entry.path, local);
            workers.spawn(&job, copy).await;
        }
    }
    drop(walk);
    workers.finish(&job).await?;
    if job.flag(SMB3_COPY_PRESERVE_TIMES) {
        // Deepest first: making a directory's entries changed its times.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.1));
        for (path, _, m) in &dirs {
            let d = fs::File::open(path).map_err(|e| local_err(path, e))?;
            set_local_times(&d, path, m)?;
        }
    }
    Ok(())
}

/// Every directory and file under the local `dir`, parents before what they hold, as paths
/// relative to it with `/` separators.
fn local_tree(dir: &Path) -> FfiResult<Vec<(String, PathBuf, bool)>> {
    let mut out = Vec::new();
    let mut todo = vec![(String::new(), dir.to_path_buf())];
    while let Some((rel, path)) = todo.pop() {
        let mut entries = fs::read_dir(&path)
            .map_err(|e| local_err(&path, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| local_err(&path, e))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                return Err(local_err(
                    &e.path(),
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "the name is not UTF-8, which SMB names must be",
                    ),
                ));
            };
            let child = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            let kind = e.file_type().map_err(|err| local_err(&e.path(), err))?;
            if kind.is_dir() {
                out.push((child.clone(), e.path(), true));
                todo.push((child, e.path()));
            } else if kind.is_file() {
                out.push((child, e.path(), false));
            }
            // Symbolic links, sockets, devices: not copied.
        }
    }
    Ok(out)
}

/// Upload the local directory `src` into the share's `dest` (made if missing).
async fn upload_tree(job: Arc<Job>, src: PathBuf, dest: String) -> FfiResult<()> {
    let dest = dest.trim_matches('/').to_string();
    let tree = {
        let src = src.clone();
        tokio::task::spawn_blocking(move || local_tree(&src))
            .await
            .map_err(|e| local_err(Path::new("a directory walk"), std::io::Error::other(e)))??
    };
    if !dest.is_empty() {
        job.share.create_dir_all(&dest).await?;
    }
    let remote_of = |rel: &str| {
        if dest.is_empty() {
            rel.to_string()
        } else {
            format!("{dest}/{rel}")
        }
    };
    let mut dirs = Vec::new();
    let mut workers = Workers::new();
    for (rel, path, is_dir) in tree {
        if let Err(e) = job.check() {
            workers.first_error.get_or_insert(e);
            break;
        }
        let remote = remote_of(&rel);
        if is_dir {
            if let Err(e) = job.share.create_dir_all(&remote).await {
                workers.first_error.get_or_insert(e.into());
                job.stop.store(true, Ordering::SeqCst);
                break;
            }
            dirs.push((remote, path));
        } else {
            job.tell(Event::Found);
            let copy = upload_file(job.clone(), path, remote);
            workers.spawn(&job, copy).await;
        }
    }
    workers.finish(&job).await?;
    if job.flag(SMB3_COPY_PRESERVE_TIMES) {
        for (remote, path) in dirs.iter().rev() {
            let m = fs::metadata(path).map_err(|e| local_err(path, e))?;
            let mut times = FileTimes::new();
            times.modified = m.modified().ok();
            times.accessed = m.accessed().ok();
            job.share.set_times(remote, &times).await?;
        }
    }
    Ok(())
}

/// Run a copy task and drive the progress callback on this thread until it ends.
///
/// # Safety
/// `progress` is NULL or a function that may be called with `user_data`; `cancel` NULL or
/// a live token.
unsafe fn run_copy<F, Fut>(
    share: &smb3_share,
    flags: u32,
    progress: smb3_progress_fn,
    user_data: *mut c_void,
    cancel: *const smb3_cancel,
    copy: F,
) -> FfiResult<()>
where
    F: FnOnce(Arc<Job>) -> Fut,
    Fut: std::future::Future<Output = FfiResult<()>> + Send + 'static,
{
    if flags & !SMB3_COPY_ALL_FLAGS != 0 {
        return bad_arg(format!(
            "unknown SMB3_COPY_* flags {:#x}",
            flags & !SMB3_COPY_ALL_FLAGS
        ));
    }
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(smb3_client::Error::ApiMisuse(
            "libsmb3 was called from inside a tokio runtime; call it from a plain thread",
        )
        .into());
    }
    let token = if cancel.is_null() {
        None
    } else {
        // SAFETY: not NULL; a live token by the caller's contract. The task keeps its own
        // reference to the flag, so freeing the token later cannot pull it away.
        Some(unsafe { &*cancel }.flag.clone())
    };
    let (tx, rx) = mpsc::channel();
    let job = Arc::new(Job {
        share: share.inner.clone(),
        io_size: share.io_size,
        flags,
        stop: Arc::new(AtomicBool::new(false)),
        token,
        events: tx,
    });
    let stop = job.stop.clone();
    let task = share.ctx.handle().spawn(copy(job));
    // The task holds the only sender: `recv` fails once it is over.
    let mut p = Totals::default();
    while let Ok(mut event) = rx.recv() {
        let ack = match &mut event {
            Event::Done { ack, .. } => {
                // Answered below, after the callback; a placeholder takes its place.
                Some(std::mem::replace(ack, tokio::sync::oneshot::channel().0))
            }
            _ => None,
        };
        let path = p.apply(event);
        let (Some(path), Some(callback)) = (path, progress) else {
            if let Some(ack) = ack {
                let _ = ack.send(!stop.load(Ordering::SeqCst));
            }
            continue;
        };
        let path = CString::new(path.split('\0').next().unwrap_or_default()).unwrap_or_default();
        let report = smb3_progress {
            path: path.as_ptr(),
            file_bytes_done: p.file_done,
            file_bytes_total: p.file_total,
            bytes_done: p.bytes,
            files_done: p.files_done,
            files_total: p.files_total,
        };
        // SAFETY: a C function pointer the caller gave for exactly this; `report` and the path
        // it points to live until it returns.
        let go_on = unsafe { callback(&report, user_data) };
        if go_on != 0 {
            stop.store(true, Ordering::SeqCst);
        }
        if let Some(ack) = ack {
            let _ = ack.send(!stop.load(Ordering::SeqCst));
        }
    }
    match share.ctx.handle().block_on(task) {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(smb3_client::Error::ApiMisuse("the client's runtime shut down").into()),
    }
}

/// Running totals of one copy, for the callback.
#[derive(Default)]
struct Totals {
    bytes: u64,
    files_done: u64,
    files_total: u64,
    file_done: u64,
    file_total: u64,
}

impl Totals {
    /// Count the event in; the file it is about, when the callback should hear of it.
    fn apply(&mut self, event: Event) -> Option<String> {
        match event {
            Event::Found => {
                self.files_total += 1;
                None
            }
            Event::Data {
                path,
                done,
                total,
                delta,
            } => {
                self.bytes += delta;
                self.file_done = done;
                self.file_total = total;
                Some(path)
            }
            Event::Done { path, total, .. } => {
                self.files_done += 1;
                self.files_total = self.files_total.max(self.files_done);
                self.file_done = total;
                self.file_total = total;
                Some(path)
            }
        }
    }
}

/// What a copy entry point copies.
enum What {
    Download,
    Upload,
    DownloadTree,
    UploadTree,
}

/// The body of the four copy entry points.
///
/// # Safety
/// As each entry point.
#[allow(clippy::too_many_arguments)]
unsafe fn copy_entry(
    what: What,
    share: *const smb3_share,
    from: *const c_char,
    to: *const c_char,
    flags: u32,
    progress: smb3_progress_fn,
    user_data: *mut c_void,
    cancel: *const smb3_cancel,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let from = unsafe { str_arg(from, "from") }?.to_string();
        // SAFETY: as above.
        let to = unsafe { str_arg(to, "to") }?.to_string();
        // SAFETY: the callback, its data and the token as the caller's contract gives them.
        unsafe {
            run_copy(
                share,
                flags,
                progress,
                user_data,
                cancel,
                move |job| async move {
                    match what {
                        What::Download => {
                            job.tell(Event::Found);
                            download_file(job, from, to.into()).await.map(drop)
                        }
                        What::Upload => {
                            job.tell(Event::Found);
                            upload_file(job, from.into(), to).await.map(drop)
                        }
                        What::DownloadTree => download_tree(job, from, to.into()).await,
                        What::UploadTree => upload_tree(job, from.into(), to).await,
                    }
                },
            )
        }
    })
}

/// Copy the share's file `remote` to the local file `local` (`SMB3_COPY_*` `flags`:
/// overwrite, backup intent, preserve times). Reads are pipelined over every channel.
/// `progress` (may be NULL) is called on this thread as data arrives; returning non-zero
/// from it, or `smb3_cancel_request(cancel)` (`cancel` may be NULL), stops the copy with
/// `SMB3_ERR_CANCELLED`. On any failure the local file is removed.
///
/// # Safety
/// `share` is a live share handle, `remote` and `local` NUL-terminated strings, `progress`
/// NULL or a function callable with `user_data`, `cancel` NULL or a live token.
#[no_mangle]
pub unsafe extern "C" fn smb3_download(
    share: *const smb3_share,
    remote: *const c_char,
    local: *const c_char,
    flags: u32,
    progress: smb3_progress_fn,
    user_data: *mut c_void,
    cancel: *const smb3_cancel,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        copy_entry(
            What::Download,
            share,
            remote,
            local,
            flags,
            progress,
            user_data,
            cancel,
        )
    }
}

/// Copy the local file `local` to the share's `remote`, as `smb3_download` does the other
/// way. On any failure the remote file is removed.
///
/// # Safety
/// As `smb3_download`.
#[no_mangle]
pub unsafe extern "C" fn smb3_upload(
    share: *const smb3_share,
    local: *const c_char,
    remote: *const c_char,
    flags: u32,
    progress: smb3_progress_fn,
    user_data: *mut c_void,
    cancel: *const smb3_cancel,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        copy_entry(
            What::Upload,
            share,
            local,
            remote,
            flags,
            progress,
            user_data,
            cancel,
        )
    }
}

/// Copy the tree under the share's directory `remote_dir` ("" for the whole share) into the
/// local directory `local_dir` (made if missing): directories are made, files copied four
/// at a time. With `SMB3_COPY_PRESERVE_TIMES` files and directories keep their access and
/// modification times. The first error stops the copy and is returned; files copied
/// before it stay, a file being copied is removed.
///
/// # Safety
/// As `smb3_download`.
#[no_mangle]
pub unsafe extern "C" fn smb3_download_tree(
    share: *const smb3_share,
    remote_dir: *const c_char,
    local_dir: *const c_char,
    flags: u32,
    progress: smb3_progress_fn,
    user_data: *mut c_void,
    cancel: *const smb3_cancel,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        copy_entry(
            What::DownloadTree,
            share,
            remote_dir,
            local_dir,
            flags,
            progress,
            user_data,
            cancel,
        )
    }
}

/// Copy the tree under the local directory `local_dir` into the share's directory
/// `remote_dir` (made if missing), as `smb3_download_tree` does the other way (regular
/// files and directories; symbolic links and special files are skipped).
///
/// # Safety
/// As `smb3_download`.
#[no_mangle]
pub unsafe extern "C" fn smb3_upload_tree(
    share: *const smb3_share,
    local_dir: *const c_char,
    remote_dir: *const c_char,
    flags: u32,
    progress: smb3_progress_fn,
    user_data: *mut c_void,
    cancel: *const smb3_cancel,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        copy_entry(
            What::UploadTree,
            share,
            local_dir,
            remote_dir,
            flags,
            progress,
            user_data,
            cancel,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_paths_map_below_the_destination_and_hostile_names_are_refused() {
        let dest = Path::new("/backup");
        assert_eq!(
            local_below(dest, "docs", "docs/a/b.txt").unwrap(),
            Path::new("/backup/a/b.txt")
        );
        assert_eq!(
            local_below(dest, "", "a/b.txt").unwrap(),
            Path::new("/backup/a/b.txt")
        );
        assert!(local_below(dest, "", "a/../../etc").is_err());
        assert!(local_below(dest, "", "").is_err());
    }

    #[test]
    fn totals_count_files_and_bytes() {
        let mut t = Totals::default();
        assert_eq!(t.apply(Event::Found), None);
        let data = |done, delta| Event::Data {
            path: "f".into(),
            done,
            total: 10,
            delta,
        };
        assert_eq!(t.apply(data(4, 4)).as_deref(), Some("f"));
        assert_eq!(t.apply(data(10, 6)).as_deref(), Some("f"));
        t.apply(Event::Done {
            path: "f".into(),
            total: 10,
            ack: tokio::sync::oneshot::channel().0,
        });
        assert_eq!(
            (t.bytes, t.files_done, t.files_total, t.file_done),
            (10, 1, 1, 10)
        );
    }
}
