//! The copy engine of `smbcp`: plan the file list (`plan.rs`), then handle several files at
//! once. For each: `--update` may skip it, `--dry-run` only says what would happen,
//! `--verify-only` compares it with its destination; otherwise its bytes move (`transfer.rs`)
//! into a temporary name that is renamed into place only when complete, so a failed copy
//! never leaves a short file under the real name; then `-p` sets times and attributes and
//! `--verify` reads the destination back. A file whose open the server lost (it restarted
//! and forgot its durable handles, see `Error::HandleLost`) is copied again from the start,
//! up to `CopyOptions::retries` times.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use futures_util::stream::{self, StreamExt};
use smb3_client::{IfExists, Share};

use crate::file_error::{Cause, FileError, Refusal, StepFailed};
use crate::glob::Excludes;
use crate::hashing::{self, hex};
use crate::in_flight::{ChunkMemory, InFlight};
use crate::local_dest::{partial_name, LocalTarget};
use crate::plan::{self, remote_name, Job, PlanOptions};
use crate::preserve;
use crate::progress::Progress;
use crate::small_file::{self, Outcome};
use crate::transfer::{self, TransferError, TransferOptions, Transferred};

/// Small files (at most one chunk) in flight at once by default: enough to keep a few
/// channels' round trips full, each file holding at most one chunk of memory (within
/// `--max-in-flight` all the same).
pub const DEFAULT_SMALL_JOBS: u16 = 64;

/// How to copy.
#[derive(Clone, Debug, Default)]
pub struct CopyOptions {
    /// Copy directories recursively.
    pub recursive: bool,
    /// Files larger than one chunk copied at the same time.
    pub jobs: usize,
    /// Files of at most one chunk copied at the same time, each in one round trip (0: the
    /// default, [`DEFAULT_SMALL_JOBS`]).
    pub small_jobs: usize,
    /// Bytes per chunk request.
    pub chunk: u32,
    /// Chunks in flight per file, at least: a file keeps `Client::busy_depth` (four per usable
    /// channel) when that is more, counted as it goes (channels still binding join a copy
    /// under way).
    pub depth: usize,
    /// Chunk bytes in flight for all files together (0: the default,
    /// [`crate::in_flight::DEFAULT_MAX_IN_FLIGHT`]).
    pub max_in_flight: u64,
    /// Show a progress bar.
    pub progress: bool,
    /// How many times a file is copied again from the start after the server lost its open.
    pub retries: u32,
    /// Keep times and attributes (`-p`), and modes on a share with the SMB3 POSIX
    /// extensions.
    pub preserve: bool,
    /// With `preserve`, keep owners and groups too (`--preserve=all`), where the share has
    /// the SMB3 POSIX extensions.
    pub preserve_owners: bool,
    /// Read every copied file back and compare SHA-256 with the source.
    pub verify: bool,
    /// Copy nothing: compare every source with its destination by SHA-256.
    pub verify_only: bool,
    /// Skip files whose destination has the same size and last-write time.
    pub update: bool,
    /// Say what would be copied, change nothing.
    pub dry_run: bool,
    /// `-L`: follow symbolic links met in a local tree (copy what they point to) instead of
    /// making them again on the server as links.
    pub follow_links: bool,
    /// Continue partial files of interrupted copies; keep them when a copy fails.
    pub resume: bool,
    /// `--exclude` patterns.
    pub excludes: Excludes,
}

/// What happened to one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileStatus {
    /// Copied (and verified, with `--verify`).
    Copied,
    /// Left alone: the destination was up to date (`--update`).
    Skipped,
    /// `--dry-run`: would have been copied.
    WouldCopy,
    /// `--verify-only`: source and destination have the same SHA-256.
    Verified,
    /// Failed; the reason is in `FileResult::error`.
    Failed,
}

impl FileStatus {
    /// The name used in `--json-files`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Copied => "copied",
            FileStatus::Skipped => "skipped",
            FileStatus::WouldCopy => "would-copy",
            FileStatus::Verified => "verified",
            FileStatus::Failed => "failed",
        }
    }
}

/// One file's outcome.
#[derive(Debug)]
pub struct FileResult {
    /// The source, as shown to the user.
    pub source: String,
    /// The destination, as shown to the user.
    pub dest: String,
    /// The source's size.
    pub size: u64,
    /// What happened.
    pub status: FileStatus,
    /// Bytes moved over the network for it.
    pub bytes: u64,
    /// Where the copy started: above 0 when a partial file was continued (`--resume`).
    pub resumed_from: u64,
    /// SHA-256 of the source, when it was computed (`--verify`, `--verify-only`).
    pub sha256: Option<String>,
    /// Why it failed.
    pub error: Option<FileError>,
}

impl FileResult {
    /// The file in `--json-files`' `per_file` list; a failed file's error is given as the
    /// line printed, its kind and the server's NTSTATUS
    /// ([`FileError::json_fields`], `null` for a file that did not fail).
    pub fn json(&self) -> serde_json::Value {
        let mut file = serde_json::json!({
            "source": self.source,
            "dest": self.dest,
            "size": self.size,
            "status": self.status.as_str(),
            "bytes": self.bytes,
            "resumed_from": self.resumed_from,
            "sha256": self.sha256,
        });
        if let Some(fields) = file.as_object_mut() {
            fields.extend(crate::file_error::json_fields(self.error.as_ref()));
        }
        file
    }
}

/// What a copy did.
#[derive(Debug, Default)]
pub struct CopyReport {
    /// Bytes copied.
    pub bytes: u64,
    /// Files copied (or verified, with `--verify-only`; to be copied, with `--dry-run`).
    pub files: u64,
    /// Files skipped as up to date (`--update`).
    pub skipped: u64,
    /// Files and directories left out by `--exclude`.
    pub excluded: u64,
    /// Wall time.
    pub seconds: f64,
    /// One line per failed file.
    pub failures: Vec<String>,
    /// Files started again from the beginning because the server lost their open, with the
    /// reason, one line each (the copy then succeeded or is also in `failures`).
    pub retried: Vec<String>,
    /// Every file's outcome: those that failed before copying began (no destination chosen:
    /// `dest` is empty), then the small files' (one chunk or less) in completion order, then
    /// the larger ones' in completion order.
    pub per_file: Vec<FileResult>,
    /// The destination cannot be what the command line asks (several sources into what is
    /// not a directory, `one.txt newdir/` where `newdir` does not exist, ...): nothing was
    /// copied; a usage error, as `cp` would refuse it.
    pub usage_error: Option<String>,
    /// Lines the user should read that report no failure (a sparse file copied in full).
    pub notes: Vec<String>,
}

impl CopyReport {
    /// A source (or a file or directory found below one) that failed before it could be
    /// copied: its line, and its entry in `per_file` with the typed error.
    pub(crate) fn not_planned(&mut self, error: FileError) {
        self.failed_before_copying(error.file.clone(), String::new(), error);
    }

    /// A file from `source` to `dest` (as shown) that failed before any byte moved: its line,
    /// and its entry in `per_file` with the typed error.
    pub(crate) fn failed_before_copying(&mut self, source: String, dest: String, error: FileError) {
        self.failures.push(error.to_string());
        self.per_file.push(FileResult {
            source,
            dest,
            size: 0,
            status: FileStatus::Failed,
            bytes: 0,
            resumed_from: 0,
            sha256: None,
            error: Some(error),
        });
    }
}

/// Plan and run a download of remote `sources` (share-relative paths) into `dest`.
pub async fn download(
    share: &Share,
    sources: &[String],
    dest: &Path,
    opts: &CopyOptions,
) -> CopyReport {
    let named: Vec<(String, String)> = sources
        .iter()
        .map(|p| (p.clone(), plan::base_name_remote(p).to_string()))
        .collect();
    download_named(share, &named, dest, opts).await
}

/// [`download`] of sources given as (share-relative path, the name each goes by in the
/// destination): a path reached through a DFS link keeps the link's name, not its
/// target's.
pub async fn download_named(
    share: &Share,
    sources: &[(String, String)],
    dest: &Path,
    opts: &CopyOptions,
) -> CopyReport {
    let plan = plan::download(share, sources, dest, &plan_options(opts)).await;
    run(share, plan, opts).await
}

/// Plan and run an upload of local `sources` into the share-relative directory or file `dest`
/// (`dest_names_dir`: it was given with a trailing `/`, so it must be a directory).
pub async fn upload(
    share: &Share,
    sources: &[PathBuf],
    dest: &str,
    dest_names_dir: bool,
    opts: &CopyOptions,
) -> CopyReport {
    let plan = plan::upload(share, sources, dest, dest_names_dir, &plan_options(opts)).await;
    run(share, plan, opts).await
}

fn plan_options(opts: &CopyOptions) -> PlanOptions<'_> {
    PlanOptions {
        recursive: opts.recursive,
        excludes: &opts.excludes,
        create_dirs: !opts.dry_run && !opts.verify_only,
        follow_links: opts.follow_links,
    }
}

async fn run(share: &Share, plan: plan::Plan, opts: &CopyOptions) -> CopyReport {
    let plan::Plan {
        jobs,
        links,
        dirs,
        failures,
        excluded,
        usage_error,
        notes,
    } = plan;
    let mut report = CopyReport {
        excluded,
        usage_error,
        notes,
        ..CopyReport::default()
    };
    for error in failures {
        report.not_planned(error);
    }
    let total: u64 = jobs.iter().map(Job::size).sum();
    let uploading = matches!(jobs.first(), Some(Job::Upload { .. }))
        || matches!(dirs.first(), Some(plan::DirJob::Remote { .. }));
    let progress = Progress::new(opts.progress, jobs.len() as u64, total);
    let memory = &ChunkMemory::new(opts.max_in_flight, opts.chunk);
    let start = Instant::now();
    // Small files are bound by round trips, not bytes: many more of them are in flight than
    // large ones, each stream with its own limit, both at once.
    let (small, large): (Vec<Job>, Vec<Job>) = jobs
        .into_iter()
        .partition(|job| in_one_round_trip(job, opts));
    let tally = &Tally::default();
    let each = |job: Job| {
        let progress = progress.clone();
        async move {
            let r = process(share, job, opts, memory, &progress, tally).await;
            progress.file_done();
            r
        }
    };
    let small_jobs = match opts.small_jobs {
        0 => usize::from(DEFAULT_SMALL_JOBS),
        n => n,
    };
    let (mut results, large_results): (Vec<(FileResult, Vec<String>)>, Vec<_>) = tokio::join!(
        stream::iter(small)
            .map(each)
            .buffer_unordered(small_jobs)
            .collect(),
        stream::iter(large)
            .map(each)
            .buffer_unordered(opts.jobs.max(1))
            .collect()
    );
    results.extend(large_results);
    // Each link is a round trip or two: many at once, as small files.
    let made: Vec<FileResult> = stream::iter(links)
        .map(|link| make_link(share, link, opts))
        .buffer_unordered(small_jobs)
        .collect()
        .await;
    results.extend(made.into_iter().map(|r| (r, Vec::new())));
    if opts.preserve && !opts.dry_run && !opts.verify_only {
        let failed = dir_times(share, dirs, opts.preserve_owners, tally).await;
        report
            .failures
            .extend(failed.iter().map(ToString::to_string));
    }
    let owners_not_kept = tally.owners_not_kept.load(Ordering::Relaxed);
    if owners_not_kept > 0 {
        let why = if uploading {
            "the server does not let this SMB user give files away, or the share keeps no \
             Unix owners"
        } else if rustix::process::geteuid().is_root() {
            "the server names them by account SIDs, not Unix ids, as Samba does for its \
             own users"
        } else {
            "only root may give files to other users"
        };
        report.notes.push(format!(
            "owner or group of {owners_not_kept} files and directories not kept ({why}): \
             what was not kept is whoever copied them"
        ));
    }
    report.seconds = start.elapsed().as_secs_f64();
    progress.finish();
    for (r, retried) in results {
        report.retried.extend(retried);
        report.bytes += r.bytes;
        match r.status {
            FileStatus::Copied | FileStatus::WouldCopy | FileStatus::Verified => report.files += 1,
            FileStatus::Skipped => report.skipped += 1,
            FileStatus::Failed => report.failures.push(
                r.error
                    .as_ref()
                    .map_or_else(|| r.source.clone(), ToString::to_string),
            ),
        }
        report.per_file.push(r);
    }
    report
}

/// Make a symbolic link of one end's tree again at the other, pointing where it points
/// there (as `cp -r` does). One already there with that target is up to date; anything else
/// at its name is replaced, as a file would be.
async fn make_link(share: &Share, link: plan::LinkJob, opts: &CopyOptions) -> FileResult {
    match link {
        plan::LinkJob::Up {
            local,
            remote,
            target,
        } => make_remote_link(share, &local, &remote, &target, opts).await,
        plan::LinkJob::UpSpecial {
            local,
            remote,
            kind,
            mode,
        } => make_remote_special(share, &local, &remote, kind, mode, opts).await,
        plan::LinkJob::Down {
            remote,
            local,
            meta,
        } => make_local_link(share, &remote, &local, &meta, opts).await,
    }
}

/// The outcome of making a link or special file (no bytes move for one): `size` is a
/// link's target length.
fn node_result(
    source: &str,
    dest: String,
    size: u64,
    status: FileStatus,
    error: Option<FileError>,
) -> FileResult {
    FileResult {
        source: source.to_string(),
        dest,
        size,
        status,
        bytes: 0,
        resumed_from: 0,
        sha256: None,
        error,
    }
}

/// What [`make_link`] does before making anything, from whether the destination already
/// is the `same` as the source: up to date (verified, with `--verify-only`); with
/// `--dry-run` made in words only; with `--verify-only`, a difference (`missing` says what
/// is not there).
enum Before {
    Done(FileStatus),
    Mismatch(Refusal),
    Make,
}

fn before_making(same: bool, opts: &CopyOptions, missing: impl FnOnce() -> String) -> Before {
    match (same, opts.verify_only, opts.dry_run) {
        (true, true, _) => Before::Done(FileStatus::Verified),
        (true, false, _) => Before::Done(FileStatus::Skipped),
        (false, _, true) => Before::Done(FileStatus::WouldCopy),
        (false, true, false) => {
            Before::Mismatch(Refusal::VerifyMismatch(format!("verify: {}", missing())))
        }
        (false, false, false) => Before::Make,
    }
}

/// What a remote entry that is neither file nor directory is, read from the share: a
/// link's target, or a special file's kind (and a device's numbers).
enum RemoteNode {
    Link(String),
    Special(smb3_client::SpecialKind),
}

/// Read what the remote `path` is; an error names `source`.
async fn remote_node(share: &Share, path: &str, source: &str) -> Result<RemoteNode, FileError> {
    use smb3_client::{NfsReparse, ReparseData, SpecialKind};
    let smb = |e| FileError::new(source, Cause::Smb(e));
    match share.read_link(path).await {
        Ok(target) => return Ok(RemoteNode::Link(target)),
        Err(smb3_client::Error::NotALink { .. }) => {}
        Err(e) => return Err(smb(e)),
    }
    let kind = match share.reparse_point(path).await.map_err(smb)? {
        Some(ReparseData::Nfs(NfsReparse::Fifo)) => SpecialKind::Fifo,
        Some(ReparseData::Nfs(NfsReparse::Socket)) => SpecialKind::Socket,
        Some(ReparseData::Nfs(NfsReparse::CharDevice { major, minor })) => {
            SpecialKind::CharDevice { major, minor }
        }
        Some(ReparseData::Nfs(NfsReparse::BlockDevice { major, minor })) => {
            SpecialKind::BlockDevice { major, minor }
        }
        _ => {
            let why = Refusal::SpecialFile("a reparse point of a kind smbcp does not copy");
            return Err(FileError::new(source, why));
        }
    };
    Ok(RemoteNode::Special(kind))
}

/// [`make_link`] of a local FIFO, socket or device on the share, as an NFS reparse point
/// (`Share::make_special`). One already there of the same kind (and numbers) is up to
/// date; a file at the name is replaced.
async fn make_remote_special(
    share: &Share,
    local: &Path,
    remote: &str,
    kind: smb3_client::SpecialKind,
    mode: u32,
    opts: &CopyOptions,
) -> FileResult {
    let source = local.display().to_string();
    let result = |status, error| node_result(&source, remote_name(share, remote), 0, status, error);
    let there = remote_node(share, remote, &source).await.ok();
    let same = matches!(there, Some(RemoteNode::Special(k)) if k == kind);
    match before_making(same, opts, || format!("the server has no {kind:?} there")) {
        Before::Done(status) => return result(status, None),
        Before::Mismatch(why) => {
            return result(FileStatus::Failed, Some(FileError::new(&source, why)))
        }
        Before::Make => {}
    }
    let mode = mode & 0o7777;
    let mut made = share.make_special(remote, kind, mode).await;
    if matches!(&made, Err(e) if e.status() == Some(smb3_client::NtStatus::OBJECT_NAME_COLLISION)) {
        made = match share.remove_file(remote).await {
            Ok(()) => share.make_special(remote, kind, mode).await,
            Err(e) => Err(e),
        };
    }
    match made {
        Ok(()) => result(FileStatus::Copied, None),
        Err(e) => {
            let error = FileError::new(&source, Cause::Smb(e))
                .with_outcome(" (a special file the server did not make)");
            result(FileStatus::Failed, Some(error))
        }
    }
}

/// [`make_link`] of a remote link here: its target is read from the share and stored as
/// given, below the destination only (`local_dest.rs`). An NFS reparse point that is no
/// link is a special file, reported as such.
async fn make_local_link(
    share: &Share,
    remote: &str,
    local: &LocalTarget,
    meta: &smb3_client::Metadata,
    opts: &CopyOptions,
) -> FileResult {
    let source = remote_name(share, remote);
    let dest = local.path().display().to_string();
    let result = |status, size, error| node_result(&source, dest.clone(), size, status, error);
    let target = match remote_node(share, remote, &source).await {
        Ok(RemoteNode::Link(t)) => t,
        Ok(RemoteNode::Special(kind)) => {
            return make_local_special(local, meta, kind, opts, &source)
        }
        Err(error) => return result(FileStatus::Failed, 0, Some(error)),
    };
    let size = target.len() as u64;
    let same = local.read_link().ok().flatten().as_deref() == Some(target.as_str());
    match before_making(same, opts, || {
        format!("no symbolic link to {target:?} here")
    }) {
        Before::Done(status) => return result(status, size, None),
        Before::Mismatch(why) => {
            return result(FileStatus::Failed, size, Some(FileError::new(&source, why)))
        }
        Before::Make => {}
    }
    let times = opts.preserve.then(|| preserve::link_times(meta));
    match local.make_symlink(&target, times.as_ref()) {
        Ok(()) => result(FileStatus::Copied, size, None),
        Err(e) => {
            let error = FileError::new(local.path().display().to_string(), Cause::local(e));
            result(FileStatus::Failed, size, Some(error))
        }
    }
}

/// [`make_local_link`] of a remote FIFO, socket or device: made here with `mknod` (a device
/// only by root, and for root alone), its mode the source's less the umask.
fn make_local_special(
    local: &LocalTarget,
    meta: &smb3_client::Metadata,
    kind: smb3_client::SpecialKind,
    opts: &CopyOptions,
    source: &str,
) -> FileResult {
    let dest = local.path().display().to_string();
    let result = |status, error| node_result(source, dest.clone(), 0, status, error);
    let same = local.special().ok().flatten() == Some(kind);
    match before_making(same, opts, || format!("no {kind:?} here")) {
        Before::Done(status) => return result(status, None),
        Before::Mismatch(why) => {
            return result(FileStatus::Failed, Some(FileError::new(source, why)))
        }
        Before::Make => {}
    }
    // A device node is a door to the hardware, and the server chose its numbers: made for
    // its owner alone (root, who alone may make one), whatever bits the server gave it.
    let device = matches!(
        kind,
        smb3_client::SpecialKind::CharDevice { .. } | smb3_client::SpecialKind::BlockDevice { .. }
    );
    let bits = if device { 0o600 } else { 0o777 };
    let mode = meta.posix.as_ref().map_or(0o644, |p| p.permissions) & bits;
    let times = opts.preserve.then(|| preserve::link_times(meta));
    match local.make_special(kind, mode, times.as_ref()) {
        Ok(()) => result(FileStatus::Copied, None),
        Err(e) => {
            let error = FileError::new(local.path().display().to_string(), Cause::local(e));
            result(FileStatus::Failed, Some(error))
        }
    }
}

/// [`make_link`] of a local link on the share.
async fn make_remote_link(
    share: &Share,
    local: &Path,
    remote: &str,
    target: &str,
    opts: &CopyOptions,
) -> FileResult {
    let source = local.display().to_string();
    let size = target.len() as u64;
    let result =
        |status, error| node_result(&source, remote_name(share, remote), size, status, error);
    let same = share.read_link(remote).await.ok().as_deref() == Some(target);
    let missing = || format!("the server has no symbolic link to {target:?} there");
    match before_making(same, opts, missing) {
        Before::Done(status) => return result(status, None),
        Before::Mismatch(why) => {
            return result(FileStatus::Failed, Some(FileError::new(&source, why)))
        }
        Before::Make => {}
    }
    let mut made = share.symlink(target, remote).await;
    if matches!(&made, Err(e) if e.status() == Some(smb3_client::NtStatus::OBJECT_NAME_COLLISION)) {
        made = match share.remove_file(remote).await {
            Ok(()) => share.symlink(target, remote).await,
            Err(e) => Err(e),
        };
    }
    match made {
        Ok(()) => result(FileStatus::Copied, None),
        Err(e) => {
            let error = FileError::new(&source, Cause::Smb(e)).with_outcome(
                " (a symbolic link the server did not make; -L copies what it points to)",
            );
            result(FileStatus::Failed, Some(error))
        }
    }
}

/// Things counted over a whole copy, said once at its end.
#[derive(Default)]
struct Tally {
    /// Files and directories whose owner and group `--preserve=all` could not keep.
    owners_not_kept: AtomicU64,
}

/// `-p` for directories, deepest first, once their files are in; the directories whose
/// times (or mode) could not be set.
async fn dir_times(
    share: &Share,
    mut dirs: Vec<plan::DirJob>,
    owners: bool,
    tally: &Tally,
) -> Vec<FileError> {
    dirs.sort_by_key(|d| std::cmp::Reverse(d.depth()));
    let mut failures = Vec::new();
    for d in dirs {
        let r = match &d {
            plan::DirJob::Local { local, meta } => preserve::dir_to_local(local, meta, owners)
                .map_err(|e| FileError::step(local.path().display().to_string(), e)),
            plan::DirJob::Remote { remote, meta } => {
                preserve::dir_to_remote(share, remote, meta, owners)
                    .await
                    .map_err(|e| FileError::step(remote_name(share, remote), e))
            }
        };
        match r {
            Ok(preserve::Owners::NotKept) => {
                tally.owners_not_kept.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(e) => failures.push(e),
        }
    }
    failures
}

/// The names of a job's two ends, as shown to the user.
fn names(share: &Share, job: &Job) -> (String, String) {
    match job {
        Job::Download { remote, local, .. } => (
            remote_name(share, remote),
            local.path().display().to_string(),
        ),
        Job::Upload { local, remote, .. } => {
            (local.display().to_string(), remote_name(share, remote))
        }
    }
}

/// Everything smbcp does with one file.
async fn process(
    share: &Share,
    job: Job,
    opts: &CopyOptions,
    memory: &ChunkMemory,
    progress: &Progress,
    tally: &Tally,
) -> (FileResult, Vec<String>) {
    let (source, dest) = names(share, &job);
    let mut result = FileResult {
        source,
        dest,
        size: job.size(),
        status: FileStatus::Copied,
        bytes: 0,
        resumed_from: 0,
        sha256: None,
        error: None,
    };
    let fail = |mut r: FileResult, e: FileError| {
        r.status = FileStatus::Failed;
        r.error = Some(e);
        r
    };
    if opts.update && dest_up_to_date(share, &job).await {
        progress.not_copied(job.size());
        result.status = FileStatus::Skipped;
        return (result, Vec::new());
    }
    if opts.dry_run {
        progress.not_copied(job.size());
        result.status = FileStatus::WouldCopy;
        return (result, Vec::new());
    }
    if opts.verify_only {
        progress.not_copied(job.size());
        return match compare(share, &job, opts, &memory.in_flight).await {
            Ok(sha) => {
                result.status = FileStatus::Verified;
                result.sha256 = Some(sha);
                (result, Vec::new())
            }
            Err(e) => (fail(result, e), Vec::new()),
        };
    }
    let (outcome, retried) = copy_with_retries(share, &job, opts, memory, progress).await;
    let done = match outcome {
        Ok(t) => t,
        Err(e) => return (fail(result, e), retried),
    };
    result.bytes = done.bytes;
    result.resumed_from = done.resumed_from;
    let owners = opts.preserve_owners;
    let kept = match (&job, &done.local_file) {
        (Job::Download { local, meta, .. }, Some(file)) if opts.preserve => {
            preserve::to_local(file, &local.path(), meta, owners)
        }
        (Job::Download { local, meta, .. }, Some(file)) => {
            preserve::plain_mode_to_local(file, &local.path(), meta)
        }
        (Job::Download { .. }, None) if opts.preserve => {
            Err(StepFailed::from(Refusal::NotKeptOpen))
        }
        (Job::Upload { remote, meta, .. }, _) if opts.preserve => {
            preserve::to_remote(share, remote, meta, owners).await
        }
        _ => Ok(preserve::Owners::NotAsked),
    };
    match kept {
        Ok(preserve::Owners::NotKept) => tally.owners_not_kept.fetch_add(1, Ordering::Relaxed),
        Ok(_) => 0,
        Err(e) => {
            let e = FileError {
                doing: e.doing.map(|doing| format!("copied, but {doing}")),
                ..FileError::new(result.dest.clone(), e.cause)
            };
            return (fail(result, e), retried);
        }
    };
    if opts.verify {
        match compare(share, &job, opts, &memory.in_flight).await {
            Ok(sha) => result.sha256 = Some(sha),
            Err(e) => return (fail(result, e), retried),
        }
    }
    (result, retried)
}

/// Whether the destination exists with the source's size and last-write time (`--update`).
async fn dest_up_to_date(share: &Share, job: &Job) -> bool {
    match job {
        // Looked at without following links: a link at the name is not up to date.
        Job::Download { local, meta, .. } => match local.metadata() {
            Ok(Some(d)) => {
                d.is_file()
                    && preserve::up_to_date(meta.len, meta.modified, d.len(), d.modified().ok())
            }
            _ => false,
        },
        Job::Upload { remote, meta, .. } => match share.metadata(remote).await {
            Ok(d) => {
                d.is_file()
                    && preserve::up_to_date(meta.len(), meta.modified().ok(), d.len, d.modified)
            }
            Err(_) => false,
        },
    }
}

/// SHA-256 of the source and of the destination, read independently; the source's hex when
/// they are equal, else what reports the difference.
async fn compare(
    share: &Share,
    job: &Job,
    opts: &CopyOptions,
    in_flight: &InFlight,
) -> Result<String, FileError> {
    let depth = crate::transfer::depth_now(opts.depth.max(1), share);
    let (src, dst, src_name, dst_name) = match job {
        Job::Download { remote, local, .. } => {
            let shown = local.path().display().to_string();
            // The destination is read without following links, as it was written.
            let written = async {
                let file = local.open_read().map_err(Cause::local)?;
                hashing::local_file_of(file, shown.clone()).await
            };
            let (s, d) = tokio::join!(
                hashing::remote_file(share, remote, opts.chunk, depth, in_flight),
                written
            );
            (s, d, remote_name(share, remote), shown)
        }
        Job::Upload { local, remote, .. } => {
            let (s, d) = tokio::join!(
                hashing::local_file(local),
                hashing::remote_file(share, remote, opts.chunk, depth, in_flight)
            );
            (
                s,
                d,
                local.display().to_string(),
                remote_name(share, remote),
            )
        }
    };
    let (src, src_len) = src.map_err(|e| {
        FileError::step(&src_name, StepFailed::new("verify: reading the source", e))
    })?;
    let (dst, dst_len) = dst.map_err(|e| {
        FileError::step(
            &dst_name,
            StepFailed::new("verify: reading the destination", e),
        )
    })?;
    if src == dst {
        Ok(hex(&src))
    } else {
        let words = format!(
            "SHA-256 differs from the source {src_name} (source {} bytes {}, destination {} bytes {})",
            src_len,
            hex(&src),
            dst_len,
            hex(&dst)
        );
        Err(FileError::step(
            dst_name,
            StepFailed::new("verify", Refusal::VerifyMismatch(words)),
        ))
    }
}

pub(crate) fn partial_remote(target: &str) -> String {
    match target.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/{}", partial_name(name)),
        None => partial_name(target),
    }
}

/// Copy one file, starting over (up to `opts.retries` times) when the server lost its open.
/// Returns the outcome and one line per restart.
async fn copy_with_retries(
    share: &Share,
    job: &Job,
    opts: &CopyOptions,
    memory: &ChunkMemory,
    progress: &Progress,
) -> (Result<Transferred, FileError>, Vec<String>) {
    let mut restarts = Vec::new();
    // A source that changed during its copy is copied once more: a file written now and
    // then holds still the second time; one written all along fails (`source_change.rs`).
    let mut changed_again = false;
    loop {
        let attempt = progress.for_file();
        match copy_one(share, job, opts, memory, &attempt).await {
            Ok(t) => return (Ok(t), restarts),
            Err(e) if e.cause.changed() && !changed_again => {
                changed_again = true;
                attempt.rewind();
                restarts.push(format!(
                    "{}; copying it again from the start",
                    e.without_outcome()
                ));
            }
            Err(e) if e.cause.lost_handle() && restarts.len() < opts.retries as usize => {
                attempt.rewind();
                restarts.push(format!(
                    "{}; copying it again from the start (retry {} of {})",
                    e.without_outcome(),
                    restarts.len() + 1,
                    opts.retries
                ));
            }
            Err(e) => {
                attempt.rewind();
                return (Err(e), restarts);
            }
        }
    }
}

/// Rename `from` over `to`. A read-only `to` (left by an earlier `-p` copy of a read-only
/// file) refuses to be replaced; as `cp` over a file whose write bits are off, it is
/// replaced anyway: its read-only attribute is cleared first (`-p` sets it again after).
async fn rename_over(share: &Share, from: &str, to: &str) -> smb3_client::Result<()> {
    match share.rename(from, to, IfExists::Replace).await {
        Err(e) if e.to_errno() == libc::EACCES => match share.metadata(to).await {
            Ok(md) if md.is_readonly() => {
                share.set_readonly(to, false).await?;
                share.rename(from, to, IfExists::Replace).await
            }
            _ => Err(e),
        },
        other => other,
    }
}

async fn copy_one(
    share: &Share,
    job: &Job,
    opts: &CopyOptions,
    memory: &ChunkMemory,
    progress: &Progress,
) -> Result<Transferred, FileError> {
    let topts = TransferOptions {
        chunk: opts.chunk,
        depth: opts.depth,
        in_flight: &memory.in_flight,
        resume: opts.resume,
        full_check: opts.verify,
    };
    match job {
        Job::Download { remote, local, .. } => {
            let shown = local.path();
            let partial = local.partial(opts.resume).map_err(|e| {
                FileError::new(shown.display().to_string(), Cause::local(e))
                    .with_outcome("; not copied")
            })?;
            let small = if in_one_round_trip(job, opts) {
                small_file::download(
                    share,
                    remote,
                    &partial,
                    job.size(),
                    &memory.in_flight,
                    progress,
                )
                .await
            } else {
                Outcome::UseRegularPath
            };
            let moved = match small {
                Outcome::Done(t) => Ok(t),
                Outcome::Failed(e) => Err(e),
                Outcome::UseRegularPath => {
                    transfer::download(share, remote, &partial, &topts, progress).await
                }
            };
            match moved {
                Ok(mut t) => match partial.commit() {
                    Ok(file) => {
                        t.local_file = Some(file);
                        Ok(t)
                    }
                    Err(e) => Err(FileError::new(shown.display().to_string(), Cause::local(e))),
                },
                Err(e) => {
                    // With --resume the partial file stays for the next run, if that run
                    // will find it (a fresh name, taken because the usual one was not
                    // ours, would not be).
                    let kept = opts.resume && partial.resumable();
                    let kept_as = partial.path();
                    if !kept {
                        let _ = partial.discard();
                    }
                    Err(
                        FileError::new(remote_name(share, remote), e.cause).with_outcome(format!(
                            "; {} was not written{}",
                            shown.display(),
                            if kept {
                                format!(
                                    " (the part copied is kept as {} for --resume)",
                                    kept_as.display()
                                )
                            } else {
                                String::new()
                            }
                        )),
                    )
                }
            }
        }
        Job::Upload {
            local,
            remote,
            meta,
        } => {
            let small = if in_one_round_trip(job, opts) {
                small_file::upload(
                    share,
                    local,
                    remote,
                    job.size(),
                    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()),
                    &memory.in_flight,
                    progress,
                )
                .await
            } else {
                Outcome::UseRegularPath
            };
            let partial = partial_remote(remote);
            let result = match small {
                Outcome::Done(t) => return Ok(t),
                Outcome::Failed(e) => Err(e),
                Outcome::UseRegularPath => {
                    regular_upload(share, local, remote, &partial, &topts, memory, progress).await
                }
            };
            let e = match result {
                Ok(t) => return Ok(t),
                Err(e) => e,
            };
            let kept = e.partial_created && opts.resume;
            let leftover = e.partial_created && !kept && share.remove_file(&partial).await.is_err();
            Err(
                FileError::new(local.display().to_string(), e.cause).with_outcome(format!(
                    "; {} was not written{}",
                    remote_name(share, remote),
                    if kept {
                        format!(
                            " (the part copied is kept as {} for --resume)",
                            remote_name(share, &partial)
                        )
                    } else if leftover {
                        format!(
                            " (a partial upload remains as {})",
                            remote_name(share, &partial)
                        )
                    } else {
                        String::new()
                    }
                )),
            )
        }
    }
}

/// Whether a file goes in one round trip (`small_file.rs`): it fits in one chunk, and no
/// partial file of an earlier run is to be continued.
fn in_one_round_trip(job: &Job, opts: &CopyOptions) -> bool {
    !opts.resume && job.size() <= u64::from(opts.chunk)
}

/// Upload into the remote `partial` name, then rename it over the destination.
async fn regular_upload(
    share: &Share,
    local: &Path,
    remote: &str,
    partial: &str,
    topts: &TransferOptions<'_>,
    memory: &ChunkMemory,
    progress: &Progress,
) -> Result<Transferred, TransferError> {
    let t = transfer::upload(share, local, partial, topts, &memory.pool, progress).await?;
    rename_over(share, partial, remote)
        .await
        .map_err(TransferError::started)?;
    if t.sparse {
        sparse_again(share, remote)
            .await
            .map_err(TransferError::started)?;
    }
    Ok(t)
}

/// Mark the renamed copy of a sparse file sparse again, with the attributes of a fresh
/// upload. Samba drops the mark when it renames a file (its rename sets the attributes, and
/// setting them cannot set "sparse") and keeps the "hidden" it showed for the partial file's
/// dot name once the mark has made it store that file's attributes: both are undone here.
/// The holes themselves stay where they are.
async fn sparse_again(share: &Share, remote: &str) -> smb3_client::Result<()> {
    share
        .set_attributes(remote, smb3_client::DosAttributes::ARCHIVE)
        .await?;
    let file = share
        .open(remote, &smb3_client::OpenOptions::new().write(true))
        .await?;
    let marked = file.set_sparse(true).await;
    let closed = file.close().await;
    marked.and(closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(error: FileError) -> FileResult {
        FileResult {
            source: "//nas/data/a.bin".into(),
            dest: "/tmp/a.bin".into(),
            size: 10,
            status: FileStatus::Failed,
            bytes: 0,
            resumed_from: 0,
            sha256: None,
            error: Some(error),
        }
    }

    #[test]
    fn a_failed_download_names_the_servers_status_in_json() {
        use smb3_client::{Command, Error, NtStatus};
        let e = Error::Status {
            status: NtStatus::ACCESS_DENIED,
            command: Command::READ,
            path: Some("a.bin".into()),
        };
        let r = failed(
            FileError::new("//nas/data/a.bin", e).with_outcome("; /tmp/a.bin was not written"),
        );
        let line = format!(
            "//nas/data/a.bin: {}; /tmp/a.bin was not written",
            NtStatus::ACCESS_DENIED
        );
        assert_eq!(
            r.json(),
            serde_json::json!({
                "source": "//nas/data/a.bin",
                "dest": "/tmp/a.bin",
                "size": 10,
                "status": "failed",
                "bytes": 0,
                "resumed_from": 0,
                "sha256": null,
                "error": line,
                "error_kind": "status",
                "ntstatus": "STATUS_ACCESS_DENIED",
                "ntstatus_code": "0xc0000022",
            })
        );
    }

    #[test]
    fn a_failed_local_write_has_an_io_kind_and_no_ntstatus_in_json() {
        let io = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let shown = io.to_string();
        let r = failed(
            FileError::new(
                "//nas/data/a.bin",
                Cause::local_at("/tmp/.a.bin.smbcp-partial", io),
            )
            .with_outcome("; /tmp/a.bin was not written"),
        );
        let v = r.json();
        assert_eq!(
            v["error"],
            format!(
                "//nas/data/a.bin: /tmp/.a.bin.smbcp-partial: {shown}; /tmp/a.bin was not written"
            )
        );
        assert_eq!(v["error_kind"], "local_io");
        assert!(
            v["ntstatus"].is_null() && v["ntstatus_code"].is_null(),
            "{v}"
        );
        assert_eq!(v["status"], "failed");
    }

    #[test]
    fn a_file_that_did_not_fail_has_null_error_fields() {
        let mut r = failed(FileError::new("x", Refusal::SourceChanged));
        r.status = FileStatus::Copied;
        r.error = None;
        let v = r.json();
        for field in ["error", "error_kind", "ntstatus", "ntstatus_code"] {
            assert!(v[field].is_null(), "{field}: {v}");
        }
    }

    #[test]
    fn partial_names() {
        assert_eq!(partial_remote("a/b/c.bin"), "a/b/.c.bin.smbcp-partial");
        assert_eq!(partial_remote("c.bin"), ".c.bin.smbcp-partial");
        let long = "n".repeat(250);
        assert!(partial_remote(&format!("d/{long}")).starts_with("d/.smbcp-partial-"));
    }
}
