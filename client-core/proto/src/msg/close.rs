//! MS-SMB2 2.2.15 SMB2 CLOSE Request and 2.2.16 SMB2 CLOSE Response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::fscc::FileAttributes;
use crate::msg::{FileId, RequestBody};

/// MS-SMB2 2.2.15 SMB2 CLOSE Request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CloseRequest {
    /// Flags: [`CloseRequest::POSTQUERY_ATTRIB`] to get the final attributes back.
    pub flags: u16,
    /// The open to close ([`FileId::ANY`] in a related compound).
    pub file_id: FileId,
}

impl CloseRequest {
    /// StructureSize of the request.
    pub const STRUCTURE_SIZE: u16 = 24;
    /// SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB: return the file's times, sizes and attributes.
    pub const POSTQUERY_ATTRIB: u16 = 0x0001;

    /// Close `file_id` without asking for attributes.
    pub fn new(file_id: FileId) -> Self {
        Self { flags: 0, file_id }
    }

    /// Close `file_id` and ask for its final attributes.
    pub fn with_attributes(file_id: FileId) -> Self {
        Self {
            flags: Self::POSTQUERY_ATTRIB,
            file_id,
        }
    }
}

impl RequestBody for CloseRequest {
    const COMMAND: Command = Command::CLOSE;

    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u16_le(self.flags);
        msg.put_u32_le(0); // Reserved
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
    }
}

/// MS-SMB2 2.2.16 SMB2 CLOSE Response. The attribute fields are meaningful only when the
/// response has [`CloseRequest::POSTQUERY_ATTRIB`] in `flags`; otherwise the server sends
/// zeros and [`CloseResponse::attributes`] returns `None`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CloseResponse {
    /// Flags echoed by the server (POSTQUERY_ATTRIB when the fields below are valid).
    pub flags: u16,
    /// CreationTime (FILETIME).
    pub creation_time: u64,
    /// LastAccessTime (FILETIME).
    pub last_access_time: u64,
    /// LastWriteTime (FILETIME).
    pub last_write_time: u64,
    /// ChangeTime (FILETIME).
    pub change_time: u64,
    /// AllocationSize in bytes.
    pub allocation_size: u64,
    /// EndofFile: the file size in bytes.
    pub end_of_file: u64,
    /// FileAttributes.
    pub file_attributes: FileAttributes,
}

impl CloseResponse {
    /// StructureSize of the response (fixed, no variable part).
    pub const STRUCTURE_SIZE: u16 = 60;

    /// Decode a whole CLOSE response message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "CLOSE response StructureSize")?;
        let flags = r.u16("CLOSE response Flags")?;
        r.skip(4, "CLOSE response Reserved")?;
        Ok(Self {
            flags,
            creation_time: r.u64("CLOSE response CreationTime")?,
            last_access_time: r.u64("CLOSE response LastAccessTime")?,
            last_write_time: r.u64("CLOSE response LastWriteTime")?,
            change_time: r.u64("CLOSE response ChangeTime")?,
            allocation_size: r.u64("CLOSE response AllocationSize")?,
            end_of_file: r.u64("CLOSE response EndofFile")?,
            file_attributes: FileAttributes(r.u32("CLOSE response FileAttributes")?),
        })
    }

    /// The returned attributes, only if the server says they are valid.
    pub fn attributes(&self) -> Option<&Self> {
        (self.flags & CloseRequest::POSTQUERY_ATTRIB != 0).then_some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;
    use crate::msg::test_util::hex;

    fn body_hex<B: RequestBody>(body: &B) -> String {
        let mut msg = BytesMut::new();
        Header::request(B::COMMAND).encode(&mut msg);
        body.encode_body(&mut msg);
        hex::encode(&msg[HEADER_LEN..])
    }

    const FILE_ID: FileId = FileId {
        persistent: 0x01e0_002a,
        volatile: 0x5_0000_0003,
    };

    #[test]
    fn request_golden() {
        assert_eq!(
            body_hex(&CloseRequest::new(FILE_ID)),
            "1800 0000 00000000 2a00e00100000000 0300000005000000".replace(' ', "")
        );
        assert_eq!(
            body_hex(&CloseRequest::with_attributes(FileId::ANY)),
            "1800 0100 00000000 ffffffffffffffff ffffffffffffffff".replace(' ', "")
        );
    }

    /// CLOSE response header: SUCCESS, 1 credit, MessageId 7, TreeId 1.
    const HDR: &str = "fe534d42 4000 0100 00000000 0600 0100 01000000 00000000 \
                       0700000000000000 feff0000 01000000 0100000000100000 \
                       00000000000000000000000000000000";

    #[test]
    fn response_with_attributes() {
        let msg = hex(&format!(
            "{HDR} 3c00 0100 00000000 \
             50fc82f9c39bda01 51fc82f9c39bda01 52fc82f9c39bda01 53fc82f9c39bda01 \
             0020000000000000 8813000000000000 20000000"
        ));
        let resp = CloseResponse::decode(&msg).unwrap();
        assert_eq!(
            resp,
            CloseResponse {
                flags: CloseRequest::POSTQUERY_ATTRIB,
                creation_time: 0x01da_9bc3_f982_fc50,
                last_access_time: 0x01da_9bc3_f982_fc51,
                last_write_time: 0x01da_9bc3_f982_fc52,
                change_time: 0x01da_9bc3_f982_fc53,
                allocation_size: 8192,
                end_of_file: 5000,
                file_attributes: FileAttributes(FileAttributes::ARCHIVE),
            }
        );
        assert_eq!(resp.attributes().map(|a| a.end_of_file), Some(5000));
    }

    #[test]
    fn response_without_attributes() {
        let msg = hex(&format!("{HDR} 3c00 0000 00000000 {}", "00".repeat(52)));
        let resp = CloseResponse::decode(&msg).unwrap();
        assert_eq!(resp, CloseResponse::default());
        assert!(resp.attributes().is_none());
    }

    #[test]
    fn response_malformed() {
        let good = hex(&format!("{HDR} 3c00 0100 00000000 {}", "00".repeat(52)));
        assert!(CloseResponse::decode(&good).is_ok());
        assert!(CloseResponse::decode(&good.slice(..good.len() - 1)).is_err());
        assert!(CloseResponse::decode(&good.slice(..40)).is_err());
        let mut bad = good.to_vec();
        bad[64] = 0x09; // an ERROR response body is not a CLOSE response
        assert!(matches!(
            CloseResponse::decode(&Bytes::from(bad)),
            Err(DecodeError::InvalidValue { .. })
        ));
    }
}
