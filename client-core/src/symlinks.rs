//! Symbolic links and special files on a share, stored as reparse points
//! (`smb3_proto::msg::reparse`): [`Share::read_link`], [`Share::symlink`],
//! [`Share::make_special`] and the reparse point itself, [`Share::reparse_point`].
//!
//! What a server does with them (Samba 4.22 with the SMB3 POSIX extensions): a
//! FSCTL_SET_REPARSE_POINT on a regular file keeps the buffer in an xattr of that file
//! (`user.SmbReparse`), marks the file FILE_ATTRIBUTE_REPARSE_POINT, and from then on reports
//! IO_REPARSE_TAG_SYMLINK as a symlink and IO_REPARSE_TAG_NFS as a FIFO, socket or device in
//! the POSIX metadata of lookups and listings (source3/smbd/smb2_posix.c).
//! FSCTL_GET_REPARSE_POINT gives the buffer back as it was set, and answers for a real symlink
//! on the server's disk with a symlink buffer built from `readlink`: the target as it is on
//! disk (`/` separators), relative flag unless it starts with `/`, and an absolute target
//! below the link's own directory (as smbd sees it) made relative to that directory
//! (source3/smbd/files.c `read_symlink_reparse`). A real FIFO or device on the server's disk
//! is answered with an NFS reparse point of that type (and the device's numbers).
//!
//! A link is made the way Windows and Samba's own client make one: create the file
//! (FILE_CREATE, no sharing, FILE_OPEN_REPARSE_POINT), set the reparse point on that handle,
//! close. Should the set fail, the handle marks the file delete-pending before it closes, and
//! should the caller give up half-way, a background task does the same: no empty file is left
//! where a link was asked for.
//!
//! Targets are data. One the caller gives is checked only for what no target may be (empty,
//! a NUL, longer than a POSIX symlink holds); one the server gives is bounded, refused when it
//! holds a NUL, and returned as it is, never resolved against anything on either side: what
//! to do with it is the caller's business.

use std::sync::Arc;

use bytes::Bytes;
use smb3_proto::msg::create::{
    AccessMask, CreateDisposition, CreateOptions, CreateRequest, ShareAccess,
};
use smb3_proto::msg::fscc::{FileAttributes, FileDispositionInformation};
use smb3_proto::msg::ioctl::IoctlRequest;
use smb3_proto::msg::reparse::{
    NfsReparse, ReparseData, SymlinkReparse, FSCTL_GET_REPARSE_POINT, FSCTL_SET_REPARSE_POINT,
    MAX_REPARSE_BUFFER_LEN, SYMLINK_FLAG_RELATIVE,
};
use smb3_proto::msg::set_info::SetInfoRequest;
use smb3_proto::msg::FileId;
use smb3_proto::{Command, DecodeError, NtStatus};

use crate::error::{decode, decode_ioctl, Error, Result};
use crate::names::wire_path;
use crate::share::Share;
use crate::tasks::{self, TaskKind};
use crate::timewarp;
use crate::tree::Tree;

/// STATUS_NOT_A_REPARSE_POINT (MS-ERREF 2.3.1): FSCTL_GET_REPARSE_POINT on a file that has
/// none.
const NOT_A_REPARSE_POINT: NtStatus = NtStatus(0xC000_0275);

/// The longest target [`Share::symlink`] accepts, in bytes of UTF-8: what a POSIX symlink can
/// hold (PATH_MAX, 4096, less the terminator; `symlink(2)` says ENAMETOOLONG beyond). Samba
/// takes that much; Windows keeps a reparse point within 16 KiB, which holds a target of at
/// most 4091 UTF-16 units stored twice (SubstituteName and PrintName), and refuses more with
/// STATUS_IO_REPARSE_DATA_INVALID.
pub const MAX_LINK_TARGET: usize = 4095;

/// The longest target [`Share::read_link`] returns, in bytes of UTF-8. Windows keeps a whole
/// reparse point within 16 KiB (MAXIMUM_REPARSE_DATA_BUFFER_SIZE), so no conforming server
/// has a longer one; a POSIX system can use at most [`MAX_LINK_TARGET`] of it.
pub const MAX_TARGET_READ: usize = 16 * 1024;

/// Permission bits of the file a new link is stored in. A symlink's own mode means nothing to
/// POSIX, but here it guards the link: the target lives in an xattr of an ordinary file on
/// the server's disk, which anyone who may write the file could change. So only the owner may.
const LINK_MODE: u32 = 0o644;

/// How [`Share::symlink_as`] stores a link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LinkForm {
    /// IO_REPARSE_TAG_SYMLINK (MS-FSCC 2.1.2.4), as Windows makes links.
    #[default]
    Native,
    /// IO_REPARSE_TAG_NFS of type NFS_SPECFILE_LNK (MS-FSCC 2.1.2.6), as Windows' NFS server
    /// and Linux's `reparse=nfs` make links.
    Nfs,
}

/// What [`Share::make_special`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialKind {
    /// A FIFO (named pipe), as `mkfifo(3)` makes.
    Fifo,
    /// A Unix domain socket's name in the file system.
    Socket,
    /// A character device.
    CharDevice {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
    /// A block device.
    BlockDevice {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
}

impl SpecialKind {
    fn reparse(self) -> NfsReparse {
        match self {
            SpecialKind::Fifo => NfsReparse::Fifo,
            SpecialKind::Socket => NfsReparse::Socket,
            SpecialKind::CharDevice { major, minor } => NfsReparse::CharDevice { major, minor },
            SpecialKind::BlockDevice { major, minor } => NfsReparse::BlockDevice { major, minor },
        }
    }
}

impl Share {
    /// The target of the symbolic link `path` (`readlink`), read from its reparse point
    /// ([`Share::reparse_point`], one round trip): a
    /// link made by [`Share::symlink`] or by Windows (IO_REPARSE_TAG_SYMLINK), an NFS symlink
    /// (IO_REPARSE_TAG_NFS, NFS_SPECFILE_LNK), or, on Samba, a symlink on the server's own
    /// disk. Works on any share whose server keeps reparse points, POSIX or not.
    ///
    /// The target comes back as the server has it, never resolved: a relative one with `/`
    /// separators; an absolute one as the server gave it, with `\` turned into `/` when it is
    /// a rooted path (`\etc\x` is `/etc/x`) and kept exactly as sent when it names something
    /// in Windows' own namespaces (`\??\C:\x`, `\\server\share\x`, `C:\x`). It is untrusted:
    /// one longer than [`MAX_TARGET_READ`], empty or holding a NUL is refused as the
    /// server's error ([`Error::Protocol`]).
    ///
    /// A file that is not a symbolic link gives [`Error::NotALink`] (EINVAL).
    pub async fn read_link(&self, path: &str) -> Result<String> {
        self.across_links(path, |s: Share, p: String| async move {
            s.read_link_here(&p).await
        })
        .await
    }

    /// [`Share::read_link`] on this share, with no DFS link on the way.
    async fn read_link_here(&self, path: &str) -> Result<String> {
        let not_a_link = |reparse_tag| Error::NotALink {
            path: path.to_string(),
            reparse_tag,
        };
        match self.reparse_point(path).await? {
            Some(data) => link_target_in(&data).unwrap_or(Err(not_a_link(data.tag()))),
            None => Err(not_a_link(0)),
        }
    }

    /// The reparse point of `path` as the server gives it, decoded by its tag: for a FIFO,
    /// socket or device (made by [`Share::make_special`], or real on Samba's disk), which one
    /// and, for a device, its numbers; `None` when the file has none. One round trip: CREATE
    /// of the file itself (FILE_OPEN_REPARSE_POINT: a link is not followed),
    /// FSCTL_GET_REPARSE_POINT and CLOSE compounded. The names in it are the server's,
    /// unchecked: to read a link, use [`Share::read_link`].
    pub async fn reparse_point(&self, path: &str) -> Result<Option<ReparseData>> {
        self.across_links(path, |s: Share, p: String| async move {
            s.reparse_point_here(&p).await
        })
        .await
    }

    /// [`Share::reparse_point`] on this share, with no DFS link on the way.
    async fn reparse_point_here(&self, path: &str) -> Result<Option<ReparseData>> {
        let core = &self.tree.core;
        let mut create = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::OPEN,
        );
        create.create_options = CreateOptions(CreateOptions::OPEN_REPARSE_POINT);
        let snapshot = self.snapshot_filetime();
        timewarp::add_timewarp(&mut create, snapshot);
        self.tree.posix_open(&mut create, 0);
        let max = (MAX_REPARSE_BUFFER_LEN as u32).min(core.negotiated.max_transact);
        let get = IoctlRequest::fsctl(FSCTL_GET_REPARSE_POINT, FileId::ANY, Bytes::new(), max);
        let g = self.open_ask_close(&create, &get, path).await??;
        if g.header.status == NOT_A_REPARSE_POINT {
            return Ok(None);
        }
        let g = g.check(&[]).map_err(|e| e.with_path(path))?;
        let body = decode_ioctl(&get, &g.msg)?;
        decode(Command::IOCTL, ReparseData::decode(&body.output)).map(Some)
    }

    /// Make `link_path` a symbolic link to `target` (`symlink(2)`: `target` need not exist,
    /// and is stored as given, never resolved). `link_path` must not exist, as a file or a
    /// directory (OBJECT_NAME_COLLISION, EEXIST). [`Share::symlink_as`] with
    /// [`LinkForm::Native`].
    ///
    /// The link is an IO_REPARSE_TAG_SYMLINK reparse point, as Windows makes them: relative
    /// (SYMLINK_FLAG_RELATIVE) unless `target` starts with `/`, its SubstituteName with `/`
    /// turned into `\`, its PrintName `target` as given. [`Share::read_link`] gives `target`
    /// back; Samba reports the file as a symlink in its POSIX metadata, and to a client
    /// without the extensions as a reparse point with that tag.
    ///
    /// Whether the server keeps it is the server's business, POSIX extensions or not: Samba
    /// 4.21 and later keep reparse points on any share (in an xattr of the file); older Samba
    /// keeps none and answers NOT_A_REPARSE_POINT, and a file system without them (Windows'
    /// FAT) NOT_SUPPORTED or INVALID_DEVICE_REQUEST: [`Error::Unsupported`]. Windows refuses
    /// a user without the right to make symbolic links (PRIVILEGE_NOT_HELD, EPERM).
    ///
    /// `target` may not be empty, hold a NUL or be longer than [`MAX_LINK_TARGET`]
    /// ([`Error::ApiMisuse`]).
    ///
    /// Three round trips: the create, the FSCTL, the close. When the FSCTL fails, the file the
    /// create made is deleted through its handle before the error is returned; when the
    /// caller gives up in between, in the background. Only a connection lost between the two
    /// leaves it (empty, a plain file), since the delete cannot be sent either.
    pub async fn symlink(&self, target: &str, link_path: &str) -> Result<()> {
        self.symlink_as(target, link_path, LinkForm::Native).await
    }

    /// [`Share::symlink`], the link stored in the form `form`: Windows' own
    /// (IO_REPARSE_TAG_SYMLINK) or an NFS symlink (IO_REPARSE_TAG_NFS, NFS_SPECFILE_LNK,
    /// MS-FSCC 2.1.2.6: the target as given, `/` separators, what Linux's `reparse=nfs`
    /// makes). Both read back with [`Share::read_link`].
    pub async fn symlink_as(&self, target: &str, link_path: &str, form: LinkForm) -> Result<()> {
        self.across_links(link_path, |s: Share, p: String| async move {
            s.symlink_here(target, &p, form).await
        })
        .await
    }

    /// [`Share::symlink_as`] on this share, with no DFS link on the way.
    async fn symlink_here(&self, target: &str, link_path: &str, form: LinkForm) -> Result<()> {
        self.check_writable()?;
        check_target(target)?;
        let data = match form {
            LinkForm::Native => ReparseData::Symlink(symlink_reparse(target)),
            LinkForm::Nfs => ReparseData::Nfs(NfsReparse::Symlink(target.to_string())),
        };
        self.create_reparse_point(link_path, &data, LINK_MODE).await
    }

    /// Make `path` a FIFO, socket or device node (`mknod(2)`) with the permission bits
    /// `permissions` (the caller applies its umask; Samba then applies the share's `create
    /// mask`, 0744 unless configured; the bits mean nothing without the POSIX extensions).
    /// `path` must not exist (OBJECT_NAME_COLLISION, EEXIST).
    ///
    /// The file is an NFS reparse point (IO_REPARSE_TAG_NFS, MS-FSCC 2.1.2.6), the form
    /// Windows' NFS server and Linux's SMB client use; Samba reports it with that type in its
    /// POSIX metadata, and to a client without the extensions as a reparse point with that
    /// tag. It is a name only: no server makes a device of it, and nothing flows through a
    /// FIFO or socket made this way between clients. A server that keeps no reparse points:
    /// [`Error::Unsupported`], as for [`Share::symlink`].
    pub async fn make_special(
        &self,
        path: &str,
        kind: SpecialKind,
        permissions: u32,
    ) -> Result<()> {
        self.across_links(path, |s: Share, p: String| async move {
            s.make_special_here(&p, kind, permissions).await
        })
        .await
    }

    /// [`Share::make_special`] on this share, with no DFS link on the way.
    async fn make_special_here(
        &self,
        path: &str,
        kind: SpecialKind,
        permissions: u32,
    ) -> Result<()> {
        self.check_writable()?;
        let data = ReparseData::Nfs(kind.reparse());
        self.create_reparse_point(path, &data, permissions & 0o7777)
            .await
    }

    /// Create `path` and give it the reparse point `data`; on any failure after the create,
    /// the file goes again.
    async fn create_reparse_point(
        &self,
        path: &str,
        data: &ReparseData,
        permissions: u32,
    ) -> Result<()> {
        let buffer = data
            .encode()
            .map_err(|_| Error::ApiMisuse("reparse point too large to encode"))?;
        let mut req = CreateRequest::new(
            wire_path(path)?,
            // Samba and Windows need FILE_WRITE_DATA or FILE_WRITE_ATTRIBUTES to set a
            // reparse point; DELETE is for taking the file back.
            AccessMask::FILE_READ_ATTRIBUTES
                | AccessMask::FILE_WRITE_ATTRIBUTES
                | AccessMask::DELETE
                | AccessMask::SYNCHRONIZE,
            CreateDisposition::CREATE,
        );
        // Not FILE_NON_DIRECTORY_FILE: without FILE_DIRECTORY_FILE a create makes a file
        // anyway, and a directory in the way is then a name collision (EEXIST, as
        // `symlink(2)` has it) rather than FILE_IS_A_DIRECTORY.
        req.create_options = CreateOptions(CreateOptions::OPEN_REPARSE_POINT);
        req.file_attributes = FileAttributes(FileAttributes::NORMAL);
        // Nobody opens the file while it is not yet what it will be.
        req.share_access = ShareAccess(0);
        self.tree.posix_open(&mut req, permissions);
        let created = self.tree.create(&req, path).await?;
        let handle = Unfinished {
            tree: self.tree.clone(),
            id: created.file_id,
            done: false,
        };
        let set = IoctlRequest::fsctl(FSCTL_SET_REPARSE_POINT, created.file_id, buffer, 0);
        let result = match self.tree.core.send(&set, self.tree.call()).await {
            Ok(resp) => decode_ioctl(&set, &resp.msg).map(drop),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => handle.close().await.map_err(|e| e.with_path(path)),
            Err(e) => {
                handle.discard(path).await;
                Err(keeps_no_reparse_points(e.with_path(path), path))
            }
        }
    }
}

impl Share {
    /// The reparse point of the open `id` as the server keeps it (the raw
    /// REPARSE_DATA_BUFFER), to be given back with [`Share::put_back_reparse_point`].
    pub(crate) async fn raw_reparse_point(&self, id: FileId) -> Result<Bytes> {
        let max = (MAX_REPARSE_BUFFER_LEN as u32).min(self.tree.core.negotiated.max_transact);
        let get = IoctlRequest::fsctl(FSCTL_GET_REPARSE_POINT, id, Bytes::new(), max);
        let resp = self.tree.core.send(&get, self.tree.call()).await?;
        Ok(decode_ioctl(&get, &resp.msg)?.output)
    }

    /// Set the reparse point `raw` (from [`Share::raw_reparse_point`]) on `path` again.
    ///
    /// Samba 4.22 loses a reparse point's attribute when it renames the file: the rename sets
    /// the archive attribute through a mask without FILE_ATTRIBUTE_REPARSE_POINT
    /// (rename_internals_fsp, file_set_dosmode), so a renamed symlink reads as an empty
    /// file although its reparse data is still there. Setting the same data again restores
    /// it (the tag is unchanged, so no TAG_MISMATCH).
    pub(crate) async fn put_back_reparse_point(&self, path: &str, raw: Bytes) -> Result<()> {
        self.with_handle(
            path,
            AccessMask::FILE_READ_ATTRIBUTES | AccessMask::FILE_WRITE_ATTRIBUTES,
            CreateOptions::OPEN_REPARSE_POINT,
            |id| {
                let raw = raw.clone();
                async move {
                    let set = IoctlRequest::fsctl(FSCTL_SET_REPARSE_POINT, id, raw, 0);
                    let resp = self.tree.core.send(&set, self.tree.call()).await?;
                    decode_ioctl(&set, &resp.msg).map(drop)
                }
            },
        )
        .await
    }
}

/// A refused FSCTL_SET_REPARSE_POINT that says the server keeps no reparse points at all
/// (rather than refusing this one), as [`Error::Unsupported`]: Samba before 4.21 answers every
/// reparse FSCTL with NOT_A_REPARSE_POINT (source3/modules/util_reparse.c of 4.17); a file
/// system without them, NOT_SUPPORTED or INVALID_DEVICE_REQUEST (MS-FSA 2.1.5.10.37: the
/// object store does not support reparse points).
fn keeps_no_reparse_points(e: Error, path: &str) -> Error {
    match e.status() {
        Some(
            status @ (NOT_A_REPARSE_POINT
            | NtStatus::NOT_SUPPORTED
            | NtStatus::INVALID_DEVICE_REQUEST),
        ) => Error::Unsupported {
            feature: "reparse points (symbolic links and special files)",
            status,
            path: Some(path.to_string()),
        },
        _ => e,
    }
}

/// What no target the caller gives may be.
fn check_target(target: &str) -> Result<()> {
    if target.is_empty() {
        return Err(Error::ApiMisuse("a symlink target may not be empty"));
    }
    if target.contains('\0') {
        return Err(Error::ApiMisuse("a symlink target may not hold a NUL"));
    }
    if target.len() > MAX_LINK_TARGET {
        return Err(Error::ApiMisuse(
            "a symlink target may be at most 4095 bytes (PATH_MAX)",
        ));
    }
    Ok(())
}

/// The reparse data of a link to `target`, as Windows clients write it.
fn symlink_reparse(target: &str) -> SymlinkReparse {
    SymlinkReparse {
        substitute_name: target.replace('/', "\\"),
        print_name: target.to_string(),
        flags: if target.starts_with('/') {
            0
        } else {
            SYMLINK_FLAG_RELATIVE
        },
    }
}

/// What no target the server gives may be.
fn check_server_target(target: &str) -> std::result::Result<(), DecodeError> {
    let what = "symlink target";
    if target.is_empty() {
        return Err(DecodeError::Inconsistent {
            what,
            detail: "empty",
        });
    }
    if target.len() > MAX_TARGET_READ {
        return Err(DecodeError::Inconsistent {
            what,
            detail: "longer than 16 KiB",
        });
    }
    if let Some(at) = target.find('\0') {
        return Err(DecodeError::InvalidValue {
            what: "symlink target: a NUL character at byte",
            value: at as u64,
        });
    }
    Ok(())
}

/// The target of an IO_REPARSE_TAG_SYMLINK link, as [`Share::read_link`] returns it.
fn link_target(link: &SymlinkReparse) -> std::result::Result<String, DecodeError> {
    let raw = &link.substitute_name;
    check_server_target(raw)?;
    if !link.is_relative() && names_windows_namespace(raw) {
        return Ok(raw.clone());
    }
    Ok(raw.replace('\\', "/"))
}

/// Whether an absolute target names something in Windows' own namespaces rather than a
/// rooted path: the object manager's `\??\` (`\??\C:\x`, what Windows writes for its
/// absolute links), a UNC or device path (`\\server\share`, `\\?\`, `\\.\`), a drive (`C:`).
fn names_windows_namespace(target: &str) -> bool {
    let b = target.as_bytes();
    target.starts_with("\\??\\")
        || target.starts_with("\\\\")
        || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
}

/// The target of an NFS symlink: a POSIX path already.
fn nfs_link_target(target: String) -> std::result::Result<String, DecodeError> {
    check_server_target(&target)?;
    Ok(target)
}

/// The target of the symbolic link a reparse point holds (from [`Share::reparse_point`]),
/// as [`Share::read_link`] returns it; `None` when it holds no link (a FIFO, a device, a tag
/// of another kind). For a caller that has read the reparse point anyway, to tell a link from
/// a special file, and wants the target without asking again.
pub fn link_target_in(data: &ReparseData) -> Option<Result<String>> {
    let target = match data {
        ReparseData::Symlink(link) => link_target(link),
        ReparseData::Nfs(NfsReparse::Symlink(target)) => nfs_link_target(target.clone()),
        _ => return None,
    };
    Some(decode(Command::IOCTL, target))
}

/// The handle of a file being made into a reparse point: closed when done, taken back (marked
/// delete-pending, then closed) when the set failed, and taken back in the background when
/// the caller gave up before either.
struct Unfinished {
    tree: Arc<Tree>,
    id: FileId,
    done: bool,
}

impl Unfinished {
    async fn close(mut self) -> Result<()> {
        self.done = true;
        self.tree.close(self.id).await
    }

    /// Delete the file through its handle. The caller's error is the one that matters: a
    /// failure here is logged.
    async fn discard(mut self, path: &str) {
        self.done = true;
        if let Err(e) = discard(&self.tree, self.id).await {
            tracing::warn!(
                path,
                error = %e,
                "could not remove the file of a reparse point that failed"
            );
        }
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            // No runtime (process exit): the server drops the handle with the connection,
            // and the empty file stays.
            return;
        };
        let tree = self.tree.clone();
        let id = self.id;
        let busy = tree.core.background.start();
        tree.core.orphans.add();
        tasks::spawn_on(&rt, TaskKind::BackgroundClose, async move {
            let _busy = busy;
            if let Err(e) = discard(&tree, id).await {
                tracing::debug!(error = %e, ?id, "removing an abandoned reparse point's file");
            }
        });
    }
}

/// Mark the file delete-pending and close it; the close happens whatever the mark did.
async fn discard(tree: &Arc<Tree>, id: FileId) -> Result<()> {
    let info = FileDispositionInformation {
        delete_pending: true,
    };
    let marked = tree
        .core
        .send(&SetInfoRequest::file_info(id, &info), tree.call())
        .await;
    let closed = tree.close(id).await;
    marked?;
    closed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ProtocolError;

    /// What `read_link` makes of a reparse point a server could not have sent.
    fn hostile(data: ReparseData) -> Result<String> {
        link_target_in(&data).expect("a link")
    }

    fn stored(target: &str) -> SymlinkReparse {
        let bytes = ReparseData::Symlink(symlink_reparse(target))
            .encode()
            .unwrap();
        match ReparseData::decode(&bytes).unwrap() {
            ReparseData::Symlink(link) => link,
            other => panic!("{other:?}"),
        }
    }

    fn server_link(substitute: &str, flags: u32) -> ReparseData {
        ReparseData::Symlink(SymlinkReparse {
            substitute_name: substitute.into(),
            print_name: String::new(),
            flags,
        })
    }

    #[test]
    fn links_are_stored_as_windows_writes_them_and_read_back_as_given() {
        for target in [
            "a",
            "../up/and/over",
            "dir/with spaces/ファイル 🎉",
            "/etc/passwd",
            "/",
            "./x",
            "a//b",
        ] {
            let link = stored(target);
            assert_eq!(link.print_name, target);
            assert!(!link.substitute_name.contains('/'), "{target}");
            assert_eq!(link.is_relative(), !target.starts_with('/'), "{target}");
            assert_eq!(link_target(&link).unwrap(), target);
        }
        // The longest a caller may give fits one reparse point.
        let long = "é".repeat(MAX_LINK_TARGET / 2);
        check_target(&long).unwrap();
        assert_eq!(link_target(&stored(&long)).unwrap(), long);
    }

    #[test]
    fn targets_from_the_caller_are_checked() {
        assert!(matches!(check_target(""), Err(Error::ApiMisuse(_))));
        assert!(matches!(check_target("a\0b"), Err(Error::ApiMisuse(_))));
        assert!(check_target(&"x".repeat(MAX_LINK_TARGET)).is_ok());
        assert!(matches!(
            check_target(&"x".repeat(MAX_LINK_TARGET + 1)),
            Err(Error::ApiMisuse(_))
        ));
        // Anything else is a target: `..`, backslashes, what does not exist.
        assert!(check_target("../../../etc").is_ok());
        assert!(check_target("a\\b").is_ok());
    }

    #[test]
    fn server_targets_are_returned_as_they_are() {
        // Samba's answer for an on-disk symlink: `/` as on disk.
        assert_eq!(
            hostile(server_link("../x/y", SYMLINK_FLAG_RELATIVE)).unwrap(),
            "../x/y"
        );
        assert_eq!(
            hostile(server_link("/srv/elsewhere", 0)).unwrap(),
            "/srv/elsewhere"
        );
        // Windows' relative links: `\` becomes `/`.
        assert_eq!(
            hostile(server_link("..\\x\\y", SYMLINK_FLAG_RELATIVE)).unwrap(),
            "../x/y"
        );
        // Windows' absolute links and UNC targets stay exactly as sent.
        for raw in [
            "\\??\\C:\\Users\\x",
            "\\\\server\\share\\x",
            "C:\\x",
            "\\\\?\\C:\\x",
        ] {
            assert_eq!(hostile(server_link(raw, 0)).unwrap(), raw);
        }
        // An NFS symlink is a POSIX path already.
        assert_eq!(
            hostile(ReparseData::Nfs(NfsReparse::Symlink("a\\b/c".into()))).unwrap(),
            "a\\b/c"
        );
        // The Samba flag bits beside RELATIVE change nothing.
        assert_eq!(hostile(server_link("y", 0x2000_0001)).unwrap(), "y");
    }

    #[test]
    fn hostile_server_targets_are_refused() {
        let protocol = |r: Result<String>| {
            assert!(
                matches!(
                    r,
                    Err(Error::Protocol(ProtocolError::Decode {
                        command: Command::IOCTL,
                        ..
                    }))
                ),
                "{r:?}"
            )
        };
        protocol(hostile(server_link("", SYMLINK_FLAG_RELATIVE)));
        protocol(hostile(server_link(
            "a\0/etc/passwd",
            SYMLINK_FLAG_RELATIVE,
        )));
        protocol(hostile(server_link("\0", 0)));
        protocol(hostile(server_link(&"a".repeat(MAX_TARGET_READ + 1), 0)));
        protocol(hostile(ReparseData::Nfs(NfsReparse::Symlink("x\0".into()))));
        protocol(hostile(ReparseData::Nfs(
            NfsReparse::Symlink(String::new()),
        )));
        // The longest accepted is returned whole.
        let most = "b".repeat(MAX_TARGET_READ);
        assert_eq!(hostile(server_link(&most, 0)).unwrap(), most);
        // A huge name the wire can hold (32767 UTF-16 units) is refused, not truncated.
        let huge = "z".repeat(32767);
        protocol(hostile(server_link(&huge, SYMLINK_FLAG_RELATIVE)));
        // A NUL error says where.
        let e = hostile(server_link("ab\0", 0)).unwrap_err().to_string();
        assert!(e.contains("0x2"), "{e}");
    }

    #[test]
    fn hostile_buffers_fail_to_decode_before_any_target_is_looked_at() {
        // A whole GET_REPARSE_POINT answer, as bytes: names past the buffer, odd UTF-16, a
        // length that claims 64 KiB.
        for wire in [
            "0c0000a0 1000 0000 0000 0800 0000 0200 00000000 79007900",
            "0c0000a0 1000 0000 0000 0300 0000 0200 00000000 79007900",
            "0c0000a0 ffff 0000 0000 0200 0000 0200 00000000 79007900",
            "0c0000a0 1000 0000 0000 0400 0000 0200 00000000 7900 00d8",
        ] {
            let digits: Vec<u8> = wire.bytes().filter(|b| *b != b' ').collect();
            let bytes: Vec<u8> = digits
                .chunks(2)
                .map(|d| u8::from_str_radix(std::str::from_utf8(d).unwrap(), 16).unwrap())
                .collect();
            assert!(ReparseData::decode(&bytes).is_err(), "{wire}");
        }
    }

    #[test]
    fn only_links_have_a_target() {
        for data in [
            ReparseData::Nfs(NfsReparse::Fifo),
            ReparseData::Nfs(NfsReparse::CharDevice { major: 1, minor: 3 }),
        ] {
            assert!(link_target_in(&data).is_none(), "{data:?}");
        }
        let nfs = ReparseData::Nfs(NfsReparse::Symlink("../a b".into()));
        assert_eq!(link_target_in(&nfs).unwrap().unwrap(), "../a b");
    }

    #[test]
    fn special_kinds_map_to_nfs_types() {
        assert_eq!(SpecialKind::Fifo.reparse(), NfsReparse::Fifo);
        assert_eq!(SpecialKind::Socket.reparse(), NfsReparse::Socket);
        assert_eq!(
            SpecialKind::CharDevice { major: 1, minor: 3 }.reparse(),
            NfsReparse::CharDevice { major: 1, minor: 3 }
        );
        assert_eq!(
            SpecialKind::BlockDevice { major: 8, minor: 1 }.reparse(),
            NfsReparse::BlockDevice { major: 8, minor: 1 }
        );
    }

    #[test]
    fn not_a_link_is_einval_and_says_what_it_is() {
        let plain = Error::NotALink {
            path: "f".into(),
            reparse_tag: 0,
        };
        assert_eq!(plain.to_errno(), 22);
        assert_eq!(plain.to_string(), "f: not a symbolic link");
        assert_eq!(plain.kind(), "not_a_link");
        let fifo = Error::NotALink {
            path: "p".into(),
            reparse_tag: smb3_proto::msg::reparse::IO_REPARSE_TAG_NFS,
        };
        assert_eq!(
            fifo.to_string(),
            "p: not a symbolic link (a reparse point with tag 0x80000014)"
        );
    }

    /// The client's own side of making a link, against the in-memory server with the share
    /// taken for a POSIX one (the server ignores the POSIX context and refuses the FSCTL, as
    /// a server without reparse points would): what was created is taken back.
    mod cleanup {
        use std::time::Duration;

        use smb3_testserver::{Fault, FaultAction, ServerConfig, TestServer};

        use super::super::*;
        use crate::{Client, ClientConfig, UserCredentials};

        async fn posix_share() -> (TestServer, Share) {
            let server = TestServer::start(ServerConfig::default()).await.unwrap();
            let c = server.config();
            let creds = UserCredentials {
                user: c.user.clone(),
                domain: c.domain.clone(),
                password: c.password.as_str().into(),
            };
            let client = Client::connect(&server.host(), &creds, ClientConfig::default())
                .await
                .unwrap();
            let share = client.share("data").await.unwrap();
            share
                .tree
                .posix
                .store(true, std::sync::atomic::Ordering::Relaxed);
            (server, share)
        }

        #[tokio::test]
        async fn a_refused_reparse_point_leaves_no_file() {
            let (server, share) = posix_share().await;
            // The in-memory server keeps no reparse points (NOT_SUPPORTED), as Samba 4.17
            // (NOT_A_REPARSE_POINT): unsupported, not a failure of this one link.
            let e = share.symlink("target", "dir-less-link").await.unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Unsupported {
                        status: NtStatus::NOT_SUPPORTED,
                        ..
                    }
                ),
                "{e}"
            );
            assert!(e.to_string().contains("dir-less-link"), "{e}");
            let e = share
                .make_special("fifo", SpecialKind::Fifo, 0o600)
                .await
                .unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{e}");
            server.fail(Fault::fail(Command::IOCTL, NOT_A_REPARSE_POINT));
            let e = share
                .symlink_as("t", "old-samba", LinkForm::Nfs)
                .await
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Unsupported {
                        status: NOT_A_REPARSE_POINT,
                        ..
                    }
                ),
                "{e}"
            );
            server.fail(Fault::fail(Command::IOCTL, NtStatus::ACCESS_DENIED));
            let e = share.symlink("/abs", "denied").await.unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::ACCESS_DENIED), "{e}");
            assert_eq!(server.list("data", ""), Some(vec![]));
            assert_eq!(server.open_handles(), 0);
        }

        #[tokio::test]
        async fn an_existing_name_is_left_alone() {
            let (server, share) = posix_share().await;
            server.put_file("data", "taken", b"mine");
            let e = share.symlink("x", "taken").await.unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_COLLISION), "{e}");
            assert_eq!(e.to_errno(), 17);
            assert_eq!(
                server.read_file("data", "taken").as_deref(),
                Some(&b"mine"[..])
            );
            assert_eq!(server.requests(Command::IOCTL), 0);
        }

        #[tokio::test]
        async fn a_caller_who_gives_up_half_way_leaves_no_file() {
            let (server, share) = posix_share().await;
            // The server takes the FSCTL and never answers: the caller times out after the
            // create, with the file made and its handle open.
            server.fail(Fault::on(Command::IOCTL, FaultAction::Ignore));
            let gave_up =
                tokio::time::timeout(Duration::from_millis(300), share.symlink("t", "half")).await;
            assert!(gave_up.is_err(), "the FSCTL is never answered");
            for _ in 0..200 {
                if server.list("data", "") == Some(vec![]) && server.open_handles() == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(server.list("data", ""), Some(vec![]));
            assert_eq!(server.open_handles(), 0);
            assert_eq!(share.client().abandoned_handles_closed(), 1);
        }

        #[tokio::test]
        async fn bad_targets_send_nothing() {
            let (server, share) = posix_share().await;
            let creates = server.requests(Command::CREATE);
            assert!(matches!(
                share.symlink("", "l").await,
                Err(Error::ApiMisuse(_))
            ));
            assert!(matches!(
                share.symlink_as("a\0b", "l", LinkForm::Nfs).await,
                Err(Error::ApiMisuse(_))
            ));
            assert!(matches!(
                share.symlink("t", "../l").await,
                Err(Error::Unsupported { .. } | Error::ApiMisuse(_))
            ));
            assert_eq!(server.requests(Command::CREATE), creates);
        }

        #[tokio::test]
        async fn shares_without_posix_try_the_server() {
            let (server, share) = posix_share().await;
            share
                .tree
                .posix
                .store(false, std::sync::atomic::Ordering::Relaxed);
            let ioctls = server.requests(Command::IOCTL);
            assert!(matches!(
                share.symlink("t", "l").await,
                Err(Error::Unsupported { .. })
            ));
            assert!(matches!(
                share.make_special("p", SpecialKind::Socket, 0o644).await,
                Err(Error::Unsupported { .. })
            ));
            assert_eq!(server.requests(Command::IOCTL), ioctls + 2);
            assert_eq!(server.list("data", ""), Some(vec![]));
            assert_eq!(server.open_handles(), 0);
        }

        #[tokio::test]
        async fn reading_a_link_where_the_server_keeps_none() {
            let (server, share) = posix_share().await;
            server.put_file("data", "plain", b"x");
            // The in-memory server refuses the FSCTL: its status, not a guess.
            let e = share.read_link("plain").await.unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::NOT_SUPPORTED), "{e}");
            server.fail(Fault::fail(Command::IOCTL, NOT_A_REPARSE_POINT));
            match share.read_link("plain").await {
                Err(Error::NotALink {
                    path,
                    reparse_tag: 0,
                }) => assert_eq!(path, "plain"),
                other => panic!("{other:?}"),
            }
            server.fail(Fault::fail(Command::IOCTL, NOT_A_REPARSE_POINT));
            assert_eq!(share.reparse_point("plain").await.unwrap(), None);
            assert_eq!(server.open_handles(), 0);
        }
    }
}
