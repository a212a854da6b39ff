//! The thin FUSE layer: each kernel request becomes a tokio task running the matching
//! [`SmbFs`] operation, which sends the reply itself (fuser's replies are `Send`). Nothing
//! here decides anything about files; it converts types and errors.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLock, ReplyLseek, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use tokio::runtime::Handle;

use crate::fs::{Attr, FsError, Kind, LockType, OpenMode, SetAttr, SmbFs};

/// Kernel-facing settings.
#[derive(Clone, Copy, Debug)]
pub struct KernelSettings {
    /// Largest WRITE the kernel sends.
    pub max_write: u32,
    /// Read-ahead the kernel may do.
    pub max_readahead: u32,
    /// Bypass the page cache (cache=none).
    pub direct_io: bool,
    /// Send fcntl and flock locks to the server as SMB2 LOCKs (off with `nobrl`: the kernel
    /// then keeps locks on this machine only).
    pub server_locks: bool,
}

/// `fuser::Filesystem` over an [`SmbFs`].
#[derive(Debug)]
pub struct FuseAdapter {
    fs: Arc<SmbFs>,
    rt: Handle,
    ttl: Duration,
    kernel: KernelSettings,
}

impl FuseAdapter {
    /// Serve `fs`, running requests on `rt`.
    pub fn new(fs: Arc<SmbFs>, rt: Handle, kernel: KernelSettings) -> Self {
        let ttl = fs.config().ttl;
        FuseAdapter {
            fs,
            rt,
            ttl,
            kernel,
        }
    }

    /// Run `f` on the runtime with the file system.
    fn spawn<F, Fut>(&self, f: F)
    where
        F: FnOnce(Arc<SmbFs>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.rt.spawn(f(self.fs.clone()));
    }

    fn open_flags(&self) -> FopenFlags {
        if self.kernel.direct_io {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        }
    }
}

/// Asynchronous FUSE requests the kernel may keep in flight for a read-ahead window of
/// `readahead` bytes: the doubled windows (`POSIX_FADV_SEQUENTIAL`) of four sequential readers
/// in 1 MiB READs, plus a few for other work; never below the kernel's default (12), and at
/// most 260, so a large `max_readahead=` cannot put more than 256 MiB of READs in flight in
/// the daemon.
fn background_requests(readahead: u32) -> u16 {
    let window = readahead.div_ceil(crate::options::MAX_FUSE_IO);
    u16::try_from(4 * 2 * window + 4)
        .unwrap_or(u16::MAX)
        .clamp(12, 260)
}

fn errno(e: &FsError) -> Errno {
    if let Some(err) = &e.error {
        tracing::debug!(error = %err, errno = e.errno, "request failed");
    }
    Errno::from_i32(e.errno)
}

/// A name from the kernel as UTF-8 (SMB names are Unicode; other bytes cannot be stored).
fn utf8(name: &OsStr) -> Result<String, Errno> {
    name.to_str().map(str::to_string).ok_or(Errno::EINVAL)
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.crtime,
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: 0,
    }
}

fn kind(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Directory => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDevice => FileType::CharDevice,
        Kind::BlockDevice => FileType::BlockDevice,
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

const GEN: Generation = Generation(0);

/// fcntl's lock types as the `i32` FUSE carries them: libc declares them `c_int` on Linux and
/// `c_short` on macOS and the BSDs.
#[cfg(target_os = "linux")]
mod lock_kind {
    pub(super) const READ: i32 = libc::F_RDLCK;
    pub(super) const WRITE: i32 = libc::F_WRLCK;
    pub(super) const UNLOCK: i32 = libc::F_UNLCK;
}

/// fcntl's lock types as the `i32` FUSE carries them (`c_short` in libc here).
#[cfg(not(target_os = "linux"))]
mod lock_kind {
    pub(super) const READ: i32 = libc::F_RDLCK as i32;
    pub(super) const WRITE: i32 = libc::F_WRLCK as i32;
    pub(super) const UNLOCK: i32 = libc::F_UNLCK as i32;
}

fn lock_type(typ: i32) -> Option<LockType> {
    match typ {
        lock_kind::READ => Some(LockType::Read),
        lock_kind::WRITE => Some(LockType::Write),
        lock_kind::UNLOCK => Some(LockType::Unlock),
        _ => None,
    }
}

/// Whether a rename with `flags` must not replace an existing target (`Some(noreplace)`), or
/// `None` for flags this file system cannot honour (exchange, whiteout). fuser names the
/// renameat2 flags on Linux only; elsewhere any flag is refused.
#[cfg(target_os = "linux")]
fn rename_noreplace(flags: RenameFlags) -> Option<bool> {
    if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
        return None;
    }
    Some(flags.contains(RenameFlags::RENAME_NOREPLACE))
}

/// See the Linux version: fuser defines no rename flags here, so any flag is refused.
#[cfg(not(target_os = "linux"))]
fn rename_noreplace(flags: RenameFlags) -> Option<bool> {
    flags.is_empty().then_some(false)
}

macro_rules! name_or_reply {
    ($name:expr, $reply:expr) => {
        match utf8($name) {
            Ok(n) => n,
            Err(e) => {
                $reply.error(e);
                return;
            }
        }
    };
}

impl Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if let Err(max) = config.set_max_write(self.kernel.max_write) {
            tracing::info!(max, "kernel caps max_write");
        }
        // The kernel's offer caps this (see `mount::set_readahead` for the real window).
        if let Err(max) = config.set_max_readahead(self.kernel.max_readahead) {
            let _ = config.set_max_readahead(max);
        }
        // The kernel keeps at most `max_background` asynchronous requests in flight (12 by
        // default, and read-ahead is among them): room for two readers' whole windows.
        let background = background_requests(self.kernel.max_readahead);
        if let Err(min) = config.set_max_background(background) {
            let _ = config.set_max_background(min);
        }
        // Past the congestion threshold (3/4 of the above by default) the kernel drops the
        // rest of a read-ahead it has already put pages in the page cache for, takes them out
        // again, and allocates them anew when the reader gets there (measured with four fio
        // readers: 3 % of the CPU in taking them out alone). At the limit itself requests
        // wait in the kernel's queue instead.
        if let Err(min) = config.set_congestion_threshold(background) {
            let _ = config.set_congestion_threshold(min);
        }
        // READDIRPLUS: `ls -l` gets every entry's attributes with the names, in one listing.
        let mut caps = vec![
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
        ];
        if self.kernel.server_locks {
            caps.extend([InitFlags::FUSE_POSIX_LOCKS, InitFlags::FUSE_FLOCK_LOCKS]);
        }
        for cap in caps {
            if config.add_capabilities(cap).is_err() {
                tracing::info!(?cap, "kernel lacks a FUSE capability");
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name_or_reply!(name, reply);
        let ttl = self.ttl;
        self.spawn(move |fs| async move {
            match fs.lookup(parent.0, &name).await {
                Ok(a) => reply.entry(&ttl, &file_attr(&a), GEN),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.fs.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let ttl = self.ttl;
        self.spawn(move |fs| async move {
            match fs.getattr(ino.0, fh.map(|f| f.0)).await {
                Ok(a) => reply.attr(&ttl, &file_attr(&a)),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
        };
        let ttl = self.ttl;
        self.spawn(move |fs| async move {
            match fs.setattr(ino.0, fh.map(|f| f.0), set).await {
                Ok(a) => reply.attr(&ttl, &file_attr(&a)),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        // The kernel applied the umask to `mode` already (no FUSE_DONT_MASK).
        let name = name_or_reply!(name, reply);
        let ttl = self.ttl;
        self.spawn(move |fs| async move {
            match fs.mknod(parent.0, &name, mode, rdev).await {
                Ok(a) => reply.entry(&ttl, &file_attr(&a), GEN),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let name = name_or_reply!(link_name, reply);
        let target = name_or_reply!(target.as_os_str(), reply);
        let ttl = self.ttl;
        self.spawn(move |fs| async move {
            match fs.symlink(parent.0, &name, &target).await {
                Ok(a) => reply.entry(&ttl, &file_attr(&a), GEN),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.spawn(move |fs| async move {
            match fs.readlink(ino.0).await {
                Ok(target) => reply.data(target.as_bytes()),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name_or_reply!(name, reply);
        let ttl = self.ttl;
        self.spawn(move |fs| async move {
            match fs.mkdir(parent.0, &name, mode & 0o7777).await {
                Ok(a) => reply.entry(&ttl, &file_attr(&a), GEN),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name_or_reply!(name, reply);
        self.spawn(move |fs| async move {
            match fs.unlink(parent.0, &name).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name_or_reply!(name, reply);
        self.spawn(move |fs| async move {
            match fs.rmdir(parent.0, &name).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let name = name_or_reply!(name, reply);
        let newname = name_or_reply!(newname, reply);
        let Some(noreplace) = rename_noreplace(flags) else {
            reply.error(Errno::EINVAL);
            return;
        };
        self.spawn(move |fs| async move {
            match fs
                .rename(parent.0, &name, newparent.0, &newname, noreplace)
                .await
            {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let newname = name_or_reply!(newname, reply);
        let ttl = self.ttl;
        self.spawn(move |fs| async move {
            match fs.link(ino.0, newparent.0, &newname).await {
                Ok(a) => reply.entry(&ttl, &file_attr(&a), GEN),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mode = OpenMode::from_flags(flags.0);
        let fopen = self.open_flags();
        self.spawn(move |fs| async move {
            match fs.open(ino.0, mode).await {
                Ok(o) if o.keep_cache => {
                    reply.opened(FileHandle(o.fh), fopen | FopenFlags::FOPEN_KEEP_CACHE)
                }
                Ok(o) => reply.opened(FileHandle(o.fh), fopen),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name_or_reply!(name, reply);
        let permissions = mode & 0o7777;
        let mode = OpenMode::from_flags(flags);
        let (ttl, fopen) = (self.ttl, self.open_flags());
        self.spawn(move |fs| async move {
            match fs.create(parent.0, &name, mode, permissions).await {
                Ok((a, fh)) => reply.created(&ttl, &file_attr(&a), GEN, FileHandle(fh), fopen),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.spawn(move |fs| async move {
            match fs.read(fh.0, offset, size).await {
                Ok(data) => reply.data(&data),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The request buffer is reused for the next request: the data is copied once here.
        let data = Bytes::copy_from_slice(data);
        self.spawn(move |fs| async move {
            match fs.write(fh.0, offset, data).await {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let owner = self.kernel.server_locks.then_some(lock_owner.0);
        self.spawn(move |fs| async move {
            match fs.flush(fh.0, owner).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(move |fs| async move {
            match fs.release(fh.0).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(move |fs| async move {
            match fs.fsync(fh.0).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.spawn(move |fs| async move {
            match fs.opendir(ino.0).await {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        self.spawn(move |fs| async move {
            // Offsets: 1 after ".", 2 after "..", 3 + i after entry i.
            let mut next = offset;
            while next < 2 {
                let name = if next == 0 { "." } else { ".." };
                if reply.add(ino, next + 1, FileType::Directory, name) {
                    return reply.ok();
                }
                next += 1;
            }
            let added = fs
                .read_dir_at(fh.0, next - 2, |i, e| {
                    let child = fs.peek_ino(ino.0, &e.name, e.file_id);
                    reply.add(INodeNo(child), i + 3, kind(e.kind), &e.name)
                })
                .await;
            match added {
                Ok(_) => reply.ok(),
                // "." and ".." went in: give them rather than the error (it comes again).
                Err(_) if offset < 2 => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let ttl = self.ttl;
        self.spawn(move |fs| async move {
            let mut next = offset;
            while next < 2 {
                // The kernel takes no lookup for "." and ".."; their attributes are not used.
                let name = if next == 0 { "." } else { ".." };
                let attr = FileAttr {
                    ino,
                    kind: FileType::Directory,
                    ..file_attr(&listing_dir_attr())
                };
                if reply.add(ino, next + 1, name, &ttl, &attr, GEN) {
                    return reply.ok();
                }
                next += 1;
            }
            let added = fs
                .read_dir_at(fh.0, next - 2, |i, e| {
                    // Each entry given to the kernel is one lookup it will FORGET later.
                    let child = fs.remember(ino.0, &e.name, e.file_id);
                    let attr = file_attr(&Attr {
                        ino: child,
                        ..e.attr
                    });
                    // A listing does not say how long a symlink's target is (its size): the
                    // kernel is to ask with GETATTR rather than keep a size of 0.
                    let ttl = if e.attr.kind == Kind::Symlink {
                        Duration::ZERO
                    } else {
                        ttl
                    };
                    let full = reply.add(INodeNo(child), i + 3, &e.name, &ttl, &attr, GEN);
                    if full {
                        fs.forget(child, 1);
                    }
                    full
                })
                .await;
            match added {
                Ok(_) => reply.ok(),
                Err(_) if offset < 2 => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        // Replied once the listing is closed: a rename or rmdir that follows finds no handle
        // of ours open in the directory.
        self.spawn(move |fs| async move {
            fs.releasedir(fh.0).await;
            reply.ok();
        });
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn setlk(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let Some(typ) = lock_type(typ) else {
            return reply.error(Errno::EINVAL);
        };
        self.spawn(move |fs| async move {
            match fs.setlk(fh.0, lock_owner.0, start, end, typ, sleep).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn getlk(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: ReplyLock,
    ) {
        let Some(t) = lock_type(typ) else {
            return reply.error(Errno::EINVAL);
        };
        self.spawn(move |fs| async move {
            match fs.getlk(fh.0, lock_owner.0, start, end, t).await {
                Ok(None) => reply.locked(start, end, lock_kind::UNLOCK, 0),
                Ok(Some((s, e, _))) => reply.locked(s, e, lock_kind::WRITE, 0),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.spawn(move |fs| async move {
            match fs.fallocate(fh.0, offset, length, mode).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.spawn(move |fs| async move {
            match fs.seek_hole_or_data(fh.0, offset, whence).await {
                Ok(at) => reply.offset(at as i64),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if !self.fs.config().user_xattr {
            return reply.error(Errno::ENOSYS);
        }
        // Answered here, with no task: the kernel asks for `security.capability` before
        // every write.
        if crate::fs::ea_name(name).is_none() {
            return reply.error(Errno::from_i32(NO_XATTR));
        }
        let name = name.to_os_string();
        self.spawn(move |fs| async move {
            match fs.getxattr(ino.0, &name).await {
                Ok(value) => xattr_reply(reply, size, &value),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if !self.fs.config().user_xattr {
            return reply.error(Errno::ENOSYS);
        }
        self.spawn(move |fs| async move {
            match fs.listxattr(ino.0).await {
                Ok(names) => xattr_reply(reply, size, &names),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if !self.fs.config().user_xattr {
            return reply.error(Errno::ENOSYS);
        }
        let (name, value) = (name.to_os_string(), value.to_vec());
        self.spawn(move |fs| async move {
            match fs.setxattr(ino.0, &name, &value, flags).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if !self.fs.config().user_xattr {
            return reply.error(Errno::ENOSYS);
        }
        let name = name.to_os_string();
        self.spawn(move |fs| async move {
            match fs.removexattr(ino.0, &name).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.spawn(move |fs| async move {
            match fs.statfs().await {
                Ok(s) => reply.statfs(
                    s.blocks, s.bfree, s.bavail, 0, 0, s.bsize, s.namelen, s.bsize,
                ),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }
}

/// "No such attribute": ENODATA, which macOS calls ENOATTR.
#[cfg(target_os = "linux")]
const NO_XATTR: i32 = libc::ENODATA;
#[cfg(not(target_os = "linux"))]
const NO_XATTR: i32 = libc::ENOATTR;

/// Answer a GETXATTR or LISTXATTR: with `size` 0 the length the caller needs, else the bytes
/// if they fit in `size` (ERANGE if not).
fn xattr_reply(reply: ReplyXattr, size: u32, bytes: &[u8]) {
    match u32::try_from(bytes.len()) {
        Ok(len) if size == 0 => reply.size(len),
        Ok(len) if len <= size => reply.data(bytes),
        _ => reply.error(Errno::ERANGE),
    }
}

/// Placeholder attributes for `.` and `..` in READDIRPLUS (the kernel skips them).
fn listing_dir_attr() -> Attr {
    let t = SystemTime::UNIX_EPOCH;
    Attr {
        ino: 0,
        size: 0,
        blocks: 0,
        atime: t,
        mtime: t,
        ctime: t,
        crtime: t,
        kind: Kind::Directory,
        perm: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        blksize: 4096,
        rdev: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::background_requests;

    #[test]
    fn background_requests_cover_four_doubled_read_ahead_windows() {
        assert_eq!(background_requests(8 << 20), 68);
        assert_eq!(background_requests(16 << 20), 132);
        assert_eq!(
            background_requests(128 << 10),
            12,
            "never below the kernel's default"
        );
        assert_eq!(background_requests(64 << 20), 260, "bounded");
        assert_eq!(background_requests(u32::MAX), 260);
    }
}
