//! `chmod` and `chown` on a share with the SMB3 POSIX extensions.
//!
//! Neither has a SET_INFO class of its own. A mode travels as a security descriptor whose DACL
//! is exactly one ACE naming S-1-5-88-3-MODE (the SID Windows' NFS server uses for mode bits):
//! on a POSIX open Samba recognises that shape and applies the mode instead of storing the ACL
//! (source3/smbd/smb2_nttrans.c `check_smb2_posix_chmod_ace`). Samba applies the rwx bits
//! only: setuid, setgid and sticky cannot be set this way. An owner or group travels as the
//! descriptor's owner / group SID in Samba's Unix form (S-1-22-1-UID, S-1-22-2-GID); the
//! server decides whether the user may give it (a plain user may not: POSIX says the same).

use smb3_proto::msg::posix::{chmod_trustee, UnixId};
use smb3_proto::msg::security_descriptor::{control, Ace, Acl, SecurityDescriptor};
use smb3_proto::NtStatus;

use crate::error::{Error, Result};
use crate::file::File;
use crate::file_security::SecurityParts;
use crate::share::Share;

/// The descriptor that asks a POSIX server to set `permissions`.
fn mode_descriptor(permissions: u32) -> SecurityDescriptor {
    SecurityDescriptor {
        control: control::DACL_PRESENT | control::SELF_RELATIVE,
        rm_control: 0,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl::new(vec![Ace::allow(chmod_trustee(permissions), 0, 0)])),
    }
}

/// The descriptor and the parts that set `uid` and / or `gid`.
fn owner_descriptor(uid: Option<u32>, gid: Option<u32>) -> (SecurityDescriptor, SecurityParts) {
    let mut parts = None;
    let mut add = |p: SecurityParts| parts = Some(parts.map_or(p, |q: SecurityParts| q | p));
    if uid.is_some() {
        add(SecurityParts::OWNER);
    }
    if gid.is_some() {
        add(SecurityParts::GROUP);
    }
    let descriptor = SecurityDescriptor {
        control: control::SELF_RELATIVE,
        rm_control: 0,
        owner: uid.map(|u| UnixId::User(u).to_sid()),
        group: gid.map(|g| UnixId::Group(g).to_sid()),
        sacl: None,
        dacl: None,
    };
    (descriptor, parts.unwrap_or(SecurityParts::OWNER))
}

fn not_posix(feature: &'static str, path: &str) -> Error {
    Error::Unsupported {
        feature,
        status: NtStatus::NOT_SUPPORTED,
        path: Some(path.to_string()),
    }
}

impl Share {
    /// Set the permission bits of `path` (`chmod`), on a POSIX share
    /// ([`Share::is_posix`]); elsewhere [`Error::Unsupported`]. The server applies the rwx
    /// bits (Samba ignores setuid, setgid and sticky here).
    pub async fn set_mode(&self, path: &str, permissions: u32) -> Result<()> {
        self.across_links(path, |s: Share, p: String| async move {
            s.set_mode_here(&p, permissions).await
        })
        .await
    }

    /// [`Share::set_mode`] on this share, with no DFS link on the way.
    async fn set_mode_here(&self, path: &str, permissions: u32) -> Result<()> {
        if !self.is_posix() {
            return Err(not_posix(
                "changing a file's mode (the share has no SMB3 POSIX extensions)",
                path,
            ));
        }
        self.set_security_descriptor(path, &mode_descriptor(permissions), SecurityParts::DACL)
            .await
    }

    /// Give `path` the owner `uid` and / or the group `gid` (`chown`; `None` leaves that one
    /// as it is), on a POSIX share; elsewhere [`Error::Unsupported`]. The server refuses what
    /// the user may not do (Samba: STATUS_INVALID_OWNER, or ACCESS_DENIED).
    pub async fn set_owner(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.across_links(path, |s: Share, p: String| async move {
            s.set_owner_here(&p, uid, gid).await
        })
        .await
    }

    /// [`Share::set_owner`] on this share, with no DFS link on the way.
    async fn set_owner_here(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        if !self.is_posix() {
            return Err(not_posix(
                "changing a file's owner (the share has no SMB3 POSIX extensions)",
                path,
            ));
        }
        if uid.is_none() && gid.is_none() {
            return Ok(());
        }
        let (descriptor, parts) = owner_descriptor(uid, gid);
        self.set_security_descriptor(path, &descriptor, parts).await
    }
}

impl File {
    /// [`Share::set_mode`] on this open; the handle needs WRITE_DAC
    /// ([`OpenOptions::write_security`](crate::OpenOptions::write_security)).
    pub async fn set_mode(&self, permissions: u32) -> Result<()> {
        if !self.is_posix() {
            return Err(not_posix(
                "changing a file's mode (the share has no SMB3 POSIX extensions)",
                self.path(),
            ));
        }
        self.set_security_descriptor(&mode_descriptor(permissions), SecurityParts::DACL)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_one_ace_naming_the_nfs_mode_sid() {
        let sd = mode_descriptor(0o640);
        let aces = &sd.dacl.as_ref().unwrap().aces;
        assert_eq!(aces.len(), 1);
        assert_eq!(aces[0].sid.as_ref().unwrap().to_string(), "S-1-5-88-3-416");
        assert!(sd.owner.is_none() && sd.group.is_none());
        sd.encode().unwrap();
    }

    #[test]
    fn owners_are_samba_unix_sids() {
        let (sd, parts) = owner_descriptor(Some(1000), None);
        assert_eq!(sd.owner.unwrap().to_string(), "S-1-22-1-1000");
        assert_eq!(parts, SecurityParts::OWNER);
        let (sd, parts) = owner_descriptor(None, Some(50));
        assert_eq!(sd.group.unwrap().to_string(), "S-1-22-2-50");
        assert_eq!(parts, SecurityParts::GROUP);
        let (_, parts) = owner_descriptor(Some(1), Some(2));
        assert_eq!(parts, SecurityParts::OWNER | SecurityParts::GROUP);
    }
}
