//! Symbolic links and special files met on a share while planning a download: telling them
//! apart from files and directories, and, with `-L`, finding what a link points to without
//! ever leaving the share.
//!
//! A share reports a link in one of two ways: with the SMB3 POSIX extensions, as the POSIX
//! file type of the entry; without them, as a reparse point whose tag a listing carries in
//! place of EaSize (MS-FSCC 2.4.17): IO_REPARSE_TAG_SYMLINK (Windows' own links) or
//! IO_REPARSE_TAG_NFS (NFS-style links, but also FIFOs, sockets and devices, told apart only
//! by reading the reparse point: done when the link is made).
//!
//! Link targets are the server's words and are never trusted as local paths: without `-L`
//! a target is stored as given in a local link, which nothing smbcp writes ever goes through;
//! with `-L` a target is resolved as a path inside the share only (an absolute one, or one
//! climbing above the share's root, is refused), and every hop is asked of the server again.

use smb3_client::{
    Error, Metadata, PosixFileType, Share, IO_REPARSE_TAG_NFS, IO_REPARSE_TAG_SYMLINK,
};

use crate::file_error::{Cause, FileError, Refusal};

/// Links followed one after the other before `-L` gives up on a chain (Linux's own limit
/// for a path lookup is 40; a share's links are asked for one round trip each).
const MAX_HOPS: usize = 16;

/// What an entry of a remote listing is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RemoteKind {
    File,
    Dir,
    /// A symbolic link (or, for an NFS reparse point, possibly a special file: see the
    /// module's comment).
    Link,
    /// A FIFO, socket or device, in words.
    Special(&'static str),
}

/// What `md` (with the listing's reparse tag, 0 when it gave none) describes.
pub(crate) fn remote_kind(md: &Metadata, reparse_tag: u32) -> RemoteKind {
    if let Some(t) = md.posix.as_ref().and_then(|p| p.file_type) {
        return match t {
            PosixFileType::Regular => RemoteKind::File,
            PosixFileType::Directory => RemoteKind::Dir,
            PosixFileType::Symlink => RemoteKind::Link,
            PosixFileType::Fifo => RemoteKind::Special("a FIFO"),
            PosixFileType::Socket => RemoteKind::Special("a socket"),
            PosixFileType::CharDevice => RemoteKind::Special("a character device"),
            PosixFileType::BlockDevice => RemoteKind::Special("a block device"),
        };
    }
    match reparse_tag {
        IO_REPARSE_TAG_SYMLINK | IO_REPARSE_TAG_NFS => RemoteKind::Link,
        _ if md.is_dir() => RemoteKind::Dir,
        _ => RemoteKind::File,
    }
}

/// What the source `path` named on the command line, whose metadata is `md`, is. Without
/// the POSIX extensions a metadata query carries no reparse tag, so a reparse point is
/// asked for a link target (a DFS link or a deduplicated file has none).
pub(crate) async fn source_kind(share: &Share, path: &str, md: &Metadata) -> RemoteKind {
    let reparse = md
        .attributes
        .contains(smb3_client::DosAttributes::REPARSE_POINT);
    if md.posix.is_none() && reparse && share.read_link(path).await.is_ok() {
        return RemoteKind::Link;
    }
    remote_kind(md, 0)
}

/// The share path `target` names when read in the directory holding the link `link`;
/// `None` when it leaves the share: an absolute target (`/x`, or one of Windows' own forms,
/// which `Share::read_link` gives as `C:/x` or `//server/share/x`), or one whose `..` climbs
/// above the share's root.
pub(crate) fn resolve_in_share(link: &str, target: &str) -> Option<String> {
    let windows_drive = target.as_bytes().get(1) == Some(&b':');
    if target.is_empty() || target.starts_with('/') || windows_drive {
        return None;
    }
    let mut parts: Vec<&str> = link.split('/').filter(|c| !c.is_empty()).collect();
    parts.pop()?;
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    Some(parts.join("/"))
}

/// With `-L`: what the link `link` leads to on the share, after every link on the way,
/// and its metadata. A target outside the share, a chain longer than [`MAX_HOPS`] and a
/// dangling link are failures named `shown` (the link as the user sees it).
pub(crate) async fn follow(
    share: &Share,
    link: &str,
    shown: &str,
) -> Result<(String, Metadata), FileError> {
    let smb_error = |e: Error| FileError::new(shown, Cause::Smb(e));
    let mut at = link.to_string();
    for _ in 0..MAX_HOPS {
        let target = share.read_link(&at).await.map_err(smb_error)?;
        let next = resolve_in_share(&at, &target).ok_or_else(|| {
            FileError::new(
                shown,
                Refusal::LinkNotFollowed(format!(
                    "a symbolic link to {target:?}, outside the share: not followed (-L \
                     follows links within the share; without it the link is copied as a link)"
                )),
            )
        })?;
        let md = share.metadata(&next).await.map_err(|e| {
            smb_error(e).with_outcome(format!(" (where its link to {target:?} leads)"))
        })?;
        let another_link = match md.posix.as_ref().and_then(|p| p.file_type) {
            Some(t) => t == PosixFileType::Symlink,
            // Without the extensions a metadata query gives no tag: a reparse point is
            // asked for its link target, and one that has none is the end of the chain.
            None if md
                .attributes
                .contains(smb3_client::DosAttributes::REPARSE_POINT) =>
            {
                share.read_link(&next).await.is_ok()
            }
            None => false,
        };
        if !another_link {
            return Ok((next, md));
        }
        at = next;
    }
    Err(FileError::new(
        shown,
        Refusal::LinkNotFollowed(format!(
            "more than {MAX_HOPS} symbolic links one after the other: not followed"
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::resolve_in_share;

    #[test]
    fn targets_resolve_inside_the_share_only() {
        let cases = [
            ("a/b/link", "f", Some("a/b/f")),
            ("a/b/link", "./c/../f", Some("a/b/f")),
            ("a/b/link", "../../f", Some("f")),
            ("a/b/link", "../../..", None),
            ("a/b/link", "../../../etc/passwd", None),
            ("link", "..", None),
            ("link", "x//y/", Some("x/y")),
            ("a/link", "..", Some("")),
            ("a/link", "/etc/passwd", None),
            ("a/link", "C:/Windows", None),
            ("a/link", "//server/share/x", None),
            ("a/link", "", None),
        ];
        for (link, target, want) in cases {
            assert_eq!(
                resolve_in_share(link, target).as_deref(),
                want,
                "{link} -> {target}"
            );
        }
    }
}
