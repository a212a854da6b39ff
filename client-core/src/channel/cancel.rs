//! SMB2 CANCEL for requests whose caller gave up (MS-SMB2 3.2.4.24).
//!
//! Every wait for a reply is wrapped in a [`CancelOnDrop`] guard. When the caller's future is
//! dropped (or its timeout fires) before the final reply, the guard asks the channel to cancel
//! the request:
//!
//! * already async (an interim STATUS_PENDING gave it an AsyncId): a CANCEL goes out at once,
//!   in the async form (SMB2_FLAGS_ASYNC_COMMAND + AsyncId);
//! * not yet: the wish is remembered in the pending entry and the reader sends the CANCEL when
//!   the interim arrives. A request the server answers without going async needs none.
//!
//! Either way exactly one CANCEL per request. It reuses the request's MessageId and takes no
//! credits and no new MessageId ("cancel requests MUST NOT consume a sequence number",
//! 3.2.4.24); it is signed when the request was (the AES-GMAC nonce marks it as a CANCEL,
//! 3.1.4.1) and sealed when the request was. The server answers the cancelled request, not the
//! CANCEL: its final reply (STATUS_CANCELLED, or the result if it finished first) is matched
//! as usual, returns its credits and is discarded. The guard's `Drop` only takes the state
//! lock and queues a frame for the writer task: it never blocks or awaits.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use smb3_proto::header::{Header, HeaderFlags, HEADER_LEN};
use smb3_proto::msg::cancel::CancelRequest;
use smb3_proto::msg::RequestBody;
use smb3_proto::Command;

use super::frame::frame_prefix;
use super::writer::OutFrame;
use super::{ChannelCrypto, Pending, Shared};
use crate::error::Result;

/// Where a pending request stands as far as cancelling goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) enum CancelState {
    /// The caller is waiting.
    #[default]
    None,
    /// The caller gave up before the interim reply: cancel once it arrives.
    Wanted,
    /// The CANCEL has been queued.
    Sent,
}

/// How the request to cancel was addressed: the CANCEL carries the same SessionId (and
/// TreeId in the sync form) and is protected the same way (MS-SMB2 3.2.4.24).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CancelAddress {
    pub(super) session_id: u64,
    pub(super) tree_id: u32,
    pub(super) sign: bool,
    pub(super) seal: bool,
}

/// Everything one CANCEL needs.
#[derive(Clone, Copy, Debug)]
pub(super) struct CancelTarget {
    pub(super) message_id: u64,
    /// The AsyncId from the interim reply; `None` sends the sync form (MessageId only).
    pub(super) async_id: Option<u64>,
    pub(super) address: CancelAddress,
}

/// Encode, sign or seal one CANCEL as a ready frame.
pub(super) fn cancel_frame(
    target: &CancelTarget,
    crypto: Option<&dyn ChannelCrypto>,
) -> Result<OutFrame> {
    let seal = target.address.seal && crypto.is_some();
    let sign = target.address.sign && !seal && crypto.is_some();
    let mut header = Header::request(Command::CANCEL);
    // No credits are charged or asked for: CANCEL has no reply to grant them and reuses the
    // MessageId of the request it names.
    header.credit_charge = 0;
    header.credits = 0;
    header.message_id = target.message_id;
    header.session_id = target.address.session_id;
    match target.async_id {
        Some(id) => {
            header.flags = HeaderFlags(HeaderFlags::ASYNC_COMMAND);
            header.async_id = id;
        }
        None => header.tree_id = target.address.tree_id,
    }
    if sign {
        header.flags.0 |= HeaderFlags::SIGNED;
    }
    let mut msg = BytesMut::with_capacity(HEADER_LEN + 4);
    header.encode(&mut msg);
    CancelRequest.encode_body(&mut msg);
    let head = match crypto {
        Some(c) if seal => c.seal(&[&msg])?.freeze(),
        Some(c) if sign => {
            c.sign(&mut msg, &[]);
            msg.freeze()
        }
        _ => msg.freeze(),
    };
    Ok(OutFrame {
        prefix: frame_prefix(head.len()),
        head,
        payload: Bytes::new(),
    })
}

impl Pending {
    /// Where a CANCEL for this request, sent as `message_id`, goes.
    pub(super) fn cancel_target(&self, message_id: u64) -> CancelTarget {
        CancelTarget {
            message_id,
            async_id: self.async_id,
            address: self.cancel_address,
        }
    }
}

impl Shared {
    /// The caller of `message_id` gave up: cancel the request now if it went async, or
    /// remember to once its interim reply arrives. Nothing to do once the final reply came or
    /// the channel died (the entry is gone), or when a CANCEL is already wanted or sent.
    pub(super) fn want_cancel(&self, message_id: u64) {
        let target = {
            let mut st = self.lock();
            let Some(p) = st.pending.get_mut(&message_id) else {
                return;
            };
            if p.cancel != CancelState::None {
                return;
            }
            if p.async_id.is_none() {
                p.cancel = CancelState::Wanted;
                return;
            }
            p.cancel = CancelState::Sent;
            p.cancel_target(message_id)
        };
        self.send_cancel(target);
    }

    /// Queue one CANCEL for the writer.
    pub(super) fn send_cancel(&self, target: CancelTarget) {
        let Some(queue) = self.queue.upgrade() else {
            return; // the channel is closing: the server drops its requests with it
        };
        match cancel_frame(&target, self.crypto().as_deref()) {
            Ok(frame) => {
                if queue.send(frame).is_ok() {
                    self.lock().cancels_sent += 1;
                    tracing::debug!(
                        peer = %self.peer,
                        message_id = target.message_id,
                        async_id = ?target.async_id,
                        "CANCEL sent"
                    );
                }
            }
            Err(e) => tracing::warn!(peer = %self.peer, error = %e, "CANCEL not sent"),
        }
    }
}

/// Held while a caller waits for replies; cancels the requests still unanswered when dropped.
pub(super) struct CancelOnDrop {
    shared: Arc<Shared>,
    message_ids: Vec<u64>,
}

impl CancelOnDrop {
    pub(super) fn new(shared: Arc<Shared>, message_ids: Vec<u64>) -> Self {
        CancelOnDrop {
            shared,
            message_ids,
        }
    }

    /// The caller has the outcome of `message_id`: nothing to cancel for it.
    pub(super) fn disarm(&mut self, message_id: u64) {
        self.message_ids.retain(|&id| id != message_id);
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        for &id in &self.message_ids {
            self.shared.want_cancel(id);
        }
    }
}
