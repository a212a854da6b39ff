//! Whether a source changed while it was being copied. A file rewritten or appended to during
//! the copy leaves a destination that matches no version of it, and a copy reported as done
//! would be silent damage; rsync says "changed during transfer", robocopy retries. smbcp
//! compares what the source looked like when its copy started with what it looks like after
//! its last byte was read, copies it again once from the start when they differ, and then
//! fails the file with "changed while being copied".
//!
//! Locally the size, the modification and status-change times (nanoseconds) and the inode
//! are compared, on the open file and on its path (a file replaced by another under its
//! name, as an editor's atomic save or log rotation does, counts as changed). Remotely the
//! size and the last-write and change times of the CREATE reply are compared with a
//! QUERY_INFO after the last READ (MS-FSCC 2.4.7: a write moves both times).

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use smb3_client::Metadata;

/// What identifies one version of a local file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LocalVersion {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    dev: u64,
    ino: u64,
}

impl LocalVersion {
    /// The version `md` describes.
    pub(crate) fn of(md: &std::fs::Metadata) -> LocalVersion {
        LocalVersion {
            len: md.len(),
            mtime: (md.mtime(), md.mtime_nsec()),
            ctime: (md.ctime(), md.ctime_nsec()),
            dev: md.dev(),
            ino: md.ino(),
        }
    }

    /// Whether the source is still this version: the open file `file` unchanged, and the
    /// name `path` still the same file.
    pub(crate) fn still(&self, file: &std::fs::File, path: &Path) -> std::io::Result<bool> {
        let now = LocalVersion::of(&file.metadata()?);
        let named = std::fs::metadata(path).map(|md| LocalVersion::of(&md))?;
        Ok(now == *self && named == *self)
    }
}

/// Whether a remote file described as `at_open` when it was opened is described as `now`
/// by a later query: its size, last-write time or change time moved.
pub(crate) fn remote_changed(at_open: &Metadata, now: &Metadata) -> bool {
    at_open.len != now.len || at_open.modified != now.modified || at_open.changed != now.changed
}

/// What a file's failure says when its source changed during both copies.
pub(crate) const CHANGED: &str = "changed while being copied";

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn scratch(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("smbcp-change-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn a_rewrite_an_append_and_a_replacement_are_changes() {
        let dir = scratch("local");
        let path = dir.join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let v = LocalVersion::of(&file.metadata().unwrap());
        assert!(v.still(&file, &path).unwrap(), "untouched");

        // A rewrite in place, same size: the times move.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        w.write_all(b"9").unwrap();
        assert!(!v.still(&file, &path).unwrap(), "rewritten");

        // An append.
        let v = LocalVersion::of(&file.metadata().unwrap());
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"more")
            .unwrap();
        assert!(!v.still(&file, &path).unwrap(), "grew");

        // Another file put in its place (an atomic save).
        let v = LocalVersion::of(&file.metadata().unwrap());
        std::fs::write(dir.join("g"), b"0123456789more").unwrap();
        std::fs::rename(dir.join("g"), &path).unwrap();
        assert!(!v.still(&file, &path).unwrap(), "replaced");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn remote_times_and_size_tell_a_change() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let at_open = Metadata {
            file_type: smb3_client::FileType::File,
            len: 10,
            allocation_size: 0,
            created: None,
            accessed: None,
            modified: Some(t),
            changed: Some(t),
            attributes: smb3_client::DosAttributes::from_bits(0),
            file_id: 0,
            links: 1,
            posix: None,
        };
        assert!(!remote_changed(&at_open, &at_open.clone()));
        let later = Some(t + std::time::Duration::from_nanos(100));
        for now in [
            Metadata {
                len: 11,
                ..at_open.clone()
            },
            Metadata {
                modified: later,
                ..at_open.clone()
            },
            Metadata {
                changed: later,
                ..at_open.clone()
            },
        ] {
            assert!(remote_changed(&at_open, &now), "{now:?}");
        }
        // An access is no change.
        let read = Metadata {
            accessed: later,
            ..at_open.clone()
        };
        assert!(!remote_changed(&at_open, &read));
    }
}
