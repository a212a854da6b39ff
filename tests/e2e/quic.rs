//! SMB over QUIC, through the tests' own QUIC relay (`smb3_tests::quic_relay`) in front of
//! the testbed's smbd: no server here speaks QUIC itself, so this proves the client's QUIC
//! transport and framing against a real SMB server, not against Windows Server.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::time::Duration;

use bytes::Bytes;
use smb3_client::{
    CertificateProblem, Client, ClientConfig, Dialect, Error, QuicConfig, Transport,
    UserCredentials,
};
use smb3_tests::quic_relay::{QuicRelay, RelayTls};
use smb3_tests::{client_block_on, pattern, write_then_read, Testbed, TestbedConfig};

/// The name in the relay's certificate; the client is told to expect it, since it connects
/// to an address.
const CERT_NAME: &str = "smb-quic.test";

fn quic_config(ca_file: std::path::PathBuf, server_name: &str) -> ClientConfig {
    let mut config = ClientConfig::default();
    config.transport = Transport::Quic;
    let mut quic = QuicConfig::default();
    quic.ca_file = Some(ca_file);
    quic.server_name = Some(server_name.to_string());
    config.quic = quic;
    config.connect_timeout = Duration::from_secs(5);
    config
}

/// Run `test` in the client namespace of a new testbed with a QUIC relay to its smbd (a
/// certificate for [`CERT_NAME`]) and the test user's credentials.
fn through_a_relay<F, Fut>(test: F)
where
    F: FnOnce(QuicRelay, UserCredentials) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let rt = tb.client_runtime();
    let upstream = format!("{}:445", tb.server_addr(1)).parse().unwrap();
    let creds = tb.credentials();
    client_block_on(&rt, async move {
        let relay = QuicRelay::start(upstream, CERT_NAME).await;
        test(relay, creds).await;
    });
    drop(rt);
}

#[test]
fn read_and_write_through_a_quic_relay_byte_exact() {
    through_a_relay(|relay, creds| async move {
        let config = quic_config(relay.ca_file(), CERT_NAME);
        let client = Client::connect(&relay.addr().to_string(), &creds, config)
            .await
            .expect("connect over QUIC");
        assert_eq!(client.dialect(), Dialect::Smb311);
        let share = client.share("plain").await.expect("tree connect");
        let data = Bytes::from(pattern(33, 5 * 1024 * 1024 + 4321));
        let back = write_then_read(&share, "quic.bin", data.clone()).await;
        assert!(back == data, "read back differs from what was written");
        assert_eq!(relay.streams(), 1, "one QUIC stream carries the session");
        drop(share);
        client.logoff().await.expect("logoff");
    });
}

/// Certificate refusals need no SMB server: the handshake fails before any stream.
#[test]
fn certificate_refusals_are_typed_and_name_the_host() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // Nothing listens there; a refused certificate means nothing is relayed.
        let nowhere = "127.0.0.1:9".parse().unwrap();
        let relay = QuicRelay::start(nowhere, CERT_NAME).await;
        let expired =
            QuicRelay::start_with(nowhere, CERT_NAME, RelayTls::default().expired()).await;
        let creds = smb3_client::UserCredentials {
            user: "nobody".into(),
            domain: String::new(),
            password: "x".into(),
        };
        let cases = [
            (
                &relay,
                relay.unrelated_ca_file(),
                CERT_NAME,
                CertificateProblem::UnknownIssuer,
            ),
            (
                &relay,
                relay.ca_file(),
                "other-name.test",
                CertificateProblem::NameMismatch,
            ),
            (
                &expired,
                expired.ca_file(),
                CERT_NAME,
                CertificateProblem::Expired,
            ),
        ];
        for (relay, ca, name, want) in cases {
            let err = Client::connect(&relay.addr().to_string(), &creds, quic_config(ca, name))
                .await
                .expect_err("a refused certificate must fail the connect");
            match &err {
                Error::Certificate { host, problem, .. } => {
                    assert_eq!(host, name, "{err}");
                    assert_eq!(*problem, want, "{err}");
                }
                other => panic!("expected a certificate error, got {other:?}"),
            }
            assert!(err.to_string().contains(name), "{err}");
            assert_eq!(err.kind(), "certificate");
        }
        assert_eq!(relay.streams() + expired.streams(), 0);
    });
}

/// A QUIC server without ALPN `smb` (another service on UDP 443) is refused in the
/// handshake with words that say so, before anything is sent.
#[test]
fn a_server_without_the_smb_alpn_is_refused_in_words() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let tls = RelayTls::default().alpn(b"h3");
        let relay = QuicRelay::start_with("127.0.0.1:9".parse().unwrap(), CERT_NAME, tls).await;
        let creds = smb3_client::UserCredentials {
            user: "nobody".into(),
            domain: String::new(),
            password: "x".into(),
        };
        let config = quic_config(relay.ca_file(), CERT_NAME);
        let err = Client::connect(&relay.addr().to_string(), &creds, config)
            .await
            .expect_err("no ALPN smb, no session");
        assert!(
            err.to_string().contains("does not speak SMB over QUIC"),
            "{err:?}"
        );
        assert_eq!(relay.streams(), 0);
    });
}

/// Pinned keys (`QuicConfig::pinned_sha256`) decide alone: the relay's key pinned, it is
/// reached with no CA file (its CA is in no store); another key pinned, it is refused with
/// the key it has; no pin and no CA file, its unknown CA is refused.
#[test]
fn a_pinned_key_stands_in_for_the_ca_and_a_wrong_pin_is_refused() {
    through_a_relay(|relay, creds| async move {
        let pinned = |pins: Vec<[u8; 32]>| {
            let mut config = quic_config(relay.ca_file(), CERT_NAME);
            config.quic.ca_file = None;
            config.quic.pinned_sha256 = pins;
            config
        };
        let right = relay.key_sha256();
        let mut wrong = right;
        wrong[0] ^= 1;

        let client = Client::connect(
            &relay.addr().to_string(),
            &creds,
            pinned(vec![wrong, right]),
        )
        .await
        .expect("the pinned key is accepted without a CA");
        let share = client.share("plain").await.expect("tree connect");
        let data = Bytes::from(pattern(34, 300 * 1024));
        let back = write_then_read(&share, "quic-pinned.bin", data.clone()).await;
        assert!(back == data, "read back differs from what was written");
        drop(share);
        client.logoff().await.expect("logoff");
        let streams = relay.streams();

        let err = Client::connect(&relay.addr().to_string(), &creds, pinned(vec![wrong]))
            .await
            .expect_err("a key that is not pinned must be refused");
        match &err {
            Error::Certificate { host, problem, .. } => {
                assert_eq!(host, CERT_NAME, "{err}");
                assert_eq!(*problem, CertificateProblem::PinMismatch, "{err}");
            }
            other => panic!("expected a certificate error, got {other:?}"),
        }
        let seen = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(right)
        };
        assert!(
            err.to_string().contains(&seen),
            "the error gives the key the server has ({seen}): {err}"
        );

        let err = Client::connect(&relay.addr().to_string(), &creds, pinned(Vec::new()))
            .await
            .expect_err("no pin and a CA in no store must be refused");
        assert!(
            matches!(
                &err,
                Error::Certificate {
                    problem: CertificateProblem::UnknownIssuer,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(relay.streams(), streams, "nothing relayed for a refusal");
    });
}

/// Over QUIC the client offers to leave sealing to TLS (SMB2_TRANSPORT_CAPABILITIES with
/// SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY, MS-SMB2 2.2.3.1.5). smbd behind the relay sees a
/// TCP connection and does not accept, so the share that requires encryption is still
/// sealed: every message after authentication goes out under a TRANSFORM_HEADER. A caller
/// who asks for encryption itself (`encrypt`) offers nothing.
#[test]
fn transport_security_is_offered_and_sealing_stays_unless_the_server_accepts() {
    through_a_relay(|relay, creds| async move {
        const TRANSPORT_CAPABILITIES: u16 = 6;
        let config = quic_config(relay.ca_file(), CERT_NAME);
        let client = Client::connect(&relay.addr().to_string(), &creds, config.clone())
            .await
            .expect("connect over QUIC");
        let offered = relay.seen().negotiate_contexts;
        assert_eq!(offered.len(), 1, "{offered:?}");
        assert!(offered[0].contains(&TRANSPORT_CAPABILITIES), "{offered:?}");
        let share = client.share("encrypted").await.expect("tree connect");
        let before = relay.seen();
        let data = Bytes::from(pattern(36, 2 * 1024 * 1024 + 5));
        let back = write_then_read(&share, "quic-sealed.bin", data.clone()).await;
        assert!(back == data, "read back differs from what was written");
        let after = relay.seen();
        assert!(after.sealed >= before.sealed + 4, "{before:?} -> {after:?}");
        assert_eq!(after.plain, before.plain, "nothing in the clear: {after:?}");
        drop(share);
        client.logoff().await.expect("logoff");

        let mut encrypt = config;
        encrypt.encrypt = true;
        let client = Client::connect(&relay.addr().to_string(), &creds, encrypt)
            .await
            .expect("connect over QUIC, encrypting");
        let offered = relay.seen().negotiate_contexts;
        assert_eq!(offered.len(), 2, "{offered:?}");
        assert!(!offered[1].contains(&TRANSPORT_CAPABILITIES), "{offered:?}");
        client.logoff().await.expect("logoff");
    });
}
