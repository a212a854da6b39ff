//! How a file is opened ([`OpenOptions`], with the [`ShareMode`] other opens may have), and
//! what a rename or a new hard link does with a name that is taken ([`IfExists`]).

use std::time::SystemTime;

use smb3_proto::msg::create::ShareAccess;

/// How to open a file, in the spirit of `std::fs::OpenOptions`, plus what backup software
/// asks of a Windows-style file system: sharing modes, backup intent, delete-on-close and
/// opening a snapshot ("previous version").
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    pub(crate) read: bool,
    pub(crate) write: bool,
    pub(crate) create: bool,
    pub(crate) create_new: bool,
    pub(crate) truncate: bool,
    /// `None`: share read, write and delete (the default, see [`OpenOptions::share_mode`]).
    pub(crate) share_mode: Option<ShareMode>,
    pub(crate) delete_on_close: bool,
    pub(crate) backup_intent: bool,
    /// The snapshot to open the file in, as a FILETIME (whole seconds).
    pub(crate) snapshot: Option<u64>,
    pub(crate) read_security: bool,
    pub(crate) write_security: bool,
    /// Permission bits for a file this open creates on a POSIX share.
    pub(crate) mode: Option<u32>,
}

impl OpenOptions {
    /// Nothing requested yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Open for reading.
    pub fn read(mut self, yes: bool) -> Self {
        self.read = yes;
        self
    }

    /// Open for writing.
    pub fn write(mut self, yes: bool) -> Self {
        self.write = yes;
        self
    }

    /// Create the file if it does not exist.
    pub fn create(mut self, yes: bool) -> Self {
        self.create = yes;
        self
    }

    /// Create the file; fail if it exists.
    pub fn create_new(mut self, yes: bool) -> Self {
        self.create_new = yes;
        self
    }

    /// Truncate an existing file to zero length.
    pub fn truncate(mut self, yes: bool) -> Self {
        self.truncate = yes;
        self
    }

    /// Also ask for READ_CONTROL, so [`File::security_descriptor`](crate::File::security_descriptor)
    /// can read the owner, group and DACL through this handle.
    pub fn read_security(mut self, yes: bool) -> Self {
        self.read_security = yes;
        self
    }

    /// Also ask for WRITE_DAC and WRITE_OWNER, so
    /// [`File::set_security_descriptor`](crate::File::set_security_descriptor) can change the
    /// DACL, owner and group through this handle. The open fails when the user lacks either
    /// right; [`Share::set_security_descriptor`](crate::Share::set_security_descriptor) asks
    /// for only what the parts being set need.
    pub fn write_security(mut self, yes: bool) -> Self {
        self.write_security = yes;
        self
    }
    /// What other opens of the file may do while this one is open (ShareAccess, MS-SMB2
    /// 2.2.13). The default shares everything ([`ShareMode::ALL`]), as a client that does its
    /// own locking wants; [`ShareMode::NONE`] makes every other open of the file fail with
    /// `STATUS_SHARING_VIOLATION` until this one is closed, and fails itself if the file is
    /// already open elsewhere in a way it does not share. A backup reading a file with
    /// `ShareMode::READ` knows nobody writes it meanwhile.
    pub fn share_mode(mut self, mode: ShareMode) -> Self {
        self.share_mode = Some(mode);
        self
    }

    /// Delete the file when its last handle is closed (FILE_DELETE_ON_CLOSE, MS-SMB2 2.2.13;
    /// asks for DELETE access too). For scratch files. Such an open is never made durable: if
    /// every connection is lost the server closes it and so deletes the file, and the client
    /// reports the handle lost rather than create the file again.
    pub fn delete_on_close(mut self) -> Self {
        self.delete_on_close = true;
        self
    }

    /// Open with backup intent (FILE_OPEN_FOR_BACKUP_INTENT, MS-SMB2 2.2.13): a server that
    /// honours it lets a user holding the backup / restore privileges past the file's
    /// access checks. Harmless for other users: the normal checks apply.
    pub fn backup_intent(mut self) -> Self {
        self.backup_intent = true;
        self
    }

    /// Open the file as it was in `snapshot` (a "previous version", from
    /// [`Share::snapshots`](crate::Share::snapshots)) rather than as it is now, with the
    /// SMB2_CREATE_TIMEWARP_TOKEN create context (MS-SMB2 2.2.13.2.7). Snapshots are
    /// read-only: asking to write, create, truncate or delete as well fails with
    /// [`Error::ApiMisuse`](crate::Error::ApiMisuse) before anything is sent.
    pub fn snapshot(self, snapshot: &crate::Snapshot) -> Self {
        self.snapshot_at(snapshot.time)
    }

    /// Like [`OpenOptions::snapshot`], naming the snapshot by its time (UTC, whole seconds;
    /// a fraction is dropped). A time at which the server took no snapshot fails the open
    /// with [`Error::SnapshotNotFound`](crate::Error::SnapshotNotFound).
    pub fn snapshot_at(mut self, time: SystemTime) -> Self {
        self.snapshot = Some(crate::timewarp::timewarp_filetime(time));
        self
    }

    /// Permission bits (`0o7777`) a file this open creates gets, on a share with the SMB3
    /// POSIX extensions ([`Share::is_posix`](crate::Share::is_posix)); the caller applies its
    /// umask first, as `open(2)` would. Without it a new file gets
    /// [`DEFAULT_FILE_MODE`](crate::DEFAULT_FILE_MODE). Other shares keep no mode: there it
    /// has no effect.
    pub fn mode(mut self, permissions: u32) -> Self {
        self.mode = Some(permissions & 0o7777);
        self
    }

    /// Whether these options change the file or the directory (which a snapshot refuses).
    pub(crate) fn changes_anything(&self) -> bool {
        self.write || self.create || self.create_new || self.truncate || self.delete_on_close
    }
}

/// Which kinds of access other opens of a file may have while it is open (ShareAccess,
/// MS-SMB2 2.2.13). Combine with `|`: `ShareMode::READ | ShareMode::WRITE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShareMode(pub(crate) u32);

impl ShareMode {
    /// Share nothing: no other open of the file while this one is open.
    pub const NONE: ShareMode = ShareMode(0);
    /// Others may open the file for reading (FILE_SHARE_READ).
    pub const READ: ShareMode = ShareMode(ShareAccess::READ);
    /// Others may open the file for writing (FILE_SHARE_WRITE).
    pub const WRITE: ShareMode = ShareMode(ShareAccess::WRITE);
    /// Others may delete or rename the file (FILE_SHARE_DELETE).
    pub const DELETE: ShareMode = ShareMode(ShareAccess::DELETE);
    /// Read, write and delete: the default.
    pub const ALL: ShareMode = ShareMode(ShareAccess::ALL);

    /// Whether every kind in `other` is shared.
    pub fn contains(self, other: ShareMode) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for ShareMode {
    type Output = ShareMode;
    fn bitor(self, rhs: ShareMode) -> ShareMode {
        ShareMode(self.0 | rhs.0)
    }
}

/// What a rename or a new hard link does when its target name exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfExists {
    /// Fail with `OBJECT_NAME_COLLISION`.
    Fail,
    /// Replace the file that has the name (never a directory).
    Replace,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_modes_combine_into_share_access_bits() {
        let rw = ShareMode::READ | ShareMode::WRITE;
        assert_eq!(rw.0, 0x3);
        assert!(rw.contains(ShareMode::READ) && !rw.contains(ShareMode::DELETE));
        assert_eq!((rw | ShareMode::DELETE), ShareMode::ALL);
        assert_eq!(ShareMode::NONE.0, 0);
        assert_eq!(OpenOptions::new().share_mode, None, "default shares all");
    }

    #[test]
    fn options_that_change_something_are_told_apart() {
        let read = OpenOptions::new().read(true);
        assert!(!read.changes_anything());
        assert!(read.clone().write(true).changes_anything());
        assert!(read.clone().create(true).changes_anything());
        assert!(read.clone().create_new(true).changes_anything());
        assert!(read.clone().truncate(true).changes_anything());
        assert!(read.delete_on_close().changes_anything());
    }
}
