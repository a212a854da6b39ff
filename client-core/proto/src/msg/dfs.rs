//! DFS referrals (MS-DFSC): the request a client sends in FSCTL_DFS_GET_REFERRALS over the
//! IPC$ share (MS-SMB2 3.2.4.20.3; MS-DFSC 2.2.2 REQ_GET_DFS_REFERRAL) and the server's
//! answer (MS-DFSC 2.2.4 RESP_GET_DFS_REFERRAL) with its referral entries of versions 1 to 4
//! (2.2.5.1-2.2.5.4).
//!
//! A response is a header (PathConsumed, NumberOfReferrals, ReferralHeaderFlags), the
//! entries one after the other (each says its own Size, MS-DFSC 2.2.5), then a string
//! buffer the entries of versions 2 to 4 point into with offsets counted from the start of
//! the entry. Every entry of one response has the same version (2.2.5).
//!
//! Everything here comes from a server, and a referral tells the client where to connect
//! next: every count, size and offset is checked against the bytes present, strings must be
//! terminated within the buffer and be valid UTF-16, and nothing is allocated from a count
//! before the bytes for it are known to be there. What a target means (which server to
//! trust) is the caller's business.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{put_utf16le, utf16le_to_string, DecodeError, Reader};

/// FSCTL_DFS_GET_REFERRALS (MS-FSCC 2.3.16): input a REQ_GET_DFS_REFERRAL, output a
/// RESP_GET_DFS_REFERRAL. Sent on IPC$ with the FileId all ones (MS-SMB2 3.2.4.20.3).
pub const FSCTL_DFS_GET_REFERRALS: u32 = 0x0006_0194;

/// The highest referral version this client understands (and asks for).
pub const MAX_REFERRAL_LEVEL: u16 = 4;

/// ReferralHeaderFlags.R (MS-DFSC 2.2.4): the targets are DFS root servers, which must be
/// asked again for what lies below (a root or domain referral).
pub const REFERRAL_SERVERS: u32 = 0x0000_0001;
/// ReferralHeaderFlags.S: the targets hold the data (a link's storage).
pub const STORAGE_SERVERS: u32 = 0x0000_0002;
/// ReferralHeaderFlags.T: the client should fail back to a better target when it can.
pub const TARGET_FAILBACK: u32 = 0x0000_0004;

/// ReferralEntryFlags.NameListReferral (MS-DFSC 2.2.5.3): the entry is a domain or DC
/// referral: a special name and the names it expands to instead of paths.
pub const NAME_LIST_REFERRAL: u16 = 0x0002;
/// ReferralEntryFlags.TargetSetBoundary (MS-DFSC 2.2.5.4): the entry begins a new set of
/// targets of equal cost.
pub const TARGET_SET_BOUNDARY: u16 = 0x0004;

/// RESP_GET_DFS_REFERRAL's fixed part: PathConsumed, NumberOfReferrals, ReferralHeaderFlags.
const HEADER_LEN: usize = 8;
/// The common start of every entry: VersionNumber, Size, ServerType, ReferralEntryFlags.
const ENTRY_COMMON_LEN: usize = 8;
/// The fixed length of a version 2 entry (2.2.5.2).
const V2_LEN: usize = 22;
/// The fixed length of a version 3 or 4 entry up to its offsets (2.2.5.3): the common part,
/// TimeToLive, three 16-bit offsets. Entries with paths carry a 16-byte ServiceSiteGuid
/// after them (2.2.5.3.1); name list entries have three 16-bit fields there (2.2.5.3.2).
const V3_LEN: usize = 18;

/// The REQ_GET_DFS_REFERRAL for `path` (`\server\share\rest`, a domain `\DOMAIN`, or empty
/// for the list of trusted domains, MS-DFSC 3.1.4.2), asking for versions up to
/// [`MAX_REFERRAL_LEVEL`].
pub fn encode_request(path: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(2 + 2 * (path.len() + 1));
    out.put_u16_le(MAX_REFERRAL_LEVEL);
    put_utf16le(&mut out, path);
    out.put_u16_le(0);
    out.freeze()
}

/// Whether the targets are root servers or hold a link's storage (ServerType, 2.2.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerType {
    /// 0x0000: non-root targets (a link's).
    NonRoot,
    /// 0x0001: root targets (a namespace's root servers).
    Root,
    /// Any other value, kept as sent.
    Other(u16),
}

impl From<u16> for ServerType {
    fn from(v: u16) -> ServerType {
        match v {
            0 => ServerType::NonRoot,
            1 => ServerType::Root,
            other => ServerType::Other(other),
        }
    }
}

/// What one referral entry says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReferralTarget {
    /// A target for the path: `dfs_path` is the root or link the entry is about
    /// (`\server\share\link`), `network_address` where it leads (`\server2\share2[\dir]`).
    Path {
        /// DFSPath: the prefix of the request the referral covers.
        dfs_path: String,
        /// DFSAlternatePath: the same prefix in its 8.3 form (as a rule equal to `dfs_path`).
        dfs_alternate_path: String,
        /// NetworkAddress: the target.
        network_address: String,
    },
    /// A domain referral's or DC referral's entry (NameListReferral set, 2.2.5.3.2): the
    /// domain (or DC) name asked about and the names it expands to.
    NameList {
        /// SpecialName: the domain name.
        special_name: String,
        /// The expanded names: the domain controllers, or the domain's other names.
        expanded_names: Vec<String>,
    },
}

/// One referral entry (DFS_REFERRAL_V1 to V4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferralEntry {
    /// VersionNumber, 1 to 4.
    pub version: u16,
    /// ServerType.
    pub server_type: ServerType,
    /// ReferralEntryFlags ([`NAME_LIST_REFERRAL`], [`TARGET_SET_BOUNDARY`], and any others
    /// as sent).
    pub flags: u16,
    /// TimeToLive in seconds (version 1 has none: 0).
    pub ttl_seconds: u32,
    /// What the entry says.
    pub target: ReferralTarget,
}

/// A decoded RESP_GET_DFS_REFERRAL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferralResponse {
    /// PathConsumed: how much of the request's path the referral covers, in bytes of its
    /// UTF-16 form (MS-DFSC 2.2.4; [`ReferralResponse::consumed_units`]).
    pub path_consumed: u16,
    /// ReferralHeaderFlags ([`REFERRAL_SERVERS`], [`STORAGE_SERVERS`], [`TARGET_FAILBACK`]).
    pub header_flags: u32,
    /// The entries, in the server's order of preference.
    pub entries: Vec<ReferralEntry>,
}

impl ReferralResponse {
    /// PathConsumed in UTF-16 code units: the length of the prefix of the request's path
    /// the referral covers.
    pub fn consumed_units(&self) -> usize {
        usize::from(self.path_consumed) / 2
    }

    /// Whether the targets hold the data (the S flag) rather than being root servers to ask
    /// again.
    pub fn is_storage(&self) -> bool {
        self.header_flags & STORAGE_SERVERS != 0
    }
}

/// Decode a RESP_GET_DFS_REFERRAL.
pub fn decode_response(buf: &[u8]) -> Result<ReferralResponse, DecodeError> {
    let mut r = Reader::new(buf);
    let path_consumed = r.u16("RESP_GET_DFS_REFERRAL.PathConsumed")?;
    let count = r.u16("RESP_GET_DFS_REFERRAL.NumberOfReferrals")?;
    let header_flags = r.u32("RESP_GET_DFS_REFERRAL.ReferralHeaderFlags")?;
    if path_consumed % 2 != 0 {
        return Err(DecodeError::InvalidValue {
            what: "RESP_GET_DFS_REFERRAL.PathConsumed (odd byte count)",
            value: u64::from(path_consumed),
        });
    }
    // Each entry takes at least its common part: a count the buffer cannot hold is refused
    // before anything is reserved for it.
    if usize::from(count) * ENTRY_COMMON_LEN > buf.len() - HEADER_LEN {
        return Err(DecodeError::Inconsistent {
            what: "RESP_GET_DFS_REFERRAL",
            detail: "more referrals than the reply has room for",
        });
    }
    let mut entries = Vec::with_capacity(usize::from(count));
    let mut at = HEADER_LEN;
    for _ in 0..count {
        let (entry, size) = decode_entry(buf, at)?;
        if entries
            .first()
            .is_some_and(|first: &ReferralEntry| first.version != entry.version)
        {
            return Err(DecodeError::Inconsistent {
                what: "RESP_GET_DFS_REFERRAL",
                detail: "entries of different versions (MS-DFSC 2.2.5)",
            });
        }
        entries.push(entry);
        at += size;
    }
    Ok(ReferralResponse {
        path_consumed,
        header_flags,
        entries,
    })
}

/// Decode the entry at `at` of the whole reply `buf`; returns it and its Size.
fn decode_entry(buf: &[u8], at: usize) -> Result<(ReferralEntry, usize), DecodeError> {
    let mut r = Reader::at(buf, at)?;
    let version = r.u16("DFS_REFERRAL.VersionNumber")?;
    let size = usize::from(r.u16("DFS_REFERRAL.Size")?);
    let server_type = ServerType::from(r.u16("DFS_REFERRAL.ServerType")?);
    let flags = r.u16("DFS_REFERRAL.ReferralEntryFlags")?;
    let fixed = match version {
        1 => ENTRY_COMMON_LEN,
        2 => V2_LEN,
        3 | 4 => V3_LEN,
        other => {
            return Err(DecodeError::InvalidValue {
                what: "DFS_REFERRAL.VersionNumber",
                value: u64::from(other),
            })
        }
    };
    if size < fixed || at + size > buf.len() {
        return Err(DecodeError::BadOffset {
            what: "DFS_REFERRAL.Size",
            offset: at,
            length: size,
            message_len: buf.len(),
        });
    }
    let entry = &buf[at..at + size];
    let mut r = Reader::at(entry, ENTRY_COMMON_LEN)?;
    let (ttl_seconds, target) = match version {
        // ShareName follows inline, terminated within the entry.
        1 => {
            let name = terminated_string(entry, ENTRY_COMMON_LEN, "DFS_REFERRAL_V1.ShareName")?;
            (
                0,
                ReferralTarget::Path {
                    dfs_path: String::new(),
                    dfs_alternate_path: String::new(),
                    network_address: name,
                },
            )
        }
        2 => {
            r.u32("DFS_REFERRAL_V2.Proximity")?;
            let ttl = r.u32("DFS_REFERRAL_V2.TimeToLive")?;
            (ttl, paths(buf, at, &mut r)?)
        }
        _ if flags & NAME_LIST_REFERRAL != 0 => {
            let ttl = r.u32("DFS_REFERRAL_V3.TimeToLive")?;
            (ttl, name_list(buf, at, &mut r)?)
        }
        _ => {
            let ttl = r.u32("DFS_REFERRAL_V3.TimeToLive")?;
            let target = paths(buf, at, &mut r)?;
            // ServiceSiteGuid: zero by the specification, ignored by clients (2.2.5.3.1).
            r.skip(16, "DFS_REFERRAL_V3.ServiceSiteGuid")?;
            (ttl, target)
        }
    };
    Ok((
        ReferralEntry {
            version,
            server_type,
            flags,
            ttl_seconds,
            target,
        },
        size,
    ))
}

/// DFSPathOffset, DFSAlternatePathOffset and NetworkAddressOffset and the strings they
/// point to, counted from the entry's start `entry_at` in the whole reply `buf`.
fn paths(buf: &[u8], entry_at: usize, r: &mut Reader<'_>) -> Result<ReferralTarget, DecodeError> {
    let dfs_path = r.u16("DFS_REFERRAL.DFSPathOffset")?;
    let alternate = r.u16("DFS_REFERRAL.DFSAlternatePathOffset")?;
    let address = r.u16("DFS_REFERRAL.NetworkAddressOffset")?;
    Ok(ReferralTarget::Path {
        dfs_path: string_at(buf, entry_at, dfs_path, "DFS_REFERRAL.DFSPath")?,
        dfs_alternate_path: string_at(buf, entry_at, alternate, "DFS_REFERRAL.DFSAlternatePath")?,
        network_address: string_at(buf, entry_at, address, "DFS_REFERRAL.NetworkAddress")?,
    })
}

/// SpecialNameOffset, NumberOfExpandedNames and ExpandedNameOffset (2.2.5.3.2): the
/// expanded names lie one after the other, each terminated.
fn name_list(
    buf: &[u8],
    entry_at: usize,
    r: &mut Reader<'_>,
) -> Result<ReferralTarget, DecodeError> {
    let special = r.u16("DFS_REFERRAL_V3.SpecialNameOffset")?;
    let count = r.u16("DFS_REFERRAL_V3.NumberOfExpandedNames")?;
    let expanded = r.u16("DFS_REFERRAL_V3.ExpandedNameOffset")?;
    let special_name = string_at(buf, entry_at, special, "DFS_REFERRAL_V3.SpecialName")?;
    let mut at = entry_at + usize::from(expanded);
    // Each name takes at least its terminator.
    if usize::from(count) * 2 > buf.len().saturating_sub(at) {
        return Err(DecodeError::Inconsistent {
            what: "DFS_REFERRAL_V3.ExpandedName",
            detail: "more names than the reply has room for",
        });
    }
    let mut expanded_names = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let name = terminated_string(buf, at, "DFS_REFERRAL_V3.ExpandedName")?;
        at += 2 * (name.encode_utf16().count() + 1);
        expanded_names.push(name);
    }
    Ok(ReferralTarget::NameList {
        special_name,
        expanded_names,
    })
}

/// The terminated string at `offset` from the entry at `entry_at`.
fn string_at(
    buf: &[u8],
    entry_at: usize,
    offset: u16,
    what: &'static str,
) -> Result<String, DecodeError> {
    terminated_string(buf, entry_at + usize::from(offset), what)
}

/// The UTF-16 string starting at `at` in `buf`, up to its 16-bit NUL terminator, which must
/// be there.
fn terminated_string(buf: &[u8], at: usize, what: &'static str) -> Result<String, DecodeError> {
    let rest = buf.get(at..).ok_or(DecodeError::BadOffset {
        what,
        offset: at,
        length: 0,
        message_len: buf.len(),
    })?;
    let units =
        rest.chunks_exact(2)
            .position(|u| u == [0, 0])
            .ok_or(DecodeError::Inconsistent {
                what,
                detail: "string not terminated within the reply",
            })?;
    utf16le_to_string(&rest[..2 * units], what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16z(s: &str) -> Vec<u8> {
        let mut v: Vec<u8> = s.encode_utf16().flat_map(u16::to_le_bytes).collect();
        v.extend([0, 0]);
        v
    }

    /// A version 3 reply with `targets` for the link `dfs_path`, built as the specification
    /// lays it out: header, entries, then the strings (each entry's offsets counted from
    /// the entry itself).
    fn v3_reply(consumed: &str, dfs_path: &str, targets: &[&str], ttl: u32) -> Vec<u8> {
        const ENTRY: usize = V3_LEN + 16;
        let mut out = Vec::new();
        out.extend((consumed.encode_utf16().count() as u16 * 2).to_le_bytes());
        out.extend((targets.len() as u16).to_le_bytes());
        out.extend(STORAGE_SERVERS.to_le_bytes());
        let strings_at = HEADER_LEN + ENTRY * targets.len();
        let path = utf16z(dfs_path);
        let mut strings = path.clone();
        for (i, target) in targets.iter().enumerate() {
            let entry_at = HEADER_LEN + ENTRY * i;
            let address_at = strings_at + strings.len();
            strings.extend(utf16z(target));
            let from_entry = |abs: usize| ((abs - entry_at) as u16).to_le_bytes();
            out.extend(3u16.to_le_bytes());
            out.extend((ENTRY as u16).to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(ttl.to_le_bytes());
            out.extend(from_entry(strings_at));
            out.extend(from_entry(strings_at));
            out.extend(from_entry(address_at));
            out.extend([0u8; 16]);
        }
        out.extend(strings);
        out
    }

    /// Samba 4.17's answer to a root referral for `\\10.172.1.1\\dfs` (a standalone root with
    /// `msdfs root = yes`), captured from the testbed: one version 3 entry for root targets.
    const SAMBA_ROOT: &str =
        "1e000100030000000300220001000000580200002200420062000000000000000000000000000000\
        00005c00310030002e003100370032002e0031002e0031005c0064006600730000005c0031003000\
        2e003100370032002e0031002e0031005c0064006600730000005c00310030002e00310037003200\
        2e0031002e0031005c006400660073000000";

    /// Samba 4.17's answer for the link `\\10.172.1.1\\dfs\\two` made with
    /// `msdfs:10.172.1.1\\plain,10.172.1.1\\backup`: two version 3 entries, storage servers.
    const SAMBA_LINK: &str =
        "260002000200000003002200000000005802000044006c0094000000000000000000000000000000\
        00000300220000000000580200009600be00e600000000000000000000000000000000005c003100\
        30002e003100370032002e0031002e0031005c006400660073005c00740077006f0000005c003100\
        30002e003100370032002e0031002e0031005c006400660073005c00740077006f0000005c003100\
        30002e003100370032002e0031002e0031005c0070006c00610069006e0000005c00310030002e00\
        3100370032002e0031002e0031005c006400660073005c00740077006f0000005c00310030002e00\
        3100370032002e0031002e0031005c006400660073005c00740077006f0000005c00310030002e00\
        3100370032002e0031002e0031005c006200610063006b00750070000000";

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn samba_root_and_link_referrals_decode() {
        let root = decode_response(&unhex(SAMBA_ROOT)).unwrap();
        assert_eq!(root.consumed_units(), "\\10.172.1.1\\dfs".len());
        assert_eq!(root.header_flags, REFERRAL_SERVERS | STORAGE_SERVERS);
        assert_eq!(root.entries.len(), 1);
        assert_eq!(root.entries[0].server_type, ServerType::Root);
        assert_eq!(root.entries[0].ttl_seconds, 600);

        let link = decode_response(&unhex(SAMBA_LINK)).unwrap();
        assert_eq!(link.consumed_units(), "\\10.172.1.1\\dfs\\two".len());
        assert!(link.is_storage());
        let targets: Vec<&str> = link
            .entries
            .iter()
            .map(|e| match &e.target {
                ReferralTarget::Path {
                    dfs_path,
                    network_address,
                    ..
                } => {
                    assert_eq!(dfs_path, "\\10.172.1.1\\dfs\\two");
                    network_address.as_str()
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(targets, ["\\10.172.1.1\\plain", "\\10.172.1.1\\backup"]);
        assert!(link.entries.iter().all(|e| e.version == 3
            && e.server_type == ServerType::NonRoot
            && e.ttl_seconds == 600));
    }

    #[test]
    fn a_request_is_the_level_and_the_terminated_path() {
        let req = encode_request("\\h\\dfs\\a");
        assert_eq!(&req[..2], &[4, 0]);
        assert_eq!(&req[2..], &utf16z("\\h\\dfs\\a")[..]);
    }

    #[test]
    fn a_v3_link_referral_with_two_targets_decodes() {
        let buf = v3_reply(
            "\\h\\dfs\\link",
            "\\h\\dfs\\link",
            &["\\a\\one", "\\b\\two\\dir"],
            600,
        );
        let r = decode_response(&buf).unwrap();
        assert_eq!(r.consumed_units(), "\\h\\dfs\\link".len());
        assert!(r.is_storage());
        assert_eq!(r.entries.len(), 2);
        assert_eq!(r.entries[1].ttl_seconds, 600);
        assert_eq!(
            r.entries[1].target,
            ReferralTarget::Path {
                dfs_path: "\\h\\dfs\\link".into(),
                dfs_alternate_path: "\\h\\dfs\\link".into(),
                network_address: "\\b\\two\\dir".into(),
            }
        );
    }

    #[test]
    fn hostile_replies_are_refused_without_panicking() {
        let good = v3_reply("\\h\\d\\l", "\\h\\d\\l", &["\\a\\s"], 300);
        // Every truncation.
        for n in 0..good.len() {
            assert!(decode_response(&good[..n]).is_err(), "{n} bytes");
        }
        // A count far beyond the bytes.
        let mut many = good.clone();
        many[2..4].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(decode_response(&many).is_err());
        // An offset past the end, a Size below the fixed part, an unknown version.
        for (at, value) in [
            (HEADER_LEN + 16, 0xFFF0u16),
            (HEADER_LEN + 2, 4),
            (HEADER_LEN, 9),
        ] {
            let mut bad = good.clone();
            bad[at..at + 2].copy_from_slice(&value.to_le_bytes());
            assert!(decode_response(&bad).is_err(), "field at {at} = {value:#x}");
        }
        // A string without its terminator.
        let mut open = good.clone();
        let n = open.len();
        open[n - 2..].copy_from_slice(&[b'x', 0]);
        assert!(decode_response(&open).is_err());
        // An odd PathConsumed.
        let mut odd = good;
        odd[0] = 3;
        assert!(decode_response(&odd).is_err());
    }

    #[test]
    fn entries_of_mixed_versions_are_refused() {
        let mut buf = v3_reply("\\h\\d\\l", "\\h\\d\\l", &["\\a\\s", "\\b\\s"], 300);
        let second = HEADER_LEN + V3_LEN + 16;
        buf[second..second + 2].copy_from_slice(&4u16.to_le_bytes());
        assert!(decode_response(&buf).is_err());
    }
}
