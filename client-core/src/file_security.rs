//! Security descriptors of files and directories: QUERY_INFO and SET_INFO with InfoType
//! SMB2_0_INFO_SECURITY (MS-SMB2 2.2.37, 2.2.39), the AdditionalInformation naming the parts
//! (owner, group, DACL, SACL). The descriptor travels in self-relative form (MS-DTYP 2.4.6);
//! [`FileSecurity`] keeps those bytes, for a backup to restore exactly, beside a decoded view.
//!
//! Rights: reading needs READ_CONTROL (and ACCESS_SYSTEM_SECURITY, i.e. SeSecurityPrivilege,
//! for the SACL); setting the DACL needs WRITE_DAC, the owner or group WRITE_OWNER, the SACL
//! ACCESS_SYSTEM_SECURITY. The path forms open with exactly those rights. A set is one
//! SET_INFO: the server applies it or refuses it whole, e.g. an owner the user may not give
//! (Samba: STATUS_INVALID_OWNER unless the user holds SeRestorePrivilege or
//! SeTakeOwnershipPrivilege), which comes back as [`Error::Status`].

use bytes::Bytes;
use smb3_proto::msg::create::AccessMask;
use smb3_proto::msg::query_info::{security_information, QueryInfoRequest};
use smb3_proto::msg::security_descriptor::SecurityDescriptor;
use smb3_proto::msg::set_info::SetInfoRequest;
use smb3_proto::msg::FileId;
use smb3_proto::Command;

use crate::error::{decode, Error, Result};
use crate::file::File;
use crate::info_query::{query_growing, FIRST_BUFFER, TOO_SMALL};
use crate::share::Share;

/// Which parts of a security descriptor to read or set (AdditionalInformation, MS-SMB2
/// 2.2.37). Combine with `|`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SecurityParts(u32);

impl SecurityParts {
    /// The owner SID (OWNER_SECURITY_INFORMATION).
    pub const OWNER: Self = Self(security_information::OWNER);
    /// The primary group SID (GROUP_SECURITY_INFORMATION).
    pub const GROUP: Self = Self(security_information::GROUP);
    /// The DACL (DACL_SECURITY_INFORMATION).
    pub const DACL: Self = Self(security_information::DACL);
    /// The SACL (SACL_SECURITY_INFORMATION); needs SeSecurityPrivilege on the server.
    pub const SACL: Self = Self(security_information::SACL);

    /// Owner, group and DACL: what an ordinary user may read, and what a backup restores.
    pub const fn standard() -> Self {
        Self(Self::OWNER.0 | Self::GROUP.0 | Self::DACL.0)
    }

    /// The AdditionalInformation bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every part of `other` is included.
    pub const fn contains(self, other: SecurityParts) -> bool {
        self.0 & other.0 == other.0
    }

    /// Rights an open needs to read these parts.
    fn read_access(self) -> u32 {
        let mut access = AccessMask::READ_CONTROL;
        if self.contains(Self::SACL) {
            access |= AccessMask::ACCESS_SYSTEM_SECURITY;
        }
        access
    }

    /// Rights an open needs to set these parts.
    fn write_access(self) -> u32 {
        let mut access = 0;
        if self.0 & (Self::OWNER.0 | Self::GROUP.0) != 0 {
            access |= AccessMask::WRITE_OWNER;
        }
        if self.contains(Self::DACL) {
            access |= AccessMask::WRITE_DAC;
        }
        if self.contains(Self::SACL) {
            access |= AccessMask::ACCESS_SYSTEM_SECURITY;
        }
        access
    }

    fn check(self) -> Result<Self> {
        if self.0 == 0 {
            return Err(Error::ApiMisuse("no security descriptor parts named"));
        }
        Ok(self)
    }
}

impl std::ops::BitOr for SecurityParts {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// A security descriptor as the server sent it: the self-relative bytes and what they say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSecurity {
    /// The self-relative SECURITY_DESCRIPTOR (MS-DTYP 2.4.6) exactly as received: what a
    /// backup stores and gives back to [`Share::set_security_descriptor_raw`].
    pub raw: Bytes,
    /// The decoded view: owner, group, DACL (and SACL when asked for). Parts not asked for
    /// are `None`.
    pub descriptor: SecurityDescriptor,
}

fn file_security(raw: Bytes) -> Result<FileSecurity> {
    let descriptor = decode(Command::QUERY_INFO, SecurityDescriptor::decode(&raw))?;
    Ok(FileSecurity { raw, descriptor })
}

pub(crate) fn encode(descriptor: &SecurityDescriptor) -> Result<Bytes> {
    descriptor.encode().map_err(|_| {
        Error::ApiMisuse("security descriptor too large to encode (an ACL or ACE over 64 KiB)")
    })
}

impl Share {
    /// Read the `parts` of the security descriptor of `path` (a file or a directory).
    pub async fn security_descriptor(
        &self,
        path: &str,
        parts: SecurityParts,
    ) -> Result<FileSecurity> {
        self.across_links(path, |s: Share, p: String| async move {
            s.security_descriptor_here(&p, parts).await
        })
        .await
    }

    /// [`Share::security_descriptor`] on this share, with no DFS link on the way.
    async fn security_descriptor_here(
        &self,
        path: &str,
        parts: SecurityParts,
    ) -> Result<FileSecurity> {
        let parts = parts.check()?;
        let raw = self
            .on_path(path, parts.read_access(), |id| {
                self.security_descriptor_on(id, parts)
            })
            .await?;
        file_security(raw)
    }

    /// The `parts` of the descriptor of the file open as `id`, as the server sent them.
    pub(crate) async fn security_descriptor_on(
        &self,
        id: FileId,
        parts: SecurityParts,
    ) -> Result<Bytes> {
        let max = self.tree.core.negotiated.max_transact;
        query_growing(FIRST_BUFFER, max, move |len| async move {
            let req = QueryInfoRequest::security(id, parts.bits(), len);
            self.tree
                .core
                .send(&req, self.tree.call().allowing(TOO_SMALL))
                .await
        })
        .await
    }

    /// Set the `parts` of the descriptor of the file open as `id` from `raw`.
    pub(crate) async fn set_security_descriptor_on(
        &self,
        id: FileId,
        raw: Bytes,
        parts: SecurityParts,
    ) -> Result<()> {
        let req = SetInfoRequest::security(id, parts.bits(), raw);
        self.tree.core.send(&req, self.tree.call()).await.map(drop)
    }

    /// Set the `parts` of the security descriptor of `path` from `descriptor` (the other
    /// parts of `descriptor` are ignored by the server). Opens `path` with only the rights
    /// those parts need. The server applies the whole request or none of it.
    pub async fn set_security_descriptor(
        &self,
        path: &str,
        descriptor: &SecurityDescriptor,
        parts: SecurityParts,
    ) -> Result<()> {
        self.set_security_descriptor_raw(path, encode(descriptor)?, parts)
            .await
    }

    /// [`Share::set_security_descriptor`] from self-relative bytes, e.g. a
    /// [`FileSecurity::raw`] kept by a backup. The bytes are sent as they are.
    pub async fn set_security_descriptor_raw(
        &self,
        path: &str,
        raw: Bytes,
        parts: SecurityParts,
    ) -> Result<()> {
        self.across_links(path, |s: Share, p: String| {
            let raw = raw.clone();
            async move { s.set_security_descriptor_raw_here(&p, raw, parts).await }
        })
        .await
    }

    /// [`Share::set_security_descriptor_raw`] on this share, with no DFS link on the way.
    async fn set_security_descriptor_raw_here(
        &self,
        path: &str,
        raw: Bytes,
        parts: SecurityParts,
    ) -> Result<()> {
        let parts = parts.check()?;
        self.on_path(path, parts.write_access(), |id| {
            self.set_security_descriptor_on(id, raw, parts)
        })
        .await
    }
}

impl File {
    /// Read the `parts` of this file's security descriptor. The handle needs READ_CONTROL:
    /// open it with [`OpenOptions::read_security`](crate::OpenOptions::read_security).
    pub async fn security_descriptor(&self, parts: SecurityParts) -> Result<FileSecurity> {
        let parts = parts.check()?;
        let max = self.core().negotiated.max_transact;
        let raw = query_growing(FIRST_BUFFER, max, |len| async move {
            let req = QueryInfoRequest::security(self.file_id(), parts.bits(), len);
            self.core()
                .send(&req, self.on_open().allowing(TOO_SMALL))
                .await
                .map_err(|e| self.err(e))
        })
        .await?;
        file_security(raw)
    }

    /// Set the `parts` of this file's security descriptor from `descriptor`. The handle
    /// needs WRITE_DAC / WRITE_OWNER: open it with
    /// [`OpenOptions::write_security`](crate::OpenOptions::write_security).
    pub async fn set_security_descriptor(
        &self,
        descriptor: &SecurityDescriptor,
        parts: SecurityParts,
    ) -> Result<()> {
        self.set_security_descriptor_raw(encode(descriptor)?, parts)
            .await
    }

    /// [`File::set_security_descriptor`] from self-relative bytes, sent as they are.
    pub async fn set_security_descriptor_raw(
        &self,
        raw: Bytes,
        parts: SecurityParts,
    ) -> Result<()> {
        let parts = parts.check()?;
        let req = SetInfoRequest::security(self.file_id(), parts.bits(), raw);
        self.request(&req).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_map_to_rights() {
        let all = SecurityParts::standard();
        assert_eq!(all.bits(), 0x7);
        assert_eq!(all.read_access(), AccessMask::READ_CONTROL);
        assert_eq!(
            (SecurityParts::DACL | SecurityParts::SACL).read_access(),
            AccessMask::READ_CONTROL | AccessMask::ACCESS_SYSTEM_SECURITY
        );
        assert_eq!(SecurityParts::DACL.write_access(), AccessMask::WRITE_DAC);
        assert_eq!(SecurityParts::GROUP.write_access(), AccessMask::WRITE_OWNER);
        assert_eq!(
            all.write_access(),
            AccessMask::WRITE_OWNER | AccessMask::WRITE_DAC
        );
        assert!(all.contains(SecurityParts::OWNER));
        assert!(!all.contains(SecurityParts::SACL));
        assert!(SecurityParts(0).check().is_err());
    }
}
