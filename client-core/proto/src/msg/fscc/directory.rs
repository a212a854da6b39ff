//! Directory listings: the FileIdBothDirectoryInformation entries (MS-FSCC 2.4.17) a
//! QUERY_DIRECTORY returns.

use super::attributes::FileAttributes;
use crate::codec::{utf16le_to_string, DecodeError, EntryChain, Reader};

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
/// QUERY_DIRECTORY with class
/// [`FileInformationClass::ID_BOTH_DIRECTORY`](super::FileInformationClass::ID_BOTH_DIRECTORY).
///
/// Entries are chained by NextEntryOffset (0 on the last). Each offset must move forward past
/// the entry's fixed part and stay inside the buffer; entries are usually 8-byte aligned but an
/// unaligned chain that stays in bounds is accepted. Every name must lie inside its entry.
pub fn decode_id_both_directory_information(
    buf: &[u8],
) -> Result<Vec<DirectoryEntry>, DecodeError> {
    let chain = EntryChain {
        min_entry: ID_BOTH_DIR_FIXED,
        align: 1,
        what_next: "FileIdBothDirectoryInformation.NextEntryOffset",
        what: "FileIdBothDirectoryInformation",
    };
    chain.decode(buf, |entry, _| decode_id_both_entry(entry))
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
    use super::super::SAMPLE_TIME;
    use super::*;
    use crate::codec::{put_utf16le, utf16le_len};
    use crate::msg::test_util::hex;
    use bytes::{BufMut, BytesMut};

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
