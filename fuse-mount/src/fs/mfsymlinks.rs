//! Symbolic links as Minshall+French files (`-o mfsymlinks`), on shares without the POSIX
//! extensions: a regular file of exactly 1067 bytes that says it is a link. The Linux
//! kernel's client (`mount -t cifs -o mfsymlinks`) and macOS's make and read the same files,
//! so links made here are links there and back. The format, from the kernel's
//! `fs/smb/client/link.c` (`format_mf_symlink`, `parse_mf_symlink`):
//!
//! ```text
//! #define CIFS_MF_SYMLINK_LEN_OFFSET (4+1)
//! #define CIFS_MF_SYMLINK_MD5_OFFSET (CIFS_MF_SYMLINK_LEN_OFFSET+(4+1))
//! #define CIFS_MF_SYMLINK_LINK_OFFSET (CIFS_MF_SYMLINK_MD5_OFFSET+(32+1))
//! #define CIFS_MF_SYMLINK_LINK_MAXLEN (1024)
//! #define CIFS_MF_SYMLINK_FILE_SIZE (CIFS_MF_SYMLINK_LINK_OFFSET + CIFS_MF_SYMLINK_LINK_MAXLEN)
//! #define CIFS_MF_SYMLINK_LEN_FORMAT "XSym\n%04u\n"
//! #define CIFS_MF_SYMLINK_MD5_FORMAT "%16phN\n"
//! ```
//!
//! that is `XSym\n`, the target's length in four decimal digits and `\n`, the MD5 of the
//! target in 32 lowercase hex digits and `\n`, the target, `\n`, and spaces up to 1067
//! bytes. A file is a link only if all of it checks out (its size, the header, a length of
//! at most 1024, the hash of that many bytes of target); anything else is the regular file
//! it looks like.

use md5::{Digest, Md5};
use smb3_client::{Error, OpenOptions, Share};

use super::SmbFs;
use crate::errno::{FsError, FsResult};

/// The size of every such file.
pub(super) const FILE_SIZE: u64 = 1067;
const LINK_OFFSET: usize = 43;
const LINK_MAX: usize = 1024;

/// The file that holds a link to `target`; `None` for a target longer than 1024 bytes.
pub(super) fn format(target: &[u8]) -> Option<Vec<u8>> {
    if target.len() > LINK_MAX {
        return None;
    }
    let mut buf = format!("XSym\n{:04}\n{}\n", target.len(), hex_md5(target)).into_bytes();
    debug_assert_eq!(buf.len(), LINK_OFFSET);
    buf.extend_from_slice(target);
    buf.push(b'\n');
    buf.resize(FILE_SIZE as usize, b' ');
    Some(buf)
}

/// The target of the link `buf` holds, or `None` when it is no such link.
pub(super) fn parse(buf: &[u8]) -> Option<&[u8]> {
    if buf.len() as u64 != FILE_SIZE || !buf.starts_with(b"XSym\n") || buf[9] != b'\n' {
        return None;
    }
    let len: usize = std::str::from_utf8(&buf[5..9]).ok()?.parse().ok()?;
    if len > LINK_MAX || buf[42] != b'\n' {
        return None;
    }
    let target = &buf[LINK_OFFSET..LINK_OFFSET + len];
    (buf[10..42] == *hex_md5(target).as_bytes()).then_some(target)
}

fn hex_md5(data: &[u8]) -> String {
    Md5::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The target of the link stored as a Minshall+French file at `path` of `share`, if it is
/// one (one READ of the file's 1067 bytes).
pub(super) async fn read(share: &Share, path: &str) -> Result<Option<String>, Error> {
    let f = share.open(path, &OpenOptions::new().read(true)).await?;
    let data = f.read_at(0, FILE_SIZE as usize).await;
    let closed = f.close().await;
    let data = data?;
    closed?;
    Ok(parse(&data).map(|t| String::from_utf8_lossy(t).into_owned()))
}

impl SmbFs {
    /// Whether links are Minshall+French files on this mount.
    pub(super) fn mfsymlinks(&self) -> bool {
        self.cfg.mfsymlinks && !self.share.is_posix()
    }

    /// The target of the link stored as a Minshall+French file at `path`, if it is one.
    pub(super) async fn read_mfsymlink(&self, path: &str) -> FsResult<Option<String>> {
        Ok(read(&self.share, path).await?)
    }

    /// Make `path` a Minshall+French link to `target`.
    pub(super) async fn write_mfsymlink(&self, path: &str, target: &str) -> FsResult<()> {
        let data = format(target.as_bytes()).ok_or_else(|| FsError::new(libc::ENAMETOOLONG))?;
        let opts = OpenOptions::new().write(true).create_new(true).mode(0o644);
        let f = self.share.open(path, &opts).await?;
        let written = f.write_at(0, data.into()).await;
        let closed = f.close().await;
        if let Err(e) = written.and(closed) {
            // No half-made link left where one was asked for.
            let _ = self.share.remove_file(path).await;
            return Err(e.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_format_round_trips() {
        let buf = format(b"../target dir/file").unwrap();
        assert_eq!(buf.len(), 1067);
        // md5("../target dir/file"), as `printf %s '../target dir/file' | md5sum` gives it.
        let head = String::from_utf8_lossy(&buf[..LINK_OFFSET + 19]).into_owned();
        assert!(head.starts_with("XSym\n0018\n"), "{head:?}");
        assert_eq!(&buf[10..42], hex_md5(b"../target dir/file").as_bytes());
        assert_eq!(&buf[LINK_OFFSET..LINK_OFFSET + 19], b"../target dir/file\n");
        assert!(buf[LINK_OFFSET + 19..].iter().all(|&b| b == b' '));
        assert_eq!(parse(&buf), Some(&b"../target dir/file"[..]));
        // The longest target fills the file: no newline after it.
        let long = vec![b'x'; 1024];
        let buf = format(&long).unwrap();
        assert_eq!(buf.len(), 1067);
        assert_eq!(parse(&buf), Some(&long[..]));
        assert!(format(&[b'x'; 1025]).is_none());
    }

    #[test]
    fn anything_else_is_a_regular_file() {
        let good = format(b"t").unwrap();
        assert!(parse(&good[..1066]).is_none(), "size");
        let mut bad = good.clone();
        bad[11] ^= 1;
        assert!(parse(&bad).is_none(), "hash");
        let mut bad = good.clone();
        bad[5..9].copy_from_slice(b"2000");
        assert!(parse(&bad).is_none(), "length");
        let mut bad = good;
        bad[0] = b'x';
        assert!(parse(&bad).is_none(), "magic");
        assert!(parse(&[b' '; 1067]).is_none());
    }

    #[test]
    fn md5_matches_a_known_value() {
        // RFC 1321's test suite: MD5("abc").
        assert_eq!(hex_md5(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
    }
}
