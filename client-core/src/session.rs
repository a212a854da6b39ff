//! Session establishment over a channel: NEGOTIATE (MS-SMB2 3.2.4.2.2), SESSION_SETUP with
//! SPNEGO (3.2.4.2.3, 3.2.5.3), key derivation and the installation of signing and sealing.

use std::sync::Arc;

use bytes::Bytes;
use rand::RngCore;
use smb3_proto::crypto::preauth::PreauthHash;
use smb3_proto::msg::negotiate::{Capabilities, NegotiateRequest, NegotiateResponse, SecurityMode};
use smb3_proto::msg::session_setup::{
    SessionFlags, SessionSetupFlags, SessionSetupRequest, SessionSetupResponse,
};
use smb3_proto::{Cipher, Dialect, NtStatus, SigningAlgorithm};

use crate::auth::{Authenticator, UserCredentials};
use crate::channel::{Channel, Request};
use crate::config::ClientConfig;
use crate::error::{AuthFailure, ConfigError, Error, ProtocolError, Result};
use crate::security::SessionSecurity;

/// What NEGOTIATE settled for one connection.
#[derive(Clone, Debug)]
pub(crate) struct Negotiated {
    pub(crate) dialect: Dialect,
    pub(crate) server_guid: [u8; 16],
    pub(crate) server_capabilities: Capabilities,
    pub(crate) server_security_mode: SecurityMode,
    pub(crate) max_read: u32,
    pub(crate) max_write: u32,
    pub(crate) max_transact: u32,
    pub(crate) cipher: Option<Cipher>,
    pub(crate) signing_algorithm: SigningAlgorithm,
    /// The connection's preauth integrity hash after NEGOTIATE (3.1.1 only).
    pub(crate) preauth: Option<PreauthHash>,
    /// The server's initial SPNEGO token.
    pub(crate) gss_token: Bytes,
}

/// Client capabilities this implementation honours.
fn client_capabilities(config: &ClientConfig) -> Capabilities {
    let mut c = Capabilities::LARGE_MTU | Capabilities::LEASING | Capabilities::MULTI_CHANNEL;
    if !config.ciphers.is_empty() {
        c |= Capabilities::ENCRYPTION;
    }
    Capabilities(c)
}

fn security_mode(config: &ClientConfig) -> SecurityMode {
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
    };
    let mut req = Request::new(&body);
    req.keep_sent = true;
    req.timeout = config.request_timeout;
    let resp = channel.call(req).await?.check(&[])?;
    let decoded = NegotiateResponse::decode(&resp.msg).map_err(|source| ProtocolError::Decode {
        command: smb3_proto::Command::NEGOTIATE,
        source,
    })?;
    let dialect = match decoded.dialect {
        Some(d) if dialects.contains(&d) => d,
        _ => return Err(ConfigError::NoCommonDialect.into()),
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
            return Err(
                ProtocolError::Unexpected("3.1.1 NEGOTIATE without preauth context").into(),
            );
        };
        if p.hash_algorithm != smb3_proto::msg::negotiate::HASH_ALGORITHM_SHA512 {
            return Err(ProtocolError::Unexpected("unsupported preauth hash algorithm").into());
        }
        let mut h = PreauthHash::new();
        h.update(resp.sent.as_deref().unwrap_or_default());
        h.update(&resp.msg);
        preauth = Some(h);
        cipher = decoded.contexts.cipher();
        if let Some(s) = decoded.contexts.signing_algorithm() {
            signing_algorithm = s;
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
    })
}

/// An authenticated session on its first channel.
pub(crate) struct Established {
    pub(crate) session_id: u64,
    pub(crate) flags: SessionFlags,
    pub(crate) security: Option<Arc<SessionSecurity>>,
}

/// Run SESSION_SETUP rounds until the server says SUCCESS (MS-SMB2 3.2.5.3).
pub(crate) async fn session_setup(
    channel: &Channel,
    negotiated: &Negotiated,
    creds: &UserCredentials,
    server_name: &str,
    config: &ClientConfig,
) -> Result<Established> {
    let mut auth = Authenticator::ntlm(creds, server_name)?;
    let mut preauth = negotiated.preauth.clone();
    let mut session_id = 0u64;
    let mut server_token: Bytes = negotiated.gss_token.clone();
    let mut first = true;
    loop {
        // sspi builds its own NegTokenInit; the server's initial token is informational.
        let token = auth.step(if first { &[] } else { &server_token })?;
        first = false;
        let Some(token) = token else {
            return Err(ProtocolError::Unexpected(
                "authentication ended before the server accepted it",
            )
            .into());
        };
        let body = SessionSetupRequest {
            flags: SessionSetupFlags(0),
            security_mode: security_mode(config),
            capabilities: Capabilities(0),
            security_buffer: Bytes::from(token),
            previous_session_id: 0,
        };
        let mut req = Request::new(&body);
        req.session_id = session_id;
        req.keep_sent = true;
        req.timeout = config.request_timeout;
        let resp = channel.call(req).await?;
        let status = resp.header.status;
        if status != NtStatus::SUCCESS && status != NtStatus::MORE_PROCESSING_REQUIRED {
            return Err(Error::Status {
                status,
                command: smb3_proto::Command::SESSION_SETUP,
                path: None,
            });
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
        // SUCCESS: let the security package see the server's last token (mechListMIC).
        if !server_token.is_empty() && !auth.is_complete() {
            auth.step(&server_token)?;
        }
        let flags = decoded.session_flags;
        let anonymous = flags.has(SessionFlags::IS_GUEST) || flags.has(SessionFlags::IS_NULL);
        if anonymous && !config.allow_guest {
            return Err(Error::Auth {
                kind: AuthFailure::GuestNotAllowed,
                detail: format!("user {:?} was mapped to guest", creds.user),
            });
        }
        let security = if anonymous {
            None
        } else {
            let key = auth.session_key()?;
            let sec = SessionSecurity::derive(
                negotiated,
                &key,
                preauth.as_ref(),
                session_id,
                must_sign(negotiated, config),
            )?;
            // The final response is signed with the new key (MS-SMB2 3.2.5.3.1).
            if resp.header.flags.has(smb3_proto::HeaderFlags::SIGNED)
                && !sec.verify_message(&resp.msg)
            {
                return Err(ProtocolError::BadSignature {
                    command: smb3_proto::Command::SESSION_SETUP,
                    message_id: resp.header.message_id,
                }
                .into());
            }
            Some(Arc::new(sec))
        };
        return Ok(Established {
            session_id,
            flags,
            security,
        });
    }
}

/// Whether replies must be signed: the server or the client requires it, and always on 3.1.1
/// (MS-SMB2 3.2.5.3.1: 3.1.1 signs every message of an authenticated session).
fn must_sign(negotiated: &Negotiated, config: &ClientConfig) -> bool {
    config.require_signing
        || negotiated
            .server_security_mode
            .has(SecurityMode::SIGNING_REQUIRED)
        || negotiated.dialect == Dialect::Smb311
}
