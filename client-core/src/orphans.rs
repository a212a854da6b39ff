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
//!   held in a `tree::ScopedHandle`, which closes it in the background if the operation's
//!   future is dropped before it closed the handle itself.
//!
//! `Client::abandoned_handles_closed` counts both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use smb3_proto::msg::create::CreateResponse;
use smb3_proto::msg::FileId;
use smb3_proto::NtStatus;

use crate::channel::{OnAbandoned, Response};

/// How many handles the session closed because nobody else would.
#[derive(Debug, Default)]
pub(crate) struct OrphanCount(AtomicU64);

impl OrphanCount {
    pub(crate) fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// How many so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The `on_abandoned` hook of a CREATE: when its reply arrives after the caller gave up and
/// the open succeeded, hand the new handle to `close` (which closes it in the background).
pub(crate) fn close_abandoned_open(close: Arc<dyn Fn(FileId) + Send + Sync>) -> OnAbandoned {
    Arc::new(move |reply: Response| {
        if reply.header.status != NtStatus::SUCCESS {
            return; // nothing was opened (STATUS_CANCELLED, a refusal)
        }
        let Ok(created) = CreateResponse::decode(&reply.msg) else {
            tracing::warn!("abandoned CREATE reply not understood; its handle stays open");
            return;
        };
        close(created.file_id);
    })
}
