//! What `stat` and `statfs` show, and the operations that read or change it: GETATTR,
//! SETATTR, STATFS.

use std::time::{SystemTime, UNIX_EPOCH};

use smb3_client::{FileTimes, Metadata, OpenOptions};

use super::{gone_if_deleted, SmbFs};
use crate::errno::{FsError, FsResult};

/// File or directory (SMB has no other kinds without POSIX extensions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
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
}

/// Changes asked for by `setattr`. `None` leaves a value as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    /// New permission bits (only the write bits mean anything: none = read-only attribute).
    pub mode: Option<u32>,
    /// New owner (accepted and ignored, as mount.cifs without POSIX extensions).
    pub uid: Option<u32>,
    /// New group (accepted and ignored).
    pub gid: Option<u32>,
    /// New size.
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SystemTime>,
    /// New modification time.
    pub mtime: Option<SystemTime>,
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
    /// What `stat` shows for metadata `m` of node `ino`.
    pub fn attr(&self, ino: u64, m: &Metadata) -> Attr {
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
        }
    }

    /// GETATTR, through the open handle `fh` when there is one (so an unlinked open file
    /// still answers).
    pub async fn getattr(&self, ino: u64, fh: Option<u64>) -> FsResult<Attr> {
        self.drain_ino(ino).await;
        if let Some(h) = fh.and_then(|fh| self.handle(fh).ok()) {
            let m = self.retry(|| h.file.metadata()).await?;
            return Ok(self.attr(ino, &m));
        }
        let path = self.path_of(ino)?;
        let m = self
            .retry(|| self.share.metadata(&path))
            .await
            .map_err(gone_if_deleted)?;
        Ok(self.attr(ino, &m))
    }

    /// SETATTR: size, times and the read-only attribute; owner and group are accepted and
    /// ignored (mount.cifs without POSIX extensions does the same).
    pub async fn setattr(&self, ino: u64, fh: Option<u64>, set: SetAttr) -> FsResult<Attr> {
        let changes =
            set.size.is_some() || set.atime.is_some() || set.mtime.is_some() || set.mode.is_some();
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
        if let Some(mode) = set.mode {
            let path = path.as_ref().map_err(|e| FsError::new(e.errno))?;
            let m = self.share.metadata(path).await?;
            if !m.is_dir() {
                self.share.set_readonly(path, mode & 0o222 == 0).await?;
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
