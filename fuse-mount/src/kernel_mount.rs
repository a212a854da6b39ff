//! Mounting as root with our own mount(2), so the mount carries its type `fuse.smbfuse`.
//!
//! fuser mounts directly as root and through fusermount3 otherwise. fusermount3 honours the
//! `subtype=` option (the type becomes `fuse.<subtype>`), but fuser's direct mount always asks
//! for the bare type `fuse`, so `findmnt`, `df -T` and `umount -t fuse.smbfuse` could not tell
//! an smbfuse mount from any other FUSE mount. Here root opens /dev/fuse, mounts it with the
//! full type, and hands the descriptor to `fuser::Session::from_fd`; unprivileged users keep
//! fuser's fusermount3 path, which already gets the type right.
//!
//! The kernel's side of the options is in the kernel's fuse documentation
//! (Documentation/filesystems/fuse.rst, "Mount options"): `fd`, `rootmode`, `user_id` and
//! `group_id` are required; `allow_other` and `default_permissions` are flags.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fuser::{MountOption, SessionACL};
use rustix::mount::{mount, unmount, MountFlags, UnmountFlags};

/// The file system type the kernel records for our mounts.
pub const FS_TYPE: &str = "fuse.smbfuse";

/// A mount this process made itself. Unlike fuser's own mount, a session built from a
/// descriptor does not unmount anything when it ends: [`OwnMount::release`] does, and only
/// while the mount point still holds this mount (after an outside `umount` a new mount may
/// already be there).
#[derive(Debug)]
pub struct OwnMount {
    mountpoint: PathBuf,
    device: Option<String>,
}

impl OwnMount {
    /// The mount's `major:minor` device, as `/proc/self/mountinfo` shows it.
    pub fn device(&self) -> Option<&str> {
        self.device.as_deref()
    }

    /// Unmount, lazily if still busy, unless the mount point no longer holds this mount.
    pub fn release(&self) {
        let here = crate::kernel::device_of(&self.mountpoint);
        if self.device.is_some() && here != self.device {
            return;
        }
        if unmount(&self.mountpoint, UnmountFlags::empty()).is_err() {
            let _ = unmount(&self.mountpoint, UnmountFlags::DETACH);
        }
    }
}

/// Open /dev/fuse and mount it on `mountpoint` with `options` (as `fuse_config` builds them)
/// and the access rule `acl`. Returns the descriptor to serve and the mount.
pub fn mount_fuse(
    mountpoint: &Path,
    options: &[MountOption],
    acl: SessionACL,
) -> std::io::Result<(OwnedFd, OwnMount)> {
    let root_mode = std::fs::metadata(mountpoint)?.mode() & libc::S_IFMT;
    let device: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("/dev/fuse: {e} (is the fuse module loaded?)"),
            )
        })?
        .into();
    let request = MountRequest::from_options(options, acl);
    let data = CString::new(format!(
        "fd={},rootmode={:o},user_id={},group_id={}{}",
        device.as_raw_fd(),
        root_mode,
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
        request.data_flags,
    ))
    .map_err(|_| invalid("a mount option holds a NUL byte"))?;
    mount(
        request.source.as_str(),
        mountpoint,
        FS_TYPE,
        request.flags,
        data.as_c_str(),
    )
    .map_err(|e| std::io::Error::new(std::io::Error::from(e).kind(), format!("mount(2): {e}")))?;
    let own = OwnMount {
        mountpoint: mountpoint.to_path_buf(),
        device: crate::kernel::device_of(mountpoint),
    };
    Ok((device, own))
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, what.to_string())
}

/// What mount(2) is asked for, built from fuser's option list.
#[derive(Debug, PartialEq)]
struct MountRequest {
    /// The mount's source as `findmnt` shows it: the share's UNC name.
    source: String,
    flags: MountFlags,
    /// `,allow_other`, `,default_permissions`: appended to the required options.
    data_flags: String,
}

impl MountRequest {
    fn from_options(options: &[MountOption], acl: SessionACL) -> MountRequest {
        // Like every FUSE mount: no device nodes and no set-user-ID unless asked for.
        let mut flags = MountFlags::NODEV | MountFlags::NOSUID;
        let mut data_flags = String::new();
        let mut source = "smbfuse".to_string();
        for option in options {
            match option {
                MountOption::FSName(name) => source = name.clone(),
                MountOption::RO => flags |= MountFlags::RDONLY,
                MountOption::RW => flags -= MountFlags::RDONLY,
                MountOption::Dev => flags -= MountFlags::NODEV,
                MountOption::NoDev => flags |= MountFlags::NODEV,
                MountOption::Suid => flags -= MountFlags::NOSUID,
                MountOption::NoSuid => flags |= MountFlags::NOSUID,
                MountOption::Exec => flags -= MountFlags::NOEXEC,
                MountOption::NoExec => flags |= MountFlags::NOEXEC,
                MountOption::Atime => flags -= MountFlags::NOATIME,
                MountOption::NoAtime => flags |= MountFlags::NOATIME,
                MountOption::DirSync => flags |= MountFlags::DIRSYNC,
                MountOption::Sync => flags |= MountFlags::SYNCHRONOUS,
                MountOption::Async => flags -= MountFlags::SYNCHRONOUS,
                MountOption::DefaultPermissions => data_flags.push_str(",default_permissions"),
                // The type is always FS_TYPE; the remaining options are fusermount3's or
                // macOS's, which this path never meets.
                _ => {}
            }
        }
        // root-and-owner is enforced by the session, which needs every user let through.
        if matches!(acl, SessionACL::All | SessionACL::RootAndOwner) {
            data_flags.push_str(",allow_other");
        }
        MountRequest {
            source,
            flags,
            data_flags,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_flags_and_kernel_options() {
        let r = MountRequest::from_options(
            &[
                MountOption::FSName("//nas/data".into()),
                MountOption::Subtype("smbfuse".into()),
                MountOption::RO,
                MountOption::DefaultPermissions,
                MountOption::NoExec,
                MountOption::Suid,
            ],
            SessionACL::RootAndOwner,
        );
        assert_eq!(r.source, "//nas/data");
        assert_eq!(
            r.flags,
            MountFlags::NODEV | MountFlags::RDONLY | MountFlags::NOEXEC
        );
        assert_eq!(r.data_flags, ",default_permissions,allow_other");

        let r = MountRequest::from_options(&[MountOption::RW], SessionACL::Owner);
        assert_eq!(r.source, "smbfuse");
        assert_eq!(r.flags, MountFlags::NODEV | MountFlags::NOSUID);
        assert_eq!(r.data_flags, "");
    }
}
