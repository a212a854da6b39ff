//! The client core over one channel, against the testbed's real smbd.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use smb3_client::{
    AuthDetail, AuthFailure, Cipher, Client, ClientConfig, Dialect, Error, NtStatus, OpenOptions,
    ProtocolError, Share, SigningAlgorithm, UserCredentials,
};
use smb3_tests::{client_block_on, pattern, write_then_read, Testbed, TestbedConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn testbed() -> Testbed {
    Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"))
}

fn creds(tb: &Testbed) -> UserCredentials {
    UserCredentials {
        user: tb.user().to_string(),
        domain: tb.domain().to_string(),
        password: tb.password().into(),
    }
}

async fn open_share(
    server: String,
    creds: UserCredentials,
    share: &str,
    config: ClientConfig,
) -> (Client, Share) {
    let client = Client::connect(&server, &creds, config)
        .await
        .expect("connect");
    let share = client.share(share).await.expect("tree connect");
    (client, share)
}

fn server(tb: &Testbed) -> String {
    format!("{}:445", tb.server_addr(1))
}

fn sha256_file(path: &std::path::Path) -> String {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    hex(&Sha256::digest(&data))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// (dialect, share, signing algorithms offered, ciphers offered, signing expected, cipher expected)
type Case = (
    Dialect,
    &'static str,
    Vec<SigningAlgorithm>,
    Vec<Cipher>,
    Option<SigningAlgorithm>,
    Option<Cipher>,
);

#[test]
fn every_dialect_signing_and_cipher_samba_offers() {
    let tb = testbed();
    let rt = tb.client_runtime();
    let (srv, cr) = (server(&tb), creds(&tb));
    let cases: Vec<Case> = vec![
        (
            Dialect::Smb210,
            "signed",
            vec![],
            vec![],
            Some(SigningAlgorithm::HmacSha256),
            None,
        ),
        (
            Dialect::Smb300,
            "signed",
            vec![],
            vec![],
            Some(SigningAlgorithm::AesCmac),
            None,
        ),
        (
            Dialect::Smb302,
            "signed",
            vec![],
            vec![],
            Some(SigningAlgorithm::AesCmac),
            None,
        ),
        (
            Dialect::Smb311,
            "signed",
            vec![SigningAlgorithm::AesGmac],
            vec![],
            Some(SigningAlgorithm::AesGmac),
            None,
        ),
        (
            Dialect::Smb311,
            "signed",
            vec![SigningAlgorithm::AesCmac],
            vec![],
            Some(SigningAlgorithm::AesCmac),
            None,
        ),
        (
            Dialect::Smb311,
            "signed",
            vec![SigningAlgorithm::HmacSha256],
            vec![],
            Some(SigningAlgorithm::HmacSha256),
            None,
        ),
        (
            Dialect::Smb300,
            "encrypted",
            vec![],
            vec![],
            Some(SigningAlgorithm::AesCmac),
            Some(Cipher::Aes128Ccm),
        ),
        (
            Dialect::Smb302,
            "encrypted",
            vec![],
            vec![],
            Some(SigningAlgorithm::AesCmac),
            Some(Cipher::Aes128Ccm),
        ),
        (
            Dialect::Smb311,
            "encrypted",
            vec![],
            vec![Cipher::Aes128Gcm],
            None,
            Some(Cipher::Aes128Gcm),
        ),
        (
            Dialect::Smb311,
            "encrypted",
            vec![],
            vec![Cipher::Aes128Ccm],
            None,
            Some(Cipher::Aes128Ccm),
        ),
        (
            Dialect::Smb311,
            "encrypted",
            vec![],
            vec![Cipher::Aes256Gcm],
            None,
            Some(Cipher::Aes256Gcm),
        ),
        (
            Dialect::Smb311,
            "encrypted",
            vec![],
            vec![Cipher::Aes256Ccm],
            None,
            Some(Cipher::Aes256Ccm),
        ),
    ];
    for (i, (dialect, share_name, signing, ciphers, want_signing, want_cipher)) in
        cases.into_iter().enumerate()
    {
        let mut config = ClientConfig::default();
        config.min_dialect = dialect;
        config.max_dialect = dialect;
        if !signing.is_empty() {
            config.signing_algorithms = signing;
        }
        if !ciphers.is_empty() {
            config.ciphers = ciphers;
        }
        let (srv, cr) = (srv.clone(), cr.clone());
        let data = Bytes::from(pattern(i as u64, 300_000));
        let (client, back) = client_block_on(&rt, async move {
            let (client, share) = open_share(srv, cr, share_name, config).await;
            let back = write_then_read(&share, &format!("case{i}"), data).await;
            (client, back)
        });
        let label = format!("case {i}: {dialect} on [{share_name}]");
        assert_eq!(client.dialect(), dialect, "{label}");
        if let Some(s) = want_signing {
            assert_eq!(client.signing(), Some(s), "{label}");
        }
        assert_eq!(
            client.cipher().filter(|_| want_cipher.is_some()),
            want_cipher,
            "{label}"
        );
        assert_eq!(
            hex(&Sha256::digest(&back)),
            hex(&Sha256::digest(pattern(i as u64, 300_000))),
            "{label}"
        );
        assert_eq!(
            sha256_file(&tb.share_path(share_name).join(format!("case{i}"))),
            hex(&Sha256::digest(pattern(i as u64, 300_000))),
            "{label}: bytes on the server's disk"
        );
    }
    drop(rt);
}

#[test]
fn files_of_every_size_round_trip() {
    let tb = testbed();
    let rt = tb.client_runtime();
    let (srv, cr) = (server(&tb), creds(&tb));
    let sizes = [0usize, 1, 64 * 1024, 8 * 1024 * 1024 + 1];
    let results = client_block_on(&rt, async move {
        let (_client, share) = open_share(srv, cr, "plain", ClientConfig::default()).await;
        let mut out = Vec::new();
        for (i, size) in sizes.into_iter().enumerate() {
            let data = Bytes::from(pattern(100 + i as u64, size));
            let back = write_then_read(&share, &format!("size-{size}"), data).await;
            out.push((size, back));
        }
        out
    });
    for (i, (size, back)) in results.into_iter().enumerate() {
        let want = pattern(100 + i as u64, size);
        assert_eq!(back.len(), size);
        assert!(back[..] == want[..], "{size} bytes read back differ");
        assert_eq!(
            sha256_file(&tb.share_path("plain").join(format!("size-{size}"))),
            hex(&Sha256::digest(&want))
        );
    }
}

#[test]
fn one_gib_through_the_streams() {
    const LEN: usize = 1 << 30;
    const PIECE: usize = 4 << 20;
    let tb = testbed();
    let rt = tb.client_runtime();
    let (srv, cr) = (server(&tb), creds(&tb));
    let (sent, received) = client_block_on(&rt, async move {
        let (_client, share) = open_share(srv, cr, "plain", ClientConfig::default()).await;
        let f = share
            .open(
                "big.bin",
                &OpenOptions::new().write(true).create(true).truncate(true),
            )
            .await
            .expect("create");
        let mut w = f.writer();
        let mut sent = Sha256::new();
        for i in 0..LEN / PIECE {
            let piece = pattern(7 + i as u64, PIECE);
            sent.update(&piece);
            w.write_all(&piece).await.expect("write");
        }
        w.shutdown().await.expect("flush");
        f.close().await.expect("close");
        let f = share
            .open("big.bin", &OpenOptions::new().read(true))
            .await
            .expect("open");
        let mut r = f.reader();
        let mut received = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0usize;
        loop {
            let n = r.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            total += n;
            received.update(&buf[..n]);
        }
        assert_eq!(total, LEN);
        (hex(&sent.finalize()), hex(&received.finalize()))
    });
    assert_eq!(sent, received);
    assert_eq!(sha256_file(&tb.share_path("plain").join("big.bin")), sent);
    std::fs::remove_file(tb.share_path("plain").join("big.bin")).ok();
}

#[test]
fn a_directory_of_ten_thousand_entries_is_listed_completely() {
    let tb = testbed();
    let dir = tb.share_path("plain").join("many");
    std::fs::create_dir(&dir).unwrap();
    let mut want = BTreeSet::new();
    for i in 0..10_000 {
        let name = format!("entry-{i:05}-ünïcødé");
        std::fs::write(dir.join(&name), b"x").unwrap();
        want.insert(name);
    }
    let rt = tb.client_runtime();
    let (srv, cr) = (server(&tb), creds(&tb));
    let got = client_block_on(&rt, async move {
        let (_client, share) = open_share(srv, cr, "plain", ClientConfig::default()).await;
        share.read_dir("many").await.expect("read_dir")
    });
    assert_eq!(got.len(), 10_000);
    let names: BTreeSet<String> = got.iter().map(|e| e.name.clone()).collect();
    assert_eq!(names, want);
    assert!(got
        .iter()
        .all(|e| e.metadata.len == 1 && e.metadata.is_file()));
}

#[test]
fn rename_delete_truncate_and_non_ascii_names() {
    let tb = testbed();
    let rt = tb.client_runtime();
    let (srv, cr) = (server(&tb), creds(&tb));
    let root = tb.share_path("plain");
    client_block_on(&rt, async move {
        let (_client, share) = open_share(srv, cr, "plain", ClientConfig::default()).await;
        share
            .create_dir_all("Ördner/子目录")
            .await
            .expect("mkdir -p");
        let name = "Ördner/子目录/файл 🎉.txt";
        write_then_read(&share, name, Bytes::from_static(b"hello, world")).await;
        let md = share.metadata(name).await.expect("stat");
        assert_eq!(md.len, 12);
        assert!(md.is_file());
        assert!(share.metadata("Ördner").await.unwrap().is_dir());

        // truncate and extend
        let f = share
            .open(name, &OpenOptions::new().write(true))
            .await
            .unwrap();
        f.set_len(5).await.unwrap();
        assert_eq!(f.metadata().await.unwrap().len, 5);
        f.set_len(100).await.unwrap();
        f.close().await.unwrap();
        assert_eq!(share.metadata(name).await.unwrap().len, 100);

        // rename within and across directories, with and without replace
        share
            .rename(name, "Ördner/renamed.txt", smb3_client::IfExists::Fail)
            .await
            .expect("rename");
        assert!(!share.exists(name).await.unwrap());
        write_then_read(&share, "other.txt", Bytes::from_static(b"other")).await;
        let e = share
            .rename(
                "other.txt",
                "Ördner/renamed.txt",
                smb3_client::IfExists::Fail,
            )
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_COLLISION), "{e}");
        share
            .rename(
                "other.txt",
                "Ördner/renamed.txt",
                smb3_client::IfExists::Replace,
            )
            .await
            .expect("replace");
        assert_eq!(share.metadata("Ördner/renamed.txt").await.unwrap().len, 5);

        // delete: a non-empty directory is refused, then everything goes
        let e = share.remove_dir("Ördner").await.unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::DIRECTORY_NOT_EMPTY), "{e}");
        share.remove_file("Ördner/renamed.txt").await.unwrap();
        share.remove_dir("Ördner/子目录").await.unwrap();
        share.remove_dir("Ördner").await.unwrap();
        assert!(!share.exists("Ördner").await.unwrap());
        let fs = share.fs_info().await.unwrap();
        assert!(fs.total_bytes > 0 && fs.available_bytes <= fs.total_bytes);
    });
    assert!(!root.join("Ördner").exists());
    assert_eq!(std::fs::read(root.join("other.txt")).ok(), None);
}

#[test]
fn wrong_password_missing_share_missing_file() {
    let tb = testbed();
    let rt = tb.client_runtime();
    let (srv, cr) = (server(&tb), creds(&tb));
    client_block_on(&rt, async move {
        let mut bad = cr.clone();
        bad.password = format!("{}x", tb.password()).into();
        let e = Client::connect(&srv, &bad, ClientConfig::default())
            .await
            .expect_err("must fail");
        assert_eq!(e.status(), Some(NtStatus::LOGON_FAILURE), "{e}");

        let client = Client::connect(&srv, &cr, ClientConfig::default())
            .await
            .unwrap();
        let e = client.share("no-such-share").await.expect_err("must fail");
        assert_eq!(e.status(), Some(NtStatus::BAD_NETWORK_NAME), "{e}");
        assert!(e.to_string().contains("no-such-share"), "{e}");

        let share = client.share("plain").await.unwrap();
        let e = share
            .open("missing/file", &OpenOptions::new().read(true))
            .await
            .expect_err("must fail");
        assert_eq!(e.status(), Some(NtStatus::OBJECT_PATH_NOT_FOUND), "{e}");
        let e = share
            .open("missing", &OpenOptions::new().read(true))
            .await
            .expect_err("must fail");
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
        assert_eq!(e.to_errno(), 2);
        assert!(e.to_string().contains("missing"), "{e}");

        let e = Client::connect(
            &format!("{}:4450", srv.split(':').next().unwrap()),
            &cr,
            ClientConfig::default(),
        )
        .await
        .expect_err("nothing listens on 4450");
        assert!(matches!(e, Error::Io { .. }), "{e}");
    });
}

/// A proxy between client and server that corrupts one byte of the signature of the first
/// signed READ response it forwards.
async fn tampering_proxy(server: SocketAddr) -> SocketAddr {
    use tokio::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let upstream = TcpStream::connect(server).await.unwrap();
        let (mut cr, mut cw) = client.into_split();
        let (mut ur, mut uw) = upstream.into_split();
        tokio::spawn(async move { tokio::io::copy(&mut cr, &mut uw).await });
        let mut tampered = false;
        loop {
            let mut len = [0u8; 4];
            if ur.read_exact(&mut len).await.is_err() {
                break;
            }
            let n = u32::from_be_bytes(len) as usize;
            let mut frame = vec![0u8; n];
            if ur.read_exact(&mut frame).await.is_err() {
                break;
            }
            let command = u16::from_le_bytes([frame[12], frame[13]]);
            let flags = u32::from_le_bytes([frame[16], frame[17], frame[18], frame[19]]);
            // Only a signed final reply: Samba may first send an unsigned interim
            // STATUS_PENDING reply for a READ, which clients must accept unsigned.
            let signed = flags & 0x8 != 0;
            if !tampered
                && frame.starts_with(&[0xFE, b'S', b'M', b'B'])
                && command == 0x0008
                && signed
            {
                frame[48] ^= 0x01; // first signature byte
                tampered = true;
            }
            if cw.write_all(&len).await.is_err() || cw.write_all(&frame).await.is_err() {
                break;
            }
        }
    });
    addr
}

#[test]
fn a_reply_with_a_bad_signature_is_rejected() {
    let tb = testbed();
    let rt = tb.client_runtime();
    let target: SocketAddr = format!("{}:445", tb.server_addr(1)).parse().unwrap();
    std::fs::write(tb.share_path("plain").join("signed.bin"), pattern(5, 4096)).unwrap();
    let cr = creds(&tb);
    client_block_on(&rt, async move {
        let proxy = tampering_proxy(target).await;
        // One channel: the extra channels multichannel would bind go straight to the server's
        // advertised addresses, around the proxy.
        let mut config = ClientConfig::default();
        config.multichannel = false;
        let (client, share) = open_share(proxy.to_string(), cr, "plain", config).await;
        assert!(client.signing().is_some());
        let f = share
            .open("signed.bin", &OpenOptions::new().read(true))
            .await
            .unwrap();
        let e = f
            .read_at(0, 4096)
            .await
            .expect_err("tampered reply must be rejected");
        assert!(
            matches!(e, Error::Protocol(ProtocolError::BadSignature { .. })),
            "{e:?}"
        );
        // The connection is dropped: nothing more is trusted from it.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let e = share
            .metadata("signed.bin")
            .await
            .expect_err("channel must be closed");
        assert!(matches!(e, Error::ConnectionLost { .. }), "{e:?}");
        assert!(client.channels()[0]
            .failure
            .as_deref()
            .unwrap_or("")
            .contains("signature"));
    });
}

#[test]
fn guest_sessions_only_when_allowed() {
    let tb = testbed();
    let rt = tb.client_runtime();
    let srv = server(&tb);
    client_block_on(&rt, async move {
        let stranger = UserCredentials {
            user: "no-such-user".into(),
            domain: String::new(),
            password: "whatever".into(),
        };
        let e = Client::connect(&srv, &stranger, ClientConfig::default())
            .await
            .expect_err("guest must be refused by default");
        assert!(
            matches!(
                &e,
                Error::Auth {
                    kind: AuthFailure::GuestNotAllowed,
                    detail: AuthDetail::MappedToGuest { user },
                } if user == "no-such-user"
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("guest"), "{e}");

        // Allowed, a guest session is still refused while signing is required (the
        // default): it has no key, so nothing the server sends could be checked.
        let mut config = ClientConfig::default();
        config.allow_guest = true;
        let e = Client::connect(&srv, &stranger, config.clone())
            .await
            .expect_err("a guest session cannot be signed");
        assert!(
            matches!(
                &e,
                Error::Auth {
                    kind: AuthFailure::NoSessionKey,
                    detail: AuthDetail::GuestCannotSign { user },
                } if user == "no-such-user"
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("signing is required"), "{e}");

        config.require_signing = false;
        let client = Client::connect(&srv, &stranger, config)
            .await
            .expect("guest allowed, signing not required");
        assert_eq!(
            client.signing(),
            None,
            "a guest session has no key to sign with"
        );
        let share = client.share("public").await.expect("guest share");
        let back =
            write_then_read(&share, "from-guest.txt", Bytes::from_static(b"guest data")).await;
        assert_eq!(&back[..], b"guest data");
    });
}

#[test]
fn the_credit_window_keeps_sixteen_mib_in_flight() {
    let tb = testbed();
    let rt = tb.client_runtime();
    let (srv, cr) = (server(&tb), creds(&tb));
    let credits = client_block_on(&rt, async move {
        let (client, share) = open_share(srv, cr, "plain", ClientConfig::default()).await;
        let data = Bytes::from(pattern(3, 64 << 20));
        write_then_read(&share, "window.bin", data).await;
        client.channels()[0].credits
    });
    // 256 credits × 64 KiB = 16 MiB.
    assert!(credits >= 256, "holds only {credits} credits");
}
