//! How the file system presents itself: owner, modes, caching times and the sizes of what
//! the daemon keeps in flight, as the mount options set them.

use std::time::Duration;

use crate::deferred_close::DEFERRED_CLOSE;

/// How the file system presents itself.
#[derive(Clone, Debug)]
pub struct FsConfig {
    /// Owner of every file (mount.cifs `uid=`).
    pub uid: u32,
    /// Group of every file (`gid=`).
    pub gid: u32,
    /// Permission bits of files (`file_mode=`); write bits are hidden on read-only files.
    pub file_mode: u32,
    /// Permission bits of directories (`dir_mode=`).
    pub dir_mode: u32,
    /// How long the kernel may cache attributes and names (`actimeo=`).
    pub ttl: Duration,
    /// Refuse every change with EROFS (`ro`).
    pub read_only: bool,
    /// Retry operations the server did not answer because it was unreachable (`hard`).
    pub hard: bool,
    /// Bytes of writes kept in flight behind the applications, for the whole mount
    /// (`write_behind=`); 0 sends each write before answering it.
    pub write_behind: u64,
    /// Directories watched for changes made by other clients at most (`watch_dirs=`; 0:
    /// none), see [`crate::dir_watch`].
    pub watch_dirs: usize,
    /// How long a read-only handle is kept open after its last close (`closetimeo=`; 0:
    /// closed at once), see [`crate::deferred_close`].
    pub close_delay: Duration,
    /// The largest read-ahead window of one sequential reader in the daemon (`prefetch=`;
    /// 0: none), see [`crate::prefetch`]. The mount as a whole keeps at most four such
    /// windows fetched.
    pub prefetch: u64,
    /// Bytes per READ the library sends (its I/O size): the size of a prefetched part.
    pub io_size: u32,
    /// The kernel's read-ahead window (`max_readahead=`; 0 with `cache=none`).
    pub kernel_readahead: u64,
    /// Map the characters Windows forbids in names to Unicode's private-use area and back
    /// (`mapposix`, the default; `nomapposix` off), on shares without the POSIX extensions;
    /// see [`crate::sfm`].
    pub mapposix: bool,
    /// Make and read symbolic links as Minshall+French files (`mfsymlinks`), on shares
    /// without the POSIX extensions.
    pub mfsymlinks: bool,
    /// Keep modes in the files' DACLs and show them from there (`modefromsid`), on shares
    /// without the POSIX extensions; see `fs::attr`.
    pub modefromsid: bool,
    /// Keep `user.*` extended attributes as SMB extended attributes (`user_xattr`); off (the
    /// default), the mount answers ENOSYS and the kernel stops asking, before writes too.
    pub user_xattr: bool,
    /// How `symlink(2)` and `mknod(2)` are kept on shares without the POSIX extensions
    /// (`reparse=`); see `fs::reparse`.
    pub reparse: ReparseForm,
}

/// How symbolic links and special files are made on a share without the POSIX extensions
/// (`reparse=`, after mount.cifs's option of that name). Reading takes every form whatever
/// this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReparseForm {
    /// Links as Windows makes them (IO_REPARSE_TAG_SYMLINK), FIFOs, sockets and devices as
    /// NFS reparse points (`reparse=native`, the default).
    #[default]
    Native,
    /// Links too as NFS reparse points (NFS_SPECFILE_LNK; `reparse=nfs`).
    Nfs,
    /// None made: `symlink(2)` and `mknod(2)` of a special file are EPERM (`reparse=none`).
    None,
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            uid: 0,
            gid: 0,
            file_mode: 0o755,
            dir_mode: 0o755,
            ttl: Duration::from_secs(1),
            read_only: false,
            hard: false,
            write_behind: 64 << 20,
            watch_dirs: 32,
            close_delay: DEFERRED_CLOSE,
            prefetch: 64 << 20,
            io_size: 1 << 20,
            kernel_readahead: 0,
            mapposix: true,
            mfsymlinks: false,
            modefromsid: false,
            user_xattr: false,
            reparse: ReparseForm::Native,
        }
    }
}
