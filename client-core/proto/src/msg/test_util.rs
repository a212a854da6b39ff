//! Helpers shared by the golden-byte tests of the message modules.

use bytes::{Bytes, BytesMut};

use crate::header::Header;
use crate::msg::RequestBody;

/// Hex (whitespace ignored) to bytes, so messages captured from a server can be pasted in.
pub(crate) fn hex(s: &str) -> Bytes {
    let clean: String = s.split_whitespace().collect();
    Bytes::from(hex::decode(clean).expect("valid hex in test"))
}

/// A request message as sent: a default header for the body's command, then the body.
pub(crate) fn encode<B: RequestBody>(body: &B) -> BytesMut {
    let mut msg = BytesMut::new();
    Header::request(B::COMMAND).encode(&mut msg);
    body.encode_body(&mut msg);
    msg
}
