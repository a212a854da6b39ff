//! Plain value types of the public API.

use std::time::SystemTime;

use smb3_proto::msg::create::ShareAccess;
use smb3_proto::msg::fscc::{
    filetime_to_system_time, DirectoryEntry, FileAllInformation, FileAttributes,
};
use smb3_proto::msg::query_info::QueryInfoResponse;
use smb3_proto::Command;

use crate::attributes::DosAttributes;
use crate::error::{decode, Result};

/// What kind of object a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Directory,
}

/// Size, times and attributes of a file or directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// File or directory.
    pub file_type: FileType,
    /// Size in bytes (EndOfFile).
    pub len: u64,
    /// Bytes allocated on the server.
    pub allocation_size: u64,
    /// Creation time.
    pub created: Option<SystemTime>,
    /// Last access time.
    pub accessed: Option<SystemTime>,
    /// Last write time.
    pub modified: Option<SystemTime>,
    /// Last attribute change time.
    pub changed: Option<SystemTime>,
    /// The DOS attributes (FILE_ATTRIBUTE_*, MS-FSCC 2.6) as a typed set; `bits()` gives
    /// the raw number.
    pub attributes: DosAttributes,
    /// The server's 64-bit file id (MS-FSCC 2.4.20 IndexNumber, FileId in directory
    /// listings): the same for every name of one file, stable while the file exists. 0 when
    /// the server does not report one. Samba derives it from the device and inode numbers.
    pub file_id: u64,
    /// Number of names (hard links) the file has; 1 where the reply does not say (listings).
    pub links: u32,
}

impl Metadata {
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type == FileType::Directory
    }

    /// Whether this is a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type == FileType::File
    }

    /// Whether FILE_ATTRIBUTE_READONLY is set.
    pub fn is_readonly(&self) -> bool {
        self.attributes.contains(DosAttributes::READONLY)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        attributes: FileAttributes,
        len: u64,
        allocation_size: u64,
        created: u64,
        accessed: u64,
        modified: u64,
        changed: u64,
    ) -> Metadata {
        Metadata {
            file_type: if attributes.is_directory() {
                FileType::Directory
            } else {
                FileType::File
            },
            len,
            allocation_size,
            created: filetime_to_system_time(created),
            accessed: filetime_to_system_time(accessed),
            modified: filetime_to_system_time(modified),
            changed: filetime_to_system_time(changed),
            attributes: DosAttributes::from_bits(attributes.0),
            file_id: 0,
            links: 1,
        }
    }
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The name inside its directory.
    pub name: String,
    /// Its metadata as reported by the listing.
    pub metadata: Metadata,
    /// Server-side file id (inode-like; 0 when the server does not report one).
    pub file_id: u64,
}

impl From<DirectoryEntry> for DirEntry {
    fn from(e: DirectoryEntry) -> Self {
        let mut metadata = Metadata::from_parts(
            e.file_attributes,
            e.end_of_file,
            e.allocation_size,
            e.creation_time,
            e.last_access_time,
            e.last_write_time,
            e.change_time,
        );
        metadata.file_id = e.file_id;
        DirEntry {
            metadata,
            name: e.file_name,
            file_id: e.file_id,
        }
    }
}

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

/// How the share's file system treats names and what it supports (MS-FSCC 2.5.1
/// FileFsAttributeInformation), from [`Share::fs_attributes`](crate::Share::fs_attributes).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FsAttributes {
    /// FILE_CASE_SENSITIVE_SEARCH: `foo` and `FOO` are two files. Without it they are one
    /// (Windows, and Samba for SMB2 clients unless `case sensitive = yes`).
    pub case_sensitive: bool,
    /// FILE_CASE_PRESERVED_NAMES: names keep the case they were created with.
    pub case_preserving: bool,
    /// FILE_SUPPORTS_SPARSE_FILES.
    pub sparse_files: bool,
    /// FILE_NAMED_STREAMS.
    pub named_streams: bool,
    /// The longest name component, in characters.
    pub max_name_length: u32,
    /// The file system's name (`NTFS`, Samba's underlying one, ...).
    pub file_system_name: String,
}

/// Size and free space of the share's file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsInfo {
    /// Total bytes.
    pub total_bytes: u64,
    /// Bytes available to this user.
    pub available_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Allocation unit in bytes.
    pub block_size: u64,
}

/// Convert a user path (`/a/b`, `a\b`, `a//b/`) to the share-relative form the wire wants
/// (`a\b`; empty for the share root). `..` is refused rather than resolved: the server would
/// refuse it anyway and resolving it locally could escape the intended directory.
pub(crate) fn wire_path(path: &str) -> Result<String, crate::Error> {
    let mut parts = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return Err(crate::Error::ApiMisuse("paths may not contain '..'")),
            p => parts.push(p),
        }
    }
    Ok(parts.join("\\"))
}

/// Metadata from a QUERY_INFO reply carrying FileAllInformation (MS-FSCC 2.4.2). A reply with
/// BUFFER_OVERFLOW still holds the fixed part; only the name is cut short.
impl Metadata {
    /// What a CREATE reply says of the file it opened (MS-SMB2 2.2.14); no file id or link
    /// count (the reply has neither).
    pub(crate) fn of_create(created: &smb3_proto::msg::create::CreateResponse) -> Metadata {
        Metadata::from_parts(
            created.file_attributes,
            created.end_of_file,
            created.allocation_size,
            created.creation_time,
            created.last_access_time,
            created.last_write_time,
            created.change_time,
        )
    }
}

pub(crate) fn metadata_from_reply(msg: &bytes::Bytes) -> Result<Metadata> {
    let info: FileAllInformation = decode(
        Command::QUERY_INFO,
        QueryInfoResponse::decode(msg).and_then(|r| r.file_info()),
    )?;
    let mut metadata = Metadata::from_parts(
        info.basic.file_attributes,
        info.standard.end_of_file,
        info.standard.allocation_size,
        info.basic.creation_time,
        info.basic.last_access_time,
        info.basic.last_write_time,
        info.basic.change_time,
    );
    metadata.file_id = info.index_number;
    metadata.links = info.standard.number_of_links.max(1);
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised() {
        assert_eq!(wire_path("/").unwrap(), "");
        assert_eq!(wire_path("").unwrap(), "");
        assert_eq!(wire_path("/a/b/").unwrap(), "a\\b");
        assert_eq!(wire_path("a\\\\b/./c").unwrap(), "a\\b\\c");
        assert_eq!(wire_path("déjà vu/ファイル").unwrap(), "déjà vu\\ファイル");
        assert!(wire_path("a/../b").is_err());
    }

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

/// What a rename or a new hard link does when its target name exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfExists {
    /// Fail with `OBJECT_NAME_COLLISION`.
    Fail,
    /// Replace the file that has the name (never a directory).
    Replace,
}

/// The largest payloads the server accepts, as negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxIo {
    /// Bytes of one READ.
    pub read: u32,
    /// Bytes of one WRITE.
    pub write: u32,
    /// Bytes of one IOCTL or QUERY_INFO/QUERY_DIRECTORY reply.
    pub transact: u32,
}

/// What a session has moved so far, over all its channels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficCounters {
    /// Requests sent.
    pub requests: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
}
