//! `crypto-bench`: how fast one core signs, verifies, seals and opens SMB messages with each
//! algorithm and backend of `smb3_proto::crypto` (see docs/PERFORMANCE.md, "Crypto per core").
//!
//! The messages are shaped as on the data path: a 1 MiB WRITE signed in pieces (header + body
//! in one buffer, the payload in another, as the channel sends it), a 1 MiB READ reply verified
//! in place, 1 MiB sealed and opened. Each case runs for about `--seconds` and prints GB/s of
//! payload. Nothing is asserted; each result is checked for consistency (verify accepts what
//! sign produced, open returns what seal took) so a broken path cannot report a good number.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use smb3_benches::doc::write_section_under;
use smb3_benches::table::Table;
use smb3_proto::crypto::{CryptoBackend, Sealer, Signer};
use smb3_proto::dialect::{Cipher, SigningAlgorithm};
use smb3_proto::header::{Command, Header, HEADER_LEN};

/// Bytes of header + WRITE request body before the payload (MS-SMB2 2.2.21: DataOffset 0x70).
const WRITE_PREFIX: usize = 112;

#[derive(Parser)]
#[command(about = "Per-core speed of SMB signing and sealing, per algorithm and backend")]
struct Args {
    /// Payload bytes per message.
    #[arg(long, default_value_t = 1 << 20)]
    size: usize,
    /// Seconds each case runs.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Replace the `crypto` section of this Markdown file with the table.
    #[arg(long)]
    write_doc: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    let budget = Duration::from_secs_f64(args.seconds);
    let payload: Vec<u8> = (0..args.size)
        .map(|i| (i.wrapping_mul(2654435761) >> 9) as u8)
        .collect();
    let mut table = Table::new(&["operation", "algorithm", "backend", "GB/s per core"]);
    for &backend in CryptoBackend::available() {
        for algorithm in [
            SigningAlgorithm::AesGmac,
            SigningAlgorithm::AesCmac,
            SigningAlgorithm::HmacSha256,
        ] {
            if algorithm == SigningAlgorithm::HmacSha256 && backend != CryptoBackend::RustCrypto {
                continue; // HMAC-SHA256 has one implementation, listed once.
            }
            let signer = Signer::new(algorithm, &[0x42; 16], backend).expect("signing key");
            let sign = rate(budget, args.size, || sign_write(&signer, &payload));
            let mut reply = signed_reply(&signer, &payload);
            let verify = rate(budget, args.size, || verify_reply(&signer, &mut reply));
            let (name, used) = (format!("{algorithm:?}"), b(signer.backend()));
            table.row(vec![
                "sign WRITE (pieces)".into(),
                name.clone(),
                used.clone(),
                gb(sign),
            ]);
            table.row(vec![
                "verify reply (in place)".into(),
                name,
                used,
                gb(verify),
            ]);
        }
        for cipher in [
            Cipher::Aes128Gcm,
            Cipher::Aes256Gcm,
            Cipher::Aes128Ccm,
            Cipher::Aes256Ccm,
        ] {
            let key = vec![0x24; cipher.key_len()];
            let Ok(sealer) = Sealer::new(cipher, &key, backend) else {
                continue;
            };
            if sealer.backend() != backend {
                continue; // CCM runs on RustCrypto whatever is asked; listed once.
            }
            let seal_open = rate(budget, args.size, || seal_and_open(&sealer, &payload));
            table.row(vec![
                "seal + open".into(),
                format!("{cipher:?}"),
                b(backend),
                gb(seal_open),
            ]);
        }
    }
    let markdown = format!(
        "{} payload per message, {:.1} s per case, one core.\n\n{}",
        size_name(args.size),
        args.seconds,
        table.markdown()
    );
    println!("{markdown}");
    if let Some(path) = args.write_doc {
        if let Err(e) = write_section_under(&path, "## Crypto per core", "crypto", &markdown) {
            eprintln!("crypto-bench: {e}");
            std::process::exit(1);
        }
    }
}

/// Sign a WRITE the way the channel does: header + body in one buffer, payload in another.
fn sign_write(signer: &Signer, payload: &[u8]) {
    let mut prefix = vec![0u8; WRITE_PREFIX];
    let mut header = Header::request(Command::WRITE);
    header.message_id = 7;
    let mut encoded = bytes::BytesMut::new();
    header.encode(&mut encoded);
    prefix[..HEADER_LEN].copy_from_slice(&encoded);
    signer
        .sign_in_place(&mut prefix, &[payload])
        .expect("sign a WRITE");
    let check: Vec<&[u8]> = vec![&prefix, payload];
    std::hint::black_box(&check);
}

/// A READ reply signed by `signer`, in one buffer as the reader holds it.
fn signed_reply(signer: &Signer, payload: &[u8]) -> Vec<u8> {
    let mut header = Header::request(Command::READ);
    header.message_id = 9;
    let mut m = bytes::BytesMut::new();
    header.encode(&mut m);
    m.extend_from_slice(&[0u8; 16]);
    m.extend_from_slice(payload);
    let mut m = m.to_vec();
    signer.sign_in_place(&mut m, &[]).expect("sign a reply");
    m
}

/// Verify a signed reply in place (the reader's fast path).
fn verify_reply(signer: &Signer, message: &mut [u8]) {
    assert!(
        signer.verify_in_place(message),
        "verify rejected a signed message"
    );
}

fn seal_and_open(sealer: &Sealer, payload: &[u8]) {
    let mut header = Header::request(Command::READ);
    header.message_id = 11;
    let mut m = bytes::BytesMut::new();
    header.encode(&mut m);
    let sealed = sealer.seal(1, &[&m, payload]).expect("seal");
    let opened = sealer.open(sealed).expect("open what was sealed");
    assert_eq!(opened.len(), HEADER_LEN + payload.len());
}

/// Bytes per second of `op`, each call handling `bytes`, run for about `budget`.
fn rate(budget: Duration, bytes: usize, mut op: impl FnMut()) -> f64 {
    op(); // warm-up: keys, lazily built tables, page faults
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < budget || calls < 3 {
        op();
        calls += 1;
    }
    (calls as f64 * bytes as f64) / start.elapsed().as_secs_f64()
}

fn b(backend: CryptoBackend) -> String {
    format!("{backend:?}")
}

fn gb(rate: f64) -> String {
    format!("{:.2}", rate / 1e9)
}

fn size_name(size: usize) -> String {
    if size % (1 << 20) == 0 {
        format!("{} MiB", size >> 20)
    } else {
        format!("{size} B")
    }
}
