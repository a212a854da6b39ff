//! POSIX byte-range locks (SETLK, SETLKW, GETLK) over SMB2 LOCK, which neither splits,
//! merges nor converts locks: each handle keeps the locks it holds, by lock owner.

use smb3_client::{Error, IfLocked, LockKind, NtStatus};

use super::SmbFs;
use crate::errno::{FsError, FsResult};

/// A POSIX lock request's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockType {
    /// F_RDLCK.
    Read,
    /// F_WRLCK.
    Write,
    /// F_UNLCK.
    Unlock,
}

/// A lock held on the server through one handle, for one POSIX lock owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Held {
    start: u64,
    /// Exclusive end.
    end: u64,
    kind: LockKind,
    pub(super) owner: u64,
}

/// Attempts of a waiting lock (F_SETLKW, flock) each bounded by the library's request
/// timeout, before EINTR is returned.
const LOCK_WAIT_ATTEMPTS: u32 = 60;

fn lock_refused(e: &Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::LOCK_NOT_GRANTED | NtStatus::FILE_LOCK_CONFLICT)
    )
}

impl SmbFs {
    /// SETLK / SETLKW: take or release the POSIX lock of `owner` on bytes `start..=end`
    /// (`sleep`: wait for it). Mapped onto SMB2 LOCK, which neither splits, merges nor
    /// converts locks: the owner's locks overlapping the range are released first and what
    /// lies outside the range is locked again, then the new lock is taken. Releasing waits
    /// for the handle's writes in flight, so another client that gets the lock next reads
    /// them.
    pub async fn setlk(
        &self,
        fh: u64,
        owner: u64,
        start: u64,
        end: u64,
        typ: LockType,
        sleep: bool,
    ) -> FsResult<()> {
        let h = self.handle(fh)?;
        if typ != LockType::Unlock {
            // A program that takes a lock expects to read what the last holder wrote.
            self.drop_prefetched(h.ino);
        }
        let end = end.saturating_add(1).max(start + 1);
        let mut held = h.locks.lock().await;
        h.wb.settle().await?;
        let mut keep = Vec::with_capacity(held.len());
        let mut relock = Vec::new();
        for l in held.drain(..) {
            if l.owner == owner && l.start < end && start < l.end {
                if let Err(e) = h.file.unlock(l.start, l.end - l.start).await {
                    tracing::debug!(error = %e, "unlock");
                }
                if l.start < start {
                    relock.push(Held { end: start, ..l });
                }
                if end < l.end {
                    relock.push(Held { start: end, ..l });
                }
            } else {
                keep.push(l);
            }
        }
        for r in relock {
            match h
                .file
                .lock(r.start, r.end - r.start, r.kind, IfLocked::Fail)
                .await
            {
                Ok(()) => keep.push(r),
                Err(e) => tracing::warn!(error = %e, "re-locking the rest of a range failed"),
            }
        }
        *held = keep;
        let kind = match typ {
            LockType::Unlock => return Ok(()),
            LockType::Read => LockKind::Shared,
            LockType::Write => LockKind::Exclusive,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match h
                .file
                .lock(
                    start,
                    end - start,
                    kind,
                    if sleep {
                        IfLocked::Wait
                    } else {
                        IfLocked::Fail
                    },
                )
                .await
            {
                Ok(()) => {
                    held.push(Held {
                        start,
                        end,
                        kind,
                        owner,
                    });
                    return Ok(());
                }
                Err(e) if lock_refused(&e) => return Err(FsError::new(libc::EAGAIN)),
                Err(Error::Timeout { .. }) if sleep && attempt < LOCK_WAIT_ATTEMPTS => {}
                Err(Error::Timeout { .. }) if sleep => return Err(FsError::new(libc::EINTR)),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// GETLK: whether `owner` could take the lock; `None` if so, else the range and type of
    /// a conflicting lock (SMB does not say whose, nor exactly where: the asked range is
    /// reported as write-locked).
    pub async fn getlk(
        &self,
        fh: u64,
        owner: u64,
        start: u64,
        end: u64,
        typ: LockType,
    ) -> FsResult<Option<(u64, u64, LockType)>> {
        let h = self.handle(fh)?;
        let kind = match typ {
            LockType::Unlock => return Ok(None),
            LockType::Read => LockKind::Shared,
            LockType::Write => LockKind::Exclusive,
        };
        let end_x = end.saturating_add(1).max(start + 1);
        let held = h.locks.lock().await;
        // Locks of this handle would answer for themselves; POSIX never reports the
        // asking process's own locks, and other owners on one handle are not told apart.
        if held.iter().any(|l| l.start < end_x && start < l.end) {
            let _ = owner;
            return Ok(None);
        }
        match h
            .file
            .lock(start, end_x - start, kind, IfLocked::Fail)
            .await
        {
            Ok(()) => {
                let _ = h.file.unlock(start, end_x - start).await;
                Ok(None)
            }
            Err(e) if lock_refused(&e) => Ok(Some((start, end, LockType::Write))),
            Err(e) => Err(e.into()),
        }
    }
}
