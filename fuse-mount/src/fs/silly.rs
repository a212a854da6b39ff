//! Files unlinked, or replaced by a rename, while this mount holds them open, on a share
//! without the POSIX extensions.
//!
//! POSIX lets an open file outlive its name: its descriptors keep reading and `fstat`ing it,
//! and the name is free at once. SMB's delete (MS-FSCC 2.4.11 FileDispositionInformation)
//! only marks the file delete-pending: it goes with its last handle, and until then its name
//! is taken (a create gets STATUS_DELETE_PENDING) and no new open by path works. Samba also
//! refuses a rename over a file its own session holds open (ACCESS_DENIED).
//!
//! So, as NFS's silly rename (`.nfsXXXX`) and the Linux kernel's SMB1 client
//! (`cifs_rename_pending_delete`, `.cifsXXXX`) do, the file moves aside to a hidden name in
//! its directory, `.smbfuse` and 16 hex digits, which listings and lookups here do not show;
//! the name it had is free at once. The mount then opens it with FILE_DELETE_ON_CLOSE
//! (MS-SMB2 2.2.13 CreateOptions) and keeps that handle until the file's last handle here is
//! released: closing it then deletes the file (at unmount too). Should the daemon die first,
//! the file stays under its hidden name: Samba 4.17 drops the delete-on-close of a handle it
//! closes because the connection ended (seen with `kill -9` of the daemon), so it is left to
//! be removed by hand (`find -name '.smbfuse*'` on another client or the server). If the
//! delete-on-close open itself fails, the file is deleted by name after its last close.

use smb3_client::{File, IfExists, NtStatus, OpenOptions};

use super::SmbFs;
use crate::errno::FsResult;

/// A file moved aside to its hidden name, waiting for its last close here.
pub(super) struct Silly {
    /// Its directory's node and its hidden name there.
    parent: u64,
    name: String,
    /// Its share path.
    path: String,
    /// The delete-on-close handle whose close deletes it.
    doc: Option<File>,
}

/// The share path of `name` beside the share path `path`.
fn beside(path: &str, name: &str) -> String {
    match path.rfind('/') {
        Some(i) => format!("{}/{name}", &path[..i]),
        None => name.to_string(),
    }
}

impl Silly {
    /// Its share path.
    pub(super) fn path(&self) -> &str {
        &self.path
    }
}

impl SmbFs {
    /// Whether the node `ino` is open through this mount (a parked handle does not count:
    /// those are closed before a name is removed).
    pub(super) fn open_here(&self, ino: u64) -> bool {
        self.any_handle_of(ino).is_some()
    }

    /// Whether `ino` waits under a hidden name for its last close.
    pub(super) fn is_silly(&self, ino: u64) -> bool {
        self.sillies.lock().unwrap().contains_key(&ino)
    }

    /// Move `(parent, name)`, at share path `path`, aside to a hidden name in the same
    /// directory, on the server and in the inode table (the node keeps its id and handles).
    /// Returns the hidden name and its share path.
    pub(super) async fn move_aside(
        &self,
        parent: u64,
        name: &str,
        path: &str,
    ) -> FsResult<(String, String)> {
        let mut attempt = 0;
        loop {
            let hidden = crate::hidden_names::hidden_name();
            let hidden_path = beside(path, &hidden);
            match self.share.rename(path, &hidden_path, IfExists::Fail).await {
                Ok(()) => {
                    self.inodes
                        .lock()
                        .unwrap()
                        .renamed(parent, name, parent, &hidden);
                    return Ok((hidden, hidden_path));
                }
                Err(e) if e.status() == Some(NtStatus::OBJECT_NAME_COLLISION) && attempt < 3 => {
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Undo [`SmbFs::move_aside`]: the operation it made way for failed.
    pub(super) async fn put_back(&self, parent: u64, name: &str, path: &str, hidden: &str) {
        let hidden_path = beside(path, hidden);
        match self.share.rename(&hidden_path, path, IfExists::Fail).await {
            Ok(()) => self
                .inodes
                .lock()
                .unwrap()
                .renamed(parent, hidden, parent, name),
            Err(e) => {
                tracing::error!(path, hidden_path, error = %e, "could not give a file its name back");
            }
        }
    }

    /// The node `ino`, moved aside to `(parent, hidden)` at `path`, is gone for POSIX: open it
    /// delete-on-close and keep that handle until the node's last handle here is released
    /// (at once if that happened meanwhile).
    pub(super) async fn adopt(&self, ino: u64, parent: u64, hidden: String, path: String) {
        let opts = OpenOptions::new().read(true).delete_on_close();
        let doc = match self.share.open(&path, &opts).await {
            Ok(f) => Some(f),
            // A read-only file cannot be deleted: as POSIX lets the directory's writer remove
            // it, the attribute goes first.
            Err(e) if e.status() == Some(NtStatus::CANNOT_DELETE) => {
                let retried = match self.share.set_readonly(&path, false).await {
                    Ok(_) => self.share.open(&path, &opts).await,
                    Err(e) => Err(e),
                };
                retried
                    .inspect_err(|e| tracing::warn!(path, error = %e, "delete-on-close open"))
                    .ok()
            }
            Err(e) => {
                tracing::warn!(path, error = %e, "delete-on-close open of a file unlinked while open");
                None
            }
        };
        self.sillies.lock().unwrap().insert(
            ino,
            Silly {
                parent,
                name: hidden,
                path,
                doc,
            },
        );
        self.reap(ino).await;
    }

    /// A handle of `ino` left the table: if it was the last and the node waits under a hidden
    /// name, delete it now.
    pub(super) async fn reap(&self, ino: u64) {
        let silly = {
            let files = self.files.lock().unwrap();
            if files.values().any(|h| h.ino == ino) {
                return;
            }
            self.sillies.lock().unwrap().remove(&ino)
        };
        if let Some(silly) = silly {
            self.delete_silly(silly).await;
        }
    }

    async fn delete_silly(&self, silly: Silly) {
        self.inodes
            .lock()
            .unwrap()
            .unlinked(silly.parent, &silly.name);
        let closed = match silly.doc {
            Some(f) => f.close().await.map_err(|e| {
                tracing::debug!(path = silly.path, error = %e, "closing the delete-on-close handle");
            }),
            None => Err(()),
        };
        if closed.is_err() {
            if let Err(e) = self.share.remove_file(&silly.path).await {
                tracing::warn!(path = silly.path, error = %e, "a file unlinked while open stays under its hidden name");
            }
        }
    }

    /// At unmount, after every handle is closed: delete what waits under hidden names.
    pub(super) async fn delete_all_sillies(&self) {
        let all: Vec<Silly> = self
            .sillies
            .lock()
            .unwrap()
            .drain()
            .map(|(_, s)| s)
            .collect();
        for silly in all {
            self.delete_silly(silly).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_beside_another() {
        assert_eq!(beside("a/b/c", "h"), "a/b/h");
        assert_eq!(beside("c", "h"), "h");
    }
}
