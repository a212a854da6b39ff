//! Criterion micro-benchmarks of SMB3 signing and sealing per message size, on every crypto
//! backend compiled in (`CryptoBackend::available()`: RustCrypto always, aws-lc-rs with the
//! default `aws-lc` feature).
//!
//! Each case runs the call the channel makes on the data path:
//! - sign: a WRITE as the writer sends it, header + body in one buffer and the payload in
//!   another (`Signer::sign_in_place` with the payload in `rest`);
//! - verify: a READ reply in the one buffer the reader holds (`Signer::verify_in_place`);
//! - seal: header + payload into a new TRANSFORM frame (`Sealer::seal`, its one copy included);
//! - open: a sealed frame decrypted where it lies (`Sealer::open_in_place`).
//!
//! HMAC-SHA256 and AES-CCM only exist on RustCrypto (the library maps them there whatever
//! backend is asked), so they are listed once, under `RustCrypto`. The 64-byte size is the
//! fixed cost per message (key schedule, nonce, tag); 1 MiB and 8 MiB are the default and the
//! largest chunk. `crypto-bench` (benches/src/bin) measures the same calls at one size to write
//! the "Crypto per core" table; these are the per-size, statistically checked version.
//!
//! Run: `cargo bench -p smb3-proto --bench crypto` (see docs/PERFORMANCE.md, "Micro-benchmarks").

use std::hint::black_box;
use std::time::Duration;

use bytes::BytesMut;
use criterion::{criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use smb3_proto::crypto::{CryptoBackend, Sealer, Signer};
use smb3_proto::dialect::{Cipher, SigningAlgorithm};
use smb3_proto::header::{Command, Header, HEADER_LEN};

const SIZES: [usize; 5] = [64, 4 << 10, 64 << 10, 1 << 20, 8 << 20];

/// Header + WRITE request body before the payload (MS-SMB2 2.2.21: DataOffset 0x70).
const WRITE_PREFIX: usize = 112;

/// READ response body before the data (MS-SMB2 2.2.20: DataOffset 0x50).
const READ_BODY: usize = 16;

const SIGNING: [SigningAlgorithm; 3] = [
    SigningAlgorithm::HmacSha256,
    SigningAlgorithm::AesCmac,
    SigningAlgorithm::AesGmac,
];

const CIPHERS: [Cipher; 4] = [
    Cipher::Aes128Gcm,
    Cipher::Aes256Gcm,
    Cipher::Aes128Ccm,
    Cipher::Aes256Ccm,
];

/// Payload bytes that are not all equal, so no backend can take a shortcut on them.
fn payload(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
        .collect()
}

fn encoded_header(command: Command, message_id: u64) -> BytesMut {
    let mut h = Header::request(command);
    h.message_id = message_id;
    h.session_id = 0x1234_5678;
    let mut out = BytesMut::with_capacity(HEADER_LEN);
    h.encode(&mut out);
    out
}

/// A READ reply of `data` signed by `signer`, in one buffer as the reader holds it.
fn signed_read_reply(signer: &Signer, data: &[u8]) -> Vec<u8> {
    let mut m = encoded_header(Command::READ, 9).to_vec();
    m.resize(HEADER_LEN + READ_BODY, 0);
    m.extend_from_slice(data);
    signer.sign_in_place(&mut m, &[]).expect("sign a reply");
    m
}

/// The backend label of a case, or `None` when the library would run it on another backend
/// than asked (HMAC-SHA256, CCM): those are benchmarked once, under the backend they use.
fn label(asked: CryptoBackend, used: CryptoBackend) -> Option<String> {
    (asked == used).then(|| format!("{used:?}"))
}

fn signing(c: &mut Criterion) {
    for algorithm in SIGNING {
        let mut g = c.benchmark_group(format!("sign/{algorithm:?}"));
        for &backend in CryptoBackend::available() {
            let signer = Signer::new(algorithm, &[0x42; 16], backend).expect("16-byte key");
            let Some(name) = label(backend, signer.backend()) else {
                continue;
            };
            for size in SIZES {
                let data = payload(size);
                g.throughput(Throughput::Bytes(size as u64));
                let mut prefix = vec![0u8; WRITE_PREFIX];
                prefix[..HEADER_LEN].copy_from_slice(&encoded_header(Command::WRITE, 7));
                g.bench_function(BenchmarkId::new(format!("{name} sign WRITE"), size), |b| {
                    b.iter(|| {
                        signer
                            .sign_in_place(black_box(&mut prefix), &[black_box(&data)])
                            .expect("sign a WRITE")
                    })
                });
                let mut reply = signed_read_reply(&signer, &data);
                g.bench_function(
                    BenchmarkId::new(format!("{name} verify READ reply"), size),
                    |b| {
                        b.iter(|| {
                            // A rejected signature would make the number meaningless.
                            assert!(signer.verify_in_place(black_box(&mut reply)));
                        })
                    },
                );
            }
        }
        g.finish();
    }
}

fn sealing(c: &mut Criterion) {
    for cipher in CIPHERS {
        let mut g = c.benchmark_group(format!("seal/{cipher:?}"));
        for &backend in CryptoBackend::available() {
            let key = vec![0x24; cipher.key_len()];
            let sealer = Sealer::new(cipher, &key, backend).expect("key of the cipher's length");
            let Some(name) = label(backend, sealer.backend()) else {
                continue;
            };
            for size in SIZES {
                let data = payload(size);
                let header = encoded_header(Command::READ, 11);
                g.throughput(Throughput::Bytes(size as u64));
                g.bench_function(BenchmarkId::new(format!("{name} seal"), size), |b| {
                    b.iter(|| {
                        sealer
                            .seal(1, &[black_box(&header), black_box(&data)])
                            .expect("seal")
                    })
                });
                let sealed = sealer.seal(1, &[&header, &data]).expect("seal");
                // Opening decrypts in place, so every iteration needs a fresh copy of the
                // frame; criterion makes those copies outside the timed part.
                let batch = if size >= 64 << 10 {
                    BatchSize::LargeInput
                } else {
                    BatchSize::SmallInput
                };
                g.bench_function(BenchmarkId::new(format!("{name} open"), size), |b| {
                    b.iter_batched_ref(
                        || sealed.to_vec(),
                        |frame| sealer.open_in_place(frame).expect("open what was sealed"),
                        batch,
                    )
                });
            }
        }
        g.finish();
    }
}

/// Shorter than criterion's defaults (3 s warm-up, 5 s, 100 samples): there are about a
/// hundred cases, and a regression in a cipher moves its number by far more than the noise
/// 20 samples leave. The command line (`--measurement-time`, `--sample-size`) still wins.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

/// Every case of this file. Written out rather than with `criterion_group!`, whose generated
/// `pub fn` has no doc comment and so fails the workspace's `missing_docs` under `-D warnings`.
pub fn benches() {
    let mut c = config().configure_from_args();
    signing(&mut c);
    sealing(&mut c);
}

criterion_main!(benches);
