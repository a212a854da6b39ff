//! Extended attributes (EAs): MS-FSCC 2.4.15 FILE_FULL_EA_INFORMATION, the list that
//! QUERY_INFO of FileFullEaInformation (class 15) returns and that SET_INFO of the same class
//! takes. A SET_INFO entry with an empty value removes that EA (MS-FSCC 2.4.15: "an EaValueLength
//! of zero ... deletes").
//!
//! Names are 8-bit strings with no NUL (MS-FSCC 2.4.15 EaName; at most 255 bytes, the width of
//! EaNameLength); values at most 65,535 bytes (EaValueLength). This module keeps names as the
//! bytes they are on the wire: what those bytes mean (ASCII on Windows; Samba's "dos charset")
//! is the caller's business.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::msg::fscc::{FileInformationClass, SetFileInfo};

/// The longest EA name: EaNameLength is one byte.
pub const MAX_EA_NAME_LEN: usize = 255;
/// The longest EA value: EaValueLength is two bytes.
pub const MAX_EA_VALUE_LEN: usize = 65_535;

/// FILE_NEED_EA (MS-FSCC 2.4.15 Flags): the file cannot be understood without this EA.
pub const FILE_NEED_EA: u8 = 0x80;

/// Fixed part of an entry: NextEntryOffset, Flags, EaNameLength, EaValueLength.
const ENTRY_FIXED: usize = 8;

/// One extended attribute.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FullEa {
    /// Flags (0 or [`FILE_NEED_EA`]).
    pub flags: u8,
    /// EaName, without its terminating NUL.
    pub name: Vec<u8>,
    /// EaValue; empty in a SET_INFO removes the EA.
    pub value: Bytes,
}

/// Why an EA cannot be sent: the wire has no room for it, or a NUL would end its name early.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum EaEncodeError {
    /// The name is empty, longer than 255 bytes or holds a NUL.
    #[error("an EA name must be 1-255 bytes without NUL")]
    BadName,
    /// The value is longer than 65,535 bytes.
    #[error("an EA value holds at most 65535 bytes")]
    ValueTooLong,
}

impl FullEa {
    /// Bytes this entry takes on the wire, before padding.
    fn wire_len(&self) -> usize {
        ENTRY_FIXED + self.name.len() + 1 + self.value.len()
    }

    fn check(&self) -> Result<(), EaEncodeError> {
        if self.name.is_empty() || self.name.len() > MAX_EA_NAME_LEN || self.name.contains(&0) {
            return Err(EaEncodeError::BadName);
        }
        if self.value.len() > MAX_EA_VALUE_LEN {
            return Err(EaEncodeError::ValueTooLong);
        }
        Ok(())
    }
}

/// A list of FILE_FULL_EA_INFORMATION entries, chained by NextEntryOffset.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FileFullEaInformation {
    /// The entries in the order they came (or are to be sent).
    pub entries: Vec<FullEa>,
}

impl FileFullEaInformation {
    /// A list ready to send, after checking that every entry fits its fields.
    pub fn new(entries: Vec<FullEa>) -> Result<Self, EaEncodeError> {
        for e in &entries {
            e.check()?;
        }
        Ok(FileFullEaInformation { entries })
    }

    /// Decode the QUERY_INFO output. Every entry must lie inside the buffer, its name must end
    /// with the NUL EaNameLength promises, and each NextEntryOffset must move past the entry
    /// it belongs to, so a hostile list can neither loop nor overlap.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut entries = Vec::new();
        let mut at = 0usize;
        while at < buf.len() {
            let mut r = Reader::at(buf, at)?;
            let next = r.u32("FILE_FULL_EA_INFORMATION NextEntryOffset")? as usize;
            let flags = r.u8("FILE_FULL_EA_INFORMATION Flags")?;
            let name_len = r.u8("FILE_FULL_EA_INFORMATION EaNameLength")? as usize;
            let value_len = r.u16("FILE_FULL_EA_INFORMATION EaValueLength")? as usize;
            let name = r.bytes(name_len, "FILE_FULL_EA_INFORMATION EaName")?;
            if r.u8("FILE_FULL_EA_INFORMATION EaName terminator")? != 0 {
                return Err(DecodeError::Inconsistent {
                    what: "FILE_FULL_EA_INFORMATION",
                    detail: "EaName does not end where EaNameLength says",
                });
            }
            if name.is_empty() || name.contains(&0) {
                return Err(DecodeError::Inconsistent {
                    what: "FILE_FULL_EA_INFORMATION",
                    detail: "EaName is empty or holds a NUL",
                });
            }
            let value = r.bytes(value_len, "FILE_FULL_EA_INFORMATION EaValue")?;
            entries.push(FullEa {
                flags,
                name: name.to_vec(),
                value: Bytes::copy_from_slice(value),
            });
            if next == 0 {
                break;
            }
            if next < ENTRY_FIXED + name_len + 1 + value_len {
                return Err(DecodeError::Inconsistent {
                    what: "FILE_FULL_EA_INFORMATION",
                    detail: "NextEntryOffset points into the entry",
                });
            }
            at = at.checked_add(next).ok_or(DecodeError::Inconsistent {
                what: "FILE_FULL_EA_INFORMATION",
                detail: "NextEntryOffset overflows",
            })?;
            if at >= buf.len() {
                return Err(DecodeError::Inconsistent {
                    what: "FILE_FULL_EA_INFORMATION",
                    detail: "NextEntryOffset points past the buffer",
                });
            }
        }
        Ok(FileFullEaInformation { entries })
    }
}

impl SetFileInfo for FileFullEaInformation {
    const CLASS: FileInformationClass = FileInformationClass::FULL_EA;

    /// Entries 4-byte aligned, as Windows writes them and Samba's reader expects; the last
    /// has NextEntryOffset 0 and no padding.
    fn encode(&self, out: &mut BytesMut) {
        let count = self.entries.len();
        for (i, e) in self.entries.iter().enumerate() {
            let len = e.wire_len();
            let padded = if i + 1 < count {
                len.div_ceil(4) * 4
            } else {
                0
            };
            out.put_u32_le(padded as u32);
            out.put_u8(e.flags);
            out.put_u8(e.name.len() as u8);
            out.put_u16_le(e.value.len() as u16);
            out.put_slice(&e.name);
            out.put_u8(0);
            out.put_slice(&e.value);
            if padded > len {
                out.put_bytes(0, padded - len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::test_util::hex;

    fn ea(name: &str, value: &str) -> FullEa {
        FullEa {
            flags: 0,
            name: name.as_bytes().to_vec(),
            value: Bytes::copy_from_slice(value.as_bytes()),
        }
    }

    fn encoded(list: &FileFullEaInformation) -> Vec<u8> {
        let mut out = BytesMut::new();
        list.encode(&mut out);
        out.to_vec()
    }

    /// Laid out by hand after MS-FSCC 2.4.15: "ab" = "xyz" padded to 12 bytes (8 + 2 + 1 + 3 =
    /// 14 → 16), then "c" with an empty value (a removal), last and unpadded.
    #[test]
    fn golden_bytes() {
        let list = FileFullEaInformation::new(vec![ea("ab", "xyz"), ea("c", "")]).unwrap();
        assert_eq!(
            encoded(&list),
            hex("1000000000020300616200\
                 78797a0000\
                 0000000000010000\
                 6300")
        );
        assert_eq!(
            FileFullEaInformation::decode(&encoded(&list)).unwrap(),
            list
        );
    }

    #[test]
    fn what_the_fields_cannot_hold_is_refused_before_sending() {
        let long = "n".repeat(256);
        for bad in [ea("", "v"), ea(&long, "v"), ea("a\0b", "v")] {
            assert_eq!(
                FileFullEaInformation::new(vec![bad]),
                Err(EaEncodeError::BadName)
            );
        }
        let big = FullEa {
            value: Bytes::from(vec![1u8; 65_536]),
            ..ea("big", "")
        };
        assert_eq!(
            FileFullEaInformation::new(vec![big]),
            Err(EaEncodeError::ValueTooLong)
        );
        let longest = ea(&"n".repeat(255), "");
        assert!(FileFullEaInformation::new(vec![longest]).is_ok());
    }

    #[test]
    fn a_hostile_list_is_refused() {
        let good =
            encoded(&FileFullEaInformation::new(vec![ea("ab", "xyz"), ea("c", "v")]).unwrap());
        // The first entry's NextEntryOffset pointing back into itself, or past the end.
        for next in [4u32, 0x1000, u32::MAX] {
            let mut b = good.clone();
            b[..4].copy_from_slice(&next.to_le_bytes());
            assert!(FileFullEaInformation::decode(&b).is_err(), "next {next}");
        }
        // A name length running past the terminator.
        let mut b = good.clone();
        b[5] = 3;
        assert!(FileFullEaInformation::decode(&b).is_err());
        // A value length past the buffer.
        let mut b = good.clone();
        b[6..8].copy_from_slice(&0xffffu16.to_le_bytes());
        assert!(FileFullEaInformation::decode(&b).is_err());
        // An empty name.
        let mut b = good[16..].to_vec();
        b[5] = 0;
        assert!(FileFullEaInformation::decode(&b).is_err());
        // Truncated anywhere.
        for cut in 1..good.len() {
            assert!(
                FileFullEaInformation::decode(&good[..cut]).is_err(),
                "{cut}"
            );
        }
        assert_eq!(FileFullEaInformation::decode(&[]).unwrap().entries, vec![]);
    }
}
