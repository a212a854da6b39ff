//! Handles nobody will close: opens whose caller gave up before the CREATE reply came, and
//! handles opened for one operation whose future was dropped half-way.
//!
//! A dropped future cannot unsend its CREATE. When the server carries it out anyway (the
//! caller timed out, left a `select!`, or a CANCEL lost the race with the open), the handle
//! would stay open at the server until the session ends, holding its share modes and, for
//! [`Share::open`](crate::Share::open), a lease and a durable handle that make every other
//! client's open of the file wait for a break. So:
//!
//! * every CREATE whose handle the caller is to close carries an `on_abandoned` hook (see
//!   [`close_abandoned_open`]): the channel hands it the reply nobody waits for, and a
//!   successful one is closed in the background;
//! * a handle opened for one operation (listing, delete, rename, `fs_info`, `create_dir`) is
//!   held in a [`ScopedHandle`], which closes it in the background if the operation's future
//!   is dropped before it closed the handle itself.
//!
//! [`Client::abandoned_handles_closed`] counts both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use smb3_proto::msg::create::CreateResponse;
use smb3_proto::msg::FileId;
use smb3_proto::NtStatus;

use crate::channel::{OnAbandoned, Response};
use crate::error::Result;
use crate::share::{Share, ShareInner};

/// How many handles the session closed because nobody else would.
#[derive(Debug, Default)]
pub(crate) struct OrphanCount(AtomicU64);

impl OrphanCount {
    fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// How many so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The `on_abandoned` hook of a CREATE on `share`: when its reply arrives after the caller
/// gave up and the open succeeded, close the handle. Holds the share only weakly (a pending
/// request must not keep its session alive); once the share is gone, the handle goes with
/// the tree or the session.
pub(crate) fn close_abandoned_open(share: Weak<ShareInner>) -> OnAbandoned {
    Arc::new(move |reply: Response| {
        if reply.header.status != NtStatus::SUCCESS {
            return; // nothing was opened (STATUS_CANCELLED, a refusal)
        }
        let Ok(created) = CreateResponse::decode(&reply.msg) else {
            tracing::warn!("abandoned CREATE reply not understood; its handle stays open");
            return;
        };
        let Some(inner) = share.upgrade() else {
            return;
        };
        tracing::debug!(
            file_id = ?created.file_id,
            "closing a handle whose open the caller gave up on"
        );
        close_in_background(&Share { inner }, created.file_id);
    })
}

/// Close `file_id` in the background and count it.
fn close_in_background(share: &Share, file_id: FileId) {
    if share.close_later(file_id) {
        share.inner.client.inner.orphans.add();
    }
}

/// A handle opened for one operation. Call [`ScopedHandle::close`] when done; if the
/// operation's future is dropped first, the handle is closed in the background.
pub(crate) struct ScopedHandle<'a> {
    share: &'a Share,
    id: FileId,
    closed: bool,
}

impl<'a> ScopedHandle<'a> {
    pub(crate) fn new(share: &'a Share, id: FileId) -> Self {
        ScopedHandle {
            share,
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
        let closed = self.share.close(self.id).await;
        self.closed = true;
        closed
    }
}

impl Drop for ScopedHandle<'_> {
    fn drop(&mut self) {
        if !self.closed {
            close_in_background(self.share, self.id);
        }
    }
}
