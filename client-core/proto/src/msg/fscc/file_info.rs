//! File information classes (MS-FSCC 2.4) read with QUERY_INFO and written with SET_INFO.

use bytes::{BufMut, BytesMut};

use super::attributes::FileAttributes;
use super::classes::{FileInformationClass, QueryFileInfo, SetFileInfo};
use crate::codec::{put_utf16le, utf16le_len, utf16le_to_string, DecodeError, Reader};

/// MS-FSCC 2.4.7 FileBasicInformation (class 4): times and attributes, 40 bytes. In SET_INFO a
/// time of [`FILETIME_UNCHANGED`](super::FILETIME_UNCHANGED) (0) and attributes of 0 leave the
/// value unchanged.
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

#[cfg(test)]
mod tests {
    use super::super::time::FILETIME_FREEZE;
    use super::super::SAMPLE_TIME;
    use super::*;
    use crate::msg::test_util::hex;
    use bytes::Bytes;

    fn encoded<T: SetFileInfo>(info: &T) -> String {
        let mut out = BytesMut::new();
        info.encode(&mut out);
        hex::encode(out)
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
}
