//! The SMB3 POSIX extensions on the wire ([POSIX-SMB2] and [POSIX-FSCC], the published SMB3
//! POSIX extensions; Samba's `smb3posix.idl` is the reference implementation):
//!
//! - a negotiate context ([`POSIX_EXTENSIONS_AVAILABLE`], POSIX-SMB2 2.2.3.1.8) that the client
//!   sends and the server echoes when it offers the extensions;
//! - a create context named [`POSIX_CREATE_CONTEXT_TAG`] (POSIX-SMB2 2.2.13.2.16 / 2.2.14.2.16)
//!   that makes an open a POSIX open: the request carries the mode for a new file, the
//!   response the file's link count, reparse tag, mode, owner and group ([`PosixCreateInfo`]);
//! - the information class FilePosixInformation ([`FILE_POSIX_INFORMATION`], POSIX-FSCC 2.3.1)
//!   for QUERY_INFO on a POSIX open and for QUERY_DIRECTORY ([`PosixDirectoryEntry`]).
//!
//! The mode on the wire is not a Linux `st_mode`: its low 12 bits are the permission bits
//! (the same values as POSIX), and bits 12-14 hold the file type as a small enumeration
//! (POSIX-FSCC 2.1.1.2), which [`PosixMode`] converts.

use bytes::{BufMut, BytesMut};

use super::fscc::FileAttributes;
use super::security_descriptor::Sid;
use crate::codec::{utf16le_to_string, DecodeError, EntryChain, Reader};

/// ContextType of SMB3_POSIX_EXTENSIONS_AVAILABLE (POSIX-SMB2 2.2.3.1).
pub const POSIX_EXTENSIONS_AVAILABLE: u16 = 0x0100;

/// The POSIX create context's name, also the data of the negotiate context: the server
/// proves it speaks this version of the extensions by echoing it (a server that returns any
/// other blob does not offer them; Samba's own tests check exactly that).
pub const POSIX_CREATE_CONTEXT_TAG: [u8; 16] = [
    0x93, 0xAD, 0x25, 0x50, 0x9C, 0xB4, 0x11, 0xE7, 0xB4, 0x23, 0x83, 0xDE, 0x96, 0x8B, 0xCD, 0x7C,
];

/// FilePosixInformation (POSIX-FSCC 2.3.1): the information class for QUERY_INFO and
/// QUERY_DIRECTORY.
pub const FILE_POSIX_INFORMATION: u8 = super::fscc::FileInformationClass::POSIX.0;

/// The file type field of the wire mode (POSIX-FSCC 2.1.1.2).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum PosixFileType {
    /// 0: a regular file.
    Regular,
    /// 1: a directory.
    Directory,
    /// 2: a symbolic link.
    Symlink,
    /// 3: a character device.
    CharDevice,
    /// 4: a block device.
    BlockDevice,
    /// 5: a FIFO.
    Fifo,
    /// 6: a socket.
    Socket,
}

impl PosixFileType {
    const ALL: [PosixFileType; 7] = [
        Self::Regular,
        Self::Directory,
        Self::Symlink,
        Self::CharDevice,
        Self::BlockDevice,
        Self::Fifo,
        Self::Socket,
    ];

    /// The `S_IFMT` bits Linux and macOS use for this type.
    pub fn unix_bits(self) -> u32 {
        match self {
            Self::Regular => 0o100000,
            Self::Directory => 0o040000,
            Self::Symlink => 0o120000,
            Self::CharDevice => 0o020000,
            Self::BlockDevice => 0o060000,
            Self::Fifo => 0o010000,
            Self::Socket => 0o140000,
        }
    }

    /// The type of a Unix `st_mode`, if it is one of the seven.
    pub fn from_unix(mode: u32) -> Option<Self> {
        let kind = mode & 0o170000;
        Self::ALL.into_iter().find(|t| t.unix_bits() == kind)
    }

    fn wire_value(self) -> u32 {
        Self::ALL.iter().position(|t| *t == self).unwrap_or(0) as u32
    }
}

/// A mode as the extensions carry it (POSIX-FSCC 2.1.1): permission bits 0-11, file type in
/// bits 12-14, the rest reserved.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct PosixMode(pub u32);

impl PosixMode {
    /// The twelve permission bits: rwx for user, group and others, sticky, setgid, setuid.
    pub const PERMISSION_BITS: u32 = 0o7777;
    const TYPE_MASK: u32 = 0o70000;
    const TYPE_SHIFT: u32 = 12;

    /// The wire mode for a Unix `st_mode` (type bits and permissions). A type outside the
    /// seven is sent as a regular file's, which is what a create ignores anyway.
    pub fn from_unix(mode: u32) -> Self {
        let kind = PosixFileType::from_unix(mode).unwrap_or(PosixFileType::Regular);
        Self(mode & Self::PERMISSION_BITS | kind.wire_value() << Self::TYPE_SHIFT)
    }

    /// Only permission bits (a create's requested mode, a chmod).
    pub fn permissions_only(permissions: u32) -> Self {
        Self(permissions & Self::PERMISSION_BITS)
    }

    /// The permission bits.
    pub fn permissions(self) -> u32 {
        self.0 & Self::PERMISSION_BITS
    }

    /// The file type, or `None` for a value the extensions do not define (7).
    pub fn file_type(self) -> Option<PosixFileType> {
        let value = (self.0 & Self::TYPE_MASK) >> Self::TYPE_SHIFT;
        PosixFileType::ALL.get(value as usize).copied()
    }

    /// A Unix `st_mode`, or `None` when the type is not one the extensions define.
    pub fn to_unix(self) -> Option<u32> {
        Some(self.file_type()?.unix_bits() | self.permissions())
    }
}

/// The data of a POSIX create context in a CREATE request (POSIX-SMB2 2.2.13.2.16): the mode
/// a newly created file gets (the server applies no umask of its own; the client applies the
/// caller's). Opening an existing file ignores it.
pub fn encode_create_request(mode: PosixMode, out: &mut BytesMut) {
    out.put_u32_le(mode.0);
}

/// A Unix user or group id named by one of the SIDs servers use for them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum UnixId {
    /// A user id.
    User(u32),
    /// A group id.
    Group(u32),
}

impl UnixId {
    /// The id a SID stands for when it is one of the Unix SID forms: Samba's "Unix Users" /
    /// "Unix Groups" (S-1-22-1-UID, S-1-22-2-GID) or the NFS forms Windows uses
    /// (S-1-5-88-1-UID, S-1-5-88-2-GID). Any other SID needs an id mapping of its own.
    pub fn from_sid(sid: &Sid) -> Option<UnixId> {
        match (sid.authority(), sid.sub_authorities()) {
            (22, [1, id]) | (5, [88, 1, id]) => Some(UnixId::User(*id)),
            (22, [2, id]) | (5, [88, 2, id]) => Some(UnixId::Group(*id)),
            _ => None,
        }
    }

    /// Samba's SID for this id (S-1-22-1-UID or S-1-22-2-GID): what a chown sends.
    pub fn to_sid(self) -> Sid {
        let subs = match self {
            UnixId::User(id) => [1, id],
            UnixId::Group(id) => [2, id],
        };
        Sid::new(22, &subs).expect("two sub-authorities under authority 22 are valid")
    }
}

/// The trustee of the one ACE that a chmod on a POSIX open sends (S-1-5-88-3-MODE): Samba
/// applies the mode's rwx bits to the file instead of storing an ACL
/// (source3/smbd/smb2_nttrans.c `check_smb2_posix_chmod_ace`; the same SID Windows' NFS
/// server uses for mode bits).
pub fn chmod_trustee(permissions: u32) -> Sid {
    Sid::new(5, &[88, 3, permissions & PosixMode::PERMISSION_BITS])
        .expect("three sub-authorities under authority 5 are valid")
}

/// The POSIX create context of a CREATE response (POSIX-SMB2 2.2.14.2.16), which is also the
/// tail of FilePosixInformation.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PosixCreateInfo {
    /// Number of hard links.
    pub nlinks: u32,
    /// The reparse tag (0 for none): a symlink or special file stored as a reparse point.
    pub reparse_tag: u32,
    /// Mode: permissions and file type.
    pub mode: PosixMode,
    /// Owner.
    pub owner: Sid,
    /// Group.
    pub group: Sid,
}

impl PosixCreateInfo {
    /// Decode from a reader positioned at NumberOfLinks; the two SIDs are variable-length and
    /// must lie inside the reader's buffer.
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self, DecodeError> {
        let nlinks = r.u32(what)?;
        let reparse_tag = r.u32(what)?;
        let mode = PosixMode(r.u32(what)?);
        let owner = read_sid(r)?;
        let group = read_sid(r)?;
        Ok(Self {
            nlinks,
            reparse_tag,
            mode,
            owner,
            group,
        })
    }

    /// Decode the data of a POSIX create context response.
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(data);
        Self::read(&mut r, "POSIX create context response")
    }

    fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.nlinks);
        out.put_u32_le(self.reparse_tag);
        out.put_u32_le(self.mode.0);
        self.owner.encode(out);
        self.group.encode(out);
    }
}

fn read_sid(r: &mut Reader<'_>) -> Result<Sid, DecodeError> {
    let rest = r.buffer().get(r.position()..).unwrap_or_default();
    let (sid, used) = Sid::decode(rest)?;
    r.skip(used, "POSIX information SID")?;
    Ok(sid)
}

/// FilePosixInformation (POSIX-FSCC 2.3.1): everything `stat` needs in one query.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FilePosixInformation {
    /// CreationTime (FILETIME).
    pub creation_time: u64,
    /// LastAccessTime (FILETIME).
    pub last_access_time: u64,
    /// LastWriteTime (FILETIME).
    pub last_write_time: u64,
    /// ChangeTime (FILETIME).
    pub change_time: u64,
    /// EndOfFile: the size in bytes.
    pub end_of_file: u64,
    /// AllocationSize in bytes.
    pub allocation_size: u64,
    /// FileAttributes (DOS attributes).
    pub file_attributes: FileAttributes,
    /// The server's inode number.
    pub inode: u64,
    /// The server's device id.
    pub device: u32,
    /// Links, reparse tag, mode, owner and group.
    pub posix: PosixCreateInfo,
}

/// FilePosixInformation's fixed part before the create-context tail.
const POSIX_INFO_FIXED: usize = 6 * 8 + 4 + 8 + 4 + 4;

impl FilePosixInformation {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        const WHAT: &str = "FilePosixInformation";
        let creation_time = r.u64(WHAT)?;
        let last_access_time = r.u64(WHAT)?;
        let last_write_time = r.u64(WHAT)?;
        let change_time = r.u64(WHAT)?;
        let end_of_file = r.u64(WHAT)?;
        let allocation_size = r.u64(WHAT)?;
        let file_attributes = FileAttributes(r.u32(WHAT)?);
        let inode = r.u64(WHAT)?;
        let device = r.u32(WHAT)?;
        r.skip(4, "FilePosixInformation.Reserved")?;
        let posix = PosixCreateInfo::read(r, WHAT)?;
        Ok(Self {
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            end_of_file,
            allocation_size,
            file_attributes,
            inode,
            device,
            posix,
        })
    }

    /// Decode the output buffer of a QUERY_INFO for [`FILE_POSIX_INFORMATION`].
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        Self::read(&mut Reader::new(buf))
    }

    /// Append the wire form (used by the in-memory test server).
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.creation_time);
        out.put_u64_le(self.last_access_time);
        out.put_u64_le(self.last_write_time);
        out.put_u64_le(self.change_time);
        out.put_u64_le(self.end_of_file);
        out.put_u64_le(self.allocation_size);
        out.put_u32_le(self.file_attributes.0);
        out.put_u64_le(self.inode);
        out.put_u32_le(self.device);
        out.put_u32_le(0);
        self.posix.encode(out);
    }
}

impl super::fscc::QueryFileInfo for FilePosixInformation {
    const CLASS: super::fscc::FileInformationClass = super::fscc::FileInformationClass::POSIX;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        FilePosixInformation::decode(buf)
    }
}

/// One entry of a QUERY_DIRECTORY listing in the POSIX class: NextEntryOffset, FileIndex,
/// FilePosixInformation, FileNameLength, FileName (POSIX-FSCC 2.3.2).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PosixDirectoryEntry {
    /// The entry's metadata.
    pub info: FilePosixInformation,
    /// FileName.
    pub file_name: String,
}

/// Smallest possible entry: the fixed part, two SIDs without sub-authorities, the name
/// length.
const POSIX_DIR_ENTRY_MIN: usize = 8 + POSIX_INFO_FIXED + 12 + 2 * 8 + 4;

/// Decode a POSIX-class listing. Entries are chained by NextEntryOffset (0 on the last); each
/// offset must move past the smallest entry and stay inside the buffer, and each entry's SIDs
/// and name must lie inside that entry.
pub fn decode_posix_directory_information(
    buf: &[u8],
) -> Result<Vec<PosixDirectoryEntry>, DecodeError> {
    const WHAT: &str = "POSIX directory entry";
    let chain = EntryChain {
        min_entry: POSIX_DIR_ENTRY_MIN,
        align: 1,
        what_next: "POSIX directory entry NextEntryOffset",
        what: WHAT,
    };
    chain.decode(buf, |entry, _| {
        let mut r = Reader::new(entry);
        r.skip(8, "POSIX directory entry NextEntryOffset/FileIndex")?;
        let info = FilePosixInformation::read(&mut r)?;
        let name_len = r.u32("POSIX directory entry FileNameLength")? as usize;
        if name_len > r.remaining() {
            return Err(DecodeError::Inconsistent {
                what: WHAT,
                detail: "FileNameLength runs past the entry",
            });
        }
        let file_name = utf16le_to_string(
            r.bytes(name_len, "POSIX directory entry FileName")?,
            "POSIX directory entry FileName",
        )?;
        Ok(PosixDirectoryEntry { info, file_name })
    })
}

/// Append one POSIX-class directory entry with NextEntryOffset 0 (the caller patches it when
/// another follows); used by the in-memory test server and this module's tests.
pub fn encode_posix_directory_entry(entry: &PosixDirectoryEntry, out: &mut BytesMut) {
    out.put_u32_le(0); // NextEntryOffset
    out.put_u32_le(0); // FileIndex
    entry.info.encode(out);
    out.put_u32_le(crate::codec::utf16le_len(&entry.file_name) as u32);
    crate::codec::put_utf16le(out, &entry.file_name);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(text: &str) -> Sid {
        text.parse().unwrap()
    }

    fn sample_info(mode: PosixMode) -> FilePosixInformation {
        FilePosixInformation {
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            end_of_file: 5,
            allocation_size: 4096,
            file_attributes: FileAttributes(0x20),
            inode: 0x1122_3344_5566_7788,
            device: 0x99,
            posix: PosixCreateInfo {
                nlinks: 1,
                reparse_tag: 0,
                mode,
                owner: sid("S-1-5-21-1-2-3-1000"),
                group: sid("S-1-22-2-100"),
            },
        }
    }

    #[test]
    fn wire_mode_carries_the_type_in_bits_12_to_14() {
        // Samba's test: a directory created 0700 answers with type 1 in the type field.
        let dir = PosixMode(1 << 12 | 0o700);
        assert_eq!(dir.file_type(), Some(PosixFileType::Directory));
        assert_eq!(dir.to_unix(), Some(0o040700));
        // A regular file's type is 0, so its wire mode is its permissions alone.
        assert_eq!(PosixMode::from_unix(0o100644), PosixMode(0o644));
        assert_eq!(PosixMode::from_unix(0o120777).0, 2 << 12 | 0o777);
        assert_eq!(PosixMode::from_unix(0o010600).0, 5 << 12 | 0o600);
        assert_eq!(PosixMode::from_unix(0o140755).0, 6 << 12 | 0o755);
        assert_eq!(PosixMode(0o4755).permissions(), 0o4755);
        for t in PosixFileType::ALL {
            let m = PosixMode::from_unix(t.unix_bits() | 0o1751);
            assert_eq!(m.file_type(), Some(t));
            assert_eq!(m.to_unix(), Some(t.unix_bits() | 0o1751));
        }
        // Type 7 is not defined: no st_mode is made up for it.
        assert_eq!(PosixMode(7 << 12 | 0o644).to_unix(), None);
    }

    #[test]
    fn unix_sids_map_to_ids_and_others_do_not() {
        assert_eq!(
            UnixId::from_sid(&sid("S-1-22-1-1000")),
            Some(UnixId::User(1000))
        );
        assert_eq!(
            UnixId::from_sid(&sid("S-1-22-2-100")),
            Some(UnixId::Group(100))
        );
        assert_eq!(
            UnixId::from_sid(&sid("S-1-5-88-1-0")),
            Some(UnixId::User(0))
        );
        assert_eq!(
            UnixId::from_sid(&sid("S-1-5-88-2-7")),
            Some(UnixId::Group(7))
        );
        assert_eq!(UnixId::from_sid(&sid("S-1-5-21-1-2-3-1000")), None);
        assert_eq!(UnixId::from_sid(&sid("S-1-22-3-5")), None);
        assert_eq!(UnixId::from_sid(&sid("S-1-22-1")), None);
        assert_eq!(UnixId::User(1000).to_sid().to_string(), "S-1-22-1-1000");
        assert_eq!(chmod_trustee(0o10755).to_string(), "S-1-5-88-3-493");
    }

    #[test]
    fn create_context_response_golden_bytes() {
        // nlinks 2, no reparse tag, a 0700 directory, owner S-1-5-21-1-2-3-1000 and group
        // S-1-22-2-100, as Samba answers a directory create.
        let bytes = [
            2, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0x11, 0, 0, // nlinks, tag, mode 0o10700
            1, 5, 0, 0, 0, 0, 0, 5, 21, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xe8, 3, 0,
            0, // owner
            1, 2, 0, 0, 0, 0, 0, 22, 2, 0, 0, 0, 100, 0, 0, 0, // group
        ];
        let info = PosixCreateInfo::decode(&bytes).unwrap();
        assert_eq!(info.nlinks, 2);
        assert_eq!(info.reparse_tag, 0);
        assert_eq!(info.mode.to_unix(), Some(0o040700));
        assert_eq!(info.owner.to_string(), "S-1-5-21-1-2-3-1000");
        assert_eq!(info.group.to_string(), "S-1-22-2-100");
        let mut again = BytesMut::new();
        info.encode(&mut again);
        assert_eq!(&again[..], &bytes[..]);
    }

    #[test]
    fn truncated_or_lying_create_context_is_rejected() {
        let mut full = BytesMut::new();
        sample_info(PosixMode(0o644)).posix.encode(&mut full);
        for cut in 0..full.len() {
            assert!(
                PosixCreateInfo::decode(&full[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        // A SID claiming 15 sub-authorities with the data of one.
        let mut lying = full.to_vec();
        lying[13] = 15;
        assert!(PosixCreateInfo::decode(&lying).is_err());
        // More than 15 sub-authorities is not a SID.
        lying[13] = 16;
        assert!(PosixCreateInfo::decode(&lying).is_err());
    }

    #[test]
    fn file_posix_information_round_trips_and_rejects_short_buffers() {
        let info = sample_info(PosixMode::from_unix(0o100640));
        let mut buf = BytesMut::new();
        info.encode(&mut buf);
        assert_eq!(FilePosixInformation::decode(&buf).unwrap(), info);
        for cut in [0, 8, POSIX_INFO_FIXED, POSIX_INFO_FIXED + 12, buf.len() - 1] {
            assert!(
                FilePosixInformation::decode(&buf[..cut]).is_err(),
                "cut at {cut}"
            );
        }
    }

    fn listing(names: &[&str]) -> Vec<u8> {
        let mut out = BytesMut::new();
        let mut previous: Option<usize> = None;
        for name in names {
            let start = out.len().next_multiple_of(8);
            out.resize(start, 0);
            if let Some(p) = previous {
                let next = (start - p) as u32;
                out[p..p + 4].copy_from_slice(&next.to_le_bytes());
            }
            let entry = PosixDirectoryEntry {
                info: sample_info(PosixMode::from_unix(0o100600)),
                file_name: name.to_string(),
            };
            encode_posix_directory_entry(&entry, &mut out);
            previous = Some(start);
        }
        out.to_vec()
    }

    #[test]
    fn posix_listing_chain_decodes() {
        let buf = listing(&[".", "..", "a name with spaces ", "Ünïcode"]);
        let entries = decode_posix_directory_information(&buf).unwrap();
        let names: Vec<_> = entries.iter().map(|e| e.file_name.as_str()).collect();
        assert_eq!(names, [".", "..", "a name with spaces ", "Ünïcode"]);
        assert_eq!(entries[2].info.posix.mode.to_unix(), Some(0o100600));
        assert!(decode_posix_directory_information(&[]).unwrap().is_empty());
    }

    #[test]
    fn malformed_posix_listings_are_rejected() {
        let buf = listing(&["first", "second"]);
        // A NextEntryOffset past the buffer, one too small to hold an entry, and zero-length
        // progress are all refused.
        for bad_next in [buf.len() as u32 + 8, 8, 1] {
            let mut b = buf.clone();
            b[0..4].copy_from_slice(&bad_next.to_le_bytes());
            assert!(
                decode_posix_directory_information(&b).is_err(),
                "next {bad_next}"
            );
        }
        // A name length that runs past the entry.
        let mut b = listing(&["x"]);
        let name_len_at = b.len() - 2 - 4;
        b[name_len_at..name_len_at + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(decode_posix_directory_information(&b).is_err());
        // Every truncation of a one-entry listing fails cleanly.
        let one = listing(&["abc"]);
        for cut in 1..one.len() {
            assert!(
                decode_posix_directory_information(&one[..cut]).is_err(),
                "cut {cut}"
            );
        }
    }
}
