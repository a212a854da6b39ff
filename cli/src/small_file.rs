//! Files that fit in one READ or WRITE, moved in one round trip each (the library's
//! `Share::read_small_file` and `Share::write_new_file`: CREATE + READ/WRITE + CLOSE
//! compounded). A tree of thousands of such files is bound by round trips and the server's
//! work per request, not by bytes.
//!
//! The guarantee of the regular path stays: no short file under the real name. A download
//! still goes through the local partial name; an upload creates the real name only when it
//! did not exist (FILE_CREATE), and the library deletes it again if the write is refused.
//! When the destination exists, or a lost connection leaves unknown whether the CREATE ran,
//! the file takes the regular path (a partial name renamed over the destination).

use std::os::unix::fs::FileExt as _;
use std::path::Path;

use bytes::Bytes;
use smb3_client::{ConnectionLossCause, Error, NtStatus, ReplayHazard, Share};

use crate::file_error::Cause;
use crate::in_flight::InFlight;
use crate::local_dest::Partial;
use crate::progress::Progress;
use crate::source_change::LocalVersion;
use crate::transfer::{TransferError, Transferred};

/// What the one-round-trip path did with a file.
pub(crate) enum Outcome {
    /// Copied.
    Done(Transferred),
    /// Failed; nothing is left under the destination's name.
    Failed(TransferError),
    /// Not done: copy the file the regular way.
    UseRegularPath,
}

/// Upload `local`, planned at `size` bytes (at most one chunk) with the permission bits
/// `permissions`, as the new remote file `remote`.
pub(crate) async fn upload(
    share: &Share,
    local: &Path,
    remote: &str,
    size: u64,
    permissions: u32,
    in_flight: &InFlight,
    progress: &Progress,
) -> Outcome {
    let Ok(limit) = u32::try_from(size) else {
        return Outcome::UseRegularPath;
    };
    let _held = in_flight.take(limit).await;
    let path = local.to_path_buf();
    let data = match tokio::task::spawn_blocking(move || read_at_most(&path, limit)).await {
        Ok(Ok(Some(data))) => Bytes::from(data),
        // It grew since it was planned: the regular path reads it in chunks.
        Ok(Ok(None)) => return Outcome::UseRegularPath,
        Ok(Err(e)) => return Outcome::Failed(TransferError::before(Cause::local(e))),
        Err(e) => return Outcome::Failed(TransferError::before(Cause::task(e))),
    };
    let n = data.len() as u64;
    let mode = crate::preserve::plain_copy_mode(permissions);
    match share.write_new_file_with_mode(remote, data, mode).await {
        Ok(()) => done(n, progress),
        Err(e) if exists_or_unknown(&e) => Outcome::UseRegularPath,
        Err(e) => Outcome::Failed(TransferError::before(e)),
    }
}

/// `n` bytes copied in one go.
fn done(n: u64, progress: &Progress) -> Outcome {
    progress.add(n);
    Outcome::Done(Transferred {
        bytes: n,
        resumed_from: 0,
        local_file: None,
        sparse: false,
    })
}

/// The whole of the local file at `path` if it holds at most `limit` bytes; `None` if it is
/// longer (only `limit + 1` bytes are read to find out).
/// A file that changed while it was read is `None` too: the regular path copies it, and
/// checks it again (`source_change.rs`).
fn read_at_most(path: &Path, limit: u32) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut data = Vec::with_capacity(limit as usize);
    let file = std::fs::File::open(path)?;
    let version = LocalVersion::of(&file.metadata()?);
    (&file).take(u64::from(limit) + 1).read_to_end(&mut data)?;
    if !version.still(&file, path)? {
        return Ok(None);
    }
    Ok((data.len() <= limit as usize).then_some(data))
}

/// Whether `write_new_file` left the destination to the regular path: it exists already, or
/// the connection was lost before the reply and the CREATE may or may not have run.
fn exists_or_unknown(e: &Error) -> bool {
    if e.status() == Some(NtStatus::OBJECT_NAME_COLLISION) {
        return true;
    }
    matches!(
        e,
        Error::ConnectionLost {
            cause: ConnectionLossCause::NotReplayable {
                hazard: ReplayHazard::CreatesNewFile,
                ..
            },
            ..
        }
    )
}

/// Download `remote`, listed at `size` bytes, into the local `partial` file.
pub(crate) async fn download(
    share: &Share,
    remote: &str,
    partial: &Partial,
    size: u64,
    in_flight: &InFlight,
    progress: &Progress,
) -> Outcome {
    let Ok(limit) = u32::try_from(size) else {
        return Outcome::UseRegularPath;
    };
    let _held = in_flight.take(limit).await;
    let data = match share.read_small_file(remote, limit).await {
        Ok(Some(data)) => data,
        // It grew since it was listed.
        Ok(None) => return Outcome::UseRegularPath,
        Err(e) => return Outcome::Failed(TransferError::started(e)),
    };
    let n = data.len() as u64;
    let file = partial.file.clone();
    let written = tokio::task::spawn_blocking(move || file.write_all_at(&data, 0)).await;
    match written {
        Ok(Ok(())) => done(n, progress),
        Ok(Err(e)) => Outcome::Failed(TransferError::started(Cause::local_at(
            partial.path().display(),
            e,
        ))),
        Err(e) => Outcome::Failed(TransferError::started(Cause::task(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb3_client::Command;

    #[test]
    fn a_local_file_longer_than_planned_is_left_to_the_regular_path() {
        let dir = std::env::temp_dir().join(format!("smbcp-small-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f");
        std::fs::write(&f, vec![7u8; 100]).unwrap();
        assert_eq!(read_at_most(&f, 100).unwrap(), Some(vec![7u8; 100]));
        assert_eq!(read_at_most(&f, 200).unwrap(), Some(vec![7u8; 100]));
        assert_eq!(read_at_most(&f, 99).unwrap(), None);
        std::fs::write(&f, b"").unwrap();
        assert_eq!(read_at_most(&f, 0).unwrap(), Some(Vec::new()));
        assert!(read_at_most(&dir.join("missing"), 10).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_existing_destination_or_an_unknown_outcome_takes_the_regular_path() {
        let collision = Error::Status {
            command: Command::CREATE,
            status: NtStatus::OBJECT_NAME_COLLISION,
            path: Some("a".into()),
        };
        assert!(exists_or_unknown(&collision));
        let lost = Error::ConnectionLost {
            command: Command::CREATE,
            cause: ConnectionLossCause::NotReplayable {
                hazard: ReplayHazard::CreatesNewFile,
                loss: Box::new(ConnectionLossCause::ClosedByServer),
            },
        };
        assert!(exists_or_unknown(&lost));
        let denied = Error::Status {
            command: Command::CREATE,
            status: NtStatus::ACCESS_DENIED,
            path: Some("a".into()),
        };
        assert!(!exists_or_unknown(&denied));
        let other_loss = Error::ConnectionLost {
            command: Command::CREATE,
            cause: ConnectionLossCause::NotReplayable {
                hazard: ReplayHazard::DeleteOnClose,
                loss: Box::new(ConnectionLossCause::ClosedByServer),
            },
        };
        assert!(!exists_or_unknown(&other_loss));
    }
}
