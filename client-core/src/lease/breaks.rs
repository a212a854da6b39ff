//! The task that acknowledges lease and oplock breaks for every channel of the session, at
//! once (MS-SMB2 3.2.5.19): the server waits for each acknowledgment before it lets the
//! other client's open go on.

use std::sync::{Arc, Weak};

use bytes::Bytes;
use smb3_proto::msg::oplock_break::{
    BreakAckResponse, BreakNotification, LeaseBreakAck, OplockBreakAck,
};
use smb3_proto::Command;

use super::{BreakQueue, LeaseCaching, LeaseTable};
use crate::addressing::TreeContext;
use crate::engine::{Call, SessionCore};
use crate::error::decode;
use crate::tasks::{self, TaskKind};

/// Start the task that acknowledges breaks. It holds the session only weakly and ends when
/// the session is gone (every sender of the queue dropped, or the session no longer there
/// when a message arrives).
pub(crate) fn spawn_break_handler(session: Weak<SessionCore>, queue: BreakQueue) {
    let handler = run_break_handler(session, queue, |core, msg| {
        if let Some(ack) = plan_ack(&core.leases, &msg) {
            // Each acknowledgment on its own task: a slow reply must not hold up the breaks
            // behind it (the server waits on each one, up to 35 s in Samba).
            tasks::spawn(
                TaskKind::BreakAck,
                async move { send_ack(&core, ack).await },
            );
        }
    });
    tasks::spawn(TaskKind::BreakHandler, handler);
}

/// The handler's loop: hand each message to `on_message` with the session, while there is
/// one.
pub(super) async fn run_break_handler<S, F>(
    session: Weak<S>,
    mut queue: BreakQueue,
    mut on_message: F,
) where
    F: FnMut(Arc<S>, Bytes),
{
    while let Some(msg) = queue.recv().await {
        let Some(core) = session.upgrade() else {
            break;
        };
        on_message(core, msg);
    }
    tracing::debug!("break handler stopped: session ended");
}

/// An acknowledgment to send, and the tree to send it on.
#[derive(Debug)]
pub(crate) enum Ack {
    Lease {
        ack: LeaseBreakAck,
        tree: Option<TreeContext>,
    },
    Oplock {
        ack: OplockBreakAck,
        tree: Option<TreeContext>,
    },
}

/// Decide what one unsolicited message asks of us, and record a lease's new state.
///
/// A lease break (MS-SMB2 3.2.5.19.2) that requires an acknowledgment is answered at once
/// with the new state: nothing is cached, so there is nothing to flush first. A key we do not
/// know (its last open just closed) is acknowledged anyway if asked, so the server does not
/// wait on us. Oplocks are never requested, but an oplock break (3.2.5.19.1) is acknowledged
/// at the level offered, just in case. Malformed messages are logged and dropped.
pub(crate) fn plan_ack(table: &LeaseTable, msg: &Bytes) -> Option<Ack> {
    let notification = match BreakNotification::decode(msg) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, len = msg.len(), "malformed break notification dropped");
            return None;
        }
    };
    match notification {
        BreakNotification::Lease(n) => {
            // Never more than held: the notification may be forged (see `record_break`).
            let kept = table.record_break(&n.lease_key, n.new_lease_state, Some(n.new_epoch));
            if !table.is_known(&n.lease_key) {
                tracing::debug!(key = ?n.lease_key, "lease break for a key we do not hold");
            }
            tracing::debug!(
                from = %LeaseCaching::from_state(n.current_lease_state),
                to = %LeaseCaching::from_state(n.new_lease_state),
                ack = n.ack_required(),
                "lease break"
            );
            n.ack_required().then(|| Ack::Lease {
                ack: LeaseBreakAck {
                    lease_key: n.lease_key,
                    lease_state: if table.is_known(&n.lease_key) {
                        kept
                    } else {
                        n.new_lease_state
                    },
                },
                tree: table.tree_for(&n.lease_key),
            })
        }
        BreakNotification::Oplock(n) => {
            tracing::debug!(level = ?n.oplock_level, file = ?n.file_id, "oplock break");
            Some(Ack::Oplock {
                ack: OplockBreakAck {
                    oplock_level: n.oplock_level,
                    file_id: n.file_id,
                },
                tree: table.last_tree(),
            })
        }
    }
}

/// An acknowledgment goes to the tree of the file whose lease broke, when it is known.
fn acked_on<'a>(tree: Option<TreeContext>) -> Call<'a> {
    tree.map_or_else(Call::session, Call::tree)
}

/// Send one acknowledgment through the session's normal request path (any channel) and
/// record the state the server confirms. Failures are only logged: the server ends the
/// break by itself when its timeout passes.
async fn send_ack(core: &SessionCore, ack: Ack) {
    let reply = match &ack {
        Ack::Lease { ack, tree } => core.send(ack, acked_on(*tree)).await,
        Ack::Oplock { ack, tree } => core.send(ack, acked_on(*tree)).await,
    };
    let reply = match reply {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, ?ack, "break acknowledgment failed");
            return;
        }
    };
    match decode(Command::OPLOCK_BREAK, BreakAckResponse::decode(&reply.msg)) {
        Ok(BreakAckResponse::Lease(r)) => {
            core.leases.record_state(&r.lease_key, r.lease_state, None);
        }
        Ok(BreakAckResponse::Oplock(_)) => {}
        Err(e) => tracing::debug!(error = %e, "break acknowledgment reply not understood"),
    }
}
