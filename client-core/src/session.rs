//! Session establishment over a channel: NEGOTIATE (MS-SMB2 3.2.4.2.2), SESSION_SETUP with
//! SPNEGO (3.2.4.2.3, 3.2.5.3), key derivation and the installation of signing and sealing.

use std::sync::Arc;

use bytes::Bytes;
use rand::RngCore;
use smb3_proto::crypto::preauth::PreauthHash;
use smb3_proto::msg::ioctl::{
    IoctlRequest, ValidateNegotiateInfoRequest, ValidateNegotiateInfoResponse,
    FSCTL_VALIDATE_NEGOTIATE_INFO,
};
use smb3_proto::msg::negotiate::{
    Capabilities, NegotiateContexts, NegotiateRequest, NegotiateResponse, SecurityMode,
    TransportFlags,
};
use smb3_proto::msg::session_setup::{
    SessionFlags, SessionSetupFlags, SessionSetupRequest, SessionSetupResponse,
};
use smb3_proto::msg::FileId;
use smb3_proto::{Cipher, Command, Dialect, NtStatus, SigningAlgorithm};

use crate::auth::{Authenticator, SessionCredentials};
use crate::channel::{Channel, Request, Response};
use crate::config::ClientConfig;
use crate::error::{
    decode, decode_ioctl, AuthDetail, AuthFailure, ConfigError, Error, ProtocolError, Result,
};
use crate::negotiated::Negotiated;
use crate::security::SessionSecurity;

/// Client capabilities this implementation honours.
pub(crate) fn client_capabilities(config: &ClientConfig) -> Capabilities {
    let mut c = Capabilities::LARGE_MTU | Capabilities::LEASING | Capabilities::MULTI_CHANNEL;
    if !config.ciphers.is_empty() {
        c |= Capabilities::ENCRYPTION;
    }
    Capabilities(c)
}

pub(crate) fn security_mode(config: &ClientConfig) -> SecurityMode {
    let mut m = SecurityMode::SIGNING_ENABLED;
    if config.require_signing {
        m |= SecurityMode::SIGNING_REQUIRED;
    }
    SecurityMode(m)
}

/// Send NEGOTIATE and check the answer (MS-SMB2 3.2.5.2).
pub(crate) async fn negotiate(
    channel: &Channel,
    config: &ClientConfig,
    client_guid: [u8; 16],
    server_name: &str,
) -> Result<Negotiated> {
    let dialects = config.dialects();
    if dialects.is_empty() && config.transport == crate::config::Transport::Quic {
        return Err(ConfigError::Setting {
            name: "max_dialect",
            reason: "SMB over QUIC carries dialect 3.1.1 only (MS-SMB2 2.1)",
        }
        .into());
    }
    if dialects.is_empty() {
        return Err(ConfigError::Setting {
            name: "dialects",
            reason: "min_dialect is above max_dialect",
        }
        .into());
    }
    let mut salt = [0u8; 32];
    rand::rng().fill_bytes(&mut salt);
    let body = NegotiateRequest {
        dialects: dialects.clone(),
        security_mode: security_mode(config),
        capabilities: client_capabilities(config),
        client_guid,
        preauth_salt: salt,
        ciphers: config.ciphers.clone(),
        signing_algorithms: config.signing_algorithms.clone(),
        server_name: Some(server_name.to_string()),
        posix_extensions: config.posix_extensions,
        transport_capabilities: offers_transport_security(channel, config).then_some(
            TransportFlags(TransportFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY),
        ),
    };
    let mut req = Request::new(&body);
    req.keep_sent = true;
    req.timeout = config.request_timeout;
    let resp = match channel.call(req).await?.check(&[]) {
        // A server that speaks none of the dialects offered says so (MS-SMB2 3.3.5.4).
        Err(Error::Status {
            status: NtStatus::NOT_SUPPORTED,
            ..
        }) => return Err(ConfigError::NoCommonDialect.into()),
        other => other?,
    };
    let decoded = NegotiateResponse::decode(&resp.msg).map_err(|source| ProtocolError::Decode {
        command: smb3_proto::Command::NEGOTIATE,
        source,
    })?;
    // MS-SMB2 3.2.5.2: the dialect must be one the client offered. One below the client's
    // lowest is what a man in the middle who rewrote the request's list would get.
    let dialect = match decoded.dialect {
        Some(d) if dialects.contains(&d) => d,
        _ => {
            return Err(ProtocolError::DialectNotOffered {
                chosen: decoded.dialect_revision,
                lowest: dialects[0],
                highest: dialects[dialects.len() - 1],
            }
            .into())
        }
    };
    let mut preauth = None;
    let mut cipher = None;
    let mut signing_algorithm = if dialect.is_smb3() {
        SigningAlgorithm::AesCmac
    } else {
        SigningAlgorithm::HmacSha256
    };
    if dialect == Dialect::Smb311 {
        // MS-SMB2 3.2.5.2: a 3.1.1 response must carry the preauth integrity context.
        let Some(p) = &decoded.contexts.preauth else {
            return Err(ProtocolError::NoPreauthIntegrity.into());
        };
        if p.hash_algorithm != smb3_proto::msg::negotiate::HASH_ALGORITHM_SHA512 {
            return Err(ProtocolError::UnknownPreauthHash(p.hash_algorithm).into());
        }
        let mut h = PreauthHash::new();
        h.update(resp.sent.as_deref().unwrap_or_default());
        h.update(&resp.msg);
        preauth = Some(h);
        cipher = offered_cipher(&decoded.contexts, config)?;
        if let Some(s) = offered_signing(&decoded.contexts, config)? {
            signing_algorithm = s;
        }
        if accepts_transport_security(&body, &decoded.contexts) {
            // Connection.AcceptTransportSecurity (MS-SMB2 3.2.5.2): the channel stops
            // sealing; it refuses to unless it is TLS to a verified server.
            let left = channel.leave_sealing_to_tls();
            tracing::debug!(left, "the server accepts QUIC's TLS in place of sealing");
        }
    } else if dialect.is_smb3()
        && Capabilities(decoded.capabilities.0).has(Capabilities::ENCRYPTION)
    {
        // 3.0 / 3.0.2 have exactly one cipher (MS-SMB2 3.2.5.2).
        cipher = Some(Cipher::Aes128Ccm);
    }
    Ok(Negotiated {
        dialect,
        server_guid: decoded.server_guid,
        server_capabilities: decoded.capabilities,
        server_security_mode: decoded.security_mode,
        max_read: decoded.max_read_size,
        max_write: decoded.max_write_size,
        max_transact: decoded.max_transact_size,
        cipher,
        signing_algorithm,
        preauth,
        gss_token: decoded.security_buffer,
        // Only an answer to our own question counts (a context we did not ask for is ignored,
        // as any unsolicited context is).
        posix_extensions: config.posix_extensions
            && dialect == Dialect::Smb311
            && decoded.contexts.posix_extensions,
    })
}

/// Whether NEGOTIATE offers SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY (MS-SMB2 2.2.3.1.5): only
/// on a channel that is TLS 1.3 to a server whose certificate was verified (QUIC; never TCP),
/// and not when the caller asked for SMB3 encryption itself (`config.encrypt`), which is
/// then done on top of TLS as asked.
fn offers_transport_security(channel: &Channel, config: &ClientConfig) -> bool {
    channel.verified_tls() && !config.encrypt
}

/// Whether the server accepted what `request` offered (MS-SMB2 2.2.4.1.5): the flag in the
/// response's SMB2_TRANSPORT_CAPABILITIES, to a request that offered it. A server's answer
/// to an offer never made counts for nothing.
fn accepts_transport_security(request: &NegotiateRequest, answer: &NegotiateContexts) -> bool {
    let accept = TransportFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY;
    request
        .transport_capabilities
        .is_some_and(|f| f.has(accept))
        && answer.transport_capabilities.is_some_and(|f| f.has(accept))
}

/// The cipher a 3.1.1 server chose: none when it sent no encryption context or cipher 0 (no
/// common cipher, MS-SMB2 2.2.4.1.2); an error when it is not one the client offered
/// (3.2.5.2).
fn offered_cipher(
    contexts: &smb3_proto::msg::negotiate::NegotiateContexts,
    config: &ClientConfig,
) -> Result<Option<Cipher>> {
    match contexts.cipher_id {
        None | Some(0) => Ok(None),
        Some(id) => match Cipher::from_id(id) {
            Some(c) if config.ciphers.contains(&c) => Ok(Some(c)),
            _ => Err(ProtocolError::CipherNotOffered(id).into()),
        },
    }
}

/// The signing algorithm a 3.1.1 server chose, when it sent one; an error when it is not one
/// the client offered (MS-SMB2 3.2.5.2). Without the context, AES-CMAC applies.
fn offered_signing(
    contexts: &smb3_proto::msg::negotiate::NegotiateContexts,
    config: &ClientConfig,
) -> Result<Option<SigningAlgorithm>> {
    match contexts.signing_algorithm_id {
        None => Ok(None),
        Some(id) => match SigningAlgorithm::from_id(id) {
            Some(a) if config.signing_algorithms.contains(&a) => Ok(Some(a)),
            _ => Err(ProtocolError::SigningAlgorithmNotOffered(id).into()),
        },
    }
}

/// An authenticated session on its first channel.
pub(crate) struct Established {
    pub(crate) session_id: u64,
    pub(crate) flags: SessionFlags,
    pub(crate) security: Option<Arc<SessionSecurity>>,
    /// The exchange that authenticated it was Kerberos (else NTLM, or none for a guest).
    pub(crate) kerberos: bool,
}

/// Where an authentication exchange ended.
struct Exchange {
    auth: Authenticator,
    session_id: u64,
    /// The final (SUCCESS) reply, not yet verified.
    last: crate::channel::Response,
    flags: SessionFlags,
    /// The preauth hash over every message of the exchange but the last reply (3.1.1).
    preauth: Option<PreauthHash>,
}

/// An existing session that an exchange authenticates again.
struct ExistingSession<'a> {
    session_id: u64,
    /// The session's keys: the server signs its MORE_PROCESSING replies to a binding or a
    /// reauthentication with Session.SigningKey (MS-SMB2 3.3.4.1.1, 3.2.5.1.3).
    session: &'a SessionSecurity,
}

/// What an authentication exchange is for.
enum Purpose<'a> {
    /// A new session (SessionId 0 in the first request).
    NewSession,
    /// Binding an existing session to a new connection (MS-SMB2 3.2.4.2.3.1): the requests
    /// carry SMB2_SESSION_FLAG_BINDING and are signed with Session.SigningKey.
    Binding(ExistingSession<'a>),
    /// Authenticating an existing session again on a connection it is bound to, after its
    /// ticket expired (MS-SMB2 3.2.4.2.3.1 "reauthenticating a user"): the requests are
    /// signed with the channel's own key like any other, and sealed when the session
    /// encrypts everything (`sealed`), since a server that requires encryption refuses an
    /// unencrypted one.
    Reauthentication {
        existing: ExistingSession<'a>,
        sealed: bool,
    },
}

impl<'a> Purpose<'a> {
    fn existing(&self) -> Option<&ExistingSession<'a>> {
        match self {
            Purpose::NewSession => None,
            Purpose::Binding(e) | Purpose::Reauthentication { existing: e, .. } => Some(e),
        }
    }
}

/// Run SESSION_SETUP rounds until the server says SUCCESS (MS-SMB2 3.2.5.3).
async fn exchange(
    channel: &Channel,
    negotiated: &Negotiated,
    creds: &SessionCredentials,
    server_name: &str,
    config: &ClientConfig,
    purpose: Purpose<'_>,
    previous_session_id: u64,
) -> Result<Exchange> {
    let mut auth = Authenticator::for_config(creds, server_name, config)?;
    let mut preauth = negotiated.preauth.clone();
    let mut session_id = purpose.existing().map_or(0, |e| e.session_id);
    let mut server_token: Bytes = negotiated.gss_token.clone();
    let mut first = true;
    loop {
        // sspi builds its own NegTokenInit; the server's initial token is informational.
        let input = if first {
            Bytes::new()
        } else {
            server_token.clone()
        };
        let (stepped, token) = auth.step_off_runtime(input).await?;
        auth = stepped;
        first = false;
        let Some(token) = token else {
            return Err(ProtocolError::AuthIncomplete.into());
        };
        let body = SessionSetupRequest {
            flags: SessionSetupFlags(if matches!(purpose, Purpose::Binding(_)) {
                SessionSetupFlags::BINDING
            } else {
                0
            }),
            security_mode: security_mode(config),
            capabilities: Capabilities(0),
            security_buffer: Bytes::from(token),
            previous_session_id,
        };
        let mut req = Request::new(&body);
        req.session_id = session_id;
        req.keep_sent = true;
        req.timeout = config.request_timeout;
        // A binding request must be signed (MS-SMB2 3.3.5.5); the channel signs with the
        // session's key installed for the exchange. A reauthentication is signed as every
        // request of the session is, with the channel's key.
        req.sign = purpose.existing().is_some();
        req.encrypt = matches!(purpose, Purpose::Reauthentication { sealed: true, .. });
        let resp = channel.call(req).await?;
        let status = resp.header.status;
        if status != NtStatus::SUCCESS && status != NtStatus::MORE_PROCESSING_REQUIRED {
            return Err(Error::Status {
                status,
                command: smb3_proto::Command::SESSION_SETUP,
                path: None,
            });
        }
        if let Some(b) = purpose.existing() {
            if resp.header.session_id != b.session_id {
                return Err(ProtocolError::SessionIdMismatch {
                    expected: b.session_id,
                    got: resp.header.session_id,
                }
                .into());
            }
            // Interim replies are signed with Session.SigningKey (MS-SMB2 3.3.4.1.1); a
            // sealed one was authenticated when it was opened.
            if status == NtStatus::MORE_PROCESSING_REQUIRED
                && !resp.sealed
                && resp.header.flags.has(smb3_proto::HeaderFlags::SIGNED)
                && !b.session.verify_message(&resp.msg)
            {
                return Err(ProtocolError::BadSignature {
                    command: smb3_proto::Command::SESSION_SETUP,
                    message_id: resp.header.message_id,
                }
                .into());
            }
        }
        session_id = resp.header.session_id;
        let decoded =
            SessionSetupResponse::decode(&resp.msg).map_err(|source| ProtocolError::Decode {
                command: smb3_proto::Command::SESSION_SETUP,
                source,
            })?;
        if let Some(h) = preauth.as_mut() {
            h.update(resp.sent.as_deref().unwrap_or_default());
            // MS-SMB2 3.2.5.3.1: the final SUCCESS response is not part of the hash.
            if status == NtStatus::MORE_PROCESSING_REQUIRED {
                h.update(&resp.msg);
            }
        }
        server_token = decoded.security_buffer.clone();
        if status == NtStatus::MORE_PROCESSING_REQUIRED {
            continue;
        }
        // SUCCESS: let the security package see the server's last token (the AP-REP of
        // Kerberos, the mechListMIC).
        if !server_token.is_empty() && !auth.is_complete() {
            auth = auth.step_off_runtime(server_token).await?.0;
        }
        // Kerberos asked for mutual authentication (RFC 4120 3.2.4): the exchange is complete
        // only once the AP-REP came back and verified under the ticket's session key, which
        // only the real server holds; its subkey is then the session key. A server that says
        // SUCCESS without one could be anyone, and the key sspi would hand out is not the
        // one the server settled on.
        if auth.uses_kerberos() && !auth.is_complete() {
            return Err(Error::Auth {
                kind: AuthFailure::MutualAuthentication,
                detail: AuthDetail::NoMutualAuthentication,
            });
        }
        return Ok(Exchange {
            auth,
            session_id,
            last: resp,
            flags: decoded.session_flags,
            preauth,
        });
    }
}

/// The final SESSION_SETUP reply is signed with the key just derived (MS-SMB2 3.2.5.3.1).
/// A binding's final reply must be signed (MS-SMB2 3.2.5.3.3); a new session's must be when
/// signing is required or the dialect is 3.1.1, and is checked whenever the server signs.
fn check_final_signature(
    sec: &SessionSecurity,
    last: &crate::channel::Response,
    must_be_signed: bool,
) -> Result<()> {
    let signed = last.header.flags.has(smb3_proto::HeaderFlags::SIGNED);
    if must_be_signed && !signed {
        return Err(ProtocolError::UnsignedReply {
            command: smb3_proto::Command::SESSION_SETUP,
            message_id: last.header.message_id,
        }
        .into());
    }
    if signed && !sec.verify_message(&last.msg) {
        return Err(ProtocolError::BadSignature {
            command: smb3_proto::Command::SESSION_SETUP,
            message_id: last.header.message_id,
        }
        .into());
    }
    Ok(())
}

/// Authenticate a new session on its first channel. `previous_session_id` is non-zero when
/// the session replaces one whose every connection was lost: the server then ends the old
/// one, leaving its durable opens for this session to reclaim (MS-SMB2 3.2.4.2.3, 3.3.5.5.3).
pub(crate) async fn session_setup(
    channel: &Channel,
    negotiated: &Negotiated,
    creds: &SessionCredentials,
    server_name: &str,
    config: &ClientConfig,
    previous_session_id: u64,
) -> Result<Established> {
    let ex = exchange(
        channel,
        negotiated,
        creds,
        server_name,
        config,
        Purpose::NewSession,
        previous_session_id,
    )
    .await?;
    let flags = ex.flags;
    let anonymous = flags.has(SessionFlags::IS_GUEST) || flags.has(SessionFlags::IS_NULL);
    if anonymous && !config.allow_guest {
        return Err(Error::Auth {
            kind: AuthFailure::GuestNotAllowed,
            detail: AuthDetail::MappedToGuest {
                user: creds.user.clone(),
            },
        });
    }
    // A guest session has no key: nothing it receives could be checked.
    if anonymous && config.require_signing {
        return Err(Error::Auth {
            kind: AuthFailure::NoSessionKey,
            detail: AuthDetail::GuestCannotSign {
                user: creds.user.clone(),
            },
        });
    }
    let security = if anonymous {
        None
    } else {
        let key = ex.auth.session_key()?;
        let sec = SessionSecurity::derive(
            negotiated,
            &key,
            ex.preauth.as_ref(),
            ex.session_id,
            must_sign(negotiated, config),
            config.key_log.as_ref(),
        )?;
        // MS-SMB2 3.2.5.3.1: on 3.1.1 the final reply must be signed; where signing is
        // required, it is too, since its SessionFlags (ENCRYPT_DATA) decide whether the rest
        // of the session is encrypted and must not be open to change on the way.
        check_final_signature(&sec, &ex.last, must_sign(negotiated, config))?;
        Some(Arc::new(sec))
    };
    Ok(Established {
        session_id: ex.session_id,
        flags,
        security,
        kerberos: ex.auth.uses_kerberos(),
    })
}

/// Bind the session `session_id` to a new connection (`channel`, already negotiated as
/// `negotiated`) and return that channel's own signing/sealing (MS-SMB2 3.2.4.2.3.1,
/// 3.2.5.3.3). The binding authenticates again as the same user; the channel's signing key
/// comes from that authentication's session key and, on 3.1.1, the new connection's own
/// preauth hash. Encryption keys stay the session's.
pub(crate) async fn bind_session(
    channel: &Channel,
    negotiated: &Negotiated,
    creds: &SessionCredentials,
    server_name: &str,
    config: &ClientConfig,
    session_id: u64,
    session: &Arc<SessionSecurity>,
) -> Result<Arc<SessionSecurity>> {
    // Sign the binding requests with Session.SigningKey (MS-SMB2 3.2.4.1.1).
    channel.set_crypto(session.clone());
    let binding = Purpose::Binding(ExistingSession {
        session_id,
        session: session.as_ref(),
    });
    let ex = exchange(channel, negotiated, creds, server_name, config, binding, 0).await?;
    // MS-SMB2 3.2.5.3.3: a binding that comes back as guest is not the same user.
    still_the_user(ex.flags)?;
    let key = ex.auth.session_key()?;
    let sec = Arc::new(session.for_channel(
        negotiated,
        &key,
        ex.preauth.as_ref(),
        config.key_log.as_ref(),
    )?);
    check_final_signature(&sec, &ex.last, true)?;
    channel.set_crypto(sec.clone());
    Ok(sec)
}

/// An exchange on an existing session (a binding, a reauthentication) that the server
/// answered as guest or anonymous no longer authenticates the session's user.
fn still_the_user(flags: SessionFlags) -> Result<()> {
    if flags.has(SessionFlags::IS_GUEST) || flags.has(SessionFlags::IS_NULL) {
        return Err(Error::Auth {
            kind: AuthFailure::GuestNotAllowed,
            detail: AuthDetail::BoundAsGuest,
        });
    }
    Ok(())
}

/// Authenticate the session `session_id` again on `channel`, one of its bound connections,
/// after the server said its authentication expired (MS-SMB2 3.2.4.2.3.1, 3.2.5.3.2): a new
/// GSS exchange with the user's current credentials (a Kerberos ticket is taken afresh from
/// the cache or keytab). The session's keys, channels, trees and opens stay as they are:
/// a reauthentication changes who the session is vouched for until, not its keys (the
/// server keeps them too, as Samba's `smbd_smb2_reauth_generic_return` shows). The server
/// keeps one expiry per session, so one reauthentication serves every channel.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn reauthenticate(
    channel: &Channel,
    negotiated: &Negotiated,
    creds: &SessionCredentials,
    server_name: &str,
    config: &ClientConfig,
    session_id: u64,
    session: &SessionSecurity,
    sealed: bool,
) -> Result<()> {
    let purpose = Purpose::Reauthentication {
        existing: ExistingSession {
            session_id,
            session,
        },
        sealed,
    };
    let ex = exchange(channel, negotiated, creds, server_name, config, purpose, 0).await?;
    // The session was authenticated as a user; coming back as a guest is someone else.
    still_the_user(ex.flags)?;
    // The final reply is signed with the channel's key (3.2.5.1.3), or came sealed, which
    // authenticated it already.
    if ex.last.sealed {
        return Ok(());
    }
    let signed = ex.last.header.flags.has(smb3_proto::HeaderFlags::SIGNED);
    if !signed {
        return Err(ProtocolError::UnsignedReply {
            command: Command::SESSION_SETUP,
            message_id: ex.last.header.message_id,
        }
        .into());
    }
    if !channel.verify_with_own_key(&ex.last.msg) {
        return Err(ProtocolError::BadSignature {
            command: Command::SESSION_SETUP,
            message_id: ex.last.header.message_id,
        }
        .into());
    }
    Ok(())
}

/// Whether replies must be signed: the client requires it (the default, as Windows 11 24H2
/// does), the server does (Session.SigningRequired, MS-SMB2 3.2.5.3.1), or the dialect is
/// 3.1.1. There the spec only demands a signed final SESSION_SETUP reply and lets the client
/// sign the rest (3.2.4.1.1, "MAY"); with AES-GMAC signing costs little (~30 GB/s per core,
/// docs/PERFORMANCE.md) and it protects every byte against tampering, so a 3.1.1 session
/// signs and checks everything even when the caller opted out of requiring it.
fn must_sign(negotiated: &Negotiated, config: &ClientConfig) -> bool {
    config.require_signing
        || negotiated
            .server_security_mode
            .has(SecurityMode::SIGNING_REQUIRED)
        || negotiated.dialect == Dialect::Smb311
}

/// FSCTL_VALIDATE_NEGOTIATE_INFO carrying exactly what NEGOTIATE sent (MS-SMB2 3.2.5.5).
pub(crate) fn validate_negotiate_request(
    config: &ClientConfig,
    client_guid: [u8; 16],
) -> IoctlRequest {
    let input = ValidateNegotiateInfoRequest {
        capabilities: client_capabilities(config),
        guid: client_guid,
        security_mode: security_mode(config),
        dialects: config.dialects(),
    }
    .encode();
    IoctlRequest::fsctl(FSCTL_VALIDATE_NEGOTIATE_INFO, FileId::ANY, input, 24)
}

/// The server's answer must match what it said in NEGOTIATE.
pub(crate) fn check_validate_negotiate(
    n: &Negotiated,
    request: &IoctlRequest,
    resp: &Response,
) -> Result<()> {
    // MS-SMB2 3.2.5.14.12: a reply neither signed nor encrypted ends the connection. A signed
    // one has been verified by the channel (the session has keys whenever this is sent).
    if !resp.sealed && !resp.header.flags.has(smb3_proto::HeaderFlags::SIGNED) {
        return Err(ProtocolError::UnprotectedNegotiateValidation.into());
    }
    let out = decode_ioctl(request, &resp.msg)?;
    let v = decode(
        Command::IOCTL,
        ValidateNegotiateInfoResponse::decode(&out.output),
    )?;
    if v.dialect != n.dialect.code()
        || v.guid != n.server_guid
        || v.security_mode.0 != n.server_security_mode.0
        || v.capabilities.0 != n.server_capabilities.0
    {
        return Err(Error::Protocol(ProtocolError::NegotiateValidation));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};
    use smb3_proto::header::{Header, HeaderFlags, HEADER_LEN};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;
    use crate::channel::ChannelOptions;
    use crate::config::Transport;

    /// The ContextType of each negotiate context of a NEGOTIATE request (MS-SMB2 2.2.3), in
    /// wire order.
    fn context_types(msg: &[u8]) -> Vec<u16> {
        let u16_at = |at: usize| u16::from_le_bytes([msg[at], msg[at + 1]]);
        let body = HEADER_LEN;
        let offset = u32::from_le_bytes(msg[body + 28..body + 32].try_into().unwrap()) as usize;
        let mut pos = offset;
        let mut types = Vec::new();
        for i in 0..u16_at(body + 32) {
            if i > 0 {
                pos = pos.next_multiple_of(8);
            }
            types.push(u16_at(pos));
            pos += 8 + usize::from(u16_at(pos + 2));
        }
        types
    }

    /// A 3.1.1 NEGOTIATE response to `req` (MS-SMB2 2.2.4): the preauth context and, when
    /// `transport` is given, SMB2_TRANSPORT_CAPABILITIES with those Flags.
    fn response(req: &Header, transport: Option<u32>) -> BytesMut {
        let mut msg = BytesMut::new();
        Header {
            command: Command::NEGOTIATE,
            credits: 1,
            flags: HeaderFlags(HeaderFlags::SERVER_TO_REDIR),
            message_id: req.message_id,
            ..Header::default()
        }
        .encode(&mut msg);
        msg.put_u16_le(65);
        msg.put_u16_le(SecurityMode::SIGNING_ENABLED);
        msg.put_u16_le(Dialect::Smb311.code());
        msg.put_u16_le(1 + u16::from(transport.is_some()));
        msg.put_slice(&[7; 16]);
        msg.put_u32_le(Capabilities::LARGE_MTU);
        for _ in 0..3 {
            msg.put_u32_le(8 << 20);
        }
        msg.put_u64_le(0);
        msg.put_u64_le(0);
        msg.put_u16_le(0); // SecurityBufferOffset
        msg.put_u16_le(0); // SecurityBufferLength
        msg.put_u32_le(128); // NegotiateContextOffset: right after the fixed part
        msg.put_u16_le(1);
        msg.put_u16_le(38);
        msg.put_u32_le(0);
        msg.put_u16_le(1);
        msg.put_u16_le(32);
        msg.put_u16_le(smb3_proto::msg::negotiate::HASH_ALGORITHM_SHA512);
        msg.put_slice(&[9; 32]);
        if let Some(flags) = transport {
            msg.put_u16_le(0); // to 8-byte alignment
            msg.put_u16_le(6);
            msg.put_u16_le(4);
            msg.put_u32_le(0);
            msg.put_u32_le(flags);
        }
        msg
    }

    async fn read_frame(io: &mut DuplexStream) -> Vec<u8> {
        let mut len = [0u8; 4];
        io.read_exact(&mut len).await.unwrap();
        let mut msg = vec![0u8; u32::from_be_bytes(len) as usize];
        io.read_exact(&mut msg).await.unwrap();
        msg
    }

    /// What one NEGOTIATE did over an in-memory stream, TLS to a verified server or not,
    /// against a server that answers with `answer` as its transport Flags.
    struct Outcome {
        /// The request's negotiate context types.
        sent: Vec<u16>,
        /// The request's dialects.
        dialects: Vec<u16>,
        /// The channel leaves sealing to TLS afterwards.
        sealing_left_to_tls: bool,
    }

    async fn negotiate_over(
        verified_tls: bool,
        config: &ClientConfig,
        answer: Option<u32>,
    ) -> Outcome {
        let (client_io, mut server_io) = tokio::io::duplex(1 << 16);
        let (rd, wr) = tokio::io::split(client_io);
        let addr = "127.0.0.1:443".parse().unwrap();
        let opts = ChannelOptions::default();
        let (channel, _unsolicited) = if verified_tls {
            Channel::start_verified_tls(rd, wr, addr, addr, &opts)
        } else {
            Channel::start(rd, wr, addr, addr, &opts)
        };
        let server = tokio::spawn(async move {
            let msg = read_frame(&mut server_io).await;
            let req = Header::decode(&msg).unwrap();
            let reply = response(&req, answer);
            server_io
                .write_all(&(reply.len() as u32).to_be_bytes())
                .await
                .unwrap();
            server_io.write_all(&reply).await.unwrap();
            let count = u16::from_le_bytes([msg[HEADER_LEN + 2], msg[HEADER_LEN + 3]]);
            let dialects = (0..usize::from(count))
                .map(|i| {
                    let at = HEADER_LEN + 36 + 2 * i;
                    u16::from_le_bytes([msg[at], msg[at + 1]])
                })
                .collect();
            (context_types(&msg), dialects, server_io)
        });
        negotiate(&channel, config, [1; 16], "srv").await.unwrap();
        let (sent, dialects, _open) = server.await.unwrap();
        Outcome {
            sent,
            dialects,
            sealing_left_to_tls: channel.sealing_left_to_tls(),
        }
    }

    fn quic() -> ClientConfig {
        ClientConfig {
            transport: Transport::Quic,
            ..ClientConfig::default()
        }
    }

    const TRANSPORT: u16 = 6;
    const ACCEPT: Option<u32> = Some(TransportFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY);

    /// Over TCP the context is never sent, whatever the configuration says, and a server
    /// that answers with the flag all the same changes nothing: sealing stays.
    #[tokio::test]
    async fn over_tcp_transport_security_is_never_offered_nor_taken() {
        for config in [ClientConfig::default(), quic()] {
            let out = negotiate_over(false, &config, ACCEPT).await;
            assert!(!out.sent.contains(&TRANSPORT), "{:?}", out.sent);
            assert!(!out.sealing_left_to_tls);
        }
    }

    /// Over TLS to a verified server the context is offered, and sealing is left to TLS
    /// only when the server answers with the flag; a caller who asked for encryption
    /// (`encrypt`) gets it on top of TLS and offers nothing.
    #[tokio::test]
    async fn over_verified_tls_sealing_is_left_to_tls_only_when_the_server_accepts() {
        let out = negotiate_over(true, &quic(), ACCEPT).await;
        assert!(out.sent.contains(&TRANSPORT), "{:?}", out.sent);
        assert!(out.sealing_left_to_tls);
        for answer in [None, Some(0), Some(0x8000_0000)] {
            let out = negotiate_over(true, &quic(), answer).await;
            assert!(out.sent.contains(&TRANSPORT));
            assert!(!out.sealing_left_to_tls, "answer {answer:?}");
        }
        let mut encrypt = quic();
        encrypt.encrypt = true;
        let out = negotiate_over(true, &encrypt, ACCEPT).await;
        assert!(!out.sent.contains(&TRANSPORT), "{:?}", out.sent);
        assert!(!out.sealing_left_to_tls);
    }

    /// Over QUIC only 3.1.1 is offered (MS-SMB2 2.1), and a configuration that rules it out
    /// is refused before anything is sent.
    #[tokio::test]
    async fn over_quic_only_311_is_offered() {
        let out = negotiate_over(true, &quic(), None).await;
        assert_eq!(out.dialects, vec![Dialect::Smb311.code()]);
        let out = negotiate_over(false, &ClientConfig::default(), None).await;
        assert!(out.dialects.len() > 1, "{:?}", out.dialects);
        let mut old = quic();
        old.max_dialect = Dialect::Smb302;
        assert!(old.dialects().is_empty());
        let (client_io, _server_io) = tokio::io::duplex(1 << 16);
        let (rd, wr) = tokio::io::split(client_io);
        let addr = "127.0.0.1:443".parse().unwrap();
        let (channel, _u) =
            Channel::start_verified_tls(rd, wr, addr, addr, &ChannelOptions::default());
        let e = negotiate(&channel, &old, [1; 16], "srv").await.unwrap_err();
        assert!(e.to_string().contains("3.1.1 only"), "{e}");
    }
}
