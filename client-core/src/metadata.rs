//! What the server says of files and of the share's file system, as the public API gives it:
//! [`Metadata`] (from a CREATE or QUERY_INFO reply, or a listing's [`DirEntry`]),
//! [`FsAttributes`] and [`FsInfo`].

use std::time::SystemTime;

use smb3_proto::msg::fscc::{
    filetime_to_system_time, DirectoryEntry, FileAllInformation, FileAttributes,
};
use smb3_proto::msg::query_info::QueryInfoResponse;
use smb3_proto::Command;

use smb3_proto::msg::posix::{FilePosixInformation, PosixDirectoryEntry};

use crate::attributes::DosAttributes;
use crate::error::{decode, Result};
use crate::posix::PosixMetadata;

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
    /// Mode, owner, group and file type, on a share with the SMB3 POSIX extensions
    /// ([`Share::is_posix`](crate::Share::is_posix)); `None` elsewhere.
    pub posix: Option<PosixMetadata>,
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
            posix: None,
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
    /// The reparse tag of a reparse point (MS-FSCC 2.1.2.1: a symbolic link, a DFS link,
    /// ...), which a listing carries in place of EaSize for such entries (MS-FSCC 2.4.17);
    /// 0 for any other entry.
    pub reparse_tag: u32,
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
        let reparse_tag = if e.file_attributes.0 & FileAttributes::REPARSE_POINT != 0 {
            e.ea_size
        } else {
            0
        };
        DirEntry {
            metadata,
            name: e.file_name,
            file_id: e.file_id,
            reparse_tag,
        }
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

impl Metadata {
    /// What a CREATE reply says of the file it opened (MS-SMB2 2.2.14); no file id or link
    /// count (the reply has neither).
    pub(crate) fn of_create(created: &smb3_proto::msg::create::CreateResponse) -> Metadata {
        let mut metadata = Metadata::from_parts(
            created.file_attributes,
            created.end_of_file,
            created.allocation_size,
            created.creation_time,
            created.last_access_time,
            created.last_write_time,
            created.change_time,
        );
        if let Some(posix) = created.posix() {
            metadata.links = posix.nlinks.max(1);
            metadata.posix = Some(PosixMetadata::from_wire(posix));
        }
        metadata
    }

    /// What FilePosixInformation says (a QUERY_INFO on a POSIX open, or a POSIX listing's
    /// entry): everything, file id and links included.
    pub(crate) fn of_posix(info: &FilePosixInformation) -> Metadata {
        let mut metadata = Metadata::from_parts(
            info.file_attributes,
            info.end_of_file,
            info.allocation_size,
            info.creation_time,
            info.last_access_time,
            info.last_write_time,
            info.change_time,
        );
        metadata.file_id = info.inode;
        metadata.links = info.posix.nlinks.max(1);
        metadata.posix = Some(PosixMetadata::from_wire(&info.posix));
        metadata
    }
}

impl From<PosixDirectoryEntry> for DirEntry {
    fn from(e: PosixDirectoryEntry) -> Self {
        let metadata = Metadata::of_posix(&e.info);
        DirEntry {
            file_id: metadata.file_id,
            metadata,
            name: e.file_name,
            reparse_tag: e.info.posix.reparse_tag,
        }
    }
}

/// Metadata from a QUERY_INFO reply carrying FilePosixInformation.
pub(crate) fn metadata_from_posix_reply(msg: &bytes::Bytes) -> Result<Metadata> {
    let info: FilePosixInformation = decode(
        Command::QUERY_INFO,
        QueryInfoResponse::decode(msg).and_then(|r| r.file_info()),
    )?;
    Ok(Metadata::of_posix(&info))
}

/// Metadata from a QUERY_INFO reply carrying FileAllInformation (MS-FSCC 2.4.2). A reply with
/// BUFFER_OVERFLOW still holds the fixed part; only the name is cut short.
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
