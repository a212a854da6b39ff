//! MS-SMB2 2.2.17 SMB2 FLUSH Request and 2.2.18 SMB2 FLUSH Response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::{FileId, RequestBody};

/// MS-SMB2 2.2.17 SMB2 FLUSH Request: write the server's cached data for the open to disk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FlushRequest {
    /// The open to flush.
    pub file_id: FileId,
}

impl FlushRequest {
    /// StructureSize of the request.
    pub const STRUCTURE_SIZE: u16 = 24;
}

impl RequestBody for FlushRequest {
    const COMMAND: Command = Command::FLUSH;

    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u16_le(0); // Reserved1
        msg.put_u32_le(0); // Reserved2
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
    }
}

/// MS-SMB2 2.2.18 SMB2 FLUSH Response: no fields besides StructureSize.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FlushResponse;

impl FlushResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 4;

    /// Decode a whole FLUSH response message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "FLUSH response StructureSize")?;
        r.skip(2, "FLUSH response Reserved")?;
        Ok(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;
    use crate::msg::test_util::hex;

    #[test]
    fn request_golden() {
        let mut msg = BytesMut::new();
        Header::request(Command::FLUSH).encode(&mut msg);
        FlushRequest {
            file_id: FileId {
                persistent: 0x01e0_002a,
                volatile: 0x5_0000_0003,
            },
        }
        .encode_body(&mut msg);
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "1800 0000 00000000 2a00e00100000000 0300000005000000".replace(' ', "")
        );
    }

    const HDR: &str = "fe534d42 4000 0100 00000000 0700 0100 01000000 00000000 \
                       0900000000000000 feff0000 01000000 0100000000100000 \
                       00000000000000000000000000000000";

    #[test]
    fn response() {
        let msg = hex(&format!("{HDR} 0400 0000"));
        assert_eq!(FlushResponse::decode(&msg), Ok(FlushResponse));
        assert!(FlushResponse::decode(&msg.slice(..67)).is_err());
        assert!(FlushResponse::decode(&msg.slice(..64)).is_err());
        let bad = hex(&format!("{HDR} 0900 0000"));
        assert!(matches!(
            FlushResponse::decode(&bad),
            Err(DecodeError::InvalidValue { .. })
        ));
    }
}
