//! Symbolic links and special files on a share without the SMB3 POSIX extensions, kept as
//! reparse points (MS-FSCC 2.1.2): what Windows, Windows' NFS server, Linux's SMB client and
//! Samba 4.21 and later (on any share, in an xattr of the file) keep.
//!
//! Reading, whatever `reparse=` says:
//! - A listing carries each reparse point's tag in the slot of its EA size (MS-FSCC 2.4.17,
//!   `DirEntry::reparse_tag`): IO_REPARSE_TAG_SYMLINK is a link with no further request; an
//!   NFS reparse point (IO_REPARSE_TAG_NFS) does not say which special file it is, so that
//!   one entry's reparse point is read (READDIRPLUS must give the kernel the right type: it
//!   takes a type that changes later for a broken inode).
//! - A lookup finds FILE_ATTRIBUTE_REPARSE_POINT in the file's attributes (the library opens a
//!   link the server leaves to the client as itself, see `Share::metadata`) and reads the
//!   reparse point: one more round trip, for reparse points only, which also gives a link's
//!   size (its target's length, as `lstat` has it).
//! - Other tags (a junction, a DFS link, a deduplicated or cloud file) are shown as the file
//!   or directory they are.
//!
//! A target is shown as the server keeps it and never resolved here (the kernel follows it as
//! any link): relative with `/` separators, `/etc/x` as it is. A Windows absolute target
//! names another machine's namespace and has no POSIX form; it is shown as a Windows user
//! sees it with `/` for `\` ([`shown_target`]): `\??\C:\dir\x` as `C:/dir/x`, `\\srv\sh\x`
//! and `\??\UNC\srv\sh\x` as `//srv/sh/x`. Nothing is made of it on this side: the kernel
//! reads `C:/dir/x` as relative to the link's directory, where nothing has that name.
//!
//! Making (`symlink(2)`, `mknod(2)` of a FIFO, socket or device) follows `reparse=`
//! ([`ReparseForm`]); the server may refuse. Samba 4.17 keeps no reparse points (every reparse
//! FSCTL is NOT_A_REPARSE_POINT, source3/modules/util_reparse.c), nor does a file system
//! without them: EPERM, as for a file system that cannot hold links, and the mount does not
//! ask again. Windows refuses a link to a user without the right to make them
//! (PRIVILEGE_NOT_HELD, EPERM too).

use std::sync::atomic::Ordering;

use smb3_client::{
    link_target_in, DirEntry, DosAttributes, Error, LinkForm, Metadata, NfsReparse, ReparseData,
    Share, SpecialKind, IO_REPARSE_TAG_NFS, IO_REPARSE_TAG_SYMLINK,
};

use super::config::ReparseForm;
use super::SmbFs;
use crate::errno::{FsError, FsResult};

/// What a reparse point turned out to be: the kind shown, and the size (a link's target's
/// length as shown). `attr` puts it into what `stat` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) kind: SeenKind,
    pub(super) size: u64,
    /// A device's number as `st_rdev` shows it (see [`device_number`]); 0 for the rest.
    pub(super) rdev: u32,
}

/// `major` and `minor` in the encoding FUSE carries `st_rdev` in (the kernel's 32-bit
/// `new_encode_dev`: minor bits 0-7 and 20-31, major bits 8-19), or 0 when they do not fit
/// in it (a major above 4095 or a minor above 1,048,575: numbers from the server, shown as
/// none rather than as another device's).
pub(super) fn device_number(major: u32, minor: u32) -> u32 {
    if major > 0xfff || minor > 0xf_ffff {
        return 0;
    }
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}

/// The kinds of file a share without the POSIX extensions keeps as reparse points (or, a
/// link, as a Minshall+French file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SeenKind {
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

/// Whether `m` (from a share without the POSIX extensions) is a reparse point worth reading.
pub(super) fn is_reparse_point(m: &Metadata) -> bool {
    m.posix.is_none() && m.attributes.contains(DosAttributes::REPARSE_POINT)
}

/// What a listing entry on a share without the POSIX extensions is, where its tag alone says:
/// a link (its size unknown until a GETATTR reads it). `None` for the rest.
pub(super) fn listed_kind(entry: &DirEntry) -> Option<Seen> {
    (entry.metadata.posix.is_none() && entry.reparse_tag == IO_REPARSE_TAG_SYMLINK).then_some(
        Seen {
            kind: SeenKind::Symlink,
            size: 0,
            rdev: 0,
        },
    )
}

/// Whether a listing entry is one whose tag does not say what it is (an NFS reparse point).
pub(super) fn needs_reading(entry: &DirEntry) -> bool {
    entry.metadata.posix.is_none() && entry.reparse_tag == IO_REPARSE_TAG_NFS
}

/// What the reparse point `data` is shown as; `None` for a tag this mount does not show
/// as anything but the file or directory it is. A link whose target the server sent
/// malformed is an error (the library refuses it, see `Share::read_link`).
pub(super) fn seen(data: &ReparseData) -> Result<Option<Seen>, Error> {
    if let Some(target) = link_target_in(data) {
        return Ok(Some(Seen {
            kind: SeenKind::Symlink,
            size: shown_target(&target?).len() as u64,
            rdev: 0,
        }));
    }
    let (kind, rdev) = match data {
        ReparseData::Nfs(NfsReparse::Fifo) => (SeenKind::Fifo, 0),
        ReparseData::Nfs(NfsReparse::Socket) => (SeenKind::Socket, 0),
        ReparseData::Nfs(NfsReparse::CharDevice { major, minor }) => {
            (SeenKind::CharDevice, device_number(*major, *minor))
        }
        ReparseData::Nfs(NfsReparse::BlockDevice { major, minor }) => {
            (SeenKind::BlockDevice, device_number(*major, *minor))
        }
        _ => return Ok(None),
    };
    Ok(Some(Seen {
        kind,
        size: 0,
        rdev,
    }))
}

/// Read the reparse point at `path` and say what it is (one round trip).
pub(super) async fn read(share: &Share, path: &str) -> Result<Option<Seen>, Error> {
    match share.reparse_point(path).await? {
        Some(data) => seen(&data),
        None => Ok(None),
    }
}

/// A link's target as `readlink` shows it (see the module notes): a target in one of
/// Windows' own namespaces as a Windows user sees it, with `/` separators; any other as it
/// is, `\` turned into `/` (the library has done that already for rooted and relative ones).
pub(super) fn shown_target(target: &str) -> String {
    // `\??\` is the object manager's prefix for what Win32 calls `C:\` or `\\srv\sh`
    // (MS-FSCC 2.1.2.4: an absolute SubstituteName is an NT path); the PrintName a Windows
    // client shows leaves it out.
    let win32 = match target.strip_prefix("\\??\\") {
        Some(rest) => match rest.get(..4) {
            Some(unc) if unc.eq_ignore_ascii_case("UNC\\") => format!("\\\\{}", &rest[4..]),
            _ => rest.to_string(),
        },
        None => target.to_string(),
    };
    win32.replace('\\', "/")
}

impl SmbFs {
    /// SYMLINK on a share without the POSIX extensions and without `mfsymlinks`: a reparse
    /// point in the form `reparse=` says.
    pub(super) async fn symlink_as_reparse_point(&self, path: &str, target: &str) -> FsResult<()> {
        let form = match self.cfg.reparse {
            ReparseForm::Native => LinkForm::Native,
            ReparseForm::Nfs => LinkForm::Nfs,
            ReparseForm::None => return Err(FsError::new(libc::EPERM)),
        };
        self.refused_before()?;
        let made = self.share.symlink_as(target, path, form).await;
        self.unless_unsupported(made)
    }

    /// MKNOD of a FIFO, socket or device on a share without the POSIX extensions: an NFS
    /// reparse point, unless `reparse=none`.
    pub(super) async fn special_as_reparse_point(
        &self,
        path: &str,
        kind: SpecialKind,
        permissions: u32,
    ) -> FsResult<()> {
        if self.cfg.reparse == ReparseForm::None {
            return Err(FsError::new(libc::EPERM));
        }
        self.refused_before()?;
        let made = self.share.make_special(path, kind, permissions).await;
        self.unless_unsupported(made)
    }

    fn refused_before(&self) -> FsResult<()> {
        if self.no_reparse_points.load(Ordering::Relaxed) {
            return Err(FsError::new(libc::EPERM));
        }
        Ok(())
    }

    /// A server that keeps no reparse points: EPERM (`symlink(2)`: "the file system does not
    /// support the creation of symbolic links"), now and from now on.
    fn unless_unsupported(&self, made: Result<(), Error>) -> FsResult<()> {
        match made {
            Err(e @ Error::Unsupported { .. }) => {
                tracing::info!(error = %e, "the share keeps no reparse points: links and special files are EPERM");
                self.no_reparse_points.store(true, Ordering::Relaxed);
                Err(FsError {
                    errno: libc::EPERM,
                    error: Some(e),
                })
            }
            other => Ok(other?),
        }
    }
}

#[cfg(test)]
mod tests {
    use smb3_client::SymlinkReparse;

    use super::*;

    #[test]
    fn windows_absolute_targets_are_shown_as_windows_users_see_them() {
        for (kept, shown) in [
            ("\\??\\C:\\dir\\x", "C:/dir/x"),
            ("\\??\\c:\\", "c:/"),
            ("\\??\\UNC\\srv\\share\\x", "//srv/share/x"),
            ("\\??\\unc\\srv\\share", "//srv/share"),
            ("\\\\srv\\share\\x", "//srv/share/x"),
            ("C:\\x", "C:/x"),
            ("\\\\?\\Volume{1}\\x", "//?/Volume{1}/x"),
            ("\\??\\Volume{1}\\x", "Volume{1}/x"),
            // Short or odd ones stay what they are, with `/` separators.
            ("\\??\\", ""),
            ("\\??\\UN", "UN"),
            ("\\??\\ü\\x", "ü/x"),
        ] {
            assert_eq!(shown_target(kept), shown, "{kept:?}");
        }
    }

    #[test]
    fn posix_targets_are_shown_as_they_are() {
        for t in [
            "../a/b",
            "/etc/passwd",
            "a b/ファイル",
            "/",
            "./x",
            "a//b",
            "C:x",
        ] {
            assert_eq!(shown_target(t), t);
        }
    }

    #[test]
    fn reparse_points_show_as_their_kind() {
        let link = |substitute: &str, flags| {
            ReparseData::Symlink(SymlinkReparse {
                substitute_name: substitute.into(),
                print_name: String::new(),
                flags,
            })
        };
        let s = |data: ReparseData| seen(&data).unwrap();
        assert_eq!(
            s(link("..\\up", 1)),
            Some(Seen {
                kind: SeenKind::Symlink,
                size: 5,
                rdev: 0,
            })
        );
        // The size is that of the target as shown: `\??\C:\x` is `C:/x`.
        assert_eq!(s(link("\\??\\C:\\x", 0)).unwrap().size, 4);
        assert_eq!(
            s(ReparseData::Nfs(NfsReparse::Symlink("/abs".into())))
                .unwrap()
                .kind,
            SeenKind::Symlink
        );
        for (nfs, kind, rdev) in [
            (NfsReparse::Fifo, SeenKind::Fifo, 0),
            (NfsReparse::Socket, SeenKind::Socket, 0),
            (
                NfsReparse::CharDevice { major: 1, minor: 3 },
                SeenKind::CharDevice,
                0x0103,
            ),
            (
                NfsReparse::BlockDevice { major: 8, minor: 0 },
                SeenKind::BlockDevice,
                0x0800,
            ),
            // A minor beyond 8 bits goes above the major, as Linux encodes it.
            (
                NfsReparse::CharDevice {
                    major: 254,
                    minor: 0x12345,
                },
                SeenKind::CharDevice,
                0x45 | (254 << 8) | (0x12300 << 12),
            ),
            // Numbers no 32-bit dev_t holds (a hostile server's): shown as none.
            (
                NfsReparse::BlockDevice {
                    major: 0x1000,
                    minor: 0,
                },
                SeenKind::BlockDevice,
                0,
            ),
            (
                NfsReparse::CharDevice {
                    major: 1,
                    minor: u32::MAX,
                },
                SeenKind::CharDevice,
                0,
            ),
        ] {
            assert_eq!(
                s(ReparseData::Nfs(nfs)),
                Some(Seen {
                    kind,
                    size: 0,
                    rdev
                })
            );
        }
        // A hostile target (a NUL in it, or empty) is an error, not a link.
        assert!(seen(&link("a\0b", 1)).is_err());
        assert!(seen(&ReparseData::Nfs(NfsReparse::Symlink(String::new()))).is_err());
    }
}
