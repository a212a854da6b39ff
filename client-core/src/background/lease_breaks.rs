//! The task that acknowledges lease and oplock breaks for every channel of the session, at
//! once (MS-SMB2 3.2.5.19): the server waits for each acknowledgment before it lets the
//! other client's open go on.

use std::sync::{Arc, Weak};

use bytes::Bytes;
use smb3_proto::msg::oplock_break::{
    BreakAckResponse, BreakNotification, LeaseBreakAck, OplockBreakAck,
};
use smb3_proto::Command;

use crate::addressing::TreeContext;
use crate::engine::{Call, SessionCore};
use crate::error::decode;
use crate::lease::{BreakQueue, LeaseCaching, LeaseTable};
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
async fn run_break_handler<S, F>(session: Weak<S>, mut queue: BreakQueue, mut on_message: F)
where
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::tests::{tree, RH, RWH};
    use crate::lease::{break_queue, LeaseKey};
    use bytes::{BufMut, BytesMut};
    use smb3_proto::header::{Header, HeaderFlags};
    use smb3_proto::msg::create::LeaseState;
    use smb3_proto::msg::oplock_break::{OplockLevel, LEASE_BREAK_FLAG_ACK_REQUIRED};
    use smb3_proto::msg::FileId;
    use std::time::Duration;
    use tokio::sync::mpsc;

    fn notification(body: &[u8]) -> Bytes {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::OPLOCK_BREAK);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.message_id = u64::MAX;
        h.encode(&mut msg);
        msg.put_slice(body);
        msg.freeze()
    }

    fn lease_break(key: LeaseKey, flags: u32, from: u32, to: u32, epoch: u16) -> Bytes {
        let mut b = BytesMut::new();
        b.put_u16_le(44);
        b.put_u16_le(epoch);
        b.put_u32_le(flags);
        b.put_slice(&key);
        b.put_u32_le(from);
        b.put_u32_le(to);
        b.put_bytes(0, 12);
        notification(&b)
    }

    /// What an ack is, comparable: the lease ack or the oplock ack, and its TreeId.
    #[derive(Debug, PartialEq)]
    enum Planned {
        Lease(LeaseBreakAck, Option<u32>),
        Oplock(OplockBreakAck, Option<u32>),
    }

    fn plan(table: &LeaseTable, msg: &Bytes) -> Option<Planned> {
        plan_ack(table, msg).map(|a| match a {
            Ack::Lease { ack, tree } => Planned::Lease(ack, tree.map(|t| t.handle)),
            Ack::Oplock { ack, tree } => Planned::Oplock(ack, tree.map(|t| t.handle)),
        })
    }

    #[test]
    fn lease_break_is_acknowledged_with_the_new_state_on_the_key_tree() {
        let table = Arc::new(LeaseTable::default());
        let a = table.acquire(tree(4), "f");
        let _b = table.acquire(tree(5), "g");
        a.record_grant(LeaseState(RWH), Some(1));
        let msg = lease_break(a.key(), LEASE_BREAK_FLAG_ACK_REQUIRED, RWH, RH, 2);
        let Some(Ack::Lease { ack, tree: Some(t) }) = plan_ack(&table, &msg) else {
            panic!("expected a lease ack with a tree");
        };
        assert_eq!(
            ack,
            LeaseBreakAck {
                lease_key: a.key(),
                lease_state: LeaseState(RH),
            }
        );
        assert_eq!((t.handle, t.encrypt), (4, true), "the key's own tree");
        assert_eq!(a.state(), Some(LeaseState(RH)));

        // No acknowledgment asked (R to none): none sent, state still recorded.
        let msg = lease_break(a.key(), 0, LeaseState::READ_CACHING, 0, 3);
        assert_eq!(plan(&table, &msg), None);
        assert_eq!(a.state(), Some(LeaseState(0)));
    }

    /// A break is unsigned, so a man in the middle can send one: it must never raise what
    /// the client believes it may cache.
    #[test]
    fn a_forged_break_can_lower_caching_but_never_raise_it() {
        let table = Arc::new(LeaseTable::default());
        let a = table.acquire(tree(4), "f");
        a.record_grant(LeaseState(LeaseState::READ_CACHING), Some(1));
        // "From R to RWH": the client keeps R and acknowledges only R.
        let msg = lease_break(a.key(), LEASE_BREAK_FLAG_ACK_REQUIRED, RWH, RWH, 2);
        let Some(Ack::Lease { ack, .. }) = plan_ack(&table, &msg) else {
            panic!("expected a lease ack");
        };
        assert_eq!(ack.lease_state, LeaseState(LeaseState::READ_CACHING));
        assert_eq!(a.state(), Some(LeaseState(LeaseState::READ_CACHING)));
        // A file whose open was granted no lease gets none from a break.
        let b = table.acquire(tree(4), "g");
        let msg = lease_break(b.key(), LEASE_BREAK_FLAG_ACK_REQUIRED, RWH, RH, 2);
        let Some(Ack::Lease { ack, .. }) = plan_ack(&table, &msg) else {
            panic!("expected a lease ack");
        };
        assert_eq!(ack.lease_state, LeaseState(0));
        assert_eq!(b.state(), None);
    }

    #[test]
    fn unknown_keys_are_acknowledged_on_the_latest_tree() {
        let table = Arc::new(LeaseTable::default());
        let msg = lease_break([7; 16], LEASE_BREAK_FLAG_ACK_REQUIRED, RWH, RH, 2);
        let Some(Ack::Lease { ack, tree: None }) = plan_ack(&table, &msg) else {
            panic!("expected an ack without a tree");
        };
        assert_eq!(ack.lease_key, [7; 16]);
        drop(table.acquire(tree(6), "x"));
        assert_eq!(table.len(), 0);
        assert_eq!(
            plan(&table, &msg),
            Some(Planned::Lease(
                LeaseBreakAck {
                    lease_key: [7; 16],
                    lease_state: LeaseState(RH),
                },
                Some(6)
            ))
        );
    }

    #[test]
    fn oplock_breaks_are_acknowledged_and_garbage_is_dropped() {
        let table = Arc::new(LeaseTable::default());
        let mut b = BytesMut::new();
        b.put_u16_le(24);
        b.put_u8(OplockLevel::II.0);
        b.put_bytes(0, 5);
        b.put_u64_le(0x11);
        b.put_u64_le(0x22);
        let file_id = FileId {
            persistent: 0x11,
            volatile: 0x22,
        };
        assert_eq!(
            plan(&table, &notification(&b)),
            Some(Planned::Oplock(
                OplockBreakAck {
                    oplock_level: OplockLevel::II,
                    file_id,
                },
                None
            ))
        );
        for bad in [&b[..10], &[0x2c, 0, 1, 0][..], &[][..], &[0x30, 0][..]] {
            assert!(plan(&table, &notification(bad)).is_none());
        }
    }

    #[tokio::test]
    async fn handler_stops_with_the_session_and_does_not_keep_it() {
        let session = Arc::new(7u32);
        let (sink, queue) = break_queue();
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let handler = tokio::spawn(run_break_handler(
            Arc::downgrade(&session),
            queue,
            move |s: Arc<u32>, msg: Bytes| {
                let _ = seen_tx.send((*s, msg.len()));
            },
        ));
        sink.send(Bytes::from_static(b"abc")).unwrap();
        assert_eq!(seen.recv().await, Some((7, 3)));
        assert_eq!(
            Arc::strong_count(&session),
            1,
            "the handler holds it weakly"
        );

        // The session goes: the next message ends the handler without being handled.
        drop(session);
        sink.send(Bytes::from_static(b"late")).unwrap();
        tokio::time::timeout(Duration::from_secs(5), handler)
            .await
            .expect("handler ended")
            .unwrap();
        assert_eq!(seen.recv().await, None);

        // And with every sender gone it ends even without a message.
        let session = Arc::new(1u32);
        let (sink, queue) = break_queue();
        let handler = tokio::spawn(run_break_handler(
            Arc::downgrade(&session),
            queue,
            |_, _| {},
        ));
        drop(sink);
        tokio::time::timeout(Duration::from_secs(5), handler)
            .await
            .expect("handler ended")
            .unwrap();
    }
}
