//! MS-SMB2 2.2.37 SMB2 QUERY_INFO Request and 2.2.38 SMB2 QUERY_INFO Response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{buffer_after, DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::fscc::{FileInformationClass, FsInformationClass, QueryFileInfo, QueryFsInfo};
use crate::msg::{FileId, RequestBody};

/// InfoType of QUERY_INFO and SET_INFO (MS-SMB2 2.2.37, 2.2.39).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct InfoType(pub u8);

impl InfoType {
    /// SMB2_0_INFO_FILE: file information classes (MS-FSCC 2.4).
    pub const FILE: Self = Self(0x01);
    /// SMB2_0_INFO_FILESYSTEM: file system information classes (MS-FSCC 2.5).
    pub const FILESYSTEM: Self = Self(0x02);
    /// SMB2_0_INFO_SECURITY: the security descriptor (MS-DTYP 2.4.6).
    pub const SECURITY: Self = Self(0x03);
    /// SMB2_0_INFO_QUOTA: quota information (MS-FSCC 2.4.41).
    pub const QUOTA: Self = Self(0x04);
}

/// AdditionalInformation bits for InfoType SECURITY (MS-SMB2 2.2.37): which parts of the
/// security descriptor to query or set.
pub mod security_information {
    /// OWNER_SECURITY_INFORMATION.
    pub const OWNER: u32 = 0x0000_0001;
    /// GROUP_SECURITY_INFORMATION.
    pub const GROUP: u32 = 0x0000_0002;
    /// DACL_SECURITY_INFORMATION.
    pub const DACL: u32 = 0x0000_0004;
    /// SACL_SECURITY_INFORMATION.
    pub const SACL: u32 = 0x0000_0008;
    /// LABEL_SECURITY_INFORMATION.
    pub const LABEL: u32 = 0x0000_0010;
    /// ATTRIBUTE_SECURITY_INFORMATION.
    pub const ATTRIBUTE: u32 = 0x0000_0020;
    /// SCOPE_SECURITY_INFORMATION.
    pub const SCOPE: u32 = 0x0000_0040;
    /// BACKUP_SECURITY_INFORMATION.
    pub const BACKUP: u32 = 0x0001_0000;
}

/// MS-SMB2 2.2.37 SMB2 QUERY_INFO Request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct QueryInfoRequest {
    /// InfoType.
    pub info_type: InfoType,
    /// FileInfoClass (a [`FileInformationClass`] or [`FsInformationClass`] value; 0 for
    /// security and quota).
    pub file_info_class: u8,
    /// OutputBufferLength: the most bytes the server may return.
    pub output_buffer_length: u32,
    /// Input buffer (quota queries and a few FILE classes); usually empty.
    pub input: Bytes,
    /// AdditionalInformation (security: [`security_information`] bits).
    pub additional_information: u32,
    /// Flags: SL_RESTART_SCAN etc. ([`QueryInfoRequest::RESTART_SCAN`], ...).
    pub flags: u32,
    /// The open to query ([`FileId::ANY`] in a related compound).
    pub file_id: FileId,
}

impl QueryInfoRequest {
    /// StructureSize of the request (40 fixed bytes + 1 byte of Buffer).
    pub const STRUCTURE_SIZE: u16 = 41;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 40;
    /// SL_RESTART_SCAN.
    pub const RESTART_SCAN: u32 = 0x0000_0001;
    /// SL_RETURN_SINGLE_ENTRY.
    pub const RETURN_SINGLE_ENTRY: u32 = 0x0000_0002;
    /// SL_INDEX_SPECIFIED.
    pub const INDEX_SPECIFIED: u32 = 0x0000_0004;

    /// Query a file information class.
    pub fn file(file_id: FileId, class: FileInformationClass, output_buffer_length: u32) -> Self {
        Self::new(InfoType::FILE, class.0, file_id, output_buffer_length)
    }

    /// Query the file information class of `T` (e.g. `FileStandardInformation`).
    pub fn file_info<T: QueryFileInfo>(file_id: FileId, output_buffer_length: u32) -> Self {
        Self::file(file_id, T::CLASS, output_buffer_length)
    }

    /// Query a file system information class.
    pub fn filesystem(
        file_id: FileId,
        class: FsInformationClass,
        output_buffer_length: u32,
    ) -> Self {
        Self::new(InfoType::FILESYSTEM, class.0, file_id, output_buffer_length)
    }

    /// Query the file system information class of `T` (e.g. `FileFsFullSizeInformation`).
    pub fn fs_info<T: QueryFsInfo>(file_id: FileId, output_buffer_length: u32) -> Self {
        Self::filesystem(file_id, T::CLASS, output_buffer_length)
    }

    /// Query the security descriptor parts named by `additional_information`.
    pub fn security(
        file_id: FileId,
        additional_information: u32,
        output_buffer_length: u32,
    ) -> Self {
        Self {
            additional_information,
            ..Self::new(InfoType::SECURITY, 0, file_id, output_buffer_length)
        }
    }

    fn new(info_type: InfoType, class: u8, file_id: FileId, output_buffer_length: u32) -> Self {
        Self {
            info_type,
            file_info_class: class,
            output_buffer_length,
            input: Bytes::new(),
            additional_information: 0,
            flags: 0,
            file_id,
        }
    }
}

impl RequestBody for QueryInfoRequest {
    const COMMAND: Command = Command::QUERY_INFO;

    fn encode_body(&self, msg: &mut BytesMut) {
        // 3.2.4.x: InputBufferOffset SHOULD be 0 when there is no input buffer.
        let input_offset = if self.input.is_empty() {
            0
        } else {
            msg.len() + Self::FIXED_LEN
        };
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u8(self.info_type.0);
        msg.put_u8(self.file_info_class);
        msg.put_u32_le(self.output_buffer_length);
        msg.put_u16_le(input_offset as u16);
        msg.put_u16_le(0); // Reserved
        msg.put_u32_le(self.input.len() as u32);
        msg.put_u32_le(self.additional_information);
        msg.put_u32_le(self.flags);
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
        if self.input.is_empty() {
            msg.put_u8(0); // the Buffer byte counted by StructureSize 41
        } else {
            msg.put_slice(&self.input);
        }
    }

    fn credit_payload(&self) -> u32 {
        // 3.3.5.20: the charge covers the larger of the input and output buffers.
        self.output_buffer_length.max(self.input.len() as u32)
    }
}

/// MS-SMB2 2.2.38 SMB2 QUERY_INFO Response. Decoded on STATUS_SUCCESS and on
/// STATUS_BUFFER_OVERFLOW (partial data).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct QueryInfoResponse {
    /// The output buffer (a zero-copy slice of the message).
    pub output: Bytes,
}

impl QueryInfoResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 9;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 8;

    /// Decode a whole QUERY_INFO response message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "QUERY_INFO response StructureSize")?;
        let offset = r.u16("QUERY_INFO response OutputBufferOffset")? as usize;
        let length = r.u32("QUERY_INFO response OutputBufferLength")? as usize;
        let output = buffer_after(
            msg,
            HEADER_LEN + Self::FIXED_LEN,
            offset,
            length,
            "QUERY_INFO response output buffer",
        )?;
        Ok(Self { output })
    }

    /// Decode the output as the file information structure `T`.
    pub fn file_info<T: QueryFileInfo>(&self) -> Result<T, DecodeError> {
        T::decode(&self.output)
    }

    /// Decode the output as the file system information structure `T`.
    pub fn fs_info<T: QueryFsInfo>(&self) -> Result<T, DecodeError> {
        T::decode(&self.output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;
    use crate::msg::fscc::{FileFsFullSizeInformation, FileStandardInformation};
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
    fn request_file_info_golden() {
        let req = QueryInfoRequest::file_info::<FileStandardInformation>(FILE_ID, 24);
        assert_eq!(
            body_hex(&req),
            "2900 01 05 18000000 0000 0000 00000000 00000000 00000000 \
             2a00e00100000000 0300000005000000 00"
                .replace(' ', "")
        );
        assert_eq!(req.credit_payload(), 24);
    }

    #[test]
    fn request_fs_and_security_golden() {
        let req = QueryInfoRequest::fs_info::<FileFsFullSizeInformation>(FileId::ANY, 32);
        assert_eq!(
            body_hex(&req),
            "2900 02 07 20000000 0000 0000 00000000 00000000 00000000 \
             ffffffffffffffff ffffffffffffffff 00"
                .replace(' ', "")
        );
        let sec = QueryInfoRequest::security(
            FILE_ID,
            security_information::OWNER | security_information::GROUP | security_information::DACL,
            0x1_0000,
        );
        assert_eq!(
            body_hex(&sec),
            "2900 03 00 00000100 0000 0000 00000000 07000000 00000000 \
             2a00e00100000000 0300000005000000 00"
                .replace(' ', "")
        );
    }

    #[test]
    fn request_with_input_buffer() {
        let mut req = QueryInfoRequest::new(InfoType::QUOTA, 0, FILE_ID, 0x100);
        req.input = Bytes::from_static(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        req.flags = QueryInfoRequest::RESTART_SCAN;
        assert_eq!(
            body_hex(&req),
            "2900 04 00 00010000 6800 0000 09000000 00000000 01000000 \
             2a00e00100000000 0300000005000000 010203040506070809"
                .replace(' ', "")
        );
        req.output_buffer_length = 4;
        assert_eq!(req.credit_payload(), 9);
    }

    const HDR: &str = "fe534d42 4000 0100 00000000 1000 0100 01000000 00000000 \
                       0c00000000000000 feff0000 01000000 0100000000100000 \
                       00000000000000000000000000000000";

    #[test]
    fn response_standard_information() {
        let msg = hex(&format!(
            "{HDR} 0900 4800 18000000 0010000000000000 0b00000000000000 01000000 00 00 0000"
        ));
        let resp = QueryInfoResponse::decode(&msg).unwrap();
        assert_eq!(resp.output.len(), 24);
        let info: FileStandardInformation = resp.file_info().unwrap();
        assert_eq!(info.end_of_file, 11);
        assert_eq!(info.allocation_size, 4096);
        assert_eq!(info.number_of_links, 1);
        // The same bytes are too short for FileFsFullSizeInformation.
        assert!(resp.fs_info::<FileFsFullSizeInformation>().is_err());
    }

    #[test]
    fn response_malformed() {
        let decode = |s: String| QueryInfoResponse::decode(&hex(&s));
        assert!(matches!(
            decode(format!("{HDR} 0900 4800 19000000 {}", "00".repeat(24))),
            Err(DecodeError::BadOffset { .. })
        ));
        assert!(matches!(
            decode(format!("{HDR} 0900 4400 04000000 {}", "00".repeat(24))),
            Err(DecodeError::BadOffset { .. })
        ));
        assert!(matches!(
            decode(format!("{HDR} 0a00 4800 00000000")),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(matches!(
            decode(format!("{HDR} 0900 4800 000000")),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
