//! The bodies of the coverage-guided fuzz targets in `fuzz/` (see `docs/FUZZING.md`).
//!
//! Each body takes arbitrary bytes, as a hostile server could send them, runs them through the
//! decoders the client uses on that kind of input, and returns nothing: the only failure is a
//! panic (or an assertion below on a property every decode must keep). The libFuzzer targets
//! are one line each around these functions, and `tests/fuzz_replay.rs` runs the same bodies
//! over every kept regression input and every golden fixture on the stable toolchain, so a
//! crash found once stays fixed with exactly the code that found it.
//!
//! Where a target needs to choose (which information class, which cipher), the first input
//! byte chooses and the rest is the data; the seeding script in `fuzz/` writes seeds that way.
//! Not part of the crate's API: hidden, free to change with the targets, and built only with
//! the `fuzzing` feature, so a product's build does not carry it.

use std::sync::OnceLock;

use bytes::Bytes;

use crate::crypto::seal::Sealer;
use crate::crypto::signing::Signer;
use crate::crypto::CryptoBackend;
use crate::header::{Command, Header, HeaderFlags, HEADER_LEN};
use crate::msg::compound::{split_compound, OpenQueryCloseResponse};
use crate::msg::fscc::{self, QueryFileInfo, QueryFsInfo};
use crate::msg::transform::{TransformHeader, TRANSFORM_HEADER_LEN};
use crate::msg::*;
use crate::{Cipher, SigningAlgorithm};

/// A fuzz target body.
pub type Body = fn(&[u8]);

/// Every target of this crate by name: the name is the libFuzzer binary's and the directory's
/// under `fuzz/regressions/` and `fuzz/corpus/`.
pub const TARGETS: &[(&str, Body)] = &[
    ("header", header),
    ("response", response),
    ("negotiate", negotiate),
    ("session_setup", session_setup),
    ("tree_connect", tree_connect),
    ("create", create),
    ("read", read),
    ("query_directory", query_directory),
    ("change_notify", change_notify),
    ("query_info", query_info),
    ("ioctl", ioctl),
    ("error", error),
    ("oplock_break", oplock_break),
    ("fscc", fscc),
    ("network_interfaces", network_interfaces),
    ("dfs_referral", dfs_referral),
    ("compound", compound),
    ("transform", transform),
    ("signing", signing),
];

/// A decoded payload must be a slice of the message it came from: never bytes from elsewhere,
/// never longer than what was received.
fn assert_within(payload: &Bytes, msg: &Bytes) {
    if payload.is_empty() {
        return;
    }
    let (start, end) = (msg.as_ptr() as usize, msg.as_ptr() as usize + msg.len());
    let p = payload.as_ptr() as usize;
    assert!(
        p >= start && p + payload.len() <= end,
        "payload outside its message"
    );
}

/// The timestamp conversion the client applies to every FILETIME it shows.
fn times(t: &[u64]) {
    for &ft in t {
        let _ = fscc::filetime_to_system_time(ft);
    }
}

/// SMB2 header (MS-SMB2 2.2.1) and the rule that decides whether a body is an ERROR body.
pub fn header(data: &[u8]) {
    if let Ok(h) = Header::decode(data) {
        let _ = (h.is_response(), h.is_async(), h.channel_sequence());
        let _ = error::message_carries_error_body(&h, data);
        let _ = h.status.name();
        let _ = h.command.name();
    }
}

/// One response message decoded as the client does: its header picks the body decoder, or the
/// ERROR decoder when the status says the body is an ERROR body.
pub fn response(data: &[u8]) {
    let msg = Bytes::copy_from_slice(data);
    let Ok(h) = Header::decode(&msg) else {
        return;
    };
    if error::message_carries_error_body(&h, &msg) {
        error_body(&msg);
        return;
    }
    match h.command {
        Command::NEGOTIATE => negotiate_body(&msg),
        Command::SESSION_SETUP => session_setup_body(&msg),
        Command::LOGOFF => drop(logoff::LogoffResponse::decode(&msg)),
        Command::TREE_CONNECT => tree_connect_body(&msg),
        Command::TREE_DISCONNECT => drop(tree_disconnect::TreeDisconnectResponse::decode(&msg)),
        Command::CREATE => create_body(&msg),
        Command::CLOSE => close_body(&msg),
        Command::FLUSH => drop(flush::FlushResponse::decode(&msg)),
        Command::READ => read_body(&msg),
        Command::WRITE => drop(write::WriteResponse::decode(&msg)),
        Command::IOCTL => ioctl_body(&msg),
        Command::ECHO => drop(echo::EchoResponse::decode(&msg)),
        Command::QUERY_DIRECTORY => query_directory_body(&msg),
        Command::CHANGE_NOTIFY => change_notify_body(&msg),
        Command::QUERY_INFO => {
            // The client knows which class it asked for; here every class gets the output.
            (0..INFO_CLASSES).for_each(|class| query_info_body(&msg, class));
        }
        Command::SET_INFO => drop(set_info::SetInfoResponse::decode(&msg)),
        Command::OPLOCK_BREAK => oplock_break_body(&msg),
        _ => {}
    }
}

/// NEGOTIATE response (MS-SMB2 2.2.4) with its 3.1.1 negotiate contexts (2.2.4.1).
pub fn negotiate(data: &[u8]) {
    negotiate_body(&Bytes::copy_from_slice(data));
}

fn negotiate_body(msg: &Bytes) {
    if let Ok(r) = negotiate::NegotiateResponse::decode(msg) {
        assert_within(&r.security_buffer, msg);
        let _ = (r.contexts.cipher(), r.contexts.signing_algorithm());
        times(&[r.system_time, r.server_start_time]);
    }
}

/// SESSION_SETUP response (MS-SMB2 2.2.6).
pub fn session_setup(data: &[u8]) {
    session_setup_body(&Bytes::copy_from_slice(data));
}

fn session_setup_body(msg: &Bytes) {
    if let Ok(r) = session_setup::SessionSetupResponse::decode(msg) {
        assert_within(&r.security_buffer, msg);
    }
}

/// TREE_CONNECT response (MS-SMB2 2.2.10).
pub fn tree_connect(data: &[u8]) {
    tree_connect_body(&Bytes::copy_from_slice(data));
}

fn tree_connect_body(msg: &Bytes) {
    if let Ok(r) = tree_connect::TreeConnectResponse::decode(msg) {
        let _ = r.share_flags.caching();
    }
}

/// CREATE response (MS-SMB2 2.2.14) with its create contexts (2.2.14.2): durable handles,
/// leases v1/v2, maximal access, on-disk id, unknown ones.
pub fn create(data: &[u8]) {
    create_body(&Bytes::copy_from_slice(data));
}

fn create_body(msg: &Bytes) {
    if let Ok(r) = create::CreateResponse::decode(msg) {
        let _ = (r.lease(), r.durable_v2(), r.maximal_access());
        times(&[
            r.creation_time,
            r.last_access_time,
            r.last_write_time,
            r.change_time,
        ]);
    }
}

fn close_body(msg: &Bytes) {
    if let Ok(r) = close::CloseResponse::decode(msg) {
        let _ = r.attributes();
    }
}

/// READ response (MS-SMB2 2.2.20): the data must be a slice of the message.
pub fn read(data: &[u8]) {
    read_body(&Bytes::copy_from_slice(data));
}

fn read_body(msg: &Bytes) {
    if let Ok(r) = read::ReadResponse::decode(msg) {
        assert_within(&r.data, msg);
    }
}

/// QUERY_DIRECTORY response (MS-SMB2 2.2.34) and the FileIdBothDirectoryInformation entries in
/// it (MS-FSCC 2.4.17).
pub fn query_directory(data: &[u8]) {
    query_directory_body(&Bytes::copy_from_slice(data));
}

fn query_directory_body(msg: &Bytes) {
    if let Ok(r) = query_directory::QueryDirectoryResponse::decode(msg) {
        if let Ok(entries) = r.id_both_entries() {
            for e in entries {
                times(&[
                    e.creation_time,
                    e.last_access_time,
                    e.last_write_time,
                    e.change_time,
                ]);
            }
        }
    }
}

/// CHANGE_NOTIFY response (MS-SMB2 2.2.36) and its FILE_NOTIFY_INFORMATION records
/// (MS-FSCC 2.7.1).
pub fn change_notify(data: &[u8]) {
    change_notify_body(&Bytes::copy_from_slice(data));
}

fn change_notify_body(msg: &Bytes) {
    if let Ok(r) = change_notify::ChangeNotifyResponse::decode(msg) {
        let _ = r.changes();
    }
}

/// QUERY_INFO response (MS-SMB2 2.2.38): `data[0]` picks the information class the output is
/// decoded as (as in [`fscc`]), the rest is the message.
pub fn query_info(data: &[u8]) {
    let Some((&class, msg)) = data.split_first() else {
        return;
    };
    query_info_body(&Bytes::copy_from_slice(msg), class);
}

fn query_info_body(msg: &Bytes, class: u8) {
    if let Ok(r) = query_info::QueryInfoResponse::decode(msg) {
        assert_within(&r.output, msg);
        info_class(class, &r.output);
    }
}

/// IOCTL response (MS-SMB2 2.2.32) and the FSCTL outputs the client reads:
/// VALIDATE_NEGOTIATE_INFO (2.2.32.6), NETWORK_INTERFACE_INFO (2.2.32.5), the resume key
/// (2.2.32.3), SRV_COPYCHUNK_RESPONSE (2.2.32.1) and SRV_SNAPSHOT_ARRAY (2.2.32.2) with its
/// `@GMT-` tokens.
pub fn ioctl(data: &[u8]) {
    ioctl_body(&Bytes::copy_from_slice(data));
}

fn ioctl_body(msg: &Bytes) {
    if let Ok(r) = ioctl::IoctlResponse::decode(msg) {
        assert_within(&r.input, msg);
        assert_within(&r.output, msg);
        let _ = ioctl::ValidateNegotiateInfoResponse::decode(&r.output);
        let _ = ioctl::parse_network_interfaces(&r.output);
        let _ = copychunk::ResumeKey::decode(&r.output);
        let _ = copychunk::CopyChunkResponse::decode(&r.output);
        if let Ok(array) = snapshots::SnapshotArray::decode(&r.output) {
            for token in &array.tokens {
                if let Some(t) = snapshots::parse_gmt_token(token) {
                    assert_eq!(
                        snapshots::format_gmt_token(t).as_deref(),
                        Some(token.as_str())
                    );
                }
            }
        }
        let _ = sparse::AllocatedRangeBuffer::decode_list(&r.output);
    }
}

/// SMB2 ERROR response (MS-SMB2 2.2.2) and its error contexts (2.2.2.1).
pub fn error(data: &[u8]) {
    error_body(&Bytes::copy_from_slice(data));
}

fn error_body(msg: &Bytes) {
    if let Ok(r) = error::ErrorResponse::decode(msg) {
        let _ = r.contexts();
        let _ = r.required_buffer_len();
    }
}

/// Oplock and lease break notifications (MS-SMB2 2.2.23) and the server's answers to break
/// acknowledgments (2.2.25).
pub fn oplock_break(data: &[u8]) {
    oplock_break_body(&Bytes::copy_from_slice(data));
}

fn oplock_break_body(msg: &Bytes) {
    if let Ok(oplock_break::BreakNotification::Lease(n)) =
        oplock_break::BreakNotification::decode(msg)
    {
        let _ = n.ack_required();
    }
    let _ = oplock_break::BreakAckResponse::decode(msg);
}

/// The MS-FSCC structures the client decodes from output buffers: the first byte picks one,
/// the rest is the buffer.
pub fn fscc(data: &[u8]) {
    if let Some((&class, buf)) = data.split_first() {
        info_class(class, buf);
    }
}

/// How many structures [`info_class`] tells apart.
const INFO_CLASSES: u8 = 13;

/// Decode `buf` as the structure numbered `which` (modulo [`INFO_CLASSES`]): 0 FileAll,
/// 1 FileBasic, 2 FileStandard, 3 FileInternal, 4 FileNetworkOpen, 5 FileFsSize,
/// 6 FileFsFullSize, 7 FileFsAttribute, 8 FileIdBothDirectory entries, 9 FILE_NOTIFY records,
/// 10 FileStreamInformation, 11 a security descriptor (which must also encode back to one
/// that decodes the same), 12 FileFullEaInformation (which must encode back to itself).
fn info_class(which: u8, buf: &[u8]) {
    match which % INFO_CLASSES {
        0 => {
            if let Ok(i) = fscc::FileAllInformation::decode(buf) {
                let b = i.basic;
                times(&[
                    b.creation_time,
                    b.last_access_time,
                    b.last_write_time,
                    b.change_time,
                ]);
            }
        }
        1 => drop(fscc::FileBasicInformation::decode(buf)),
        2 => drop(fscc::FileStandardInformation::decode(buf)),
        3 => drop(fscc::FileInternalInformation::decode(buf)),
        4 => drop(fscc::FileNetworkOpenInformation::decode(buf)),
        5 => drop(fscc::FileFsSizeInformation::decode(buf)),
        6 => {
            if let Ok(i) = fscc::FileFsFullSizeInformation::decode(buf) {
                let _ = i.bytes_per_allocation_unit();
            }
        }
        7 => drop(fscc::FileFsAttributeInformation::decode(buf)),
        8 => drop(fscc::decode_id_both_directory_information(buf)),
        9 => drop(change_notify::decode_file_notify_information(buf)),
        10 => drop(fscc_stream::FileStreamInformation::decode(buf)),
        11 => security_descriptor_round_trip(buf),
        _ => ea_round_trip(buf),
    }
}

/// An EA list that decodes is one this crate could send (every name and value fits its
/// field), and it encodes to bytes that decode to the same list.
fn ea_round_trip(buf: &[u8]) {
    use fscc::SetFileInfo;
    let Ok(list) = fscc_ea::FileFullEaInformation::decode(buf) else {
        return;
    };
    let list = fscc_ea::FileFullEaInformation::new(list.entries).expect("decoded EAs fit");
    let mut out = bytes::BytesMut::new();
    list.encode(&mut out);
    let back = fscc_ea::FileFullEaInformation::decode(&out).expect("encoded EAs decode");
    assert_eq!(back, list, "EA list round trip");
}

/// A security descriptor that decodes encodes again (every ACL and ACE came within 16-bit
/// sizes), and what it encodes to decodes to the same parts.
fn security_descriptor_round_trip(buf: &[u8]) {
    use security_descriptor::{control, SecurityDescriptor};
    let Ok(sd) = SecurityDescriptor::decode(buf) else {
        return;
    };
    for sid in [&sd.owner, &sd.group].into_iter().flatten() {
        let s = sid.to_string();
        assert_eq!(s.parse().as_ref(), Ok(sid), "SID string round trip");
    }
    let raw = sd.encode().expect("a decoded descriptor encodes");
    let back = SecurityDescriptor::decode(&raw).expect("an encoded descriptor decodes");
    let mut want = sd.clone();
    want.control |= control::SELF_RELATIVE;
    if sd.dacl.is_some() {
        want.control |= control::DACL_PRESENT;
    }
    if sd.sacl.is_some() {
        want.control |= control::SACL_PRESENT;
    }
    assert_eq!(back, want, "security descriptor round trip");
}

/// The FSCTL_QUERY_NETWORK_INTERFACE_INFO output (MS-SMB2 2.2.32.5) on its own: the list that
/// multichannel plans its channels from.
pub fn network_interfaces(data: &[u8]) {
    if let Ok(list) = ioctl::parse_network_interfaces(data) {
        // Each entry takes 152 bytes on the wire: the list cannot outgrow its input.
        assert!(list.len() <= data.len() / 152);
    }
}

/// A DFS referral reply (the output of FSCTL_DFS_GET_REFERRALS, MS-DFSC 2.2.4): it names
/// the servers the client connects to next.
pub fn dfs_referral(data: &[u8]) {
    if let Ok(r) = dfs::decode_response(data) {
        // Each entry takes at least 8 bytes after the 8-byte header.
        assert!(r.entries.len() <= data.len().saturating_sub(8) / 8);
        assert!(r.entries.iter().all(|e| (1..=4).contains(&e.version)));
    }
}

/// A received frame split into compounded messages (MS-SMB2 3.2.5.1.9), each decoded as the
/// response it claims to be, and the CREATE + QUERY_INFO + CLOSE compound the client sends
/// for metadata.
pub fn compound(data: &[u8]) {
    let frame = Bytes::copy_from_slice(data);
    if let Ok(messages) = split_compound(&frame) {
        let total: usize = messages.iter().map(Bytes::len).sum();
        assert_eq!(total, frame.len(), "a split must cover the frame exactly");
        for m in &messages {
            assert_within(m, &frame);
            response(m);
        }
    }
    if let Ok(r) = OpenQueryCloseResponse::decode(&frame) {
        if let Ok(q) = r.query.body {
            let _ = q.file_info::<fscc::FileAllInformation>();
        }
    }
}

/// The fixed keys the crypto targets use: any key does, since what is fuzzed is the handling
/// of the bytes around the cryptography, not the ciphers.
const KEY: [u8; 32] = *b"smb3-fuzz-fixed-key-0123456789ab";
const SESSION_ID: u64 = 0x0000_1234_5678_9abc;

const CIPHERS: [Cipher; 4] = [
    Cipher::Aes128Ccm,
    Cipher::Aes128Gcm,
    Cipher::Aes256Ccm,
    Cipher::Aes256Gcm,
];

/// One sealer per (cipher, backend), made once: creating one asks the OS for randomness.
fn sealers() -> &'static [Sealer] {
    static SEALERS: OnceLock<Vec<Sealer>> = OnceLock::new();
    SEALERS.get_or_init(|| {
        let mut out = Vec::new();
        for &backend in CryptoBackend::available() {
            for cipher in CIPHERS {
                let key = &KEY[..cipher.key_len()];
                out.push(Sealer::new(cipher, key, backend).expect("fixed key fits"));
            }
        }
        out
    })
}

/// TRANSFORM_HEADER (MS-SMB2 2.2.41) and decryption (3.2.5.1.1). `data[0]` picks the cipher and
/// backend (bits 0-2) and the mode (bit 3): as is, the rest is a frame from a server without
/// the key, which must be refused and never panic; otherwise the rest is a plaintext that is
/// sealed with the fixed key, damaged at the position `data[1]` names (unless it is 0), and
/// opened again: a server that holds the session's key (every server does) gets its plaintext
/// through decryption, where it must be split and decoded safely.
pub fn transform(data: &[u8]) {
    let [pick, rest @ ..] = data else { return };
    let sealers = sealers();
    let sealer = &sealers[usize::from(pick & 7) % sealers.len()];
    if pick & 8 == 0 {
        let _ = TransformHeader::decode(rest);
        let mut frame = rest.to_vec();
        if let Ok(start) = sealer.open_in_place(&mut frame) {
            after_decryption(&frame[start..]);
        }
        return;
    }
    let [damage, plain @ ..] = rest else { return };
    let Ok(sealed) = sealer.seal(SESSION_ID, &[plain]) else {
        return;
    };
    let mut frame = sealed.to_vec();
    let at = usize::from(*damage);
    if at != 0 {
        let i = (at - 1) % frame.len();
        frame[i] ^= 0x5a;
    }
    match sealer.open_in_place(&mut frame) {
        Ok(start) => {
            assert_eq!(start, TRANSFORM_HEADER_LEN);
            // Every byte is covered: ProtocolId, Flags and OriginalMessageSize are checked,
            // the tag is compared, and the rest of the header is the AAD.
            assert!(at == 0, "a damaged frame was accepted");
            assert_eq!(&frame[start..], plain, "decryption changed the plaintext");
            after_decryption(&frame[start..]);
        }
        Err(_) => assert!(at != 0, "an intact frame was refused"),
    }
}

/// What the client does with a decrypted frame: split it and decode every message.
fn after_decryption(plain: &[u8]) {
    compound(plain);
}

/// One signer per (algorithm, backend), made once.
fn signers() -> &'static [Signer] {
    static SIGNERS: OnceLock<Vec<Signer>> = OnceLock::new();
    SIGNERS.get_or_init(|| {
        let mut out = Vec::new();
        for &backend in CryptoBackend::available() {
            for algorithm in [
                SigningAlgorithm::HmacSha256,
                SigningAlgorithm::AesCmac,
                SigningAlgorithm::AesGmac,
            ] {
                out.push(Signer::new(algorithm, &KEY[..16], backend).expect("fixed key fits"));
            }
        }
        out
    })
}

/// Signature verification (MS-SMB2 3.2.5.1.3). `data[0]` picks the algorithm and backend
/// (bits 0-2) and the mode (bit 3): as is, the rest is a message with whatever signature it
/// carries, which both verifiers must judge alike (and never panic on); otherwise the rest is
/// signed with the fixed key, damaged at `data[1]` (unless 0), and verified: an intact message
/// must pass, a damaged one must not.
pub fn signing(data: &[u8]) {
    let [pick, rest @ ..] = data else { return };
    let signers = signers();
    let signer = &signers[usize::from(pick & 7) % signers.len()];
    if pick & 8 == 0 {
        let mut copy = rest.to_vec();
        assert_eq!(signer.verify(rest), signer.verify_in_place(&mut copy));
        assert_eq!(
            copy, rest,
            "verify_in_place must leave the message as it was"
        );
        return;
    }
    let [damage, msg @ ..] = rest else { return };
    let mut msg = msg.to_vec();
    if signer.sign_in_place(&mut msg, &[]).is_err() {
        assert!(msg.len() < HEADER_LEN);
        return;
    }
    let flags = u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]);
    assert!(HeaderFlags(flags).has(HeaderFlags::SIGNED));
    let at = usize::from(*damage);
    if at != 0 {
        let i = (at - 1) % msg.len();
        msg[i] ^= 0x5a;
    }
    let ok = signer.verify(&msg);
    assert_eq!(ok, signer.verify_in_place(&mut msg.clone()));
    // AES-GMAC takes its nonce from the header rather than MACing those bytes, so damage there
    // changes the nonce, which changes the tag just the same.
    let expected = at == 0;
    assert_eq!(ok, expected, "signature check disagrees (damage at {at})");
}
