//! Reply messages: the header answering a request, the error body, and the chaining of a
//! compound's replies, each signed over its own bytes.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use smb3_proto::crypto::Signer;
use smb3_proto::header::HEADER_LEN;
use smb3_proto::{Command, Header, HeaderFlags, NtStatus};
use tokio::sync::mpsc::UnboundedSender;

use crate::protection::Sealing;

/// Credits granted per reply at most.
const MAX_GRANT: u16 = 512;

/// Each connection's queue of frames to send apart from the replies to its frames (lease
/// breaks, responses to requests that went async), by connection id.
pub(crate) type Outboxes = HashMap<u64, UnboundedSender<Outcome>>;

/// What a frame comes to, and what the connection's outbox carries.
pub(crate) enum Outcome {
    /// A frame of replies, an unasked frame (a lease break), or a response to a request the
    /// server went on with asynchronously (interim or final).
    Send(Vec<u8>),
    Nothing,
    /// Close the connection with a reset.
    Cut,
}

/// A reply built and not yet signed: signing comes last, after compound padding.
pub(crate) struct Built {
    msg: BytesMut,
    sign_with: Option<Arc<Signer>>,
}

/// What one request of a frame comes to.
pub(crate) enum MessageOutcome {
    /// A reply, to be chained with the frame's others.
    Reply(Built),
    /// Nothing to send (CANCEL; a fault that swallows the request).
    NoReply,
    /// Close the connection without answering.
    Cut,
    /// The request was done; close the connection instead of answering.
    CutAfter,
}

/// Error response body (MS-SMB2 2.2.2): StructureSize 9, no contexts, no data but the one
/// byte the structure size counts.
pub(crate) fn error_body() -> BytesMut {
    let mut b = BytesMut::with_capacity(9);
    b.put_u16_le(9);
    b.put_u8(0);
    b.put_u8(0);
    b.put_u32_le(0);
    b.put_u8(0);
    b
}

/// The reply to `request`, unsigned.
pub(crate) fn reply_message(
    request: &Header,
    status: NtStatus,
    body: &[u8],
    session_id: u64,
    tree_id: u32,
    related: bool,
) -> BytesMut {
    let mut flags = HeaderFlags::SERVER_TO_REDIR;
    if related {
        flags |= HeaderFlags::RELATED_OPERATIONS;
    }
    let header = Header {
        credit_charge: request.credit_charge,
        status,
        command: request.command,
        credits: request.credits.clamp(1, MAX_GRANT),
        flags: HeaderFlags(flags),
        next_command: 0,
        message_id: request.message_id,
        async_id: 0,
        tree_id,
        session_id,
        signature: [0; 16],
    };
    let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
    header.encode(&mut out);
    out.put_slice(body);
    out
}

/// Chain replies into one compound: each but the last padded to 8 bytes with NextCommand
/// set, then each signed over its own bytes, padding included (MS-SMB2 3.3.4.1.3).
pub(crate) fn compose(built: Vec<Built>) -> Vec<u8> {
    let count = built.len();
    let mut out = Vec::new();
    for (i, mut b) in built.into_iter().enumerate() {
        if i + 1 < count {
            while b.msg.len() % 8 != 0 {
                b.msg.put_u8(0);
            }
            let next = b.msg.len() as u32;
            b.msg[20..24].copy_from_slice(&next.to_le_bytes());
        }
        if let Some(signer) = &b.sign_with {
            let _ = signer.sign_in_place(&mut b.msg, &[]);
        }
        out.extend_from_slice(&b.msg);
    }
    out
}

impl Built {
    /// A reply to send as it is, signed with `signer` when one is given.
    pub(crate) fn new(msg: BytesMut, sign_with: Option<Arc<Signer>>) -> Built {
        Built { msg, sign_with }
    }
}

/// A request the server answered with STATUS_PENDING and completes later (MS-SMB2 3.3.4.2):
/// what its interim and final responses repeat of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AsyncRequest {
    pub(crate) command: Command,
    pub(crate) message_id: u64,
    pub(crate) session_id: u64,
    pub(crate) credit_charge: u16,
    /// CreditRequest of the request: granted by the interim response.
    pub(crate) credits_asked: u16,
    /// The AsyncId both responses carry, and a CANCEL names.
    pub(crate) async_id: u64,
}

impl AsyncRequest {
    pub(crate) fn of(request: &Header, async_id: u64) -> AsyncRequest {
        AsyncRequest {
            command: request.command,
            message_id: request.message_id,
            session_id: request.session_id,
            credit_charge: request.credit_charge,
            credits_asked: request.credits,
            async_id,
        }
    }

    /// The interim response: STATUS_PENDING in the async header form, with the error body
    /// (MS-SMB2 3.3.4.2). It grants the credits the request asked for; the final response
    /// grants none, so a client's credits come back to where they were once it is answered.
    /// It is signed like the others: MS-SMB2 3.3.4.1.1 exempts interim responses from the
    /// rule for signed requests but not from that for sessions requiring signing, and smbd
    /// signs them.
    pub(crate) fn interim(&self) -> BytesMut {
        self.message(
            NtStatus::PENDING,
            self.credits_asked.clamp(1, MAX_GRANT),
            &error_body(),
        )
    }

    /// The final response, with `status` and `body`; to be signed like any response.
    pub(crate) fn final_response(&self, status: NtStatus, body: &[u8]) -> BytesMut {
        self.message(status, 0, body)
    }

    fn message(&self, status: NtStatus, credits: u16, body: &[u8]) -> BytesMut {
        let header = Header {
            credit_charge: self.credit_charge,
            status,
            command: self.command,
            credits,
            flags: HeaderFlags(HeaderFlags::SERVER_TO_REDIR | HeaderFlags::ASYNC_COMMAND),
            next_command: 0,
            message_id: self.message_id,
            async_id: self.async_id,
            tree_id: 0,
            session_id: self.session_id,
            signature: [0; 16],
        };
        let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
        header.encode(&mut out);
        out.put_slice(body);
        out
    }
}

/// One frame of replies: chained, signed, sealed when the request was, length-prefixed.
pub(crate) fn frame_replies(built: Vec<Built>, sealing: Option<&Sealing>) -> Option<Vec<u8>> {
    let compound = compose(built);
    let payload = match sealing {
        Some(s) => {
            let session_id = u64::from_le_bytes(compound[40..48].try_into().unwrap_or_default());
            s.seal.seal(session_id, &[&compound]).ok()?.to_vec()
        }
        None => compound,
    };
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    Some(out)
}

impl MessageOutcome {
    /// A reply to send as it is, signed with `signer` when one is given.
    pub(crate) fn reply(msg: BytesMut, signer: Option<Arc<Signer>>) -> MessageOutcome {
        MessageOutcome::Reply(Built {
            msg,
            sign_with: signer,
        })
    }
}
