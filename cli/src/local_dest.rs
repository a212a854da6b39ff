//! Where a download may write: below the destination directory the user named, and nowhere
//! else, whatever names the server sends and whatever links are in the destination tree.
//!
//! The directory the user named (the *root*) is opened once, following links: that path is
//! the user's own choice. Everything below it is reached one component at a time from the
//! root's descriptor, with `openat(O_NOFOLLOW)`, and created with `mkdirat`: a component that
//! is a symbolic link (planted there by someone else, or left by an earlier copy) is refused,
//! never followed out of the tree, and no path string built from remote names is ever handed
//! to a path-based call. Every component is checked with the library's
//! [`check_name`](smb3_client::check_name) first, so `..`, `/` or a NUL cannot even be asked.
//!
//! A file is written under a partial name created exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`)
//! in its final directory and renamed into place with `renameat` when complete: a name that
//! already exists there (a link another user planted in a shared directory, or a partial file
//! of a copy running beside this one) is never opened for writing.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use smb3_client::SpecialKind;

/// Suffix of partial files: `.NAME.smbcp-partial`.
const PARTIAL_SUFFIX: &str = ".smbcp-partial";
/// The longest file name Linux and macOS take (NAME_MAX), in bytes.
const NAME_MAX: usize = 255;
/// Fresh partial names tried when the usual one is taken by something not ours.
const FRESH_NAME_TRIES: u32 = 16;

/// The destination directory a download writes below.
#[derive(Debug)]
pub(crate) struct LocalRoot {
    dir: OwnedFd,
    shown: PathBuf,
}

impl LocalRoot {
    /// Open the directory `path` (following links: it is the user's own choice).
    pub(crate) fn open(path: &Path) -> io::Result<Arc<LocalRoot>> {
        let dir = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Arc::new(LocalRoot {
            dir,
            shown: path.to_path_buf(),
        }))
    }

    /// How the file system under the root compares names, found by creating a probe file
    /// and looking it up under other spellings. Only where creating is allowed (not in
    /// `--dry-run`); otherwise the platform's usual default.
    pub(crate) fn name_folding(&self, may_create: bool) -> NameFolding {
        if !may_create {
            return NameFolding::platform_default();
        }
        self.probe_folding()
            .unwrap_or_else(|_| NameFolding::platform_default())
    }

    fn probe_folding(&self) -> io::Result<NameFolding> {
        // "é" precomposed (NFC), which macOS's file systems store decomposed.
        let token: u64 = rand_token();
        let name = format!(".smbcp-probe-\u{e9}-{token:016x}");
        let fd = rustix::fs::openat(
            &self.dir,
            name.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        drop(fd);
        let exists =
            |other: &str| rustix::fs::statat(&self.dir, other, AtFlags::SYMLINK_NOFOLLOW).is_ok();
        let folding = NameFolding {
            case_insensitive: exists(&name.to_uppercase()),
            normalization_insensitive: exists(&name.replace('\u{e9}', "e\u{301}")),
        };
        rustix::fs::unlinkat(&self.dir, name.as_str(), AtFlags::empty())?;
        Ok(folding)
    }
}

/// A random 64-bit value, for names no one can prepare in advance.
fn rand_token() -> u64 {
    rand::random()
}

/// Which spellings of a name a file system takes for the same file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NameFolding {
    /// `foo` and `FOO` are one file (macOS's default, Windows, SMB shares).
    pub(crate) case_insensitive: bool,
    /// `é` precomposed and decomposed are one file (macOS's APFS and HFS+).
    pub(crate) normalization_insensitive: bool,
}

impl NameFolding {
    /// Every spelling is a name of its own (Linux's usual file systems).
    pub(crate) const EXACT: NameFolding = NameFolding {
        case_insensitive: false,
        normalization_insensitive: false,
    };

    /// What a platform's default file system does.
    pub(crate) fn platform_default() -> NameFolding {
        if cfg!(target_os = "macos") {
            NameFolding {
                case_insensitive: true,
                normalization_insensitive: true,
            }
        } else {
            NameFolding::EXACT
        }
    }

    /// The key two names share exactly when this file system takes them for one file.
    pub(crate) fn key(&self, name: &str) -> String {
        let mut key = if self.normalization_insensitive {
            icu_normalizer::DecomposingNormalizerBorrowed::new_nfd()
                .normalize(name)
                .into_owned()
        } else {
            name.to_string()
        };
        if self.case_insensitive {
            key = key.to_lowercase();
        }
        key
    }
}

/// A path below a [`LocalRoot`]: its components, each a single checked name.
#[derive(Clone, Debug)]
pub(crate) struct LocalTarget {
    root: Arc<LocalRoot>,
    components: Vec<String>,
}

/// A component that may not be used, with why.
fn bad_component(name: &str, why: &dyn std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{name:?} is not a single file name ({why}): refused"),
    )
}

impl LocalTarget {
    /// `components` below `root`; each must be one file name (see
    /// [`check_name`](smb3_client::check_name)).
    pub(crate) fn new(root: &Arc<LocalRoot>, components: Vec<String>) -> io::Result<Self> {
        for c in &components {
            smb3_client::check_name(c).map_err(|why| bad_component(c, &why))?;
        }
        Ok(LocalTarget {
            root: root.clone(),
            components,
        })
    }

    /// One more component below this one.
    pub(crate) fn join(&self, name: &str) -> io::Result<LocalTarget> {
        smb3_client::check_name(name).map_err(|why| bad_component(name, &why))?;
        let mut components = self.components.clone();
        components.push(name.to_string());
        Ok(LocalTarget {
            root: self.root.clone(),
            components,
        })
    }

    /// The path as shown to the user (the root's path and the components).
    pub(crate) fn path(&self) -> PathBuf {
        let mut p = self.root.shown.clone();
        p.extend(&self.components);
        p
    }

    /// The last component (`None` for the root itself).
    pub(crate) fn name(&self) -> Option<&str> {
        self.components.last().map(String::as_str)
    }

    /// The components of the directory holding this target.
    pub(crate) fn parent_components(&self) -> &[String] {
        &self.components[..self.components.len().saturating_sub(1)]
    }

    /// The directory `components` below the root, each opened without following links;
    /// with `create`, missing ones are made.
    fn open_dir(&self, components: &[String], create: bool) -> io::Result<OwnedFd> {
        let mut dir = rustix::fs::openat(
            &self.root.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        for (i, c) in components.iter().enumerate() {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let next = match rustix::fs::openat(&dir, c.as_str(), flags, Mode::empty()) {
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&dir, c.as_str(), Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(self.explain(&components[..=i], e)),
                    }
                    rustix::fs::openat(&dir, c.as_str(), flags, Mode::empty())
                }
                other => other,
            };
            dir = next.map_err(|e| self.explain_at(&dir, &components[..=i], e))?;
        }
        Ok(dir)
    }

    /// An error at `components`, in words; a symbolic link is named as such.
    fn explain_at(&self, parent: &OwnedFd, components: &[String], e: Errno) -> io::Error {
        let last = components.last().map_or(".", String::as_str);
        let is_link = rustix::fs::statat(parent, last, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_symlink());
        if is_link {
            let mut p = self.root.shown.clone();
            p.extend(components);
            return io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is a symbolic link: smbcp does not follow links inside the \
                     destination, so nothing is written through it",
                    p.display()
                ),
            );
        }
        self.explain(components, e)
    }

    fn explain(&self, components: &[String], e: Errno) -> io::Error {
        let mut p = self.root.shown.clone();
        p.extend(components);
        io::Error::new(
            io::Error::from(e).kind(),
            format!("{}: {}", p.display(), io::Error::from(e)),
        )
    }

    /// Make this target a directory (and every one above it below the root), without
    /// following links.
    pub(crate) fn create_dir(&self) -> io::Result<()> {
        self.open_dir(&self.components, true).map(drop)
    }

    /// Open this target, a directory, without following links (to set its times).
    pub(crate) fn open_as_dir(&self) -> io::Result<File> {
        self.open_dir(&self.components, false).map(File::from)
    }

    /// This target's metadata without following a link at it or above it; `None` when it
    /// does not exist.
    pub(crate) fn metadata(&self) -> io::Result<Option<std::fs::Metadata>> {
        let Some(name) = self.name() else {
            return File::from(self.open_dir(&[], false)?).metadata().map(Some);
        };
        let parent = match self.open_dir(self.parent_components(), false) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        match rustix::fs::openat(&parent, name, flags, Mode::empty()) {
            Ok(fd) => File::from(fd).metadata().map(Some),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.explain_at(&parent, &self.components, e)),
        }
    }

    /// Open this target, a file, for reading, without following links.
    pub(crate) fn open_read(&self) -> io::Result<File> {
        let parent = self.open_dir(self.parent_components(), false)?;
        let name = self.name().unwrap_or(".");
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(&parent, name, flags, Mode::empty())
            .map(File::from)
            .map_err(|e| self.explain_at(&parent, &self.components, e))
    }

    /// The directory holding this target (reached without links) and its name; `None` for
    /// the root itself or when that directory does not exist.
    fn parent_if_there(&self) -> io::Result<Option<(OwnedFd, &str)>> {
        let Some(name) = self.name() else {
            return Ok(None);
        };
        match self.open_dir(self.parent_components(), false) {
            Ok(p) => Ok(Some((p, name))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What the symbolic link at this target points to, read without following it; `None`
    /// when nothing is there or it is not a link (or its target is not UTF-8, which no
    /// link from a share has).
    pub(crate) fn read_link(&self) -> io::Result<Option<String>> {
        let Some((parent, name)) = self.parent_if_there()? else {
            return Ok(None);
        };
        match rustix::fs::readlinkat(&parent, name, Vec::new()) {
            Ok(target) => Ok(target.into_string().ok()),
            Err(Errno::NOENT | Errno::INVAL) => Ok(None),
            Err(e) => Err(self.explain(&self.components, e)),
        }
    }

    /// Make this target a symbolic link to `target`, stored as given and never resolved.
    /// The link is made under a fresh name in its directory and renamed over this one, so a
    /// file or link already there is replaced whole (never written through) and a directory
    /// there is refused. With `times`, the link's own times are set (not its target's).
    pub(crate) fn make_symlink(
        &self,
        target: &str,
        times: Option<&rustix::fs::Timestamps>,
    ) -> io::Result<()> {
        self.place_new(|dir, name| rustix::fs::symlinkat(target, dir, name), times)
    }

    /// What special file this target is (a FIFO, socket or device node, with its numbers),
    /// looked at without following a link; `None` for anything else or nothing.
    pub(crate) fn special(&self) -> io::Result<Option<SpecialKind>> {
        let Some((parent, name)) = self.parent_if_there()? else {
            return Ok(None);
        };
        let st = match rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(self.explain(&self.components, e)),
        };
        let rdev = st.st_rdev as rustix::fs::Dev;
        let (major, minor) = (rustix::fs::major(rdev), rustix::fs::minor(rdev));
        Ok(match rustix::fs::FileType::from_raw_mode(st.st_mode) {
            rustix::fs::FileType::Fifo => Some(SpecialKind::Fifo),
            rustix::fs::FileType::Socket => Some(SpecialKind::Socket),
            rustix::fs::FileType::CharacterDevice => Some(SpecialKind::CharDevice { major, minor }),
            rustix::fs::FileType::BlockDevice => Some(SpecialKind::BlockDevice { major, minor }),
            _ => None,
        })
    }

    /// Make this target the special file `kind` with the permission bits `mode` (less the
    /// umask, as `mknod` makes them), as [`LocalTarget::make_symlink`] makes a link: under a
    /// fresh name, renamed into place. Device nodes take root (CAP_MKNOD).
    #[cfg(not(target_vendor = "apple"))]
    pub(crate) fn make_special(
        &self,
        kind: SpecialKind,
        mode: u32,
        times: Option<&rustix::fs::Timestamps>,
    ) -> io::Result<()> {
        use rustix::fs::FileType;
        let (file_type, dev) = match kind {
            SpecialKind::Fifo => (FileType::Fifo, 0),
            SpecialKind::Socket => (FileType::Socket, 0),
            SpecialKind::CharDevice { major, minor } => {
                (FileType::CharacterDevice, rustix::fs::makedev(major, minor))
            }
            SpecialKind::BlockDevice { major, minor } => {
                (FileType::BlockDevice, rustix::fs::makedev(major, minor))
            }
        };
        let mode = Mode::from_raw_mode((mode & 0o7777) as _);
        self.place_new(
            |dir, name| rustix::fs::mknodat(dir, name, file_type, mode, dev),
            times,
        )
    }

    /// macOS: rustix has no `mknodat` there; smbcp does not make special files.
    #[cfg(target_vendor = "apple")]
    pub(crate) fn make_special(
        &self,
        _kind: SpecialKind,
        _mode: u32,
        _times: Option<&rustix::fs::Timestamps>,
    ) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "smbcp makes no special files on this system",
        ))
    }

    /// Put a new entry at this target's name: `make` creates it under a fresh name in the
    /// target's directory (made if missing, reached without links), `times` are set on it
    /// (not following it), and it is renamed over the name. A file or link already there is
    /// replaced whole, a directory refused; on failure the fresh entry goes again.
    fn place_new(
        &self,
        make: impl Fn(&OwnedFd, &str) -> Result<(), Errno>,
        times: Option<&rustix::fs::Timestamps>,
    ) -> io::Result<()> {
        let name = self
            .name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        let parent = self.open_dir(self.parent_components(), true)?;
        let mut made = None;
        for _ in 0..=FRESH_NAME_TRIES {
            let fresh = fresh_partial_name(name);
            match make(&parent, &fresh) {
                Ok(()) => {
                    made = Some(fresh);
                    break;
                }
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(self.explain(&self.components, e)),
            }
        }
        let fresh = made.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: no free name next to it", self.path().display()),
            )
        })?;
        let placed = times
            .map_or(Ok(()), |t| {
                rustix::fs::utimensat(&parent, fresh.as_str(), t, AtFlags::SYMLINK_NOFOLLOW)
            })
            .and_then(|()| rustix::fs::renameat(&parent, fresh.as_str(), &parent, name));
        if let Err(e) = placed {
            let _ = rustix::fs::unlinkat(&parent, fresh.as_str(), AtFlags::empty());
            return Err(self.explain(&self.components, e));
        }
        Ok(())
    }

    /// The partial file to write this target's bytes into. With `resume`, an existing
    /// partial file of ours (a regular file owned by this user, reached without links) is
    /// continued; otherwise, and when the usual name is taken by something else, a new one
    /// is created exclusively: the usual name after removing our own stale partial file of
    /// an earlier run, else a fresh name.
    pub(crate) fn partial(&self, resume: bool) -> io::Result<Partial> {
        let name = self
            .name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        let parent = self.open_dir(self.parent_components(), true)?;
        let usual = partial_name(name);
        if resume {
            let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            if let Ok(fd) = rustix::fs::openat(&parent, usual.as_str(), flags, Mode::empty()) {
                let file = File::from(fd);
                if is_ours(&file)? {
                    let len = file.metadata()?.len();
                    return Ok(Partial {
                        target: self.clone(),
                        parent,
                        name: usual,
                        file: Arc::new(file),
                        existing_len: Some(len),
                    });
                }
            }
        }
        let mut candidate = usual.clone();
        for attempt in 0..=FRESH_NAME_TRIES {
            match create_exclusive(&parent, &candidate) {
                Ok(file) => {
                    return Ok(Partial {
                        target: self.clone(),
                        parent,
                        name: candidate,
                        file: Arc::new(file),
                        existing_len: None,
                    })
                }
                Err(Errno::EXIST) if attempt == 0 && stale_partial_of_ours(&parent, &usual) => {
                    rustix::fs::unlinkat(&parent, usual.as_str(), AtFlags::empty())?;
                }
                Err(Errno::EXIST) => candidate = fresh_partial_name(name),
                Err(e) => return Err(self.explain(self.parent_components(), e)),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{}: no free partial file name next to it",
                self.path().display()
            ),
        ))
    }
}

/// Create `name` in `parent` for writing, only if nothing (not even a dangling link) has
/// that name.
fn create_exclusive(parent: &OwnedFd, name: &str) -> Result<File, Errno> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(parent, name, flags, Mode::from_raw_mode(0o666)).map(File::from)
}

/// Whether `file` is a regular file owned by this user.
fn is_ours(file: &File) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt as _;
    let md = file.metadata()?;
    Ok(md.is_file() && md.uid() == rustix::process::geteuid().as_raw())
}

/// Whether `name` in `parent` is a regular file of ours (a partial file an interrupted run
/// left): safe to remove. A link or another user's file is left alone.
fn stale_partial_of_ours(parent: &OwnedFd, name: &str) -> bool {
    rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
            && st.st_uid == rustix::process::geteuid().as_raw()
    })
}

/// `.NAME.smbcp-partial`, or for a name too long for that, `.smbcp-partial-` and 16 hex
/// digits of the name's SHA-256: a long name is legal and must still be copied, and the
/// name must stay the same from run to run for `--resume` to find it.
pub(crate) fn partial_name(name: &str) -> String {
    let usual = format!(".{name}{PARTIAL_SUFFIX}");
    if usual.len() <= NAME_MAX {
        return usual;
    }
    let digest = <sha2::Sha256 as sha2::Digest>::digest(name.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PARTIAL_SUFFIX}-{hex}")
}

/// A partial name no one can have prepared in advance.
fn fresh_partial_name(name: &str) -> String {
    let base = partial_name(name);
    let fresh = format!("{base}.{:016x}", rand_token());
    if fresh.len() <= NAME_MAX {
        fresh
    } else {
        format!("{PARTIAL_SUFFIX}-{:016x}", rand_token())
    }
}

/// A partial file being written, in its target's directory.
#[derive(Debug)]
pub(crate) struct Partial {
    target: LocalTarget,
    parent: OwnedFd,
    name: String,
    /// The open file; stays valid after [`Partial::commit`] renames it into place.
    pub(crate) file: Arc<File>,
    /// With `--resume`, the length of the partial file found.
    pub(crate) existing_len: Option<u64>,
}

impl Partial {
    /// The partial file's path, as shown to the user.
    pub(crate) fn path(&self) -> PathBuf {
        let mut p = self.target.root.shown.clone();
        p.extend(self.target.parent_components());
        p.push(&self.name);
        p
    }

    /// Whether a later `--resume` run will find this partial file: it has the usual name.
    pub(crate) fn resumable(&self) -> bool {
        self.target
            .name()
            .is_some_and(|n| self.name == partial_name(n))
    }

    /// Rename the partial file over the target's name (replacing a file or a link there,
    /// never writing through one).
    pub(crate) fn commit(self) -> io::Result<Arc<File>> {
        let name = self.target.name().unwrap_or(".");
        rustix::fs::renameat(&self.parent, self.name.as_str(), &self.parent, name)
            .map_err(|e| self.target.explain(&self.target.components, e))?;
        Ok(self.file)
    }

    /// Remove the partial file.
    pub(crate) fn discard(self) -> io::Result<()> {
        rustix::fs::unlinkat(&self.parent, self.name.as_str(), AtFlags::empty())?;
        Ok(())
    }
}

/// The root and first component for a download into `dest`: the directory itself when it is
/// one (the source's name goes below it), else its parent and its own name.
pub(crate) fn split_dest(dest: &Path, dest_is_dir: bool) -> (PathBuf, Option<String>) {
    if dest_is_dir {
        return (dest.to_path_buf(), None);
    }
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest
        .file_name()
        .map(|n| String::from_utf8_lossy(OsStr::as_bytes(n)).into_owned());
    (parent, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn scratch(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("smbcp-dest-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    fn target(root: &Arc<LocalRoot>, parts: &[&str]) -> io::Result<LocalTarget> {
        LocalTarget::new(root, parts.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn names_that_leave_the_root_are_refused_before_any_call() {
        let dir = scratch("names");
        let root = LocalRoot::open(&dir).unwrap();
        for bad in [
            &["..", "x"][..],
            &["/tmp/owned"],
            &["a/b"],
            &["a", ""],
            &["."],
            &["a\0"],
        ] {
            let e = target(&root, bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        let t = target(&root, &["ok"]).unwrap();
        assert!(t.join("..").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlink_inside_the_destination_is_never_followed() {
        let dir = scratch("links");
        let outside = scratch("links-outside");
        std::os::unix::fs::symlink(&outside, dir.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), dir.join("f")).unwrap();
        let root = LocalRoot::open(&dir).unwrap();
        // A directory that is a link: nothing is created or written through it.
        let through = target(&root, &["sub", "x"]).unwrap();
        let e = through.partial(false).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(through.create_dir().is_err());
        assert!(through.open_read().is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // A file that is a link: written next to, then renamed over the link itself.
        let f = target(&root, &["f"]).unwrap();
        let p = f.partial(false).unwrap();
        (&*p.file).write_all(b"data").unwrap();
        p.commit().unwrap();
        assert!(std::fs::symlink_metadata(dir.join("f")).unwrap().is_file());
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"data");
        assert!(!outside.join("f").exists(), "nothing written outside");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn a_planted_partial_name_is_never_opened() {
        let dir = scratch("planted");
        let victim = scratch("planted-victim").join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(".f.smbcp-partial")).unwrap();
        let root = LocalRoot::open(&dir).unwrap();
        let t = target(&root, &["f"]).unwrap();
        for resume in [false, true] {
            let p = t.partial(resume).unwrap();
            assert_ne!(p.name, ".f.smbcp-partial", "a fresh name");
            assert_eq!(p.existing_len, None);
            (&*p.file).write_all(b"new").unwrap();
            p.commit().unwrap();
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"new");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(victim.parent().unwrap()).unwrap();
    }

    #[test]
    fn our_own_partial_file_is_continued_or_replaced() {
        let dir = scratch("own");
        std::fs::write(dir.join(".f.smbcp-partial"), b"12345").unwrap();
        let root = LocalRoot::open(&dir).unwrap();
        let t = target(&root, &["f"]).unwrap();
        let p = t.partial(true).unwrap();
        assert_eq!(
            (p.name.as_str(), p.existing_len),
            (".f.smbcp-partial", Some(5))
        );
        drop(p);
        let p = t.partial(false).unwrap();
        assert_eq!(
            (p.name.as_str(), p.existing_len),
            (".f.smbcp-partial", None)
        );
        assert_eq!(p.file.metadata().unwrap().len(), 0, "a new file");
        p.discard().unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_255_byte_name_gets_a_short_partial_name() {
        let long = "n".repeat(255);
        let p = partial_name(&long);
        assert!(
            p.len() <= NAME_MAX && p.starts_with(".smbcp-partial-"),
            "{p}"
        );
        assert_eq!(p, partial_name(&long), "stable for --resume");
        assert_eq!(partial_name("a.txt"), ".a.txt.smbcp-partial");
        let dir = scratch("long");
        let root = LocalRoot::open(&dir).unwrap();
        let part = target(&root, &[&long]).unwrap().partial(false).unwrap();
        part.commit().unwrap();
        assert!(dir.join(&long).is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_from_the_server_is_made_as_given_and_never_written_through() {
        let dir = scratch("made-links");
        let outside = scratch("made-links-outside");
        let root = LocalRoot::open(&dir).unwrap();
        // A hostile server names a directory outside, then a file "below" its link.
        let link = target(&root, &["d", "esc"]).unwrap();
        link.make_symlink(outside.to_str().unwrap(), None).unwrap();
        assert_eq!(
            std::fs::read_link(dir.join("d/esc")).unwrap(),
            outside.as_path()
        );
        assert_eq!(link.read_link().unwrap().as_deref(), outside.to_str());
        let below = link.join("x").unwrap();
        assert!(below.partial(false).is_err());
        assert!(below.create_dir().is_err());
        assert!(link.join("y").unwrap().make_symlink("z", None).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // Made again with another target, over a file, over a link: replaced, not followed.
        std::fs::write(outside.join("victim"), b"precious").unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), dir.join("v")).unwrap();
        let v = target(&root, &["v"]).unwrap();
        v.make_symlink("../elsewhere", None).unwrap();
        assert_eq!(v.read_link().unwrap().as_deref(), Some("../elsewhere"));
        assert_eq!(std::fs::read(outside.join("victim")).unwrap(), b"precious");
        std::fs::write(dir.join("plain"), b"x").unwrap();
        let plain = target(&root, &["plain"]).unwrap();
        assert_eq!(plain.read_link().unwrap(), None);
        plain.make_symlink("t", None).unwrap();
        assert_eq!(plain.read_link().unwrap().as_deref(), Some("t"));
        // A directory at the name is left alone, and no fresh name is left beside it.
        std::fs::create_dir(dir.join("sub")).unwrap();
        let sub = target(&root, &["sub"]).unwrap();
        assert!(sub.make_symlink("t", None).is_err());
        assert!(dir.join("sub").is_dir());
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            names.iter().all(|n| !n.contains("smbcp-partial")),
            "{names:?}"
        );
        // Times given are the link's own.
        let t = rustix::fs::Timespec {
            tv_sec: 1_000_000_000,
            tv_nsec: 0,
        };
        let times = rustix::fs::Timestamps {
            last_access: t,
            last_modification: t,
        };
        target(&root, &["timed"])
            .unwrap()
            .make_symlink("nowhere", Some(&times))
            .unwrap();
        let md = std::fs::symlink_metadata(dir.join("timed")).unwrap();
        use std::os::unix::fs::MetadataExt as _;
        assert_eq!(md.mtime(), 1_000_000_000);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn directories_are_made_below_the_root_only() {
        let dir = scratch("mkdirs");
        let root = LocalRoot::open(&dir).unwrap();
        let t = target(&root, &["a", "b", "c"]).unwrap();
        t.create_dir().unwrap();
        assert!(dir.join("a/b/c").is_dir());
        assert!(t.open_as_dir().is_ok());
        assert!(target(&root, &["a", "none"])
            .unwrap()
            .metadata()
            .unwrap()
            .is_none());
        assert_eq!(t.path(), dir.join("a/b/c"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn folding_keys() {
        let exact = NameFolding::EXACT;
        assert_ne!(exact.key("foo"), exact.key("FOO"));
        let ci = NameFolding {
            case_insensitive: true,
            normalization_insensitive: false,
        };
        assert_eq!(ci.key("foo"), ci.key("FOO"));
        assert_ne!(ci.key("\u{e9}"), ci.key("e\u{301}"));
        let mac = NameFolding {
            case_insensitive: true,
            normalization_insensitive: true,
        };
        assert_eq!(mac.key("Caf\u{e9}"), mac.key("cafe\u{301}"));
    }

    #[test]
    fn the_probe_reads_this_file_system_and_leaves_nothing() {
        let dir = scratch("probe");
        let root = LocalRoot::open(&dir).unwrap();
        let folding = root.name_folding(true);
        if cfg!(target_os = "linux") {
            // tmpfs and ext4 without casefolding tell every spelling apart.
            assert_eq!(folding, NameFolding::EXACT);
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
