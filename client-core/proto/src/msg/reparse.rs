//! Reparse points: the FSCTLs that read, set and remove them (MS-FSCC 2.3.27/2.3.28
//! FSCTL_GET_REPARSE_POINT, 2.3.81 FSCTL_SET_REPARSE_POINT, 2.3.5 FSCTL_DELETE_REPARSE_POINT)
//! and what they carry, the REPARSE_DATA_BUFFER (MS-FSCC 2.1.2.2; the tags are 2.1.2.1), in
//! the two forms a Unix client needs: the symbolic link (2.1.2.4) and the NFS special file
//! (2.1.2.6: a FIFO, a socket, a character or block device, or another symbolic link form).
//!
//! The buffer is an 8-byte header (ReparseTag, ReparseDataLength, Reserved) and
//! ReparseDataLength bytes of data. GET answers with one; SET takes one; DELETE takes the
//! header alone (ReparseDataLength 0) naming the tag to remove.
//!
//! Everything here is decoded from what a server sent: every length and offset is checked
//! against the bytes present, names must be whole, valid UTF-16, and nothing is allocated from
//! a length before it is checked. What a name then means (a target to follow, or not) is the
//! caller's business: this module returns it as it is.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{put_utf16le, utf16le_len, utf16le_to_string, DecodeError, Reader};

/// FSCTL_SET_REPARSE_POINT (MS-FSCC 2.3.81): give the open file a reparse point; input a
/// REPARSE_DATA_BUFFER, no output. The handle needs write access (Samba: FILE_WRITE_DATA or
/// FILE_WRITE_ATTRIBUTES).
pub const FSCTL_SET_REPARSE_POINT: u32 = 0x0009_00A4;
/// FSCTL_GET_REPARSE_POINT (MS-FSCC 2.3.27): the open file's reparse point; no input, output a
/// REPARSE_DATA_BUFFER. A file without one: STATUS_NOT_A_REPARSE_POINT.
pub const FSCTL_GET_REPARSE_POINT: u32 = 0x0009_00A8;
/// FSCTL_DELETE_REPARSE_POINT (MS-FSCC 2.3.5): remove the open file's reparse point; input the
/// 8-byte header naming its tag ([`encode_delete`]), no output.
pub const FSCTL_DELETE_REPARSE_POINT: u32 = 0x0009_00AC;

/// IO_REPARSE_TAG_SYMLINK (MS-FSCC 2.1.2.1): a symbolic link ([`SymlinkReparse`]).
pub const IO_REPARSE_TAG_SYMLINK: u32 = 0xA000_000C;
/// IO_REPARSE_TAG_NFS (MS-FSCC 2.1.2.1): an NFS special file ([`NfsReparse`]).
pub const IO_REPARSE_TAG_NFS: u32 = 0x8000_0014;
/// IO_REPARSE_TAG_DFS (MS-FSCC 2.1.2.1): a DFS link in a namespace's root; listings of a DFS
/// share show each link as a directory with this tag.
pub const IO_REPARSE_TAG_DFS: u32 = 0x8000_000A;

/// The Microsoft bit of a reparse tag (MS-FSCC 2.1.2.1): set on Microsoft's tags, whose
/// buffer is a REPARSE_DATA_BUFFER; clear on a third party's, whose buffer carries a GUID.
pub const TAG_MICROSOFT: u32 = 0x8000_0000;

/// SYMLINK_FLAG_RELATIVE (MS-FSCC 2.1.2.4): the substitute name is relative to the
/// directory holding the link.
pub const SYMLINK_FLAG_RELATIVE: u32 = 0x0000_0001;

/// NFS_SPECFILE_LNK (MS-FSCC 2.1.2.6): a symbolic link; the data is its target in UTF-16.
pub const NFS_SPECFILE_LNK: u64 = 0x0000_0000_014B_4E4C;
/// NFS_SPECFILE_CHR: a character device; the data is its major and minor numbers.
pub const NFS_SPECFILE_CHR: u64 = 0x0000_0000_0052_4843;
/// NFS_SPECFILE_BLK: a block device; the data is its major and minor numbers.
pub const NFS_SPECFILE_BLK: u64 = 0x0000_0000_004B_4C42;
/// NFS_SPECFILE_FIFO: a FIFO (named pipe); no data.
pub const NFS_SPECFILE_FIFO: u64 = 0x0000_0000_4F46_4946;
/// NFS_SPECFILE_SOCK: a Unix domain socket; no data.
pub const NFS_SPECFILE_SOCK: u64 = 0x0000_0000_4B43_4F53;

/// The REPARSE_DATA_BUFFER header: ReparseTag (4), ReparseDataLength (2), Reserved (2).
pub const HEADER_LEN: usize = 8;
/// The ReparseGuid of a REPARSE_GUID_DATA_BUFFER.
const GUID_LEN: usize = 16;
/// The fixed part of the symbolic link data: four 16-bit name offsets and lengths, Flags.
const SYMLINK_FIXED_LEN: usize = 12;
/// The most a reparse point holds: ReparseDataLength is 16 bits (MS-FSCC 2.1.2.2). Windows
/// caps the whole buffer lower (16 KiB, MAXIMUM_REPARSE_DATA_BUFFER_SIZE; MS-FSA 2.1.5.10.37
/// refuses a longer SET); Samba keeps up to this much, and what it builds for an on-disk
/// symlink of PATH_MAX bytes is just over 16 KiB.
pub const MAX_REPARSE_BUFFER_LEN: usize = HEADER_LEN + u16::MAX as usize;

/// The symbolic link reparse data (MS-FSCC 2.1.2.4).
///
/// Windows and Samba read the target from `substitute_name`; `print_name` is what a user is
/// shown. Both are returned exactly as the server sent them (`\` separators as a rule, but
/// Samba gives an on-disk symlink's target with its `/`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SymlinkReparse {
    /// SubstituteName: the target.
    pub substitute_name: String,
    /// PrintName: the target as shown to a user.
    pub print_name: String,
    /// Flags: [`SYMLINK_FLAG_RELATIVE`], and bits this crate does not know (kept as they
    /// are; Samba adds 0x20000000, "created by an administrator", in symlink error replies).
    pub flags: u32,
}

impl SymlinkReparse {
    /// Whether the target is relative to the directory holding the link.
    pub fn is_relative(&self) -> bool {
        self.flags & SYMLINK_FLAG_RELATIVE != 0
    }
}

/// The NFS reparse data (MS-FSCC 2.1.2.6): a 64-bit type, then what that type carries.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum NfsReparse {
    /// NFS_SPECFILE_LNK: a symbolic link to this target (no terminator on the wire).
    Symlink(String),
    /// NFS_SPECFILE_CHR: a character device.
    CharDevice {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
    /// NFS_SPECFILE_BLK: a block device.
    BlockDevice {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
    /// NFS_SPECFILE_FIFO: a FIFO.
    Fifo,
    /// NFS_SPECFILE_SOCK: a Unix domain socket.
    Socket,
}

impl NfsReparse {
    /// The NFS_SPECFILE_* type number.
    pub fn type_code(&self) -> u64 {
        match self {
            NfsReparse::Symlink(_) => NFS_SPECFILE_LNK,
            NfsReparse::CharDevice { .. } => NFS_SPECFILE_CHR,
            NfsReparse::BlockDevice { .. } => NFS_SPECFILE_BLK,
            NfsReparse::Fifo => NFS_SPECFILE_FIFO,
            NfsReparse::Socket => NFS_SPECFILE_SOCK,
        }
    }
}

/// A REPARSE_DATA_BUFFER (MS-FSCC 2.1.2.2), decoded by its tag.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ReparseData {
    /// IO_REPARSE_TAG_SYMLINK.
    Symlink(SymlinkReparse),
    /// IO_REPARSE_TAG_NFS.
    Nfs(NfsReparse),
    /// Any other tag (a mount point, a deduplicated file, a cloud placeholder, ...): its data
    /// undecoded.
    Other {
        /// ReparseTag.
        tag: u32,
        /// The ReparseGuid of a third-party tag (one without the Microsoft bit,
        /// [`TAG_MICROSOFT`]), whose buffer is a REPARSE_GUID_DATA_BUFFER (MS-FSCC 2.1.2.3):
        /// the header, this GUID, then the data. `None` for a Microsoft tag.
        guid: Option<[u8; 16]>,
        /// The ReparseDataLength bytes of data.
        data: Bytes,
    },
}

/// Why a reparse point could not be encoded: a name or the whole buffer is longer than its
/// 16-bit length field can say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReparseEncodeError {
    /// A field is longer than the 65535 bytes its length field holds.
    #[error("reparse point {what} of {bytes} bytes is longer than the 65535 its length holds")]
    TooLong {
        /// The name, or "data" for the whole ReparseDataLength.
        what: &'static str,
        /// The length it would have.
        bytes: usize,
    },
}

impl ReparseData {
    /// The ReparseTag.
    pub fn tag(&self) -> u32 {
        match self {
            ReparseData::Symlink(_) => IO_REPARSE_TAG_SYMLINK,
            ReparseData::Nfs(_) => IO_REPARSE_TAG_NFS,
            ReparseData::Other { tag, .. } => *tag,
        }
    }

    /// The FSCTL_SET_REPARSE_POINT input. A symbolic link's SubstituteName comes first in the
    /// PathBuffer, its PrintName right after (Samba's layout; Windows writes the PrintName
    /// first, and readers follow the offsets either way). Reserved is 0.
    pub fn encode(&self) -> Result<Bytes, ReparseEncodeError> {
        let mut data = BytesMut::new();
        match self {
            ReparseData::Symlink(link) => {
                let subst = len16("SubstituteName", utf16le_len(&link.substitute_name))?;
                let print = len16("PrintName", utf16le_len(&link.print_name))?;
                data.put_u16_le(0); // SubstituteNameOffset
                data.put_u16_le(subst);
                data.put_u16_le(subst); // PrintNameOffset
                data.put_u16_le(print);
                data.put_u32_le(link.flags);
                put_utf16le(&mut data, &link.substitute_name);
                put_utf16le(&mut data, &link.print_name);
            }
            ReparseData::Nfs(nfs) => {
                data.put_u64_le(nfs.type_code());
                match nfs {
                    NfsReparse::Symlink(target) => put_utf16le(&mut data, target),
                    NfsReparse::CharDevice { major, minor }
                    | NfsReparse::BlockDevice { major, minor } => {
                        data.put_u32_le(*major);
                        data.put_u32_le(*minor);
                    }
                    NfsReparse::Fifo | NfsReparse::Socket => {}
                }
            }
            ReparseData::Other { data: raw, .. } => data.put_slice(raw),
        }
        let data_len = len16("data", data.len())?;
        let mut out = BytesMut::with_capacity(HEADER_LEN + GUID_LEN + data.len());
        out.put_u32_le(self.tag());
        out.put_u16_le(data_len);
        out.put_u16_le(0); // Reserved
        if let ReparseData::Other {
            guid: Some(guid), ..
        } = self
        {
            out.put_slice(guid);
        }
        out.put_slice(&data);
        Ok(out.freeze())
    }

    /// Decode the FSCTL_GET_REPARSE_POINT output: exactly one REPARSE_DATA_BUFFER (or, for a
    /// third-party tag, REPARSE_GUID_DATA_BUFFER), whose ReparseDataLength must account for
    /// every byte after the header (and GUID): Windows and Samba check the same on SET.
    /// Reserved is ignored.
    pub fn decode(buf: &[u8]) -> Result<ReparseData, DecodeError> {
        let mut r = Reader::new(buf);
        let tag = r.u32("REPARSE_DATA_BUFFER ReparseTag")?;
        let data_len = r.u16("REPARSE_DATA_BUFFER ReparseDataLength")? as usize;
        r.skip(2, "REPARSE_DATA_BUFFER Reserved")?;
        let guid = match tag & TAG_MICROSOFT {
            0 => Some(r.guid("REPARSE_GUID_DATA_BUFFER ReparseGuid")?),
            _ => None,
        };
        let data = r.bytes(data_len, "REPARSE_DATA_BUFFER data")?;
        r.finish("REPARSE_DATA_BUFFER")?;
        match tag {
            IO_REPARSE_TAG_SYMLINK => decode_symlink(data).map(ReparseData::Symlink),
            IO_REPARSE_TAG_NFS => decode_nfs(data).map(ReparseData::Nfs),
            _ => Ok(ReparseData::Other {
                tag,
                guid,
                data: Bytes::copy_from_slice(data),
            }),
        }
    }
}

/// The FSCTL_DELETE_REPARSE_POINT input: the header alone, ReparseDataLength 0, naming the tag
/// the file carries (a server refuses another: STATUS_IO_REPARSE_TAG_MISMATCH).
pub fn encode_delete(tag: u32) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_LEN);
    out.put_u32_le(tag);
    out.put_u16_le(0); // ReparseDataLength
    out.put_u16_le(0); // Reserved
    out.freeze()
}

fn len16(what: &'static str, bytes: usize) -> Result<u16, ReparseEncodeError> {
    u16::try_from(bytes).map_err(|_| ReparseEncodeError::TooLong { what, bytes })
}

/// The symbolic link data: the fixed 12 bytes, then the PathBuffer both names lie in.
fn decode_symlink(data: &[u8]) -> Result<SymlinkReparse, DecodeError> {
    let mut r = Reader::new(data);
    let subst_offset = r.u16("symlink SubstituteNameOffset")? as usize;
    let subst_len = r.u16("symlink SubstituteNameLength")? as usize;
    let print_offset = r.u16("symlink PrintNameOffset")? as usize;
    let print_len = r.u16("symlink PrintNameLength")? as usize;
    let flags = r.u32("symlink Flags")?;
    // The offsets count from the start of the PathBuffer, which is the rest of the data.
    let path_buffer = Reader::new(&data[SYMLINK_FIXED_LEN..]);
    let name = |offset, len, what| {
        let raw = path_buffer.slice_at(offset, len, what)?;
        utf16le_to_string(raw, what)
    };
    Ok(SymlinkReparse {
        substitute_name: name(subst_offset, subst_len, "symlink SubstituteName")?,
        print_name: name(print_offset, print_len, "symlink PrintName")?,
        flags,
    })
}

/// The NFS data: the type, then exactly what the type carries.
fn decode_nfs(data: &[u8]) -> Result<NfsReparse, DecodeError> {
    let mut r = Reader::new(data);
    let kind = r.u64("NFS reparse Type")?;
    let nfs = match kind {
        NFS_SPECFILE_LNK => {
            let raw = r.bytes(r.remaining(), "NFS symlink target")?;
            NfsReparse::Symlink(utf16le_to_string(raw, "NFS symlink target")?)
        }
        NFS_SPECFILE_CHR => NfsReparse::CharDevice {
            major: r.u32("NFS device major")?,
            minor: r.u32("NFS device minor")?,
        },
        NFS_SPECFILE_BLK => NfsReparse::BlockDevice {
            major: r.u32("NFS device major")?,
            minor: r.u32("NFS device minor")?,
        },
        NFS_SPECFILE_FIFO => NfsReparse::Fifo,
        NFS_SPECFILE_SOCK => NfsReparse::Socket,
        other => {
            return Err(DecodeError::InvalidValue {
                what: "NFS reparse Type",
                value: other,
            })
        }
    };
    r.finish("NFS reparse data")?;
    Ok(nfs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::test_util::hex;

    fn link(substitute: &str, print: &str, flags: u32) -> ReparseData {
        ReparseData::Symlink(SymlinkReparse {
            substitute_name: substitute.into(),
            print_name: print.into(),
            flags,
        })
    }

    #[test]
    fn fsctl_codes() {
        // MS-FSCC 2.3: FSCTL_FILESYSTEM (0x90000) | function << 2, METHOD_BUFFERED,
        // FILE_ANY_ACCESS; Samba's smb_constants.h has the same values.
        assert_eq!(FSCTL_SET_REPARSE_POINT, 0x9_0000 | 41 << 2);
        assert_eq!(FSCTL_GET_REPARSE_POINT, 0x9_0000 | 42 << 2);
        assert_eq!(FSCTL_DELETE_REPARSE_POINT, 0x9_0000 | 43 << 2);
        // The NFS types are their names in ASCII, little-endian.
        assert_eq!(&NFS_SPECFILE_LNK.to_le_bytes()[..4], b"LNK\x01");
        assert_eq!(&NFS_SPECFILE_CHR.to_le_bytes()[..4], b"CHR\0");
        assert_eq!(&NFS_SPECFILE_BLK.to_le_bytes()[..4], b"BLK\0");
        assert_eq!(&NFS_SPECFILE_FIFO.to_le_bytes()[..4], b"FIFO");
        assert_eq!(&NFS_SPECFILE_SOCK.to_le_bytes()[..4], b"SOCK");
    }

    /// A relative symlink to "bar" as Windows writes it: the PrintName first in the
    /// PathBuffer, the SubstituteName after it (the buffer of Samba's
    /// python/samba/tests/smb2symlink.py, "coming from Windows").
    #[test]
    fn decodes_a_windows_symlink() {
        let buf = hex("0c0000a0 1800 0000
             0600 0600 0000 0600 01000000
             620061007200 620061007200");
        let got = ReparseData::decode(&buf).unwrap();
        assert_eq!(got, link("bar", "bar", SYMLINK_FLAG_RELATIVE));
        let ReparseData::Symlink(l) = got else {
            unreachable!()
        };
        assert!(l.is_relative());
    }

    /// Samba's layout (libcli/smb/reparse.c): the SubstituteName first. What its own client
    /// sends for `symlink_put("y", "y", 0, 0)` and what it answers for an on-disk symlink
    /// with a relative target (flag set, `/` as it is on disk).
    #[test]
    fn symlink_golden_bytes() {
        let y = link("y", "y", 0);
        let bytes = y.encode().unwrap();
        assert_eq!(
            hex::encode(&bytes),
            "0c0000a0 1000 0000 0000 0200 0200 0200 00000000 7900 7900".replace(' ', "")
        );
        assert_eq!(ReparseData::decode(&bytes).unwrap(), y);

        let rel = link("../a/b", "../a/b", SYMLINK_FLAG_RELATIVE);
        let bytes = rel.encode().unwrap();
        assert_eq!(
            hex::encode(&bytes),
            concat!(
                "0c0000a0",
                "2400",
                "0000", // tag, 12 + 2 * 12 bytes, Reserved
                "0000",
                "0c00",
                "0c00",
                "0c00",
                "01000000",                 // offsets, lengths, RELATIVE
                "2e002e002f0061002f006200", // "../a/b"
                "2e002e002f0061002f006200",
            )
        );
        assert_eq!(ReparseData::decode(&bytes).unwrap(), rel);

        // Names of their own, unicode beyond the BMP, an empty PrintName.
        let odd = link("\\dé\\🎉", "", 0x2000_0000);
        let bytes = odd.encode().unwrap();
        assert_eq!(ReparseData::decode(&bytes).unwrap(), odd);
        assert_eq!(
            &bytes[8..12],
            [0, 0, 12, 0],
            "SubstituteName at 0, 12 bytes"
        );
        assert_eq!(&bytes[12..16], [12, 0, 0, 0], "PrintName at 12, empty");
    }

    #[test]
    fn nfs_golden_bytes() {
        let cases: [(NfsReparse, &str); 5] = [
            (NfsReparse::Fifo, "14000080 0800 0000 4649464f00000000"),
            (NfsReparse::Socket, "14000080 0800 0000 534f434b00000000"),
            (
                NfsReparse::CharDevice { major: 1, minor: 3 },
                "14000080 1000 0000 4348520000000000 01000000 03000000",
            ),
            (
                NfsReparse::BlockDevice {
                    major: 8,
                    minor: 0x10_0001,
                },
                "14000080 1000 0000 424c4b0000000000 08000000 01001000",
            ),
            (
                NfsReparse::Symlink("a/b".into()),
                "14000080 0e00 0000 4c4e4b0100000000 61002f006200",
            ),
        ];
        for (nfs, wire) in cases {
            let data = ReparseData::Nfs(nfs);
            let bytes = data.encode().unwrap();
            assert_eq!(hex::encode(&bytes), wire.replace(' ', ""), "{data:?}");
            assert_eq!(ReparseData::decode(&bytes).unwrap(), data);
        }
    }

    #[test]
    fn other_tags_and_delete() {
        // Samba's tests set tag 0x80000025 with 24 bytes of ASCII.
        let other = ReparseData::Other {
            tag: 0x8000_0025,
            guid: None,
            data: Bytes::from_static(b"asdfasdfasdfasdfasdfasdf"),
        };
        let bytes = other.encode().unwrap();
        assert_eq!(&bytes[..8], hex("25000080 1800 0000"));
        assert_eq!(ReparseData::decode(&bytes).unwrap(), other);
        assert_eq!(
            hex::encode(encode_delete(IO_REPARSE_TAG_SYMLINK)),
            "0c0000a000000000"
        );
        assert_eq!(
            ReparseData::decode(&encode_delete(0x8000_0007)).unwrap(),
            ReparseData::Other {
                tag: 0x8000_0007,
                guid: None,
                data: Bytes::new()
            }
        );
        // A third party's tag (no Microsoft bit): a GUID after the header, not counted in
        // ReparseDataLength (REPARSE_GUID_DATA_BUFFER).
        let third = ReparseData::Other {
            tag: 0x0000_1234,
            guid: Some([0xab; 16]),
            data: Bytes::from_static(b"xyz"),
        };
        let bytes = third.encode().unwrap();
        assert_eq!(
            hex::encode(&bytes),
            format!("34120000 0300 0000 {} 78797a", "ab".repeat(16)).replace(' ', "")
        );
        assert_eq!(ReparseData::decode(&bytes).unwrap(), third);
        // Without its GUID, or with the data counted short, it does not decode.
        assert!(matches!(
            ReparseData::decode(&hex("34120000 0300 0000 78797a")),
            Err(DecodeError::Truncated { .. })
        ));
        let mut short = bytes.to_vec();
        short[4] = 2;
        assert!(matches!(
            ReparseData::decode(&short),
            Err(DecodeError::Inconsistent { .. })
        ));
    }

    #[test]
    fn names_too_long_for_their_fields_are_not_encoded() {
        let long = "x".repeat(32768); // 65536 bytes of UTF-16
        assert_eq!(
            link(&long, "", 0).encode(),
            Err(ReparseEncodeError::TooLong {
                what: "SubstituteName",
                bytes: 65536
            })
        );
        // Each name fits, the two do not.
        let half = "x".repeat(20000);
        assert!(matches!(
            link(&half, &half, 0).encode(),
            Err(ReparseEncodeError::TooLong { what: "data", .. })
        ));
        assert!(ReparseData::Nfs(NfsReparse::Symlink(long))
            .encode()
            .is_err());
        // The largest that fits does, and reads back.
        let most = "x".repeat((u16::MAX as usize - 12) / 4);
        let bytes = link(&most, &most, 0).encode().unwrap();
        assert!(bytes.len() <= MAX_REPARSE_BUFFER_LEN);
        assert_eq!(ReparseData::decode(&bytes).unwrap(), link(&most, &most, 0));
    }

    #[test]
    fn truncated_and_inconsistent_buffers_fail() {
        // Shorter than the header.
        for n in 0..HEADER_LEN {
            assert!(matches!(
                ReparseData::decode(&[0x0c, 0, 0, 0xa0, 0, 0, 0, 0][..n]),
                Err(DecodeError::Truncated { .. })
            ));
        }
        let good = link("target", "target", 1).encode().unwrap();
        // ReparseDataLength past the end, or short of it.
        let mut longer = good.to_vec();
        longer[4] += 2;
        assert!(matches!(
            ReparseData::decode(&longer),
            Err(DecodeError::Truncated { .. })
        ));
        let mut trailing = good.to_vec();
        trailing.extend_from_slice(&[0, 0]);
        assert!(matches!(
            ReparseData::decode(&trailing),
            Err(DecodeError::Inconsistent { .. })
        ));
        // Every cut of the buffer fails, none panics.
        for n in 0..good.len() {
            assert!(ReparseData::decode(&good[..n]).is_err(), "cut at {n}");
        }
        // A symlink whose data is shorter than its fixed part.
        assert!(matches!(
            ReparseData::decode(&hex("0c0000a0 0800 0000 0000 0200 0200 0200")),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn names_outside_the_path_buffer_fail() {
        // SubstituteNameOffset + Length past the PathBuffer (4 bytes).
        let past = hex("0c0000a0 1000 0000 0200 0400 0000 0200 00000000 79007900");
        assert!(matches!(
            ReparseData::decode(&past),
            Err(DecodeError::BadOffset { .. })
        ));
        // A PrintName that claims 64 KiB.
        let huge = hex("0c0000a0 1000 0000 0000 0200 0000 ffff 00000000 79007900");
        assert!(matches!(
            ReparseData::decode(&huge),
            Err(DecodeError::BadOffset { .. })
        ));
        // An offset that would overflow if added carelessly.
        let far = hex("0c0000a0 1000 0000 ffff ffff 0000 0000 00000000 79007900");
        assert!(matches!(
            ReparseData::decode(&far),
            Err(DecodeError::BadOffset { .. })
        ));
        // Overlapping names are fine: both are read from the same bytes.
        let shared = hex("0c0000a0 1000 0000 0000 0400 0200 0200 00000000 79007a00");
        assert_eq!(ReparseData::decode(&shared).unwrap(), link("yz", "z", 0));
    }

    #[test]
    fn odd_utf16_fails() {
        // An odd length.
        let odd = hex("0c0000a0 1000 0000 0000 0300 0000 0200 00000000 79007900");
        assert!(matches!(
            ReparseData::decode(&odd),
            Err(DecodeError::BadString { .. })
        ));
        // A lone high surrogate, and a lone low one.
        for unit in ["00d8", "00dc"] {
            let bad = hex(&format!(
                "0c0000a0 1000 0000 0000 0400 0000 0200 00000000 7900{unit}"
            ));
            assert!(
                matches!(
                    ReparseData::decode(&bad),
                    Err(DecodeError::BadString { .. })
                ),
                "{unit}"
            );
        }
        // An NFS link target of odd length, or a lone surrogate.
        assert!(ReparseData::decode(&hex("14000080 0b00 0000 4c4e4b0100000000 610000")).is_err());
        assert!(ReparseData::decode(&hex("14000080 0a00 0000 4c4e4b0100000000 00d8")).is_err());
        // A NUL is valid UTF-16: the decoder keeps it, the caller judges the name.
        let nul = hex("0c0000a0 1000 0000 0000 0400 0000 0200 00000000 79000000");
        assert_eq!(ReparseData::decode(&nul).unwrap(), link("y\0", "y", 0));
    }

    #[test]
    fn malformed_nfs_data_fails() {
        // No type, part of a type.
        assert!(ReparseData::decode(&hex("14000080 0000 0000")).is_err());
        assert!(ReparseData::decode(&hex("14000080 0400 0000 46494649")).is_err());
        // An unknown type.
        assert!(matches!(
            ReparseData::decode(&hex("14000080 0800 0000 5858585800000000")),
            Err(DecodeError::InvalidValue { .. })
        ));
        // A device without its numbers, with half of them, with more.
        assert!(ReparseData::decode(&hex("14000080 0800 0000 4348520000000000")).is_err());
        assert!(ReparseData::decode(&hex("14000080 0c00 0000 4348520000000000 01000000")).is_err());
        assert!(matches!(
            ReparseData::decode(&hex(
                "14000080 1400 0000 424c4b0000000000 01000000 02000000 03000000"
            )),
            Err(DecodeError::Inconsistent { .. })
        ));
        // A FIFO with data it should not have.
        assert!(matches!(
            ReparseData::decode(&hex("14000080 0a00 0000 4649464f00000000 0000")),
            Err(DecodeError::Inconsistent { .. })
        ));
    }
}
