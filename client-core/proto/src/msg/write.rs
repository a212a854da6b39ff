//! MS-SMB2 2.2.21 SMB2 WRITE Request and 2.2.22 SMB2 WRITE Response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::{FileId, RequestBody};

/// MS-SMB2 2.2.21 SMB2 WRITE Request. The body holds only the fixed part; the data is returned
/// by [`RequestBody::payload`] and sent right after the body without being copied.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WriteRequest {
    /// Offset in the file.
    pub offset: u64,
    /// The open to write to.
    pub file_id: FileId,
    /// RemainingBytes: hint of how much more the client will write (0 = none).
    pub remaining_bytes: u32,
    /// Flags: [`WriteRequest::WRITE_THROUGH`], [`WriteRequest::UNBUFFERED`].
    pub flags: u32,
    /// The data to write (sent as the payload, never copied into the body).
    pub data: Bytes,
}

impl WriteRequest {
    /// StructureSize of the request (48 fixed bytes + 1 byte of Buffer).
    pub const STRUCTURE_SIZE: u16 = 49;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 48;
    /// DataOffset: the data follows the fixed part, 64 + 48 = 0x70.
    pub const DATA_OFFSET: u16 = (HEADER_LEN + Self::FIXED_LEN) as u16;
    /// SMB2_WRITEFLAG_WRITE_THROUGH (2.1+): write to stable storage before answering.
    pub const WRITE_THROUGH: u32 = 0x0000_0001;
    /// SMB2_WRITEFLAG_WRITE_UNBUFFERED (3.0.2+): bypass the server's cache.
    pub const UNBUFFERED: u32 = 0x0000_0002;

    /// Write `data` at `offset` with no flags.
    pub fn new(file_id: FileId, offset: u64, data: Bytes) -> Self {
        Self {
            offset,
            file_id,
            remaining_bytes: 0,
            flags: 0,
            data,
        }
    }
}

impl RequestBody for WriteRequest {
    const COMMAND: Command = Command::WRITE;

    fn encode_body(&self, msg: &mut BytesMut) {
        // The data follows the fixed part: DATA_OFFSET (0x70) with the header at index 0.
        let data_offset = msg.len() + Self::FIXED_LEN;
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u16_le(data_offset as u16);
        msg.put_u32_le(self.data.len() as u32); // Length
        msg.put_u64_le(self.offset);
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
        msg.put_u32_le(0); // Channel: SMB2_CHANNEL_NONE (no RDMA)
        msg.put_u32_le(self.remaining_bytes);
        msg.put_u16_le(0); // WriteChannelInfoOffset
        msg.put_u16_le(0); // WriteChannelInfoLength
        msg.put_u32_le(self.flags);
        // 2.2.21: the Buffer is at least one byte. With data, the payload is that buffer; a
        // zero-length write (Length 0) still carries one padding byte.
        if self.data.is_empty() {
            msg.put_u8(0);
        }
    }

    fn payload(&self) -> Bytes {
        self.data.clone()
    }

    fn credit_payload(&self) -> u32 {
        self.data.len() as u32
    }
}

/// MS-SMB2 2.2.22 SMB2 WRITE Response.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct WriteResponse {
    /// Count: bytes written.
    pub count: u32,
    /// Remaining (reserved, 0).
    pub remaining: u32,
}

impl WriteResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 17;

    /// Decode a whole WRITE response message (header included). Only the 16 fixed bytes are
    /// required: servers send no Buffer byte.
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "WRITE response StructureSize")?;
        r.skip(2, "WRITE response Reserved")?;
        let count = r.u32("WRITE response Count")?;
        let remaining = r.u32("WRITE response Remaining")?;
        r.skip(2, "WRITE response WriteChannelInfoOffset")?;
        r.skip(2, "WRITE response WriteChannelInfoLength")?;
        Ok(Self { count, remaining })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;
    use crate::msg::credit_charge;
    use crate::msg::test_util::hex;

    const FILE_ID: FileId = FileId {
        persistent: 0x01e0_002a,
        volatile: 0x5_0000_0003,
    };

    fn encode(req: &WriteRequest) -> BytesMut {
        let mut msg = BytesMut::new();
        Header::request(Command::WRITE).encode(&mut msg);
        req.encode_body(&mut msg);
        msg
    }

    #[test]
    fn request_golden_and_payload_not_copied() {
        let data = Bytes::from_static(b"hello world");
        let mut req = WriteRequest::new(FILE_ID, 0x1234, data.clone());
        req.flags = WriteRequest::WRITE_THROUGH;
        let msg = encode(&req);
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "3100 7000 0b000000 3412000000000000 2a00e00100000000 0300000005000000 \
             00000000 00000000 0000 0000 01000000"
                .replace(' ', "")
        );
        // The body stops at the fixed part; the payload is the caller's buffer itself.
        assert_eq!(msg.len(), usize::from(WriteRequest::DATA_OFFSET));
        let payload = req.payload();
        assert_eq!(payload.as_ptr(), data.as_ptr());
        assert_eq!(payload.len(), 11);
        assert_eq!(req.credit_payload(), 11);
    }

    #[test]
    fn large_write_credit_charge() {
        let req = WriteRequest::new(FILE_ID, 0, Bytes::from(vec![0u8; 65537]));
        assert_eq!(credit_charge(req.credit_payload()), 2);
        let msg = encode(&req);
        assert_eq!(
            &msg[HEADER_LEN + 4..HEADER_LEN + 8],
            &65537u32.to_le_bytes()
        );
    }

    #[test]
    fn zero_length_write_has_one_byte_buffer() {
        let mut req = WriteRequest::new(FILE_ID, 10, Bytes::new());
        req.flags = WriteRequest::UNBUFFERED;
        let msg = encode(&req);
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "3100 7000 00000000 0a00000000000000 2a00e00100000000 0300000005000000 \
             00000000 00000000 0000 0000 02000000 00"
                .replace(' ', "")
        );
        assert!(req.payload().is_empty());
        assert_eq!(req.credit_payload(), 0);
    }

    const HDR: &str = "fe534d42 4000 0100 00000000 0900 0100 01000000 00000000 \
                       0a00000000000000 feff0000 01000000 0100000000100000 \
                       00000000000000000000000000000000";

    #[test]
    fn response() {
        let msg = hex(&format!("{HDR} 1100 0000 00001000 00000000 0000 0000"));
        let resp = WriteResponse::decode(&msg).unwrap();
        assert_eq!(
            resp,
            WriteResponse {
                count: 0x10_0000,
                remaining: 0
            }
        );
        // A trailing Buffer byte is tolerated.
        let msg = hex(&format!("{HDR} 1100 0000 0b000000 00000000 0000 0000 00"));
        assert_eq!(WriteResponse::decode(&msg).unwrap().count, 11);
    }

    #[test]
    fn response_malformed() {
        let short = hex(&format!("{HDR} 1100 0000 0b000000 00000000 0000 00"));
        assert!(matches!(
            WriteResponse::decode(&short),
            Err(DecodeError::Truncated { .. })
        ));
        let wrong = hex(&format!("{HDR} 1000 0000 0b000000 00000000 0000 0000"));
        assert!(matches!(
            WriteResponse::decode(&wrong),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(WriteResponse::decode(&hex(HDR)).is_err());
    }
}
