//! MS-SMB2 2.2.35 SMB2 CHANGE_NOTIFY Request and 2.2.36 SMB2 CHANGE_NOTIFY Response, with the
//! FILE_NOTIFY_INFORMATION entries the response carries (MS-FSCC 2.7.1).
//!
//! A CHANGE_NOTIFY on an open directory completes only when something in it changes (MS-SMB2
//! 3.3.5.19): the server answers with an interim STATUS_PENDING at once and the final reply
//! whenever that happens, which may be never. A client that stops watching sends CANCEL
//! (3.2.4.24); the final reply is then STATUS_CANCELLED. Closing the directory completes it
//! with STATUS_NOTIFY_CLEANUP.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{buffer_after, utf16le_to_string, DecodeError, EntryChain, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::{FileId, RequestBody};

/// CompletionFilter of a CHANGE_NOTIFY request (MS-SMB2 2.2.35): which kinds of change
/// complete it. A newtype so any combination of bits, known or not, can be sent.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct CompletionFilter(pub u32);

impl CompletionFilter {
    /// FILE_NOTIFY_CHANGE_FILE_NAME: a file was created, deleted or renamed.
    pub const FILE_NAME: u32 = 0x0000_0001;
    /// FILE_NOTIFY_CHANGE_DIR_NAME: a directory was created, deleted or renamed.
    pub const DIR_NAME: u32 = 0x0000_0002;
    /// FILE_NOTIFY_CHANGE_ATTRIBUTES: attributes changed.
    pub const ATTRIBUTES: u32 = 0x0000_0004;
    /// FILE_NOTIFY_CHANGE_SIZE: a file's size changed.
    pub const SIZE: u32 = 0x0000_0008;
    /// FILE_NOTIFY_CHANGE_LAST_WRITE: the last write time changed.
    pub const LAST_WRITE: u32 = 0x0000_0010;
    /// FILE_NOTIFY_CHANGE_LAST_ACCESS: the last access time changed.
    pub const LAST_ACCESS: u32 = 0x0000_0020;
    /// FILE_NOTIFY_CHANGE_CREATION: the creation time changed.
    pub const CREATION: u32 = 0x0000_0040;
    /// FILE_NOTIFY_CHANGE_EA: extended attributes changed.
    pub const EA: u32 = 0x0000_0080;
    /// FILE_NOTIFY_CHANGE_SECURITY: the security descriptor changed.
    pub const SECURITY: u32 = 0x0000_0100;
    /// FILE_NOTIFY_CHANGE_STREAM_NAME: a named stream was added, removed or renamed.
    pub const STREAM_NAME: u32 = 0x0000_0200;
    /// FILE_NOTIFY_CHANGE_STREAM_SIZE: a named stream's size changed.
    pub const STREAM_SIZE: u32 = 0x0000_0400;
    /// FILE_NOTIFY_CHANGE_STREAM_WRITE: a named stream was written.
    pub const STREAM_WRITE: u32 = 0x0000_0800;
}

/// MS-SMB2 2.2.35 SMB2 CHANGE_NOTIFY Request: wait for changes in an open directory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ChangeNotifyRequest {
    /// Flags: [`ChangeNotifyRequest::WATCH_TREE`] or 0.
    pub flags: u16,
    /// OutputBufferLength: the most bytes of FILE_NOTIFY_INFORMATION the server may return.
    pub output_buffer_length: u32,
    /// The open directory.
    pub file_id: FileId,
    /// Which changes complete the request.
    pub completion_filter: CompletionFilter,
}

impl ChangeNotifyRequest {
    /// StructureSize of the request.
    pub const STRUCTURE_SIZE: u16 = 32;
    /// SMB2_WATCH_TREE: report changes in subdirectories too.
    pub const WATCH_TREE: u16 = 0x0001;

    /// Watch `file_id` for `filter`, in subdirectories too when `recursive`.
    pub fn new(
        file_id: FileId,
        filter: CompletionFilter,
        recursive: bool,
        output_buffer_length: u32,
    ) -> Self {
        Self {
            flags: if recursive { Self::WATCH_TREE } else { 0 },
            output_buffer_length,
            file_id,
            completion_filter: filter,
        }
    }
}

impl RequestBody for ChangeNotifyRequest {
    const COMMAND: Command = Command::CHANGE_NOTIFY;

    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u16_le(self.flags);
        msg.put_u32_le(self.output_buffer_length);
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
        msg.put_u32_le(self.completion_filter.0);
        msg.put_u32_le(0); // Reserved
    }

    fn credit_payload(&self) -> u32 {
        self.output_buffer_length
    }
}

/// MS-SMB2 2.2.36 SMB2 CHANGE_NOTIFY Response: FILE_NOTIFY_INFORMATION entries as the server
/// encoded them. STATUS_NOTIFY_ENUM_DIR comes with an empty buffer (Samba sends an ERROR body
/// there, which has the same layout).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ChangeNotifyResponse {
    /// The output buffer (a zero-copy slice of the message).
    pub output: Bytes,
}

impl ChangeNotifyResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 9;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 8;

    /// Decode a whole CHANGE_NOTIFY response message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "CHANGE_NOTIFY response StructureSize")?;
        let offset = r.u16("CHANGE_NOTIFY response OutputBufferOffset")? as usize;
        let length = r.u32("CHANGE_NOTIFY response OutputBufferLength")? as usize;
        let output = buffer_after(
            msg,
            HEADER_LEN + Self::FIXED_LEN,
            offset,
            length,
            "CHANGE_NOTIFY response output buffer",
        )?;
        Ok(Self { output })
    }

    /// Decode the output as FILE_NOTIFY_INFORMATION entries.
    pub fn changes(&self) -> Result<Vec<FileNotifyInformation>, DecodeError> {
        decode_file_notify_information(&self.output)
    }
}

/// Action of a FILE_NOTIFY_INFORMATION entry (MS-FSCC 2.7.1). A newtype so values a future
/// server sends survive decoding.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NotifyAction(pub u32);

impl NotifyAction {
    /// FILE_ACTION_ADDED: the file was added to the directory.
    pub const ADDED: NotifyAction = NotifyAction(0x0000_0001);
    /// FILE_ACTION_REMOVED: the file was removed from the directory.
    pub const REMOVED: NotifyAction = NotifyAction(0x0000_0002);
    /// FILE_ACTION_MODIFIED: the file was modified (data, times or attributes).
    pub const MODIFIED: NotifyAction = NotifyAction(0x0000_0003);
    /// FILE_ACTION_RENAMED_OLD_NAME: renamed; this entry has the old name.
    pub const RENAMED_OLD_NAME: NotifyAction = NotifyAction(0x0000_0004);
    /// FILE_ACTION_RENAMED_NEW_NAME: renamed; this entry has the new name.
    pub const RENAMED_NEW_NAME: NotifyAction = NotifyAction(0x0000_0005);
    /// FILE_ACTION_ADDED_STREAM: a named stream was added.
    pub const ADDED_STREAM: NotifyAction = NotifyAction(0x0000_0006);
    /// FILE_ACTION_REMOVED_STREAM: a named stream was removed.
    pub const REMOVED_STREAM: NotifyAction = NotifyAction(0x0000_0007);
    /// FILE_ACTION_MODIFIED_STREAM: a named stream was modified.
    pub const MODIFIED_STREAM: NotifyAction = NotifyAction(0x0000_0008);

    fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::ADDED => "ADDED",
            Self::REMOVED => "REMOVED",
            Self::MODIFIED => "MODIFIED",
            Self::RENAMED_OLD_NAME => "RENAMED_OLD_NAME",
            Self::RENAMED_NEW_NAME => "RENAMED_NEW_NAME",
            Self::ADDED_STREAM => "ADDED_STREAM",
            Self::REMOVED_STREAM => "REMOVED_STREAM",
            Self::MODIFIED_STREAM => "MODIFIED_STREAM",
            _ => return None,
        })
    }
}

impl std::fmt::Debug for NotifyAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "NotifyAction({:#x})", self.0),
        }
    }
}

/// One FILE_NOTIFY_INFORMATION entry (MS-FSCC 2.7.1).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FileNotifyInformation {
    /// What happened.
    pub action: NotifyAction,
    /// The name, relative to the watched directory (backslash-separated).
    pub file_name: String,
}

/// Fixed part of a FILE_NOTIFY_INFORMATION entry: NextEntryOffset, Action, FileNameLength.
const NOTIFY_FIXED: usize = 12;

/// Decode a chain of FILE_NOTIFY_INFORMATION entries (MS-FSCC 2.7.1). Every entry starts on a
/// 4-byte boundary ("NextEntryOffset MUST always be an integral multiple of 4") and its name
/// must lie inside it; the chain ends at NextEntryOffset 0. An empty buffer is no entries.
pub fn decode_file_notify_information(
    buf: &[u8],
) -> Result<Vec<FileNotifyInformation>, DecodeError> {
    let chain = EntryChain {
        min_entry: NOTIFY_FIXED,
        align: 4,
        what_next: "FILE_NOTIFY_INFORMATION.NextEntryOffset",
        what: "FILE_NOTIFY_INFORMATION",
    };
    chain.decode(buf, |entry, start| {
        let mut r = Reader::new(entry);
        r.skip(4, "FILE_NOTIFY_INFORMATION.NextEntryOffset")?;
        let action = NotifyAction(r.u32("FILE_NOTIFY_INFORMATION.Action")?);
        let name_len = r.u32("FILE_NOTIFY_INFORMATION.FileNameLength")? as usize;
        if name_len > entry.len() - NOTIFY_FIXED {
            return Err(DecodeError::BadOffset {
                what: "FILE_NOTIFY_INFORMATION.FileName",
                offset: start + NOTIFY_FIXED,
                length: name_len,
                message_len: buf.len(),
            });
        }
        let raw = r.bytes(name_len, "FILE_NOTIFY_INFORMATION.FileName")?;
        let file_name = utf16le_to_string(raw, "FILE_NOTIFY_INFORMATION.FileName")?;
        Ok(FileNotifyInformation { action, file_name })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;
    use crate::msg::test_util::{encode, hex};

    const FILE_ID: FileId = FileId {
        persistent: 0x01e0_002a,
        volatile: 0x5_0000_0003,
    };

    #[test]
    fn request_golden() {
        let req = ChangeNotifyRequest::new(
            FILE_ID,
            CompletionFilter(CompletionFilter::FILE_NAME | CompletionFilter::DIR_NAME),
            true,
            0x1_0000,
        );
        let msg = encode(&req);
        assert_eq!(msg[12..14], [0x0f, 0x00], "Command on the wire");
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "2000 0100 00000100 2a00e00100000000 0300000005000000 03000000 00000000"
                .replace(' ', "")
        );
        assert_eq!(req.credit_payload(), 0x1_0000);
        let flat = ChangeNotifyRequest::new(FILE_ID, CompletionFilter(0x17), false, 4096);
        assert!(hex::encode(&encode(&flat)[HEADER_LEN..]).starts_with("200000000010"));
    }

    const HDR: &str = "fe534d42 4000 0100 00000000 0f00 0100 03000000 00000000 \
                       0a00000000000000 0100000000000000 0100000000100000 \
                       00000000000000000000000000000000";

    /// Three entries: ADDED "a.txt" (padded to 32 bytes), RENAMED_OLD_NAME "é" (16), and the
    /// last, RENAMED_NEW_NAME "d\x" (NextEntryOffset 0, 18 bytes, no padding needed).
    const ENTRIES: &str = "20000000 01000000 0a000000 61002e00740078007400 0000000000000000 0000 \
                           10000000 04000000 02000000 e900 0000 \
                           00000000 05000000 06000000 64005c007800";

    #[test]
    fn response_with_entries() {
        let msg = hex(&format!("{HDR} 0900 4800 42000000 {ENTRIES}"));
        let resp = ChangeNotifyResponse::decode(&msg).unwrap();
        assert_eq!(resp.output.len(), 66);
        assert_eq!(resp.output.as_ptr(), msg[72..].as_ptr(), "zero-copy");
        let changes = resp.changes().unwrap();
        assert_eq!(
            changes,
            vec![
                FileNotifyInformation {
                    action: NotifyAction::ADDED,
                    file_name: "a.txt".into()
                },
                FileNotifyInformation {
                    action: NotifyAction::RENAMED_OLD_NAME,
                    file_name: "é".into()
                },
                FileNotifyInformation {
                    action: NotifyAction::RENAMED_NEW_NAME,
                    file_name: "d\\x".into()
                },
            ]
        );
        assert_eq!(format!("{:?}", NotifyAction(0x42)), "NotifyAction(0x42)");
        assert_eq!(format!("{:?}", changes[0].action), "ADDED");
    }

    #[test]
    fn empty_and_enum_dir_responses() {
        // STATUS_NOTIFY_ENUM_DIR as Samba sends it: an ERROR-shaped body, nothing in it.
        let msg = hex(&format!("{HDR} 0900 0000 00000000 00"));
        let resp = ChangeNotifyResponse::decode(&msg).unwrap();
        assert!(resp.output.is_empty());
        assert_eq!(resp.changes().unwrap(), vec![]);
        let h = Header::decode(&msg).unwrap();
        assert_eq!(h.command, Command::CHANGE_NOTIFY);
    }

    #[test]
    fn response_malformed() {
        let decode = |s: String| ChangeNotifyResponse::decode(&hex(&s));
        // Length one past the end.
        assert!(matches!(
            decode(format!("{HDR} 0900 4800 43000000 {ENTRIES}")),
            Err(DecodeError::BadOffset { .. })
        ));
        // Offset into the fixed part.
        assert!(matches!(
            decode(format!("{HDR} 0900 4000 08000000 {ENTRIES}")),
            Err(DecodeError::BadOffset { .. })
        ));
        // Wrong StructureSize, short fixed part, header only.
        assert!(decode(format!("{HDR} 0800 4800 00000000")).is_err());
        assert!(decode(format!("{HDR} 0900 4800 0000")).is_err());
        assert!(decode(HDR.to_string()).is_err());
    }

    fn entries(s: &str) -> Result<Vec<FileNotifyInformation>, DecodeError> {
        decode_file_notify_information(&hex(s))
    }

    #[test]
    fn entry_chain_malformed() {
        // NextEntryOffset not a multiple of 4.
        assert!(matches!(
            entries("0d000000 01000000 02000000 6100 000000 00000000 01000000 00000000"),
            Err(DecodeError::BadOffset { .. })
        ));
        // NextEntryOffset shorter than the fixed part, and past the end.
        assert!(matches!(
            entries("08000000 01000000 00000000 00000000"),
            Err(DecodeError::BadOffset { .. })
        ));
        assert!(matches!(
            entries("40000000 01000000 02000000 6100 0000"),
            Err(DecodeError::BadOffset { .. })
        ));
        // A name longer than its entry (would run into the next one) or the buffer.
        assert!(matches!(
            entries("10000000 01000000 08000000 61006200 00000000 01000000 00000000"),
            Err(DecodeError::BadOffset { .. })
        ));
        assert!(matches!(
            entries("00000000 01000000 ffffffff 6100"),
            Err(DecodeError::BadOffset { .. })
        ));
        // An odd name length, and an unpaired surrogate.
        assert!(matches!(
            entries("00000000 01000000 03000000 610062"),
            Err(DecodeError::BadString { .. })
        ));
        assert!(matches!(
            entries("00000000 01000000 02000000 00d8"),
            Err(DecodeError::BadString { .. })
        ));
        // Truncated fixed part.
        assert!(matches!(
            entries("00000000 0100"),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn a_long_well_formed_chain_decodes_without_looping() {
        // 1000 minimal entries with empty names, each pointing 12 bytes on.
        let mut buf = Vec::new();
        for i in 0..1000u32 {
            let next: u32 = if i == 999 { 0 } else { 12 };
            buf.extend_from_slice(&next.to_le_bytes());
            buf.extend_from_slice(&3u32.to_le_bytes());
            buf.extend_from_slice(&0u32.to_le_bytes());
        }
        let got = decode_file_notify_information(&buf).unwrap();
        assert_eq!(got.len(), 1000);
        assert!(got.iter().all(|e| e.action == NotifyAction::MODIFIED));
    }
}
