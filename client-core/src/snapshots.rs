//! Snapshots ("previous versions"): listing a share's snapshots with
//! FSCTL_SRV_ENUMERATE_SNAPSHOTS, and reading files and directories as they were in one with
//! the SMB2_CREATE_TIMEWARP_TOKEN create context (MS-SMB2 2.2.13.2.7, 3.3.5.15.1).

use bytes::Bytes;
use smb3_proto::msg::create::{AccessMask, CreateDisposition, CreateRequest};
use smb3_proto::msg::fscc::filetime_to_system_time;
use smb3_proto::msg::ioctl::{IoctlRequest, FSCTL_SRV_ENUMERATE_SNAPSHOTS};
use smb3_proto::msg::snapshots::SnapshotArray;
use smb3_proto::msg::FileId;
use smb3_proto::{Command, NtStatus};

use crate::error::{decode, decode_ioctl, Error, ProtocolError, Result, SnapshotListFault};
use crate::names::wire_path;
use crate::share::Share;
pub use crate::timewarp::Snapshot;
use crate::timewarp::{timewarp_filetime, token_of};
use crate::tree::ScopedHandle;

/// Statuses with which a server says a path is not there; in a snapshot, that may be
/// because the snapshot itself is not.
fn not_found(status: Option<NtStatus>) -> bool {
    matches!(
        status,
        Some(
            NtStatus::OBJECT_NAME_NOT_FOUND
                | NtStatus::OBJECT_PATH_NOT_FOUND
                | NtStatus::NO_SUCH_FILE
                | NtStatus::NOT_FOUND
        )
    )
}

/// The most output asked for: 64 KiB holds over 1300 tokens (50 bytes each).
const MAX_ARRAY_OUTPUT: u32 = 64 * 1024;
/// First ask with room for the counts only, as Windows does; the reply says how much the
/// tokens need.
const PROBE_OUTPUT: u32 = 16;
/// Rounds before giving up when snapshots keep appearing between the probe and the fetch.
const ENUMERATE_ROUNDS: usize = 4;

impl Share {
    /// The snapshots ("previous versions") the server has of `path` (a directory or file;
    /// `""` for the share root), newest first. Empty when the server has none or does not
    /// do snapshots on this share.
    ///
    /// Asks once for the size of the list and once more for the list (FSCTL_SRV_ENUMERATE_
    /// SNAPSHOTS, MS-SMB2 3.3.5.15.1), at most 64 KiB of it. Tokens the server lists in
    /// another shape than `@GMT-YYYY.MM.DD-HH.MM.SS` are skipped.
    pub async fn snapshots(&self, path: &str) -> Result<Vec<Snapshot>> {
        self.across_links(path, |s: Share, p: String| async move {
            s.snapshots_here(&p).await
        })
        .await
    }

    /// [`Share::snapshots`] on this share, with no DFS link on the way.
    async fn snapshots_here(&self, path: &str) -> Result<Vec<Snapshot>> {
        // Opened here rather than through the path helpers, which explain a failed open in a
        // snapshot by listing snapshots, with this very function.
        let req = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_READ_DATA | AccessMask::FILE_READ_ATTRIBUTES | AccessMask::SYNCHRONIZE,
            CreateDisposition::OPEN,
        );
        let created = self.tree.create(&req, path).await?;
        let handle = ScopedHandle::new(&self.tree, created.file_id);
        let listed = self.enumerate(handle.id()).await;
        let closed = handle.close().await;
        let list = listed.map_err(|e| e.with_path(path))?;
        closed.map_err(|e| e.with_path(path))?;
        Ok(list)
    }

    /// Ask for the size of the list, then for the list, until it is complete.
    async fn enumerate(&self, id: FileId) -> Result<Vec<Snapshot>> {
        let mut max = PROBE_OUTPUT;
        for _ in 0..ENUMERATE_ROUNDS {
            let array = match self.enumerate_once(id, max).await? {
                Some(array) => array,
                // Snapshots appeared since the probe: probe again.
                None => {
                    max = PROBE_OUTPUT;
                    continue;
                }
            };
            if array.is_complete() {
                return Ok(into_snapshots(array.tokens));
            }
            let needed = array.needed_output();
            if needed <= max {
                return Err(ProtocolError::SnapshotList(SnapshotListFault::TokensMissing).into());
            }
            let limit = MAX_ARRAY_OUTPUT.min(self.tree.core.negotiated.max_transact);
            if needed > limit {
                return Err(ProtocolError::SnapshotList(SnapshotListFault::TooLarge).into());
            }
            max = needed;
        }
        Err(ProtocolError::SnapshotList(SnapshotListFault::KeptChangingSize).into())
    }

    /// One FSCTL_SRV_ENUMERATE_SNAPSHOTS with `max` bytes of output; `None` when the server
    /// says the buffer is too small (it grew since the size was asked).
    async fn enumerate_once(&self, id: FileId, max: u32) -> Result<Option<SnapshotArray>> {
        let req = IoctlRequest::fsctl(FSCTL_SRV_ENUMERATE_SNAPSHOTS, id, Bytes::new(), max);
        let call = self
            .tree
            .call()
            .allowing(&[NtStatus::BUFFER_TOO_SMALL, NtStatus::BUFFER_OVERFLOW]);
        let resp = self.tree.core.send(&req, call).await?;
        if resp.header.status == NtStatus::BUFFER_TOO_SMALL {
            if max == PROBE_OUTPUT {
                return Err(ProtocolError::SnapshotList(SnapshotListFault::ProbeRefused).into());
            }
            return Ok(None);
        }
        let out = decode_ioctl(&req, &resp.msg)?;
        decode(Command::IOCTL, SnapshotArray::decode(&out.output)).map(Some)
    }

    /// This share as it was in `snapshot`: every file opened, listed or looked at through the
    /// returned `Share` is the snapshot's version (each CREATE carries the TWrp context,
    /// MS-SMB2 2.2.13.2.7). It is read-only: creating, deleting and renaming fail with
    /// [`Error::ApiMisuse`], opening for writing too. A snapshot the server does not have
    /// shows up as [`Error::SnapshotNotFound`] on the first path used.
    ///
    /// Seen with Samba 4.17's shadow_copy2: a directory that no longer exists in the live
    /// share can be listed in the snapshot, but opening a file inside it fails with
    /// OBJECT_PATH_NOT_FOUND (smbclient fares the same): the server resolves the parent in
    /// the live tree.
    pub fn at_snapshot(&self, snapshot: &Snapshot) -> Share {
        self.with_snapshot(Some(timewarp_filetime(snapshot.time)))
    }

    /// The snapshot this `Share` reads (see [`Share::at_snapshot`]); `None` for the live
    /// share.
    pub fn snapshot(&self) -> Option<Snapshot> {
        self.snapshot_filetime()
            .and_then(filetime_to_system_time)
            .and_then(Snapshot::from_time)
    }

    /// Refuse a change to the share when it is a snapshot view.
    pub(crate) fn check_writable(&self) -> Result<()> {
        match self.snapshot_filetime() {
            Some(_) => Err(Error::ApiMisuse(
                "a snapshot is read-only: nothing in it can be created, deleted or renamed",
            )),
            None => Ok(()),
        }
    }

    /// Tell "no such snapshot" from "no such path in the snapshot": when opening `path` in
    /// the snapshot at `filetime` failed as not found, and the server lists no snapshot at
    /// that time, the error is [`Error::SnapshotNotFound`]; otherwise `err` stands.
    pub(crate) async fn explain_snapshot_miss(
        &self,
        err: Error,
        path: &str,
        filetime: Option<u64>,
    ) -> Error {
        let Some(filetime) = filetime else {
            return err;
        };
        if !not_found(err.status()) {
            return err;
        }
        let wanted = filetime_to_system_time(filetime);
        match self.snapshots("").await {
            Ok(list) if !list.iter().any(|s| Some(s.time) == wanted) => {
                tracing::debug!(path, status = ?err.status(), "open in a snapshot the server does not list");
                Error::SnapshotNotFound {
                    path: Some(path.to_string()),
                    snapshot: token_of(filetime),
                }
            }
            Ok(_) => err,
            Err(e) => {
                tracing::debug!(error = %e, "listing snapshots to explain a failed open");
                err
            }
        }
    }
}

/// Tokens to snapshots, newest first; tokens in another shape are skipped.
fn into_snapshots(tokens: Vec<String>) -> Vec<Snapshot> {
    let mut out: Vec<Snapshot> = tokens
        .into_iter()
        .filter_map(|t| {
            let s = Snapshot::from_token(&t);
            if s.is_none() {
                tracing::warn!(token = %t, "snapshot token not in @GMT- form; skipped");
            }
            s
        })
        .collect();
    out.sort_by_key(|s| std::cmp::Reverse(s.time));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_come_newest_first_without_junk() {
        let list = into_snapshots(vec![
            "@GMT-2026.11.19-10.00.00".into(),
            "not a token".into(),
            "@GMT-2026.11.20-10.00.00".into(),
            "@GMT-2026.11.20-10.00.00".into(),
        ]);
        let tokens: Vec<&str> = list.iter().map(|s| s.token.as_str()).collect();
        assert_eq!(
            tokens,
            ["@GMT-2026.11.20-10.00.00", "@GMT-2026.11.19-10.00.00"]
        );
        assert_eq!(list[0].to_string(), "@GMT-2026.11.20-10.00.00");
    }
}
