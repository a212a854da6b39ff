//! The bodies of the fuzz targets over the client's receive path (see `docs/FUZZING.md`);
//! the decoders' own targets are in `smb3_proto::fuzzing`. Shared, like those, by the
//! libFuzzer targets in `fuzz/` and by the replay test `tests/fuzz_replay.rs`. Not part of
//! the API: hidden, free to change with the targets, and built only with the `fuzzing`
//! feature.

mod channel;

pub use smb3_proto::fuzzing::Body;

/// Every target of this crate by name (the libFuzzer binary's and its directories' name).
pub const TARGETS: &[(&str, Body)] = &[
    ("transport_frames", transport_frames),
    ("reply_dispatch", reply_dispatch),
];

/// Direct TCP framing (MS-SMB2 2.1): `data[0]` sets how the stream is cut into reads, the
/// rest is the stream, read frame by frame by the channel's frame reader.
pub fn transport_frames(data: &[u8]) {
    channel::transport_frames(data);
}

/// The channel's reply dispatch: `data[0]` picks whether session keys are installed and
/// whether the harness signs or seals the stream as the server would, the rest is the
/// server's byte stream, read by a real channel whose requests wait for replies.
pub fn reply_dispatch(data: &[u8]) {
    channel::reply_dispatch(data);
}
