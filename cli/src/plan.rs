//! Turning smbcp's sources and destination into a list of file jobs: walking local or remote
//! trees, applying `--exclude`, and (unless `--dry-run`) creating the destination's
//! directories on the way.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use smb3_client::{Metadata, Share, WalkOptions};

use crate::describe;
use crate::glob::Excludes;
use crate::local_dest::{split_dest, LocalRoot, LocalTarget, NameFolding};
use crate::name_clash::NameClashes;

/// Remote directories listed at the same time while planning a download.
const LISTINGS_AT_ONCE: usize = 16;

/// How an SMB share compares names: case-insensitively (MS-FSCC 2.1.5; Samba by default for
/// SMB2 clients), with no Unicode normalization.
const REMOTE_FOLDING: NameFolding = NameFolding {
    case_insensitive: true,
    normalization_insensitive: false,
};

/// One file to copy.
#[derive(Clone, Debug)]
pub(crate) enum Job {
    /// Remote to local: written only below the destination, never through a link
    /// (`local_dest.rs`).
    Download {
        remote: String,
        local: LocalTarget,
        meta: Metadata,
    },
    /// Local to remote.
    Upload {
        local: PathBuf,
        remote: String,
        meta: std::fs::Metadata,
    },
}

impl Job {
    pub(crate) fn size(&self) -> u64 {
        match self {
            Job::Download { meta, .. } => meta.len,
            Job::Upload { meta, .. } => meta.len(),
        }
    }
}

/// A directory whose times `-p` sets once every file in it is copied (creating entries
/// moves a directory's write time, so it goes last).
#[derive(Clone, Debug)]
pub(crate) enum DirJob {
    /// A local directory made from a remote one.
    Local { local: LocalTarget, meta: Metadata },
    /// A remote directory made from a local one.
    Remote {
        remote: String,
        meta: std::fs::Metadata,
    },
}

impl DirJob {
    /// How deep the directory lies: deeper ones are done first, as a parent's time would
    /// otherwise move again.
    pub(crate) fn depth(&self) -> usize {
        match self {
            DirJob::Local { local, .. } => local.path().components().count(),
            DirJob::Remote { remote, .. } => remote.split('/').count(),
        }
    }
}

/// What planning found.
#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) jobs: Vec<Job>,
    /// Directories copied, for `-p`.
    pub(crate) dirs: Vec<DirJob>,
    /// One line per source that could not be planned.
    pub(crate) failures: Vec<String>,
    /// Files and directories left out by `--exclude` (a directory counts once).
    pub(crate) excluded: u64,
}

/// How planning behaves.
pub(crate) struct PlanOptions<'a> {
    pub(crate) recursive: bool,
    pub(crate) excludes: &'a Excludes,
    /// Create no directories (`--dry-run`, `--verify-only`).
    pub(crate) create_dirs: bool,
}

pub(crate) fn join_remote(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn join_rel(rel: &str, name: &str) -> String {
    join_remote(rel, name)
}

fn base_name_remote(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub(crate) fn remote_name(share: &Share, path: &str) -> String {
    format!(
        "//{}/{}/{}",
        share.client().server_addr().ip(),
        share.name(),
        path
    )
}

/// Plan a download of remote `sources` (share-relative paths) into `dest`.
pub(crate) async fn download(
    share: &Share,
    sources: &[String],
    dest: &Path,
    opts: &PlanOptions<'_>,
) -> Plan {
    let mut plan = Plan::default();
    let dest_is_dir = dest.is_dir();
    if sources.len() > 1 && !dest_is_dir {
        plan.failures.push(format!(
            "{}: destination must be an existing directory for several sources",
            dest.display()
        ));
        return plan;
    }
    // The directory named on the command line (or the one holding the file named there) is
    // the user's: created if missing, links in it followed. Below it nothing is.
    let (root_path, dest_name) = split_dest(dest, dest_is_dir);
    if opts.create_dirs && !root_path.exists() {
        if let Err(e) = std::fs::create_dir_all(&root_path) {
            plan.failures.push(format!("{}: {e}", root_path.display()));
            return plan;
        }
    }
    let root = match LocalRoot::open(&root_path) {
        Ok(r) => r,
        Err(e) if !opts.create_dirs && e.kind() == std::io::ErrorKind::NotFound => {
            // --dry-run into a directory not made yet: plan against its future path.
            match LocalRoot::open(Path::new(".")) {
                Ok(r) => r,
                Err(e) => {
                    plan.failures.push(format!("{}: {e}", root_path.display()));
                    return plan;
                }
            }
        }
        Err(e) => {
            plan.failures.push(format!("{}: {e}", root_path.display()));
            return plan;
        }
    };
    let mut clashes = NameClashes::new(root.name_folding(opts.create_dirs));
    for src in sources {
        let md = match share.metadata(src).await {
            Ok(md) => md,
            Err(e) => {
                plan.failures
                    .push(format!("{}: {}", remote_name(share, src), describe(&e)));
                continue;
            }
        };
        let name = dest_name
            .clone()
            .unwrap_or_else(|| base_name_remote(src).to_string());
        let target = match LocalTarget::new(&root, vec![name.clone()]) {
            Ok(t) => t,
            Err(e) => {
                plan.failures
                    .push(format!("{}: {e}", remote_name(share, src)));
                continue;
            }
        };
        if let Err(first) = clashes.admit("", &name) {
            plan.failures.push(format!(
                "{}: {}",
                remote_name(share, src),
                clashes.explain(&name, &first)
            ));
            continue;
        }
        if md.is_dir() {
            if !opts.recursive {
                plan.failures.push(format!(
                    "{}: is a directory (use -r)",
                    remote_name(share, src)
                ));
                continue;
            }
            plan.dirs.push(DirJob::Local {
                local: target.clone(),
                meta: md.clone(),
            });
            let walked = remote_tree(share, src, &target, opts, &mut clashes, &mut plan).await;
            if let Err(e) = walked {
                plan.failures.push(e);
            }
        } else if opts.excludes.excludes(base_name_remote(src)) {
            plan.excluded += 1;
        } else {
            plan.jobs.push(Job::Download {
                remote: src.clone(),
                local: target,
                meta: md,
            });
        }
    }
    plan
}

/// Walk a remote directory (the library's breadth-first walk), creating local directories
/// and listing files to fetch. Paths matched against `--exclude` are relative to `dir`; a
/// directory that cannot be listed, an entry whose name the library refused, and a name the
/// destination would take for another already planned are failures of their own, and the
/// rest is copied.
async fn remote_tree(
    share: &Share,
    dir: &str,
    local: &LocalTarget,
    opts: &PlanOptions<'_>,
    clashes: &mut NameClashes,
    plan: &mut Plan,
) -> Result<(), String> {
    if opts.create_dirs {
        local
            .create_dir()
            .map_err(|e| format!("{}: {e}", local.path().display()))?;
    }
    let root = dir.trim_end_matches('/');
    let prefix = if root.is_empty() {
        String::new()
    } else {
        format!("{root}/")
    };
    // Directories whose entries are left out: excluded, or not copied for their name.
    let mut left_out: HashSet<String> = HashSet::new();
    // Directories are listed several at once: a tree of many small directories is bound by
    // the round trips of its listings.
    let mut walk = share.walk(
        root,
        WalkOptions {
            concurrency: LISTINGS_AT_ONCE,
            ..WalkOptions::default()
        },
    );
    // Clashes are found per destination directory, named by its place below `local`.
    let base = local.path().display().to_string();
    while let Some(item) = walk.next().await {
        let e = match item {
            Ok(e) => e,
            Err(err) => {
                plan.failures.push(match &err.error {
                    // The error names the directory and the raw name itself.
                    smb3_client::Error::UnsafeName { .. } => {
                        format!(
                            "//{}/{}: {}",
                            share.client().server_addr().ip(),
                            share.name(),
                            err.error
                        )
                    }
                    other => format!("{}: {}", remote_name(share, &err.path), describe(other)),
                });
                continue;
            }
        };
        let rel = e.path.strip_prefix(&prefix).unwrap_or(&e.path).to_string();
        let is_dir = e.entry.metadata.is_dir();
        let parent = rel.rsplit_once('/').map_or("", |(p, _)| p);
        if left_out.contains(parent) {
            if is_dir {
                left_out.insert(rel);
            }
            continue;
        }
        if opts.excludes.excludes(&rel) {
            plan.excluded += 1;
            if is_dir {
                left_out.insert(rel);
            }
            continue;
        }
        let not_copied = |line: String, plan: &mut Plan, left_out: &mut HashSet<String>| {
            let line = if is_dir {
                format!("{line} (nor anything in it)")
            } else {
                line
            };
            plan.failures.push(line);
            if is_dir {
                left_out.insert(rel.clone());
            }
        };
        let target = rel.split('/').try_fold(local.clone(), |t, c| t.join(c));
        let target = match target {
            Ok(t) => t,
            Err(err) => {
                not_copied(
                    format!("{}: {err}", remote_name(share, &e.path)),
                    plan,
                    &mut left_out,
                );
                continue;
            }
        };
        if let Err(first) = clashes.admit(&format!("{base}/{parent}"), &e.entry.name) {
            let why = clashes.explain(&e.entry.name, &first);
            not_copied(
                format!("{}: {why}", remote_name(share, &e.path)),
                plan,
                &mut left_out,
            );
            continue;
        }
        if is_dir {
            if opts.create_dirs {
                if let Err(err) = target.create_dir() {
                    not_copied(
                        format!("{}: {err}", target.path().display()),
                        plan,
                        &mut left_out,
                    );
                    continue;
                }
            }
            plan.dirs.push(DirJob::Local {
                local: target,
                meta: e.entry.metadata,
            });
        } else {
            plan.jobs.push(Job::Download {
                remote: e.path,
                local: target,
                meta: e.entry.metadata,
            });
        }
    }
    Ok(())
}

/// Plan an upload of local `sources` into the share-relative directory or file `dest`.
pub(crate) async fn upload(
    share: &Share,
    sources: &[PathBuf],
    dest: &str,
    opts: &PlanOptions<'_>,
) -> Plan {
    let mut plan = Plan::default();
    let dest_is_dir = match share.metadata(dest).await {
        Ok(md) => md.is_dir(),
        Err(e) if e.to_errno() == 2 => false,
        Err(e) => {
            plan.failures
                .push(format!("{}: {}", remote_name(share, dest), describe(&e)));
            return plan;
        }
    };
    if sources.len() > 1 && !dest_is_dir {
        plan.failures.push(format!(
            "{}: destination must be an existing directory for several sources",
            remote_name(share, dest)
        ));
        return plan;
    }
    // SMB names are case-insensitive (MS-FSCC 2.1.5): `foo` and `FOO` are one file there.
    let mut clashes = NameClashes::new(REMOTE_FOLDING);
    for src in sources {
        let md = match std::fs::metadata(src) {
            Ok(md) => md,
            Err(e) => {
                plan.failures.push(format!("{}: {e}", src.display()));
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
        if let Err(first) = clashes.admit("", base_name_remote(&target)) {
            plan.failures.push(format!(
                "{}: {}",
                src.display(),
                clashes.explain(base_name_remote(&target), &first)
            ));
            continue;
        }
        if md.is_dir() {
            if !opts.recursive {
                plan.failures
                    .push(format!("{}: is a directory (use -r)", src.display()));
                continue;
            }
            plan.dirs.push(DirJob::Remote {
                remote: target.clone(),
                meta: md.clone(),
            });
            if let Err(e) = local_tree(share, src, &target, opts, &mut clashes, &mut plan).await {
                plan.failures.push(e);
            }
        } else if opts.excludes.excludes(&name) {
            plan.excluded += 1;
        } else {
            plan.jobs.push(Job::Upload {
                local: src.clone(),
                remote: target,
                meta: md,
            });
        }
    }
    plan
}

async fn local_tree(
    share: &Share,
    dir: &Path,
    remote: &str,
    opts: &PlanOptions<'_>,
    clashes: &mut NameClashes,
    plan: &mut Plan,
) -> Result<(), String> {
    let mut stack = vec![(dir.to_path_buf(), remote.to_string(), String::new())];
    while let Some((ldir, rdir, rel_dir)) = stack.pop() {
        if opts.create_dirs {
            share
                .create_dir_all(&rdir)
                .await
                .map_err(|e| format!("{}: {}", remote_name(share, &rdir), describe(&e)))?;
        }
        let entries = std::fs::read_dir(&ldir).map_err(|e| format!("{}: {e}", ldir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", ldir.display()))?;
            let md = entry
                .metadata()
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = join_rel(&rel_dir, &name);
            if opts.excludes.excludes(&rel) {
                plan.excluded += 1;
                continue;
            }
            let r = join_remote(&rdir, &name);
            if let Err(first) = clashes.admit(&rdir, &name) {
                let why = clashes.explain(&name, &first);
                let nor = if md.is_dir() {
                    " (nor anything in it)"
                } else {
                    ""
                };
                plan.failures
                    .push(format!("{}: {why}{nor}", entry.path().display()));
                continue;
            }
            if md.is_dir() {
                plan.dirs.push(DirJob::Remote {
                    remote: r.clone(),
                    meta: md.clone(),
                });
                stack.push((entry.path(), r, rel));
            } else if md.is_file() {
                plan.jobs.push(Job::Upload {
                    local: entry.path(),
                    remote: r,
                    meta: md,
                });
            }
        }
    }
    Ok(())
}
