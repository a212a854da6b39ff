//! Extended attributes: GETXATTR, SETXATTR, LISTXATTR, REMOVEXATTR on the `user.`
//! namespace, kept as the file's SMB extended attributes (EAs), as the Linux kernel client
//! does: `user.NAME` is the EA `NAME` (Samba keeps it as the xattr `user.NAME` on its disk, so
//! the name is the same on both sides). Other namespaces (`security.`, `system.`, `trusted.`)
//! have nowhere to go on SMB: reading one finds nothing (ENODATA, at once and without a
//! request, which matters: the kernel asks for `security.capability` before every write on a
//! FUSE file system), setting one is EOPNOTSUPP. All of this with `-o user_xattr`; without it
//! (the default) every xattr request is ENOSYS, which the kernel remembers for the mount and
//! then asks nothing more, not even before writes: with them on, 50,000 writes of 4 KiB took
//! 1.3-1.6 times as long.
//!
//! Differences from a local file system, all from SMB: names are compared without regard to
//! ASCII case (`user.Tag` and `user.tag` are one attribute); an empty value cannot be stored
//! (an empty EA means "remove" on the wire: EINVAL); a value holds at most 65,535 bytes
//! (E2BIG); `XATTR_CREATE` and `XATTR_REPLACE` are checked by reading first, so two clients
//! racing on one name can both succeed.

use std::ffi::OsStr;

use bytes::Bytes;

use super::SmbFs;
use crate::errno::{FsError, FsResult};

/// The namespace SMB EAs appear in.
#[cfg(target_os = "linux")]
const USER: &[u8] = b"user.";

/// `setxattr(2)` flags, as the kernel sends them.
const XATTR_CREATE: i32 = 1;
const XATTR_REPLACE: i32 = 2;

/// ENODATA, which macOS calls ENOATTR.
#[cfg(target_os = "linux")]
const NO_ATTRIBUTE: i32 = libc::ENODATA;
#[cfg(not(target_os = "linux"))]
const NO_ATTRIBUTE: i32 = libc::ENOATTR;

/// The EA name an xattr name stands for, each byte the `char` of that code point (as the
/// library takes names); `None` for a name outside the `user.` namespace (on Linux; macOS has
/// no namespaces) or with nothing after it.
pub fn ea_name(xattr: &OsStr) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    #[cfg(target_os = "linux")]
    let rest = xattr.as_bytes().strip_prefix(USER)?;
    #[cfg(not(target_os = "linux"))]
    let rest = xattr.as_bytes();
    (!rest.is_empty()).then(|| rest.iter().map(|&b| char::from(b)).collect())
}

/// The xattr name of the EA `name`, NUL-terminated as LISTXATTR lists them.
fn listed_name(name: &str, out: &mut Vec<u8>) {
    #[cfg(target_os = "linux")]
    out.extend_from_slice(USER);
    // Names come from the library one byte per char (all at most U+00FF).
    out.extend(name.chars().map(|c| u8::try_from(c).unwrap_or(b'?')));
    out.push(0);
}

impl SmbFs {
    /// The value of the xattr `name` of `ino`.
    pub async fn getxattr(&self, ino: u64, name: &OsStr) -> FsResult<Bytes> {
        let ea = ea_name(name).ok_or(FsError::new(NO_ATTRIBUTE))?;
        let path = self.path_of(ino)?;
        let value = self
            .retry(|| self.share.extended_attribute(&path, &ea))
            .await?;
        value.ok_or(FsError::new(NO_ATTRIBUTE))
    }

    /// The names of `ino`'s xattrs, each NUL-terminated.
    pub async fn listxattr(&self, ino: u64) -> FsResult<Vec<u8>> {
        let path = self.path_of(ino)?;
        let eas = self.retry(|| self.share.extended_attributes(&path)).await?;
        let mut out = Vec::new();
        for ea in &eas {
            listed_name(&ea.name, &mut out);
        }
        Ok(out)
    }

    /// Set the xattr `name` of `ino` to `value`; `flags` as `setxattr(2)`.
    pub async fn setxattr(&self, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> FsResult<()> {
        let ea = ea_name(name).ok_or(FsError::new(libc::EOPNOTSUPP))?;
        self.writable()?;
        if value.is_empty() {
            return Err(FsError::new(libc::EINVAL));
        }
        if value.len() > smb3_client::MAX_EA_VALUE_LEN {
            return Err(FsError::new(libc::E2BIG));
        }
        let path = self.path_of(ino)?;
        if flags & (XATTR_CREATE | XATTR_REPLACE) != 0 {
            let exists = self
                .retry(|| self.share.extended_attribute(&path, &ea))
                .await?
                .is_some();
            if exists && flags & XATTR_CREATE != 0 {
                return Err(FsError::new(libc::EEXIST));
            }
            if !exists && flags & XATTR_REPLACE != 0 {
                return Err(FsError::new(NO_ATTRIBUTE));
            }
        }
        let value = Bytes::copy_from_slice(value);
        self.retry(|| self.share.set_extended_attribute(&path, &ea, value.clone()))
            .await?;
        Ok(())
    }

    /// Remove the xattr `name` of `ino` (ENODATA when it has none of that name: SMB says
    /// nothing either way, so it is looked for first).
    pub async fn removexattr(&self, ino: u64, name: &OsStr) -> FsResult<()> {
        let ea = ea_name(name).ok_or(FsError::new(libc::EOPNOTSUPP))?;
        self.writable()?;
        let path = self.path_of(ino)?;
        let exists = self
            .retry(|| self.share.extended_attribute(&path, &ea))
            .await?
            .is_some();
        if !exists {
            return Err(FsError::new(NO_ATTRIBUTE));
        }
        self.retry(|| self.share.remove_extended_attribute(&path, &ea))
            .await?;
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn only_the_user_namespace_is_kept() {
        assert_eq!(ea_name(OsStr::new("user.tag")).as_deref(), Some("tag"));
        assert_eq!(ea_name(OsStr::new("user.")), None);
        for other in [
            "security.capability",
            "system.posix_acl_access",
            "trusted.x",
            "tag",
        ] {
            assert_eq!(ea_name(OsStr::new(other)), None, "{other}");
        }
        // Bytes that are not UTF-8 go through one for one.
        let raw = OsStr::from_bytes(b"user.\xe9t\xe9");
        let ea = ea_name(raw).unwrap();
        let mut listed = Vec::new();
        listed_name(&ea, &mut listed);
        assert_eq!(listed, b"user.\xe9t\xe9\0");
    }
}
