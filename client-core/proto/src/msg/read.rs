//! MS-SMB2 2.2.19 SMB2 READ Request and 2.2.20 SMB2 READ Response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{buffer_after, DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::{FileId, RequestBody};

/// MS-SMB2 2.2.19 SMB2 READ Request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReadRequest {
    /// Padding: where the server should put the data in its response, from the start of the
    /// header. 0x50 (header + the 16-byte response body) keeps the data right after the body.
    pub padding: u8,
    /// Flags: [`ReadRequest::UNBUFFERED`], [`ReadRequest::REQUEST_COMPRESSED`].
    pub flags: u8,
    /// Length: bytes to read.
    pub length: u32,
    /// Offset in the file.
    pub offset: u64,
    /// The open to read from.
    pub file_id: FileId,
    /// MinimumCount: fewer bytes than this is an error (0 = any short read is fine).
    pub minimum_count: u32,
    /// RemainingBytes: hint of how much more the client will read (0 = none).
    pub remaining_bytes: u32,
}

impl ReadRequest {
    /// StructureSize of the request (48 fixed bytes + 1 byte of Buffer).
    pub const STRUCTURE_SIZE: u16 = 49;
    /// The Padding that places the data right after the response body.
    pub const DEFAULT_PADDING: u8 = 0x50;
    /// SMB2_READFLAG_READ_UNBUFFERED (3.0.2+): bypass the server's cache.
    pub const UNBUFFERED: u8 = 0x01;
    /// SMB2_READFLAG_REQUEST_COMPRESSED (3.1.1): the response may be compressed.
    pub const REQUEST_COMPRESSED: u8 = 0x02;

    /// Read `length` bytes at `offset` with default padding and no flags.
    pub fn new(file_id: FileId, offset: u64, length: u32) -> Self {
        Self {
            padding: Self::DEFAULT_PADDING,
            flags: 0,
            length,
            offset,
            file_id,
            minimum_count: 0,
            remaining_bytes: 0,
        }
    }
}

impl RequestBody for ReadRequest {
    const COMMAND: Command = Command::READ;

    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u8(self.padding);
        msg.put_u8(self.flags);
        msg.put_u32_le(self.length);
        msg.put_u64_le(self.offset);
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
        msg.put_u32_le(self.minimum_count);
        msg.put_u32_le(0); // Channel: SMB2_CHANNEL_NONE (no RDMA)
        msg.put_u32_le(self.remaining_bytes);
        msg.put_u16_le(0); // ReadChannelInfoOffset
        msg.put_u16_le(0); // ReadChannelInfoLength
                           // 2.2.19: the Buffer is at least one byte even without channel info (servers such as
                           // Samba reject a 48-byte body).
        msg.put_u8(0);
    }

    fn credit_payload(&self) -> u32 {
        self.length
    }
}

/// MS-SMB2 2.2.20 SMB2 READ Response. `data` is a zero-copy slice of the received message.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ReadResponse {
    /// DataOffset from the start of the header.
    pub data_offset: u8,
    /// DataLength.
    pub data_length: u32,
    /// DataRemaining (RDMA only; 0 otherwise).
    pub data_remaining: u32,
    /// Flags (3.1.1; Reserved2 before): SMB2_READFLAG_RESPONSE_RDMA_TRANSFORM.
    pub flags: u32,
    /// The data read.
    pub data: Bytes,
}

impl ReadResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 17;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 16;

    /// Decode a whole READ response message (header included). The data must lie inside the
    /// message and after the fixed part.
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "READ response StructureSize")?;
        let data_offset = r.u8("READ response DataOffset")?;
        r.skip(1, "READ response Reserved")?;
        let data_length = r.u32("READ response DataLength")?;
        let data_remaining = r.u32("READ response DataRemaining")?;
        let flags = r.u32("READ response Flags")?;
        let (offset, length) = (usize::from(data_offset), data_length as usize);
        let data = buffer_after(
            msg,
            HEADER_LEN + Self::FIXED_LEN,
            offset,
            length,
            "READ response data",
        )?;
        Ok(Self {
            data_offset,
            data_length,
            data_remaining,
            flags,
            data,
        })
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

    #[test]
    fn request_golden() {
        let req = ReadRequest::new(FILE_ID, 0x1_0000_0000, 0x10_0000);
        let mut msg = BytesMut::new();
        Header::request(Command::READ).encode(&mut msg);
        req.encode_body(&mut msg);
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "3100 50 00 00001000 0000000001000000 2a00e00100000000 0300000005000000 \
             00000000 00000000 00000000 0000 0000 00"
                .replace(' ', "")
        );
        assert_eq!(msg.len(), HEADER_LEN + 49);
        assert_eq!(req.credit_payload(), 0x10_0000);
        assert_eq!(credit_charge(req.credit_payload()), 16);
        assert!(req.payload().is_empty());
    }

    #[test]
    fn request_flags_and_hints() {
        let mut req = ReadRequest::new(FILE_ID, 5, 1);
        req.flags = ReadRequest::UNBUFFERED;
        req.minimum_count = 1;
        req.remaining_bytes = 0x2000;
        let mut msg = BytesMut::new();
        Header::request(Command::READ).encode(&mut msg);
        req.encode_body(&mut msg);
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "3100 50 01 01000000 0500000000000000 2a00e00100000000 0300000005000000 \
             01000000 00000000 00200000 0000 0000 00"
                .replace(' ', "")
        );
    }

    /// READ response header as Samba sends it: SUCCESS, command 8, 1 credit, MessageId 9.
    const HDR: &str = "fe534d42 4000 0100 00000000 0800 0100 01000000 00000000 \
                       0900000000000000 feff0000 01000000 0100000000100000 \
                       00000000000000000000000000000000";

    #[test]
    fn response_data_is_a_slice_of_the_message() {
        let msg = hex(&format!(
            "{HDR} 1100 50 00 05000000 00000000 00000000 68656c6c6f"
        ));
        let resp = ReadResponse::decode(&msg).unwrap();
        assert_eq!(resp.data_offset, 0x50);
        assert_eq!(resp.data_length, 5);
        assert_eq!(resp.data_remaining, 0);
        assert_eq!(resp.flags, 0);
        assert_eq!(resp.data, Bytes::from_static(b"hello"));
        // Zero-copy: the data points into the message buffer.
        assert_eq!(resp.data.as_ptr(), msg[0x50..].as_ptr());
    }

    #[test]
    fn response_empty_read() {
        let msg = hex(&format!("{HDR} 1100 00 00 00000000 00000000 00000000"));
        let resp = ReadResponse::decode(&msg).unwrap();
        assert!(resp.data.is_empty());
        assert_eq!(resp.data_length, 0);
    }

    #[test]
    fn response_malformed() {
        let decode = |s: String| ReadResponse::decode(&hex(&s));
        // Length past the end of the message.
        assert!(matches!(
            decode(format!(
                "{HDR} 1100 50 00 06000000 00000000 00000000 68656c6c6f"
            )),
            Err(DecodeError::BadOffset { .. })
        ));
        // Offset past the end.
        assert!(decode(format!("{HDR} 1100 f0 00 01000000 00000000 00000000 68")).is_err());
        // Offset into the fixed part / header.
        assert!(matches!(
            decode(format!("{HDR} 1100 48 00 01000000 00000000 00000000 68")),
            Err(DecodeError::BadOffset { .. })
        ));
        assert!(decode(format!("{HDR} 1100 00 00 04000000 00000000 00000000 68")).is_err());
        // Wrong StructureSize.
        assert!(matches!(
            decode(format!("{HDR} 1000 50 00 00000000 00000000 00000000")),
            Err(DecodeError::InvalidValue { .. })
        ));
        // Fixed part cut short.
        assert!(matches!(
            decode(format!("{HDR} 1100 50 00 00000000 00000000 000000")),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(ReadResponse::decode(&hex(HDR).slice(..60)).is_err());
    }
}
