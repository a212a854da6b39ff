//! MS-SMB2 2.2.39 SMB2 SET_INFO Request and 2.2.40 SMB2 SET_INFO Response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::fscc::SetFileInfo;
use crate::msg::query_info::InfoType;
use crate::msg::{FileId, RequestBody};

/// MS-SMB2 2.2.39 SMB2 SET_INFO Request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SetInfoRequest {
    /// InfoType.
    pub info_type: InfoType,
    /// FileInfoClass (a file or file system information class; 0 for security and quota).
    pub file_info_class: u8,
    /// Buffer: the encoded information structure.
    pub buffer: Bytes,
    /// AdditionalInformation (security: which descriptor parts are being set).
    pub additional_information: u32,
    /// The open to change ([`FileId::ANY`] in a related compound).
    pub file_id: FileId,
}

impl SetInfoRequest {
    /// StructureSize of the request (32 fixed bytes + 1 byte of Buffer).
    pub const STRUCTURE_SIZE: u16 = 33;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 32;

    /// Set a file information structure, e.g. `FileRenameInformation` or
    /// `FileEndOfFileInformation`.
    pub fn file_info<T: SetFileInfo>(file_id: FileId, info: &T) -> Self {
        let mut buffer = BytesMut::new();
        info.encode(&mut buffer);
        Self {
            info_type: InfoType::FILE,
            file_info_class: T::CLASS.0,
            buffer: buffer.freeze(),
            additional_information: 0,
            file_id,
        }
    }

    /// Set the parts of the file's security descriptor named by `additional_information`
    /// ([`security_information`](crate::msg::query_info::security_information) bits) from
    /// `descriptor`, a self-relative SECURITY_DESCRIPTOR (MS-DTYP 2.4.6).
    pub fn security(file_id: FileId, additional_information: u32, descriptor: Bytes) -> Self {
        Self {
            info_type: InfoType::SECURITY,
            file_info_class: 0,
            buffer: descriptor,
            additional_information,
            file_id,
        }
    }
}

impl RequestBody for SetInfoRequest {
    const COMMAND: Command = Command::SET_INFO;

    fn encode_body(&self, msg: &mut BytesMut) {
        let buffer_offset = msg.len() + Self::FIXED_LEN;
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u8(self.info_type.0);
        msg.put_u8(self.file_info_class);
        msg.put_u32_le(self.buffer.len() as u32); // BufferLength
        msg.put_u16_le(buffer_offset as u16); // BufferOffset
        msg.put_u16_le(0); // Reserved
        msg.put_u32_le(self.additional_information);
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
        msg.put_slice(&self.buffer);
        if self.buffer.is_empty() {
            msg.put_u8(0); // the Buffer byte counted by StructureSize 33
        }
    }

    fn credit_payload(&self) -> u32 {
        self.buffer.len() as u32
    }
}

/// MS-SMB2 2.2.40 SMB2 SET_INFO Response: no fields besides StructureSize.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SetInfoResponse;

impl SetInfoResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 2;

    /// Decode a whole SET_INFO response message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "SET_INFO response StructureSize")?;
        Ok(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;
    use crate::msg::fscc::{
        FileAttributes, FileBasicInformation, FileDispositionInformation, FileEndOfFileInformation,
        FileRenameInformation,
    };
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

    fn clean(s: &str) -> String {
        s.split_whitespace().collect()
    }

    #[test]
    fn rename_golden() {
        let req = SetInfoRequest::file_info(
            FILE_ID,
            &FileRenameInformation {
                replace_if_exists: false,
                file_name: "dir\\b.txt".into(),
            },
        );
        assert_eq!(
            body_hex(&req),
            clean(
                "2100 01 0a 26000000 6000 0000 00000000 2a00e00100000000 0300000005000000 \
                 00 00000000000000 0000000000000000 12000000 \
                 6400690072005c0062002e00740078007400"
            )
        );
        assert_eq!(req.credit_payload(), 38);
    }

    #[test]
    fn security_golden() {
        let sd = Bytes::from_static(&[1, 0, 0, 0x80, 0, 0, 0, 0]);
        let req = SetInfoRequest::security(FILE_ID, 0x4, sd);
        assert_eq!(
            body_hex(&req),
            clean(
                "2100 03 00 08000000 6000 0000 04000000 2a00e00100000000 0300000005000000 \
                 0100008000000000"
            )
        );
        assert_eq!(req.credit_payload(), 8);
    }

    #[test]
    fn disposition_end_of_file_and_basic_golden() {
        let del = SetInfoRequest::file_info(
            FileId::ANY,
            &FileDispositionInformation {
                delete_pending: true,
            },
        );
        assert_eq!(
            body_hex(&del),
            clean("2100 01 0d 01000000 6000 0000 00000000 ffffffffffffffff ffffffffffffffff 01")
        );
        let eof = SetInfoRequest::file_info(FILE_ID, &FileEndOfFileInformation { end_of_file: 0 });
        assert_eq!(
            body_hex(&eof),
            clean(
                "2100 01 14 08000000 6000 0000 00000000 2a00e00100000000 0300000005000000 \
                 0000000000000000"
            )
        );
        // Only the last-write time changes; zeros leave the rest alone.
        let basic = SetInfoRequest::file_info(
            FILE_ID,
            &FileBasicInformation {
                last_write_time: 0x01da_9bc3_f982_fc50,
                file_attributes: FileAttributes(0),
                ..Default::default()
            },
        );
        assert_eq!(
            body_hex(&basic),
            clean(
                "2100 01 04 28000000 6000 0000 00000000 2a00e00100000000 0300000005000000 \
                 0000000000000000 0000000000000000 50fc82f9c39bda01 0000000000000000 \
                 00000000 00000000"
            )
        );
    }

    #[test]
    fn security_set_with_additional_information() {
        let req = SetInfoRequest {
            info_type: InfoType::SECURITY,
            file_info_class: 0,
            buffer: Bytes::from_static(&[0x01, 0x00, 0x04, 0x80]),
            additional_information: 0x4,
            file_id: FILE_ID,
        };
        assert_eq!(
            body_hex(&req),
            clean(
                "2100 03 00 04000000 6000 0000 04000000 2a00e00100000000 0300000005000000 \
                 01000480"
            )
        );
    }

    #[test]
    fn response() {
        let hdr = "fe534d42 4000 0100 00000000 1100 0100 01000000 00000000 \
                   0d00000000000000 feff0000 01000000 0100000000100000 \
                   00000000000000000000000000000000";
        assert_eq!(
            SetInfoResponse::decode(&hex(&format!("{hdr} 0200"))),
            Ok(SetInfoResponse)
        );
        assert!(matches!(
            SetInfoResponse::decode(&hex(&format!("{hdr} 0900"))),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(SetInfoResponse::decode(&hex(&format!("{hdr} 02"))).is_err());
    }
}
