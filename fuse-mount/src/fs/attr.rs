//! What `stat` and `statfs` show, and the operations that read or change it: GETATTR,
//! SETATTR, STATFS.

use std::time::{SystemTime, UNIX_EPOCH};

use smb3_client::{
    mode_from_descriptor, Error, FileTimes, Metadata, NtStatus, OpenOptions, PosixFileType,
    SecurityDescriptor,
};

use super::reparse::{self, Seen, SeenKind};
use super::{gone_if_deleted, SmbFs};
use crate::errno::{FsError, FsResult};

/// What a node is. Without the SMB3 POSIX extensions a share has only files and directories.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO.
    Fifo,
    /// A socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
}

impl Kind {
    fn of_posix(t: Option<PosixFileType>, dir: bool) -> Kind {
        match t {
            Some(PosixFileType::Directory) => Kind::Directory,
            Some(PosixFileType::Symlink) => Kind::Symlink,
            Some(PosixFileType::Fifo) => Kind::Fifo,
            Some(PosixFileType::Socket) => Kind::Socket,
            Some(PosixFileType::CharDevice) => Kind::CharDevice,
            Some(PosixFileType::BlockDevice) => Kind::BlockDevice,
            Some(PosixFileType::Regular) => Kind::File,
            // A type the extensions do not define: what the DOS attributes say.
            None if dir => Kind::Directory,
            None => Kind::File,
        }
    }
}

/// What `stat` shows for a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Node id, also `st_ino`.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Last access.
    pub atime: SystemTime,
    /// Last modification.
    pub mtime: SystemTime,
    /// Last status change.
    pub ctime: SystemTime,
    /// Creation.
    pub crtime: SystemTime,
    /// File or directory.
    pub kind: Kind,
    /// Permission bits.
    pub perm: u16,
    /// Link count.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Preferred I/O size.
    pub blksize: u32,
    /// A device node's number (`st_rdev`, in FUSE's 32-bit encoding); 0 for the rest.
    pub rdev: u32,
}

/// Changes asked for by `setattr`. `None` leaves a value as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    /// New permission bits: the server's mode on a POSIX share; elsewhere only the write
    /// bits mean anything (none = the read-only attribute).
    pub mode: Option<u32>,
    /// New owner: the server's on a POSIX share; elsewhere accepted and ignored, as
    /// mount.cifs without POSIX extensions.
    pub uid: Option<u32>,
    /// New group, as `uid`.
    pub gid: Option<u32>,
    /// New size.
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SystemTime>,
    /// New modification time.
    pub mtime: Option<SystemTime>,
}

/// The mode `sd` keeps for the file or directory of metadata `m` (`modefromsid`).
pub(super) fn dacl_mode(sd: Option<&SecurityDescriptor>, m: &Metadata) -> Option<u32> {
    sd.and_then(|sd| mode_from_descriptor(sd, m.is_dir()))
}

/// Show `mode`, the mode a file's DACL keeps (`modefromsid`), as `attr`'s permission bits,
/// setuid, setgid and sticky included; the read-only attribute still hides a file's write
/// bits, as without the option. Before [`seen_as`], which shows a link as rwxrwxrwx.
pub(super) fn with_dacl_mode(attr: &mut Attr, m: &Metadata, mode: Option<u32>) {
    if let Some(mode) = mode {
        let mut perm = mode & 0o7777;
        if !m.is_dir() && m.is_readonly() {
            perm &= !0o222;
        }
        attr.perm = perm as u16;
    }
}

/// Show `attr` as what a reparse point (or a Minshall+French file) turned out to be.
pub(super) fn seen_as(attr: &mut Attr, seen: Seen) {
    attr.kind = match seen.kind {
        SeenKind::Symlink => Kind::Symlink,
        SeenKind::Fifo => Kind::Fifo,
        SeenKind::Socket => Kind::Socket,
        SeenKind::CharDevice => Kind::CharDevice,
        SeenKind::BlockDevice => Kind::BlockDevice,
    };
    attr.size = seen.size;
    attr.rdev = seen.rdev;
    if attr.kind == Kind::Symlink {
        // As on a POSIX share: a link's mode means nothing, Linux shows rwxrwxrwx.
        attr.perm = 0o777;
    }
}

/// `statfs` numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Total blocks of `bsize`.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Blocks available to the user.
    pub bavail: u64,
    /// Block size.
    pub bsize: u32,
    /// Longest name.
    pub namelen: u32,
}

impl SmbFs {
    /// What `stat` shows for metadata `m` of node `ino`: the server's mode, type, owner
    /// and group on a POSIX share (an owner or group with no Unix id shows as the mount's
    /// `uid=` / `gid=`), the mount's `file_mode` / `dir_mode`, `uid` and `gid` elsewhere.
    ///
    /// A file unlinked while open here (waiting under a hidden name, see `silly`) has one
    /// link fewer than the server counts: its hidden name is none of POSIX's (`fstat` of an
    /// unlinked file says 0).
    pub fn attr(&self, ino: u64, m: &Metadata) -> Attr {
        let mut attr = self.attr_without_posix(ino, m);
        if ino != 0 && self.is_silly(ino) {
            attr.nlink = attr.nlink.saturating_sub(1);
        }
        if let Some(p) = &m.posix {
            attr.kind = Kind::of_posix(p.file_type, m.is_dir());
            // Linux shows every symlink as rwxrwxrwx (its mode means nothing); a copy tool
            // comparing modes would otherwise see a change it cannot make on every run.
            attr.perm = if attr.kind == Kind::Symlink {
                0o777
            } else {
                p.permissions as u16
            };
            attr.nlink = p.links.max(1);
            attr.uid = p.uid().unwrap_or(self.cfg.uid);
            attr.gid = p.gid().unwrap_or(self.cfg.gid);
        }
        attr
    }

    fn attr_without_posix(&self, ino: u64, m: &Metadata) -> Attr {
        let dir = m.is_dir();
        let mut perm = if dir {
            self.cfg.dir_mode
        } else {
            self.cfg.file_mode
        };
        // mount.cifs: the read-only attribute hides the write bits of a file.
        if !dir && m.is_readonly() {
            perm &= !0o222;
        }
        let mtime = m.modified.unwrap_or(UNIX_EPOCH);
        Attr {
            ino,
            size: m.len,
            blocks: m.allocation_size.div_ceil(512),
            atime: m.accessed.unwrap_or(mtime),
            mtime,
            ctime: m.changed.unwrap_or(mtime),
            crtime: m.created.unwrap_or(mtime),
            kind: if dir { Kind::Directory } else { Kind::File },
            perm: perm as u16,
            nlink: if dir { 2 } else { m.links.max(1) },
            uid: self.cfg.uid,
            gid: self.cfg.gid,
            blksize: 1 << 20,
            rdev: 0,
        }
    }

    /// Whether modes are kept in the files' DACLs (`modefromsid`, on a share without the
    /// POSIX extensions).
    pub(super) fn modes_in_dacls(&self) -> bool {
        self.cfg.modefromsid && !self.share.is_posix()
    }

    /// The descriptor `path`'s mode may be in, with `modefromsid`: asked beside the metadata
    /// (its own compound, sent at the same time, so the caller waits for one round trip, and
    /// for the server's work on both); `None` when the option is off or the server gives none
    /// (the mount's `file_mode` / `dir_mode` then).
    pub(super) async fn mode_descriptor(&self, path: &str) -> Option<SecurityDescriptor> {
        if !self.modes_in_dacls() {
            return None;
        }
        match self.retry(|| self.share.mode_descriptor(path)).await {
            Ok(sd) => sd,
            Err(e) => {
                tracing::debug!(path, error = %e, "reading the mode from the DACL");
                None
            }
        }
    }

    /// The metadata of `path`, the name the server keeps it under (see
    /// `Share::metadata_and_name`) and, with `modefromsid`, the descriptor its mode may be
    /// in, asked in the same compound and open (`Share::metadata_name_and_descriptor`).
    pub(super) async fn metadata_and_descriptor(
        &self,
        path: &str,
    ) -> Result<(Metadata, Option<String>, Option<SecurityDescriptor>), Error> {
        if self.modes_in_dacls() {
            self.retry(|| self.share.metadata_name_and_descriptor(path))
                .await
        } else {
            let (m, name) = self.retry(|| self.share.metadata_and_name(path)).await?;
            Ok((m, name, None))
        }
    }

    /// What `stat` shows for metadata `m` of node `ino`, with the mode kept in `sd` (see
    /// [`with_dacl_mode`]).
    fn attr_at(&self, ino: u64, m: &Metadata, sd: Option<&SecurityDescriptor>) -> Attr {
        let mut attr = self.attr(ino, m);
        with_dacl_mode(&mut attr, m, dacl_mode(sd, m));
        attr
    }

    /// A symlink's size is its target's length, as `lstat` gives it locally (git compares it
    /// with what it checked out; readers size their buffer by it). The server keeps the link
    /// as an empty file, so it takes a READLINK: one more round trip, for symlinks only.
    /// With `mfsymlinks`, a regular file of a Minshall+French link's size is read to see
    /// whether it is one (see `mfsymlinks`). Without the POSIX extensions a reparse point is
    /// read to see what it is (see `reparse`).
    pub(super) async fn with_link_size(
        &self,
        path: &str,
        m: &Metadata,
        mut attr: Attr,
    ) -> FsResult<Attr> {
        if reparse::is_reparse_point(m) {
            if let Some(seen) = self.retry(|| reparse::read(&self.share, path)).await? {
                seen_as(&mut attr, seen);
            }
            return Ok(attr);
        }
        if attr.kind == Kind::File && attr.size == super::mfsymlinks::FILE_SIZE && self.mfsymlinks()
        {
            if let Some(target) = self
                .retry(|| super::mfsymlinks::read(&self.share, path))
                .await?
            {
                attr.kind = Kind::Symlink;
                attr.perm = 0o777;
                attr.size = target.len() as u64;
            }
            return Ok(attr);
        }
        if attr.kind == Kind::Symlink {
            let target = self.retry(|| self.share.read_link(path)).await?;
            attr.size = reparse::shown_target(&target).len() as u64;
        }
        // A POSIX share gives a device's type but not its number, which is in its reparse
        // point: one more round trip, for device nodes only.
        if matches!(attr.kind, Kind::CharDevice | Kind::BlockDevice) {
            match self.retry(|| reparse::read(&self.share, path)).await {
                Ok(Some(seen)) => attr.rdev = seen.rdev,
                Ok(None) => {}
                Err(e) => tracing::debug!(path, error = %e, "reading a device's number"),
            }
        }
        Ok(attr)
    }

    /// GETATTR, through the open handle `fh` when there is one (so an unlinked open file
    /// still answers).
    pub async fn getattr(&self, ino: u64, fh: Option<u64>) -> FsResult<Attr> {
        self.drain_ino(ino).await;
        // A file unlinked while open here has no name of its own left to read a mode by.
        let named = if self.is_silly(ino) {
            None
        } else {
            self.path_of(ino).ok()
        };
        let dacl_of_named = || async {
            match &named {
                Some(path) => self.mode_descriptor(path).await,
                None => None,
            }
        };
        if let Some(h) = fh.and_then(|fh| self.handle(fh).ok()) {
            let (m, sd) = tokio::join!(self.retry(|| h.file.metadata()), dacl_of_named());
            return Ok(self.attr_at(ino, &m?, sd.as_ref()));
        }
        // Any handle of the node will do: `fstat` comes without one (the kernel asks by
        // node), and a file unlinked while open has no name left to ask by. A handle closing
        // meanwhile leaves the path to ask.
        if let Some(h) = self.any_handle_of(ino) {
            if let (Ok(m), sd) = tokio::join!(h.file.metadata(), dacl_of_named()) {
                return Ok(self.attr_at(ino, &m, sd.as_ref()));
            }
        }
        let path = self.path_of(ino)?;
        let (m, _, sd) = self
            .metadata_and_descriptor(&path)
            .await
            .map_err(gone_if_deleted)?;
        let attr = self.attr_at(ino, &m, sd.as_ref());
        self.with_link_size(&path, &m, attr).await
    }

    /// SETATTR: size, times, and mode, owner and group on a POSIX share; elsewhere the mode's
    /// write bits set the read-only attribute (and with `modefromsid` the whole mode goes
    /// into the DACL, see `smb3_client::Share::set_mode_in_dacl`), and owner and group are
    /// accepted and ignored (mount.cifs without POSIX extensions does the same).
    pub async fn setattr(&self, ino: u64, fh: Option<u64>, set: SetAttr) -> FsResult<Attr> {
        let posix = self.share.is_posix();
        let owner_change = posix && (set.uid.is_some() || set.gid.is_some());
        let changes = set.size.is_some()
            || set.atime.is_some()
            || set.mtime.is_some()
            || set.mode.is_some()
            || owner_change;
        if changes {
            self.writable()?;
        }
        self.drain_ino(ino).await;
        let path = self.path_of(ino);
        let handle = fh
            .and_then(|fh| self.handle(fh).ok())
            .filter(|h| h.writable);
        if let Some(size) = set.size {
            self.drop_prefetched(ino);
            match &handle {
                Some(h) => self.retry(|| h.file.set_len(size)).await?,
                None => {
                    let path = path.as_ref().map_err(|e| FsError::new(e.errno))?;
                    let f = self
                        .share
                        .open(path, &OpenOptions::new().write(true))
                        .await?;
                    let r = f.set_len(size).await;
                    let closed = f.close().await;
                    r?;
                    closed?;
                }
            }
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let times = FileTimes {
                accessed: set.atime,
                modified: set.mtime,
                ..FileTimes::default()
            };
            // Recorded before they are sent: a close of a handle on this file that is
            // under way then either sees them (and sets them again after it) or ended
            // before they reach the server.
            self.times_set(ino, &times);
            match &handle {
                Some(h) => self.retry(|| h.file.set_times(&times)).await?,
                None => {
                    let path = path.as_ref().map_err(|e| FsError::new(e.errno))?;
                    self.retry(|| self.share.set_times(path, &times)).await?
                }
            }
        }
        if owner_change {
            let path = path.as_ref().map_err(|e| FsError::new(e.errno))?;
            self.share
                .set_owner(path, set.uid, set.gid)
                .await
                .map_err(owner_refused)?;
        }
        if let Some(mode) = set.mode {
            let path = path.as_ref().map_err(|e| FsError::new(e.errno))?;
            if posix {
                self.retry(|| self.share.set_mode(path, mode & 0o7777))
                    .await?;
            } else {
                let m = self.share.metadata(path).await?;
                if self.modes_in_dacls() {
                    self.share
                        .set_mode_in_dacl(path, mode & 0o7777, m.is_dir())
                        .await
                        .map_err(owner_refused)?;
                }
                if !m.is_dir() {
                    self.share.set_readonly(path, mode & 0o222 == 0).await?;
                }
            }
        }
        self.getattr(ino, fh).await
    }

    /// STATFS.
    pub async fn statfs(&self) -> FsResult<StatFs> {
        let info = self.retry(|| self.share.fs_info()).await?;
        let bsize = info.block_size.clamp(512, 1 << 20);
        Ok(StatFs {
            blocks: info.total_bytes / bsize,
            bfree: info.free_bytes / bsize,
            bavail: info.available_bytes / bsize,
            bsize: bsize as u32,
            namelen: 255,
        })
    }
}

/// A chown the server refuses is EPERM, as a local file system answers a user who may not
/// give a file away (Samba says INVALID_OWNER or ACCESS_DENIED); so is a chmod of another
/// user's file (`modefromsid`: the server refuses WRITE_DAC).
fn owner_refused(e: Error) -> FsError {
    match e.status() {
        Some(NtStatus::INVALID_OWNER | NtStatus::ACCESS_DENIED | NtStatus::PRIVILEGE_NOT_HELD) => {
            FsError::new(libc::EPERM)
        }
        _ => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_shows_rwx_for_all() {
        let mut attr = Attr {
            ino: 9,
            size: 0,
            blocks: 0,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind: Kind::File,
            perm: 0o644,
            nlink: 1,
            uid: 1,
            gid: 1,
            blksize: 4096,
            rdev: 0,
        };
        let fifo = Seen {
            kind: SeenKind::Fifo,
            size: 0,
            rdev: 0,
        };
        seen_as(&mut attr, fifo);
        assert_eq!((attr.kind, attr.perm), (Kind::Fifo, 0o644));
        let link = Seen {
            kind: SeenKind::Symlink,
            size: 7,
            rdev: 0,
        };
        seen_as(&mut attr, link);
        assert_eq!((attr.kind, attr.perm, attr.size), (Kind::Symlink, 0o777, 7));
    }
}
