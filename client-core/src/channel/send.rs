//! The send path, one step per function. [`Channel::call`] sends one request and
//! [`Channel::call_compound`] several in one frame; both go the same way:
//!
//! 1. [`take_credits`]: wait until the channel holds enough credits, then reserve them with
//!    their MessageIds and enter each request in the pending table, where the reader task will
//!    match its reply;
//! 2. [`stamp_headers`]: write MessageId, credits, ids and flags into each header placeholder;
//! 3. [`seal_or_sign`]: lay the messages out as one frame (a compound when there are several),
//!    signed message by message or sealed as a whole;
//! 4. [`keep_sent`]: when asked, keep the bytes as sent in the pending entries;
//! 5. [`Channel::queue`]: hand the frame to the writer task;
//! 6. [`await_reply`]: wait for the reply the reader task delivers, within the request's time;
//! 7. [`settle`]: with an outcome in hand, the request needs no CANCEL (unless it timed out).
//!
//! Steps 1 to 5 never await once the credits are reserved: a MessageId handed out is always
//! sent, since the server's sequence window cannot move past one it never receives. The state
//! lock is taken once to reserve, and once more only for a request that keeps its bytes.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use smb3_proto::header::{Header, HeaderFlags, HEADER_LEN};
use smb3_proto::msg::compound::{build_compound, CompoundMember};
use smb3_proto::Command;
use tokio::sync::oneshot;
// Deadlines are on tokio's clock, so that tests with a paused clock can run them out.
use tokio::time::Instant;

use super::cancel::{CancelAddress, CancelOnDrop, CancelState};
use super::credits::Reservation;
use super::frame::{frame_prefix, MAX_FRAME};
use super::request::{Request, Response};
use super::writer::OutFrame;
use super::{Channel, ChannelCrypto, Pending, Shared, State};
use crate::error::{ConnectionLossCause, Error, ProtocolError, Result};

/// A request on its way: its MessageId and where its reply will arrive.
type Sent = (u64, oneshot::Receiver<Result<Response>>);

/// How a frame is protected. A compound is sealed as a whole when any member asks for it.
#[derive(Clone, Copy)]
struct Sealing {
    /// Some request asked to be encrypted: a CANCEL for any of them is sealed too.
    asked: bool,
    /// Asked, and the channel has keys: the frame goes out sealed, and every reply to it must
    /// come back sealed.
    sealed: bool,
}

impl Sealing {
    fn choose(reqs: &[Request], shared: &Shared) -> Sealing {
        // A server that accepted transport-level security gets nothing sealed on top of
        // TLS (MS-SMB2 2.2.4.1.5): the messages are signed instead (see `stamp_headers`).
        let asked = reqs.iter().any(|r| r.encrypt) && !shared.sealing_left_to_tls();
        Sealing {
            asked,
            sealed: asked && shared.crypto().is_some(),
        }
    }
}

/// One message with its header stamped, and whether it is to be signed on its own.
struct Stamped {
    msg: BytesMut,
    payload: Bytes,
    sign: bool,
}

impl Channel {
    /// Send `req` and wait for its final reply (interim STATUS_PENDING replies are absorbed).
    /// Dropping the future, or the request timing out, cancels the request (see [`super::cancel`]).
    pub(crate) async fn call(&self, req: Request) -> Result<Response> {
        let timeout = req.timeout;
        let command = req.command;
        let sent = self.send(vec![req], false).await?;
        // No await between the send and the guard: a drop from here on cancels.
        let mut guard = self.cancel_guard(&sent);
        let (message_id, rx) = sent.into_iter().next().expect("one receiver per request");
        let deadline = deadline(Instant::now(), timeout);
        let result = await_reply(&self.inner.shared, rx, command, deadline, timeout).await;
        settle(&mut guard, message_id, &result);
        result
    }

    /// Send `reqs` as one compound frame (MS-SMB2 3.2.4.1.4) and wait for every reply. With
    /// `related`, members after the first inherit the previous member's FileId, SessionId and
    /// TreeId (SMB2_FLAGS_RELATED_OPERATIONS).
    pub(crate) async fn call_compound(
        &self,
        reqs: Vec<Request>,
        related: bool,
    ) -> Result<Vec<Result<Response>>> {
        let meta: Vec<(Command, Duration)> = reqs.iter().map(|r| (r.command, r.timeout)).collect();
        let sent = self.send(reqs, related).await?;
        let mut guard = self.cancel_guard(&sent);
        let mut out = Vec::with_capacity(sent.len());
        // Every member's timeout counts from the send: the replies come together, and
        // waiting for each in turn with a fresh timeout would make a silent server's
        // three-member compound take three timeouts to fail.
        let sent_at = Instant::now();
        for ((message_id, rx), (command, timeout)) in sent.into_iter().zip(meta) {
            let result = await_reply(
                &self.inner.shared,
                rx,
                command,
                deadline(sent_at, timeout),
                timeout,
            )
            .await;
            settle(&mut guard, message_id, &result);
            out.push(result);
        }
        Ok(out)
    }

    fn cancel_guard(&self, sent: &[Sent]) -> CancelOnDrop {
        CancelOnDrop::new(
            self.inner.shared.clone(),
            sent.iter().map(|(id, _)| *id).collect(),
        )
    }

    /// Send `reqs` as one frame (several make a compound). Returns each request's MessageId
    /// and the receiver of its reply, in request order.
    async fn send(&self, mut reqs: Vec<Request>, related: bool) -> Result<Vec<Sent>> {
        let shared = &self.inner.shared;
        let sealing = Sealing::choose(&reqs, shared);
        let (reservations, receivers) = take_credits(shared, &reqs, sealing).await?;
        // From here to the queue there is no await: every reserved MessageId is sent.
        let crypto = shared.crypto();
        let stamped = stamp_headers(&mut reqs, &reservations, sealing.sealed, crypto.is_some());
        let frame = seal_or_sign(shared, crypto.as_deref(), stamped, sealing.sealed, related)?;
        if reqs.iter().any(|r| r.keep_sent) {
            keep_sent(shared, &reservations, &frame);
        }
        self.queue(frame, &reqs)?;
        Ok(receivers)
    }

    /// Hand `frame`, which carries `reqs`, to the writer task. A frame the transport cannot
    /// carry closes the channel: its MessageIds are reserved and would never be answered.
    fn queue(&self, frame: OutFrame, reqs: &[Request]) -> Result<()> {
        let shared = &self.inner.shared;
        if frame.head.len() + frame.payload.len() > MAX_FRAME {
            shared.fail(ConnectionLossCause::OversizedRequest);
            return Err(Error::ApiMisuse(
                "request exceeds the 16 MiB transport frame",
            ));
        }
        if self.inner.queue.send(frame).is_err() {
            return Err(Error::ConnectionLost {
                command: reqs[0].command,
                cause: shared.death(),
            });
        }
        Ok(())
    }
}

/// Wait until the channel holds the credits `reqs` are charged, then reserve them with their
/// MessageIds and enter each request in the pending table ([`register`]).
async fn take_credits(
    shared: &Shared,
    reqs: &[Request],
    sealing: Sealing,
) -> Result<(Vec<Reservation>, Vec<Sent>)> {
    let needed: u32 = reqs.iter().map(|r| u32::from(r.credit_charge.max(1))).sum();
    let mut receivers = Vec::with_capacity(reqs.len());
    loop {
        // Listen before looking, so a grant between the look and the wait is not missed.
        let granted = shared.credit_granted.notified();
        tokio::pin!(granted);
        granted.as_mut().enable();
        {
            let mut st = shared.lock();
            if credits_ready(&st, reqs, needed)? {
                let reservations = register(&mut st, reqs, sealing, &mut receivers);
                return Ok((reservations, receivers));
            }
        }
        granted.await;
    }
}

/// Whether `needed` credits are available now. Fails when the channel is dead, and when
/// waiting could never give them: nothing is in flight whose reply could bring more.
fn credits_ready(st: &State, reqs: &[Request], needed: u32) -> Result<bool> {
    if let Some(cause) = &st.dead {
        return Err(Error::ConnectionLost {
            command: reqs[0].command,
            cause: cause.clone(),
        });
    }
    if needed > st.credits.total() && st.credits.in_flight() == 0 {
        return Err(ProtocolError::TooFewCredits {
            needed,
            held: st.credits.total(),
        }
        .into());
    }
    Ok(st.credits.available() >= needed)
}

/// Reserve each request's credits and MessageIds, which [`credits_ready`] found available,
/// and enter the request in the pending table; its reply's receiver goes to `receivers`.
fn register(
    st: &mut State,
    reqs: &[Request],
    sealing: Sealing,
    receivers: &mut Vec<Sent>,
) -> Vec<Reservation> {
    if st.pending.is_empty() {
        st.busy_since = Instant::now();
    }
    let mut reservations = Vec::with_capacity(reqs.len());
    for req in reqs {
        let r = st
            .credits
            .reserve(req.credit_charge)
            .expect("availability checked");
        let (tx, rx) = oneshot::channel();
        receivers.push((r.message_id, rx));
        st.pending
            .insert(r.message_id, pending_entry(req, tx, r.charge, sealing));
        st.requests += 1;
        st.bytes_sent += (req.msg.len() + req.payload.len()) as u64;
        reservations.push(r);
    }
    reservations
}

/// The pending-table entry of `req`, charged `charge` credits.
fn pending_entry(
    req: &Request,
    reply: oneshot::Sender<Result<Response>>,
    charge: u16,
    sealing: Sealing,
) -> Pending {
    Pending {
        reply,
        charge,
        command: req.command,
        sent: None,
        async_id: None,
        cancel_address: CancelAddress {
            session_id: req.session_id,
            tree_id: req.tree_id,
            sign: req.sign,
            seal: sealing.asked,
        },
        cancel: CancelState::None,
        on_abandoned: req.on_abandoned.clone(),
        on_interim: req.on_interim.clone(),
        sealed: sealing.sealed,
    }
}

/// Write each request's header into its placeholder: the reserved MessageId and credits, the
/// request's ids, flags and ChannelSequence, and SIGNED when the message will be signed on its
/// own, which is when the request asks for it, keys exist, and the frame is not sealed (the
/// AEAD tag of a sealed frame authenticates it instead). Takes the messages out of `reqs`.
fn stamp_headers(
    reqs: &mut [Request],
    reservations: &[Reservation],
    sealed: bool,
    keys: bool,
) -> Vec<Stamped> {
    let mut stamped = Vec::with_capacity(reqs.len());
    for (req, r) in reqs.iter_mut().zip(reservations) {
        let mut header = Header::request(req.command);
        header.credit_charge = r.charge;
        header.credits = r.credit_request;
        header.message_id = r.message_id;
        header.tree_id = req.tree_id;
        header.session_id = req.session_id;
        header.set_channel_sequence(req.channel_sequence);
        header.flags = HeaderFlags(req.flags);
        let sign = req.sign && !sealed && keys;
        if sign {
            header.flags.0 |= HeaderFlags::SIGNED;
        }
        let mut msg = std::mem::take(&mut req.msg);
        let mut head = BytesMut::with_capacity(HEADER_LEN);
        header.encode(&mut head);
        msg[..HEADER_LEN].copy_from_slice(&head);
        stamped.push(Stamped {
            msg,
            payload: std::mem::take(&mut req.payload),
            sign,
        });
    }
    stamped
}

/// Make the frame: one message alone, or several as a compound; signed message by message,
/// or sealed as a whole when `sealed`.
fn seal_or_sign(
    shared: &Shared,
    crypto: Option<&dyn ChannelCrypto>,
    mut stamped: Vec<Stamped>,
    sealed: bool,
    related: bool,
) -> Result<OutFrame> {
    if stamped.len() != 1 {
        return compound_frame(shared, crypto, stamped, sealed, related);
    }
    let Stamped {
        mut msg,
        payload,
        sign,
    } = stamped.pop().expect("one message");
    match (crypto, sealed, sign) {
        (Some(c), true, _) => sealed_frame(shared, c, &[&msg, &payload]),
        (Some(c), false, true) => {
            c.sign(&mut msg, &payload);
            Ok(unsealed_frame(msg.freeze(), payload))
        }
        _ => Ok(unsealed_frame(msg.freeze(), payload)),
    }
}

/// Several messages in one frame. With `related`, members after the first inherit the
/// previous member's FileId, SessionId and TreeId (SMB2_FLAGS_RELATED_OPERATIONS).
fn compound_frame(
    shared: &Shared,
    crypto: Option<&dyn ChannelCrypto>,
    stamped: Vec<Stamped>,
    sealed: bool,
    related: bool,
) -> Result<OutFrame> {
    let signed: Vec<bool> = stamped.iter().map(|m| m.sign).collect();
    // Compound members are 8-byte aligned and each is signed on its own, padding included
    // (MS-SMB2 3.2.4.1.4); `build_compound` lays them out.
    let members = stamped
        .into_iter()
        .map(|m| CompoundMember::from_parts(m.msg, m.payload))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(ProtocolError::Frame)?;
    let mut compound = build_compound(members, related);
    if let Some(c) = crypto {
        for (i, &sign) in signed.iter().enumerate() {
            if let (true, Some(m)) = (sign, compound.message_mut(i)) {
                c.sign(m, &[]);
            }
        }
    }
    match (crypto, sealed) {
        (Some(c), true) => sealed_frame(shared, c, &[&compound.frame]),
        _ => Ok(unsealed_frame(compound.frame.freeze(), Bytes::new())),
    }
}

/// Keep the frame's bytes in the pending entries of its requests, for a caller that needs
/// the request exactly as sent (the 3.1.1 preauth integrity hash covers it).
fn keep_sent(shared: &Shared, reservations: &[Reservation], frame: &OutFrame) {
    let mut sent = BytesMut::from(&frame.head[..]);
    sent.extend_from_slice(&frame.payload);
    let sent = sent.freeze();
    let mut st = shared.lock();
    for r in reservations {
        if let Some(p) = st.pending.get_mut(&r.message_id) {
            p.sent = Some(sent.clone());
        }
    }
}

/// The caller has an outcome for `message_id`: no CANCEL for it, unless the outcome is that
/// it gave up waiting (a timeout), which cancels the request like a dropped future does.
fn settle(guard: &mut CancelOnDrop, message_id: u64, result: &Result<Response>) {
    if !matches!(result, Err(Error::Timeout { .. })) {
        guard.disarm(message_id);
    }
}

/// `timeout` after `start`; a timeout too long to add (a CHANGE_NOTIFY waits without end,
/// `Duration::MAX`) is a year, which no request outlives.
pub(super) fn deadline(start: Instant, timeout: Duration) -> Instant {
    start
        .checked_add(timeout)
        .unwrap_or_else(|| start + Duration::from_secs(365 * 24 * 3600))
}

/// Wait for the reply in `rx` until `deadline`; a timeout is reported as `timeout` (the
/// request's own, counted from its send).
async fn await_reply(
    shared: &Shared,
    rx: oneshot::Receiver<Result<Response>>,
    command: Command,
    deadline: Instant,
    timeout: Duration,
) -> Result<Response> {
    match tokio::time::timeout_at(deadline, rx).await {
        Ok(Ok(result)) => result,
        // The entry went without an answer: only when the channel ended.
        Ok(Err(_)) => Err(Error::ConnectionLost {
            command,
            cause: shared.death(),
        }),
        Err(_) => Err(Error::Timeout {
            what: command.name(),
            after: timeout,
        }),
    }
}

/// The frame of `parts` sealed; a failure closes the channel.
fn sealed_frame(shared: &Shared, crypto: &dyn ChannelCrypto, parts: &[&[u8]]) -> Result<OutFrame> {
    match crypto.seal(parts) {
        Ok(s) => Ok(OutFrame {
            prefix: frame_prefix(s.len()),
            head: s.freeze(),
            payload: Bytes::new(),
        }),
        Err(e) => {
            // Sealing cannot fail with valid keys; the channel is unusable if it does.
            tracing::warn!(peer = %shared.peer, error = %e, "sealing failed; closing the channel");
            shared.fail(ConnectionLossCause::SealingFailed);
            Err(e)
        }
    }
}

/// The frame of a message sent in the clear (signed or not).
fn unsealed_frame(head: Bytes, payload: Bytes) -> OutFrame {
    OutFrame {
        prefix: frame_prefix(head.len() + payload.len()),
        head,
        payload,
    }
}
