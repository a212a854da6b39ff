//! The reader task of a channel: reads frames, opens sealed ones, checks signatures, splits
//! compounds and hands each reply to the request waiting for it, returning its credits. Beside
//! it, `writer` is the task that puts frames on the wire.
//!
//! A reply nobody waits for any more (its caller dropped the future or timed out) is still
//! matched: its credits come back and it goes to the request's `on_abandoned`, or nowhere.
//! Anything that breaks the rules (an unknown MessageId, a reply to another command, a bad or
//! missing signature, a plaintext reply to a sealed request) ends the connection: nothing more
//! from it can be trusted.

use std::sync::Arc;

use bytes::Bytes;
use smb3_proto::header::{Header, HeaderFlags};
use smb3_proto::msg::compound::split_compound;
use smb3_proto::{Command, NtStatus};
use tokio::sync::mpsc;
// The reply pace is timed on tokio's clock, so the loss detector's tests can pause it.
use tokio::time::Instant;

use super::cancel::{CancelState, CancelTarget};
use super::frame::{Frame, FrameError, FrameReader};
use super::request::Response;
use super::{ChannelCrypto, Pending, Shared, State, UNSOLICITED_MESSAGE_ID};
use crate::error::{ConnectionLossCause, Error, ProtocolError, Result};

/// The reader task: runs until the connection fails; returns why.
pub(super) async fn read_loop<R: tokio::io::AsyncRead + Unpin>(
    shared: &Shared,
    mut frames: FrameReader<R>,
    events: mpsc::UnboundedSender<Bytes>,
) -> ConnectionLossCause {
    loop {
        let frame = match frames.next().await {
            Ok(f) => f,
            Err(FrameError::Eof) => return ConnectionLossCause::ClosedByServer,
            Err(FrameError::Io(e)) => {
                return ConnectionLossCause::ReadFailed {
                    source: Arc::new(e),
                }
            }
            Err(FrameError::BadPrefix(b)) => {
                return ConnectionLossCause::ProtocolViolation {
                    source: Arc::new(ProtocolError::BadTransportHeader(b).into()),
                }
            }
        };
        if let Err(e) = handle_frame(shared, frame, &events) {
            return ConnectionLossCause::ProtocolViolation {
                source: Arc::new(e),
            };
        }
    }
}

/// One frame from the server: opened when sealed, its signatures checked, each message in it
/// delivered (or, for an oplock or lease break, passed to `events`).
fn handle_frame(
    shared: &Shared,
    mut plain: Frame,
    events: &mpsc::UnboundedSender<Bytes>,
) -> Result<()> {
    let crypto = shared.crypto();
    let encrypted = plain.starts_with(&[0xFD, b'S', b'M', b'B']);
    if encrypted {
        let Some(c) = &crypto else {
            return Err(ProtocolError::EncryptedWithoutKeys.into());
        };
        let start = c.open_in_place(plain.as_mut_slice())?;
        plain.advance(start);
    }
    // Most frames hold one message: verify it while the buffer is still ours to mutate, which
    // lets the signer MAC it in one contiguous pass (several times faster for AES-GMAC).
    let single = plain.get(20..24) == Some(&[0u8; 4][..]);
    let mut verified_in_place = false;
    if single {
        let header = Header::decode(&plain).map_err(ProtocolError::Frame)?;
        match (verdict(crypto.as_deref(), &header, encrypted), &crypto) {
            (Verdict::Verify, Some(c)) => {
                if !c.verify_in_place(plain.as_mut_slice()) {
                    return Err(reject(shared, &header, bad_signature(&header)));
                }
                verified_in_place = true;
            }
            (Verdict::Reject, _) => return Err(reject(shared, &header, unsigned(&header))),
            _ => {}
        }
    }
    let plain = plain.freeze();
    let frame_len = plain.len() as u64;
    let messages = split_compound(&plain).map_err(ProtocolError::Frame)?;
    for (i, msg) in messages.into_iter().enumerate() {
        let header = Header::decode(&msg).map_err(ProtocolError::Frame)?;
        if !header.is_response() {
            return Err(ProtocolError::RequestFromServer.into());
        }
        if header.message_id == UNSOLICITED_MESSAGE_ID {
            if header.command == Command::OPLOCK_BREAK {
                let _ = events.send(msg);
                continue;
            }
            return Err(ProtocolError::UnknownMessageId(header.message_id).into());
        }
        if !verified_in_place {
            match (verdict(crypto.as_deref(), &header, encrypted), &crypto) {
                (Verdict::Verify, Some(c)) if !c.verify(&msg) => {
                    return Err(reject(shared, &header, bad_signature(&header)))
                }
                (Verdict::Reject, _) => return Err(reject(shared, &header, unsigned(&header))),
                _ => {}
            }
        }
        deliver(
            shared,
            header,
            msg,
            if i == 0 { frame_len } else { 0 },
            encrypted,
        )?;
    }
    Ok(())
}

/// What to do about a reply's signature.
enum Verdict {
    /// Nothing to check (no session keys yet, encrypted, or exempt).
    Accept,
    /// Signed: verify it.
    Verify,
    /// Unsigned where a signature is required.
    Reject,
}

/// MS-SMB2 3.2.5.1.3: a reply in a signed session is verified; an unsigned one is accepted
/// only where the server may not sign (interim replies, SESSION_SETUP which the session layer
/// verifies itself with the freshly derived key). Encrypted replies are authenticated by the
/// AEAD tag instead.
fn verdict(crypto: Option<&dyn ChannelCrypto>, header: &Header, encrypted: bool) -> Verdict {
    let Some(c) = crypto else {
        return Verdict::Accept;
    };
    if encrypted
        || header.command == Command::SESSION_SETUP
        || header.command == Command::NEGOTIATE
        || header.message_id == UNSOLICITED_MESSAGE_ID
    {
        return Verdict::Accept;
    }
    let interim = header.status == NtStatus::PENDING && header.is_async();
    if header.flags.has(HeaderFlags::SIGNED) {
        Verdict::Verify
    } else if c.replies_must_be_signed() && !interim {
        Verdict::Reject
    } else {
        Verdict::Accept
    }
}

/// A reply failed its signature check (`why`): the request it claims to answer learns exactly
/// why; the others see the connection drop, since nothing more from it is trusted.
fn reject(shared: &Shared, header: &Header, why: Error) -> Error {
    let pending = shared.lock().pending.remove(&header.message_id);
    if let Some(p) = pending {
        let _ = p.reply.send(Err(same_error(&why, header)));
    }
    why
}

/// A second copy of a signature verdict (errors are not `Clone`).
fn same_error(why: &Error, header: &Header) -> Error {
    match why {
        Error::Protocol(ProtocolError::UnsignedReply { .. }) => unsigned(header),
        _ => bad_signature(header),
    }
}

fn unsigned(header: &Header) -> Error {
    ProtocolError::UnsignedReply {
        command: header.command,
        message_id: header.message_id,
    }
    .into()
}

fn unsealed(header: &Header) -> Error {
    ProtocolError::UnsealedReply {
        command: header.command,
        message_id: header.message_id,
    }
    .into()
}

fn bad_signature(header: &Header) -> Error {
    ProtocolError::BadSignature {
        command: header.command,
        message_id: header.message_id,
    }
    .into()
}

/// Track the pace of replies: the gap since the last sign of life, smoothed (1/8 weight).
fn note_reply(st: &mut State, now: Instant) {
    if !st.pending.is_empty() {
        let gap = now.saturating_duration_since(st.last_reply.max(st.busy_since));
        st.reply_gap = (st.reply_gap * 7 + gap) / 8;
    }
    st.last_reply = now;
}

/// Hand one reply to the request it answers and count the credits it grants: an interim
/// STATUS_PENDING marks the request as taken on asynchronously ([`went_async`]); a final reply
/// ends it ([`complete`]). `wire_len` is the size of the frame it came in, counted once.
fn deliver(
    shared: &Shared,
    header: Header,
    msg: Bytes,
    wire_len: u64,
    encrypted: bool,
) -> Result<()> {
    let interim = header.status == NtStatus::PENDING && header.is_async();
    let mut st = shared.lock();
    st.bytes_received += wire_len;
    note_reply(&mut st, Instant::now());
    let Some(p) = st.pending.get_mut(&header.message_id) else {
        return Err(ProtocolError::UnknownMessageId(header.message_id).into());
    };
    if p.command != header.command {
        return Err(ProtocolError::CommandMismatch {
            sent: p.command,
            got: header.command,
        }
        .into());
    }
    if p.sealed && !encrypted {
        let p = st
            .pending
            .remove(&header.message_id)
            .expect("checked above");
        drop(st);
        let _ = p.reply.send(Err(unsealed(&header)));
        return Err(unsealed(&header));
    }
    let charge = p.charge;
    if interim {
        let cancel = went_async(p, &header);
        let r = st.credits.on_response(charge, header.credits, false);
        drop(st);
        shared.credit_granted.notify_waiters();
        if let Some(target) = cancel {
            shared.send_cancel(target);
        }
        return r.map_err(|_| ProtocolError::NoCredits.into());
    }
    let p = st
        .pending
        .remove(&header.message_id)
        .expect("checked above");
    let r = st.credits.on_response(charge, header.credits, true);
    drop(st);
    shared.credit_granted.notify_waiters();
    complete(p, header, msg, encrypted);
    r.map_err(|_| ProtocolError::NoCredits.into())
}

/// The server took `p` on asynchronously: note its AsyncId and tell whoever asked to know.
/// Returns the CANCEL to send when its caller gave up before this interim reply, since only
/// now can the request be named by its AsyncId.
fn went_async(p: &mut Pending, header: &Header) -> Option<CancelTarget> {
    p.async_id = Some(header.async_id);
    if let Some(told) = &p.on_interim {
        // `notify_one` keeps a permit: a caller that looks only later still learns it.
        told.notify_one();
    }
    (p.cancel == CancelState::Wanted).then(|| {
        p.cancel = CancelState::Sent;
        p.cancel_target(header.message_id)
    })
}

/// The final reply to `p`, for its caller. The caller may have given up (dropped its future,
/// or timed out): the reply then goes to the request's `on_abandoned`, if it has one, or is
/// discarded.
fn complete(p: Pending, header: Header, msg: Bytes, encrypted: bool) {
    let reply = Response {
        header,
        msg,
        sent: p.sent,
        resent: false,
        sealed: encrypted,
    };
    if let Err(Ok(unwanted)) = p.reply.send(Ok(reply)) {
        if let Some(on_abandoned) = p.on_abandoned {
            on_abandoned(unwanted);
        }
    }
}
