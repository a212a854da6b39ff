//! One file per SMB2 command (MS-SMB2 2.2.x), plus the FSCC information classes they carry.
//!
//! Conventions every file follows:
//! - A request type implements [`RequestBody`]: `encode_body` appends the body to a buffer that
//!   already holds this message's 64-byte header at index 0, so offsets written on the wire are
//!   simply `msg.len()` at the point a variable buffer starts. A large trailing payload (WRITE
//!   data) is not copied into that buffer: it is returned by [`RequestBody::payload`] and sent
//!   after the body by a vectored write.
//! - A response type has `fn decode(msg: &Bytes) -> Result<Self, DecodeError>` taking the whole
//!   message (header included, exactly one message of a compound). Large payloads (READ data)
//!   are returned as `Bytes` slices of `msg`, never copied.
//! - Each file carries golden-byte tests: exact bytes for encoders, real or spec-derived bytes
//!   for decoders, and malformed inputs that must fail with a typed error.

use bytes::{Bytes, BytesMut};

use crate::header::Command;

/// Defines a request and a response whose bodies are only StructureSize 4 and a reserved
/// u16: ECHO (2.2.28/2.2.29), LOGOFF (2.2.7/2.2.8) and TREE_DISCONNECT (2.2.11/2.2.12).
/// Response decoders ignore trailing bytes (compound padding). The golden-byte and malformed-
/// input tests are generated with them.
macro_rules! four_byte_message {
    ($command:expr, $wire_code:literal, $name:literal,
     $(#[$req_doc:meta])* $req:ident,
     $(#[$resp_doc:meta])* $resp:ident) => {
        $(#[$req_doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
        pub struct $req;

        impl $crate::msg::RequestBody for $req {
            const COMMAND: $crate::header::Command = $command;

            fn encode_body(&self, msg: &mut ::bytes::BytesMut) {
                use ::bytes::BufMut;
                msg.put_u16_le(4); // StructureSize
                msg.put_u16_le(0); // Reserved
            }
        }

        $(#[$resp_doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
        pub struct $resp;

        impl $resp {
            /// Decode the response from one whole message (header included).
            pub fn decode(msg: &::bytes::Bytes) -> Result<Self, $crate::codec::DecodeError> {
                let mut r = $crate::codec::Reader::at(msg, $crate::header::HEADER_LEN)?;
                r.structure_size(4, concat!($name, " response StructureSize"))?;
                r.skip(2, concat!($name, " response Reserved"))?;
                Ok($resp)
            }
        }

        #[cfg(test)]
        mod four_byte_message_tests {
            use super::*;
            use crate::codec::DecodeError;
            use crate::header::{Header, HeaderFlags, HEADER_LEN};
            use crate::msg::RequestBody;
            use bytes::{BufMut, Bytes, BytesMut};

            fn response(body: &[u8]) -> Bytes {
                let mut msg = BytesMut::new();
                let mut h = Header::request($command);
                h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
                h.encode(&mut msg);
                msg.put_slice(body);
                msg.freeze()
            }

            #[test]
            fn request_golden_bytes() {
                let mut msg = BytesMut::new();
                Header::request($req::COMMAND).encode(&mut msg);
                $req.encode_body(&mut msg);
                assert_eq!(&msg[HEADER_LEN..], [0x04, 0x00, 0x00, 0x00]);
                assert_eq!(msg[12..14], [$wire_code, 0x00], "Command on the wire");
                assert_eq!($req.credit_payload(), 0);
            }

            #[test]
            fn decodes_response_with_or_without_compound_padding() {
                assert_eq!($resp::decode(&response(&[4, 0, 0, 0])).unwrap(), $resp);
                assert_eq!($resp::decode(&response(&[4, 0, 0, 0, 0, 0, 0, 0])).unwrap(), $resp);
            }

            #[test]
            fn rejects_malformed_responses() {
                assert!($resp::decode(&response(&[])).is_err());
                assert!($resp::decode(&response(&[4, 0])).is_err());
                assert!(matches!(
                    $resp::decode(&response(&[9, 0, 0, 0, 0, 0, 0, 0, 0])),
                    Err(DecodeError::InvalidValue { .. })
                ));
                assert!($resp::decode(&Bytes::from_static(&[0xfe, b'S', b'M', b'B'])).is_err());
            }
        }
    };
}

pub mod cancel;
pub mod change_notify;
pub mod close;
pub mod compound;
pub mod copychunk;
pub mod create;
pub mod dfs;
pub mod echo;
pub mod error;
pub mod flush;
pub mod fscc;
pub mod fscc_ea;
pub mod fscc_link;
pub mod fscc_stream;
pub mod ioctl;
pub mod lock;
pub mod logoff;
pub mod negotiate;
pub mod oplock_break;
pub mod posix;
pub mod query_directory;
pub mod query_info;
pub mod read;
pub mod reparse;
pub mod security_descriptor;
pub mod session_setup;
pub mod set_info;
pub mod snapshots;
pub mod sparse;
#[cfg(test)]
mod test_util;

#[cfg(test)]
mod file_id_offset_tests {
    use super::*;
    use crate::header::HEADER_LEN;

    const ID: FileId = FileId {
        persistent: 0x1716_1514_1312_1110,
        volatile: 0x2726_2524_2322_2120,
    };

    fn check<B: RequestBody>(body: B) {
        let mut msg = BytesMut::new();
        msg.resize(HEADER_LEN, 0);
        body.encode_body(&mut msg);
        let at = HEADER_LEN + file_id_offset(B::COMMAND).expect("command names an open");
        let mut want = [0u8; 16];
        want[..8].copy_from_slice(&ID.persistent.to_le_bytes());
        want[8..].copy_from_slice(&ID.volatile.to_le_bytes());
        assert_eq!(msg[at..at + 16], want, "{}", B::COMMAND);
    }

    #[test]
    fn offsets_match_the_encoders() {
        check(close::CloseRequest::new(ID));
        check(flush::FlushRequest { file_id: ID });
        check(lock::LockRequest {
            file_id: ID,
            lock_sequence: 0,
            locks: vec![],
        });
        check(read::ReadRequest::new(ID, 7, 9));
        check(write::WriteRequest::new(ID, 7, Bytes::from_static(b"x")));
        check(ioctl::IoctlRequest::fsctl(1, ID, Bytes::new(), 0));
        check(query_directory::QueryDirectoryRequest::new(ID, "*", 10));
        check(change_notify::ChangeNotifyRequest::new(
            ID,
            change_notify::CompletionFilter(1),
            true,
            10,
        ));
        check(query_info::QueryInfoRequest::file_info::<
            fscc::FileAllInformation,
        >(ID, 10));
        let eof = fscc::FileEndOfFileInformation { end_of_file: 3 };
        check(set_info::SetInfoRequest::file_info(ID, &eof));
        assert_eq!(file_id_offset(Command::CREATE), None);
        assert_eq!(file_id_offset(Command::OPLOCK_BREAK), None);
    }
}
pub mod transform;
pub mod tree_connect;
pub mod tree_disconnect;
pub mod write;

/// A request body.
pub trait RequestBody {
    /// The command this body belongs to.
    const COMMAND: Command;

    /// Append the body to `msg`, which holds this message's header at index 0.
    fn encode_body(&self, msg: &mut BytesMut);

    /// A trailing payload sent after the body without copying (WRITE data). Its offset and
    /// length are already written by `encode_body`.
    fn payload(&self) -> Bytes {
        Bytes::new()
    }

    /// Bytes this request moves in its larger direction, for CreditCharge (MS-SMB2 3.2.4.1.5:
    /// one credit per 64 KiB). Zero for requests that always cost one credit.
    fn credit_payload(&self) -> u32 {
        0
    }

    /// Whether the request may be sent again on another channel after its own was lost
    /// before the reply came (see [`crate::replay`]).
    fn replay(&self) -> crate::replay::Replay {
        crate::replay::Replay::by_command(Self::COMMAND)
    }
}

/// A 16-byte file handle (MS-SMB2 2.2.14.1): persistent and volatile halves.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct FileId {
    /// Persistent half.
    pub persistent: u64,
    /// Volatile half.
    pub volatile: u64,
}

impl FileId {
    /// All bits set: "the file opened by the previous request of this compound" (related
    /// compounds) and the target of FSCTLs that need no open (MS-SMB2 2.2.31).
    pub const ANY: FileId = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };
}

/// Where the FileId sits in the body of a request that names an open, counted from the end
/// of the 64-byte header; `None` for commands that carry no FileId. A client that reclaims
/// an open under a new FileId after a reconnect (MS-SMB2 3.2.4.4) uses it to point requests
/// built before the reconnect at the reclaimed open. The layouts are those of MS-SMB2
/// 2.2.15 (CLOSE), 2.2.17 (FLUSH), 2.2.19 (READ), 2.2.21 (WRITE), 2.2.31 (IOCTL), 2.2.33
/// (QUERY_DIRECTORY), 2.2.35 (CHANGE_NOTIFY), 2.2.37 (QUERY_INFO) and 2.2.39 (SET_INFO). Break acknowledgements are
/// left out: a lease acknowledgement has a LeaseKey where an oplock one has the FileId.
pub fn file_id_offset(command: Command) -> Option<usize> {
    match command {
        Command::CLOSE
        | Command::FLUSH
        | Command::IOCTL
        | Command::QUERY_DIRECTORY
        | Command::CHANGE_NOTIFY
        | Command::LOCK => Some(8),
        Command::READ | Command::WRITE | Command::SET_INFO => Some(16),
        Command::QUERY_INFO => Some(24),
        _ => None,
    }
}

/// CreditCharge for a request that moves `payload` bytes (MS-SMB2 3.2.4.1.5).
pub fn credit_charge(payload: u32) -> u16 {
    if payload == 0 {
        1
    } else {
        (((payload as u64 - 1) / 65536) + 1) as u16
    }
}
