//! Criterion micro-benchmarks of the SMB2 codec on the data path: what the client encodes for
//! every READ, WRITE and CREATE it sends, and what it decodes from every reply.
//!
//! The encoders are measured the way the channel calls them (a header placeholder, the body
//! behind it, the WRITE payload kept aside as `Bytes`), so a change that started copying the
//! payload would turn the flat WRITE line into one that grows with the size. The READ reply is
//! decoded at several sizes for the same reason: its data must stay a slice of the message.
//! The CREATE reply is a real one captured from Samba (lease v2 + durable v2 contexts).
//!
//! Run: `cargo bench -p smb3-proto --bench codec` (see docs/PERFORMANCE.md, "Micro-benchmarks").

use std::hint::black_box;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_main, BenchmarkId, Criterion};
use smb3_proto::header::{Command, Header, HeaderFlags, HEADER_LEN};
use smb3_proto::msg::create::{
    AccessMask, CreateContextRequest, CreateDisposition, CreateOptions, CreateRequest,
    CreateResponse, Lease, LeaseState, LeaseV2, OplockLevel,
};
use smb3_proto::msg::fscc::FileAttributes;
use smb3_proto::msg::read::{ReadRequest, ReadResponse};
use smb3_proto::msg::write::{WriteRequest, WriteResponse};
use smb3_proto::msg::{credit_charge, FileId, RequestBody};

/// Payload sizes of the data path: a small file's tail, a page, one credit, the default chunk
/// and the largest READ/WRITE Samba negotiates.
const SIZES: [usize; 5] = [64, 4 << 10, 64 << 10, 1 << 20, 8 << 20];

const FILE_ID: FileId = FileId {
    persistent: 0x0000_0000_01e0_002a,
    volatile: 0x0000_0005_0000_0003,
};

/// A CREATE response from Samba 4.17 granting a RWH lease v2 and a durable v2 handle: the
/// reply to the open every file copy starts with.
const CREATE_RESPONSE: &[u8] =
    include_bytes!("../tests/fixtures/samba-4.17/create_resp_write_lease_dh2q.bin");

/// A request as the channel builds it: the body behind a 64-byte placeholder, then the header
/// written over the placeholder once MessageId and credits are known. Returns the frame head
/// and the payload that is sent after it without being copied.
fn encode_request<B: RequestBody>(body: &B, message_id: u64) -> (BytesMut, Bytes) {
    let mut msg = BytesMut::with_capacity(HEADER_LEN + 128);
    msg.resize(HEADER_LEN, 0);
    body.encode_body(&mut msg);
    let payload = body.payload();
    let mut header = Header::request(B::COMMAND);
    header.credit_charge = credit_charge(body.credit_payload());
    header.credits = header.credit_charge;
    header.message_id = message_id;
    header.tree_id = 1;
    header.session_id = 0x1234_5678;
    let mut head = BytesMut::with_capacity(HEADER_LEN);
    header.encode(&mut head);
    msg[..HEADER_LEN].copy_from_slice(&head);
    (msg, payload)
}

/// A response header as a server sends it (SERVER_TO_REDIR, signed flag irrelevant here).
fn response_header(command: Command, out: &mut BytesMut) {
    let mut h = Header::request(command);
    h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
    h.message_id = 7;
    h.credits = 16;
    h.encode(out);
}

/// A READ response carrying `len` bytes of data at DataOffset 0x50 (MS-SMB2 2.2.20).
fn read_response(len: usize) -> Bytes {
    let mut m = BytesMut::with_capacity(HEADER_LEN + 16 + len);
    response_header(Command::READ, &mut m);
    m.put_u16_le(ReadResponse::STRUCTURE_SIZE);
    m.put_u8((HEADER_LEN + ReadResponse::FIXED_LEN) as u8); // DataOffset
    m.put_u8(0); // Reserved
    m.put_u32_le(len as u32); // DataLength
    m.put_u32_le(0); // DataRemaining
    m.put_u32_le(0); // Flags
    m.resize(HEADER_LEN + ReadResponse::FIXED_LEN + len, 0x5a);
    m.freeze()
}

/// A WRITE response saying `count` bytes were written (MS-SMB2 2.2.22).
fn write_response(count: u32) -> Bytes {
    let mut m = BytesMut::with_capacity(HEADER_LEN + 16);
    response_header(Command::WRITE, &mut m);
    m.put_u16_le(WriteResponse::STRUCTURE_SIZE);
    m.put_u16_le(0); // Reserved
    m.put_u32_le(count);
    m.put_u32_le(0); // Remaining
    m.put_u16_le(0); // WriteChannelInfoOffset
    m.put_u16_le(0); // WriteChannelInfoLength
    m.freeze()
}

/// The CREATE the client sends to open a file for a copy: lease v2 + durable v2 + maximal
/// access + on-disk id, a name of typical length.
fn create_request() -> CreateRequest {
    let mut req = CreateRequest::new(
        "backups\\2026-11-24\\projects\\smb3\\client-core\\src\\channel\\mod.rs",
        AccessMask::GENERIC_READ | AccessMask::GENERIC_WRITE,
        CreateDisposition::OPEN_IF,
    );
    req.oplock_level = OplockLevel::LEASE;
    req.file_attributes = FileAttributes(FileAttributes::NORMAL);
    req.create_options = CreateOptions(CreateOptions::NON_DIRECTORY_FILE);
    req.contexts = vec![
        CreateContextRequest::DurableHandleV2 {
            timeout_ms: 0,
            flags: 0,
            create_guid: [0x11; 16],
        },
        CreateContextRequest::Lease(Lease {
            key: [0x22; 16],
            state: LeaseState(
                LeaseState::READ_CACHING | LeaseState::HANDLE_CACHING | LeaseState::WRITE_CACHING,
            ),
            flags: 0,
            v2: Some(LeaseV2 {
                parent_key: [0; 16],
                epoch: 0,
            }),
        }),
        CreateContextRequest::QueryMaximalAccess { timestamp: None },
        CreateContextRequest::QueryOnDiskId,
    ];
    req
}

fn header(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec/header");
    let mut h = Header::request(Command::READ);
    h.message_id = 42;
    g.bench_function("encode", |b| {
        b.iter(|| {
            let mut out = BytesMut::with_capacity(HEADER_LEN);
            black_box(&h).encode(&mut out);
            out
        })
    });
    let mut encoded = BytesMut::new();
    h.encode(&mut encoded);
    g.bench_function("decode", |b| {
        b.iter(|| Header::decode(black_box(&encoded)).expect("own header"))
    });
    g.finish();
}

fn read(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec/read");
    g.bench_function("request encode", |b| {
        b.iter(|| encode_request(&ReadRequest::new(FILE_ID, 1 << 30, 1 << 20), 9))
    });
    for size in SIZES {
        let msg = read_response(size);
        // No throughput: the decode must not touch the data, so its time is flat across the
        // sizes and a rate in bytes would be meaningless. A time growing with the size is the
        // regression to look for.
        g.bench_with_input(BenchmarkId::new("response decode", size), &msg, |b, msg| {
            b.iter(|| {
                let r = ReadResponse::decode(black_box(msg)).expect("valid READ response");
                debug_assert_eq!(r.data.len(), size);
                r
            })
        });
    }
    g.finish();
}

fn write(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec/write");
    for size in SIZES {
        let data = Bytes::from(vec![0xa5; size]);
        // Flat across sizes too: the payload goes out as its own `Bytes`, never copied here.
        g.bench_with_input(
            BenchmarkId::new("request encode", size),
            &data,
            |b, data| {
                b.iter(|| {
                    // The clone is a refcount bump, as when the file layer hands a chunk over.
                    let req = WriteRequest::new(FILE_ID, 1 << 30, data.clone());
                    encode_request(black_box(&req), 11)
                })
            },
        );
    }
    let msg = write_response(1 << 20);
    g.bench_function("response decode", |b| {
        b.iter(|| WriteResponse::decode(black_box(&msg)).expect("valid WRITE response"))
    });
    g.finish();
}

fn create(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec/create");
    let req = create_request();
    g.bench_function("request encode (lease v2 + DH2Q + MxAc + QFid)", |b| {
        b.iter(|| encode_request(black_box(&req), 13))
    });
    let msg = Bytes::from_static(CREATE_RESPONSE);
    g.bench_function("response decode (Samba, lease v2 + DH2Q)", |b| {
        b.iter(|| {
            let r = CreateResponse::decode(black_box(&msg)).expect("captured CREATE response");
            debug_assert!(r.lease().is_some());
            r
        })
    });
    g.finish();
}

/// Every case of this file. Written out rather than with `criterion_group!`, whose generated
/// `pub fn` has no doc comment and so fails the workspace's `missing_docs` under `-D warnings`.
pub fn benches() {
    let mut c = Criterion::default().configure_from_args();
    header(&mut c);
    read(&mut c);
    write(&mut c);
    create(&mut c);
}

criterion_main!(benches);
