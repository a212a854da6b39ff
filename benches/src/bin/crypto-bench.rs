//! `crypto-bench`: how fast one core signs, verifies, seals and opens SMB messages with each
//! algorithm and backend of `smb3_proto::crypto` (docs/PERFORMANCE.md, "Crypto per core").
//!
//! The messages are shaped as on the data path: a 1 MiB WRITE signed in pieces (header and
//! body in one buffer, the payload in another, as the channel sends it), a READ reply
//! verified in place, 1 MiB sealed and opened. Each case runs for about `--seconds`; each
//! result is checked (verify accepts what sign made, open returns what seal took), so a
//! broken path cannot report a good number.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use clap::Parser;
use smb3_benches::doc::write_section;
use smb3_benches::table::Table;
use smb3_proto::crypto::{CryptoBackend, Sealer, Signer};
use smb3_proto::dialect::{Cipher, SigningAlgorithm};
use smb3_proto::header::{Command, Header, HEADER_LEN};

/// Bytes of header and WRITE request body before the payload (MS-SMB2 2.2.21: DataOffset
/// 0x70).
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
    let rate = |op: &mut dyn FnMut()| format!("{:.2}", rate(budget, args.size, op) / 1e9);
    let mut table = Table::new("operation | algorithm | backend | GB/s per core");
    for &backend in CryptoBackend::available() {
        for algorithm in [
            SigningAlgorithm::AesGmac,
            SigningAlgorithm::AesCmac,
            SigningAlgorithm::HmacSha256,
        ] {
            // HMAC-SHA256 has one implementation, listed once.
            if algorithm == SigningAlgorithm::HmacSha256 && backend != CryptoBackend::RustCrypto {
                continue;
            }
            let signer = Signer::new(algorithm, &[0x42; 16], backend).expect("signing key");
            let sign = rate(&mut || sign_write(&signer, &payload));
            let mut reply = message(Command::READ, 9, &[&[0u8; 16], &payload]);
            signer.sign_in_place(&mut reply, &[]).expect("sign a reply");
            let verify = rate(&mut || {
                assert!(
                    signer.verify_in_place(&mut reply),
                    "verify rejected a signed message"
                )
            });
            let (name, used) = (format!("{algorithm:?}"), format!("{:?}", signer.backend()));
            table.row(vec![
                "sign WRITE (pieces)".into(),
                name.clone(),
                used.clone(),
                sign,
            ]);
            table.row(vec!["verify reply (in place)".into(), name, used, verify]);
        }
        for cipher in [
            Cipher::Aes128Gcm,
            Cipher::Aes256Gcm,
            Cipher::Aes128Ccm,
            Cipher::Aes256Ccm,
        ] {
            // CCM runs on RustCrypto whatever is asked: listed once.
            let Ok(sealer) = Sealer::new(cipher, &vec![0x24; cipher.key_len()], backend) else {
                continue;
            };
            if sealer.backend() != backend {
                continue;
            }
            let header = message(Command::READ, 11, &[]);
            let seal_open = rate(&mut || {
                let opened = sealer
                    .open(sealer.seal(1, &[&header, &payload]).expect("seal"))
                    .expect("open what was sealed");
                assert_eq!(opened.len(), HEADER_LEN + payload.len());
            });
            table.row(vec![
                "seal + open".into(),
                format!("{cipher:?}"),
                format!("{backend:?}"),
                seal_open,
            ]);
        }
    }
    let size = match args.size % (1 << 20) {
        0 => format!("{} MiB", args.size >> 20),
        _ => format!("{} B", args.size),
    };
    let markdown = format!(
        "{size} payload per message, {:.1} s per case, one core.\n\n{}",
        args.seconds,
        table.markdown()
    );
    println!("{markdown}");
    if let Some(path) = args.write_doc {
        if let Err(e) = write_section(&path, "crypto", Some("## Crypto per core"), &markdown) {
            eprintln!("crypto-bench: {e}");
            std::process::exit(1);
        }
    }
}

/// A header of `command` with `message_id`, followed by `parts`.
fn message(command: Command, message_id: u64, parts: &[&[u8]]) -> Vec<u8> {
    let mut header = Header::request(command);
    header.message_id = message_id;
    let mut m = BytesMut::new();
    header.encode(&mut m);
    for p in parts {
        m.extend_from_slice(p);
    }
    m.to_vec()
}

/// Signs a WRITE the way the channel does: header and body in one buffer, payload apart.
fn sign_write(signer: &Signer, payload: &[u8]) {
    let mut prefix = message(Command::WRITE, 7, &[]);
    prefix.resize(WRITE_PREFIX, 0);
    signer
        .sign_in_place(&mut prefix, &[payload])
        .expect("sign a WRITE");
    std::hint::black_box(&prefix);
}

/// Bytes a second of `op`, each call handling `bytes`, run for about `budget` after one call
/// to warm up (keys, lazily built tables, page faults).
fn rate(budget: Duration, bytes: usize, op: &mut dyn FnMut()) -> f64 {
    op();
    let (start, mut calls) = (Instant::now(), 0u64);
    while start.elapsed() < budget || calls < 3 {
        op();
        calls += 1;
    }
    calls as f64 * bytes as f64 / start.elapsed().as_secs_f64()
}
