//! One open as requests name it: the server's handle behind a swappable FileId, what the
//! CREATE asked for (to ask for the same again on reclaim or reopen), and what tells that a
//! file opened again by path is the same file.

use std::sync::{Mutex, MutexGuard};

use smb3_proto::msg::FileId;

use super::tree::TreeContext;
use crate::error::{FileChange, HandleLossCause};

/// What the CREATE asked for, kept to ask for the same again on reclaim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpenParams {
    /// The path as sent (share-relative, backslashes).
    pub(crate) wire_path: String,
    pub(crate) desired_access: u32,
    pub(crate) share_access: u32,
    pub(crate) create_options: u32,
    pub(crate) file_attributes: u32,
    /// The snapshot the file was opened in (TWrp FILETIME): a reopen must read the same one.
    pub(crate) timewarp: Option<u64>,
    /// The file id the file was opened by (FILE_OPEN_BY_FILE_ID), instead of `wire_path`.
    pub(crate) file_id_name: Option<u64>,
    /// A POSIX open (SMB3 POSIX extensions): a reopen must be one too.
    pub(crate) posix: bool,
}

impl OpenParams {
    /// The path for messages, with forward slashes.
    pub(crate) fn display_path(&self) -> String {
        self.wire_path.replace('\\', "/")
    }
}

/// The durable handle the server granted (DH2Q response, MS-SMB2 2.2.14.2.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DurableGrant {
    /// How long the server keeps the open after a disconnect, in milliseconds.
    pub(crate) timeout_ms: u32,
    /// Flags (SMB2_DHANDLE_FLAG_PERSISTENT).
    pub(crate) flags: u32,
}

/// The server's side of an open: what requests name it by, and what reclaims it. A reclaim
/// replaces the FileId; a reopen after a refused reclaim replaces all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ServerHandle {
    pub(crate) file_id: FileId,
    /// CreateGuid sent in DH2Q: names the open in DH2C and in replays of the CREATE.
    pub(crate) create_guid: Option<[u8; 16]>,
    /// Set when the server made the open durable.
    pub(crate) durable: Option<DurableGrant>,
}

/// What tells that a file opened again by path is the file that was open before: the
/// server's on-disk id (QFid, MS-SMB2 2.2.14.2.9) and the creation time. A file deleted and
/// created again under the same name differs in both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    /// CreationTime (FILETIME); 0 when the server did not say.
    pub(crate) creation_time: u64,
    /// DiskFileId and VolumeId, when the server answered QFid.
    pub(crate) disk_id: Option<[u8; 32]>,
}

impl FileIdentity {
    /// Whether `now` is provably the same file: every fact both sides have agrees, and at
    /// least one fact was compared. With nothing to compare, the answer is no: writing the
    /// lost requests into a file that may be another one would corrupt it.
    pub(crate) fn same_file(&self, now: &FileIdentity) -> Result<(), FileChange> {
        let mut compared = false;
        if let (Some(a), Some(b)) = (self.disk_id, now.disk_id) {
            if a != b {
                return Err(FileChange::OnDiskId);
            }
            compared = true;
        }
        if self.creation_time != 0 && now.creation_time != 0 {
            if self.creation_time != now.creation_time {
                return Err(FileChange::CreationTime);
            }
            compared = true;
        }
        if compared {
            Ok(())
        } else {
            Err(FileChange::Unprovable)
        }
    }
}

/// One open handle's identity and the parameters that reopen it.
#[derive(Debug)]
pub(crate) struct OpenState {
    /// The server's handle; a reconnect swaps it for the reclaimed or reopened one.
    handle: Mutex<ServerHandle>,
    /// The tree the open belongs to.
    pub(crate) tree: TreeContext,
    pub(crate) params: OpenParams,
    /// The lease key the open was made with, if it asked for a lease.
    pub(crate) lease_key: Option<[u8; 16]>,
    /// The file as it was when first opened, to recognise it when opened again.
    pub(crate) identity: FileIdentity,
    /// Set when a reconnect could not reclaim the open: why.
    lost: Mutex<Option<HandleLossCause>>,
}

impl OpenState {
    pub(crate) fn new(
        handle: ServerHandle,
        tree: TreeContext,
        params: OpenParams,
        lease_key: Option<[u8; 16]>,
        identity: FileIdentity,
    ) -> OpenState {
        OpenState {
            handle: Mutex::new(handle),
            tree,
            params,
            lease_key,
            identity,
            lost: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ServerHandle> {
        self.handle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server's handle now.
    pub(crate) fn handle(&self) -> ServerHandle {
        *self.lock()
    }

    /// The FileId to put in the next request.
    pub(crate) fn file_id(&self) -> FileId {
        self.lock().file_id
    }

    /// Replace the FileId after the open was reclaimed on a new connection.
    pub(crate) fn replace_file_id(&self, new: FileId) -> FileId {
        std::mem::replace(&mut self.lock().file_id, new)
    }

    /// Replace the whole handle after the file was opened again by path.
    pub(crate) fn replace_handle(&self, new: ServerHandle) {
        *self.lock() = new;
    }

    /// The open could not be reclaimed: every later request on it fails with `cause`.
    pub(crate) fn mark_lost(&self, cause: HandleLossCause) {
        *self.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(cause);
    }

    /// Why the open was lost, if it was.
    pub(crate) fn lost(&self) -> Option<HandleLossCause> {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
