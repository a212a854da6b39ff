//! SESSION_SETUP (MS-SMB2 3.3.5.5): the security exchange, then the session's keys, derived
//! from the exchange's session key and (3.1.1) the preauth hash over every message of the
//! exchange but the last reply; that reply is signed with the new signing key.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use smb3_proto::crypto::keys::{derive_channel_signing_key, derive_session_keys};
use smb3_proto::crypto::preauth::PreauthHash;
use smb3_proto::crypto::{CryptoBackend, Sealer, Signer};
use smb3_proto::{Dialect, Header, HeaderFlags, NtStatus};

use crate::auth::{Acceptor, Step};
use crate::connection::{Conn, Negotiated, PendingSetup};
use crate::protection::Sealing;
use crate::reply::{error_body, reply_message, MessageOutcome};
use crate::state::Session;
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

/// The reply to a SESSION_SETUP, not yet signed.
fn reply(header: &Header, status: NtStatus, session_id: u64, token: &[u8]) -> BytesMut {
    let body = if status == NtStatus::SUCCESS || status == NtStatus::MORE_PROCESSING_REQUIRED {
        body(token)
    } else {
        error_body()
    };
    reply_message(header, status, &body, session_id, 0, false)
}

/// The keys of a new session: its signer (Session.SigningKey, also the first channel's)
/// and, with a cipher, its sealers.
fn session_keys(
    negotiated: &Negotiated,
    session_key: &[u8],
    preauth: Option<&PreauthHash>,
) -> Result<(Arc<Signer>, Option<Arc<Sealing>>), NtStatus> {
    let keys = derive_session_keys(negotiated.dialect, session_key, negotiated.cipher, preauth)
        .map_err(|_| NtStatus::LOGON_FAILURE)?;
    let signer = Signer::new(negotiated.signing, keys.signing_key.as_bytes(), backend())
        .map_err(|_| NtStatus::LOGON_FAILURE)?;
    let sealing = match (
        negotiated.cipher,
        &keys.encryption_key,
        &keys.decryption_key,
    ) {
        (Some(cipher), Some(enc), Some(dec)) => Some(Arc::new(Sealing {
            open: Sealer::new(cipher, enc.as_bytes(), backend())
                .map_err(|_| NtStatus::LOGON_FAILURE)?,
            seal: Sealer::new(cipher, dec.as_bytes(), backend())
                .map_err(|_| NtStatus::LOGON_FAILURE)?,
        })),
        _ => None,
    };
    Ok((Arc::new(signer), sealing))
}

impl Conn {
    pub(crate) fn session_setup(&mut self, msg: &[u8], header: &Header) -> MessageOutcome {
        let Some(negotiated) = self.negotiated.clone() else {
            return MessageOutcome::Cut;
        };
        let fail = |status: NtStatus, session_id: u64| {
            MessageOutcome::reply(reply(header, status, session_id, &[]), None)
        };
        let request = match parse(msg) {
            Ok(r) => r,
            Err(status) => return fail(status, header.session_id),
        };
        let binding = request.flags & BINDING != 0;
        // Binding requests, and the server's interim replies to them, are signed with
        // Session.SigningKey (MS-SMB2 3.3.5.5.2, 3.3.4.1.1).
        let session_signer = if binding {
            match self.check_binding(msg, header, &negotiated) {
                Ok(signer) => Some(signer),
                Err(status) => return fail(status, header.session_id),
            }
        } else {
            None
        };
        let session_id = match self.start_or_continue(msg, header, &negotiated, binding) {
            Ok(id) => id,
            Err(status) => return fail(status, header.session_id),
        };
        let Some(pending) = self.pending.get_mut(&session_id) else {
            return fail(NtStatus::USER_SESSION_DELETED, session_id);
        };
        // A reauthentication's interim replies are signed with Session.SigningKey too.
        let session_signer = match (&session_signer, pending.reauth) {
            (None, true) => self
                .shared
                .lock()
                .sessions
                .get(&session_id)
                .map(|s| s.signer.clone()),
            _ => session_signer,
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
                let mut r = reply(
                    header,
                    NtStatus::MORE_PROCESSING_REQUIRED,
                    session_id,
                    &token,
                );
                // The hash takes the reply as sent: signed, for a binding.
                if let Some(signer) = &session_signer {
                    if signer.sign_in_place(&mut r, &[]).is_err() {
                        return fail(NtStatus::LOGON_FAILURE, session_id);
                    }
                }
                if let Some(h) = pending.preauth.as_mut() {
                    h.update(&r);
                }
                MessageOutcome::reply(r, None)
            }
            Ok(Step::Done { token, session_key }) => {
                let Some(done) = self.pending.remove(&session_id) else {
                    return fail(NtStatus::USER_SESSION_DELETED, session_id);
                };
                if done.reauth {
                    return self.reauthenticated(header, session_id, &token);
                }
                let preauth = done.preauth;
                let established = if binding {
                    self.bound(session_id, &negotiated, &session_key, preauth.as_ref())
                } else {
                    self.established(
                        session_id,
                        &negotiated,
                        &session_key,
                        preauth.as_ref(),
                        request.previous_session_id,
                    )
                };
                match established {
                    Ok(signer) => {
                        let r = reply(header, NtStatus::SUCCESS, session_id, &token);
                        MessageOutcome::reply(r, Some(signer))
                    }
                    Err(status) => fail(status, session_id),
                }
            }
        }
    }

    /// The session authenticated again: valid once more, its keys unchanged; the final
    /// reply is signed with this channel's key.
    fn reauthenticated(
        &mut self,
        header: &Header,
        session_id: u64,
        token: &[u8],
    ) -> MessageOutcome {
        if let Some(s) = self.shared.lock().sessions.get_mut(&session_id) {
            s.expired = false;
        }
        let r = reply(header, NtStatus::SUCCESS, session_id, token);
        MessageOutcome::reply(r, self.signers.get(&session_id).cloned())
    }

    /// A binding names a session of this dialect that multichannel may join, and its
    /// request is signed with that session's key (MS-SMB2 3.3.5.5.2).
    fn check_binding(
        &self,
        msg: &[u8],
        header: &Header,
        negotiated: &Negotiated,
    ) -> Result<Arc<Signer>, NtStatus> {
        if !self.shared.config.multichannel {
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        let state = self.shared.lock();
        let session = state
            .sessions
            .get(&header.session_id)
            .ok_or(NtStatus::USER_SESSION_DELETED)?;
        if session.dialect != negotiated.dialect || self.signers.contains_key(&header.session_id) {
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        if !header.flags.has(HeaderFlags::SIGNED) || !session.signer.verify(msg) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        Ok(session.signer.clone())
    }

    /// The id of the exchange this request belongs to, starting one when it is the first.
    fn start_or_continue(
        &mut self,
        msg: &[u8],
        header: &Header,
        negotiated: &Negotiated,
        binding: bool,
    ) -> Result<u64, NtStatus> {
        if self.pending.contains_key(&header.session_id) {
            return Ok(header.session_id);
        }
        let (id, reauth) = match (header.session_id, binding) {
            (0, false) => (self.shared.lock().new_session_id(), false),
            (id, true) => (id, false),
            // Authenticating again a session established or bound on this connection: the
            // request is signed with this channel's key, like any other of the session.
            (id, false) => {
                let signer = self
                    .signers
                    .get(&id)
                    .ok_or(NtStatus::USER_SESSION_DELETED)?;
                if !header.flags.has(HeaderFlags::SIGNED) || !signer.verify(msg) {
                    return Err(NtStatus::ACCESS_DENIED);
                }
                (id, true)
            }
        };
        let config = &self.shared.config;
        let acceptor = Acceptor::new(&config.user, &config.domain, &config.password)
            .map_err(|_| NtStatus::INSUFFICIENT_RESOURCES)?;
        // The exchange's preauth hash starts from this connection's (MS-SMB2 3.3.5.5).
        let preauth =
            (negotiated.dialect == Dialect::Smb311 && !reauth).then(|| self.preauth.clone());
        self.pending.insert(
            id,
            PendingSetup {
                acceptor,
                preauth,
                reauth,
            },
        );
        Ok(id)
    }

    /// A new session: its keys, and its signer as this channel's.
    fn established(
        &mut self,
        session_id: u64,
        negotiated: &Negotiated,
        session_key: &[u8],
        preauth: Option<&PreauthHash>,
        previous_session_id: u64,
    ) -> Result<Arc<Signer>, NtStatus> {
        let (signer, sealing) = session_keys(negotiated, session_key, preauth)?;
        let mut state = self.shared.lock();
        // MS-SMB2 3.3.5.5.3: a new session naming a previous one of the same user ends that
        // one; its durable opens stay for this session to reclaim.
        if previous_session_id != 0 {
            state.end_session(previous_session_id, true);
        }
        state.sessions.insert(
            session_id,
            Session {
                dialect: negotiated.dialect,
                signer: signer.clone(),
                sealing,
                connections: 1,
                expired: false,
            },
        );
        drop(state);
        self.signers.insert(session_id, signer.clone());
        Ok(signer)
    }

    /// A channel bound to an existing session: it signs with a key of its own, from the
    /// binding's session key and this connection's preauth hash (MS-SMB2 3.3.5.5.3).
    fn bound(
        &mut self,
        session_id: u64,
        negotiated: &Negotiated,
        session_key: &[u8],
        preauth: Option<&PreauthHash>,
    ) -> Result<Arc<Signer>, NtStatus> {
        let key = derive_channel_signing_key(negotiated.dialect, session_key, preauth)
            .map_err(|_| NtStatus::LOGON_FAILURE)?;
        let mut state = self.shared.lock();
        let session = state
            .sessions
            .get_mut(&session_id)
            .ok_or(NtStatus::USER_SESSION_DELETED)?;
        let algorithm = session.signer.algorithm();
        let signer = Arc::new(
            Signer::new(algorithm, key.as_bytes(), backend())
                .map_err(|_| NtStatus::LOGON_FAILURE)?,
        );
        session.connections += 1;
        drop(state);
        self.signers.insert(session_id, signer.clone());
        Ok(signer)
    }
}
