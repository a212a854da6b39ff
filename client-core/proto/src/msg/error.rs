//! MS-SMB2 2.2.2 SMB2 ERROR Response, and which responses carry it (MS-SMB2 3.3.4.4).
//!
//! A server answers a failed request with this body instead of the command's normal response
//! body. A few non-success statuses still come with the normal body; see
//! [`carries_error_body`].

use bytes::Bytes;

use crate::codec::{bytes_at, DecodeError, Reader};
use crate::header::{Command, Header, HEADER_LEN};
use crate::nt_status::NtStatus;

/// Fixed part of the ERROR body; StructureSize 9 counts one byte of ErrorData.
const FIXED_LEN: usize = 8;

/// ErrorId of an SMB2 ERROR Context (MS-SMB2 2.2.2.1). A newtype so unknown ids survive.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ErrorId(pub u32);

impl ErrorId {
    /// SMB2_ERROR_ID_DEFAULT: the context data is formatted as for a response without contexts.
    pub const DEFAULT: ErrorId = ErrorId(0x0000_0000);
    /// SMB2_ERROR_ID_SHARE_REDIRECT (2.2.2.2.2).
    pub const SHARE_REDIRECT: ErrorId = ErrorId(0x7264_5253);
}

/// One SMB2 ERROR Context (MS-SMB2 2.2.2.1), as sent by 3.1.1 servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorContext {
    /// ErrorId.
    pub error_id: ErrorId,
    /// ErrorContextData (ErrorDataLength bytes).
    pub data: Bytes,
}

/// MS-SMB2 2.2.2 SMB2 ERROR Response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorResponse {
    /// ErrorContextCount (3.1.1): how many [`ErrorContext`]s ErrorData holds; 0 means ErrorData
    /// is one plain structure (or empty).
    pub error_context_count: u8,
    /// ErrorData, exactly ByteCount bytes (the lone padding byte servers send with ByteCount 0
    /// is not included).
    pub error_data: Bytes,
}

impl ErrorResponse {
    /// Decode the body of one whole message (header included).
    ///
    /// Tolerant where servers differ harmlessly: with ByteCount 0 the single ErrorData byte the
    /// StructureSize implies may be present (Windows, Samba) or missing.
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(9, "ERROR response StructureSize")?;
        let error_context_count = r.u8("ErrorContextCount")?;
        r.skip(1, "ERROR response Reserved")?;
        let byte_count = r.u32("ByteCount")? as usize;
        let error_data = bytes_at(msg, HEADER_LEN + FIXED_LEN, byte_count, "ERROR ErrorData")?;
        Ok(ErrorResponse {
            error_context_count,
            error_data,
        })
    }

    /// The ERROR Contexts in ErrorData (MS-SMB2 2.2.2.1: each 8-byte aligned from the start of
    /// ErrorData). Empty when ErrorContextCount is 0.
    pub fn contexts(&self) -> Result<Vec<ErrorContext>, DecodeError> {
        let mut out = Vec::new();
        let mut pos = 0usize;
        for i in 0..self.error_context_count {
            if i > 0 {
                pos = pos.next_multiple_of(8);
            }
            let mut r = Reader::at(&self.error_data, pos)?;
            let len = r.u32("ERROR Context ErrorDataLength")? as usize;
            let error_id = ErrorId(r.u32("ERROR Context ErrorId")?);
            let data = bytes_at(
                &self.error_data,
                r.position(),
                len,
                "ERROR Context ErrorContextData",
            )?;
            pos = r.position() + len;
            out.push(ErrorContext { error_id, data });
        }
        Ok(out)
    }

    /// For STATUS_BUFFER_TOO_SMALL: the buffer size the server needs (MS-SMB2 2.2.2.2, a
    /// 4-byte ErrorData). `None` when ErrorData is not exactly that.
    pub fn required_buffer_len(&self) -> Option<u32> {
        match self.error_context_count {
            0 => <[u8; 4]>::try_from(&self.error_data[..])
                .ok()
                .map(u32::from_le_bytes),
            _ => None,
        }
    }
}

/// Whether a response with `status` to `command` carries an SMB2 ERROR body instead of the
/// command's normal response body.
///
/// Success and informational statuses carry the normal body, except STATUS_PENDING (the
/// interim async response, MS-SMB2 3.3.4.2, uses the ERROR layout). Warnings and errors carry
/// an ERROR body except the pairs listed in MS-SMB2 3.3.4.4:
/// - STATUS_MORE_PROCESSING_REQUIRED on SESSION_SETUP,
/// - STATUS_BUFFER_OVERFLOW on READ (named pipes), QUERY_INFO and IOCTL (pipe transceive/peek,
///   DFS referrals; Samba does the same for every FSCTL),
/// - STATUS_NOTIFY_ENUM_DIR on CHANGE_NOTIFY (a success code, so covered by the first rule;
///   Samba sends an ERROR body there, which is byte-compatible with an empty CHANGE_NOTIFY
///   response).
///
/// STATUS_INVALID_PARAMETER on IOCTL is ambiguous: FSCTL_SRV_COPYCHUNK(_WRITE) returns an
/// SRV_COPYCHUNK_RESPONSE in a normal IOCTL body with it, other FSCTLs an ERROR body. This
/// function answers `true` for it; [`message_carries_error_body`] looks at the message to tell.
pub fn carries_error_body(status: NtStatus, command: Command) -> bool {
    if status == NtStatus::PENDING {
        return true;
    }
    if !status.is_error() && !status.is_warning() {
        return false;
    }
    !matches!(
        (status, command),
        (NtStatus::MORE_PROCESSING_REQUIRED, Command::SESSION_SETUP)
            | (
                NtStatus::BUFFER_OVERFLOW,
                Command::READ | Command::QUERY_INFO | Command::IOCTL
            )
    )
}

/// [`carries_error_body`] for a received message, resolving the IOCTL / INVALID_PARAMETER
/// case by the body's StructureSize (9 for ERROR, 49 for an IOCTL response).
pub fn message_carries_error_body(header: &Header, msg: &[u8]) -> bool {
    if header.command == Command::IOCTL && header.status == NtStatus::INVALID_PARAMETER {
        let size = msg
            .get(HEADER_LEN..HEADER_LEN + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]));
        return size != Some(49);
    }
    carries_error_body(header.status, header.command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::test_util::hex;
    use bytes::{BufMut, BytesMut};

    use crate::header::HeaderFlags;

    fn response(status: NtStatus, command: Command, body: &str) -> (Header, Bytes) {
        let mut msg = BytesMut::new();
        let mut h = Header::request(command);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.status = status;
        h.encode(&mut msg);
        msg.put_slice(&hex(body));
        (h, msg.freeze())
    }

    #[test]
    fn decodes_samba_error_with_padding_byte() {
        let (_, msg) = response(
            NtStatus::OBJECT_NAME_NOT_FOUND,
            Command::CREATE,
            "0900 00 00 00000000 00",
        );
        let err = ErrorResponse::decode(&msg).unwrap();
        assert_eq!(err.error_context_count, 0);
        assert!(err.error_data.is_empty());
        assert_eq!(err.contexts().unwrap(), vec![]);
        assert_eq!(err.required_buffer_len(), None);
    }

    #[test]
    fn decodes_error_without_padding_byte() {
        let (_, msg) = response(
            NtStatus::ACCESS_DENIED,
            Command::CREATE,
            "0900 00 00 00000000",
        );
        let err = ErrorResponse::decode(&msg).unwrap();
        assert!(err.error_data.is_empty());
    }

    #[test]
    fn decodes_buffer_too_small() {
        let (_, msg) = response(
            NtStatus::BUFFER_TOO_SMALL,
            Command::QUERY_INFO,
            "0900 00 00 04000000 00010000",
        );
        let err = ErrorResponse::decode(&msg).unwrap();
        assert_eq!(&err.error_data[..], &[0, 1, 0, 0]);
        assert_eq!(err.required_buffer_len(), Some(256));
    }

    #[test]
    fn decodes_error_contexts() {
        // Two contexts: 3 data bytes (padded to 8 from ErrorData start), then 4.
        let (_, msg) = response(
            NtStatus::BAD_NETWORK_NAME,
            Command::TREE_CONNECT,
            "0900 02 00 1c000000
             03000000 53526472 aabbcc 00000000 00
             04000000 00000000 01020304",
        );
        let err = ErrorResponse::decode(&msg).unwrap();
        assert_eq!(err.error_context_count, 2);
        assert_eq!(err.error_data.len(), 28);
        let ctx = err.contexts().unwrap();
        assert_eq!(ctx.len(), 2);
        assert_eq!(ctx[0].error_id, ErrorId::SHARE_REDIRECT);
        assert_eq!(&ctx[0].data[..], &[0xaa, 0xbb, 0xcc]);
        assert_eq!(ctx[1].error_id, ErrorId::DEFAULT);
        assert_eq!(&ctx[1].data[..], &[1, 2, 3, 4]);
        assert_eq!(err.required_buffer_len(), None);
    }

    #[test]
    fn rejects_malformed() {
        let c = Command::CREATE;
        let s = NtStatus::ACCESS_DENIED;
        assert!(ErrorResponse::decode(&response(s, c, "0900 00 00 0000").1).is_err());
        assert!(matches!(
            ErrorResponse::decode(&response(s, c, "0800 00 00 00000000 00").1),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(matches!(
            ErrorResponse::decode(&response(s, c, "0900 00 00 05000000 01020304").1),
            Err(DecodeError::BadOffset { .. })
        ));
        assert!(ErrorResponse::decode(&response(s, c, "0900 00 00 ffffffff 00").1).is_err());

        // Context data longer than ErrorData; context count larger than present.
        let (_, msg) = response(s, c, "0900 01 00 0c000000 09000000 00000000 01020304");
        assert!(ErrorResponse::decode(&msg).unwrap().contexts().is_err());
        let (_, msg) = response(s, c, "0900 ff 00 0c000000 04000000 00000000 01020304");
        assert!(ErrorResponse::decode(&msg).unwrap().contexts().is_err());
    }

    #[test]
    fn which_responses_carry_an_error_body() {
        use Command as C;
        use NtStatus as S;
        assert!(!carries_error_body(S::SUCCESS, C::READ));
        assert!(carries_error_body(S::PENDING, C::READ));
        assert!(carries_error_body(S::ACCESS_DENIED, C::CREATE));
        assert!(carries_error_body(S::NO_MORE_FILES, C::QUERY_DIRECTORY));
        assert!(carries_error_body(S::STOPPED_ON_SYMLINK, C::CREATE));
        assert!(carries_error_body(S::END_OF_FILE, C::READ));
        assert!(!carries_error_body(
            S::MORE_PROCESSING_REQUIRED,
            C::SESSION_SETUP
        ));
        assert!(carries_error_body(
            S::MORE_PROCESSING_REQUIRED,
            C::TREE_CONNECT
        ));
        assert!(!carries_error_body(S::BUFFER_OVERFLOW, C::READ));
        assert!(!carries_error_body(S::BUFFER_OVERFLOW, C::QUERY_INFO));
        assert!(!carries_error_body(S::BUFFER_OVERFLOW, C::IOCTL));
        assert!(carries_error_body(S::BUFFER_OVERFLOW, C::QUERY_DIRECTORY));
        assert!(!carries_error_body(S::NOTIFY_ENUM_DIR, C::CHANGE_NOTIFY));
        assert!(carries_error_body(S::INVALID_PARAMETER, C::IOCTL));
    }

    #[test]
    fn copychunk_invalid_parameter_is_resolved_by_structure_size() {
        let (h, msg) = response(NtStatus::INVALID_PARAMETER, Command::IOCTL, "3100 0000");
        assert!(!message_carries_error_body(&h, &msg));
        let (h, msg) = response(
            NtStatus::INVALID_PARAMETER,
            Command::IOCTL,
            "0900 00 00 00000000 00",
        );
        assert!(message_carries_error_body(&h, &msg));
        let (h, msg) = response(NtStatus::INVALID_PARAMETER, Command::IOCTL, "");
        assert!(message_carries_error_body(&h, &msg));
        let (h, msg) = response(NtStatus::SUCCESS, Command::IOCTL, "3100");
        assert!(!message_carries_error_body(&h, &msg));
        let (h, msg) = response(NtStatus::ACCESS_DENIED, Command::CREATE, "0900");
        assert!(message_carries_error_body(&h, &msg));
    }
}
