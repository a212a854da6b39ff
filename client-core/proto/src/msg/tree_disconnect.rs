//! MS-SMB2 2.2.11 SMB2 TREE_DISCONNECT Request and 2.2.12 SMB2 TREE_DISCONNECT Response.
//!
//! Disconnects the tree named by the header TreeId.

four_byte_message!(
    crate::header::Command::TREE_DISCONNECT,
    "TREE_DISCONNECT",
    /// MS-SMB2 2.2.11 SMB2 TREE_DISCONNECT Request: StructureSize 4 and a reserved field.
    TreeDisconnectRequest,
    /// MS-SMB2 2.2.12 SMB2 TREE_DISCONNECT Response: StructureSize 4 and a reserved field.
    TreeDisconnectResponse
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
        let mut h = Header::request(Command::TREE_DISCONNECT);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.encode(&mut msg);
        msg.put_slice(&hex(body));
        msg.freeze()
    }

    #[test]
    fn request_golden_bytes() {
        let mut msg = BytesMut::new();
        Header::request(TreeDisconnectRequest::COMMAND).encode(&mut msg);
        TreeDisconnectRequest.encode_body(&mut msg);
        assert_eq!(hex::encode(&msg[HEADER_LEN..]), "04000000");
        assert_eq!(msg[12..14], [0x04, 0x00]);
        assert_eq!(TreeDisconnectRequest.credit_payload(), 0);
    }

    #[test]
    fn decodes_response() {
        assert_eq!(
            TreeDisconnectResponse::decode(&response("0400 0000")).unwrap(),
            TreeDisconnectResponse
        );
        // Compound padding after the body is fine.
        assert_eq!(
            TreeDisconnectResponse::decode(&response("0400 0000 00000000")).unwrap(),
            TreeDisconnectResponse
        );
    }

    #[test]
    fn rejects_malformed_responses() {
        assert!(TreeDisconnectResponse::decode(&response("")).is_err());
        assert!(TreeDisconnectResponse::decode(&response("0400")).is_err());
        assert!(matches!(
            TreeDisconnectResponse::decode(&response("0900 0000 00000000 00")),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(TreeDisconnectResponse::decode(&hex("fe534d42")).is_err());
    }
}
