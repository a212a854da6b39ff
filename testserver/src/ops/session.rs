//! SESSION_SETUP (MS-SMB2 3.3.5.5): the security exchange, then the session's keys, derived
//! from the exchange's session key and (3.1.1) the preauth hash over every message of the
//! exchange but the last reply; that reply is signed with the new signing key.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use smb3_proto::crypto::keys::derive_session_keys;
use smb3_proto::crypto::{CryptoBackend, Sealer, Signer};
use smb3_proto::{Dialect, Header, NtStatus};

use crate::auth::{Acceptor, Step};
use crate::connection::{Conn, PendingSetup};
use crate::reply::{error_body, reply_message, MessageOutcome};
use crate::state::{Sealing, Session};
use crate::wire::{body_offset, slice_at, Fields};

const BINDING: u8 = 0x01;

struct Request<'a> {
    flags: u8,
    token: &'a [u8],
    previous_session_id: u64,
}

fn parse(msg: &[u8]) -> Result<Request<'_>, NtStatus> {
    let mut f = Fields::body(msg);
    f.structure_size(25)?;
    let flags = f.u8()?;
    f.skip(1 + 4 + 4)?;
    let offset = f.u16()? as usize;
    let len = f.u16()? as usize;
    let previous_session_id = f.u64()?;
    Ok(Request {
        flags,
        token: slice_at(msg, offset, len)?,
        previous_session_id,
    })
}

fn body(token: &[u8]) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u16_le(9);
    b.put_u16_le(0); // SessionFlags: neither guest nor null, no ENCRYPT_DATA
    b.put_u16_le(if token.is_empty() { 0 } else { body_offset(8) });
    b.put_u16_le(token.len() as u16);
    b.put_slice(token);
    if token.is_empty() {
        b.put_u8(0);
    }
    b
}

fn backend() -> CryptoBackend {
    CryptoBackend::available()[0]
}

impl Conn {
    pub(crate) fn session_setup(&mut self, msg: &[u8], header: &Header) -> MessageOutcome {
        let Some(negotiated) = self.negotiated.clone() else {
            return MessageOutcome::Cut;
        };
        let fail = |status: NtStatus, session_id: u64| {
            let reply = reply_message(header, status, &error_body(), session_id, 0, false);
            MessageOutcome::reply(reply, None)
        };
        let request = match parse(msg) {
            Ok(r) => r,
            Err(status) => return fail(status, header.session_id),
        };
        // Binding a session to a second connection (multichannel) is not offered: the server
        // does not advertise SMB2_GLOBAL_CAP_MULTI_CHANNEL.
        if request.flags & BINDING != 0 {
            return fail(NtStatus::REQUEST_NOT_ACCEPTED, header.session_id);
        }
        let session_id = if header.session_id == 0 {
            let id = self.shared.lock().new_session_id();
            let config = &self.shared.config;
            let acceptor = match Acceptor::new(&config.user, &config.domain, &config.password) {
                Ok(a) => a,
                Err(_) => return fail(NtStatus::INSUFFICIENT_RESOURCES, 0),
            };
            let preauth = (negotiated.dialect == Dialect::Smb311).then(|| self.preauth.clone());
            self.pending.insert(id, PendingSetup { acceptor, preauth });
            id
        } else if self.pending.contains_key(&header.session_id) {
            header.session_id
        } else {
            // Re-authenticating an established session is not offered.
            return fail(NtStatus::USER_SESSION_DELETED, header.session_id);
        };
        let Some(pending) = self.pending.get_mut(&session_id) else {
            return fail(NtStatus::USER_SESSION_DELETED, session_id);
        };
        if let Some(h) = pending.preauth.as_mut() {
            h.update(msg);
        }
        match pending.acceptor.step(request.token) {
            Err(_) => {
                self.pending.remove(&session_id);
                fail(NtStatus::LOGON_FAILURE, session_id)
            }
            Ok(Step::Continue(token)) => {
                let reply = reply_message(
                    header,
                    NtStatus::MORE_PROCESSING_REQUIRED,
                    &body(&token),
                    session_id,
                    0,
                    false,
                );
                if let Some(h) = pending.preauth.as_mut() {
                    h.update(&reply);
                }
                MessageOutcome::reply(reply, None)
            }
            Ok(Step::Done { token, session_key }) => {
                let pending = self.pending.remove(&session_id);
                let preauth = pending.and_then(|p| p.preauth);
                let keys = match derive_session_keys(
                    negotiated.dialect,
                    &session_key,
                    negotiated.cipher,
                    preauth.as_ref(),
                ) {
                    Ok(k) => k,
                    Err(_) => return fail(NtStatus::LOGON_FAILURE, session_id),
                };
                let signer =
                    match Signer::new(negotiated.signing, keys.signing_key.as_bytes(), backend()) {
                        Ok(s) => Arc::new(s),
                        Err(_) => return fail(NtStatus::LOGON_FAILURE, session_id),
                    };
                let sealing = match (
                    negotiated.cipher,
                    &keys.encryption_key,
                    &keys.decryption_key,
                ) {
                    (Some(cipher), Some(enc), Some(dec)) => {
                        match (
                            Sealer::new(cipher, enc.as_bytes(), backend()),
                            Sealer::new(cipher, dec.as_bytes(), backend()),
                        ) {
                            (Ok(open), Ok(seal)) => Some(Arc::new(Sealing { open, seal })),
                            _ => return fail(NtStatus::LOGON_FAILURE, session_id),
                        }
                    }
                    _ => None,
                };
                {
                    let mut state = self.shared.lock();
                    // MS-SMB2 3.3.5.5.3: a new session naming a previous one of the same user
                    // ends that one (its opens are closed; none are durable here).
                    if request.previous_session_id != 0 {
                        state.end_session(request.previous_session_id);
                    }
                    state.sessions.insert(
                        session_id,
                        Session {
                            sealing,
                            connections: 1,
                        },
                    );
                }
                self.signers.insert(session_id, signer.clone());
                let reply = reply_message(
                    header,
                    NtStatus::SUCCESS,
                    &body(&token),
                    session_id,
                    0,
                    false,
                );
                MessageOutcome::reply(reply, Some(signer))
            }
        }
    }
}
