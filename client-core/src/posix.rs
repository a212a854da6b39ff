//! The SMB3 POSIX extensions as the library uses them: what a POSIX share says of a file
//! ([`PosixMetadata`]), and the create context every open on such a share carries.
//!
//! A share speaks POSIX when the server answered the negotiate context (Samba with
//! `smb3 unix extensions = yes` in `[global]`) and the share did not turn it off: Samba then
//! answers a CREATE carrying the POSIX create context with one of its own, and ignores the
//! context on a share where the extensions are off (source3/smbd/smb2_create.c). So one probe
//! of the share's root decides (see `Client::share`).
//!
//! Every open on a POSIX share is a POSIX open: names are case-sensitive, the server follows
//! no symlink (a symlink is opened as itself and reported as one), unlink and rename follow
//! POSIX rules, and FilePosixInformation can be queried on the handle.

use smb3_proto::msg::create::{CreateContextRequest, CreateRequest};
use smb3_proto::msg::posix::{PosixCreateInfo, PosixFileType, PosixMode, UnixId};
use smb3_proto::msg::security_descriptor::Sid;

/// Permission bits a file gets when it is created on a POSIX share without a mode of its own
/// ([`OpenOptions::mode`](crate::OpenOptions::mode)): what a umask of 022 leaves of 0666.
pub const DEFAULT_FILE_MODE: u32 = 0o644;
/// Permission bits of a directory made without a mode of its own: 0777 under a umask of 022.
pub const DEFAULT_DIR_MODE: u32 = 0o755;

/// What a share with the SMB3 POSIX extensions says of a file beyond its size and times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PosixMetadata {
    /// The file type; `None` for a type the extensions do not define.
    pub file_type: Option<PosixFileType>,
    /// Permission bits (`0o7777`: rwx for user, group and others, sticky, setgid, setuid).
    pub permissions: u32,
    /// Number of hard links.
    pub links: u32,
    /// Owner, as the server names it.
    pub owner: Sid,
    /// Group, as the server names it.
    pub group: Sid,
    /// The reparse tag of a symlink or special file stored as a reparse point (0: none).
    pub reparse_tag: u32,
}

impl PosixMetadata {
    pub(crate) fn from_wire(info: &PosixCreateInfo) -> PosixMetadata {
        PosixMetadata {
            file_type: info.mode.file_type(),
            permissions: info.mode.permissions(),
            links: info.nlinks,
            owner: info.owner.clone(),
            group: info.group.clone(),
            reparse_tag: info.reparse_tag,
        }
    }

    /// The Unix `st_mode` (type and permission bits), when the type is one of the seven.
    pub fn st_mode(&self) -> Option<u32> {
        Some(self.file_type?.unix_bits() | self.permissions)
    }

    /// The owner's user id, when the owner SID is one of the Unix forms (Samba's S-1-22-1-UID,
    /// Windows NFS's S-1-5-88-1-UID). A domain or local account SID maps to no id by itself.
    pub fn uid(&self) -> Option<u32> {
        match UnixId::from_sid(&self.owner)? {
            UnixId::User(uid) => Some(uid),
            UnixId::Group(_) => None,
        }
    }

    /// The group's id, when the group SID is one of the Unix forms (S-1-22-2-GID,
    /// S-1-5-88-2-GID).
    pub fn gid(&self) -> Option<u32> {
        match UnixId::from_sid(&self.group)? {
            UnixId::Group(gid) => Some(gid),
            UnixId::User(_) => None,
        }
    }
}

/// Make `req` a POSIX open whose new file, if it creates one, gets `permissions`.
pub(crate) fn add_posix_context(req: &mut CreateRequest, permissions: u32) {
    req.contexts.push(CreateContextRequest::Posix {
        mode: PosixMode::permissions_only(permissions),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(mode: u32, owner: &str, group: &str) -> PosixCreateInfo {
        PosixCreateInfo {
            nlinks: 1,
            reparse_tag: 0,
            mode: PosixMode::from_unix(mode),
            owner: owner.parse().unwrap(),
            group: group.parse().unwrap(),
        }
    }

    #[test]
    fn unix_sids_give_ids_and_account_sids_do_not() {
        let m = PosixMetadata::from_wire(&info(0o100640, "S-1-22-1-1000", "S-1-22-2-100"));
        assert_eq!(m.st_mode(), Some(0o100640));
        assert_eq!((m.uid(), m.gid()), (Some(1000), Some(100)));
        // Samba names a passdb user by its account SID: no id without a mapping.
        let m = PosixMetadata::from_wire(&info(0o040755, "S-1-5-21-1-2-3-1000", "S-1-22-1-5"));
        assert_eq!(m.file_type, Some(PosixFileType::Directory));
        assert_eq!(
            (m.uid(), m.gid()),
            (None, None),
            "a user SID is not a group"
        );
    }
}
