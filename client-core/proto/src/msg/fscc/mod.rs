//! MS-FSCC information structures carried by QUERY_INFO, SET_INFO and QUERY_DIRECTORY, one
//! topic per module: FILETIME (`time`), file attributes (MS-FSCC 2.6, `attributes`), the
//! class numbers and the traits that tie a structure to its class (`classes`), file
//! information classes (MS-FSCC 2.4, `file_info`), file system information classes
//! (MS-FSCC 2.5, `fs_info`) and directory listings (`directory`). Everything is used
//! through this module's re-exports.
//!
//! Decoders take the output buffer of a response (not the whole message) and check every
//! length against the bytes present. Fixed-size structures accept trailing bytes (servers may
//! pad the output buffer) but never fewer bytes than the structure needs.
//!
//! MS-FSCC renumbers its sections between revisions (FileStandardInformation is 2.4.41 in some,
//! 2.4.45 in others); the structure names in the doc comments are the stable reference.

mod attributes;
mod classes;
mod directory;
mod file_info;
mod fs_info;
mod time;

pub use attributes::FileAttributes;
pub use classes::{
    FileInformationClass, FsInformationClass, QueryFileInfo, QueryFsInfo, SetFileInfo,
};
pub use directory::{decode_id_both_directory_information, DirectoryEntry};
pub use file_info::{
    FileAllInformation, FileAllocationInformation, FileBasicInformation,
    FileDispositionInformation, FileEndOfFileInformation, FileInternalInformation,
    FileNetworkOpenInformation, FileRenameInformation, FileStandardInformation,
};
pub use fs_info::{FileFsAttributeInformation, FileFsFullSizeInformation, FileFsSizeInformation};
pub use time::{
    filetime_to_system_time, system_time_to_filetime, FILETIME_FREEZE, FILETIME_UNCHANGED,
    FILETIME_UNFREEZE, FILETIME_UNIX_EPOCH,
};

/// 2024-05-01T12:34:56.789Z as Samba would report it (100 ns resolution): the time stamp of
/// the tests' samples.
#[cfg(test)]
const SAMPLE_TIME: u64 = 0x01da_9bc3_f982_fc50;
