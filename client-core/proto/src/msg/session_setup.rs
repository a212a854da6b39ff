//! MS-SMB2 2.2.5 SMB2 SESSION_SETUP Request and 2.2.6 SMB2 SESSION_SETUP Response.
//!
//! The security buffers are GSS/SPNEGO tokens; this module only carries them.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{bytes_at, DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::negotiate::{Capabilities, SecurityMode};
use crate::msg::RequestBody;

/// SESSION_SETUP request Flags (MS-SMB2 2.2.5).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct SessionSetupFlags(pub u8);

impl SessionSetupFlags {
    /// SMB2_SESSION_FLAG_BINDING: bind an existing session to this connection (multichannel).
    pub const BINDING: u8 = 0x01;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u8) -> bool {
        self.0 & flag == flag
    }
}

/// SESSION_SETUP response SessionFlags (MS-SMB2 2.2.6).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct SessionFlags(pub u16);

impl SessionFlags {
    /// SMB2_SESSION_FLAG_IS_GUEST.
    pub const IS_GUEST: u16 = 0x0001;
    /// SMB2_SESSION_FLAG_IS_NULL (anonymous).
    pub const IS_NULL: u16 = 0x0002;
    /// SMB2_SESSION_FLAG_ENCRYPT_DATA (3.x): every message of the session must be encrypted.
    pub const ENCRYPT_DATA: u16 = 0x0004;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u16) -> bool {
        self.0 & flag == flag
    }
}

/// Fixed part of the request body: StructureSize says 25 because it counts the first byte of
/// the variable buffer (MS-SMB2 2.2.5).
const REQUEST_FIXED_LEN: usize = 24;
/// Fixed part of the response body (StructureSize 9 likewise counts one buffer byte).
const RESPONSE_FIXED_LEN: usize = 8;

/// MS-SMB2 2.2.5 SMB2 SESSION_SETUP Request. Channel is always 0 (no RDMA channel binding).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SessionSetupRequest {
    /// Flags (BINDING for a multichannel session binding).
    pub flags: SessionSetupFlags,
    /// Signing enabled / required (sent as one byte).
    pub security_mode: SecurityMode,
    /// Client capabilities (only DFS is meaningful here).
    pub capabilities: Capabilities,
    /// The GSS/SPNEGO token.
    pub security_buffer: Bytes,
    /// PreviousSessionId: a session to reconnect from after a disconnect (0 if none).
    pub previous_session_id: u64,
}

impl RequestBody for SessionSetupRequest {
    const COMMAND: Command = Command::SESSION_SETUP;

    fn encode_body(&self, msg: &mut BytesMut) {
        let buffer_offset = msg.len() + REQUEST_FIXED_LEN;
        msg.reserve(REQUEST_FIXED_LEN + self.security_buffer.len().max(1));
        msg.put_u16_le(25); // StructureSize
        msg.put_u8(self.flags.0);
        // SecurityMode is one byte here; the defined bits all fit.
        msg.put_u8(self.security_mode.0 as u8);
        msg.put_u32_le(self.capabilities.0);
        msg.put_u32_le(0); // Channel
        msg.put_u16_le(buffer_offset as u16);
        msg.put_u16_le(self.security_buffer.len() as u16);
        msg.put_u64_le(self.previous_session_id);
        if self.security_buffer.is_empty() {
            // The odd StructureSize promises at least one byte of variable part.
            msg.put_u8(0);
        } else {
            msg.put_slice(&self.security_buffer);
        }
    }
}

/// MS-SMB2 2.2.6 SMB2 SESSION_SETUP Response (sent with STATUS_SUCCESS or, mid-exchange,
/// STATUS_MORE_PROCESSING_REQUIRED).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSetupResponse {
    /// SessionFlags.
    pub session_flags: SessionFlags,
    /// The server's GSS/SPNEGO token (may be empty).
    pub security_buffer: Bytes,
}

impl SessionSetupResponse {
    /// Decode the response from one whole message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(9, "SESSION_SETUP response StructureSize")?;
        let session_flags = SessionFlags(r.u16("SessionFlags")?);
        let offset = r.u16("SecurityBufferOffset")? as usize;
        let length = r.u16("SecurityBufferLength")? as usize;
        let what = "SESSION_SETUP response SecurityBuffer";
        if length != 0 && offset < HEADER_LEN + RESPONSE_FIXED_LEN {
            return Err(DecodeError::BadOffset {
                what,
                offset,
                length,
                message_len: msg.len(),
            });
        }
        let security_buffer = bytes_at(msg, offset, length, what)?;
        Ok(SessionSetupResponse {
            session_flags,
            security_buffer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Header, HeaderFlags};
    use crate::msg::test_util::{encode, hex};

    fn response(body: &str) -> Bytes {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::SESSION_SETUP);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.encode(&mut msg);
        msg.put_slice(&hex(body));
        msg.freeze()
    }

    #[test]
    fn request_golden_bytes() {
        let req = SessionSetupRequest {
            flags: SessionSetupFlags::default(),
            security_mode: SecurityMode(SecurityMode::SIGNING_ENABLED),
            capabilities: Capabilities(Capabilities::DFS),
            security_buffer: Bytes::from_static(&[0x60, 0x48, 0x06, 0x06]),
            previous_session_id: 0,
        };
        let msg = encode(&req);
        // Buffer right after the 24-byte fixed part: 0x40 + 24 = 0x58.
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "1900 00 01 01000000 00000000 5800 0400 0000000000000000 60480606".replace(' ', "")
        );
    }

    #[test]
    fn binding_request_golden_bytes() {
        let req = SessionSetupRequest {
            flags: SessionSetupFlags(SessionSetupFlags::BINDING),
            security_mode: SecurityMode(SecurityMode::SIGNING_REQUIRED),
            capabilities: Capabilities(0),
            security_buffer: Bytes::from_static(b"NTLMSSP\0"),
            previous_session_id: 0x1122_3344_5566_7788,
        };
        let msg = encode(&req);
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "1900 01 02 00000000 00000000 5800 0800 8877665544332211 4e544c4d53535000"
                .replace(' ', "")
        );
    }

    #[test]
    fn empty_buffer_still_sends_one_byte() {
        let msg = encode(&SessionSetupRequest::default());
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "1900 00 00 00000000 00000000 5800 0000 0000000000000000 00".replace(' ', "")
        );
    }

    #[test]
    fn decodes_response() {
        let msg = response("0900 0400 4800 0300 a1b2c3");
        let resp = SessionSetupResponse::decode(&msg).unwrap();
        assert_eq!(resp.session_flags, SessionFlags(SessionFlags::ENCRYPT_DATA));
        assert!(resp.session_flags.has(SessionFlags::ENCRYPT_DATA));
        assert!(!resp.session_flags.has(SessionFlags::IS_GUEST));
        assert_eq!(&resp.security_buffer[..], &[0xa1, 0xb2, 0xc3]);

        // Final leg with an empty token: Samba sends offset 0x48, length 0.
        let resp = SessionSetupResponse::decode(&response("0900 0100 4800 0000")).unwrap();
        assert_eq!(resp.session_flags, SessionFlags(SessionFlags::IS_GUEST));
        assert!(resp.security_buffer.is_empty());
    }

    #[test]
    fn rejects_malformed_responses() {
        // Short.
        assert!(SessionSetupResponse::decode(&response("0900 0000 48")).is_err());
        // Wrong StructureSize.
        assert!(matches!(
            SessionSetupResponse::decode(&response("0800 0000 4800 0000")),
            Err(DecodeError::InvalidValue { .. })
        ));
        // Buffer past the end.
        assert!(matches!(
            SessionSetupResponse::decode(&response("0900 0000 4800 0400 a1b2c3")),
            Err(DecodeError::BadOffset { .. })
        ));
        // Buffer pointing into the header / fixed part.
        assert!(matches!(
            SessionSetupResponse::decode(&response("0900 0000 4000 0200 a1b2")),
            Err(DecodeError::BadOffset { .. })
        ));
        // Offset overflow.
        assert!(SessionSetupResponse::decode(&response("0900 0000 ffff ffff")).is_err());
    }
}
