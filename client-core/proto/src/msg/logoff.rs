//! MS-SMB2 2.2.7 SMB2 LOGOFF Request and 2.2.8 SMB2 LOGOFF Response.
//!
//! Ends the session named by the header SessionId.

four_byte_message!(
    crate::header::Command::LOGOFF,
    "LOGOFF",
    /// MS-SMB2 2.2.7 SMB2 LOGOFF Request: StructureSize 4 and a reserved field.
    LogoffRequest,
    /// MS-SMB2 2.2.8 SMB2 LOGOFF Response: StructureSize 4 and a reserved field.
    LogoffResponse
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::DecodeError;
    use crate::header::{Command, HEADER_LEN};
    use crate::header::{Header, HeaderFlags};
    use crate::msg::RequestBody;
    use bytes::{BufMut, Bytes, BytesMut};

    /// Hex (whitespace ignored) to bytes: drop captured messages straight in.
    fn hex(s: &str) -> Bytes {
        let clean: String = s.split_whitespace().collect();
        Bytes::from(hex::decode(clean).expect("valid hex in test"))
    }

    fn response(body: &str) -> Bytes {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::LOGOFF);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.encode(&mut msg);
        msg.put_slice(&hex(body));
        msg.freeze()
    }

    #[test]
    fn request_golden_bytes() {
        let mut msg = BytesMut::new();
        Header::request(LogoffRequest::COMMAND).encode(&mut msg);
        LogoffRequest.encode_body(&mut msg);
        assert_eq!(hex::encode(&msg[HEADER_LEN..]), "04000000");
        assert_eq!(msg[12..14], [0x02, 0x00]);
        assert_eq!(LogoffRequest.credit_payload(), 0);
    }

    #[test]
    fn decodes_response() {
        assert_eq!(
            LogoffResponse::decode(&response("0400 0000")).unwrap(),
            LogoffResponse
        );
        // Compound padding after the body is fine.
        assert_eq!(
            LogoffResponse::decode(&response("0400 0000 00000000")).unwrap(),
            LogoffResponse
        );
    }

    #[test]
    fn rejects_malformed_responses() {
        assert!(LogoffResponse::decode(&response("")).is_err());
        assert!(LogoffResponse::decode(&response("0400")).is_err());
        assert!(matches!(
            LogoffResponse::decode(&response("0900 0000 00000000 00")),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(LogoffResponse::decode(&hex("fe534d42")).is_err());
    }
}
