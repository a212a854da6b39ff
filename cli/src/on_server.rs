//! Copies whose source and destination are both on one server: the server copies the bytes
//! itself (`Share::copy_file_on_server`), so they never cross the network. When the server
//! does not copy on its side, or `--no-server-copy` says not to, the bytes go through this
//! machine instead (read from the source, written to the destination). Directories with `-r`.
//!
//! As for uploads, a file is copied to a partial file beside its destination
//! (`.NAME.smbcp-partial`) and renamed over it once complete, so a copy that fails leaves the
//! destination as it was.
//!
//! With `-p`, each copy then gets its source's times and DOS attributes; with
//! `--preserve=all` also its named data streams (copied into the partial file, before the
//! rename) and its security descriptor (owner, group and DACL, set last so a DACL that
//! keeps the user out cannot stop the steps before it). Directories made by `-r` get their
//! source's security descriptor once everything in them is copied.

use std::time::Instant;

use bytes::Bytes;
use smb3_client::{
    Error, FileTimes, IfExists, NtStatus, OpenOptions, SecurityParts, Share, WalkOptions,
};

use crate::copy::{partial_remote, CopyReport, FileResult, FileStatus};
use crate::file_error::{Cause, FileError, Refusal, StepFailed};
use crate::plan::{refused_destination, DestState};

/// How a server-side copy run goes.
#[derive(Clone, Copy, Debug)]
pub struct OnServerOptions {
    /// Ask the server to copy (false: always through this machine).
    pub server_copy: bool,
    /// Copy directories and everything in them (`-r`).
    pub recursive: bool,
    /// Keep times and DOS attributes (`-p`).
    pub preserve: bool,
    /// Also keep named data streams and security descriptors (`--preserve=all`).
    pub preserve_all: bool,
}

/// Bytes read and written at a time when the copy goes through this machine.
const THROUGH_CLIENT_STEP: usize = 16 << 20;

/// Copy `sources` of `from` to `dest` on `to`: into `dest` when it is an existing directory
/// (or the share's root), else to `dest` itself (one source only). `to` may be `from` or
/// another share of the same session; `host` is the server's name as the user gave it, for
/// messages.
pub async fn copy_on_server(
    host: &str,
    from: &Share,
    sources: &[(String, String)],
    to: &Share,
    dest: &str,
    dest_names_dir: bool,
    opts: OnServerOptions,
) -> CopyReport {
    let started = Instant::now();
    let mut run = Run {
        host,
        from,
        to,
        server_copy: opts.server_copy,
        keep: Keep {
            times: opts.preserve || opts.preserve_all,
            all: opts.preserve_all,
        },
        report: CopyReport::default(),
    };
    let dest = dest.trim_end_matches('/');
    let state = if dest.is_empty() {
        DestState::Dir
    } else {
        match to.metadata(dest).await {
            Ok(m) if m.is_dir() => DestState::Dir,
            Ok(_) => DestState::NotDir,
            Err(e) if e.to_errno() == libc::ENOENT => DestState::Missing,
            Err(e) => {
                let shown = run.shown(to, dest);
                run.report.not_planned(FileError::new(shown, Cause::Smb(e)));
                return run.report;
            }
        }
    };
    let dest_is_dir = state == DestState::Dir;
    let shown = run.shown(to, dest);
    if let Some(line) = refused_destination(&shown, state, dest_names_dir, sources.len(), true) {
        run.report.usage_error = Some(line);
        return run.report;
    }
    for (source, name) in sources {
        let source = source.trim_end_matches('/');
        let name = name.as_str();
        let target = match (dest_is_dir, dest.is_empty()) {
            (true, true) => name.to_string(),
            (true, false) => format!("{dest}/{name}"),
            (false, _) => dest.to_string(),
        };
        let meta = from.metadata(source).await;
        let becomes_dir = opts.recursive && meta.as_ref().is_ok_and(|m| m.is_dir());
        if let Some(line) = refused_destination(&shown, state, dest_names_dir, 1, becomes_dir) {
            run.report.usage_error = Some(line);
            return run.report;
        }
        match meta {
            Err(e) => run.failed(source, &target, e.into()),
            Ok(m) if m.is_dir() && !opts.recursive => {
                run.failed(source, &target, Refusal::IsDirectory.into())
            }
            Ok(m) if m.is_dir() => run.tree(source, &target).await,
            Ok(_) => run.file(source, &target).await,
        }
    }
    run.report.seconds = started.elapsed().as_secs_f64();
    run.report
}

/// One run's shares, mode and report.
struct Run<'a> {
    host: &'a str,
    from: &'a Share,
    to: &'a Share,
    /// Off for the rest of the run once the server said it does not copy.
    server_copy: bool,
    keep: Keep,
    report: CopyReport,
}

/// What a copy keeps of its source besides the data.
#[derive(Clone, Copy, Debug)]
struct Keep {
    /// Times and DOS attributes.
    times: bool,
    /// Named data streams and the security descriptor.
    all: bool,
}

impl Run<'_> {
    fn shown(&self, share: &Share, path: &str) -> String {
        format!("//{}/{}/{path}", self.host, share.name())
    }

    fn failed(&mut self, source: &str, target: &str, why: StepFailed) {
        let (shown_source, shown_dest) =
            (self.shown(self.from, source), self.shown(self.to, target));
        let error = FileError::step(shown_source.clone(), why)
            .with_outcome(format!("; {shown_dest} was not written"));
        self.report
            .failed_before_copying(shown_source, shown_dest, error);
    }

    /// Copy the directory `source` to `target` (created, with its subdirectories), walked
    /// breadth-first by the library, files one after another; a directory that cannot be
    /// listed or made fails with its files.
    async fn tree(&mut self, source: &str, target: &str) {
        if let Err(e) = self.to.create_dir_all(target).await {
            self.failed(source, target, e.into());
            return;
        }
        let prefix = format!("{}/", source.trim_end_matches('/'));
        let into = |path: &str| format!("{target}/{}", path.strip_prefix(&prefix).unwrap_or(path));
        // Directories that could not be made: what they hold fails with them.
        let mut unmade: Vec<String> = Vec::new();
        // Directories made, for their security descriptors once their files are in.
        let mut made = vec![(source.to_string(), target.to_string())];
        let mut walk = self.from.walk(source, WalkOptions::default());
        while let Some(item) = walk.next().await {
            let e = match item {
                Ok(e) => e,
                Err(err) => {
                    let t = into(&err.path);
                    self.failed(&err.path, &t, err.error.into());
                    continue;
                }
            };
            let t = into(&e.path);
            if unmade.iter().any(|d| e.path.starts_with(&format!("{d}/"))) {
                continue;
            }
            if e.entry.metadata.is_dir() {
                match self.to.create_dir_all(&t).await {
                    Ok(()) => made.push((e.path, t)),
                    Err(err) => {
                        self.failed(&e.path, &t, err.into());
                        unmade.push(e.path);
                    }
                }
            } else {
                self.file(&e.path, &t).await;
            }
        }
        if self.keep.all {
            // Deepest first: a parent's DACL may keep the user out of its children.
            for (dir, into) in made.iter().rev() {
                if let Err(why) = copy_security(self.from, dir, self.to, into).await {
                    self.failed(dir, into, why);
                }
            }
        }
    }

    async fn file(&mut self, source: &str, target: &str) {
        let outcome = copy_file(
            self.from,
            source,
            self.to,
            target,
            &mut self.server_copy,
            self.keep,
        )
        .await;
        match outcome {
            Ok(size) => {
                self.report.files += 1;
                self.report.bytes += size;
                self.report.per_file.push(FileResult {
                    source: self.shown(self.from, source),
                    dest: self.shown(self.to, target),
                    size,
                    status: FileStatus::Copied,
                    bytes: if self.server_copy { 0 } else { size },
                    resumed_from: 0,
                    sha256: None,
                    error: None,
                });
            }
            Err(why) => self.failed(source, target, why),
        }
    }
}

/// Copy one file to its partial name, then rename it over `target`. `server_copy` turns off
/// (for the rest of the run, said once on stderr) when the server does not copy.
async fn copy_file(
    from: &Share,
    source: &str,
    to: &Share,
    target: &str,
    server_copy: &mut bool,
    keep: Keep,
) -> Result<u64, StepFailed> {
    let partial = partial_remote(target);
    let copied = if *server_copy {
        match from.copy_file_on_server(source, to, &partial).await {
            Err(e) if server_does_not_copy(&e) => {
                eprintln!(
                    "smbcp: the server does not copy on its side ({}); copying through this machine",
                    e.brief()
                );
                *server_copy = false;
                through_client(from, source, to, &partial).await
            }
            other => other,
        }
    } else {
        through_client(from, source, to, &partial).await
    };
    let size = copied?;
    if keep.all {
        if let Err(e) = copy_streams(from, source, to, &partial).await {
            let _ = to.remove_file(&partial).await;
            return Err(StepFailed::new("copying streams", e));
        }
    }
    if let Err(e) = to.rename(&partial, target, IfExists::Replace).await {
        let _ = to.remove_file(&partial).await;
        return Err(e.into());
    }
    if keep.times {
        copy_times_and_attributes(from, source, to, target).await?;
    }
    if keep.all {
        copy_security(from, source, to, target).await?;
    }
    Ok(size)
}

/// Copy every named data stream of `source` into `target` (its default stream, the file's
/// data, is already there). Streams go through this machine: they are small.
async fn copy_streams(
    from: &Share,
    source: &str,
    to: &Share,
    target: &str,
) -> smb3_client::Result<()> {
    for stream in from.streams(source).await? {
        if stream.is_default() {
            continue;
        }
        // The full name (`:name:$DATA`) appended to a path opens the stream.
        let (s, t) = (
            format!("{source}{}", stream.name),
            format!("{target}{}", stream.name),
        );
        through_client(from, &s, to, &t).await?;
    }
    Ok(())
}

/// Give `target` the times and DOS attributes of `source`.
async fn copy_times_and_attributes(
    from: &Share,
    source: &str,
    to: &Share,
    target: &str,
) -> Result<(), StepFailed> {
    let m = from
        .metadata(source)
        .await
        .map_err(StepFailed::doing("reading times"))?;
    let times = FileTimes {
        created: m.created,
        accessed: m.accessed,
        modified: m.modified,
        changed: None,
    };
    to.set_times_and_attributes(target, &times, m.attributes)
        .await
        .map_err(StepFailed::doing("setting times and attributes"))
}

/// Give `target` the owner, group and DACL of `source`, as the bytes the server sent. A
/// server that will not make the user give the copy that owner (`INVALID_OWNER`: only
/// privileged users may) gets the DACL alone, and smbcp says so on stderr.
async fn copy_security(
    from: &Share,
    source: &str,
    to: &Share,
    target: &str,
) -> Result<(), StepFailed> {
    let parts = SecurityParts::standard();
    let sd = from
        .security_descriptor(source, parts)
        .await
        .map_err(StepFailed::doing("reading the security descriptor"))?;
    match to
        .set_security_descriptor_raw(target, sd.raw.clone(), parts)
        .await
    {
        Err(e) if owner_refused(&e) => {
            eprintln!(
                "smbcp: {target}: owner and group not kept ({}); the DACL is",
                e.brief()
            );
            to.set_security_descriptor_raw(target, sd.raw, SecurityParts::DACL)
                .await
        }
        other => other,
    }
    .map_err(StepFailed::doing("setting the security descriptor"))
}

/// The answers of a server that will not let this user set that owner or group.
fn owner_refused(e: &Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::INVALID_OWNER | NtStatus::PRIVILEGE_NOT_HELD | NtStatus::ACCESS_DENIED)
    )
}

/// The answers of a server that has no server-side copy.
fn server_does_not_copy(e: &Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::NOT_SUPPORTED | NtStatus::INVALID_DEVICE_REQUEST)
    )
}

/// Copy `source` to `target` by reading it here and writing it back; `target` is removed
/// again if that fails.
async fn through_client(
    from: &Share,
    source: &str,
    to: &Share,
    target: &str,
) -> smb3_client::Result<u64> {
    let src = from.open(source, &OpenOptions::new().read(true)).await?;
    let dst = match to
        .open(
            target,
            &OpenOptions::new().write(true).create(true).truncate(true),
        )
        .await
    {
        Ok(d) => d,
        Err(e) => {
            let _ = src.close().await;
            return Err(e);
        }
    };
    let len = src.size_at_open();
    let mut copied = Ok(0u64);
    let mut at = 0u64;
    while at < len {
        let step = (len - at).min(THROUGH_CLIENT_STEP as u64) as usize;
        let chunk: smb3_client::Result<Bytes> = src.read_at(at, step).await;
        match chunk {
            Ok(data) if data.is_empty() => break,
            Ok(data) => {
                let n = data.len() as u64;
                if let Err(e) = dst.write_at(at, data).await {
                    copied = Err(e);
                    break;
                }
                at += n;
                copied = Ok(at);
            }
            Err(e) => {
                copied = Err(e);
                break;
            }
        }
    }
    let closed = dst.close().await;
    let _ = src.close().await;
    match copied.and_then(|n| closed.map(|()| n)) {
        Ok(n) => Ok(n),
        Err(e) => {
            let _ = to.remove_file(target).await;
            Err(e)
        }
    }
}
