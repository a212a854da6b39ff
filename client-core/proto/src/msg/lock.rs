//! MS-SMB2 2.2.26 SMB2 LOCK Request and 2.2.27 SMB2 LOCK Response: byte-range locks.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::{FileId, RequestBody};

/// MS-SMB2 2.2.26.1 SMB2_LOCK_ELEMENT Flags.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct LockFlags(pub u32);

impl LockFlags {
    /// SMB2_LOCKFLAG_SHARED_LOCK: others may read, and take shared locks.
    pub const SHARED: u32 = 0x1;
    /// SMB2_LOCKFLAG_EXCLUSIVE_LOCK: no other open may read, write or lock the range.
    pub const EXCLUSIVE: u32 = 0x2;
    /// SMB2_LOCKFLAG_UNLOCK: release a range locked before (exactly that range).
    pub const UNLOCK: u32 = 0x4;
    /// SMB2_LOCKFLAG_FAIL_IMMEDIATELY: answer LOCK_NOT_GRANTED instead of waiting.
    pub const FAIL_IMMEDIATELY: u32 = 0x10;
}

/// MS-SMB2 2.2.26.1 SMB2_LOCK_ELEMENT: one range and what to do with it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LockElement {
    /// First byte of the range.
    pub offset: u64,
    /// Bytes in the range.
    pub length: u64,
    /// What to do.
    pub flags: LockFlags,
}

/// MS-SMB2 2.2.26 SMB2 LOCK Request. The server processes the elements in order; MS-SMB2
/// 3.3.5.14 allows several elements only when all unlock, or all lock with
/// FAIL_IMMEDIATELY, so callers send one element at a time unless they know better.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LockRequest {
    /// The open whose locks these are.
    pub file_id: FileId,
    /// LockSequenceNumber (low 4 bits) and LockSequenceIndex (upper 28 bits); 0 asks the
    /// server not to check lock sequences (MS-SMB2 3.3.5.14: index 0 is not verified).
    pub lock_sequence: u32,
    /// The ranges, at least one.
    pub locks: Vec<LockElement>,
}

impl LockRequest {
    /// StructureSize of the request (fixed part plus one element).
    pub const STRUCTURE_SIZE: u16 = 48;
}

impl RequestBody for LockRequest {
    const COMMAND: Command = Command::LOCK;

    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u16_le(self.locks.len() as u16); // LockCount
        msg.put_u32_le(self.lock_sequence);
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
        for l in &self.locks {
            msg.put_u64_le(l.offset);
            msg.put_u64_le(l.length);
            msg.put_u32_le(l.flags.0);
            msg.put_u32_le(0); // Reserved
        }
    }
}

/// MS-SMB2 2.2.27 SMB2 LOCK Response: StructureSize and Reserved only.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct LockResponse;

impl LockResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 4;

    /// Decode a whole LOCK response message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "LOCK response StructureSize")?;
        r.skip(2, "LOCK response Reserved")?;
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
        Header::request(Command::LOCK).encode(&mut msg);
        LockRequest {
            file_id: FileId {
                persistent: 0x01e0_002a,
                volatile: 0x5_0000_0003,
            },
            lock_sequence: 0,
            locks: vec![LockElement {
                offset: 0x4000_0000,
                length: 1,
                flags: LockFlags(LockFlags::EXCLUSIVE | LockFlags::FAIL_IMMEDIATELY),
            }],
        }
        .encode_body(&mut msg);
        assert_eq!(msg[12..14], [0x0a, 0x00], "Command LOCK = 10");
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            concat!(
                "3000",
                "0100",
                "00000000", // StructureSize, LockCount, sequence
                "2a00e00100000000",
                "0300000005000000", // FileId
                "0000004000000000",
                "0100000000000000", // Offset, Length
                "12000000",
                "00000000", // Flags, Reserved
            )
        );
    }

    const HDR: &str = "fe534d42 4000 0100 00000000 0a00 0100 01000000 00000000 \
                       0900000000000000 feff0000 01000000 0100000000100000 \
                       00000000000000000000000000000000";

    #[test]
    fn response() {
        assert_eq!(
            LockResponse::decode(&hex(&format!("{HDR} 0400 0000"))),
            Ok(LockResponse)
        );
        assert!(LockResponse::decode(&hex(&format!("{HDR} 0800 0000"))).is_err());
        assert!(LockResponse::decode(&hex(&format!("{HDR} 04"))).is_err());
    }
}
