//! Turning smbcp's sources and destination into a list of file jobs: walking local or remote
//! trees, applying `--exclude`, and (unless `--dry-run`) creating the destination's
//! directories on the way.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use smb3_client::{DosAttributes, Metadata, Share, WalkOptions};

use crate::file_error::{Cause, FileError, Refusal};
use crate::glob::Excludes;
use crate::local_dest::{split_dest, LocalRoot, LocalTarget, NameFolding};
use crate::name_clash::NameClashes;
use crate::remote_links::{self, RemoteKind};

/// Remote directories listed at the same time while planning a download.
const LISTINGS_AT_ONCE: usize = 16;

/// Said after the reason a directory was not copied: its whole subtree is left out.
const NOR_ANYTHING_IN_IT: &str = " (nor anything in it)";

/// With `-L`, the remote directories links lead to, walked once the tree holding the links
/// is. A link leading to one of its own ancestors (a loop) is not followed; one to a sibling
/// is, and that directory is copied twice, as `cp -rL` does.
#[derive(Default)]
struct Following {
    /// Directories still to walk.
    queue: Vec<FollowedDir>,
    /// Directories walked through links so far, against a share whose links multiply
    /// (see [`MAX_FOLLOWED_DIRS`]).
    walked: usize,
}

/// The most directories `-L` walks through links in one copy.
const MAX_FOLLOWED_DIRS: usize = 10_000;

/// A remote directory to walk: a source, or where a link leads.
struct FollowedDir {
    /// Its path on the share.
    dir: String,
    /// The local directory it becomes.
    local: LocalTarget,
    meta: Metadata,
    /// The directories above it in the copy, through the links that led here: share path
    /// and file id (0 when the server gives none).
    ancestry: Vec<(String, u64)>,
}

/// Whether following a link to the directory `dir` (file id `id`) would walk into one of
/// `ancestry`, a loop: the same file id where the server gives ids, else the same path.
fn leads_back(ancestry: &[(String, u64)], dir: &str, id: u64) -> bool {
    ancestry
        .iter()
        .any(|(path, known)| (id != 0 && *known == id) || path == dir)
}

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

/// A symbolic link met in a tree, made again at the other end as a link to the same target,
/// never resolved (as `cp -r` does; `-L` copies what it points to instead).
#[derive(Clone, Debug)]
pub(crate) enum LinkJob {
    /// A link of a local tree, made on the share.
    Up {
        /// The link here.
        local: PathBuf,
        /// Where it goes on the share.
        remote: String,
        /// What it points to, as it is.
        target: String,
    },
    /// A FIFO, socket or device node of a local tree, made on the share as the NFS-style
    /// reparse point Linux's client and Windows' NFS server use (a name only: nothing flows
    /// through it there), as `cp -a` makes one again.
    UpSpecial {
        local: PathBuf,
        remote: String,
        kind: smb3_client::SpecialKind,
        /// Its permission bits.
        mode: u32,
    },
    /// A link or special file of a remote tree, made here (below the destination only,
    /// `local_dest.rs`). What it is (a link's target, a device's numbers) is read from the
    /// share when it is made.
    Down {
        remote: String,
        local: LocalTarget,
        meta: Metadata,
    },
}

/// What planning found.
#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) jobs: Vec<Job>,
    /// Symbolic links to make.
    pub(crate) links: Vec<LinkJob>,
    /// Directories copied, for `-p`.
    pub(crate) dirs: Vec<DirJob>,
    /// Why each source (or file or directory found below one) that could not be planned was
    /// left out.
    pub(crate) failures: Vec<FileError>,
    /// Files and directories left out by `--exclude` (a directory counts once).
    pub(crate) excluded: u64,
    /// The destination cannot be what the command line asks (see [`refused_destination`]):
    /// nothing is copied, and smbcp exits as for a usage error.
    pub(crate) usage_error: Option<String>,
    /// Things the user should know that are no failure: one line each (sparse files copied
    /// in full).
    pub(crate) notes: Vec<String>,
}

/// Whether a file of `len` bytes with `allocated` bytes on disk has holes worth saying so:
/// less than half of it allocated, and at least 1 MiB missing.
fn mostly_holes(len: u64, allocated: u64) -> bool {
    allocated < len / 2 && len - allocated >= 1 << 20
}

/// The note for a remote source with holes that is copied in full (the server does not mark
/// it sparse, so it reports every byte as data): `shown` names it.
fn inflated_note(shown: &str, len: u64, allocated: u64) -> String {
    format!(
        "{shown}: {allocated} of {len} bytes allocated, but not marked sparse on the server; \
         copied in full, its holes written as zeros"
    )
}

/// What is at a destination path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DestState {
    /// A directory: sources go below it.
    Dir,
    /// Something that is not a directory.
    NotDir,
    /// Nothing yet.
    Missing,
}

/// Why `cp` would refuse the destination `shown`, as smbcp's usage error: several sources
/// need an existing directory, and a destination ending in `/` (`names_dir`) must be one,
/// unless the one source is a directory copied with `-r`, which then becomes it
/// (`cp -r dir new/`). `None` when the copy may go ahead.
pub(crate) fn refused_destination(
    shown: &str,
    dest: DestState,
    names_dir: bool,
    sources: usize,
    source_becomes_dir: bool,
) -> Option<String> {
    match dest {
        DestState::Dir => None,
        _ if sources > 1 => Some(format!(
            "{shown}: not an existing directory (several sources need one)"
        )),
        DestState::NotDir if names_dir => Some(format!("{shown}: not a directory")),
        DestState::Missing if names_dir && !source_becomes_dir => Some(format!(
            "{shown}: no such directory (a destination ending in / must be an existing \
             directory; copy a directory with -r to create it)"
        )),
        _ => None,
    }
}

/// How planning behaves.
pub(crate) struct PlanOptions<'a> {
    pub(crate) recursive: bool,
    pub(crate) excludes: &'a Excludes,
    /// Create no directories (`--dry-run`, `--verify-only`).
    pub(crate) create_dirs: bool,
    /// `-L`: symbolic links in a local tree are followed (what they point to is copied)
    /// rather than made again as links.
    pub(crate) follow_links: bool,
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

pub(crate) fn base_name_remote(path: &str) -> &str {
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
/// `sources` are (path on `share`, the name it goes by): the name is the last component of
/// the path the user gave, which differs from the path's own when a DFS link led there.
pub(crate) async fn download(
    share: &Share,
    sources: &[(String, String)],
    dest: &Path,
    opts: &PlanOptions<'_>,
) -> Plan {
    let mut plan = Plan::default();
    let dest_is_dir = dest.is_dir();
    let state = match (dest_is_dir, dest.exists()) {
        (true, _) => DestState::Dir,
        (false, true) => DestState::NotDir,
        (false, false) => DestState::Missing,
    };
    let names_dir = {
        use std::os::unix::ffi::OsStrExt as _;
        dest.as_os_str().as_bytes().ends_with(b"/")
    };
    let shown = dest.display().to_string();
    // Whether the one source is a directory is known only once it is looked at, below.
    if let Some(line) = refused_destination(&shown, state, names_dir, sources.len(), true) {
        plan.usage_error = Some(line);
        return plan;
    }
    // The directory named on the command line (or the one holding the file named there) is
    // the user's: created if missing, links in it followed. Below it nothing is.
    let (root_path, dest_name) = split_dest(dest, dest_is_dir);
    if opts.create_dirs && !root_path.exists() {
        if let Err(e) = std::fs::create_dir_all(&root_path) {
            plan.failures.push(FileError::new(
                root_path.display().to_string(),
                Cause::local(e),
            ));
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
                    plan.failures.push(FileError::new(
                        root_path.display().to_string(),
                        Cause::local(e),
                    ));
                    return plan;
                }
            }
        }
        Err(e) => {
            plan.failures.push(FileError::new(
                root_path.display().to_string(),
                Cause::local(e),
            ));
            return plan;
        }
    };
    let mut clashes = NameClashes::new(root.name_folding(opts.create_dirs));
    if clashes.folds() && dest_name.is_none() {
        note_existing_local(&root_path, "", &mut clashes);
    }
    for (src, given_name) in sources {
        let md = match share.metadata(src).await {
            Ok(md) => md,
            Err(e) => {
                plan.failures
                    .push(FileError::new(remote_name(share, src), Cause::Smb(e)));
                continue;
            }
        };
        let becomes_dir = md.is_dir() && opts.recursive;
        if let Some(line) = refused_destination(&shown, state, names_dir, 1, becomes_dir) {
            plan.usage_error = Some(line);
            return plan;
        }
        let name = dest_name.clone().unwrap_or_else(|| given_name.clone());
        let target = match LocalTarget::new(&root, vec![name.clone()]) {
            Ok(t) => t,
            Err(e) => {
                plan.failures
                    .push(FileError::new(remote_name(share, src), Cause::local(e)));
                continue;
            }
        };
        if let Err(first) = clashes.admit("", &name) {
            let why = Refusal::NameClash(clashes.explain(&name, &first));
            plan.failures
                .push(FileError::new(remote_name(share, src), why));
            continue;
        }
        // A link named on the command line is followed, as `cp` does and as smbcp does
        // for a local one (only within the share).
        let (src, md) = match remote_links::source_kind(share, src, &md).await {
            RemoteKind::Link => {
                match remote_links::follow(share, src, &remote_name(share, src)).await {
                    Ok(found) => found,
                    Err(e) => {
                        plan.failures.push(e);
                        continue;
                    }
                }
            }
            RemoteKind::Special(what) => {
                plan.failures.push(FileError::new(
                    remote_name(share, src),
                    Refusal::SpecialFile(what),
                ));
                continue;
            }
            RemoteKind::File | RemoteKind::Dir => (src.clone(), md),
        };
        let src = &src;
        if md.is_dir() {
            if !opts.recursive {
                plan.failures.push(FileError::new(
                    remote_name(share, src),
                    Refusal::IsDirectory,
                ));
                continue;
            }
            let mut following = Following::default();
            following.queue.push(FollowedDir {
                dir: src.clone(),
                local: target,
                meta: md,
                ancestry: Vec::new(),
            });
            while let Some(walk) = following.queue.pop() {
                plan.dirs.push(DirJob::Local {
                    local: walk.local.clone(),
                    meta: walk.meta.clone(),
                });
                let walked =
                    remote_tree(share, &walk, opts, &mut clashes, &mut plan, &mut following).await;
                if let Err(e) = walked {
                    plan.failures.push(e);
                }
            }
        } else if opts.excludes.excludes(base_name_remote(src)) {
            plan.excluded += 1;
        } else {
            note_sparse_remote(share, src, &md, &mut plan);
            plan.jobs.push(Job::Download {
                remote: src.clone(),
                local: target,
                meta: md,
            });
        }
    }
    plan
}

/// How the share compares names in `dir`. SMB names are case-insensitive (MS-FSCC 2.1.5) unless
/// the file system says FILE_CASE_SENSITIVE_SEARCH (MS-FSCC 2.5.1); but Samba says so
/// whatever it does (4.17 sets it and still takes `FOO` for an existing `foo` unless
/// `case sensitive = yes`), so when it is set the share is asked: a file made under a fresh
/// name and looked up in upper case. Case-insensitive when that cannot be done (`--dry-run`
/// creates nothing, a directory that does not exist yet, no right to create): the safe
/// side, where a clash is reported rather than one file overwriting another.
async fn remote_folding(share: &Share, dir: &str, may_create: bool) -> NameFolding {
    match share.fs_attributes().await {
        Ok(a) if a.case_sensitive && may_create => {}
        _ => return REMOTE_FOLDING,
    }
    let name = format!(".smbcp-case-probe-{:016x}", rand::random::<u64>());
    let probe = join_remote(dir, &name);
    if share
        .write_new_file(&probe, bytes::Bytes::new())
        .await
        .is_err()
    {
        return REMOTE_FOLDING;
    }
    let folds = share
        .metadata(&join_remote(dir, &name.to_uppercase()))
        .await
        .is_ok();
    if let Err(e) = share.remove_file(&probe).await {
        tracing::warn!(path = %probe, error = %e, "case probe left behind");
    }
    if folds {
        REMOTE_FOLDING
    } else {
        NameFolding::EXACT
    }
}

/// Note the names already in the remote directory `dir` (none when it does not exist yet), so
/// that a name differing from one only in case is reported instead of overwriting it.
async fn note_existing_remote(share: &Share, dir: &str, clashes: &mut NameClashes) {
    let Ok(mut listing) = share.list(dir).await else {
        return;
    };
    loop {
        match listing.next_page().await {
            Ok(Some(page)) => page.iter().for_each(|e| clashes.existing(dir, &e.name)),
            Ok(None) => return,
            // An entry refused for its name: nothing of ours can clash with it.
            Err(smb3_client::Error::UnsafeName { .. }) => {}
            Err(_) => return,
        }
    }
}

/// Note the names already in the local directory `dir` (none when it does not exist yet) as
/// `key`'s: on a case-insensitive local file system (macOS's default) a download of `foo`
/// would otherwise overwrite an existing `FOO`.
fn note_existing_local(dir: &Path, key: &str, clashes: &mut NameClashes) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        // A name that is not UTF-8 cannot be the spelling of a name from the share.
        if let Some(name) = entry.file_name().to_str() {
            clashes.existing(key, name);
        }
    }
}

/// Note a remote file whose data is mostly holes and that downloads in full: one the server
/// does not mark sparse (a marked one is copied sparse).
fn note_sparse_remote(share: &Share, path: &str, md: &Metadata, plan: &mut Plan) {
    let marked = md.attributes.contains(DosAttributes::SPARSE_FILE);
    if !marked && mostly_holes(md.len, md.allocation_size) {
        let shown = remote_name(share, path);
        plan.notes
            .push(inflated_note(&shown, md.len, md.allocation_size));
    }
}

/// Plan the local special file `local` (metadata `md`) to be made again as `remote`; one of
/// a kind no share keeps is a failure.
fn push_special(local: PathBuf, remote: String, md: &std::fs::Metadata, plan: &mut Plan) {
    match local_special(md) {
        Some(kind) => plan.links.push(LinkJob::UpSpecial {
            local,
            remote,
            kind,
            mode: std::os::unix::fs::PermissionsExt::mode(&md.permissions()),
        }),
        None => plan.failures.push(FileError::new(
            local.display().to_string(),
            Refusal::SpecialFile(special_kind(md)),
        )),
    }
}

/// The special file `md` describes (a device with its numbers), as a share keeps it.
fn local_special(md: &std::fs::Metadata) -> Option<smb3_client::SpecialKind> {
    use smb3_client::SpecialKind;
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let t = md.file_type();
    let dev = md.rdev() as rustix::fs::Dev;
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    if t.is_fifo() {
        Some(SpecialKind::Fifo)
    } else if t.is_socket() {
        Some(SpecialKind::Socket)
    } else if t.is_char_device() {
        Some(SpecialKind::CharDevice { major, minor })
    } else if t.is_block_device() {
        Some(SpecialKind::BlockDevice { major, minor })
    } else {
        None
    }
}

/// What a file that is neither a regular file, a directory nor a link is, in words.
fn special_kind(md: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = md.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "not a regular file"
    }
}

/// Walk a remote directory (the library's breadth-first walk), creating local directories
/// and listing files to fetch and links to make. Paths matched against `--exclude` are
/// relative to `dir`; a directory that cannot be listed, an entry whose name the library
/// refused, a name the destination would take for another already planned, and a FIFO,
/// socket or device are failures of their own, and the rest is copied. With `-L` a link
/// is replaced by what it leads to: a file joins the jobs, a directory `following`'s queue.
async fn remote_tree(
    share: &Share,
    here: &FollowedDir,
    opts: &PlanOptions<'_>,
    clashes: &mut NameClashes,
    plan: &mut Plan,
    following: &mut Following,
) -> Result<(), FileError> {
    let (dir, local) = (here.dir.as_str(), &here.local);
    // Directories of this walk by their path below `dir`, for a followed link's ancestry.
    let mut walked_dirs: std::collections::HashMap<String, (String, u64)> =
        std::collections::HashMap::new();
    walked_dirs.insert(String::new(), (dir.to_string(), here.meta.file_id));
    if opts.create_dirs {
        local
            .create_dir()
            .map_err(|e| FileError::new(local.path().display().to_string(), Cause::local(e)))?;
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
    if clashes.folds() {
        note_existing_local(&local.path(), &format!("{base}/"), clashes);
    }
    while let Some(item) = walk.next().await {
        let e = match item {
            Ok(e) => e,
            Err(err) => {
                let shown = match &err.error {
                    // The error names the directory and the raw name itself.
                    smb3_client::Error::UnsafeName { .. } => {
                        format!("//{}/{}", share.client().server_addr().ip(), share.name())
                    }
                    _ => remote_name(share, &err.path),
                };
                plan.failures
                    .push(FileError::new(shown, Cause::Smb(err.error)));
                continue;
            }
        };
        let rel = e.path.strip_prefix(&prefix).unwrap_or(&e.path).to_string();
        let kind = remote_links::remote_kind(&e.entry.metadata, e.entry.reparse_tag);
        let is_dir = kind == RemoteKind::Dir;
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
        let not_copied = |error: FileError, plan: &mut Plan, left_out: &mut HashSet<String>| {
            plan.failures.push(if is_dir {
                error.with_outcome(NOR_ANYTHING_IN_IT)
            } else {
                error
            });
            if is_dir {
                left_out.insert(rel.clone());
            }
        };
        let target = rel.split('/').try_fold(local.clone(), |t, c| t.join(c));
        let target = match target {
            Ok(t) => t,
            Err(err) => {
                not_copied(
                    FileError::new(remote_name(share, &e.path), Cause::local(err)),
                    plan,
                    &mut left_out,
                );
                continue;
            }
        };
        if let Err(first) = clashes.admit(&format!("{base}/{parent}"), &e.entry.name) {
            let why = Refusal::NameClash(clashes.explain(&e.entry.name, &first));
            not_copied(
                FileError::new(remote_name(share, &e.path), why),
                plan,
                &mut left_out,
            );
            continue;
        }
        if kind == RemoteKind::Link && opts.follow_links {
            match remote_links::follow(share, &e.path, &remote_name(share, &e.path)).await {
                Ok((to, md)) if md.is_dir() => {
                    let mut ancestry = here.ancestry.clone();
                    let mut above = String::new();
                    for c in std::iter::once("").chain(parent.split('/').filter(|c| !c.is_empty()))
                    {
                        above = join_rel(&above, c);
                        ancestry.extend(walked_dirs.get(&above).cloned());
                    }
                    let why = if leads_back(&ancestry, &to, md.file_id) {
                        Some("a symbolic link to a directory above it: not followed (a loop)")
                    } else if following.walked >= MAX_FOLLOWED_DIRS {
                        Some("one symbolic link to a directory too many: not followed")
                    } else {
                        None
                    };
                    match why {
                        Some(why) => plan.failures.push(FileError::new(
                            remote_name(share, &e.path),
                            Refusal::LinkNotFollowed(why.to_string()),
                        )),
                        None => {
                            following.walked += 1;
                            following.queue.push(FollowedDir {
                                dir: to,
                                local: target,
                                meta: md,
                                ancestry,
                            });
                        }
                    }
                }
                Ok((file, md)) => {
                    note_sparse_remote(share, &file, &md, plan);
                    plan.jobs.push(Job::Download {
                        remote: file,
                        local: target,
                        meta: md,
                    });
                }
                Err(error) => plan.failures.push(error),
            }
        } else if kind == RemoteKind::Link {
            plan.links.push(LinkJob::Down {
                remote: e.path,
                local: target,
                meta: e.entry.metadata,
            });
        } else if let RemoteKind::Special(_) = kind {
            plan.links.push(LinkJob::Down {
                remote: e.path,
                local: target,
                meta: e.entry.metadata,
            });
        } else if is_dir {
            walked_dirs.insert(rel.clone(), (e.path.clone(), e.entry.file_id));
            if opts.create_dirs {
                if let Err(err) = target.create_dir() {
                    not_copied(
                        FileError::new(target.path().display().to_string(), Cause::local(err)),
                        plan,
                        &mut left_out,
                    );
                    continue;
                }
            }
            if clashes.folds() {
                note_existing_local(&target.path(), &format!("{base}/{rel}"), clashes);
            }
            plan.dirs.push(DirJob::Local {
                local: target,
                meta: e.entry.metadata,
            });
        } else {
            note_sparse_remote(share, &e.path, &e.entry.metadata, plan);
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
    names_dir: bool,
    opts: &PlanOptions<'_>,
) -> Plan {
    let mut plan = Plan::default();
    let shown = remote_name(share, dest);
    let state = match share.metadata(dest).await {
        Ok(md) if md.is_dir() => DestState::Dir,
        Ok(_) => DestState::NotDir,
        Err(e) if e.to_errno() == 2 => DestState::Missing,
        Err(e) => {
            plan.failures.push(FileError::new(shown, Cause::Smb(e)));
            return plan;
        }
    };
    let dest_is_dir = state == DestState::Dir;
    if let Some(line) = refused_destination(&shown, state, names_dir, sources.len(), true) {
        plan.usage_error = Some(line);
        return plan;
    }
    let probe_dir = if dest_is_dir {
        dest
    } else {
        dest.rsplit_once('/').map_or("", |(d, _)| d)
    };
    let folding = remote_folding(share, probe_dir, opts.create_dirs).await;
    let mut clashes = NameClashes::new(folding);
    if dest_is_dir && clashes.folds() {
        note_existing_remote(share, dest, &mut clashes).await;
    }
    for src in sources {
        let md = match std::fs::metadata(src) {
            Ok(md) => md,
            Err(e) => {
                plan.failures
                    .push(FileError::new(src.display().to_string(), Cause::local(e)));
                continue;
            }
        };
        let becomes_dir = md.is_dir() && opts.recursive;
        if let Some(line) = refused_destination(&shown, state, names_dir, 1, becomes_dir) {
            plan.usage_error = Some(line);
            return plan;
        }
        let name = src
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let target = if dest_is_dir {
            join_remote(dest, &name)
        } else {
            dest.to_string()
        };
        let target_dir = if dest_is_dir { dest } else { "" };
        if let Err(clash) = clashes.admit(target_dir, base_name_remote(&target)) {
            let why = Refusal::NameClash(clashes.explain(base_name_remote(&target), &clash));
            plan.failures
                .push(FileError::new(src.display().to_string(), why));
            continue;
        }
        if md.is_dir() {
            if !opts.recursive {
                plan.failures.push(FileError::new(
                    src.display().to_string(),
                    Refusal::IsDirectory,
                ));
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
        } else if !md.is_file() {
            // With -r a special file is made again, as `cp -r` does; without, `cp` would read
            // a FIFO (and wait for a writer): smbcp says what it is instead.
            if opts.recursive {
                push_special(src.clone(), target, &md, &mut plan);
            } else {
                plan.failures.push(FileError::new(
                    src.display().to_string(),
                    Refusal::SpecialFile(special_kind(&md)),
                ));
            }
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
) -> Result<(), FileError> {
    use std::os::unix::fs::MetadataExt as _;
    // Each directory to walk with the device and inode numbers of those above it (itself
    // included): with -L, a link leading to one of them would walk the tree forever.
    let top: Vec<(u64, u64)> = std::fs::metadata(dir)
        .map(|md| vec![(md.dev(), md.ino())])
        .unwrap_or_default();
    let mut stack = vec![(dir.to_path_buf(), remote.to_string(), String::new(), top)];
    while let Some((ldir, rdir, rel_dir, ancestry)) = stack.pop() {
        // A directory there from an earlier copy may hold names in another case.
        if clashes.folds() {
            note_existing_remote(share, &rdir, clashes).await;
        }
        if opts.create_dirs {
            share
                .create_dir_all(&rdir)
                .await
                .map_err(|e| FileError::new(remote_name(share, &rdir), Cause::Smb(e)))?;
        }
        let local_error = |at: &Path, e| FileError::new(at.display().to_string(), Cause::local(e));
        let entries = std::fs::read_dir(&ldir).map_err(|e| local_error(&ldir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| local_error(&ldir, e))?;
            let path = entry.path();
            let mut md = entry.metadata().map_err(|e| local_error(&path, e))?;
            let mut link_target = None;
            if md.file_type().is_symlink() {
                if opts.follow_links {
                    md = match std::fs::metadata(&path) {
                        Ok(m) => m,
                        Err(e) => {
                            plan.failures.push(local_error(&path, e));
                            continue;
                        }
                    };
                } else {
                    link_target =
                        Some(std::fs::read_link(&path).map_err(|e| local_error(&path, e))?);
                }
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = join_rel(&rel_dir, &name);
            if opts.excludes.excludes(&rel) {
                plan.excluded += 1;
                continue;
            }
            let r = join_remote(&rdir, &name);
            if let Err(first) = clashes.admit(&rdir, &name) {
                let why = Refusal::NameClash(clashes.explain(&name, &first));
                let error = FileError::new(entry.path().display().to_string(), why);
                plan.failures.push(if md.is_dir() {
                    error.with_outcome(NOR_ANYTHING_IN_IT)
                } else {
                    error
                });
                continue;
            }
            if let Some(target) = link_target {
                match target.into_os_string().into_string() {
                    Ok(target) => plan.links.push(LinkJob::Up {
                        local: path,
                        remote: r,
                        target,
                    }),
                    Err(_) => plan.failures.push(FileError::new(
                        path.display().to_string(),
                        Refusal::LinkTargetNotUnicode,
                    )),
                }
            } else if md.is_dir() {
                let id = (md.dev(), md.ino());
                if ancestry.contains(&id) {
                    plan.failures.push(FileError::new(
                        path.display().to_string(),
                        Refusal::LinkNotFollowed(
                            "a symbolic link to a directory above it: not followed (a loop)"
                                .to_string(),
                        ),
                    ));
                    continue;
                }
                plan.dirs.push(DirJob::Remote {
                    remote: r.clone(),
                    meta: md.clone(),
                });
                let mut below = ancestry.clone();
                below.push(id);
                stack.push((path, r, rel, below));
            } else if md.is_file() {
                plan.jobs.push(Job::Upload {
                    local: path,
                    remote: r,
                    meta: md,
                });
            } else {
                push_special(path, r, &md, plan);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{note_existing_local, refused_destination, DestState};
    use crate::local_dest::NameFolding;
    use crate::name_clash::{Clash, NameClashes};

    #[test]
    fn names_already_in_a_local_directory_clash_when_it_folds_case() {
        let dir = std::env::temp_dir().join(format!("smbcp-existing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("FOO"), b"").unwrap();
        let mut clashes = NameClashes::new(NameFolding {
            case_insensitive: true,
            normalization_insensitive: false,
        });
        note_existing_local(&dir, "d/", &mut clashes);
        note_existing_local(&dir.join("missing"), "m/", &mut clashes);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            clashes.admit("d/", "foo"),
            Err(Clash::Existing("FOO".into()))
        );
        assert_eq!(
            clashes.admit("d/", "FOO"),
            Ok(()),
            "the same name is replaced"
        );
        assert_eq!(clashes.admit("m/", "foo"), Ok(()));
    }

    #[test]
    fn destinations_are_refused_where_cp_refuses_them() {
        let refused = |dest, names_dir, sources, becomes_dir| {
            refused_destination("d", dest, names_dir, sources, becomes_dir)
        };
        // An existing directory takes anything.
        assert_eq!(refused(DestState::Dir, true, 3, false), None);
        // Several sources need one.
        for dest in [DestState::NotDir, DestState::Missing] {
            assert!(refused(dest, false, 2, false)
                .unwrap()
                .contains("several sources"));
        }
        // `one.txt newdir/`: no such directory; `one.txt file/`: not a directory.
        assert!(refused(DestState::Missing, true, 1, false)
            .unwrap()
            .contains("no such directory"));
        assert!(refused(DestState::NotDir, true, 1, true)
            .unwrap()
            .contains("not a directory"));
        // `-r dir newdir/` makes it; `one.txt newname` and `one.txt existing` are files.
        assert_eq!(refused(DestState::Missing, true, 1, true), None);
        assert_eq!(refused(DestState::Missing, false, 1, false), None);
        assert_eq!(refused(DestState::NotDir, false, 1, false), None);
    }
}
