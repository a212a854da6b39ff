//! Leases (MS-SMB2 3.3.5.9.8, 3.3.4.7, 3.3.5.22.2): what a CREATE is granted, which leases
//! of other clients an operation breaks first, and their acknowledgments.
//!
//! The rules kept are those of MS-FSA 2.1.5.17 that clients notice: Write caching is one
//! client's alone and is broken when another opens the file; Handle caching is broken before
//! a sharing conflict is decided, and before the file is renamed or deleted by another;
//! Read caching is broken when another writes or overwrites. A break that drops Write or
//! Handle caching is acknowledged before the operation that caused it goes on (or its
//! timeout passes); a Read-only break is not waited for.

use bytes::{BufMut, BytesMut};
use smb3_proto::header::HEADER_LEN;
use smb3_proto::{Command, Header, HeaderFlags, NtStatus};

use super::Ctx;
use crate::files::NodeId;
use crate::reply::Outcome;
use crate::state::{caching, Lease, LeaseId, State};
use crate::wire::{Fields, Handled, Reply};

/// SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED.
const ACK_REQUIRED: u32 = 0x01;
/// MessageId of a notification the client did not ask for (MS-SMB2 3.3.4.7).
const UNSOLICITED: u64 = u64::MAX;

/// A lease request (RqLs) from a CREATE: v1 is 32 bytes, v2 52.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeaseRequest {
    pub(crate) key: [u8; 16],
    pub(crate) state: u32,
    pub(crate) v2: bool,
}

impl LeaseRequest {
    pub(crate) fn parse(data: &[u8]) -> Result<LeaseRequest, NtStatus> {
        if data.len() != 32 && data.len() != 52 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let mut key = [0u8; 16];
        key.copy_from_slice(&data[..16]);
        let state = u32::from_le_bytes(data[16..20].try_into().unwrap_or_default());
        Ok(LeaseRequest {
            key,
            state: state & (caching::READ | caching::HANDLE | caching::WRITE),
            v2: data.len() == 52,
        })
    }
}

/// The RqLs context of a CREATE reply: the key, the state granted and, for v2, the epoch.
pub(crate) fn reply_context(req: &LeaseRequest, state: u32, epoch: u16) -> BytesMut {
    let mut d = BytesMut::new();
    d.put_slice(&req.key);
    d.put_u32_le(state);
    d.put_u32_le(0); // Flags
    d.put_u64_le(0); // Duration
    if req.v2 {
        d.put_slice(&[0; 16]); // ParentLeaseKey
        d.put_u16_le(epoch);
        d.put_u16_le(0);
    }
    d
}

/// Grant `req` on `node` to a CREATE: what was asked, less Write caching when another
/// client's lease remains on the file. Returns the state and epoch to reply with.
pub(crate) fn grant(
    state: &mut State,
    id: LeaseId,
    share: &str,
    node: NodeId,
    req: &LeaseRequest,
    conn: u64,
) -> Result<(u32, u16), NtStatus> {
    if let Some(existing) = state.leases.get(&id) {
        // One key names one file (MS-SMB2 3.3.5.9.8).
        if existing.share != share || existing.node != node {
            return Err(NtStatus::INVALID_PARAMETER);
        }
    }
    // Handle and Write caching without Read caching are not leases a file gets.
    if req.state & caching::READ == 0 {
        return Ok((0, 0));
    }
    let shared_with_others = others_on(state, id, share, node).next().is_some();
    let mut granted = req.state;
    if shared_with_others {
        granted &= !caching::WRITE;
    }
    let lease = state.leases.entry(id).or_insert(Lease {
        share: share.to_string(),
        node,
        state: 0,
        epoch: 0,
        v2: req.v2,
        breaking_to: None,
        conn,
    });
    lease.conn = conn;
    if lease.breaking_to.is_none() && granted | lease.state != lease.state {
        lease.state |= granted;
        lease.epoch = lease.epoch.wrapping_add(1);
    }
    Ok((lease.state, lease.epoch))
}

/// The leases of other clients or keys on `node`.
fn others_on<'a>(
    state: &'a State,
    id: LeaseId,
    share: &'a str,
    node: NodeId,
) -> impl Iterator<Item = (&'a LeaseId, &'a Lease)> + 'a {
    state
        .leases
        .iter()
        .filter(move |(other, l)| **other != id && l.share == share && l.node == node)
}

/// Lower every other lease on `node` with `drop` (caching bits to remove); returns the
/// leases whose break must be acknowledged before going on.
pub(crate) fn break_others(
    state: &mut State,
    id: Option<LeaseId>,
    share: &str,
    node: NodeId,
    drop: impl Fn(&LeaseId, &Lease) -> u32,
) -> Vec<LeaseId> {
    let mine = id.unwrap_or(([0; 16], [0; 16]));
    let targets: Vec<(LeaseId, u32)> = others_on(state, mine, share, node)
        .filter(|(other, _)| Some(**other) != id)
        .filter_map(|(other, l)| {
            let to = l.state & !drop(other, l);
            (to != l.state && l.breaking_to.is_none()).then_some((*other, to))
        })
        .collect();
    let mut wait = Vec::new();
    for (other, to) in targets {
        let Some(lease) = state.leases.get_mut(&other) else {
            continue;
        };
        let ack = lease.state & (caching::WRITE | caching::HANDLE) != 0;
        let from = lease.state;
        lease.epoch = lease.epoch.wrapping_add(1);
        if ack {
            lease.breaking_to = Some(to);
            wait.push(other);
        } else {
            lease.state = to;
        }
        let frame = notification(lease, &other.1, from, to, ack);
        if let Some(outbox) = state.outboxes.get(&lease.conn) {
            let _ = outbox.send(Outcome::Send(frame));
        }
    }
    wait
}

/// LEASE_BREAK_NOTIFICATION (MS-SMB2 2.2.23.2), framed for the wire. Breaks are sent
/// unsigned, as MS-SMB2 3.3.4.7 has them (SessionId 0).
fn notification(lease: &Lease, key: &[u8; 16], from: u32, to: u32, ack: bool) -> Vec<u8> {
    let header = Header {
        credit_charge: 0,
        status: NtStatus::SUCCESS,
        command: Command::OPLOCK_BREAK,
        credits: 0,
        flags: HeaderFlags(HeaderFlags::SERVER_TO_REDIR),
        next_command: 0,
        message_id: UNSOLICITED,
        async_id: 0,
        tree_id: 0,
        session_id: 0,
        signature: [0; 16],
    };
    let mut msg = BytesMut::with_capacity(HEADER_LEN + 44);
    header.encode(&mut msg);
    msg.put_u16_le(44);
    msg.put_u16_le(if lease.v2 { lease.epoch } else { 0 });
    msg.put_u32_le(if ack { ACK_REQUIRED } else { 0 });
    msg.put_slice(key);
    msg.put_u32_le(from);
    msg.put_u32_le(to);
    msg.put_u32_le(0); // BreakReason
    msg.put_u32_le(0); // AccessMaskHint
    msg.put_u32_le(0); // ShareMaskHint
    let mut frame = Vec::with_capacity(4 + msg.len());
    frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    frame.extend_from_slice(&msg);
    frame
}

/// Whether every lease in `waiting` has acknowledged its break (or is gone).
pub(crate) fn all_acknowledged(state: &State, waiting: &[LeaseId]) -> bool {
    waiting
        .iter()
        .all(|id| state.leases.get(id).is_none_or(|l| l.breaking_to.is_none()))
}

/// A break not acknowledged in time takes effect anyway (MS-SMB2 3.3.2.5).
pub(crate) fn force(state: &mut State, waiting: &[LeaseId]) {
    for id in waiting {
        if let Some(l) = state.leases.get_mut(id) {
            if let Some(to) = l.breaking_to.take() {
                l.state = to;
            }
        }
    }
}

/// LEASE_BREAK_ACKNOWLEDGMENT (MS-SMB2 3.3.5.22.2).
pub(crate) fn acknowledge(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    match f.u16()? {
        36 => {}
        // An oplock break acknowledgment: no oplock is ever granted here.
        24 => return Err(NtStatus::INVALID_PARAMETER),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    f.skip(2 + 4)?;
    let key = f.array::<16>()?;
    let acked = f.u32()?;
    let client = ctx
        .negotiated
        .map(|n| n.client_guid)
        .ok_or(NtStatus::INVALID_PARAMETER)?;
    let lease = ctx
        .state
        .leases
        .get_mut(&(client, key))
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let Some(to) = lease.breaking_to else {
        return Err(NtStatus::UNSUCCESSFUL);
    };
    if acked & !to != 0 {
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    lease.state = acked;
    lease.breaking_to = None;
    let mut body = BytesMut::new();
    body.put_u16_le(36);
    body.put_u16_le(0);
    body.put_u32_le(0);
    body.put_slice(&key);
    body.put_u32_le(acked);
    body.put_u64_le(0);
    Ok(Reply::ok(body))
}
