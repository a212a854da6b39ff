//! A connected tree as shares, files and watches hold it: the engine, the tree's client-side
//! handle, and the handle chores all of them share (a CREATE whose caller may give up, a
//! CLOSE now or in the background, a handle held for one operation).

use std::sync::Arc;

use smb3_proto::msg::close::{CloseRequest, CloseResponse};
use smb3_proto::msg::create::{CreateRequest, CreateResponse};
use smb3_proto::msg::FileId;
use smb3_proto::{Command, NtStatus};

use crate::addressing::{OpenState, TreeContext};
use crate::channel::Response;
use crate::engine::{Call, SessionCore};
use crate::error::{decode, Error, Result};
use crate::orphans;
use crate::tasks::{self, TaskKind};

/// One connected tree. Listed in the session's addressing while anything holds it.
pub(crate) struct Tree {
    pub(crate) core: Arc<SessionCore>,
    pub(crate) name: String,
    pub(crate) context: TreeContext,
    /// The share speaks the SMB3 POSIX extensions: every open on it carries the POSIX create
    /// context. Decided once, by the probe right after TREE_CONNECT.
    pub(crate) posix: std::sync::atomic::AtomicBool,
    /// The share is in a DFS namespace (SMB2_SHARE_CAP_DFS, MS-SMB2 2.2.10): its paths may
    /// lie behind links (see `dfs`).
    pub(crate) dfs: bool,
}

impl Drop for Tree {
    fn drop(&mut self) {
        // No share or open uses the tree any more; a reconnect need not connect it again.
        self.core.addressing.trees.remove(self.context.handle);
    }
}

impl Tree {
    /// Whether opens on this tree are POSIX opens.
    pub(crate) fn is_posix(&self) -> bool {
        self.posix.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How the share compares names: exactly on a POSIX share, case-insensitively otherwise.
    pub(crate) fn names(&self) -> crate::lease::Names {
        if self.is_posix() {
            crate::lease::Names::CaseSensitive
        } else {
            crate::lease::Names::CaseInsensitive
        }
    }

    /// Make `req` a POSIX open when the tree speaks POSIX; `permissions` apply to a file the
    /// open creates. A POSIX open's path separator is `/` (see [`Tree::wire_name`]).
    pub(crate) fn posix_open(&self, req: &mut CreateRequest, permissions: u32) {
        if self.is_posix() {
            crate::posix::add_posix_context(req, permissions);
            req.name = self.wire_name(std::mem::take(&mut req.name));
        }
    }

    /// CreateOptions for an open that acts on a name itself (delete, rename, times, modes,
    /// listing a directory): on a POSIX share a symlink is opened as itself
    /// (FILE_OPEN_REPARSE_POINT), as unlink(2) and lchown(2) act on the link; elsewhere none.
    pub(crate) fn metadata_open_options(&self) -> u32 {
        if self.is_posix() {
            smb3_proto::msg::create::CreateOptions::OPEN_REPARSE_POINT
        } else {
            0
        }
    }

    /// A share-relative wire path (backslashes, from `names::wire_path`) as this tree's
    /// server reads it in a CREATE or a rename or link target: unchanged, or on a POSIX
    /// share with `/` for separators, since a POSIX open takes `\` as part of a name
    /// (Samba's `check_path_syntax` with POSIX paths: `dir\f` would be one file in the root).
    pub(crate) fn wire_name(&self, wire: String) -> String {
        if self.is_posix() {
            wire.replace('\\', "/")
        } else {
            wire
        }
    }

    /// How a request on this tree is sent.
    pub(crate) fn call<'a>(&self) -> Call<'a> {
        Call::tree(self.context)
    }

    /// Send a CREATE and decode its reply. The caller owns the handle from then on; should it
    /// give up before the reply, a handle the server opened anyway is closed (see `orphans`).
    pub(crate) async fn create(
        self: &Arc<Self>,
        req: &CreateRequest,
        path: &str,
    ) -> Result<CreateResponse> {
        // Weak: a pending request must not keep its session alive; once the tree is gone,
        // the handle goes with the tree or the session.
        let tree = Arc::downgrade(self);
        let closer = orphans::close_abandoned_open(Arc::new(move |file_id| {
            if let Some(tree) = tree.upgrade() {
                tree.close_orphan(file_id);
            }
        }));
        let resp = self
            .core
            .send(req, self.call().on_abandoned(closer))
            .await
            .map_err(|e| e.with_path(path))?;
        decode(Command::CREATE, CreateResponse::decode(&resp.msg))
    }

    /// [`Tree::create`] for an open that acts on the name itself (see
    /// [`Tree::metadata_open_options`]): where a share without the POSIX extensions refuses
    /// to open a symbolic link or another reparse point it leaves to the client
    /// ([`leaves_reparse_point_to_client`]), opened again as itself (FILE_OPEN_REPARSE_POINT),
    /// as Windows opens a link to delete, rename or stat it. Not asked for at first: a
    /// reparse point the server follows itself (a junction on Windows, a symlink on Samba's
    /// disk) stays followed, and other names cost nothing more.
    pub(crate) async fn create_name_op(
        self: &Arc<Self>,
        req: &CreateRequest,
        path: &str,
    ) -> Result<CreateResponse> {
        use smb3_proto::msg::create::CreateOptions;
        match self.create(req, path).await {
            Err(e)
                if leaves_reparse_point_to_client(&e)
                    && req.create_options.0 & CreateOptions::OPEN_REPARSE_POINT == 0 =>
            {
                let mut itself = req.clone();
                itself.create_options =
                    CreateOptions(req.create_options.0 | CreateOptions::OPEN_REPARSE_POINT);
                self.create(&itself, path).await
            }
            other => other,
        }
    }

    /// Close a handle.
    pub(crate) async fn close(&self, file_id: FileId) -> Result<()> {
        let call = self.call().allowing(&[NtStatus::FILE_CLOSED]);
        let resp = self.core.send(&CloseRequest::new(file_id), call).await?;
        closed(resp)
    }

    /// Close a handle in the background, for owners that cannot wait (a `Drop`). Without a
    /// runtime (process exit) nothing is sent: the server drops the handle with the
    /// connection. Returns whether the CLOSE was scheduled.
    pub(crate) fn close_later(self: &Arc<Self>, file_id: FileId) -> bool {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let tree = self.clone();
        let busy = self.core.background.start();
        tasks::spawn_on(&rt, TaskKind::BackgroundClose, async move {
            let _busy = busy;
            if let Err(e) = tree.close(file_id).await {
                // The server drops the handle with the session anyway.
                tracing::debug!(error = %e, ?file_id, "closing a handle in the background failed");
            }
        });
        true
    }

    /// Close, in the background, a handle whose owner gave up on it, and count it.
    pub(crate) fn close_orphan(self: &Arc<Self>, file_id: FileId) {
        tracing::debug!(?file_id, "closing a handle its caller gave up on");
        if self.close_later(file_id) {
            self.core.orphans.add();
        }
    }

    /// Close an open made by `Share::open`, at its FileId of now.
    pub(crate) async fn close_open(&self, open: &Arc<OpenState>) -> Result<()> {
        let body = CloseRequest::new(open.file_id());
        let call = Call::open(open).allowing(&[NtStatus::FILE_CLOSED]);
        let resp = self.core.send(&body, call).await?;
        closed(resp)
    }
}

/// The reply to a CLOSE sent allowing FILE_CLOSED. A replayed CLOSE that finds the handle
/// closed means the first copy closed it and only its reply was lost with the channel: that is
/// a close. Anything else is the caller's double close.
fn closed(resp: Response) -> Result<()> {
    if resp.header.status == NtStatus::FILE_CLOSED {
        return if resp.resent {
            Ok(())
        } else {
            resp.check(&[]).map(drop)
        };
    }
    decode(Command::CLOSE, CloseResponse::decode(&resp.msg)).map(|_| ())
}

/// A handle opened for one operation (listing, delete, rename, `fs_info`, `create_dir`). Call
/// [`ScopedHandle::close`] when done; if the operation's future is dropped first, the handle
/// is closed in the background and counted among the abandoned.
pub(crate) struct ScopedHandle<'a> {
    tree: &'a Arc<Tree>,
    id: FileId,
    closed: bool,
}

impl<'a> ScopedHandle<'a> {
    pub(crate) fn new(tree: &'a Arc<Tree>, id: FileId) -> Self {
        ScopedHandle {
            tree,
            id,
            closed: false,
        }
    }

    pub(crate) fn id(&self) -> FileId {
        self.id
    }

    /// Close the handle and wait for the reply. Dropped before that reply, the guard sends
    /// another CLOSE; a second CLOSE of a closed handle only earns STATUS_FILE_CLOSED.
    pub(crate) async fn close(mut self) -> Result<()> {
        let closed = self.tree.close(self.id).await;
        self.closed = true;
        closed
    }

    /// Let the handle go without a CLOSE: it is known to be gone at the server already.
    pub(crate) fn forget(mut self) {
        self.closed = true;
    }
}

impl Drop for ScopedHandle<'_> {
    fn drop(&mut self) {
        if !self.closed {
            self.tree.close_orphan(self.id);
        }
    }
}

/// STATUS_IO_REPARSE_TAG_NOT_HANDLED (MS-ERREF 2.3.1): an open without FILE_OPEN_REPARSE_POINT
/// reached a reparse point whose tag the server does not act on (Samba 4.21 and later: an NFS
/// special file, smb2_create.c; Windows: any tag no filter claims).
pub(crate) const IO_REPARSE_TAG_NOT_HANDLED: NtStatus = NtStatus(0xC000_0279);

/// Whether a CREATE failed because its last name is a reparse point the server leaves to the
/// client: a symbolic link (STOPPED_ON_SYMLINK, MS-SMB2 2.2.2.2.1, which Windows and Samba
/// 4.21 and later send for a link made by FSCTL_SET_REPARSE_POINT) or a tag it does not
/// handle. FILE_OPEN_REPARSE_POINT opens the file itself.
pub(crate) fn leaves_reparse_point_to_client(e: &Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::STOPPED_ON_SYMLINK | IO_REPARSE_TAG_NOT_HANDLED)
    )
}
