//! MS-SMB2 2.2.28 SMB2 ECHO Request and 2.2.29 SMB2 ECHO Response.
//!
//! A keep-alive / liveness probe; the server answers at once.

four_byte_message!(
    crate::header::Command::ECHO,
    "ECHO",
    /// MS-SMB2 2.2.28 SMB2 ECHO Request: StructureSize 4 and a reserved field.
    EchoRequest,
    /// MS-SMB2 2.2.29 SMB2 ECHO Response: StructureSize 4 and a reserved field.
    EchoResponse
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
