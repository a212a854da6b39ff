//! File attributes (MS-FSCC 2.6), as CREATE, CLOSE, QUERY_INFO and QUERY_DIRECTORY carry them.

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
