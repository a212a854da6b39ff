//! MS-SMB2 2.2.3 SMB2 NEGOTIATE Request and 2.2.4 SMB2 NEGOTIATE Response, including the
//! SMB 3.1.1 negotiate contexts (2.2.3.1, 2.2.4.1).
//!
//! The preauthentication integrity hash (MS-SMB2 3.2.5.2) covers the exact bytes of the whole
//! request and response messages; the caller hashes those, nothing here needs to keep them.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{bytes_at, pad_to, put_utf16le, utf16le_len, DecodeError, Reader};
use crate::dialect::{Cipher, Dialect, SigningAlgorithm};
use crate::header::{Command, HEADER_LEN};
use crate::msg::RequestBody;

/// SecurityMode bits (MS-SMB2 2.2.3). 16 bits wide in NEGOTIATE and VALIDATE_NEGOTIATE_INFO,
/// 8 bits wide in SESSION_SETUP (same values).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct SecurityMode(pub u16);

impl SecurityMode {
    /// SMB2_NEGOTIATE_SIGNING_ENABLED.
    pub const SIGNING_ENABLED: u16 = 0x0001;
    /// SMB2_NEGOTIATE_SIGNING_REQUIRED.
    pub const SIGNING_REQUIRED: u16 = 0x0002;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u16) -> bool {
        self.0 & flag == flag
    }
}

/// Global capabilities (MS-SMB2 2.2.3 / 2.2.4 Capabilities).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Capabilities(pub u32);

impl Capabilities {
    /// SMB2_GLOBAL_CAP_DFS.
    pub const DFS: u32 = 0x0000_0001;
    /// SMB2_GLOBAL_CAP_LEASING.
    pub const LEASING: u32 = 0x0000_0002;
    /// SMB2_GLOBAL_CAP_LARGE_MTU (multi-credit requests).
    pub const LARGE_MTU: u32 = 0x0000_0004;
    /// SMB2_GLOBAL_CAP_MULTI_CHANNEL.
    pub const MULTI_CHANNEL: u32 = 0x0000_0008;
    /// SMB2_GLOBAL_CAP_PERSISTENT_HANDLES.
    pub const PERSISTENT_HANDLES: u32 = 0x0000_0010;
    /// SMB2_GLOBAL_CAP_DIRECTORY_LEASING.
    pub const DIRECTORY_LEASING: u32 = 0x0000_0020;
    /// SMB2_GLOBAL_CAP_ENCRYPTION (meaningful for 3.0/3.0.2; 3.1.1 uses the encryption context).
    pub const ENCRYPTION: u32 = 0x0000_0040;
    /// SMB2_GLOBAL_CAP_NOTIFICATIONS.
    pub const NOTIFICATIONS: u32 = 0x0000_0080;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// Negotiate context type (MS-SMB2 2.2.3.1 ContextType). A newtype so unknown types survive.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct NegotiateContextType(pub u16);

impl NegotiateContextType {
    /// SMB2_PREAUTH_INTEGRITY_CAPABILITIES (2.2.3.1.1).
    pub const PREAUTH_INTEGRITY_CAPABILITIES: Self = Self(0x0001);
    /// SMB2_ENCRYPTION_CAPABILITIES (2.2.3.1.2).
    pub const ENCRYPTION_CAPABILITIES: Self = Self(0x0002);
    /// SMB2_COMPRESSION_CAPABILITIES (2.2.3.1.3).
    pub const COMPRESSION_CAPABILITIES: Self = Self(0x0003);
    /// SMB2_NETNAME_NEGOTIATE_CONTEXT_ID (2.2.3.1.4).
    pub const NETNAME_NEGOTIATE_CONTEXT_ID: Self = Self(0x0005);
    /// SMB2_TRANSPORT_CAPABILITIES (2.2.3.1.5).
    pub const TRANSPORT_CAPABILITIES: Self = Self(0x0006);
    /// SMB2_RDMA_TRANSFORM_CAPABILITIES (2.2.3.1.6).
    pub const RDMA_TRANSFORM_CAPABILITIES: Self = Self(0x0007);
    /// SMB2_SIGNING_CAPABILITIES (2.2.3.1.7).
    pub const SIGNING_CAPABILITIES: Self = Self(0x0008);
    /// SMB3_POSIX_EXTENSIONS_AVAILABLE ([POSIX-SMB2] 2.2.3.1.8; see [`super::posix`]).
    pub const POSIX_EXTENSIONS_AVAILABLE: Self = Self(super::posix::POSIX_EXTENSIONS_AVAILABLE);
}

/// Flags of SMB2_TRANSPORT_CAPABILITIES (MS-SMB2 2.2.3.1.5 in a request, 2.2.4.1.5 in a
/// response). Unknown bits are kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct TransportFlags(pub u32);

impl TransportFlags {
    /// SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY: in a request, the client offers to rely on the
    /// transport's own security (QUIC's TLS 1.3) instead of SMB3 encryption; in a response,
    /// the server agrees, and the connection is not sealed.
    pub const ACCEPT_TRANSPORT_LEVEL_SECURITY: u32 = 0x0000_0001;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// Preauthentication integrity hash algorithm SHA-512 (MS-SMB2 2.2.3.1.1), the only one defined.
pub const HASH_ALGORITHM_SHA512: u16 = 0x0001;

/// Length of the salt this client sends in its preauth integrity context (Windows and Samba use
/// 32 bytes too).
pub const PREAUTH_SALT_LEN: usize = 32;

/// End of the fixed part of both NEGOTIATE structures, measured from the start of the message.
const REQUEST_FIXED_END: usize = HEADER_LEN + 36;
const RESPONSE_FIXED_END: usize = HEADER_LEN + 64;
/// Size of the SMB2_NEGOTIATE_CONTEXT header (ContextType, DataLength, Reserved).
const CONTEXT_HEADER_LEN: usize = 8;

/// MS-SMB2 2.2.3 SMB2 NEGOTIATE Request.
///
/// The 3.1.1 negotiate contexts (2.2.3.1) are sent only when `dialects` contains 3.1.1; then
/// the preauth integrity context is always present, the encryption and signing contexts when
/// their lists are non-empty, the netname context when `server_name` is set, and the
/// transport capabilities context when `transport_capabilities` is. Without 3.1.1 the
/// ClientStartTime field is sent as 0 and no context is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NegotiateRequest {
    /// Dialects offered, in the order written on the wire.
    pub dialects: Vec<Dialect>,
    /// Signing enabled / required.
    pub security_mode: SecurityMode,
    /// Client capabilities.
    pub capabilities: Capabilities,
    /// ClientGuid: one per client, the same on every channel of a multichannel session.
    pub client_guid: [u8; 16],
    /// Random salt for the SHA-512 preauth integrity context (the caller supplies fresh random
    /// bytes for each connection).
    pub preauth_salt: [u8; PREAUTH_SALT_LEN],
    /// Ciphers for SMB2_ENCRYPTION_CAPABILITIES, most preferred first. Empty: no context.
    pub ciphers: Vec<Cipher>,
    /// Algorithms for SMB2_SIGNING_CAPABILITIES, most preferred first. Empty: no context.
    pub signing_algorithms: Vec<SigningAlgorithm>,
    /// Server name for SMB2_NETNAME_NEGOTIATE_CONTEXT_ID (UTF-16LE, no terminator).
    pub server_name: Option<String>,
    /// Ask for the SMB3 POSIX extensions (the SMB3_POSIX_EXTENSIONS_AVAILABLE context).
    pub posix_extensions: bool,
    /// Flags for SMB2_TRANSPORT_CAPABILITIES (2.2.3.1.5). `None`: no context. The caller
    /// sends it only on a transport that is itself secure (QUIC with a verified server).
    pub transport_capabilities: Option<TransportFlags>,
}

impl NegotiateRequest {
    fn offers_311(&self) -> bool {
        self.dialects.contains(&Dialect::Smb311)
    }

    /// The contexts this request carries, as (type, data) pairs in wire order.
    fn contexts(&self) -> Vec<(NegotiateContextType, BytesMut)> {
        let mut out = Vec::new();
        if !self.offers_311() {
            return out;
        }

        let mut preauth = BytesMut::with_capacity(6 + PREAUTH_SALT_LEN);
        preauth.put_u16_le(1); // HashAlgorithmCount
        preauth.put_u16_le(PREAUTH_SALT_LEN as u16); // SaltLength
        preauth.put_u16_le(HASH_ALGORITHM_SHA512);
        preauth.put_slice(&self.preauth_salt);
        out.push((
            NegotiateContextType::PREAUTH_INTEGRITY_CAPABILITIES,
            preauth,
        ));

        if !self.ciphers.is_empty() {
            let mut enc = BytesMut::new();
            enc.put_u16_le(self.ciphers.len() as u16);
            for c in &self.ciphers {
                enc.put_u16_le(c.id());
            }
            out.push((NegotiateContextType::ENCRYPTION_CAPABILITIES, enc));
        }

        if !self.signing_algorithms.is_empty() {
            let mut sig = BytesMut::new();
            sig.put_u16_le(self.signing_algorithms.len() as u16);
            for a in &self.signing_algorithms {
                sig.put_u16_le(a.id());
            }
            out.push((NegotiateContextType::SIGNING_CAPABILITIES, sig));
        }

        if let Some(name) = &self.server_name {
            let mut net = BytesMut::with_capacity(utf16le_len(name));
            put_utf16le(&mut net, name);
            out.push((NegotiateContextType::NETNAME_NEGOTIATE_CONTEXT_ID, net));
        }

        if let Some(flags) = self.transport_capabilities {
            let mut transport = BytesMut::with_capacity(4);
            transport.put_u32_le(flags.0);
            out.push((NegotiateContextType::TRANSPORT_CAPABILITIES, transport));
        }

        if self.posix_extensions {
            let tag = BytesMut::from(&super::posix::POSIX_CREATE_CONTEXT_TAG[..]);
            out.push((NegotiateContextType::POSIX_EXTENSIONS_AVAILABLE, tag));
        }
        out
    }
}

impl RequestBody for NegotiateRequest {
    const COMMAND: Command = Command::NEGOTIATE;

    fn encode_body(&self, msg: &mut BytesMut) {
        let contexts = self.contexts();
        // Where the context list will start: after the dialects, padded to 8 bytes from the
        // start of the header (MS-SMB2 2.2.3: NegotiateContextOffset is 8-byte aligned).
        let dialects_end = msg.len() + (REQUEST_FIXED_END - HEADER_LEN) + 2 * self.dialects.len();
        let context_offset = dialects_end.next_multiple_of(8);

        msg.put_u16_le(36); // StructureSize
        msg.put_u16_le(self.dialects.len() as u16);
        msg.put_u16_le(self.security_mode.0);
        msg.put_u16_le(0); // Reserved
        msg.put_u32_le(self.capabilities.0);
        msg.put_slice(&self.client_guid);
        if self.offers_311() {
            msg.put_u32_le(context_offset as u32);
            msg.put_u16_le(contexts.len() as u16);
            msg.put_u16_le(0); // Reserved2
        } else {
            msg.put_u64_le(0); // ClientStartTime: MUST be 0 (2.2.3)
        }
        for d in &self.dialects {
            msg.put_u16_le(d.code());
        }

        // Each context starts 8-byte aligned; nothing follows the last one.
        for (ty, data) in &contexts {
            pad_to(msg, 0, 8);
            msg.put_u16_le(ty.0);
            msg.put_u16_le(data.len() as u16);
            msg.put_u32_le(0); // Reserved
            msg.put_slice(data);
        }
    }
}

/// Preauth integrity parameters chosen by the server (MS-SMB2 2.2.4.1.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreauthIntegrity {
    /// The selected hash algorithm ([`HASH_ALGORITHM_SHA512`] is the only one defined).
    pub hash_algorithm: u16,
    /// The server's salt.
    pub salt: Bytes,
}

/// A negotiate context this crate does not interpret, kept as it came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawNegotiateContext {
    /// ContextType.
    pub context_type: NegotiateContextType,
    /// Data (DataLength bytes).
    pub data: Bytes,
}

/// The negotiate contexts of a 3.1.1 NEGOTIATE response (MS-SMB2 2.2.4.1). Empty for other
/// dialects.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NegotiateContexts {
    /// SMB2_PREAUTH_INTEGRITY_CAPABILITIES. Always present for 3.1.1 (enforced by decode).
    pub preauth: Option<PreauthIntegrity>,
    /// The cipher id from SMB2_ENCRYPTION_CAPABILITIES, if that context was sent. 0 means "no
    /// cipher in common" (servers may answer so); see [`NegotiateContexts::cipher`].
    pub cipher_id: Option<u16>,
    /// The algorithm id from SMB2_SIGNING_CAPABILITIES, if that context was sent.
    pub signing_algorithm_id: Option<u16>,
    /// The server answered SMB3_POSIX_EXTENSIONS_AVAILABLE with the version this client speaks
    /// (the POSIX create context's GUID). Another blob means it offers a version we do not.
    pub posix_extensions: bool,
    /// The Flags of SMB2_TRANSPORT_CAPABILITIES (2.2.4.1.5), if that context was sent.
    pub transport_capabilities: Option<TransportFlags>,
    /// Every other context (compression, RDMA, POSIX, unknown), in wire order.
    pub other: Vec<RawNegotiateContext>,
}

impl NegotiateContexts {
    /// The selected cipher, if the server sent one this crate knows.
    pub fn cipher(&self) -> Option<Cipher> {
        self.cipher_id.and_then(Cipher::from_id)
    }

    /// The selected signing algorithm, if the server sent one this crate knows.
    pub fn signing_algorithm(&self) -> Option<SigningAlgorithm> {
        self.signing_algorithm_id
            .and_then(SigningAlgorithm::from_id)
    }
}

/// MS-SMB2 2.2.4 SMB2 NEGOTIATE Response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NegotiateResponse {
    /// Server signing enabled / required.
    pub security_mode: SecurityMode,
    /// DialectRevision as sent (0x02FF is the SMB2 wildcard answer to a multi-protocol
    /// negotiate).
    pub dialect_revision: u16,
    /// The dialect, if it is one this client speaks.
    pub dialect: Option<Dialect>,
    /// ServerGuid.
    pub server_guid: [u8; 16],
    /// Server capabilities.
    pub capabilities: Capabilities,
    /// MaxTransactSize.
    pub max_transact_size: u32,
    /// MaxReadSize.
    pub max_read_size: u32,
    /// MaxWriteSize.
    pub max_write_size: u32,
    /// SystemTime (FILETIME).
    pub system_time: u64,
    /// ServerStartTime (FILETIME, often 0).
    pub server_start_time: u64,
    /// The GSS/SPNEGO token (may be empty).
    pub security_buffer: Bytes,
    /// 3.1.1 negotiate contexts; empty for other dialects.
    pub contexts: NegotiateContexts,
}

impl NegotiateResponse {
    /// Decode the response from one whole message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(65, "NEGOTIATE response StructureSize")?;
        let security_mode = SecurityMode(r.u16("SecurityMode")?);
        let dialect_revision = r.u16("DialectRevision")?;
        let context_count = r.u16("NegotiateContextCount")?;
        let server_guid = r.guid("ServerGuid")?;
        let capabilities = Capabilities(r.u32("Capabilities")?);
        let max_transact_size = r.u32("MaxTransactSize")?;
        let max_read_size = r.u32("MaxReadSize")?;
        let max_write_size = r.u32("MaxWriteSize")?;
        let system_time = r.u64("SystemTime")?;
        let server_start_time = r.u64("ServerStartTime")?;
        let sec_offset = r.u16("SecurityBufferOffset")? as usize;
        let sec_len = r.u16("SecurityBufferLength")? as usize;
        let context_offset = r.u32("NegotiateContextOffset")? as usize;

        let what = "NEGOTIATE response SecurityBuffer";
        if sec_len != 0 && sec_offset < RESPONSE_FIXED_END {
            return Err(bad_offset(what, sec_offset, sec_len, msg.len()));
        }
        let security_buffer = bytes_at(msg, sec_offset, sec_len, what)?;

        let dialect = Dialect::from_code(dialect_revision);
        // NegotiateContextCount/Offset are only meaningful for 3.1.1 (2.2.4); otherwise they
        // are Reserved and ignored.
        let contexts = if dialect_revision == Dialect::Smb311.code() {
            decode_contexts(msg, context_offset, context_count)?
        } else {
            NegotiateContexts::default()
        };

        Ok(NegotiateResponse {
            security_mode,
            dialect_revision,
            dialect,
            server_guid,
            capabilities,
            max_transact_size,
            max_read_size,
            max_write_size,
            system_time,
            server_start_time,
            security_buffer,
            contexts,
        })
    }
}

fn bad_offset(what: &'static str, offset: usize, length: usize, message_len: usize) -> DecodeError {
    DecodeError::BadOffset {
        what,
        offset,
        length,
        message_len,
    }
}

/// Walk the context list of a 3.1.1 response and apply the client-side checks of MS-SMB2
/// 3.2.5.2: exactly one preauth context with one hash algorithm, at most one encryption and
/// one signing context, each selecting exactly one algorithm, at most one transport
/// capabilities context with its 4-byte Flags.
fn decode_contexts(
    msg: &Bytes,
    offset: usize,
    count: u16,
) -> Result<NegotiateContexts, DecodeError> {
    const WHAT: &str = "NEGOTIATE response NegotiateContextList";
    if count == 0 {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "3.1.1 response without negotiate contexts (preauth context is mandatory)",
        });
    }
    if offset % 8 != 0 {
        return Err(DecodeError::InvalidValue {
            what: "NegotiateContextOffset (not 8-byte aligned)",
            value: offset as u64,
        });
    }
    if offset < RESPONSE_FIXED_END || offset > msg.len() {
        return Err(bad_offset(WHAT, offset, CONTEXT_HEADER_LEN, msg.len()));
    }

    let mut out = NegotiateContexts::default();
    let mut pos = offset;
    for i in 0..count {
        if i > 0 {
            // Each context starts 8-byte aligned (2.2.4: "Padding ... for 8-byte alignment").
            pos = pos.next_multiple_of(8);
        }
        let mut r = Reader::at(msg, pos)?;
        let context_type = NegotiateContextType(r.u16("NegotiateContext ContextType")?);
        let data_len = r.u16("NegotiateContext DataLength")? as usize;
        r.skip(4, "NegotiateContext Reserved")?;
        let data = bytes_at(msg, r.position(), data_len, "NegotiateContext Data")?;
        pos = r.position() + data_len;

        match context_type {
            NegotiateContextType::PREAUTH_INTEGRITY_CAPABILITIES => {
                if out.preauth.is_some() {
                    return Err(duplicate("SMB2_PREAUTH_INTEGRITY_CAPABILITIES"));
                }
                out.preauth = Some(decode_preauth(&data)?);
            }
            NegotiateContextType::ENCRYPTION_CAPABILITIES => {
                if out.cipher_id.is_some() {
                    return Err(duplicate("SMB2_ENCRYPTION_CAPABILITIES"));
                }
                out.cipher_id = Some(decode_single_id(&data, "SMB2_ENCRYPTION_CAPABILITIES")?);
            }
            NegotiateContextType::SIGNING_CAPABILITIES => {
                if out.signing_algorithm_id.is_some() {
                    return Err(duplicate("SMB2_SIGNING_CAPABILITIES"));
                }
                out.signing_algorithm_id =
                    Some(decode_single_id(&data, "SMB2_SIGNING_CAPABILITIES")?);
            }
            NegotiateContextType::TRANSPORT_CAPABILITIES => {
                if out.transport_capabilities.is_some() {
                    return Err(duplicate("SMB2_TRANSPORT_CAPABILITIES"));
                }
                // 2.2.4.1.5: Flags, 4 bytes; a longer context is read for its Flags alone,
                // as a later revision may append fields.
                let flags = Reader::new(&data).u32("SMB2_TRANSPORT_CAPABILITIES Flags")?;
                out.transport_capabilities = Some(TransportFlags(flags));
            }
            NegotiateContextType::POSIX_EXTENSIONS_AVAILABLE
                if data.as_ref() == super::posix::POSIX_CREATE_CONTEXT_TAG =>
            {
                out.posix_extensions = true;
            }
            _ => out.other.push(RawNegotiateContext { context_type, data }),
        }
    }

    if out.preauth.is_none() {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "no SMB2_PREAUTH_INTEGRITY_CAPABILITIES context",
        });
    }
    Ok(out)
}

fn duplicate(what: &'static str) -> DecodeError {
    DecodeError::Inconsistent {
        what,
        detail: "context sent more than once",
    }
}

/// 2.2.4.1.1: same layout as the request, HashAlgorithmCount MUST be 1.
fn decode_preauth(data: &Bytes) -> Result<PreauthIntegrity, DecodeError> {
    const WHAT: &str = "SMB2_PREAUTH_INTEGRITY_CAPABILITIES";
    let mut r = Reader::new(data);
    let count = r.u16("HashAlgorithmCount")?;
    if count != 1 {
        return Err(DecodeError::InvalidValue {
            what: "HashAlgorithmCount (response must select exactly one)",
            value: count.into(),
        });
    }
    let salt_len = r.u16("SaltLength")? as usize;
    let hash_algorithm = r.u16("HashAlgorithms")?;
    let salt_start = r.position();
    if r.remaining() < salt_len {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "SaltLength exceeds DataLength",
        });
    }
    Ok(PreauthIntegrity {
        hash_algorithm,
        salt: data.slice(salt_start..salt_start + salt_len),
    })
}

/// Encryption (2.2.4.1.2) and signing (2.2.4.1.7) contexts: a count that MUST be 1 in a
/// response, followed by the selected id.
fn decode_single_id(data: &[u8], what: &'static str) -> Result<u16, DecodeError> {
    let mut r = Reader::new(data);
    let count = r.u16(what)?;
    if count != 1 {
        return Err(DecodeError::InvalidValue {
            what,
            value: count.into(),
        });
    }
    r.u16(what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;
    use crate::msg::test_util::{encode, hex};

    fn response(body: &[u8]) -> Bytes {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::NEGOTIATE);
        h.flags.0 = crate::header::HeaderFlags::SERVER_TO_REDIR;
        h.encode(&mut msg);
        msg.put_slice(body);
        msg.freeze()
    }

    fn request_311() -> NegotiateRequest {
        let mut salt = [0u8; 32];
        for (i, b) in salt.iter_mut().enumerate() {
            *b = 0x20 + i as u8;
        }
        NegotiateRequest {
            dialects: Dialect::ALL.to_vec(),
            security_mode: SecurityMode(SecurityMode::SIGNING_ENABLED),
            capabilities: Capabilities(
                Capabilities::DFS
                    | Capabilities::LEASING
                    | Capabilities::LARGE_MTU
                    | Capabilities::MULTI_CHANNEL
                    | Capabilities::PERSISTENT_HANDLES
                    | Capabilities::DIRECTORY_LEASING
                    | Capabilities::ENCRYPTION,
            ),
            client_guid: core::array::from_fn(|i| i as u8),
            preauth_salt: salt,
            ciphers: vec![
                Cipher::Aes128Gcm,
                Cipher::Aes128Ccm,
                Cipher::Aes256Gcm,
                Cipher::Aes256Ccm,
            ],
            signing_algorithms: vec![
                SigningAlgorithm::AesGmac,
                SigningAlgorithm::AesCmac,
                SigningAlgorithm::HmacSha256,
            ],
            server_name: Some("srv".into()),
            posix_extensions: false,
            transport_capabilities: None,
        }
    }

    #[test]
    fn request_asking_for_posix_extensions_ends_with_the_posix_context() {
        let mut req = request_311();
        req.posix_extensions = true;
        let msg = encode(&req);
        // The netname context ended at 214; the POSIX one starts at 216 and carries the POSIX
        // create context's GUID (POSIX-SMB2 2.2.3.1.8).
        assert_eq!(msg.len(), 216 + 8 + 16);
        assert_eq!(
            hex::encode(&msg[214..]),
            "0000000110000000000093ad25509cb411e7b42383de968bcd7c"
        );
        assert_eq!(msg[HEADER_LEN + 32], 5, "NegotiateContextCount");
    }

    #[test]
    fn request_offering_transport_security_carries_the_transport_context() {
        let mut req = request_311();
        req.transport_capabilities = Some(TransportFlags(
            TransportFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
        ));
        let msg = encode(&req);
        // After the netname context (ends at 214, padded to 216): ContextType 6, DataLength
        // 4, Reserved, Flags = SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY (MS-SMB2 2.2.3.1.5).
        assert_eq!(msg.len(), 216 + 8 + 4);
        assert_eq!(hex::encode(&msg[214..]), "0000060004000000000001000000");
        assert_eq!(msg[HEADER_LEN + 32], 5, "NegotiateContextCount");
        // Without 3.1.1 no context is sent, this one neither.
        req.dialects = vec![Dialect::Smb300, Dialect::Smb302];
        assert_eq!(encode(&req).len(), HEADER_LEN + 36 + 4);
    }

    #[test]
    fn transport_context_in_a_response() {
        let accept = hex(&format!("{PREAUTH_CTX} 0000 0600 0400 00000000 01000000"));
        let resp = NegotiateResponse::decode(&response_311_with(2, 0xD0, &accept)).unwrap();
        let flags = resp.contexts.transport_capabilities.unwrap();
        assert!(flags.has(TransportFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY));
        assert!(resp.contexts.other.is_empty());
        // Flags 0: the server answers but does not accept; unknown bits are kept.
        let none = hex(&format!("{PREAUTH_CTX} 0000 0600 0400 00000000 00000080"));
        let resp = NegotiateResponse::decode(&response_311_with(2, 0xD0, &none)).unwrap();
        let flags = resp.contexts.transport_capabilities.unwrap();
        assert!(!flags.has(TransportFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY));
        assert_eq!(flags, TransportFlags(0x8000_0000));
        // A longer context is read for its Flags.
        let longer = hex(&format!(
            "{PREAUTH_CTX} 0000 0600 0800 00000000 01000000 ffffffff"
        ));
        let resp = NegotiateResponse::decode(&response_311_with(2, 0xD0, &longer)).unwrap();
        assert_eq!(
            resp.contexts.transport_capabilities,
            Some(TransportFlags(1))
        );
        // No context: nothing accepted.
        let resp = NegotiateResponse::decode(&response_311_with(1, 0xD0, &hex(PREAUTH_CTX)));
        assert_eq!(resp.unwrap().contexts.transport_capabilities, None);
    }

    #[test]
    fn hostile_transport_contexts_are_refused() {
        // Flags cut short: DataLength 2, or 0.
        for data in ["0600 0200 00000000 0100", "0600 0000 00000000"] {
            let ctx = hex(&format!("{PREAUTH_CTX} 0000 {data}"));
            assert!(
                NegotiateResponse::decode(&response_311_with(2, 0xD0, &ctx)).is_err(),
                "{data}"
            );
        }
        // DataLength past the end of the message.
        let long = hex(&format!("{PREAUTH_CTX} 0000 0600 ff00 00000000 01000000"));
        assert!(matches!(
            NegotiateResponse::decode(&response_311_with(2, 0xD0, &long)),
            Err(DecodeError::BadOffset { .. })
        ));
        // Sent twice: a server must not say two things about one connection.
        let twice = hex(&format!(
            "{PREAUTH_CTX} 0000 0600 0400 00000000 01000000 00000000
             0600 0400 00000000 00000000"
        ));
        assert!(matches!(
            NegotiateResponse::decode(&response_311_with(3, 0xD0, &twice)),
            Err(DecodeError::Inconsistent { .. })
        ));
    }

    #[test]
    fn posix_context_counts_only_with_the_version_we_speak() {
        let ours = hex(&format!(
            "{PREAUTH_CTX} 0000 0001 1000 00000000 93ad25509cb411e7b42383de968bcd7c"
        ));
        let resp = NegotiateResponse::decode(&response_311_with(2, 0xD0, &ours)).unwrap();
        assert!(resp.contexts.posix_extensions);
        // Samba's own test: a 16-byte blob that is not the GUID does not turn them on.
        let other = hex(&format!(
            "{PREAUTH_CTX} 0000 0001 1000 00000000 30313233343536373839303132333435"
        ));
        let resp = NegotiateResponse::decode(&response_311_with(2, 0xD0, &other)).unwrap();
        assert!(!resp.contexts.posix_extensions);
        assert_eq!(resp.contexts.other.len(), 1);
        let without = hex(PREAUTH_CTX);
        let resp = NegotiateResponse::decode(&response_311_with(1, 0xD0, &without)).unwrap();
        assert!(!resp.contexts.posix_extensions);
    }

    #[test]
    fn request_311_golden_bytes() {
        let msg = encode(&request_311());
        // Offsets are from the start of the header (body starts at 64 = 0x40).
        let expected = hex("2400 0400 0100 0000 7f000000
             000102030405060708090a0b0c0d0e0f
             70000000 0400 0000
             1002 0003 0203 1103
             00000000
             0100 2600 00000000 0100 2000 0100
             202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f
             0000
             0200 0a00 00000000 0400 0200 0100 0400 0300
             000000000000
             0800 0800 00000000 0300 0200 0100 0000
             0500 0600 00000000 7300 7200 7600");
        // 0x40 + 36 + 8 (dialects) = 108, padded to 112 = 0x70 for the first context; the
        // preauth context ends at 158 (pad to 160), encryption at 178 (pad to 184), signing at
        // 200, netname at 214 with no trailing padding.
        assert_eq!(hex::encode(&msg[HEADER_LEN..]), hex::encode(&expected));
        assert_eq!(msg.len(), 214);
    }

    #[test]
    fn request_without_311_has_no_contexts() {
        let mut req = request_311();
        req.dialects = vec![Dialect::Smb210, Dialect::Smb300, Dialect::Smb302];
        let msg = encode(&req);
        let expected = hex("2400 0300 0100 0000 7f000000
             000102030405060708090a0b0c0d0e0f
             0000000000000000
             1002 0003 0203");
        assert_eq!(hex::encode(&msg[HEADER_LEN..]), hex::encode(&expected));
    }

    #[test]
    fn request_311_minimal_contexts() {
        let mut req = request_311();
        req.dialects = vec![Dialect::Smb311];
        req.ciphers.clear();
        req.signing_algorithms.clear();
        req.server_name = None;
        req.capabilities = Capabilities(0);
        req.security_mode = SecurityMode(SecurityMode::SIGNING_REQUIRED);
        req.preauth_salt = [0xAA; 32];
        let msg = encode(&req);
        // Dialects end at 0x40 + 36 + 2 = 102, first context at 104 = 0x68.
        let expected = hex("2400 0100 0200 0000 00000000
             000102030405060708090a0b0c0d0e0f
             68000000 0100 0000
             1103
             0000
             0100 2600 00000000 0100 2000 0100");
        let mut expected = BytesMut::from(&expected[..]);
        expected.put_slice(&[0xAA; 32]);
        assert_eq!(hex::encode(&msg[HEADER_LEN..]), hex::encode(&expected));
    }

    /// A Samba 4.x style 3.1.1 NEGOTIATE response: signing enabled, multichannel, 8 MiB
    /// limits, Samba's SPNEGO negTokenInit (NTLMSSP only, with the
    /// "not_defined_in_RFC4178@please_ignore" hint), then preauth, encryption (AES-128-GCM)
    /// and signing (AES-GMAC) contexts; the last context is not padded.
    const SAMBA_NEGOTIATE_RESPONSE: &str = "
        fe534d42 4000 0000 00000000 0000 0100 01000000 00000000
        0000000000000000 00000000 00000000 0000000000000000
        00000000000000000000000000000000
        4100 0100 1103 0300
        736d6261 2d67 7569 642d 3132 33343536
        0f000000 00008000 00008000 00008000
        00e5f25a7ad4d901 0000000000000000
        8000 4a00 d0000000
        604806062b0601050502a03e303ca00e300c060a2b06010401823702020aa32a3028a0261b246e
        6f745f646566696e65645f696e5f5246433431373840706c656173655f69676e6f7265
        000000000000
        0100 2600 00000000 0100 2000 0100
        000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
        0000
        0200 0400 00000000 0100 0200
        00000000
        0800 0400 00000000 0100 0200";

    #[test]
    fn decodes_samba_311_response() {
        let msg = hex(SAMBA_NEGOTIATE_RESPONSE);
        assert_eq!(msg.len(), 284);
        let header = Header::decode(&msg).unwrap();
        assert_eq!(header.command, Command::NEGOTIATE);
        let resp = NegotiateResponse::decode(&msg).unwrap();
        assert_eq!(
            resp.security_mode,
            SecurityMode(SecurityMode::SIGNING_ENABLED)
        );
        assert_eq!(resp.dialect_revision, 0x0311);
        assert_eq!(resp.dialect, Some(Dialect::Smb311));
        assert_eq!(&resp.server_guid, b"smba-guid-123456");
        assert_eq!(resp.capabilities, Capabilities(0x0f));
        assert!(resp.capabilities.has(Capabilities::MULTI_CHANNEL));
        assert!(!resp.capabilities.has(Capabilities::ENCRYPTION));
        assert_eq!(resp.max_transact_size, 8 * 1024 * 1024);
        assert_eq!(resp.max_read_size, 8 * 1024 * 1024);
        assert_eq!(resp.max_write_size, 8 * 1024 * 1024);
        assert_eq!(resp.system_time, 0x01d9_d47a_5af2_e500);
        assert_eq!(resp.server_start_time, 0);
        assert_eq!(resp.security_buffer.len(), 74);
        assert_eq!(&resp.security_buffer[..2], &[0x60, 0x48]);
        assert!(resp.security_buffer.ends_with(b"please_ignore"));
        let preauth = resp.contexts.preauth.as_ref().unwrap();
        assert_eq!(preauth.hash_algorithm, HASH_ALGORITHM_SHA512);
        assert_eq!(
            &preauth.salt[..],
            &core::array::from_fn::<u8, 32, _>(|i| i as u8)
        );
        assert_eq!(resp.contexts.cipher_id, Some(2));
        assert_eq!(resp.contexts.cipher(), Some(Cipher::Aes128Gcm));
        assert_eq!(resp.contexts.signing_algorithm_id, Some(2));
        assert_eq!(
            resp.contexts.signing_algorithm(),
            Some(SigningAlgorithm::AesGmac)
        );
        assert!(resp.contexts.other.is_empty());
    }

    /// Builds a 3.1.1 response body (after the header) with the given context list bytes placed
    /// at 0xD0 after a 74-byte security buffer at 0x80, and the given count.
    fn response_311_with(count: u16, offset: u32, contexts: &[u8]) -> Bytes {
        let samba = hex(SAMBA_NEGOTIATE_RESPONSE);
        let mut body = BytesMut::from(&samba[HEADER_LEN..0xD0]);
        body[6..8].copy_from_slice(&count.to_le_bytes());
        body[60..64].copy_from_slice(&offset.to_le_bytes());
        body.put_slice(contexts);
        response(&body)
    }

    const PREAUTH_CTX: &str = "0100 2600 00000000 0100 2000 0100
        000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn unknown_contexts_are_kept_and_cipher_zero_is_allowed() {
        let ctx = hex(&format!(
            "{PREAUTH_CTX} 0000
             0200 0400 00000000 0100 0000 00000000
             3412 0300 00000000 aabbcc 00000000 00
             0300 0a00 00000000 0100 0000 00000000 0100"
        ));
        let msg = response_311_with(4, 0xD0, &ctx);
        let resp = NegotiateResponse::decode(&msg).unwrap();
        assert_eq!(resp.contexts.cipher_id, Some(0));
        assert_eq!(resp.contexts.cipher(), None);
        assert_eq!(resp.contexts.signing_algorithm_id, None);
        assert_eq!(resp.contexts.other.len(), 2);
        assert_eq!(
            resp.contexts.other[0].context_type,
            NegotiateContextType(0x1234)
        );
        assert_eq!(&resp.contexts.other[0].data[..], &[0xaa, 0xbb, 0xcc]);
        assert_eq!(
            resp.contexts.other[1].context_type,
            NegotiateContextType::COMPRESSION_CAPABILITIES
        );
        assert_eq!(resp.contexts.other[1].data.len(), 10);
    }

    #[test]
    fn non_311_response_ignores_context_fields() {
        let samba = hex(SAMBA_NEGOTIATE_RESPONSE);
        let mut body = BytesMut::from(&samba[HEADER_LEN..]);
        body[4..6].copy_from_slice(&0x0302u16.to_le_bytes());
        // Reserved2 garbage must not matter.
        body[60..64].copy_from_slice(&0xFFFF_FFF1u32.to_le_bytes());
        let resp = NegotiateResponse::decode(&response(&body)).unwrap();
        assert_eq!(resp.dialect, Some(Dialect::Smb302));
        assert_eq!(resp.contexts, NegotiateContexts::default());

        body[4..6].copy_from_slice(&0x02FFu16.to_le_bytes());
        let resp = NegotiateResponse::decode(&response(&body)).unwrap();
        assert_eq!(resp.dialect_revision, 0x02FF);
        assert_eq!(resp.dialect, None);
    }

    #[test]
    fn rejects_malformed_responses() {
        let samba = hex(SAMBA_NEGOTIATE_RESPONSE);

        // Every truncation of the fixed part or of the contexts fails.
        for cut in [HEADER_LEN, HEADER_LEN + 10, 127, 0xD0 + 4, 0xD0 + 40, 283] {
            assert!(
                NegotiateResponse::decode(&samba.slice(..cut)).is_err(),
                "cut at {cut}"
            );
        }

        // Wrong StructureSize.
        let mut bad = BytesMut::from(&samba[..]);
        bad[64] = 64;
        assert!(matches!(
            NegotiateResponse::decode(&bad.freeze()),
            Err(DecodeError::InvalidValue { .. })
        ));

        // Security buffer past the end / inside the fixed part.
        let mut bad = BytesMut::from(&samba[..]);
        bad[64 + 56..64 + 58].copy_from_slice(&0x0100u16.to_le_bytes());
        assert!(matches!(
            NegotiateResponse::decode(&bad.freeze()),
            Err(DecodeError::BadOffset { .. })
        ));
        let mut bad = BytesMut::from(&samba[..]);
        bad[64 + 56..64 + 58].copy_from_slice(&0x0040u16.to_le_bytes());
        assert!(matches!(
            NegotiateResponse::decode(&bad.freeze()),
            Err(DecodeError::BadOffset { .. })
        ));

        let ctx = hex(PREAUTH_CTX);
        // Context offset not aligned, inside the fixed part, past the end.
        assert!(NegotiateResponse::decode(&response_311_with(1, 0xD4, &ctx)).is_err());
        assert!(NegotiateResponse::decode(&response_311_with(1, 0x78, &ctx)).is_err());
        assert!(NegotiateResponse::decode(&response_311_with(1, 0x1000, &ctx)).is_err());
        // Count says more contexts than there are.
        assert!(NegotiateResponse::decode(&response_311_with(2, 0xD0, &ctx)).is_err());
        assert!(NegotiateResponse::decode(&response_311_with(0xFFFF, 0xD0, &ctx)).is_err());
        // No contexts at all for 3.1.1.
        assert!(NegotiateResponse::decode(&response_311_with(0, 0, &[])).is_err());
        // DataLength past the end of the message.
        let long = hex("0100 ff00 00000000 0100 2000 0100");
        assert!(matches!(
            NegotiateResponse::decode(&response_311_with(1, 0xD0, &long)),
            Err(DecodeError::BadOffset { .. })
        ));
        // SaltLength larger than DataLength.
        let salty = hex("0100 0800 00000000 0100 2000 0100 0000");
        assert!(NegotiateResponse::decode(&response_311_with(1, 0xD0, &salty)).is_err());
        // Preauth with two hash algorithms (a response must select one).
        let two = hex("0100 0800 00000000 0200 0000 0100 0100");
        assert!(NegotiateResponse::decode(&response_311_with(1, 0xD0, &two)).is_err());
        // Missing preauth context.
        let enc_only = hex("0200 0400 00000000 0100 0200");
        assert!(NegotiateResponse::decode(&response_311_with(1, 0xD0, &enc_only)).is_err());
        // Duplicate preauth context.
        let dup = hex(&format!("{PREAUTH_CTX} 0000 {PREAUTH_CTX}"));
        assert!(matches!(
            NegotiateResponse::decode(&response_311_with(2, 0xD0, &dup)),
            Err(DecodeError::Inconsistent { .. })
        ));
        // Encryption context selecting two ciphers; empty signing context.
        let two_ciphers = hex(&format!(
            "{PREAUTH_CTX} 0000 0200 0600 00000000 0200 0200 0100"
        ));
        assert!(NegotiateResponse::decode(&response_311_with(2, 0xD0, &two_ciphers)).is_err());
        let empty_sig = hex(&format!("{PREAUTH_CTX} 0000 0800 0000 00000000"));
        assert!(NegotiateResponse::decode(&response_311_with(2, 0xD0, &empty_sig)).is_err());
    }
}
