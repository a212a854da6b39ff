//! Byte-range locks on an open file: SMB2 LOCK (MS-SMB2 2.2.26), one range per request,
//! shared or exclusive, failing at once or waiting for the range.

use smb3_proto::msg::lock::{LockElement, LockFlags, LockRequest, LockResponse};
use smb3_proto::Command;

use crate::error::decode;
use crate::error::Result;
use crate::file::File;

/// What [`File::lock`] does when another open holds the range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfLocked {
    /// Fail at once with `LOCK_NOT_GRANTED`.
    Fail,
    /// Wait until the range is free (within the request timeout).
    Wait,
}

/// The kind of a byte-range lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Others may read and take shared locks; nobody may write (a read lock).
    Shared,
    /// Nobody else may read, write or lock the range (a write lock).
    Exclusive,
}

impl File {
    /// Lock `len` bytes at `offset` for this handle (SMB2 LOCK, MS-SMB2 2.2.26). With
    /// [`IfLocked::Fail`], a range another open holds fails at once with `LOCK_NOT_GRANTED`;
    /// with [`IfLocked::Wait`], the server queues the request until the range is free
    /// (answering STATUS_PENDING first), within the request timeout (the request is then
    /// cancelled and `Error::Timeout` returned). SMB locks are mandatory for other opens: their reads and writes of a
    /// locked range fail with `FILE_LOCK_CONFLICT`. A lock is released by [`File::unlock`]
    /// of exactly the same range, or when the handle is closed. Lock requests are never
    /// replayed on another channel (the first may have been granted): a lost channel fails
    /// them with `ConnectionLost`.
    pub async fn lock(
        &self,
        offset: u64,
        len: u64,
        kind: LockKind,
        if_locked: IfLocked,
    ) -> Result<()> {
        let mut flags = match kind {
            LockKind::Shared => LockFlags::SHARED,
            LockKind::Exclusive => LockFlags::EXCLUSIVE,
        };
        if if_locked == IfLocked::Fail {
            flags |= LockFlags::FAIL_IMMEDIATELY;
        }
        self.lock_request(offset, len, flags).await
    }

    /// Release the lock on exactly `len` bytes at `offset` taken by [`File::lock`] on this
    /// handle (any other range is an error: SMB does not split or merge locks).
    pub async fn unlock(&self, offset: u64, len: u64) -> Result<()> {
        self.lock_request(offset, len, LockFlags::UNLOCK).await
    }

    async fn lock_request(&self, offset: u64, length: u64, flags: u32) -> Result<()> {
        let req = LockRequest {
            file_id: self.file_id(),
            // Index 0: no lock sequence verification (MS-SMB2 3.3.5.14); not needed as lock
            // requests are not replayed.
            lock_sequence: 0,
            locks: vec![LockElement {
                offset,
                length,
                flags: LockFlags(flags),
            }],
        };
        let resp = self.request(&req).await?;
        decode(Command::LOCK, LockResponse::decode(&resp.msg)).map(drop)
    }
}
