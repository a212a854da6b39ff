//! MS-FSCC information structures carried by QUERY_INFO, SET_INFO and QUERY_DIRECTORY: file
//! information classes (MS-FSCC 2.4), file system information classes (MS-FSCC 2.5), file
//! attributes (MS-FSCC 2.6) and FILETIME conversion.
//!
//! Decoders take the output buffer of a response (not the whole message) and check every
//! length against the bytes present. Fixed-size structures accept trailing bytes (servers may
//! pad the output buffer) but never fewer bytes than the structure needs.
//!
//! MS-FSCC renumbers its sections between revisions (FileStandardInformation is 2.4.41 in some,
//! 2.4.45 in others); the structure names in the doc comments are the stable reference.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};

use crate::codec::{put_utf16le, utf16le_len, utf16le_to_string, DecodeError, Reader};

// ---------------------------------------------------------------------------------------------
// FILETIME
// ---------------------------------------------------------------------------------------------

/// FILETIME of 1970-01-01T00:00:00Z: 100 ns intervals between 1601-01-01 and the Unix epoch
/// (MS-DTYP 2.3.3).
pub const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;

/// In SET_INFO FileBasicInformation, a time of 0 leaves the time unchanged (MS-FSCC 2.4.7).
pub const FILETIME_UNCHANGED: u64 = 0;

/// In SET_INFO FileBasicInformation, -1 stops the server from updating this time for
/// operations on the handle (MS-FSCC 2.4.7).
pub const FILETIME_FREEZE: u64 = u64::MAX;

/// In SET_INFO FileBasicInformation, -2 resumes automatic updates after [`FILETIME_FREEZE`]
/// (MS-FSCC 2.4.7).
pub const FILETIME_UNFREEZE: u64 = u64::MAX - 1;

const TICKS_PER_SECOND: u64 = 10_000_000;
const NANOS_PER_TICK: u64 = 100;

/// Convert a FILETIME (100 ns intervals since 1601-01-01 UTC) to a `SystemTime`. 0 means "no
/// time" and gives `None`, as does a value the platform's `SystemTime` cannot represent.
pub fn filetime_to_system_time(filetime: u64) -> Option<SystemTime> {
    if filetime == 0 {
        return None;
    }
    let ticks_to_duration = |ticks: u64| {
        Duration::new(
            ticks / TICKS_PER_SECOND,
            ((ticks % TICKS_PER_SECOND) * NANOS_PER_TICK) as u32,
        )
    };
    if filetime >= FILETIME_UNIX_EPOCH {
        UNIX_EPOCH.checked_add(ticks_to_duration(filetime - FILETIME_UNIX_EPOCH))
    } else {
        UNIX_EPOCH.checked_sub(ticks_to_duration(FILETIME_UNIX_EPOCH - filetime))
    }
}

/// Convert a `SystemTime` to a FILETIME, truncating to 100 ns. Times at or before
/// 1601-01-01 become 1, because 0 means "no time" / "don't change"; times past the signed
/// 64-bit range saturate at `i64::MAX` so they never collide with the special values -1 / -2.
pub fn system_time_to_filetime(time: SystemTime) -> u64 {
    let duration_ticks = |d: Duration| {
        d.as_secs()
            .saturating_mul(TICKS_PER_SECOND)
            .saturating_add(u64::from(d.subsec_nanos()) / NANOS_PER_TICK)
    };
    let filetime = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => FILETIME_UNIX_EPOCH.saturating_add(duration_ticks(after)),
        Err(before) => FILETIME_UNIX_EPOCH.saturating_sub(duration_ticks(before.duration())),
    };
    filetime.clamp(1, i64::MAX as u64)
}

// ---------------------------------------------------------------------------------------------
// Attributes and class numbers
// ---------------------------------------------------------------------------------------------

/// File attributes (MS-FSCC 2.6). Flags: combine the `u32` constants with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct FileAttributes(pub u32);

impl FileAttributes {
    /// FILE_ATTRIBUTE_READONLY.
    pub const READONLY: u32 = 0x0000_0001;
    /// FILE_ATTRIBUTE_HIDDEN.
    pub const HIDDEN: u32 = 0x0000_0002;
    /// FILE_ATTRIBUTE_SYSTEM.
    pub const SYSTEM: u32 = 0x0000_0004;
    /// FILE_ATTRIBUTE_DIRECTORY.
    pub const DIRECTORY: u32 = 0x0000_0010;
    /// FILE_ATTRIBUTE_ARCHIVE.
    pub const ARCHIVE: u32 = 0x0000_0020;
    /// FILE_ATTRIBUTE_NORMAL: no other attribute set (valid only alone).
    pub const NORMAL: u32 = 0x0000_0080;
    /// FILE_ATTRIBUTE_TEMPORARY.
    pub const TEMPORARY: u32 = 0x0000_0100;
    /// FILE_ATTRIBUTE_SPARSE_FILE.
    pub const SPARSE_FILE: u32 = 0x0000_0200;
    /// FILE_ATTRIBUTE_REPARSE_POINT.
    pub const REPARSE_POINT: u32 = 0x0000_0400;
    /// FILE_ATTRIBUTE_COMPRESSED.
    pub const COMPRESSED: u32 = 0x0000_0800;
    /// FILE_ATTRIBUTE_OFFLINE.
    pub const OFFLINE: u32 = 0x0000_1000;
    /// FILE_ATTRIBUTE_NOT_CONTENT_INDEXED.
    pub const NOT_CONTENT_INDEXED: u32 = 0x0000_2000;
    /// FILE_ATTRIBUTE_ENCRYPTED.
    pub const ENCRYPTED: u32 = 0x0000_4000;
    /// FILE_ATTRIBUTE_INTEGRITY_STREAM.
    pub const INTEGRITY_STREAM: u32 = 0x0000_8000;
    /// FILE_ATTRIBUTE_NO_SCRUB_DATA.
    pub const NO_SCRUB_DATA: u32 = 0x0002_0000;
    /// FILE_ATTRIBUTE_RECALL_ON_OPEN.
    pub const RECALL_ON_OPEN: u32 = 0x0004_0000;
    /// FILE_ATTRIBUTE_PINNED.
    pub const PINNED: u32 = 0x0008_0000;
    /// FILE_ATTRIBUTE_UNPINNED.
    pub const UNPINNED: u32 = 0x0010_0000;
    /// FILE_ATTRIBUTE_RECALL_ON_DATA_ACCESS.
    pub const RECALL_ON_DATA_ACCESS: u32 = 0x0040_0000;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }

    /// Whether FILE_ATTRIBUTE_DIRECTORY is set.
    pub fn is_directory(self) -> bool {
        self.has(Self::DIRECTORY)
    }
}

/// File information class (MS-FSCC 2.4), the FileInfoClass of QUERY_INFO / SET_INFO with
/// InfoType FILE and the FileInformationClass of QUERY_DIRECTORY.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FileInformationClass(pub u8);

impl FileInformationClass {
    /// FileDirectoryInformation (QUERY_DIRECTORY).
    pub const DIRECTORY: Self = Self(1);
    /// FileFullDirectoryInformation (QUERY_DIRECTORY).
    pub const FULL_DIRECTORY: Self = Self(2);
    /// FileBothDirectoryInformation (QUERY_DIRECTORY).
    pub const BOTH_DIRECTORY: Self = Self(3);
    /// FileBasicInformation (query, set).
    pub const BASIC: Self = Self(4);
    /// FileStandardInformation (query).
    pub const STANDARD: Self = Self(5);
    /// FileInternalInformation (query).
    pub const INTERNAL: Self = Self(6);
    /// FileEaInformation (query).
    pub const EA: Self = Self(7);
    /// FileAccessInformation (query).
    pub const ACCESS: Self = Self(8);
    /// FileNameInformation (query).
    pub const NAME: Self = Self(9);
    /// FileRenameInformation (set).
    pub const RENAME: Self = Self(10);
    /// FileLinkInformation (set).
    pub const LINK: Self = Self(11);
    /// FileNamesInformation (QUERY_DIRECTORY).
    pub const NAMES: Self = Self(12);
    /// FileDispositionInformation (set).
    pub const DISPOSITION: Self = Self(13);
    /// FilePositionInformation (query, set).
    pub const POSITION: Self = Self(14);
    /// FileFullEaInformation (query, set).
    pub const FULL_EA: Self = Self(15);
    /// FileModeInformation (query, set).
    pub const MODE: Self = Self(16);
    /// FileAlignmentInformation (query).
    pub const ALIGNMENT: Self = Self(17);
    /// FileAllInformation (query).
    pub const ALL: Self = Self(18);
    /// FileAllocationInformation (set).
    pub const ALLOCATION: Self = Self(19);
    /// FileEndOfFileInformation (set).
    pub const END_OF_FILE: Self = Self(20);
    /// FileAlternateNameInformation (query).
    pub const ALTERNATE_NAME: Self = Self(21);
    /// FileStreamInformation (query).
    pub const STREAM: Self = Self(22);
    /// FileCompressionInformation (query).
    pub const COMPRESSION: Self = Self(28);
    /// FileNetworkOpenInformation (query).
    pub const NETWORK_OPEN: Self = Self(34);
    /// FileAttributeTagInformation (query).
    pub const ATTRIBUTE_TAG: Self = Self(35);
    /// FileIdBothDirectoryInformation (QUERY_DIRECTORY).
    pub const ID_BOTH_DIRECTORY: Self = Self(37);
    /// FileIdFullDirectoryInformation (QUERY_DIRECTORY).
    pub const ID_FULL_DIRECTORY: Self = Self(38);
    /// FileNormalizedNameInformation (query).
    pub const NORMALIZED_NAME: Self = Self(48);
    /// FileIdExtdDirectoryInformation (QUERY_DIRECTORY).
    pub const ID_EXTD_DIRECTORY: Self = Self(60);
}

/// File system information class (MS-FSCC 2.5), the FileInfoClass of QUERY_INFO with InfoType
/// FILESYSTEM.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FsInformationClass(pub u8);

impl FsInformationClass {
    /// FileFsVolumeInformation.
    pub const VOLUME: Self = Self(1);
    /// FileFsLabelInformation.
    pub const LABEL: Self = Self(2);
    /// FileFsSizeInformation.
    pub const SIZE: Self = Self(3);
    /// FileFsDeviceInformation.
    pub const DEVICE: Self = Self(4);
    /// FileFsAttributeInformation.
    pub const ATTRIBUTE: Self = Self(5);
    /// FileFsControlInformation.
    pub const CONTROL: Self = Self(6);
    /// FileFsFullSizeInformation.
    pub const FULL_SIZE: Self = Self(7);
    /// FileFsObjectIdInformation.
    pub const OBJECT_ID: Self = Self(8);
    /// FileFsSectorSizeInformation.
    pub const SECTOR_SIZE: Self = Self(11);
}

// ---------------------------------------------------------------------------------------------
// Traits tying a structure to its class
// ---------------------------------------------------------------------------------------------

/// A file information structure returned by QUERY_INFO (InfoType FILE).
pub trait QueryFileInfo: Sized {
    /// The FileInfoClass to ask for.
    const CLASS: FileInformationClass;
    /// Decode the response's output buffer.
    fn decode(buf: &[u8]) -> Result<Self, DecodeError>;
}

/// A file information structure sent with SET_INFO (InfoType FILE).
pub trait SetFileInfo {
    /// The FileInfoClass it is sent as.
    const CLASS: FileInformationClass;
    /// Append the structure (the SET_INFO Buffer) to `out`.
    fn encode(&self, out: &mut BytesMut);
}

/// A file system information structure returned by QUERY_INFO (InfoType FILESYSTEM).
pub trait QueryFsInfo: Sized {
    /// The FileInfoClass to ask for.
    const CLASS: FsInformationClass;
    /// Decode the response's output buffer.
    fn decode(buf: &[u8]) -> Result<Self, DecodeError>;
}

// ---------------------------------------------------------------------------------------------
// File information classes
// ---------------------------------------------------------------------------------------------

/// MS-FSCC 2.4.7 FileBasicInformation (class 4): times and attributes, 40 bytes. In SET_INFO a
/// time of [`FILETIME_UNCHANGED`] (0) and attributes of 0 leave the value unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileBasicInformation {
    /// CreationTime (FILETIME).
    pub creation_time: u64,
    /// LastAccessTime (FILETIME).
    pub last_access_time: u64,
    /// LastWriteTime (FILETIME).
    pub last_write_time: u64,
    /// ChangeTime (FILETIME).
    pub change_time: u64,
    /// FileAttributes.
    pub file_attributes: FileAttributes,
}

impl FileBasicInformation {
    /// Size on the wire.
    pub const SIZE: usize = 40;

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let creation_time = r.u64("FileBasicInformation.CreationTime")?;
        let last_access_time = r.u64("FileBasicInformation.LastAccessTime")?;
        let last_write_time = r.u64("FileBasicInformation.LastWriteTime")?;
        let change_time = r.u64("FileBasicInformation.ChangeTime")?;
        let file_attributes = FileAttributes(r.u32("FileBasicInformation.FileAttributes")?);
        r.skip(4, "FileBasicInformation.Reserved")?;
        Ok(Self {
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            file_attributes,
        })
    }
}

impl QueryFileInfo for FileBasicInformation {
    const CLASS: FileInformationClass = FileInformationClass::BASIC;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        Self::read(&mut Reader::new(buf))
    }
}

impl SetFileInfo for FileBasicInformation {
    const CLASS: FileInformationClass = FileInformationClass::BASIC;
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.creation_time);
        out.put_u64_le(self.last_access_time);
        out.put_u64_le(self.last_write_time);
        out.put_u64_le(self.change_time);
        out.put_u32_le(self.file_attributes.0);
        out.put_u32_le(0); // Reserved
    }
}

/// MS-FSCC 2.4.45 FileStandardInformation (class 5), 24 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileStandardInformation {
    /// AllocationSize in bytes.
    pub allocation_size: u64,
    /// EndOfFile: the file size in bytes.
    pub end_of_file: u64,
    /// NumberOfLinks.
    pub number_of_links: u32,
    /// DeletePending.
    pub delete_pending: bool,
    /// Directory.
    pub directory: bool,
}

impl FileStandardInformation {
    /// Size on the wire.
    pub const SIZE: usize = 24;

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let allocation_size = r.u64("FileStandardInformation.AllocationSize")?;
        let end_of_file = r.u64("FileStandardInformation.EndOfFile")?;
        let number_of_links = r.u32("FileStandardInformation.NumberOfLinks")?;
        let delete_pending = r.u8("FileStandardInformation.DeletePending")? != 0;
        let directory = r.u8("FileStandardInformation.Directory")? != 0;
        r.skip(2, "FileStandardInformation.Reserved")?;
        Ok(Self {
            allocation_size,
            end_of_file,
            number_of_links,
            delete_pending,
            directory,
        })
    }
}

impl QueryFileInfo for FileStandardInformation {
    const CLASS: FileInformationClass = FileInformationClass::STANDARD;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        Self::read(&mut Reader::new(buf))
    }
}

/// MS-FSCC 2.4.22 FileInternalInformation (class 6): the server's 64-bit file index.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileInternalInformation {
    /// IndexNumber.
    pub index_number: u64,
}

impl QueryFileInfo for FileInternalInformation {
    const CLASS: FileInformationClass = FileInformationClass::INTERNAL;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let index_number = Reader::new(buf).u64("FileInternalInformation.IndexNumber")?;
        Ok(Self { index_number })
    }
}

/// MS-FSCC 2.4.2 FileAllInformation (class 18): Basic, Standard, Internal, EA, Access,
/// Position, Mode, Alignment and Name information back to back (100 bytes + the name).
///
/// When the output buffer was too small the server answers STATUS_BUFFER_OVERFLOW with the
/// name cut short but FileNameLength still giving the full length; that is decoded, not
/// rejected: `name` holds what fits and `name_truncated` is set.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FileAllInformation {
    /// FileBasicInformation part.
    pub basic: FileBasicInformation,
    /// FileStandardInformation part.
    pub standard: FileStandardInformation,
    /// FileInternalInformation.IndexNumber.
    pub index_number: u64,
    /// FileEaInformation.EaSize.
    pub ea_size: u32,
    /// FileAccessInformation.AccessFlags (the open's granted access mask).
    pub access_flags: u32,
    /// FilePositionInformation.CurrentByteOffset.
    pub current_byte_offset: u64,
    /// FileModeInformation.Mode.
    pub mode: u32,
    /// FileAlignmentInformation.AlignmentRequirement.
    pub alignment_requirement: u32,
    /// FileNameInformation.FileName (as much as was returned).
    pub name: String,
    /// The name was cut short by the output buffer size.
    pub name_truncated: bool,
}

impl FileAllInformation {
    /// Size of the fixed part, up to and including FileNameLength.
    pub const FIXED_SIZE: usize = 100;
}

impl QueryFileInfo for FileAllInformation {
    const CLASS: FileInformationClass = FileInformationClass::ALL;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let basic = FileBasicInformation::read(&mut r)?;
        let standard = FileStandardInformation::read(&mut r)?;
        let index_number = r.u64("FileAllInformation.IndexNumber")?;
        let ea_size = r.u32("FileAllInformation.EaSize")?;
        let access_flags = r.u32("FileAllInformation.AccessFlags")?;
        let current_byte_offset = r.u64("FileAllInformation.CurrentByteOffset")?;
        let mode = r.u32("FileAllInformation.Mode")?;
        let alignment_requirement = r.u32("FileAllInformation.AlignmentRequirement")?;
        let name_length = r.u32("FileAllInformation.FileNameLength")? as usize;
        if name_length % 2 != 0 {
            return Err(DecodeError::BadString {
                what: "FileAllInformation.FileName",
            });
        }
        // Whole UTF-16 code units only; anything beyond the buffer was cut by the server.
        let present = name_length.min(r.remaining() & !1);
        let raw = r.bytes(present, "FileAllInformation.FileName")?;
        let name = utf16le_to_string(raw, "FileAllInformation.FileName")?;
        Ok(Self {
            basic,
            standard,
            index_number,
            ea_size,
            access_flags,
            current_byte_offset,
            mode,
            alignment_requirement,
            name,
            name_truncated: present < name_length,
        })
    }
}

/// MS-FSCC 2.4.29 FileNetworkOpenInformation (class 34), 56 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileNetworkOpenInformation {
    /// CreationTime (FILETIME).
    pub creation_time: u64,
    /// LastAccessTime (FILETIME).
    pub last_access_time: u64,
    /// LastWriteTime (FILETIME).
    pub last_write_time: u64,
    /// ChangeTime (FILETIME).
    pub change_time: u64,
    /// AllocationSize in bytes.
    pub allocation_size: u64,
    /// EndOfFile: the file size in bytes.
    pub end_of_file: u64,
    /// FileAttributes.
    pub file_attributes: FileAttributes,
}

impl QueryFileInfo for FileNetworkOpenInformation {
    const CLASS: FileInformationClass = FileInformationClass::NETWORK_OPEN;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let info = Self {
            creation_time: r.u64("FileNetworkOpenInformation.CreationTime")?,
            last_access_time: r.u64("FileNetworkOpenInformation.LastAccessTime")?,
            last_write_time: r.u64("FileNetworkOpenInformation.LastWriteTime")?,
            change_time: r.u64("FileNetworkOpenInformation.ChangeTime")?,
            allocation_size: r.u64("FileNetworkOpenInformation.AllocationSize")?,
            end_of_file: r.u64("FileNetworkOpenInformation.EndOfFile")?,
            file_attributes: FileAttributes(r.u32("FileNetworkOpenInformation.FileAttributes")?),
        };
        r.skip(4, "FileNetworkOpenInformation.Reserved")?;
        Ok(info)
    }
}

/// MS-FSCC 2.4.14 FileEndOfFileInformation (class 20): set the file size.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileEndOfFileInformation {
    /// EndOfFile: the new size in bytes.
    pub end_of_file: u64,
}

impl SetFileInfo for FileEndOfFileInformation {
    const CLASS: FileInformationClass = FileInformationClass::END_OF_FILE;
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.end_of_file);
    }
}

/// MS-FSCC 2.4.4 FileAllocationInformation (class 19): set the allocation size.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileAllocationInformation {
    /// AllocationSize in bytes.
    pub allocation_size: u64,
}

impl SetFileInfo for FileAllocationInformation {
    const CLASS: FileInformationClass = FileInformationClass::ALLOCATION;
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.allocation_size);
    }
}

/// MS-FSCC 2.4.11 FileDispositionInformation (class 13): mark the open file for deletion on
/// close (or clear the mark). One byte on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileDispositionInformation {
    /// DeletePending.
    pub delete_pending: bool,
}

impl SetFileInfo for FileDispositionInformation {
    const CLASS: FileInformationClass = FileInformationClass::DISPOSITION;
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(u8::from(self.delete_pending));
    }
}

/// MS-FSCC 2.4.42.2 FileRenameInformation (class 10), the SMB2 form
/// (FILE_RENAME_INFORMATION_TYPE_2): ReplaceIfExists, 7 reserved bytes, RootDirectory (0 over
/// SMB2), FileNameLength, FileName.
///
/// `file_name` is the full target path relative to the share root, with backslashes and no
/// leading backslash (e.g. `dir\new.txt`); the server does not resolve it against the
/// source's directory.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FileRenameInformation {
    /// ReplaceIfExists: overwrite an existing target.
    pub replace_if_exists: bool,
    /// FileName: the target path relative to the share root.
    pub file_name: String,
}

impl SetFileInfo for FileRenameInformation {
    const CLASS: FileInformationClass = FileInformationClass::RENAME;
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(u8::from(self.replace_if_exists));
        out.put_bytes(0, 7); // Reserved
        out.put_u64_le(0); // RootDirectory: MUST be 0 for SMB2 (MS-FSCC 2.4.42.2)
        out.put_u32_le(utf16le_len(&self.file_name) as u32);
        put_utf16le(out, &self.file_name);
    }
}

// ---------------------------------------------------------------------------------------------
// File system information classes
// ---------------------------------------------------------------------------------------------

/// MS-FSCC 2.5.8 FileFsSizeInformation (FS class 3), 24 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileFsSizeInformation {
    /// TotalAllocationUnits.
    pub total_allocation_units: u64,
    /// AvailableAllocationUnits (for the caller, honouring quotas).
    pub available_allocation_units: u64,
    /// SectorsPerAllocationUnit.
    pub sectors_per_allocation_unit: u32,
    /// BytesPerSector.
    pub bytes_per_sector: u32,
}

impl QueryFsInfo for FileFsSizeInformation {
    const CLASS: FsInformationClass = FsInformationClass::SIZE;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        Ok(Self {
            total_allocation_units: r.u64("FileFsSizeInformation.TotalAllocationUnits")?,
            available_allocation_units: r.u64("FileFsSizeInformation.AvailableAllocationUnits")?,
            sectors_per_allocation_unit: r.u32("FileFsSizeInformation.SectorsPerAllocationUnit")?,
            bytes_per_sector: r.u32("FileFsSizeInformation.BytesPerSector")?,
        })
    }
}

/// MS-FSCC 2.5.4 FileFsFullSizeInformation (FS class 7), 32 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileFsFullSizeInformation {
    /// TotalAllocationUnits.
    pub total_allocation_units: u64,
    /// CallerAvailableAllocationUnits (honouring the caller's quota).
    pub caller_available_allocation_units: u64,
    /// ActualAvailableAllocationUnits (free on the volume).
    pub actual_available_allocation_units: u64,
    /// SectorsPerAllocationUnit.
    pub sectors_per_allocation_unit: u32,
    /// BytesPerSector.
    pub bytes_per_sector: u32,
}

impl FileFsFullSizeInformation {
    /// Bytes in one allocation unit.
    pub fn bytes_per_allocation_unit(&self) -> u64 {
        u64::from(self.sectors_per_allocation_unit) * u64::from(self.bytes_per_sector)
    }
}

impl QueryFsInfo for FileFsFullSizeInformation {
    const CLASS: FsInformationClass = FsInformationClass::FULL_SIZE;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        Ok(Self {
            total_allocation_units: r.u64("FileFsFullSizeInformation.TotalAllocationUnits")?,
            caller_available_allocation_units: r
                .u64("FileFsFullSizeInformation.CallerAvailableAllocationUnits")?,
            actual_available_allocation_units: r
                .u64("FileFsFullSizeInformation.ActualAvailableAllocationUnits")?,
            sectors_per_allocation_unit: r
                .u32("FileFsFullSizeInformation.SectorsPerAllocationUnit")?,
            bytes_per_sector: r.u32("FileFsFullSizeInformation.BytesPerSector")?,
        })
    }
}

/// MS-FSCC 2.5.1 FileFsAttributeInformation (FS class 5).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FileFsAttributeInformation {
    /// FileSystemAttributes (FILE_CASE_SENSITIVE_SEARCH, ... see the constants).
    pub file_system_attributes: u32,
    /// MaximumComponentNameLength: longest file name component, in characters.
    pub maximum_component_name_length: u32,
    /// FileSystemName, e.g. "NTFS".
    pub file_system_name: String,
}

impl FileFsAttributeInformation {
    /// FILE_CASE_SENSITIVE_SEARCH.
    pub const CASE_SENSITIVE_SEARCH: u32 = 0x0000_0001;
    /// FILE_CASE_PRESERVED_NAMES.
    pub const CASE_PRESERVED_NAMES: u32 = 0x0000_0002;
    /// FILE_UNICODE_ON_DISK.
    pub const UNICODE_ON_DISK: u32 = 0x0000_0004;
    /// FILE_PERSISTENT_ACLS.
    pub const PERSISTENT_ACLS: u32 = 0x0000_0008;
    /// FILE_SUPPORTS_SPARSE_FILES.
    pub const SUPPORTS_SPARSE_FILES: u32 = 0x0000_0040;
    /// FILE_SUPPORTS_REPARSE_POINTS.
    pub const SUPPORTS_REPARSE_POINTS: u32 = 0x0000_0080;
    /// FILE_SUPPORTS_OBJECT_IDS.
    pub const SUPPORTS_OBJECT_IDS: u32 = 0x0001_0000;
    /// FILE_NAMED_STREAMS.
    pub const NAMED_STREAMS: u32 = 0x0004_0000;
    /// FILE_READ_ONLY_VOLUME.
    pub const READ_ONLY_VOLUME: u32 = 0x0008_0000;
}

impl QueryFsInfo for FileFsAttributeInformation {
    const CLASS: FsInformationClass = FsInformationClass::ATTRIBUTE;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let file_system_attributes = r.u32("FileFsAttributeInformation.FileSystemAttributes")?;
        let maximum_component_name_length =
            r.u32("FileFsAttributeInformation.MaximumComponentNameLength")?;
        let name_length = r.u32("FileFsAttributeInformation.FileSystemNameLength")? as usize;
        let raw = r.bytes(name_length, "FileFsAttributeInformation.FileSystemName")?;
        Ok(Self {
            file_system_attributes,
            maximum_component_name_length,
            file_system_name: utf16le_to_string(raw, "FileFsAttributeInformation.FileSystemName")?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Directory listings
// ---------------------------------------------------------------------------------------------

/// One entry of a FileIdBothDirectoryInformation listing (MS-FSCC 2.4.17).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct DirectoryEntry {
    /// FileIndex (meaningless on most file systems; 0 from Samba).
    pub file_index: u32,
    /// CreationTime (FILETIME).
    pub creation_time: u64,
    /// LastAccessTime (FILETIME).
    pub last_access_time: u64,
    /// LastWriteTime (FILETIME).
    pub last_write_time: u64,
    /// ChangeTime (FILETIME).
    pub change_time: u64,
    /// EndOfFile: the file size in bytes.
    pub end_of_file: u64,
    /// AllocationSize in bytes.
    pub allocation_size: u64,
    /// FileAttributes.
    pub file_attributes: FileAttributes,
    /// EaSize (or the reparse tag when FILE_ATTRIBUTE_REPARSE_POINT is set).
    pub ea_size: u32,
    /// ShortName (8.3 name), empty when there is none.
    pub short_name: String,
    /// FileId: the server's 64-bit file index (same as FileInternalInformation).
    pub file_id: u64,
    /// FileName.
    pub file_name: String,
}

/// Fixed part of a FileIdBothDirectoryInformation entry, up to FileName.
const ID_BOTH_DIR_FIXED: usize = 104;
/// Size of the ShortName field.
const SHORT_NAME_FIELD: usize = 24;

/// Decode a FileIdBothDirectoryInformation listing (MS-FSCC 2.4.17), the output buffer of a
/// QUERY_DIRECTORY with class [`FileInformationClass::ID_BOTH_DIRECTORY`].
///
/// Entries are chained by NextEntryOffset (0 on the last). Each offset must move forward past
/// the entry's fixed part and stay inside the buffer; entries are usually 8-byte aligned but an
/// unaligned chain that stays in bounds is accepted. Every name must lie inside its entry.
pub fn decode_id_both_directory_information(
    buf: &[u8],
) -> Result<Vec<DirectoryEntry>, DecodeError> {
    let mut entries = Vec::new();
    if buf.is_empty() {
        return Ok(entries);
    }
    // Every entry is at least ID_BOTH_DIR_FIXED bytes, so a well-formed chain cannot be
    // longer than this; the bound is explicit so a bug in the checks below cannot loop.
    let max_entries = buf.len() / ID_BOTH_DIR_FIXED + 1;
    let mut start = 0usize;
    loop {
        if entries.len() >= max_entries {
            return Err(DecodeError::Inconsistent {
                what: "FileIdBothDirectoryInformation",
                detail: "more entries than the buffer can hold",
            });
        }
        let rest = buf.get(start..).unwrap_or_default();
        let mut r = Reader::new(rest);
        let next = r.u32("FileIdBothDirectoryInformation.NextEntryOffset")? as usize;
        let entry_len = if next == 0 { rest.len() } else { next };
        if next != 0 && (next < ID_BOTH_DIR_FIXED || next > rest.len()) {
            return Err(DecodeError::BadOffset {
                what: "FileIdBothDirectoryInformation.NextEntryOffset",
                offset: start,
                length: next,
                message_len: buf.len(),
            });
        }
        let entry = rest.get(..entry_len).unwrap_or_default();
        entries.push(decode_id_both_entry(entry)?);
        if next == 0 {
            return Ok(entries);
        }
        start += next;
    }
}

/// Decode one entry; `entry` spans exactly this entry (up to the next one or the buffer end).
fn decode_id_both_entry(entry: &[u8]) -> Result<DirectoryEntry, DecodeError> {
    const WHAT: &str = "FileIdBothDirectoryInformation";
    let mut r = Reader::new(entry);
    r.skip(4, "FileIdBothDirectoryInformation.NextEntryOffset")?;
    let file_index = r.u32("FileIdBothDirectoryInformation.FileIndex")?;
    let creation_time = r.u64("FileIdBothDirectoryInformation.CreationTime")?;
    let last_access_time = r.u64("FileIdBothDirectoryInformation.LastAccessTime")?;
    let last_write_time = r.u64("FileIdBothDirectoryInformation.LastWriteTime")?;
    let change_time = r.u64("FileIdBothDirectoryInformation.ChangeTime")?;
    let end_of_file = r.u64("FileIdBothDirectoryInformation.EndOfFile")?;
    let allocation_size = r.u64("FileIdBothDirectoryInformation.AllocationSize")?;
    let file_attributes = FileAttributes(r.u32("FileIdBothDirectoryInformation.FileAttributes")?);
    let name_length = r.u32("FileIdBothDirectoryInformation.FileNameLength")? as usize;
    let ea_size = r.u32("FileIdBothDirectoryInformation.EaSize")?;
    let short_name_length = r.u8("FileIdBothDirectoryInformation.ShortNameLength")? as usize;
    r.skip(1, "FileIdBothDirectoryInformation.Reserved1")?;
    let short_name_field = r.bytes(SHORT_NAME_FIELD, "FileIdBothDirectoryInformation.ShortName")?;
    r.skip(2, "FileIdBothDirectoryInformation.Reserved2")?;
    let file_id = r.u64("FileIdBothDirectoryInformation.FileId")?;
    if short_name_length > SHORT_NAME_FIELD {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "ShortNameLength larger than the 24-byte ShortName field",
        });
    }
    let short_name = utf16le_to_string(
        short_name_field
            .get(..short_name_length)
            .unwrap_or_default(),
        "FileIdBothDirectoryInformation.ShortName",
    )?;
    if name_length > r.remaining() {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "FileNameLength runs past the entry",
        });
    }
    let raw_name = r.bytes(name_length, "FileIdBothDirectoryInformation.FileName")?;
    let file_name = utf16le_to_string(raw_name, "FileIdBothDirectoryInformation.FileName")?;
    Ok(DirectoryEntry {
        file_index,
        creation_time,
        last_access_time,
        last_write_time,
        change_time,
        end_of_file,
        allocation_size,
        file_attributes,
        ea_size,
        short_name,
        file_id,
        file_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::test_util::hex;
    use bytes::Bytes;

    fn encoded<T: SetFileInfo>(info: &T) -> String {
        let mut out = BytesMut::new();
        info.encode(&mut out);
        hex::encode(out)
    }

    // 2024-05-01T12:34:56.789Z as Samba would report it (100 ns resolution).
    const SAMPLE_TIME: u64 = 0x01da_9bc3_f982_fc50;

    #[test]
    fn filetime_conversions() {
        assert_eq!(filetime_to_system_time(0), None);
        assert_eq!(
            filetime_to_system_time(FILETIME_UNIX_EPOCH),
            Some(UNIX_EPOCH)
        );
        let t = UNIX_EPOCH + Duration::new(1_714_566_896, 789_000_000);
        let ft = system_time_to_filetime(t);
        assert_eq!(ft, FILETIME_UNIX_EPOCH + 17_145_668_967_890_000);
        assert_eq!(ft, SAMPLE_TIME);
        assert_eq!(filetime_to_system_time(ft), Some(t));
        // Sub-100 ns precision is truncated.
        assert_eq!(
            system_time_to_filetime(UNIX_EPOCH + Duration::from_nanos(199)),
            FILETIME_UNIX_EPOCH + 1
        );
        // Before the Unix epoch.
        let early = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(
            system_time_to_filetime(early),
            FILETIME_UNIX_EPOCH - 10_000_000
        );
        assert_eq!(
            filetime_to_system_time(FILETIME_UNIX_EPOCH - 10_000_000),
            Some(early)
        );
        // 1601-01-01 itself would be 0 ("no time"), so it is clamped to 1.
        let year_1601 = UNIX_EPOCH - Duration::from_secs(FILETIME_UNIX_EPOCH / TICKS_PER_SECOND);
        assert_eq!(system_time_to_filetime(year_1601), 1);
    }

    #[test]
    fn basic_information_round_trip_and_golden() {
        let info = FileBasicInformation {
            creation_time: SAMPLE_TIME,
            last_access_time: 0,
            last_write_time: FILETIME_FREEZE,
            change_time: SAMPLE_TIME + 1,
            file_attributes: FileAttributes(FileAttributes::ARCHIVE | FileAttributes::HIDDEN),
        };
        let expected = "50fc82f9c39bda01 0000000000000000 ffffffffffffffff 51fc82f9c39bda01 \
                        22000000 00000000";
        assert_eq!(encoded(&info), expected.replace(' ', ""));
        assert_eq!(FileBasicInformation::decode(&hex(expected)).unwrap(), info);
        assert!(FileBasicInformation::decode(&hex(expected)[..36]).is_err());
    }

    #[test]
    fn standard_information() {
        let buf = hex("0010000000000000 0b00000000000000 01000000 00 00 0000");
        let info = FileStandardInformation::decode(&buf).unwrap();
        assert_eq!(
            info,
            FileStandardInformation {
                allocation_size: 4096,
                end_of_file: 11,
                number_of_links: 1,
                delete_pending: false,
                directory: false,
            }
        );
        let dir = hex("0000000000000000 0000000000000000 02000000 01 01 0000");
        let dir = FileStandardInformation::decode(&dir).unwrap();
        assert!(dir.directory && dir.delete_pending);
        assert_eq!(dir.number_of_links, 2);
        assert!(FileStandardInformation::decode(&buf[..23]).is_err());
    }

    #[test]
    fn internal_information() {
        let info = FileInternalInformation::decode(&hex("2a00e00100000000")).unwrap();
        assert_eq!(info.index_number, 0x01e0_002a);
        assert!(FileInternalInformation::decode(&hex("2a00e001")).is_err());
    }

    /// FileAllInformation for `\dir\a.txt` (11 bytes, one link) laid out as Samba sends it.
    fn sample_all_information() -> Bytes {
        hex(
            "50fc82f9c39bda01 50fc82f9c39bda01 50fc82f9c39bda01 50fc82f9c39bda01 \
             20000000 00000000 \
             0010000000000000 0b00000000000000 01000000 00 00 0000 \
             2a00e00100000000 \
             00000000 \
             8901 1200 \
             0000000000000000 \
             00000000 \
             00000000 \
             14000000 5c006400690072005c0061002e00740078007400",
        )
    }

    #[test]
    fn all_information() {
        let buf = sample_all_information();
        assert_eq!(buf.len(), FileAllInformation::FIXED_SIZE + 20);
        let info = FileAllInformation::decode(&buf).unwrap();
        assert_eq!(info.basic.creation_time, SAMPLE_TIME);
        assert_eq!(info.basic.change_time, SAMPLE_TIME);
        assert_eq!(
            info.basic.file_attributes,
            FileAttributes(FileAttributes::ARCHIVE)
        );
        assert_eq!(info.standard.allocation_size, 4096);
        assert_eq!(info.standard.end_of_file, 11);
        assert_eq!(info.standard.number_of_links, 1);
        assert!(!info.standard.directory);
        assert_eq!(info.index_number, 0x01e0_002a);
        assert_eq!(info.ea_size, 0);
        assert_eq!(info.access_flags, 0x0012_0189);
        assert_eq!(info.current_byte_offset, 0);
        assert_eq!(info.mode, 0);
        assert_eq!(info.alignment_requirement, 0);
        assert_eq!(info.name, "\\dir\\a.txt");
        assert!(!info.name_truncated);
    }

    #[test]
    fn all_information_truncated_name_and_malformed() {
        let buf = sample_all_information();
        // BUFFER_OVERFLOW: the server cut the name after 7 bytes; keep the 3 whole units.
        let cut = FileAllInformation::decode(&buf[..FileAllInformation::FIXED_SIZE + 7]).unwrap();
        assert_eq!(cut.name, "\\di");
        assert!(cut.name_truncated);
        // Fixed part missing.
        assert!(FileAllInformation::decode(&buf[..99]).is_err());
        // Odd FileNameLength.
        let mut odd = buf.to_vec();
        odd[96] = 0x13;
        assert!(matches!(
            FileAllInformation::decode(&odd),
            Err(DecodeError::BadString { .. })
        ));
        // Unpaired surrogate in the name.
        let mut bad = buf.to_vec();
        bad[100] = 0x00;
        bad[101] = 0xd8;
        assert!(FileAllInformation::decode(&bad).is_err());
    }

    #[test]
    fn network_open_information() {
        let buf = hex(
            "50fc82f9c39bda01 51fc82f9c39bda01 52fc82f9c39bda01 53fc82f9c39bda01 \
                       0000100000000000 0000100000000000 10000000 00000000",
        );
        let info = FileNetworkOpenInformation::decode(&buf).unwrap();
        assert_eq!(info.creation_time, SAMPLE_TIME);
        assert_eq!(info.last_access_time, SAMPLE_TIME + 1);
        assert_eq!(info.last_write_time, SAMPLE_TIME + 2);
        assert_eq!(info.change_time, SAMPLE_TIME + 3);
        assert_eq!(info.allocation_size, 0x10_0000);
        assert_eq!(info.end_of_file, 0x10_0000);
        assert!(info.file_attributes.is_directory());
        assert!(FileNetworkOpenInformation::decode(&buf[..55]).is_err());
    }

    #[test]
    fn set_info_encoders() {
        assert_eq!(
            encoded(&FileEndOfFileInformation {
                end_of_file: 0x1_0000_0001
            }),
            "0100000001000000"
        );
        assert_eq!(
            encoded(&FileAllocationInformation {
                allocation_size: 4096
            }),
            "0010000000000000"
        );
        assert_eq!(
            encoded(&FileDispositionInformation {
                delete_pending: true
            }),
            "01"
        );
        assert_eq!(
            encoded(&FileDispositionInformation {
                delete_pending: false
            }),
            "00"
        );
    }

    #[test]
    fn rename_information_golden() {
        let info = FileRenameInformation {
            replace_if_exists: true,
            file_name: "dir\\b.txt".into(),
        };
        let expected = "01 00000000000000 0000000000000000 12000000 \
                        6400690072005c0062002e00740078007400";
        assert_eq!(encoded(&info), expected.replace(' ', ""));
        let keep = FileRenameInformation {
            replace_if_exists: false,
            file_name: "x".into(),
        };
        assert_eq!(
            encoded(&keep),
            "00000000000000000000000000000000020000007800"
        );
    }

    #[test]
    fn fs_size_information() {
        let buf = hex("0000400000000000 0000100000000000 08000000 00020000");
        let info = FileFsSizeInformation::decode(&buf).unwrap();
        assert_eq!(info.total_allocation_units, 0x40_0000);
        assert_eq!(info.available_allocation_units, 0x10_0000);
        assert_eq!(info.sectors_per_allocation_unit, 8);
        assert_eq!(info.bytes_per_sector, 512);
        assert!(FileFsSizeInformation::decode(&buf[..20]).is_err());
    }

    #[test]
    fn fs_full_size_information() {
        let buf = hex("0000400000000000 0000100000000000 0000200000000000 08000000 00020000");
        let info = FileFsFullSizeInformation::decode(&buf).unwrap();
        assert_eq!(info.total_allocation_units, 0x40_0000);
        assert_eq!(info.caller_available_allocation_units, 0x10_0000);
        assert_eq!(info.actual_available_allocation_units, 0x20_0000);
        assert_eq!(info.sectors_per_allocation_unit, 8);
        assert_eq!(info.bytes_per_sector, 512);
        assert_eq!(info.bytes_per_allocation_unit(), 4096);
        assert!(FileFsFullSizeInformation::decode(&buf[..31]).is_err());
    }

    #[test]
    fn fs_attribute_information() {
        // Samba: case sensitive search | case preserved | unicode | persistent ACLs |
        // sparse | named streams ...
        let buf = hex("4f000400 ff000000 08000000 4e00540046005300");
        let info = FileFsAttributeInformation::decode(&buf).unwrap();
        assert_eq!(info.file_system_attributes, 0x0004_004f);
        assert_eq!(info.maximum_component_name_length, 255);
        assert_eq!(info.file_system_name, "NTFS");
        assert_ne!(
            info.file_system_attributes & FileFsAttributeInformation::NAMED_STREAMS,
            0
        );
        // Name longer than the buffer.
        assert!(FileFsAttributeInformation::decode(&buf[..18]).is_err());
        // Odd name length.
        let mut odd = buf.to_vec();
        odd[8] = 7;
        assert!(FileFsAttributeInformation::decode(&odd[..19]).is_err());
    }

    /// Build one FileIdBothDirectoryInformation entry by the MS-FSCC 2.4.17 layout.
    fn dir_entry(next: u32, name: &str, short: &str, attrs: u32, size: u64, id: u64) -> Vec<u8> {
        let mut e = BytesMut::new();
        e.put_u32_le(next);
        e.put_u32_le(0); // FileIndex
        for t in 0..4 {
            e.put_u64_le(SAMPLE_TIME + t);
        }
        e.put_u64_le(size); // EndOfFile
        e.put_u64_le(size.div_ceil(4096) * 4096); // AllocationSize
        e.put_u32_le(attrs);
        e.put_u32_le(utf16le_len(name) as u32);
        e.put_u32_le(0); // EaSize
        e.put_u8(utf16le_len(short) as u8);
        e.put_u8(0);
        let mut short_field = BytesMut::new();
        put_utf16le(&mut short_field, short);
        short_field.resize(24, 0);
        e.put_slice(&short_field);
        e.put_u16_le(0);
        e.put_u64_le(id);
        put_utf16le(&mut e, name);
        if next != 0 {
            e.resize(next as usize, 0);
        }
        e.to_vec()
    }

    fn sample_listing() -> Vec<u8> {
        let mut buf = dir_entry(112, ".", "", FileAttributes::DIRECTORY, 0, 0x10);
        buf.extend(dir_entry(112, "..", "", FileAttributes::DIRECTORY, 0, 0x02));
        buf.extend(dir_entry(
            0,
            "report.txt",
            "REPORT~1.TXT",
            FileAttributes::ARCHIVE,
            5000,
            0x77,
        ));
        buf
    }

    #[test]
    fn id_both_directory_golden_entry() {
        // One entry spelled out field by field: "a.txt", 3 bytes, last in the chain.
        let buf = hex("00000000 00000000 \
             50fc82f9c39bda01 51fc82f9c39bda01 52fc82f9c39bda01 53fc82f9c39bda01 \
             0300000000000000 0010000000000000 \
             20000000 0a000000 00000000 \
             00 00 000000000000000000000000000000000000000000000000 0000 \
             2a00e00100000000 \
             61002e00740078007400");
        let entries = decode_id_both_directory_information(&buf).unwrap();
        assert_eq!(
            entries,
            vec![DirectoryEntry {
                file_index: 0,
                creation_time: SAMPLE_TIME,
                last_access_time: SAMPLE_TIME + 1,
                last_write_time: SAMPLE_TIME + 2,
                change_time: SAMPLE_TIME + 3,
                end_of_file: 3,
                allocation_size: 4096,
                file_attributes: FileAttributes(FileAttributes::ARCHIVE),
                ea_size: 0,
                short_name: String::new(),
                file_id: 0x01e0_002a,
                file_name: "a.txt".into(),
            }]
        );
        assert_eq!(buf.len(), 114);
    }

    #[test]
    fn id_both_directory_chain() {
        let buf = sample_listing();
        let entries = decode_id_both_directory_information(&buf).unwrap();
        let names: Vec<_> = entries.iter().map(|e| e.file_name.as_str()).collect();
        assert_eq!(names, [".", "..", "report.txt"]);
        assert!(entries[0].file_attributes.is_directory());
        assert_eq!(entries[1].file_id, 2);
        let file = &entries[2];
        assert_eq!(file.short_name, "REPORT~1.TXT");
        assert_eq!(file.end_of_file, 5000);
        assert_eq!(file.allocation_size, 8192);
        assert_eq!(file.file_id, 0x77);
        assert_eq!(file.last_write_time, SAMPLE_TIME + 2);
        assert!(decode_id_both_directory_information(&[])
            .unwrap()
            .is_empty());
    }

    #[test]
    fn id_both_directory_unaligned_chain_is_accepted() {
        // 106-byte entry for "." followed directly (unaligned) by the next entry.
        let mut buf = dir_entry(106, ".", "", FileAttributes::DIRECTORY, 0, 1);
        buf.extend(dir_entry(0, "x", "", 0, 1, 2));
        let entries = decode_id_both_directory_information(&buf).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].file_name, "x");
    }

    #[test]
    fn id_both_directory_malformed() {
        let good = sample_listing();
        // NextEntryOffset past the end.
        let mut past = good.clone();
        past[224..228].copy_from_slice(&4000u32.to_le_bytes());
        assert!(matches!(
            decode_id_both_directory_information(&past),
            Err(DecodeError::BadOffset { .. })
        ));
        // NextEntryOffset that does not move past the fixed part (would loop or overlap).
        for next in [1u32, 8, 103] {
            let mut stuck = good.clone();
            stuck[0..4].copy_from_slice(&next.to_le_bytes());
            assert!(
                decode_id_both_directory_information(&stuck).is_err(),
                "next={next}"
            );
        }
        // FileNameLength running into the next entry.
        let mut long_name = good.clone();
        long_name[60..64].copy_from_slice(&10u32.to_le_bytes());
        assert!(matches!(
            decode_id_both_directory_information(&long_name),
            Err(DecodeError::Inconsistent { .. })
        ));
        // FileNameLength past the end of the last entry.
        let mut last_long = good.clone();
        last_long[224 + 60..224 + 64].copy_from_slice(&0x1000u32.to_le_bytes());
        assert!(decode_id_both_directory_information(&last_long).is_err());
        // ShortNameLength larger than its field.
        let mut short = good.clone();
        short[224 + 68] = 26;
        assert!(decode_id_both_directory_information(&short).is_err());
        // Truncated fixed part of the last entry.
        assert!(decode_id_both_directory_information(&good[..224 + 50]).is_err());
        // Odd name length.
        let mut odd = good.clone();
        odd[224 + 60..224 + 64].copy_from_slice(&3u32.to_le_bytes());
        assert!(decode_id_both_directory_information(&odd).is_err());
    }
}
