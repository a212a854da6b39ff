//! smbcp and smbctl over SMB over QUIC, through the tests' QUIC relay in front of smbd
//! (`smb3_tests::quic_relay`): the transport flags, UDP 443 when the URL names no port, a CA
//! file or a pinned key, and the errors a user meets.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::net::SocketAddr;

use smb3_tests::quic_relay::QuicRelay;
use smb3_tests::{client_block_on, pattern};

mod common;
use common::{json, scratch, smbcp, smbctl, testbed};

/// Up with the relay's CA and down with its key pinned (no CA), byte-exact, on UDP 443 found
/// without a port in the URL; a wrong pin, a CA that did not issue the certificate, and
/// certificate settings without QUIC each fail with their own words.
#[test]
fn smbcp_and_smbctl_over_quic_with_a_ca_file_or_a_pinned_key() {
    use base64::Engine as _;
    let tb = testbed();
    let rt = tb.client_runtime();
    let upstream: SocketAddr = format!("{}:445", tb.server_addr(1)).parse().unwrap();
    // The certificate names the address the URL gives.
    let relay = client_block_on(&rt, async move {
        QuicRelay::start_at("127.0.0.1:443".parse().unwrap(), upstream, "127.0.0.1").await
    });
    let ca = relay.ca_file();
    let ca = ca.to_str().unwrap();
    let pin = base64::engine::general_purpose::STANDARD.encode(relay.key_sha256());
    let url = |path: &str| format!("smb://{};{}@127.0.0.1/{path}", tb.domain(), tb.user());

    let dir = scratch("quic");
    let data = pattern(35, 3 * 1024 * 1024 + 17);
    let local = dir.path().join("up.bin");
    std::fs::write(&local, &data).unwrap();
    let out = smbcp(
        &tb,
        &[
            "--transport",
            "quic",
            "--ca-file",
            ca,
            "--json",
            local.to_str().unwrap(),
            &url("plain/quic-up.bin"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "upload over QUIC");
    let summary = json(&out);
    let channels = summary["channels"].as_array().expect("channels");
    assert_eq!(channels.len(), 1, "one channel over QUIC: {summary:#}");
    assert_eq!(channels[0]["transport"], "quic", "{summary:#}");
    assert_eq!(channels[0]["server_port"], 443, "{summary:#}");
    // smbd behind the relay sees TCP and keeps sealing where it is asked for.
    assert_eq!(channels[0]["sealing_left_to_tls"], false, "{summary:#}");
    let on_server = std::fs::read(tb.share_path("plain").join("quic-up.bin")).unwrap();
    assert!(on_server == data, "the server's copy differs");

    let back = dir.path().join("back.bin");
    let out = smbcp(
        &tb,
        &[
            "--transport",
            "quic",
            "--pin-sha256",
            &pin,
            &url("plain/quic-up.bin"),
            back.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "download with the key pinned");
    assert!(
        std::fs::read(&back).unwrap() == data,
        "downloaded bytes differ"
    );

    let out = smbctl(
        &tb,
        &[
            "ls",
            "--transport",
            "quic",
            "--pin-sha256",
            &pin,
            &url("plain/"),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("quic-up.bin"));
    let out = smbctl(
        &tb,
        &[
            "channels",
            "--transport",
            "quic",
            "--pin-sha256",
            &pin,
            &url("plain/"),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("quic ") && l.contains("127.0.0.1:443")),
        "the channel shows it runs over QUIC: {text}"
    );
    let streams = relay.streams();

    let mut wrong = relay.key_sha256();
    wrong[31] ^= 0x80;
    let wrong = base64::engine::general_purpose::STANDARD.encode(wrong);
    let out = smbcp(
        &tb,
        &[
            "--transport",
            "quic",
            "--pin-sha256",
            &wrong,
            &url("plain/quic-up.bin"),
            back.to_str().unwrap(),
        ],
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("127.0.0.1") && said.contains("not a pinned one") && said.contains(&pin),
        "the refusal names the host and the key the server has: {said}"
    );

    let out = smbcp(
        &tb,
        &[
            "--transport",
            "quic",
            "--ca-file",
            relay.unrelated_ca_file().to_str().unwrap(),
            &url("plain/quic-up.bin"),
            back.to_str().unwrap(),
        ],
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("unknown CA"), "{said}");
    assert_eq!(relay.streams(), streams, "nothing relayed for a refusal");

    for tool in ["smbcp", "smbctl"] {
        let out = if tool == "smbcp" {
            smbcp(&tb, &["--pin-sha256", &pin, &url("plain/x"), "/tmp/x"])
        } else {
            smbctl(&tb, &["ls", "--ca-file", ca, &url("plain/")])
        };
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{tool}: {said}");
        assert!(said.contains("need --transport quic"), "{tool}: {said}");
    }
    client_block_on(&rt, async move { drop(relay) });
    drop(rt);
}
