//! NEGOTIATE (MS-SMB2 3.3.5.4): the highest dialect both speak, and on 3.1.1 the preauth
//! integrity, cipher and signing contexts.

use bytes::{BufMut, BytesMut};
use smb3_proto::{Cipher, Dialect, Header, NtStatus, SigningAlgorithm};

use crate::connection::{Conn, Negotiated};
use crate::files::filetime_now;
use crate::reply::{error_body, reply_message, MessageOutcome};
use crate::wire::{pad, slice_at, Fields};

const SIGNING_ENABLED: u16 = 0x0001;
const SIGNING_REQUIRED: u16 = 0x0002;
const CAP_LARGE_MTU: u32 = 0x0000_0004;
const CAP_MULTI_CHANNEL: u32 = 0x0000_0008;
const CAP_ENCRYPTION: u32 = 0x0000_0040;

const PREAUTH_INTEGRITY: u16 = 0x0001;
const ENCRYPTION: u16 = 0x0002;
const SIGNING: u16 = 0x0008;
const SHA512: u16 = 0x0001;

/// What the client's request said that the reply depends on.
struct Offer {
    dialects: Vec<u16>,
    security_mode: u16,
    capabilities: u32,
    client_guid: [u8; 16],
    has_sha512: bool,
    ciphers: Option<Vec<u16>>,
    signing: Option<Vec<u16>>,
}

fn parse(msg: &[u8]) -> Result<Offer, NtStatus> {
    let mut f = Fields::body(msg);
    f.structure_size(36)?;
    let count = f.u16()? as usize;
    let security_mode = f.u16()?;
    f.skip(2)?;
    let capabilities = f.u32()?;
    let client_guid = f.array::<16>()?;
    let context_offset = f.u32()? as usize;
    let context_count = f.u16()? as usize;
    f.skip(2)?;
    let dialects = (0..count).map(|_| f.u16()).collect::<Result<Vec<_>, _>>()?;
    let mut offer = Offer {
        dialects,
        security_mode,
        capabilities,
        client_guid,
        has_sha512: false,
        ciphers: None,
        signing: None,
    };
    if !offer.dialects.contains(&Dialect::Smb311.code()) {
        return Ok(offer);
    }
    let mut at = context_offset;
    for _ in 0..context_count {
        at = at.next_multiple_of(8);
        let head = slice_at(msg, at, 8)?;
        let kind = u16::from_le_bytes([head[0], head[1]]);
        let len = u16::from_le_bytes([head[2], head[3]]) as usize;
        let data = slice_at(msg, at + 8, len)?;
        // A count, then (after `skip` more bytes) that many 16-bit ids.
        let list = |data: &[u8], skip: usize| -> Result<Vec<u16>, NtStatus> {
            let n = u16::from_le_bytes(
                data.get(..2)
                    .ok_or(NtStatus::INVALID_PARAMETER)?
                    .try_into()
                    .unwrap_or_default(),
            ) as usize;
            (0..n)
                .map(|i| {
                    data.get(2 + skip + 2 * i..4 + skip + 2 * i)
                        .map(|b| u16::from_le_bytes([b[0], b[1]]))
                        .ok_or(NtStatus::INVALID_PARAMETER)
                })
                .collect()
        };
        match kind {
            // HashAlgorithmCount, SaltLength, then the algorithms.
            PREAUTH_INTEGRITY => offer.has_sha512 = list(data, 2)?.contains(&SHA512),
            ENCRYPTION => offer.ciphers = Some(list(data, 0)?),
            SIGNING => offer.signing = Some(list(data, 0)?),
            _ => {}
        }
        at += 8 + len;
    }
    Ok(offer)
}

impl Conn {
    pub(crate) fn negotiate(&mut self, msg: &[u8], header: &Header) -> MessageOutcome {
        // MS-SMB2 3.3.5.3.1: a second NEGOTIATE on a connection ends it.
        if self.negotiated.is_some() {
            return MessageOutcome::Cut;
        }
        let offer = match parse(msg) {
            Ok(o) => o,
            Err(status) => return self.negotiate_error(header, status),
        };
        let config = &self.shared.config;
        let chosen = [
            Dialect::Smb311,
            Dialect::Smb302,
            Dialect::Smb300,
            Dialect::Smb210,
        ]
        .into_iter()
        .filter(|d| d.code() <= config.max_dialect.code())
        .find(|d| offer.dialects.contains(&d.code()));
        let Some(dialect) = chosen else {
            return self.negotiate_error(header, NtStatus::NOT_SUPPORTED);
        };
        if dialect == Dialect::Smb311 && !offer.has_sha512 {
            return self.negotiate_error(header, NtStatus::INVALID_PARAMETER);
        }
        let mut security_mode = SIGNING_ENABLED;
        if config.require_signing {
            security_mode |= SIGNING_REQUIRED;
        }
        let mut capabilities = CAP_LARGE_MTU;
        if config.multichannel && dialect.is_smb3() {
            capabilities |= CAP_MULTI_CHANNEL;
        }
        let mut cipher = None;
        let mut signing = if dialect == Dialect::Smb210 {
            SigningAlgorithm::HmacSha256
        } else {
            SigningAlgorithm::AesCmac
        };
        let mut contexts = Vec::new();
        if dialect == Dialect::Smb311 {
            let mut salt = [0u8; 32];
            rand::RngCore::fill_bytes(&mut rand::rng(), &mut salt);
            let mut preauth = BytesMut::new();
            preauth.put_u16_le(1);
            preauth.put_u16_le(salt.len() as u16);
            preauth.put_u16_le(SHA512);
            preauth.put_slice(&salt);
            contexts.push((PREAUTH_INTEGRITY, preauth));
            if let Some(offered) = &offer.ciphers {
                // Cipher 0 says "no common cipher" (MS-SMB2 2.2.4.1.2).
                let pick = offered
                    .iter()
                    .copied()
                    .find(|id| config.encryption && Cipher::from_id(*id).is_some())
                    .unwrap_or(0);
                cipher = Cipher::from_id(pick);
                contexts.push((ENCRYPTION, one_id(pick)));
            }
            if let Some(offered) = &offer.signing {
                if let Some(pick) = offered.iter().find_map(|id| SigningAlgorithm::from_id(*id)) {
                    signing = pick;
                    contexts.push((SIGNING, one_id(pick.id())));
                }
            }
        } else if dialect.is_smb3() && config.encryption && offer.capabilities & CAP_ENCRYPTION != 0
        {
            capabilities |= CAP_ENCRYPTION;
            cipher = Some(Cipher::Aes128Ccm);
        }

        let mut body = BytesMut::new();
        body.put_u16_le(65);
        body.put_u16_le(security_mode);
        body.put_u16_le(dialect.code());
        body.put_u16_le(contexts.len() as u16);
        body.put_slice(&self.shared.server_guid);
        body.put_u32_le(capabilities);
        body.put_u32_le(config.max_io);
        body.put_u32_le(config.max_io);
        body.put_u32_le(config.max_io);
        body.put_u64_le(filetime_now());
        body.put_u64_le(0);
        // No initial SPNEGO hint: the client starts the exchange itself.
        body.put_u16_le(crate::wire::body_offset(64));
        body.put_u16_le(0);
        let context_offset_at = body.len();
        body.put_u32_le(0);
        if !contexts.is_empty() {
            let offset = crate::wire::body_offset(body.len());
            body[context_offset_at..context_offset_at + 4]
                .copy_from_slice(&u32::from(offset).to_le_bytes());
            let count = contexts.len();
            for (i, (kind, data)) in contexts.into_iter().enumerate() {
                body.put_u16_le(kind);
                body.put_u16_le(data.len() as u16);
                body.put_u32_le(0);
                body.put_slice(&data);
                if i + 1 < count {
                    pad(&mut body, 8);
                }
            }
        }
        let reply = reply_message(header, NtStatus::SUCCESS, &body, 0, 0, false);
        if dialect == Dialect::Smb311 {
            self.preauth.update(msg);
            self.preauth.update(&reply);
        }
        self.negotiated = Some(Negotiated {
            dialect,
            signing,
            cipher,
            client_guid: offer.client_guid,
            client_security_mode: offer.security_mode,
            client_capabilities: offer.capabilities,
            client_dialects: offer.dialects,
            server_security_mode: security_mode,
            server_capabilities: capabilities,
        });
        MessageOutcome::reply(reply, None)
    }

    fn negotiate_error(&self, header: &Header, status: NtStatus) -> MessageOutcome {
        let reply = reply_message(header, status, &error_body(), 0, 0, false);
        MessageOutcome::reply(reply, None)
    }
}

/// A context naming exactly one algorithm: a count of 1 and the id.
fn one_id(id: u16) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u16_le(1);
    b.put_u16_le(id);
    b
}
