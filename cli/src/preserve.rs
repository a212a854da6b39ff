//! `-p/--preserve`: carry a file's times and attributes over to its copy, and `--update`'s
//! test whether a destination is already the same as its source.
//!
//! What each direction can keep:
//! - local → SMB: last-write, last-access and (where the local file system reports it)
//!   creation time. On a share with the SMB3 POSIX extensions the permission bits (Samba
//!   keeps rwx; setuid, setgid and sticky cannot be set over SMB), and with
//!   `--preserve=all` the owner and group (numeric ids, as Samba's Unix SIDs). Elsewhere
//!   read-only (no write bit for anyone) becomes FILE_ATTRIBUTE_READONLY.
//! - SMB → local: last-write and last-access time (Linux cannot set a creation time). From
//!   a POSIX share the permission bits, and with `--preserve=all` the owner and group
//!   when the server names them by Unix id; elsewhere READONLY clears every write bit.
//!   Hidden, system and archive have no local equivalent and are not kept.
//!
//! Owners are kept as `cp -p` keeps them: whoever may not give a file away (a local user
//! other than root; an SMB user the server does not let change owners) gets the file as
//! their own. smbcp counts such files and says so in one note rather than failing each.
//! Setuid and setgid bits from a server are never kept (see [`SET_ID_BITS`]).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use smb3_client::{DosAttributes, FileTimes, Metadata, NtStatus, Share};

use crate::file_error::{Cause, StepFailed};
use crate::local_dest::LocalTarget;

/// Whether a copy kept its source's owner and group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owners {
    /// Not asked for (`-p` without `=all`), or nothing to keep (no POSIX metadata).
    NotAsked,
    Kept,
    /// Asked for, but this user may not give files away, or the server names the owner by a
    /// SID with no Unix id.
    NotKept,
}

/// Permission bits smbcp keeps: rwx for each class, setuid, setgid and sticky.
const PERMISSION_BITS: u32 = 0o7777;
/// Setuid and setgid, never kept on a download: the server chooses both the bits and (with
/// `--preserve=all`) the owner, so keeping them would let it hand local users a program that
/// runs as root.
const SET_ID_BITS: u32 = 0o6000;

/// This process's umask, read once: on Linux from `/proc/self/status` (nothing is
/// changed); elsewhere by setting it and putting it back, a moment in which a file another
/// thread creates is made with the stricter mask 077.
pub(crate) fn umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        let from_proc = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|l| l.starts_with("Umask:"))?;
                u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
            });
        from_proc.unwrap_or_else(|| {
            use rustix::fs::Mode;
            let old = rustix::process::umask(Mode::from_raw_mode(0o077));
            rustix::process::umask(old);
            old.bits() as u32
        })
    })
}

/// The permission bits a copy made without `-p` gets, as `cp` does: the source's rwx (an
/// executable stays one) less the umask.
pub(crate) fn plain_copy_mode(source_permissions: u32) -> u32 {
    source_permissions & 0o777 & !umask()
}

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

/// Set the times of the remote directory `remote` from the local `source`'s metadata, and
/// on a POSIX share its mode (and with `owners` its owner and group).
pub(crate) async fn dir_to_remote(
    share: &Share,
    remote: &str,
    source: &std::fs::Metadata,
    owners: bool,
) -> Result<Owners, StepFailed> {
    share
        .set_times(remote, &remote_times(source))
        .await
        .map_err(StepFailed::doing("setting times"))?;
    if share.is_posix() {
        mode_to_remote(share, remote, source, owners).await
    } else {
        Ok(Owners::NotAsked)
    }
}

/// Set the times of the local directory `local` from the remote source's metadata, and
/// from a POSIX share its mode (and with `owners` its owner and group).
pub(crate) fn dir_to_local(
    local: &LocalTarget,
    source: &Metadata,
    owners: bool,
) -> Result<Owners, StepFailed> {
    let local_io = |doing: &'static str| move |e| StepFailed::new(doing, Cause::local(e));
    let dir = local.open_as_dir().map_err(local_io("opening"))?;
    dir.set_times(local_times(source))
        .map_err(local_io("setting times"))?;
    mode_to_local(&dir, source, owners).map_err(|(doing, e)| StepFailed::new(doing, e))
}

/// On a POSIX share: give `remote` the local `source`'s owner and group (with `owners`),
/// then its permission bits (last: a mode without the owner's write bit must not stand in
/// the way of the rest).
async fn mode_to_remote(
    share: &Share,
    remote: &str,
    source: &std::fs::Metadata,
    owners: bool,
) -> Result<Owners, StepFailed> {
    use std::os::unix::fs::MetadataExt as _;
    let mut kept = Owners::NotAsked;
    if owners {
        kept = match share
            .set_owner(remote, Some(source.uid()), Some(source.gid()))
            .await
        {
            Ok(()) => Owners::Kept,
            Err(e) if owner_refused(&e) => Owners::NotKept,
            Err(e) => return Err(StepFailed::new("setting owner and group", Cause::Smb(e))),
        };
    }
    share
        .set_mode(remote, source.mode() & PERMISSION_BITS)
        .await
        .map_err(StepFailed::doing("setting the mode"))?;
    Ok(kept)
}

/// Whether a server's refusal of an owner means only that this user may not give files away.
fn owner_refused(e: &smb3_client::Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::ACCESS_DENIED | NtStatus::INVALID_OWNER | NtStatus::PRIVILEGE_NOT_HELD)
    )
}

/// From a POSIX share's metadata: give the open local `file` the source's owner and group
/// (with `owners`, where the server names them by Unix id), then its permission bits. A
/// source without POSIX metadata changes nothing here.
fn mode_to_local(
    file: &std::fs::File,
    source: &Metadata,
    owners: bool,
) -> Result<Owners, (&'static str, Cause)> {
    let Some(posix) = &source.posix else {
        return Ok(Owners::NotAsked);
    };
    let mut kept = Owners::NotAsked;
    if owners {
        // Each of the two is kept when the server names it by Unix id; one that it names by
        // an account SID (Samba does so for its own users) has no local id to become.
        let (uid, gid) = (posix.uid(), posix.gid());
        kept = match std::os::unix::fs::fchown(file, uid, gid) {
            Ok(()) if uid.is_some() && gid.is_some() => Owners::Kept,
            Ok(()) => Owners::NotKept,
            Err(e) if may_not_give_away(&e) => Owners::NotKept,
            Err(e) => return Err(("setting owner and group", Cause::local(e))),
        };
    }
    let mode = posix.permissions & PERMISSION_BITS & !SET_ID_BITS;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| ("setting the mode", Cause::local(e)))?;
    Ok(kept)
}

/// Whether a local chown failed only because this user is not root (`cp -p` is silent
/// then; for root it is an error).
fn may_not_give_away(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let refused = matches!(Errno::from_io_error(e), Some(Errno::PERM | Errno::INVAL));
    refused && !rustix::process::geteuid().is_root()
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

/// Set the times of the uploaded file `remote` from the local `source`'s metadata, then on
/// a POSIX share its mode (and with `owners` its owner and group), elsewhere its read-only
/// attribute. Times go first: READONLY would refuse the FILE_WRITE_ATTRIBUTES open on some
/// servers.
pub(crate) async fn to_remote(
    share: &Share,
    remote: &str,
    source: &std::fs::Metadata,
    owners: bool,
) -> Result<Owners, StepFailed> {
    share
        .set_times(remote, &remote_times(source))
        .await
        .map_err(StepFailed::doing("setting times"))?;
    if share.is_posix() {
        return mode_to_remote(share, remote, source, owners).await;
    }
    if source.permissions().readonly() {
        share
            .set_readonly(remote, true)
            .await
            .map_err(StepFailed::doing("setting read-only"))?;
    }
    Ok(Owners::NotAsked)
}

/// Set the times and mode of the downloaded file `file` (still open from writing it, so no
/// path is followed again) from the remote source's metadata: from a POSIX share its
/// permission bits (and with `owners` its owner and group), elsewhere READONLY as no write
/// bit; `shown` names it.
pub(crate) fn to_local(
    file: &std::fs::File,
    shown: &Path,
    source: &Metadata,
    owners: bool,
) -> Result<Owners, StepFailed> {
    let at = |what: &str| format!("{}: {what}", shown.display());
    let shown = |what: &str, e| StepFailed::new(at(what), Cause::local(e));
    file.set_times(local_times(source))
        .map_err(|e| shown("setting times", e))?;
    if source.posix.is_some() {
        return mode_to_local(file, source, owners)
            .map_err(|(doing, e)| StepFailed::new(at(doing), e));
    }
    if source.attributes.contains(DosAttributes::READONLY) {
        let mut perms = file
            .metadata()
            .map_err(|e| shown("reading mode", e))?
            .permissions();
        perms.set_readonly(true);
        file.set_permissions(perms)
            .map_err(|e| shown("clearing write bits", e))?;
    }
    Ok(Owners::NotAsked)
}

/// Without `-p`: give the downloaded `file` the mode `cp` would, from a POSIX share's
/// metadata (elsewhere the mode it was created with stays); `shown` names it.
pub(crate) fn plain_mode_to_local(
    file: &std::fs::File,
    shown: &Path,
    source: &Metadata,
) -> Result<Owners, StepFailed> {
    if let Some(posix) = &source.posix {
        let mode = plain_copy_mode(posix.permissions);
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| {
                StepFailed::new(
                    format!("{}: setting the mode", shown.display()),
                    Cause::local(e),
                )
            })?;
    }
    Ok(Owners::NotAsked)
}

/// A remote link's times, for its local copy (`-p`; the link's own, not its target's).
pub(crate) fn link_times(source: &Metadata) -> rustix::fs::Timestamps {
    let spec = |t: Option<SystemTime>| match t.map(|t| t.duration_since(UNIX_EPOCH)) {
        Some(Ok(d)) => rustix::fs::Timespec {
            tv_sec: d.as_secs() as _,
            tv_nsec: d.subsec_nanos() as _,
        },
        // Unknown (or before 1970): left as it is.
        _ => rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT as _,
        },
    };
    rustix::fs::Timestamps {
        last_access: spec(source.accessed),
        last_modification: spec(source.modified),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Metadata of a file on a POSIX share with `permissions`, owned by Unix ids.
    fn posix_file(permissions: u32) -> Metadata {
        let sid = |s: &str| s.parse::<smb3_client::Sid>().unwrap();
        Metadata {
            file_type: smb3_client::FileType::File,
            len: 0,
            allocation_size: 0,
            created: None,
            accessed: None,
            modified: None,
            changed: None,
            attributes: DosAttributes::empty(),
            file_id: 0,
            links: 1,
            posix: Some(smb3_client::PosixMetadata {
                file_type: Some(smb3_client::PosixFileType::Regular),
                permissions,
                links: 1,
                owner: sid("S-1-22-1-4242"),
                group: sid("S-1-22-2-4343"),
                reparse_tag: 0,
            }),
        }
    }

    #[test]
    fn a_servers_setuid_and_setgid_are_never_kept_the_rest_is() {
        let dir = std::env::temp_dir().join(format!("smbcp-modes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let file = std::fs::File::create(&path).unwrap();
        for (server, here) in [
            (0o4755, 0o755),
            (0o2750, 0o750),
            (0o1777, 0o1777),
            (0o600, 0o600),
        ] {
            mode_to_local(&file, &posix_file(server), false).unwrap();
            let got = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
            assert_eq!(got, here, "{server:o}");
        }
        // Owners asked for: kept where this user may (root), never with the set-id bits.
        let kept = mode_to_local(&file, &posix_file(0o6755), true).unwrap();
        let got = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(got, 0o755);
        let root = rustix::process::geteuid().is_root();
        assert_eq!(kept, if root { Owners::Kept } else { Owners::NotKept });
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
