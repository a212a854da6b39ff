//! Every decoder, fed hundreds of thousands of mutated and random inputs, returns `Ok` or a
//! typed error: never a panic, never an allocation sized by the wire before it is checked.
//!
//! A deterministic stand-in for a fuzzer that runs in CI: the inputs are well-formed headers
//! with the right StructureSize followed by random or mutated bytes, so the decoders get past
//! their first checks and into the offset/length/count logic where the bugs live.

use bytes::{BufMut, Bytes, BytesMut};
use smb3_proto::header::Header;
use smb3_proto::msg::fscc::{QueryFileInfo, QueryFsInfo};
use smb3_proto::msg::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A response header followed by a body that starts with `structure_size` and continues with
/// bytes that favour small numbers (so offsets and lengths often land near real ones).
fn candidate(rng: &mut Rng, structure_size: u16) -> Bytes {
    let mut msg = BytesMut::new();
    Header {
        flags: smb3_proto::HeaderFlags(smb3_proto::HeaderFlags::SERVER_TO_REDIR),
        ..Header::default()
    }
    .encode(&mut msg);
    msg.put_u16_le(structure_size);
    let len = rng.below(400);
    for _ in 0..len {
        let b = match rng.below(4) {
            0 => 0,
            1 => rng.below(0x100) as u8,
            2 => (64 + rng.below(200)) as u8,
            _ => 0xFF,
        };
        msg.put_u8(b);
    }
    // Sometimes truncate anywhere, header included.
    if rng.below(8) == 0 {
        let cut = rng.below(msg.len() + 1);
        msg.truncate(cut);
    }
    msg.freeze()
}

fn run<T>(
    name: &str,
    structure_size: u16,
    decode: impl Fn(&Bytes) -> Result<T, smb3_proto::DecodeError>,
) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ u64::from(structure_size));
    let mut ok = 0;
    for _ in 0..40_000 {
        let m = candidate(&mut rng, structure_size);
        if decode(&m).is_ok() {
            ok += 1;
        }
    }
    // Not an assertion on the decoder: just proof the inputs reached past the first check.
    eprintln!("{name}: {ok} of 40000 decoded");
}

#[test]
fn response_decoders_never_panic() {
    run("negotiate", 65, negotiate::NegotiateResponse::decode);
    run(
        "session_setup",
        9,
        session_setup::SessionSetupResponse::decode,
    );
    run(
        "tree_connect",
        16,
        tree_connect::TreeConnectResponse::decode,
    );
    run("create", 89, create::CreateResponse::decode);
    run("close", 60, close::CloseResponse::decode);
    run("flush", 4, flush::FlushResponse::decode);
    run("read", 17, read::ReadResponse::decode);
    run("write", 17, write::WriteResponse::decode);
    run("query_directory", 9, |m| {
        query_directory::QueryDirectoryResponse::decode(m).and_then(|r| r.id_both_entries())
    });
    run("change_notify", 9, |m| {
        change_notify::ChangeNotifyResponse::decode(m).and_then(|r| r.changes())
    });
    run("query_info all", 9, |m| {
        query_info::QueryInfoResponse::decode(m)
            .and_then(|r| r.file_info::<fscc::FileAllInformation>())
    });
    run("query_info fs", 9, |m| {
        let r = query_info::QueryInfoResponse::decode(m)?;
        let _ = r.fs_info::<fscc::FileFsFullSizeInformation>();
        let _ = r.fs_info::<fscc::FileFsAttributeInformation>();
        r.file_info::<fscc::FileNetworkOpenInformation>()
    });
    run("ioctl", 49, |m| {
        let r = ioctl::IoctlResponse::decode(m)?;
        let _ = ioctl::ValidateNegotiateInfoResponse::decode(&r.output);
        ioctl::parse_network_interfaces(&r.output)
    });
    run("error", 9, |m| {
        error::ErrorResponse::decode(m).and_then(|e| e.contexts())
    });
    run("set_info", 2, set_info::SetInfoResponse::decode);
    run("echo", 4, echo::EchoResponse::decode);
    run("logoff", 4, logoff::LogoffResponse::decode);
    run(
        "tree_disconnect",
        4,
        tree_disconnect::TreeDisconnectResponse::decode,
    );
    run("oplock break", 24, oplock_break::BreakNotification::decode);
    run("lease break", 44, oplock_break::BreakNotification::decode);
    run(
        "lease break ack",
        36,
        oplock_break::BreakAckResponse::decode,
    );
    run("header", 0, |m| Header::decode(m));
    run("compound", 0, compound::split_compound);
    run("transform", 0, |m| transform::TransformHeader::decode(m));
}

#[test]
fn raw_payload_decoders_never_panic() {
    let mut rng = Rng(7);
    for _ in 0..100_000 {
        let len = rng.below(700);
        let buf: Vec<u8> = (0..len)
            .map(|_| match rng.below(3) {
                0 => 0,
                1 => (rng.below(160)) as u8,
                _ => rng.below(256) as u8,
            })
            .collect();
        let _ = fscc::decode_id_both_directory_information(&buf);
        let _ = change_notify::decode_file_notify_information(&buf);
        let _ = ioctl::parse_network_interfaces(&buf);
        let _ = fscc::FileAllInformation::decode(&buf);
        let _ = fscc::FileBasicInformation::decode(&buf);
        let _ = fscc::FileStandardInformation::decode(&buf);
        let _ = fscc::FileFsFullSizeInformation::decode(&buf);
        let _ = fscc::FileFsAttributeInformation::decode(&buf);
        let _ = fscc::FileFsSizeInformation::decode(&buf);
        let _ = ioctl::ValidateNegotiateInfoResponse::decode(&buf);
        let _ = snapshots::SnapshotArray::decode(&buf);
        let _ = snapshots::parse_gmt_token(&String::from_utf8_lossy(&buf));
    }
}
