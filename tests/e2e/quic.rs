//! SMB over QUIC, through the tests' own QUIC relay (`smb3_tests::quic_relay`) in front of
//! the testbed's smbd: no server here speaks QUIC itself, so this proves the client's QUIC
//! transport and framing against a real SMB server, not against Windows Server.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::time::Duration;

use bytes::Bytes;
use smb3_client::{
    CertificateProblem, Client, ClientConfig, Dialect, Error, QuicConfig, Transport,
};
use smb3_tests::quic_relay::QuicRelay;
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

#[test]
fn read_and_write_through_a_quic_relay_byte_exact() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let rt = tb.client_runtime();
    let upstream = format!("{}:445", tb.server_addr(1)).parse().unwrap();
    let creds = tb.credentials();
    client_block_on(&rt, async move {
        let relay = QuicRelay::start(upstream, CERT_NAME).await;
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
    drop(rt);
}

/// Certificate refusals need no SMB server: the handshake fails before any stream.
#[test]
fn certificate_refusals_are_typed_and_name_the_host() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // Nothing listens there; a refused certificate means nothing is relayed.
        let relay = QuicRelay::start("127.0.0.1:9".parse().unwrap(), CERT_NAME).await;
        let creds = smb3_client::UserCredentials {
            user: "nobody".into(),
            domain: String::new(),
            password: "x".into(),
        };
        let cases = [
            (
                relay.unrelated_ca_file(),
                CERT_NAME,
                CertificateProblem::UnknownIssuer,
            ),
            (
                relay.ca_file(),
                "other-name.test",
                CertificateProblem::NameMismatch,
            ),
        ];
        for (ca, name, want) in cases {
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
        assert_eq!(relay.streams(), 0);
    });
}
