//! What a caller hands the channel and what it gets back: a [`Request`] (a header placeholder
//! and the encoded body, stamped with MessageId, credits and signature only when it is sent)
//! and the [`Response`] matched to it.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use smb3_proto::header::{Header, HEADER_LEN};
use smb3_proto::msg::{credit_charge, FileId, RequestBody};
use smb3_proto::{Command, NtStatus};

use crate::error::{Error, Result};

/// A request ready to be stamped and sent. Cloned before sending when it may have to be sent
/// again on another channel (failover replay).
#[derive(Clone)]
pub(crate) struct Request {
    pub(super) command: Command,
    /// Header placeholder (64 bytes) followed by the encoded body.
    pub(super) msg: BytesMut,
    pub(super) payload: Bytes,
    pub(super) credit_charge: u16,
    /// TreeId, SessionId, extra flags, ChannelSequence, sign/seal choices.
    pub(crate) tree_id: u32,
    pub(crate) session_id: u64,
    pub(crate) flags: u32,
    pub(crate) channel_sequence: u16,
    pub(crate) sign: bool,
    pub(crate) encrypt: bool,
    /// Keep the exact bytes sent (the 3.1.1 preauth hash needs them).
    pub(crate) keep_sent: bool,
    pub(crate) timeout: Duration,
    /// Called with the final reply when it arrives after the caller gave up on it (dropped
    /// its future or timed out), so a CREATE the server carried out anyway can be closed.
    pub(crate) on_abandoned: Option<OnAbandoned>,
    /// Told when the server answers with an interim STATUS_PENDING: it has taken the request
    /// on and will complete it later (how a CHANGE_NOTIFY's caller learns the server is
    /// watching).
    pub(crate) on_interim: Option<Arc<tokio::sync::Notify>>,
}

/// What to do with a reply nobody waits for any more (see [`Request::on_abandoned`]). It runs
/// on the reader task, so it must not block: it spawns whatever it needs to send.
pub(crate) type OnAbandoned = Arc<dyn Fn(Response) + Send + Sync>;

impl Request {
    /// Credits this request is charged.
    pub(crate) fn charge(&self) -> u16 {
        self.credit_charge
    }

    /// The request's command.
    pub(crate) fn command(&self) -> Command {
        self.command
    }

    /// Treat the request as `command` when its reply comes back (the fuzz harness sends one
    /// body and has its replies dispatched as every command's).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn pretend_command(&mut self, command: Command) {
        self.command = command;
    }

    /// Overwrite the FileId at `offset` into the body (see [`smb3_proto::msg::file_id_offset`]).
    pub(crate) fn set_file_id(&mut self, offset: usize, id: FileId) {
        let at = HEADER_LEN + offset;
        if let Some(slot) = self.msg.get_mut(at..at + 16) {
            slot[..8].copy_from_slice(&id.persistent.to_le_bytes());
            slot[8..].copy_from_slice(&id.volatile.to_le_bytes());
        }
    }

    /// Encode `body` behind a header placeholder.
    pub(crate) fn new<B: RequestBody>(body: &B) -> Request {
        let mut msg = BytesMut::with_capacity(HEADER_LEN + 128);
        msg.resize(HEADER_LEN, 0);
        body.encode_body(&mut msg);
        Request {
            command: B::COMMAND,
            msg,
            payload: body.payload(),
            credit_charge: credit_charge(body.credit_payload()),
            tree_id: 0,
            session_id: 0,
            flags: 0,
            channel_sequence: 0,
            sign: false,
            encrypt: false,
            keep_sent: false,
            timeout: Duration::from_secs(60),
            on_abandoned: None,
            on_interim: None,
        }
    }
}

/// A final reply, matched to its request.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) header: Header,
    /// The whole message, header included.
    pub(crate) msg: Bytes,
    /// The request as sent, when `keep_sent` was asked.
    pub(crate) sent: Option<Bytes>,
    /// The request was sent more than once (replayed after a lost channel or a stale
    /// refusal): this reply may answer a repeat of a request the server already carried out.
    pub(crate) resent: bool,
    /// The reply came encrypted (in a TRANSFORM_HEADER frame whose tag verified).
    pub(crate) sealed: bool,
}

impl Response {
    /// `Err(Error::Status)` unless the status is success or one of `also_ok`.
    pub(crate) fn check(self, also_ok: &[NtStatus]) -> Result<Response> {
        let st = self.header.status;
        if st == NtStatus::SUCCESS || also_ok.contains(&st) {
            Ok(self)
        } else {
            Err(Error::Status {
                status: st,
                command: self.header.command,
                path: None,
            })
        }
    }
}
