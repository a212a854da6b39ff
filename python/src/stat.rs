//! `StatResult`: a file's metadata with the field names of `os.stat_result`.

use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use smb3_client::{DosAttributes, Metadata};

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;

/// Nanoseconds since the Unix epoch (negative before it); 0 when the server gave no time.
fn ns(t: Option<SystemTime>) -> i128 {
    match t {
        Some(t) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        },
        None => 0,
    }
}

/// Size, times and attributes of a file or directory, named as `os.stat_result` names them
/// (`st_size`, `st_mtime`, `st_mode`, ...). Times are seconds since the epoch (float) and
/// nanoseconds (`*_ns`); `st_ctime` is the change time, `st_birthtime` the creation time.
/// `st_mode` is the POSIX mode on a share with the POSIX extensions, else a type bit with
/// 0o755/0o644 (0o555/0o444 for read-only).
#[pyclass(module = "smb3._smb3", frozen, get_all)]
#[derive(Debug, Clone)]
pub(crate) struct StatResult {
    st_mode: u32,
    st_ino: u64,
    st_dev: u64,
    st_nlink: u32,
    st_uid: u32,
    st_gid: u32,
    st_size: u64,
    st_atime: f64,
    st_mtime: f64,
    st_ctime: f64,
    st_birthtime: f64,
    st_atime_ns: i128,
    st_mtime_ns: i128,
    st_ctime_ns: i128,
    st_birthtime_ns: i128,
    /// The DOS attributes (FILE_ATTRIBUTE_* bits).
    st_file_attributes: u32,
    /// Bytes the server allocated for the file.
    allocation_size: u64,
}

impl From<&Metadata> for StatResult {
    fn from(m: &Metadata) -> StatResult {
        let ty = if m.is_dir() { S_IFDIR } else { S_IFREG };
        let perm = match &m.posix {
            Some(p) => p.permissions & 0o7777,
            None => {
                let ro = m.attributes.contains(DosAttributes::READONLY);
                match (m.is_dir(), ro) {
                    (true, false) => 0o755,
                    (true, true) => 0o555,
                    (false, false) => 0o644,
                    (false, true) => 0o444,
                }
            }
        };
        let (a, mo, c, b) = (ns(m.accessed), ns(m.modified), ns(m.changed), ns(m.created));
        StatResult {
            st_mode: ty | perm,
            st_ino: m.file_id,
            st_dev: 0,
            st_nlink: m.links.max(1),
            st_uid: 0,
            st_gid: 0,
            st_size: m.len,
            st_atime: a as f64 / 1e9,
            st_mtime: mo as f64 / 1e9,
            st_ctime: c as f64 / 1e9,
            st_birthtime: b as f64 / 1e9,
            st_atime_ns: a,
            st_mtime_ns: mo,
            st_ctime_ns: c,
            st_birthtime_ns: b,
            st_file_attributes: m.attributes.bits(),
            allocation_size: m.allocation_size,
        }
    }
}

#[pymethods]
impl StatResult {
    /// Whether it is a directory.
    fn is_dir(&self) -> bool {
        self.st_mode & S_IFDIR != 0
    }

    /// Whether it is a regular file.
    fn is_file(&self) -> bool {
        self.st_mode & S_IFREG != 0 && self.st_mode & S_IFDIR == 0
    }

    fn __repr__(&self) -> String {
        format!(
            "smb3.StatResult(st_mode={:#o}, st_ino={}, st_size={}, st_mtime={})",
            self.st_mode, self.st_ino, self.st_size, self.st_mtime
        )
    }
}
