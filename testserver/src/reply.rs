//! Reply messages: the header answering a request, the error body, and the chaining of a
//! compound's replies, each signed over its own bytes.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use smb3_proto::crypto::Signer;
use smb3_proto::header::HEADER_LEN;
use smb3_proto::{Header, HeaderFlags, NtStatus};

/// Credits granted per reply at most.
const MAX_GRANT: u16 = 512;

/// What a frame comes to, and what the connection's outbox carries.
pub(crate) enum Outcome {
    /// A frame of replies, or an unasked frame (a lease break).
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

impl MessageOutcome {
    /// A reply to send as it is, signed with `signer` when one is given.
    pub(crate) fn reply(msg: BytesMut, signer: Option<Arc<Signer>>) -> MessageOutcome {
        MessageOutcome::Reply(Built {
            msg,
            sign_with: signer,
        })
    }
}
