//! Scratch directories of a test that are gone when the test ends, passed or failed.
//!
//! A test's local files (sources to upload, downloaded copies, mount points) would otherwise
//! pile up under the temporary directory run after run: a budget test alone leaves hundreds of
//! MiB each time.

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A fresh directory under the system's temporary directory, removed with everything in it
/// when dropped, unless something is still mounted inside it: a test that failed with its
/// mount up must not have the share's files deleted through the mount.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// `<tmp>/<prefix>-<pid>-<name>`, emptied if an earlier run of this process id left it.
    pub fn new(prefix: &str, name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot make {}: {e}", path.display()));
        Scratch(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(mount) = mount_inside(&self.0) {
            eprintln!(
                "leaving {} in place: {} is still mounted",
                self.0.display(),
                mount.display()
            );
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A mount point at or below `dir`, from this process's mount table.
fn mount_inside(dir: &Path) -> Option<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mount_path(field)))
        .find(|mount| mount.starts_with(dir))
}

/// A mountinfo path field with its octal escapes (`\040` for a space...) undone.
fn unescape_mount_path(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_is_gone_after_its_test() {
        let kept;
        {
            let s = Scratch::new("scratch-selftest", "gone");
            std::fs::write(s.join("f"), b"x").unwrap();
            kept = s.to_path_buf();
            assert!(kept.is_dir());
        }
        assert!(!kept.exists());
    }

    #[test]
    fn mount_paths_lose_their_escapes() {
        assert_eq!(unescape_mount_path("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
        assert_eq!(unescape_mount_path("/x\\0"), "/x\\0");
    }
}
