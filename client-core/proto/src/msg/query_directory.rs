//! MS-SMB2 2.2.33 SMB2 QUERY_DIRECTORY Request and 2.2.34 SMB2 QUERY_DIRECTORY Response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{buffer_after, put_utf16le, utf16le_len, DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::fscc::{
    decode_id_both_directory_information, DirectoryEntry, FileInformationClass,
};
use crate::msg::posix::{decode_posix_directory_information, PosixDirectoryEntry};
use crate::msg::{FileId, RequestBody};
use crate::replay::Replay;

/// MS-SMB2 2.2.33 SMB2 QUERY_DIRECTORY Request: list entries of an open directory matching a
/// pattern. Repeat it on the same open until the server answers STATUS_NO_MORE_FILES.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct QueryDirectoryRequest {
    /// FileInformationClass of the entries (see [`crate::msg::fscc`]).
    pub file_information_class: FileInformationClass,
    /// Flags: [`QueryDirectoryRequest::RESTART_SCANS`], ...
    pub flags: u8,
    /// FileIndex to resume from (with [`QueryDirectoryRequest::INDEX_SPECIFIED`]).
    pub file_index: u32,
    /// The open directory.
    pub file_id: FileId,
    /// Search pattern, e.g. `*` (wildcards `*` and `?`); must not be empty for Samba.
    pub pattern: String,
    /// OutputBufferLength: the most bytes of entries the server may return.
    pub output_buffer_length: u32,
}

impl QueryDirectoryRequest {
    /// StructureSize of the request (32 fixed bytes + 1 byte of Buffer).
    pub const STRUCTURE_SIZE: u16 = 33;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 32;
    /// SMB2_RESTART_SCANS: start the enumeration from the beginning.
    pub const RESTART_SCANS: u8 = 0x01;
    /// SMB2_RETURN_SINGLE_ENTRY: return only the first matching entry.
    pub const RETURN_SINGLE_ENTRY: u8 = 0x02;
    /// SMB2_INDEX_SPECIFIED: resume at FileIndex.
    pub const INDEX_SPECIFIED: u8 = 0x04;
    /// SMB2_REOPEN: restart with a new pattern.
    pub const REOPEN: u8 = 0x10;

    /// FileIdBothDirectoryInformation listing of `pattern`, no flags.
    pub fn new(file_id: FileId, pattern: impl Into<String>, output_buffer_length: u32) -> Self {
        Self {
            file_information_class: FileInformationClass::ID_BOTH_DIRECTORY,
            flags: 0,
            file_index: 0,
            file_id,
            pattern: pattern.into(),
            output_buffer_length,
        }
    }
}

impl RequestBody for QueryDirectoryRequest {
    const COMMAND: Command = Command::QUERY_DIRECTORY;

    fn encode_body(&self, msg: &mut BytesMut) {
        let name_offset = msg.len() + Self::FIXED_LEN;
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u8(self.file_information_class.0);
        msg.put_u8(self.flags);
        msg.put_u32_le(self.file_index);
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
        msg.put_u16_le(name_offset as u16); // FileNameOffset
        msg.put_u16_le(utf16le_len(&self.pattern) as u16); // FileNameLength
        msg.put_u32_le(self.output_buffer_length);
        put_utf16le(msg, &self.pattern);
        // The Buffer is at least one byte (StructureSize 33).
        if self.pattern.is_empty() {
            msg.put_u8(0);
        }
    }

    fn credit_payload(&self) -> u32 {
        self.output_buffer_length
    }

    /// QUERY_DIRECTORY: safe only when it (re)starts the enumeration, since otherwise the
    /// server's cursor may have moved past the entries the lost reply carried.
    fn replay(&self) -> Replay {
        let restarts = QueryDirectoryRequest::RESTART_SCANS | QueryDirectoryRequest::REOPEN;
        if self.flags & restarts != 0 {
            Replay::Safe
        } else {
            Replay::by_command(Command::QUERY_DIRECTORY)
        }
    }
}

/// MS-SMB2 2.2.34 SMB2 QUERY_DIRECTORY Response: the entries as the server encoded them.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct QueryDirectoryResponse {
    /// The output buffer (a zero-copy slice of the message).
    pub output: Bytes,
}

impl QueryDirectoryResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 9;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 8;

    /// Decode a whole QUERY_DIRECTORY response message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(
            Self::STRUCTURE_SIZE,
            "QUERY_DIRECTORY response StructureSize",
        )?;
        let offset = r.u16("QUERY_DIRECTORY response OutputBufferOffset")? as usize;
        let length = r.u32("QUERY_DIRECTORY response OutputBufferLength")? as usize;
        let output = buffer_after(
            msg,
            HEADER_LEN + Self::FIXED_LEN,
            offset,
            length,
            "QUERY_DIRECTORY response output buffer",
        )?;
        Ok(Self { output })
    }

    /// Decode the output as FileIdBothDirectoryInformation entries (the class
    /// [`QueryDirectoryRequest::new`] asks for).
    pub fn id_both_entries(&self) -> Result<Vec<DirectoryEntry>, DecodeError> {
        decode_id_both_directory_information(&self.output)
    }

    /// Decode the output as POSIX entries (a request whose class was
    /// [`FileInformationClass::POSIX`], on a POSIX open of the directory).
    pub fn posix_entries(&self) -> Result<Vec<PosixDirectoryEntry>, DecodeError> {
        decode_posix_directory_information(&self.output)
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
        let mut req = QueryDirectoryRequest::new(FILE_ID, "*", 0x1_0000);
        req.flags = QueryDirectoryRequest::RESTART_SCANS;
        assert_eq!(
            body_hex(&req),
            "2100 25 01 00000000 2a00e00100000000 0300000005000000 6000 0200 00000100 2a00"
                .replace(' ', "")
        );
        assert_eq!(req.credit_payload(), 0x1_0000);
    }

    #[test]
    fn request_pattern_and_index() {
        let mut req = QueryDirectoryRequest::new(FILE_ID, "*.txt", 0x2_0000);
        req.file_information_class = FileInformationClass::BOTH_DIRECTORY;
        req.flags = QueryDirectoryRequest::INDEX_SPECIFIED | QueryDirectoryRequest::REOPEN;
        req.file_index = 7;
        assert_eq!(
            body_hex(&req),
            "2100 03 14 07000000 2a00e00100000000 0300000005000000 6000 0a00 00000200 \
             2a002e00740078007400"
                .replace(' ', "")
        );
        // Empty pattern: still one Buffer byte.
        let empty = QueryDirectoryRequest::new(FILE_ID, "", 100);
        assert!(body_hex(&empty).ends_with("6000 0000 64000000 00".replace(' ', "").as_str()));
    }

    const HDR: &str = "fe534d42 4000 0100 00000000 0e00 0100 01000000 00000000 \
                       0b00000000000000 feff0000 01000000 0100000000100000 \
                       00000000000000000000000000000000";

    /// One FileIdBothDirectoryInformation entry for "a.txt" (114 bytes).
    const ENTRY: &str = "00000000 00000000 \
        50fc82f9c39bda01 51fc82f9c39bda01 52fc82f9c39bda01 53fc82f9c39bda01 \
        0300000000000000 0010000000000000 20000000 0a000000 00000000 \
        00 00 000000000000000000000000000000000000000000000000 0000 \
        2a00e00100000000 61002e00740078007400";

    #[test]
    fn response_with_one_entry() {
        let msg = hex(&format!("{HDR} 0900 4800 72000000 {ENTRY}"));
        let resp = QueryDirectoryResponse::decode(&msg).unwrap();
        assert_eq!(resp.output.len(), 114);
        assert_eq!(resp.output.as_ptr(), msg[72..].as_ptr());
        let entries = resp.id_both_entries().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].file_name, "a.txt");
        assert_eq!(entries[0].end_of_file, 3);
        assert_eq!(entries[0].file_id, 0x01e0_002a);
    }

    #[test]
    fn response_malformed() {
        let decode = |s: String| QueryDirectoryResponse::decode(&hex(&s));
        // Length one past the end.
        assert!(matches!(
            decode(format!("{HDR} 0900 4800 73000000 {ENTRY}")),
            Err(DecodeError::BadOffset { .. })
        ));
        // Offset into the fixed part.
        assert!(matches!(
            decode(format!("{HDR} 0900 4000 08000000 {ENTRY}")),
            Err(DecodeError::BadOffset { .. })
        ));
        // Wrong StructureSize, short fixed part.
        assert!(decode(format!("{HDR} 0800 4800 00000000")).is_err());
        assert!(decode(format!("{HDR} 0900 4800 0000")).is_err());
        // An empty buffer is fine at the message level.
        assert!(decode(format!("{HDR} 0900 0000 00000000 00"))
            .unwrap()
            .output
            .is_empty());
    }
}
