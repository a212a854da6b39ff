//! Compounded requests and responses (MS-SMB2 3.2.4.1.4 sending, 3.2.5.1.9 receiving, and the
//! NextCommand field of 2.2.1).
//!
//! Several messages travel in one transport frame: each but the last has NextCommand set to the
//! distance from its header to the next header, which starts 8-byte aligned (zero padding in
//! between). In a *related* compound every message after the first carries
//! SMB2_FLAGS_RELATED_OPERATIONS and uses the SessionId, TreeId and FileId of the previous one
//! (FileId [`FileId::ANY`] in the request). Signing is per message over its padded length, so
//! the built compound exposes each message's byte range.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{pad_to, DecodeError};
use crate::header::{Command, Header, HeaderFlags, HEADER_LEN, PROTOCOL_ID};
use crate::msg::close::{CloseRequest, CloseResponse};
use crate::msg::create::{CreateRequest, CreateResponse};
use crate::msg::query_info::{QueryInfoRequest, QueryInfoResponse};
use crate::msg::{credit_charge, FileId, RequestBody};
use crate::nt_status::NtStatus;

/// Offset of the Flags field in the SMB2 header.
const FLAGS_OFFSET: usize = 16;
/// Offset of the NextCommand field in the SMB2 header.
const NEXT_COMMAND_OFFSET: usize = 20;

/// Most messages accepted in one received compound. Clients compound a handful; the bound
/// keeps a hostile frame of 64-byte headers from producing an unbounded list.
pub const MAX_COMPOUND_MESSAGES: usize = 128;

/// One already-encoded request (header + body, plus an uncopied payload such as WRITE data)
/// to be placed in a compound.
#[derive(Clone, Debug)]
pub struct CompoundMember {
    msg: BytesMut,
    payload: Bytes,
}

impl CompoundMember {
    /// Encode `header` followed by `body`. The header's Command and CreditCharge are taken
    /// from the body.
    pub fn new<B: RequestBody>(header: &Header, body: &B) -> Self {
        let mut header = header.clone();
        header.command = B::COMMAND;
        header.credit_charge = credit_charge(body.credit_payload());
        let mut msg = BytesMut::with_capacity(HEADER_LEN + 128);
        header.encode(&mut msg);
        body.encode_body(&mut msg);
        Self {
            msg,
            payload: body.payload(),
        }
    }

    /// Wrap a message encoded elsewhere. `msg` must start with a 64-byte SMB2 header.
    pub fn from_parts(msg: BytesMut, payload: Bytes) -> Result<Self, DecodeError> {
        check_header_start(&msg)?;
        Ok(Self { msg, payload })
    }
}

/// A compound ready to send: one frame and the byte range of each message in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompoundRequest {
    /// All messages back to back, padded to 8 bytes between them.
    pub frame: BytesMut,
    /// Range of each message in `frame`, padding included for all but the last: exactly the
    /// bytes each signature covers.
    pub ranges: Vec<Range<usize>>,
}

impl CompoundRequest {
    /// Number of messages.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The bytes of message `index` (header first), e.g. to sign it.
    pub fn message(&self, index: usize) -> Option<&[u8]> {
        self.frame.get(self.ranges.get(index)?.clone())
    }

    /// Mutable bytes of message `index`, e.g. to stamp its MessageId or write its signature.
    pub fn message_mut(&mut self, index: usize) -> Option<&mut [u8]> {
        let range = self.ranges.get(index)?.clone();
        self.frame.get_mut(range)
    }
}

/// Build a compound from `members` in order (MS-SMB2 3.2.4.1.4). NextCommand is set on every
/// message but the last to its 8-byte-aligned length; zero padding fills the gap. With
/// `related`, SMB2_FLAGS_RELATED_OPERATIONS is set on every message but the first; without, it
/// is cleared everywhere. Payloads are copied into the frame (compounds carry small messages).
pub fn build_compound(members: Vec<CompoundMember>, related: bool) -> CompoundRequest {
    let total: usize = members
        .iter()
        .map(|m| (m.msg.len() + m.payload.len()).next_multiple_of(8))
        .sum();
    let mut frame = BytesMut::with_capacity(total);
    let mut ranges = Vec::with_capacity(members.len());
    let count = members.len();
    for (index, member) in members.into_iter().enumerate() {
        let start = frame.len();
        frame.put_slice(&member.msg);
        frame.put_slice(&member.payload);
        let last = index + 1 == count;
        if !last {
            pad_to(&mut frame, start, 8);
        }
        let next = if last {
            0
        } else {
            (frame.len() - start) as u32
        };
        let header = &mut frame[start..start + HEADER_LEN];
        header[NEXT_COMMAND_OFFSET..NEXT_COMMAND_OFFSET + 4].copy_from_slice(&next.to_le_bytes());
        let flags_field = &mut header[FLAGS_OFFSET..FLAGS_OFFSET + 4];
        let mut flags = u32::from_le_bytes([
            flags_field[0],
            flags_field[1],
            flags_field[2],
            flags_field[3],
        ]);
        if related && index > 0 {
            flags |= HeaderFlags::RELATED_OPERATIONS;
        } else {
            flags &= !HeaderFlags::RELATED_OPERATIONS;
        }
        flags_field.copy_from_slice(&flags.to_le_bytes());
        ranges.push(start..frame.len());
    }
    CompoundRequest { frame, ranges }
}

fn check_header_start(msg: &[u8]) -> Result<(), DecodeError> {
    if msg.len() < HEADER_LEN {
        return Err(DecodeError::Truncated {
            what: "compounded message header",
            offset: 0,
            needed: HEADER_LEN,
            available: msg.len(),
        });
    }
    if msg[..4] != PROTOCOL_ID {
        return Err(DecodeError::InvalidValue {
            what: "compounded message ProtocolId",
            value: u32::from_le_bytes([msg[0], msg[1], msg[2], msg[3]]).into(),
        });
    }
    Ok(())
}

/// Split a received frame into its messages (MS-SMB2 3.2.5.1.9), without copying. Each
/// message keeps its trailing padding (its signature covers it). NextCommand must be at least
/// a header, a multiple of 8 and inside the frame; every message must start with an SMB2
/// header; at most [`MAX_COMPOUND_MESSAGES`] messages are accepted.
pub fn split_compound(frame: &Bytes) -> Result<Vec<Bytes>, DecodeError> {
    let mut messages = Vec::new();
    let mut start = 0usize;
    loop {
        if messages.len() >= MAX_COMPOUND_MESSAGES {
            return Err(DecodeError::Inconsistent {
                what: "compound",
                detail: "too many compounded messages",
            });
        }
        let rest = frame.slice(start..);
        check_header_start(&rest)?;
        let next = u32::from_le_bytes([
            rest[NEXT_COMMAND_OFFSET],
            rest[NEXT_COMMAND_OFFSET + 1],
            rest[NEXT_COMMAND_OFFSET + 2],
            rest[NEXT_COMMAND_OFFSET + 3],
        ]) as usize;
        if next == 0 {
            messages.push(rest);
            return Ok(messages);
        }
        if next < HEADER_LEN || next % 8 != 0 || next > rest.len() {
            return Err(DecodeError::BadOffset {
                what: "NextCommand",
                offset: start,
                length: next,
                message_len: frame.len(),
            });
        }
        messages.push(rest.slice(..next));
        start += next;
    }
}

/// One message of a compound response, decoded as `T` when its status says the body is that
/// command's response, otherwise carrying the status (the body is then an SMB2 ERROR
/// Response, MS-SMB2 2.2.2, still available in `message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberResponse<T> {
    /// The decoded header.
    pub header: Header,
    /// The whole message (header included, padding included), for signature checks and
    /// error-body decoding.
    pub message: Bytes,
    /// The typed response, or the failure status.
    pub body: Result<T, NtStatus>,
}

impl<T> MemberResponse<T> {
    /// Decode `message` as a response to `expected`. `decode` runs when the status is
    /// SUCCESS or one of `success_warnings` (e.g. BUFFER_OVERFLOW for QUERY_INFO, whose body
    /// then holds partial data); any other status yields `Err(status)`.
    pub fn decode_with(
        message: &Bytes,
        expected: Command,
        success_warnings: &[NtStatus],
        decode: impl FnOnce(&Bytes) -> Result<T, DecodeError>,
    ) -> Result<Self, DecodeError> {
        let header = Header::decode(message)?;
        if header.command != expected {
            return Err(DecodeError::InvalidValue {
                what: "compound response Command",
                value: header.command.0.into(),
            });
        }
        let status = header.status;
        let body = if status == NtStatus::SUCCESS || success_warnings.contains(&status) {
            Ok(decode(message)?)
        } else {
            Err(status)
        };
        Ok(Self {
            header,
            message: message.clone(),
            body,
        })
    }
}

/// Build the related compound CREATE + QUERY_INFO + CLOSE: open a path, query one information
/// class on it and close it in one round trip. `template` supplies SessionId, TreeId, credits
/// requested and the first MessageId (the next two get +1 and +2; the channel may restamp them
/// through [`CompoundRequest::message_mut`]). The QUERY_INFO and CLOSE use [`FileId::ANY`].
pub fn open_query_close(
    template: &Header,
    create: &CreateRequest,
    query: &QueryInfoRequest,
    close_flags: u16,
) -> CompoundRequest {
    let header_for = |i: u64| Header {
        message_id: template.message_id.wrapping_add(i),
        next_command: 0,
        ..template.clone()
    };
    let query = QueryInfoRequest {
        file_id: FileId::ANY,
        ..query.clone()
    };
    let close = CloseRequest {
        flags: close_flags,
        file_id: FileId::ANY,
    };
    build_compound(
        vec![
            CompoundMember::new(&header_for(0), create),
            CompoundMember::new(&header_for(1), &query),
            CompoundMember::new(&header_for(2), &close),
        ],
        true,
    )
}

/// The three responses to [`open_query_close`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenQueryCloseResponse {
    /// The CREATE response.
    pub create: MemberResponse<CreateResponse>,
    /// The QUERY_INFO response (decoded on SUCCESS and BUFFER_OVERFLOW).
    pub query: MemberResponse<QueryInfoResponse>,
    /// The CLOSE response.
    pub close: MemberResponse<CloseResponse>,
}

impl OpenQueryCloseResponse {
    /// Decode a received frame holding exactly the three compounded responses.
    pub fn decode(frame: &Bytes) -> Result<Self, DecodeError> {
        match split_compound(frame)?.as_slice() {
            [create, query, close] => Self::from_messages(create, query, close),
            _ => Err(DecodeError::Inconsistent {
                what: "CREATE + QUERY_INFO + CLOSE compound response",
                detail: "expected exactly three messages",
            }),
        }
    }

    /// Decode the three responses when they arrived separately (e.g. one went async).
    pub fn from_messages(
        create: &Bytes,
        query: &Bytes,
        close: &Bytes,
    ) -> Result<Self, DecodeError> {
        Ok(Self {
            create: MemberResponse::decode_with(
                create,
                Command::CREATE,
                &[],
                CreateResponse::decode,
            )?,
            query: MemberResponse::decode_with(
                query,
                Command::QUERY_INFO,
                &[NtStatus::BUFFER_OVERFLOW],
                QueryInfoResponse::decode,
            )?,
            close: MemberResponse::decode_with(close, Command::CLOSE, &[], CloseResponse::decode)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::create::{AccessMask, CreateDisposition};
    use crate::msg::fscc::{FileAllInformation, FileStandardInformation};
    use crate::msg::test_util::hex;
    use crate::msg::write::WriteRequest;

    fn clean(s: &str) -> String {
        s.split_whitespace().collect()
    }

    fn template() -> Header {
        Header {
            credits: 64,
            message_id: 10,
            tree_id: 1,
            session_id: 0x0000_1000_0000_0001,
            ..Header::request(Command::NEGOTIATE)
        }
    }

    /// Request header: CreditCharge 1, 64 credits, TreeId 1, SessionId 0x0000_1000_0000_0001.
    fn req_hdr(command: &str, flags: &str, next: &str, mid: u8) -> String {
        format!(
            "fe534d42 4000 0100 00000000 {command} 4000 {flags} {next} {mid:02x}00000000000000 \
             00000000 01000000 0100000000100000 00000000000000000000000000000000"
        )
    }

    #[test]
    fn open_query_close_golden() {
        let create = CreateRequest::new(
            "a",
            AccessMask::FILE_READ_ATTRIBUTES | AccessMask::SYNCHRONIZE,
            CreateDisposition::OPEN,
        );
        let query = QueryInfoRequest::file_info::<FileAllInformation>(
            FileId {
                persistent: 1,
                volatile: 2,
            }, // replaced by FileId::ANY
            0x1000,
        );
        let compound =
            open_query_close(&template(), &create, &query, CloseRequest::POSTQUERY_ATTRIB);
        // CREATE: 64 + 56 + 2 = 122 -> padded to 128 (0x80).
        // QUERY_INFO: 64 + 41 = 105 -> padded to 112 (0x70). CLOSE: 64 + 24 = 88, last.
        let expected = clean(&format!(
            "{} 3900 00 00 02000000 0000000000000000 0000000000000000 \
               80001000 00000000 07000000 01000000 00000000 7800 0200 00000000 00000000 \
               6100 000000000000 \
             {} 2900 01 12 00100000 0000 0000 00000000 00000000 00000000 \
               ffffffffffffffff ffffffffffffffff 00 00000000000000 \
             {} 1800 0100 00000000 ffffffffffffffff ffffffffffffffff",
            req_hdr("0500", "00000000", "80000000", 10),
            req_hdr("1000", "04000000", "70000000", 11),
            req_hdr("0600", "04000000", "00000000", 12),
        ));
        assert_eq!(hex::encode(&compound.frame), expected);
        assert_eq!(compound.ranges, vec![0..128, 128..240, 240..328]);
        assert_eq!(compound.len(), 3);
        assert_eq!(compound.message(1).unwrap().len(), 112);
        assert!(compound.message(3).is_none());
    }

    #[test]
    fn build_clears_related_flag_when_unrelated_and_on_first() {
        let mut h = template();
        h.flags = HeaderFlags(HeaderFlags::RELATED_OPERATIONS | HeaderFlags::SIGNED);
        let members = vec![
            CompoundMember::new(&h, &CloseRequest::new(FileId::ANY)),
            CompoundMember::new(&h, &CloseRequest::new(FileId::ANY)),
        ];
        let related = build_compound(members.clone(), true);
        let unrelated = build_compound(members, false);
        for (compound, second_flags) in [(&related, 0x0c), (&unrelated, 0x08)] {
            let first = Header::decode(compound.message(0).unwrap()).unwrap();
            let second = Header::decode(compound.message(1).unwrap()).unwrap();
            assert_eq!(first.flags, HeaderFlags(HeaderFlags::SIGNED));
            assert_eq!(second.flags, HeaderFlags(second_flags));
            // 88-byte CLOSE messages: 88 is already aligned, no padding.
            assert_eq!(first.next_command, 88);
            assert_eq!(second.next_command, 0);
        }
    }

    #[test]
    fn build_with_payload_and_single_message() {
        let write = WriteRequest::new(FileId::ANY, 0, Bytes::from_static(b"abc"));
        let members = vec![
            CompoundMember::new(&template(), &write),
            CompoundMember::new(&template(), &CloseRequest::new(FileId::ANY)),
        ];
        let compound = build_compound(members, true);
        // WRITE: 64 + 48 + 3 = 115 -> 120.
        assert_eq!(compound.ranges, vec![0..120, 120..208]);
        assert_eq!(&compound.frame[112..115], b"abc");
        assert_eq!(&compound.frame[115..120], &[0; 5]);
        let single = build_compound(
            vec![CompoundMember::new(
                &template(),
                &CloseRequest::new(FileId::ANY),
            )],
            true,
        );
        assert_eq!(single.ranges, vec![0..88]);
        assert_eq!(Header::decode(&single.frame).unwrap().flags, HeaderFlags(0));
        assert!(build_compound(vec![], true).is_empty());
    }

    #[test]
    fn message_mut_restamps_one_message() {
        let mut compound = build_compound(
            vec![
                CompoundMember::new(&template(), &CloseRequest::new(FileId::ANY)),
                CompoundMember::new(&template(), &CloseRequest::new(FileId::ANY)),
            ],
            true,
        );
        compound.message_mut(1).unwrap()[24..32].copy_from_slice(&99u64.to_le_bytes());
        let split = split_compound(&compound.frame.clone().freeze()).unwrap();
        assert_eq!(Header::decode(&split[0]).unwrap().message_id, 10);
        assert_eq!(Header::decode(&split[1]).unwrap().message_id, 99);
    }

    #[test]
    fn from_parts_requires_a_header() {
        assert!(CompoundMember::from_parts(BytesMut::from(&[0u8; 63][..]), Bytes::new()).is_err());
        let mut not_smb = BytesMut::new();
        template().encode(&mut not_smb);
        not_smb[0] = 0xfd;
        assert!(CompoundMember::from_parts(not_smb, Bytes::new()).is_err());
    }

    /// Response header: given status and command, NextCommand, MessageId, TreeId 1,
    /// SessionId 0x0000_1000_0000_0001, RELATED set on all but the first.
    fn resp_hdr(status: &str, command: &str, flags: &str, next: &str, mid: u8) -> String {
        format!(
            "fe534d42 4000 0100 {status} {command} 0100 {flags} {next} {mid:02x}00000000000000 \
             feff0000 01000000 0100000000100000 00000000000000000000000000000000"
        )
    }

    /// Samba-style response to open("a") + QUERY_INFO(FileStandardInformation) + CLOSE.
    fn success_frame() -> String {
        // CREATE response: 64 + 88 = 152 (aligned). QUERY_INFO: 64 + 8 + 24 = 96 (aligned).
        // CLOSE: 64 + 60 = 124, last, padded by the server to 128.
        format!(
            "{} 5900 00 00 01000000 \
               50fc82f9c39bda01 51fc82f9c39bda01 52fc82f9c39bda01 53fc82f9c39bda01 \
               0010000000000000 0300000000000000 20000000 00000000 \
               2a00e00100000000 0300000005000000 00000000 00000000 \
             {} 0900 4800 18000000 0010000000000000 0300000000000000 01000000 00 00 0000 \
             {} 3c00 0000 00000000 {} 00000000",
            resp_hdr("00000000", "0500", "01000000", "98000000", 10),
            resp_hdr("00000000", "1000", "05000000", "60000000", 11),
            resp_hdr("00000000", "0600", "05000000", "00000000", 12),
            "00".repeat(52),
        )
    }

    #[test]
    fn split_and_decode_open_query_close() {
        let frame = hex(&success_frame());
        let parts = split_compound(&frame).unwrap();
        assert_eq!(
            parts.iter().map(Bytes::len).collect::<Vec<_>>(),
            vec![152, 96, 128]
        );
        assert_eq!(parts[1].as_ptr(), frame[152..].as_ptr());
        let resp = OpenQueryCloseResponse::decode(&frame).unwrap();
        let create = resp.create.body.as_ref().unwrap();
        assert_eq!(create.end_of_file, 3);
        assert_eq!(
            create.file_id,
            FileId {
                persistent: 0x01e0_002a,
                volatile: 0x5_0000_0003,
            }
        );
        assert_eq!(resp.create.header.message_id, 10);
        let info: FileStandardInformation = resp.query.body.as_ref().unwrap().file_info().unwrap();
        assert_eq!(info.end_of_file, 3);
        assert!(resp.query.header.flags.has(HeaderFlags::RELATED_OPERATIONS));
        assert_eq!(resp.close.body.as_ref().unwrap().flags, 0);
        assert_eq!(resp.close.message.len(), 128);
    }

    #[test]
    fn failed_open_fails_every_member() {
        // OBJECT_NAME_NOT_FOUND on CREATE; Samba fails the related QUERY_INFO and CLOSE with
        // the same status. Each body is a 9-byte ERROR response padded to 8.
        let err = "3400 00c0"; // 0xC0000034 little-endian
        let status = clean(err);
        let error_body = "0900 00 00 00000000 00 00000000000000";
        let frame = hex(&format!(
            "{} {error_body} {} {error_body} {} {error_body}",
            resp_hdr(&status, "0500", "01000000", "50000000", 10),
            resp_hdr(&status, "1000", "05000000", "50000000", 11),
            resp_hdr(&status, "0600", "05000000", "00000000", 12),
        ));
        let resp = OpenQueryCloseResponse::decode(&frame).unwrap();
        assert_eq!(resp.create.body, Err(NtStatus::OBJECT_NAME_NOT_FOUND));
        assert_eq!(resp.query.body, Err(NtStatus::OBJECT_NAME_NOT_FOUND));
        assert_eq!(resp.close.body, Err(NtStatus::OBJECT_NAME_NOT_FOUND));
        assert_eq!(resp.close.message.len(), 80);
    }

    #[test]
    fn buffer_overflow_query_is_decoded() {
        let frame = success_frame().replacen(
            &resp_hdr("00000000", "1000", "05000000", "60000000", 11),
            &resp_hdr("05000080", "1000", "05000000", "60000000", 11),
            1,
        );
        let resp = OpenQueryCloseResponse::decode(&hex(&frame)).unwrap();
        assert_eq!(resp.query.header.status, NtStatus::BUFFER_OVERFLOW);
        assert_eq!(resp.query.body.as_ref().unwrap().output.len(), 24);
    }

    #[test]
    fn typed_decode_rejects_wrong_commands_and_counts() {
        // QUERY_INFO in the CLOSE slot.
        let swapped = success_frame().replacen(
            &resp_hdr("00000000", "0600", "05000000", "00000000", 12),
            &resp_hdr("00000000", "1000", "05000000", "00000000", 12),
            1,
        );
        assert!(matches!(
            OpenQueryCloseResponse::decode(&hex(&swapped)),
            Err(DecodeError::InvalidValue { .. })
        ));
        // Only the first two messages (NextCommand 0 on the second).
        let frame = hex(&success_frame());
        let mut two = frame.slice(..248).to_vec();
        two[152 + 20..152 + 24].copy_from_slice(&[0; 4]);
        assert!(matches!(
            OpenQueryCloseResponse::decode(&Bytes::from(two)),
            Err(DecodeError::Inconsistent { .. })
        ));
        // A SUCCESS member whose body is malformed is an error, not a status.
        let mut broken = frame.to_vec();
        broken[64] = 0x58; // CREATE StructureSize 88
        assert!(OpenQueryCloseResponse::decode(&Bytes::from(broken)).is_err());
    }

    #[test]
    fn split_malformed() {
        let frame = hex(&success_frame()).to_vec();
        let split = |f: &[u8]| split_compound(&Bytes::copy_from_slice(f));
        let set_next = |f: &mut Vec<u8>, at: usize, v: u32| {
            f[at + 20..at + 24].copy_from_slice(&v.to_le_bytes());
        };
        // NextCommand smaller than a header, unaligned, past the end.
        for next in [8u32, 60, 0x9c, 0x1000] {
            let mut bad = frame.clone();
            set_next(&mut bad, 0, next);
            assert!(
                matches!(split(&bad), Err(DecodeError::BadOffset { .. })),
                "next {next:#x}"
            );
        }
        // Next lands on something that is not an SMB2 header.
        let mut bad = frame.clone();
        set_next(&mut bad, 0, 0x90);
        assert!(matches!(split(&bad), Err(DecodeError::InvalidValue { .. })));
        // Frame shorter than a header; last message shorter than a header.
        assert!(matches!(
            split(&frame[..63]),
            Err(DecodeError::Truncated { .. })
        ));
        let mut short_tail = frame[..152 + 96 + 40].to_vec();
        set_next(&mut short_tail, 152, 0x60);
        assert!(matches!(
            split(&short_tail),
            Err(DecodeError::Truncated { .. })
        ));
        // A single message splits into itself.
        let single = &frame[..152];
        let mut single = single.to_vec();
        set_next(&mut single, 0, 0);
        assert_eq!(split(&single).unwrap().len(), 1);
    }

    #[test]
    fn split_is_bounded() {
        let mut header = BytesMut::new();
        Header {
            next_command: 64,
            ..Header::request(Command::ECHO)
        }
        .encode(&mut header);
        let mut frame = BytesMut::new();
        for _ in 0..MAX_COMPOUND_MESSAGES + 1 {
            frame.put_slice(&header);
        }
        let mut frame = frame.to_vec();
        let last = frame.len() - HEADER_LEN;
        frame[last + 20..last + 24].copy_from_slice(&[0; 4]);
        assert!(matches!(
            split_compound(&Bytes::from(frame.clone())),
            Err(DecodeError::Inconsistent { .. })
        ));
        let ok = Bytes::from(frame).slice(HEADER_LEN..);
        assert_eq!(split_compound(&ok).unwrap().len(), MAX_COMPOUND_MESSAGES);
    }
}
