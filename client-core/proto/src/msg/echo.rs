//! MS-SMB2 2.2.28 SMB2 ECHO Request and 2.2.29 SMB2 ECHO Response.
//!
//! A keep-alive / liveness probe; the server answers at once.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::RequestBody;

/// MS-SMB2 2.2.28 SMB2 ECHO Request: StructureSize 4 and a reserved field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EchoRequest;

impl RequestBody for EchoRequest {
    const COMMAND: Command = Command::ECHO;

    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(4); // StructureSize
        msg.put_u16_le(0); // Reserved
    }
}

/// MS-SMB2 2.2.29 SMB2 ECHO Response: StructureSize 4 and a reserved field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EchoResponse;

impl EchoResponse {
    /// Decode the response from one whole message (header included). Trailing bytes (compound
    /// padding) are ignored.
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(4, "ECHO response StructureSize")?;
        r.skip(2, "ECHO response Reserved")?;
        Ok(EchoResponse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Header, HeaderFlags};

    /// Hex (whitespace ignored) to bytes: drop captured messages straight in.
    fn hex(s: &str) -> Bytes {
        let clean: String = s.split_whitespace().collect();
        Bytes::from(hex::decode(clean).expect("valid hex in test"))
    }

    fn response(body: &str) -> Bytes {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::ECHO);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.encode(&mut msg);
        msg.put_slice(&hex(body));
        msg.freeze()
    }

    #[test]
    fn request_golden_bytes() {
        let mut msg = BytesMut::new();
        Header::request(EchoRequest::COMMAND).encode(&mut msg);
        EchoRequest.encode_body(&mut msg);
        assert_eq!(hex::encode(&msg[HEADER_LEN..]), "04000000");
        assert_eq!(msg[12..14], [0x0d, 0x00]);
        assert_eq!(EchoRequest.credit_payload(), 0);
    }

    #[test]
    fn decodes_response() {
        assert_eq!(
            EchoResponse::decode(&response("0400 0000")).unwrap(),
            EchoResponse
        );
        // Compound padding after the body is fine.
        assert_eq!(
            EchoResponse::decode(&response("0400 0000 00000000")).unwrap(),
            EchoResponse
        );
    }

    #[test]
    fn rejects_malformed_responses() {
        assert!(EchoResponse::decode(&response("")).is_err());
        assert!(EchoResponse::decode(&response("0400")).is_err());
        assert!(matches!(
            EchoResponse::decode(&response("0900 0000 00000000 00")),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(EchoResponse::decode(&hex("fe534d42")).is_err());
    }
}
