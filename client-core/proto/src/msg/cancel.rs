//! MS-SMB2 2.2.30 SMB2 CANCEL Request.
//!
//! CANCEL has no response. It carries the MessageId of the request to cancel (and, once that
//! request went async, its AsyncId with SMB2_FLAGS_ASYNC_COMMAND set) and takes no new message
//! id from the sequence window (MS-SMB2 3.2.4.24, 3.3.5.2.3).

use bytes::{BufMut, BytesMut};

use crate::header::Command;
use crate::msg::RequestBody;

/// MS-SMB2 2.2.30 SMB2 CANCEL Request: StructureSize 4 and a reserved field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CancelRequest;

impl RequestBody for CancelRequest {
    const COMMAND: Command = Command::CANCEL;

    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(4); // StructureSize
        msg.put_u16_le(0); // Reserved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Header, HeaderFlags, HEADER_LEN};

    #[test]
    fn request_golden_bytes_async() {
        let mut h = Header::request(CancelRequest::COMMAND);
        h.flags = HeaderFlags(HeaderFlags::ASYNC_COMMAND);
        h.message_id = 7;
        h.async_id = 0x55;
        let mut msg = BytesMut::new();
        h.encode(&mut msg);
        CancelRequest.encode_body(&mut msg);
        assert_eq!(hex::encode(&msg[HEADER_LEN..]), "04000000");
        assert_eq!(msg[12..14], [0x0c, 0x00]);
        assert_eq!(CancelRequest.credit_payload(), 0);
        assert_eq!(Header::decode(&msg).unwrap().async_id, 0x55);
    }
}
