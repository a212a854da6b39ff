//! `-p/--preserve`: carry a file's times and attributes over to its copy, and `--update`'s
//! test whether a destination is already the same as its source.
//!
//! What each direction can keep:
//! - local → SMB: last-write, last-access and (where the local file system reports it)
//!   creation time; read-only (no write bit for anyone) becomes FILE_ATTRIBUTE_READONLY.
//! - SMB → local: last-write and last-access time (Linux cannot set a creation time);
//!   READONLY clears every write bit. Hidden, system and archive have no local equivalent
//!   and are not kept.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use smb3_client::{DosAttributes, FileTimes, Metadata, Share};

use crate::file_error::{Cause, StepFailed};
use crate::local_dest::LocalTarget;

/// Whether two times are equal at 100 ns, the resolution SMB carries times in (FILETIME).
/// Exact at the server's resolution, on purpose: no 2-second window as for FAT, so a file
/// touched within the same two seconds is still seen as changed.
pub(crate) fn same_time(a: SystemTime, b: SystemTime) -> bool {
    ticks(a) == ticks(b)
}

/// 100 ns units since the Unix epoch (negative before it).
fn ticks(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_nanos() / 100) as i128,
        Err(e) => -(e.duration().as_nanos().div_ceil(100) as i128),
    }
}

/// Whether a destination of `dest_len` bytes last written at `dest_mtime` is what copying a
/// source of `src_len` bytes written at `src_mtime` would produce (rsync's quick check).
pub(crate) fn up_to_date(
    src_len: u64,
    src_mtime: Option<SystemTime>,
    dest_len: u64,
    dest_mtime: Option<SystemTime>,
) -> bool {
    match (src_mtime, dest_mtime) {
        (Some(a), Some(b)) => src_len == dest_len && same_time(a, b),
        _ => false,
    }
}

/// Set the times of the remote directory `remote` from the local `source`'s metadata.
pub(crate) async fn dir_to_remote(
    share: &Share,
    remote: &str,
    source: &std::fs::Metadata,
) -> Result<(), StepFailed> {
    share
        .set_times(remote, &remote_times(source))
        .await
        .map_err(StepFailed::doing("setting times"))
}

/// Set the times of the local directory `local` from the remote source's metadata.
pub(crate) fn dir_to_local(local: &LocalTarget, source: &Metadata) -> Result<(), StepFailed> {
    let local_io = |doing: &'static str| move |e| StepFailed::new(doing, Cause::local(e));
    let dir = local.open_as_dir().map_err(local_io("opening"))?;
    dir.set_times(local_times(source))
        .map_err(local_io("setting times"))
}

/// A local file's times, to set on the server.
fn remote_times(source: &std::fs::Metadata) -> FileTimes {
    let mut times = FileTimes::new();
    times.modified = source.modified().ok();
    times.accessed = source.accessed().ok();
    times.created = source.created().ok();
    times
}

/// A remote file's times, to set on a local one (Linux cannot set the creation time).
fn local_times(source: &Metadata) -> std::fs::FileTimes {
    let mut times = std::fs::FileTimes::new();
    if let Some(t) = source.modified {
        times = times.set_modified(t);
    }
    if let Some(t) = source.accessed {
        times = times.set_accessed(t);
    }
    times
}

/// Set the times and read-only attribute of the uploaded file `remote` from the local
/// `source`'s metadata. Times go first: READONLY would refuse the FILE_WRITE_ATTRIBUTES open
/// on some servers.
pub(crate) async fn to_remote(
    share: &Share,
    remote: &str,
    source: &std::fs::Metadata,
) -> Result<(), StepFailed> {
    share
        .set_times(remote, &remote_times(source))
        .await
        .map_err(StepFailed::doing("setting times"))?;
    if source.permissions().readonly() {
        share
            .set_readonly(remote, true)
            .await
            .map_err(StepFailed::doing("setting read-only"))?;
    }
    Ok(())
}

/// Set the times and write bits of the downloaded file `file` (still open from writing it,
/// so no path is followed again) from the remote source's metadata; `shown` names it.
pub(crate) fn to_local(
    file: &std::fs::File,
    shown: &Path,
    source: &Metadata,
) -> Result<(), StepFailed> {
    let shown =
        |what: &str, e| StepFailed::new(format!("{}: {what}", shown.display()), Cause::local(e));
    file.set_times(local_times(source))
        .map_err(|e| shown("setting times", e))?;
    if source.attributes.contains(DosAttributes::READONLY) {
        let mut perms = file
            .metadata()
            .map_err(|e| shown("reading mode", e))?
            .permissions();
        perms.set_readonly(true);
        file.set_permissions(perms)
            .map_err(|e| shown("clearing write bits", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_compare_at_100ns() {
        let t = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        assert!(same_time(t, t + Duration::from_nanos(10)));
        assert!(!same_time(t, t + Duration::from_nanos(100)));
        assert!(!same_time(t, t + Duration::from_secs(1)));
        assert!(up_to_date(5, Some(t), 5, Some(t)));
        assert!(!up_to_date(5, Some(t), 6, Some(t)));
        assert!(!up_to_date(5, None, 5, Some(t)));
        let before = UNIX_EPOCH - Duration::from_nanos(150);
        assert!(!same_time(before, UNIX_EPOCH));
    }
}
