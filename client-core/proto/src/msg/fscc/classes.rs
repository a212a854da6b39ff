//! The class numbers that say which MS-FSCC structure a QUERY_INFO, SET_INFO or
//! QUERY_DIRECTORY carries, and the traits that tie each structure to its class.

use bytes::BytesMut;

use crate::codec::DecodeError;

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
    /// FilePosixInformation ([POSIX-FSCC] 2.3.1; see `msg::posix`), for QUERY_INFO on a
    /// POSIX open and QUERY_DIRECTORY on a POSIX directory open.
    pub const POSIX: Self = Self(100);
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
