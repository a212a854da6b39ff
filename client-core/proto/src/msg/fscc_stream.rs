//! MS-FSCC 2.4.44 FileStreamInformation (class 22), the answer to QUERY_INFO about a file's
//! data streams: its default stream `::$DATA` and its alternate (named) data streams.

use crate::codec::{utf16le_to_string, DecodeError, Reader};
use crate::msg::fscc::{FileInformationClass, QueryFileInfo};

/// One FILE_STREAM_INFORMATION entry.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StreamEntry {
    /// StreamName as the server gives it: `::$DATA` for the default stream,
    /// `:name:$DATA` for a named one.
    pub name: String,
    /// StreamSize: the stream's length in bytes.
    pub size: u64,
    /// StreamAllocationSize: bytes allocated to it.
    pub allocation_size: u64,
}

/// The list of FILE_STREAM_INFORMATION entries (chained by NextEntryOffset). A file without
/// any data stream (a directory without named streams) gives an empty buffer.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FileStreamInformation {
    /// The entries, in the server's order.
    pub entries: Vec<StreamEntry>,
}

/// Fixed part of an entry: NextEntryOffset, StreamNameLength, StreamSize, StreamAllocationSize.
const ENTRY_FIXED: usize = 24;

impl QueryFileInfo for FileStreamInformation {
    const CLASS: FileInformationClass = FileInformationClass::STREAM;

    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut entries = Vec::new();
        let mut at = 0usize;
        while at < buf.len() {
            let mut r = Reader::at(buf, at)?;
            let next = r.u32("FILE_STREAM_INFORMATION NextEntryOffset")? as usize;
            let name_len = r.u32("FILE_STREAM_INFORMATION StreamNameLength")? as usize;
            let size = r.u64("FILE_STREAM_INFORMATION StreamSize")?;
            let allocation_size = r.u64("FILE_STREAM_INFORMATION StreamAllocationSize")?;
            let raw = r.bytes(name_len, "FILE_STREAM_INFORMATION StreamName")?;
            entries.push(StreamEntry {
                name: utf16le_to_string(raw, "FILE_STREAM_INFORMATION StreamName")?,
                size,
                allocation_size,
            });
            if next == 0 {
                break;
            }
            // The next entry must start after this one's name: a smaller offset would loop or
            // overlap (MS-FSCC 2.4.44 has entries 8-byte aligned and in order).
            if next < ENTRY_FIXED + name_len {
                return Err(DecodeError::Inconsistent {
                    what: "FILE_STREAM_INFORMATION",
                    detail: "NextEntryOffset points into the entry",
                });
            }
            at = at.checked_add(next).ok_or(DecodeError::Inconsistent {
                what: "FILE_STREAM_INFORMATION",
                detail: "NextEntryOffset overflows",
            })?;
            if at >= buf.len() {
                return Err(DecodeError::Inconsistent {
                    what: "FILE_STREAM_INFORMATION",
                    detail: "NextEntryOffset points past the buffer",
                });
            }
        }
        Ok(FileStreamInformation { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::test_util::hex;

    /// Two entries laid out by hand after MS-FSCC 2.4.44 (8-byte aligned, the last with
    /// NextEntryOffset 0), for a 6-byte file with a 6-byte stream `foo`, in the order Samba's
    /// streams_xattr lists them: the named stream first, then the default stream.
    const TWO: &str = "30000000 14000000 0600000000000000 0000000000000000 \
                       3a0066006f006f003a002400440041005400410000000000 \
                       00000000 0e000000 0600000000000000 0010000000000000 \
                       3a003a002400440041005400410000000000";

    #[test]
    fn decodes_named_and_default_streams() {
        let raw = hex(TWO);
        let info = FileStreamInformation::decode(&raw).unwrap();
        assert_eq!(
            info.entries,
            vec![
                StreamEntry {
                    name: ":foo:$DATA".into(),
                    size: 6,
                    allocation_size: 0
                },
                StreamEntry {
                    name: "::$DATA".into(),
                    size: 6,
                    allocation_size: 4096
                },
            ]
        );
        assert_eq!(FileStreamInformation::CLASS, FileInformationClass(22));
        assert_eq!(FileStreamInformation::decode(&[]).unwrap().entries, vec![]);
    }

    #[test]
    fn malformed_lists_fail_cleanly() {
        let raw = hex(TWO);
        for n in 1..raw.len() {
            let _ = FileStreamInformation::decode(&raw[..n]);
        }
        let mut bad = raw.to_vec();
        bad[0] = 8; // NextEntryOffset into the entry
        assert!(FileStreamInformation::decode(&bad).is_err());
        let mut bad = raw.to_vec();
        bad[0] = 0xf0; // past the buffer
        assert!(FileStreamInformation::decode(&bad).is_err());
        let mut bad = raw.to_vec();
        bad[4] = 0xff; // name longer than the buffer
        assert!(FileStreamInformation::decode(&bad).is_err());
        let mut bad = raw.to_vec();
        bad[4] = 0x0f; // odd name length
        assert!(FileStreamInformation::decode(&bad).is_err());
    }
}
