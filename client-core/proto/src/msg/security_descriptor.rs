//! MS-DTYP 2.4.6 SECURITY_DESCRIPTOR in self-relative form, with the SIDs (2.4.2), ACLs
//! (2.4.5) and ACEs (2.4.4) in it: the buffer of SMB2 QUERY_INFO / SET_INFO with InfoType
//! SMB2_0_INFO_SECURITY (MS-SMB2 2.2.37-2.2.39), whose AdditionalInformation names the parts
//! ([`crate::msg::query_info::security_information`]).
//!
//! The decoder is bounds-checked and lenient where Windows is (any order of the parts, an ACL
//! larger than its ACEs, ACE types it does not know); the encoder writes the parts in Samba's
//! order (owner, group, SACL, DACL), so a descriptor Samba sent encodes back to the same bytes.
//! A backup that must restore bytes exactly keeps the raw buffer rather than re-encoding.

use std::fmt;
use std::str::FromStr;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};

/// Why a SID string could not be parsed, or a descriptor could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityDescriptorError {
    /// Not of the form `S-1-AUTHORITY-SUB-...` (MS-DTYP 2.4.2.1).
    #[error("not a SID string (expected S-1-AUTHORITY-SUBAUTHORITY-...)")]
    SidString,
    /// A SID has at most 15 sub-authorities (MS-DTYP 2.4.2.2).
    #[error("a SID has at most 15 sub-authorities, not {0}")]
    TooManySubAuthorities(usize),
    /// The identifier authority is a 48-bit number.
    #[error("SID identifier authority {0:#x} does not fit in 48 bits")]
    AuthorityTooLarge(u64),
    /// An ACE or ACL is longer than its 16-bit size field can say.
    #[error("{what} of {bytes} bytes is larger than the 65535 its size field holds")]
    TooLarge {
        /// "ACE" or "ACL".
        what: &'static str,
        /// The size it would have.
        bytes: usize,
    },
}

// ---------------------------------------------------------------------------------------------
// SID
// ---------------------------------------------------------------------------------------------

/// MS-DTYP 2.4.2 SID: a 48-bit identifier authority and up to 15 32-bit sub-authorities.
/// Shown and parsed as `S-1-5-21-…` (2.4.2.1).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Sid {
    authority: u64,
    sub_authorities: Vec<u32>,
}

/// Most sub-authorities a SID may have (MS-DTYP 2.4.2.2).
const MAX_SUB_AUTHORITIES: usize = 15;
/// Largest identifier authority (6 bytes).
const MAX_AUTHORITY: u64 = (1 << 48) - 1;

impl Sid {
    /// A SID from its identifier authority and sub-authorities.
    pub fn new(authority: u64, sub_authorities: &[u32]) -> Result<Sid, SecurityDescriptorError> {
        if authority > MAX_AUTHORITY {
            return Err(SecurityDescriptorError::AuthorityTooLarge(authority));
        }
        if sub_authorities.len() > MAX_SUB_AUTHORITIES {
            return Err(SecurityDescriptorError::TooManySubAuthorities(
                sub_authorities.len(),
            ));
        }
        Ok(Sid {
            authority,
            sub_authorities: sub_authorities.to_vec(),
        })
    }

    /// The identifier authority (5 for NT AUTHORITY, 1 for World, ...).
    pub fn authority(&self) -> u64 {
        self.authority
    }

    /// The sub-authorities; the last one of a user or group is its RID.
    pub fn sub_authorities(&self) -> &[u32] {
        &self.sub_authorities
    }

    /// Bytes on the wire: 8 + 4 per sub-authority.
    pub fn wire_len(&self) -> usize {
        8 + 4 * self.sub_authorities.len()
    }

    /// Decode a SID at the start of `buf` (bytes after it are left alone); returns it and its
    /// length.
    pub fn decode(buf: &[u8]) -> Result<(Sid, usize), DecodeError> {
        let mut r = Reader::new(buf);
        let revision = r.u8("SID Revision")?;
        if revision != 1 {
            // MS-DTYP 2.4.2.2: Revision MUST be 0x01.
            return Err(DecodeError::InvalidValue {
                what: "SID Revision",
                value: revision.into(),
            });
        }
        let count = r.u8("SID SubAuthorityCount")? as usize;
        if count > MAX_SUB_AUTHORITIES {
            return Err(DecodeError::InvalidValue {
                what: "SID SubAuthorityCount",
                value: count as u64,
            });
        }
        // IdentifierAuthority is big-endian, unlike everything else here.
        let auth = r.array::<6>("SID IdentifierAuthority")?;
        let authority = auth.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b));
        let mut sub_authorities = Vec::with_capacity(count);
        for _ in 0..count {
            sub_authorities.push(r.u32("SID SubAuthority")?);
        }
        Ok((
            Sid {
                authority,
                sub_authorities,
            },
            r.position(),
        ))
    }

    /// Append the SID to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(1); // Revision
        out.put_u8(self.sub_authorities.len() as u8);
        out.put_slice(&self.authority.to_be_bytes()[2..]);
        for s in &self.sub_authorities {
            out.put_u32_le(*s);
        }
    }
}

impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // MS-DTYP 2.4.2.1: the authority in decimal below 2^32, else as 12 hex digits.
        if self.authority < 1 << 32 {
            write!(f, "S-1-{}", self.authority)?;
        } else {
            write!(f, "S-1-0x{:012X}", self.authority)?;
        }
        for s in &self.sub_authorities {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sid({self})")
    }
}

impl FromStr for Sid {
    type Err = SecurityDescriptorError;

    /// Parse `S-1-AUTHORITY-SUB-...` (MS-DTYP 2.4.2.1; the authority may be `0x` + hex).
    fn from_str(s: &str) -> Result<Sid, SecurityDescriptorError> {
        let bad = || SecurityDescriptorError::SidString;
        let mut parts = s.split('-');
        if !parts.next().is_some_and(|p| p.eq_ignore_ascii_case("S")) || parts.next() != Some("1") {
            return Err(bad());
        }
        let auth = parts.next().ok_or_else(bad)?;
        let authority = match auth.strip_prefix("0x").or_else(|| auth.strip_prefix("0X")) {
            Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                u64::from_str_radix(hex, 16).map_err(|_| bad())?
            }
            Some(_) => return Err(bad()),
            None => decimal(auth).ok_or_else(bad)?,
        };
        let mut subs = Vec::new();
        for p in parts {
            let v = decimal(p).ok_or_else(bad)?;
            subs.push(u32::try_from(v).map_err(|_| bad())?);
            if subs.len() > MAX_SUB_AUTHORITIES {
                return Err(SecurityDescriptorError::TooManySubAuthorities(subs.len()));
            }
        }
        Sid::new(authority, &subs)
    }
}

/// Plain decimal digits only (no sign, no spaces), as `u64`.
fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

// ---------------------------------------------------------------------------------------------
// ACE and ACL
// ---------------------------------------------------------------------------------------------

/// AceType (MS-DTYP 2.4.4.1). Unknown values are kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct AceType(pub u8);

impl AceType {
    /// ACCESS_ALLOWED_ACE_TYPE.
    pub const ACCESS_ALLOWED: Self = Self(0x00);
    /// ACCESS_DENIED_ACE_TYPE.
    pub const ACCESS_DENIED: Self = Self(0x01);
    /// SYSTEM_AUDIT_ACE_TYPE (SACL).
    pub const SYSTEM_AUDIT: Self = Self(0x02);
    /// SYSTEM_ALARM_ACE_TYPE (reserved).
    pub const SYSTEM_ALARM: Self = Self(0x03);
    /// ACCESS_ALLOWED_CALLBACK_ACE_TYPE.
    pub const ACCESS_ALLOWED_CALLBACK: Self = Self(0x09);
    /// ACCESS_DENIED_CALLBACK_ACE_TYPE.
    pub const ACCESS_DENIED_CALLBACK: Self = Self(0x0A);
    /// SYSTEM_AUDIT_CALLBACK_ACE_TYPE.
    pub const SYSTEM_AUDIT_CALLBACK: Self = Self(0x0D);
    /// SYSTEM_MANDATORY_LABEL_ACE_TYPE.
    pub const SYSTEM_MANDATORY_LABEL: Self = Self(0x11);
    /// SYSTEM_RESOURCE_ATTRIBUTE_ACE_TYPE.
    pub const SYSTEM_RESOURCE_ATTRIBUTE: Self = Self(0x12);
    /// SYSTEM_SCOPED_POLICY_ID_ACE_TYPE.
    pub const SYSTEM_SCOPED_POLICY_ID: Self = Self(0x13);

    /// Whether the SID directly follows the access mask (MS-DTYP 2.4.4.2-2.4.4.17); the
    /// object ACE types put two GUIDs in between, and the client does not look into those.
    pub fn sid_follows_mask(self) -> bool {
        matches!(
            self.0,
            0x00 | 0x01 | 0x02 | 0x03 | 0x09 | 0x0A | 0x0D | 0x0E | 0x11 | 0x12 | 0x13
        )
    }
}

/// AceFlags bits (MS-DTYP 2.4.4.1).
pub mod ace_flags {
    /// OBJECT_INHERIT_ACE: files below inherit it.
    pub const OBJECT_INHERIT: u8 = 0x01;
    /// CONTAINER_INHERIT_ACE: directories below inherit it.
    pub const CONTAINER_INHERIT: u8 = 0x02;
    /// NO_PROPAGATE_INHERIT_ACE.
    pub const NO_PROPAGATE_INHERIT: u8 = 0x04;
    /// INHERIT_ONLY_ACE: applies to children only.
    pub const INHERIT_ONLY: u8 = 0x08;
    /// INHERITED_ACE: inherited from the parent.
    pub const INHERITED: u8 = 0x10;
    /// SUCCESSFUL_ACCESS_ACE_FLAG (audit).
    pub const SUCCESSFUL_ACCESS: u8 = 0x40;
    /// FAILED_ACCESS_ACE_FLAG (audit).
    pub const FAILED_ACCESS: u8 = 0x80;
}

/// One access control entry (MS-DTYP 2.4.4): header, access mask, and for the common types a
/// SID; whatever follows (callback application data, object GUIDs) is kept in `extra`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Ace {
    /// AceType: allow, deny, audit, ... (unknown types kept).
    pub ace_type: AceType,
    /// AceFlags ([`ace_flags`]).
    pub flags: u8,
    /// Mask: the access rights (MS-DTYP 2.4.3).
    pub access_mask: u32,
    /// The trustee, for types whose SID follows the mask ([`AceType::sid_follows_mask`]);
    /// `None` for the others, whose body is all in `extra`.
    pub sid: Option<Sid>,
    /// Bytes after the SID (or after the mask when `sid` is `None`), kept as they came.
    pub extra: Vec<u8>,
}

impl Ace {
    /// An ACCESS_ALLOWED ACE.
    pub fn allow(sid: Sid, access_mask: u32, flags: u8) -> Ace {
        Ace::simple(AceType::ACCESS_ALLOWED, sid, access_mask, flags)
    }

    /// An ACCESS_DENIED ACE.
    pub fn deny(sid: Sid, access_mask: u32, flags: u8) -> Ace {
        Ace::simple(AceType::ACCESS_DENIED, sid, access_mask, flags)
    }

    fn simple(ace_type: AceType, sid: Sid, access_mask: u32, flags: u8) -> Ace {
        Ace {
            ace_type,
            flags,
            access_mask,
            sid: Some(sid),
            extra: Vec::new(),
        }
    }

    fn wire_len(&self) -> usize {
        8 + self.sid.as_ref().map_or(0, Sid::wire_len) + self.extra.len()
    }

    /// Decode one ACE at the start of `buf`; returns it and its AceSize.
    fn decode(buf: &[u8]) -> Result<(Ace, usize), DecodeError> {
        let mut r = Reader::new(buf);
        let ace_type = AceType(r.u8("ACE AceType")?);
        let flags = r.u8("ACE AceFlags")?;
        let size = r.u16("ACE AceSize")? as usize;
        // Every ACE type has its 4-byte Mask after the header.
        if size < 8 || size > buf.len() {
            return Err(DecodeError::Inconsistent {
                what: "ACE",
                detail: "AceSize below 8 or beyond the ACL",
            });
        }
        let body = &buf[..size];
        let mut r = Reader::at(body, 4)?;
        let access_mask = r.u32("ACE Mask")?;
        let (sid, rest) = if ace_type.sid_follows_mask() {
            let (sid, n) = Sid::decode(&body[8..])?;
            (Some(sid), 8 + n)
        } else {
            (None, 8)
        };
        Ok((
            Ace {
                ace_type,
                flags,
                access_mask,
                sid,
                extra: body[rest..].to_vec(),
            },
            size,
        ))
    }

    fn encode(&self, out: &mut BytesMut) -> Result<(), SecurityDescriptorError> {
        let size = self.wire_len();
        let size16 = u16::try_from(size).map_err(|_| SecurityDescriptorError::TooLarge {
            what: "ACE",
            bytes: size,
        })?;
        out.put_u8(self.ace_type.0);
        out.put_u8(self.flags);
        out.put_u16_le(size16);
        out.put_u32_le(self.access_mask);
        if let Some(sid) = &self.sid {
            sid.encode(out);
        }
        out.put_slice(&self.extra);
        Ok(())
    }
}

/// An access control list (MS-DTYP 2.4.5).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Acl {
    /// AclRevision: 2 (ACL_REVISION), or 4 (ACL_REVISION_DS) when object ACEs are present.
    pub revision: u8,
    /// The ACEs, in order (order matters: the first matching deny or allow decides).
    pub aces: Vec<Ace>,
}

/// ACL_REVISION.
pub const ACL_REVISION: u8 = 2;

impl Acl {
    /// An ACL_REVISION list of `aces`.
    pub fn new(aces: Vec<Ace>) -> Acl {
        Acl {
            revision: ACL_REVISION,
            aces,
        }
    }

    fn wire_len(&self) -> usize {
        8 + self.aces.iter().map(Ace::wire_len).sum::<usize>()
    }

    /// Decode an ACL at the start of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Acl, DecodeError> {
        let mut r = Reader::new(buf);
        let revision = r.u8("ACL AclRevision")?;
        r.skip(1, "ACL Sbz1")?;
        let size = r.u16("ACL AclSize")? as usize;
        let count = r.u16("ACL AceCount")?;
        r.skip(2, "ACL Sbz2")?;
        if size < 8 || size > buf.len() {
            return Err(DecodeError::Inconsistent {
                what: "ACL",
                detail: "AclSize below 8 or beyond the descriptor",
            });
        }
        let mut at = 8;
        // Each ACE takes at least 8 bytes of the ACL, so the loop (and the Vec) is bounded
        // by the bytes received, whatever AceCount claims.
        let mut aces = Vec::new();
        for _ in 0..count {
            let (ace, n) = Ace::decode(&buf[at..size])?;
            aces.push(ace);
            at += n;
        }
        Ok(Acl { revision, aces })
    }

    fn encode(&self, out: &mut BytesMut) -> Result<(), SecurityDescriptorError> {
        let size = self.wire_len();
        let size16 = u16::try_from(size).map_err(|_| SecurityDescriptorError::TooLarge {
            what: "ACL",
            bytes: size,
        })?;
        let count =
            u16::try_from(self.aces.len()).map_err(|_| SecurityDescriptorError::TooLarge {
                what: "ACL",
                bytes: size,
            })?;
        out.put_u8(self.revision);
        out.put_u8(0); // Sbz1
        out.put_u16_le(size16);
        out.put_u16_le(count);
        out.put_u16_le(0); // Sbz2
        for ace in &self.aces {
            ace.encode(out)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// SECURITY_DESCRIPTOR
// ---------------------------------------------------------------------------------------------

/// SECURITY_DESCRIPTOR Control bits (MS-DTYP 2.4.6; the spec draws them most significant
/// first, these are the values).
pub mod control {
    /// SE_OWNER_DEFAULTED.
    pub const OWNER_DEFAULTED: u16 = 0x0001;
    /// SE_GROUP_DEFAULTED.
    pub const GROUP_DEFAULTED: u16 = 0x0002;
    /// SE_DACL_PRESENT: the DACL applies; present with no DACL (offset 0) is a NULL DACL,
    /// which grants everyone everything.
    pub const DACL_PRESENT: u16 = 0x0004;
    /// SE_DACL_DEFAULTED.
    pub const DACL_DEFAULTED: u16 = 0x0008;
    /// SE_SACL_PRESENT.
    pub const SACL_PRESENT: u16 = 0x0010;
    /// SE_SACL_DEFAULTED.
    pub const SACL_DEFAULTED: u16 = 0x0020;
    /// SE_DACL_AUTO_INHERIT_REQ.
    pub const DACL_AUTO_INHERIT_REQ: u16 = 0x0100;
    /// SE_SACL_AUTO_INHERIT_REQ.
    pub const SACL_AUTO_INHERIT_REQ: u16 = 0x0200;
    /// SE_DACL_AUTO_INHERITED.
    pub const DACL_AUTO_INHERITED: u16 = 0x0400;
    /// SE_SACL_AUTO_INHERITED.
    pub const SACL_AUTO_INHERITED: u16 = 0x0800;
    /// SE_DACL_PROTECTED: the DACL does not inherit from the parent.
    pub const DACL_PROTECTED: u16 = 0x1000;
    /// SE_SACL_PROTECTED.
    pub const SACL_PROTECTED: u16 = 0x2000;
    /// SE_RM_CONTROL_VALID: Sbz1 holds resource manager control bits.
    pub const RM_CONTROL_VALID: u16 = 0x4000;
    /// SE_SELF_RELATIVE: the parts are found by offsets (always so on the wire).
    pub const SELF_RELATIVE: u16 = 0x8000;
}

/// Length of the SECURITY_DESCRIPTOR header.
const HEADER_LEN: usize = 20;

/// MS-DTYP 2.4.6 SECURITY_DESCRIPTOR, decoded from (and encoded to) the self-relative form.
/// A part the query did not ask for (or the descriptor does not have) is `None`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SecurityDescriptor {
    /// Control ([`control`] bits).
    pub control: u16,
    /// Sbz1: resource manager control bits when [`control::RM_CONTROL_VALID`] is set, else 0.
    pub rm_control: u8,
    /// The owner.
    pub owner: Option<Sid>,
    /// The primary group (POSIX group on Samba).
    pub group: Option<Sid>,
    /// The system ACL (auditing); reading it needs SeSecurityPrivilege.
    pub sacl: Option<Acl>,
    /// The discretionary ACL (who may do what).
    pub dacl: Option<Acl>,
}

impl SecurityDescriptor {
    /// Decode a self-relative security descriptor. Trailing bytes after the last part are
    /// allowed (servers pad).
    pub fn decode(buf: &[u8]) -> Result<SecurityDescriptor, DecodeError> {
        let mut r = Reader::new(buf);
        let revision = r.u8("SECURITY_DESCRIPTOR Revision")?;
        if revision != 1 {
            return Err(DecodeError::InvalidValue {
                what: "SECURITY_DESCRIPTOR Revision",
                value: revision.into(),
            });
        }
        let rm_control = r.u8("SECURITY_DESCRIPTOR Sbz1")?;
        let control = r.u16("SECURITY_DESCRIPTOR Control")?;
        let owner = r.u32("SECURITY_DESCRIPTOR OffsetOwner")?;
        let group = r.u32("SECURITY_DESCRIPTOR OffsetGroup")?;
        let sacl = r.u32("SECURITY_DESCRIPTOR OffsetSacl")?;
        let dacl = r.u32("SECURITY_DESCRIPTOR OffsetDacl")?;
        let part = |offset: u32, what: &'static str| -> Result<Option<&[u8]>, DecodeError> {
            let offset = offset as usize;
            if offset == 0 {
                return Ok(None);
            }
            if offset < HEADER_LEN || offset >= buf.len() {
                return Err(DecodeError::BadOffset {
                    what,
                    offset,
                    length: 0,
                    message_len: buf.len(),
                });
            }
            Ok(Some(&buf[offset..]))
        };
        let sid = |offset, what| -> Result<Option<Sid>, DecodeError> {
            part(offset, what)?
                .map(|b| Sid::decode(b).map(|(s, _)| s))
                .transpose()
        };
        let acl = |offset, what| -> Result<Option<Acl>, DecodeError> {
            part(offset, what)?.map(Acl::decode).transpose()
        };
        Ok(SecurityDescriptor {
            control,
            rm_control,
            owner: sid(owner, "SECURITY_DESCRIPTOR owner")?,
            group: sid(group, "SECURITY_DESCRIPTOR group")?,
            sacl: acl(sacl, "SECURITY_DESCRIPTOR SACL")?,
            dacl: acl(dacl, "SECURITY_DESCRIPTOR DACL")?,
        })
    }

    /// Encode in self-relative form: SE_SELF_RELATIVE is set, and SE_DACL_PRESENT /
    /// SE_SACL_PRESENT for the ACLs that are there (a present bit without an ACL is kept: a
    /// NULL DACL).
    pub fn encode(&self) -> Result<Bytes, SecurityDescriptorError> {
        let mut control = self.control | control::SELF_RELATIVE;
        if self.dacl.is_some() {
            control |= control::DACL_PRESENT;
        }
        if self.sacl.is_some() {
            control |= control::SACL_PRESENT;
        }
        let mut body = BytesMut::new();
        let offset = |present: bool, len: usize, at: &mut usize| -> u32 {
            if !present {
                return 0;
            }
            let o = *at;
            *at += len;
            o as u32
        };
        let mut at = HEADER_LEN;
        let owner_at = offset(
            self.owner.is_some(),
            self.owner.as_ref().map_or(0, Sid::wire_len),
            &mut at,
        );
        let group_at = offset(
            self.group.is_some(),
            self.group.as_ref().map_or(0, Sid::wire_len),
            &mut at,
        );
        let sacl_at = offset(
            self.sacl.is_some(),
            self.sacl.as_ref().map_or(0, Acl::wire_len),
            &mut at,
        );
        let dacl_at = offset(
            self.dacl.is_some(),
            self.dacl.as_ref().map_or(0, Acl::wire_len),
            &mut at,
        );
        body.put_u8(1); // Revision
        body.put_u8(self.rm_control);
        body.put_u16_le(control);
        body.put_u32_le(owner_at);
        body.put_u32_le(group_at);
        body.put_u32_le(sacl_at);
        body.put_u32_le(dacl_at);
        if let Some(s) = &self.owner {
            s.encode(&mut body);
        }
        if let Some(s) = &self.group {
            s.encode(&mut body);
        }
        if let Some(a) = &self.sacl {
            a.encode(&mut body)?;
        }
        if let Some(a) = &self.dacl {
            a.encode(&mut body)?;
        }
        Ok(body.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::test_util::hex;

    /// A file's descriptor as Samba 4.17 (acl_xattr) keeps it for a file the test user
    /// created: owner the user, group "Domain Users", DACL: user full control, group and
    /// Everyone read + execute.
    const SAMBA_SD: &str = "01000480 14000000 30000000 00000000 4c000000 \
        010500000000000515000000a78439a593023211d536ab28e8030000 \
        010500000000000515000000a78439a593023211d536ab2801020000 \
        02006400 0300 0000 \
        00002400 ff011f00 010500000000000515000000a78439a593023211d536ab28e8030000 \
        00002400 a9001200 010500000000000515000000a78439a593023211d536ab2801020000 \
        00001400 a9001200 0101000000000001 00000000";

    const DOMAIN: &str = "S-1-5-21-2772010151-288490131-682309333";

    #[test]
    fn decodes_samba_descriptor_and_encodes_it_back() {
        let raw = hex(SAMBA_SD);
        let sd = SecurityDescriptor::decode(&raw).unwrap();
        assert_eq!(sd.control, control::SELF_RELATIVE | control::DACL_PRESENT);
        assert_eq!(
            sd.owner.as_ref().unwrap().to_string(),
            format!("{DOMAIN}-1000")
        );
        assert_eq!(
            sd.group.as_ref().unwrap().to_string(),
            format!("{DOMAIN}-513")
        );
        assert_eq!(sd.sacl, None);
        let dacl = sd.dacl.as_ref().unwrap();
        assert_eq!(dacl.revision, 2);
        let summary: Vec<(u8, u8, u32, String)> = dacl
            .aces
            .iter()
            .map(|a| {
                (
                    a.ace_type.0,
                    a.flags,
                    a.access_mask,
                    a.sid.as_ref().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (0, 0, 0x001f_01ff, format!("{DOMAIN}-1000")),
                (0, 0, 0x0012_00a9, format!("{DOMAIN}-513")),
                (0, 0, 0x0012_00a9, "S-1-1-0".to_string()),
            ]
        );
        assert!(dacl.aces.iter().all(|a| a.extra.is_empty()));
        assert_eq!(sd.encode().unwrap(), raw, "same bytes back");
    }

    #[test]
    fn owner_only_descriptor_golden() {
        let sd = SecurityDescriptor {
            control: 0,
            rm_control: 0,
            owner: Some("S-1-5-18".parse().unwrap()),
            group: None,
            sacl: None,
            dacl: None,
        };
        let out = sd.encode().unwrap();
        assert_eq!(
            hex::encode(&out),
            "01000080 14000000 00000000 00000000 00000000 0101000000000005 12000000"
                .replace(' ', "")
        );
        assert_eq!(SecurityDescriptor::decode(&out).unwrap().owner, sd.owner);
    }

    #[test]
    fn built_dacl_round_trips() {
        let user: Sid = format!("{DOMAIN}-1000").parse().unwrap();
        let everyone: Sid = "S-1-1-0".parse().unwrap();
        let sd = SecurityDescriptor {
            control: control::DACL_PROTECTED,
            rm_control: 0,
            owner: None,
            group: None,
            sacl: None,
            dacl: Some(Acl::new(vec![
                Ace::deny(everyone, 0x0002, 0),
                Ace::allow(
                    user,
                    0x001f_01ff,
                    ace_flags::OBJECT_INHERIT | ace_flags::CONTAINER_INHERIT,
                ),
            ])),
        };
        let out = sd.encode().unwrap();
        let back = SecurityDescriptor::decode(&out).unwrap();
        assert_eq!(
            back.control,
            control::DACL_PROTECTED | control::DACL_PRESENT | control::SELF_RELATIVE
        );
        assert_eq!(back.dacl, sd.dacl);
    }

    #[test]
    fn sid_strings() {
        for s in [
            "S-1-5-18",
            "S-1-1-0",
            "S-1-5-21-1-2-3-4294967295",
            "S-1-0x123456789ABC-7",
        ] {
            let sid: Sid = s.parse().unwrap();
            assert_eq!(sid.to_string(), s);
            let mut b = BytesMut::new();
            sid.encode(&mut b);
            assert_eq!(b.len(), sid.wire_len());
            assert_eq!(Sid::decode(&b).unwrap(), (sid, b.len()));
        }
        let sid: Sid = "s-1-5-32-544".parse().unwrap();
        assert_eq!(
            (sid.authority(), sid.sub_authorities()),
            (5, &[32, 544][..])
        );
        for bad in [
            "",
            "S-1",
            "S-2-5-18",
            "S-1--5",
            "S-1-5-x",
            "S-1-5-4294967296",
            "S-1-5-+1",
            "S-1-0x-1",
            "S-1-281474976710656",
            "X-1-5-18",
        ] {
            assert!(bad.parse::<Sid>().is_err(), "{bad:?}");
        }
        let many = format!("S-1-5{}", "-1".repeat(16));
        assert_eq!(
            many.parse::<Sid>(),
            Err(SecurityDescriptorError::TooManySubAuthorities(16))
        );
        assert!(Sid::new(1 << 48, &[]).is_err());
    }

    #[test]
    fn unknown_and_object_aces_keep_their_bytes() {
        // An ACCESS_ALLOWED_OBJECT ACE (type 5): Flags and a GUID after the mask, then a SID.
        let ace = "05 02 2800 01000000 01000000 00112233445566778899aabbccddeeff 0101000000000001 00000000";
        let acl = hex(&format!("04 00 3000 0100 0000 {ace}"));
        let parsed = Acl::decode(&acl).unwrap();
        assert_eq!(parsed.aces[0].sid, None);
        assert_eq!(parsed.aces[0].extra.len(), 0x28 - 8);
        let mut out = BytesMut::new();
        parsed.encode(&mut out).unwrap();
        assert_eq!(&out[..], &acl[..]);
    }

    #[test]
    fn malformed_descriptors_fail_cleanly() {
        let raw = hex(SAMBA_SD);
        // Every truncation fails with an error, never a panic.
        for n in 0..raw.len() {
            let _ = SecurityDescriptor::decode(&raw[..n]);
        }
        assert!(SecurityDescriptor::decode(&raw[..19]).is_err());
        let mut bad = raw.to_vec();
        bad[0] = 2; // Revision
        assert!(SecurityDescriptor::decode(&bad).is_err());
        let mut bad = raw.to_vec();
        bad[4] = 0x10; // owner inside the header
        assert!(matches!(
            SecurityDescriptor::decode(&bad),
            Err(DecodeError::BadOffset { .. })
        ));
        let mut bad = raw.to_vec();
        bad[16] = 0xb0; // DACL beyond the end
        assert!(SecurityDescriptor::decode(&bad).is_err());
        let mut bad = raw.to_vec();
        bad[0x4c + 4] = 0xff; // AceCount 255 in a 100-byte ACL
        assert!(SecurityDescriptor::decode(&bad).is_err());
        let mut bad = raw.to_vec();
        bad[0x4c + 8 + 2] = 4; // AceSize 4
        assert!(SecurityDescriptor::decode(&bad).is_err());
        let mut bad = raw.to_vec();
        bad[0x15] = 16; // owner SubAuthorityCount 16
        assert!(SecurityDescriptor::decode(&bad).is_err());
    }

    #[test]
    fn oversized_acl_is_an_encode_error() {
        let sid: Sid = "S-1-5-21-1-2-3-4".parse().unwrap();
        let aces = vec![Ace::allow(sid, 1, 0); 3000]; // 3000 × 28 bytes > 64 KiB
        let sd = SecurityDescriptor {
            control: 0,
            rm_control: 0,
            owner: None,
            group: None,
            sacl: None,
            dacl: Some(Acl::new(aces)),
        };
        assert!(matches!(
            sd.encode(),
            Err(SecurityDescriptorError::TooLarge { what: "ACL", .. })
        ));
    }
}
