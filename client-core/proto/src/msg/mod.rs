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
pub mod close;
pub mod compound;
pub mod create;
pub mod echo;
pub mod error;
pub mod flush;
pub mod fscc;
pub mod ioctl;
pub mod logoff;
pub mod negotiate;
pub mod oplock_break;
pub mod query_directory;
pub mod query_info;
pub mod read;
pub mod session_setup;
pub mod set_info;
#[cfg(test)]
mod test_util;
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

/// CreditCharge for a request that moves `payload` bytes (MS-SMB2 3.2.4.1.5).
pub fn credit_charge(payload: u32) -> u16 {
    if payload == 0 {
        1
    } else {
        (((payload as u64 - 1) / 65536) + 1) as u16
    }
}
