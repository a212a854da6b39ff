//! Kerberos through sspi against a real Samba AD DC and its KDC (testbed `--kerberos`).
//!
//! The DC refuses NTLM (`ntlm auth = disabled`), so every session that works here was
//! authenticated with Kerberos; the tests also show the refusal itself.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use bytes::Bytes;
use sha2::{Digest, Sha256};
use smb3_client::{
    AuthDetail, AuthFailure, Cipher, Client, ClientConfig, Dialect, Error, KerberosHint, NtStatus,
    UserCredentials,
};
use smb3_tests::{client_block_on, pattern, write_then_read, Testbed, TestbedConfig};

/// NT_STATUS_NTLM_BLOCKED: what Samba answers an NTLM session setup with `ntlm auth = disabled`.
const NTLM_BLOCKED: NtStatus = NtStatus(0xC000_0418);

fn kerberos_testbed() -> Testbed {
    let tb = Testbed::start(TestbedConfig {
        kerberos: true,
        // Level 3 makes the KDC log every ticket it issues (see `service_tickets`).
        log_level: 3,
        ..TestbedConfig::unshaped(1)
    })
    .unwrap_or_else(|e| panic!("testbed: {e}"));
    eprintln!(
        "kerberos testbed up in {:.1} s (domain {}, {} s)",
        tb.up_took().as_secs_f64(),
        tb.kerberos().map_or("?", |k| k.provisioned.as_str()),
        tb.kerberos().map_or(0, |k| k.provision_seconds),
    );
    tb
}

/// 3.1.1 with Kerberos: realm and KDC from the testbed, the server reached by address and
/// named by its host name for the SPN.
fn kerberos_config(tb: &Testbed) -> ClientConfig {
    let k = tb.kerberos().expect("a Kerberos testbed");
    let mut config = ClientConfig::default();
    config.min_dialect = Dialect::Smb311;
    config.max_dialect = Dialect::Smb311;
    config.kerberos_realm = Some(k.realm.clone());
    config.kerberos_kdc = Some(k.kdc.to_string());
    config.kerberos_service_host = Some(k.server_host.clone());
    config.connect_timeout = Duration::from_secs(5);
    config
}

/// Service tickets the DC's KDC issued to the test user for `cifs/dc.testbed.lan`, from its
/// log ("TGS-REQ SUCCESS  smbtest@TESTBED.LAN cifs/dc.testbed.lan@TESTBED.LAN etype=18/18 ...").
fn service_tickets(tb: &Testbed) -> usize {
    let log = std::fs::read(tb.log_file()).expect("the DC's log");
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| {
            l.contains("TGS-REQ SUCCESS")
                && l.contains("smbtest@TESTBED.LAN cifs/dc.testbed.lan@TESTBED.LAN")
        })
        .count()
}

fn server(tb: &Testbed) -> String {
    format!("{}:445", tb.server_addr(1))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn sha256_file(path: &std::path::Path) -> String {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    hex(&Sha256::digest(&data))
}

/// Connect with `config`, round-trip `len` bytes through `share`, and return the client and
/// the sha256 of what came back.
fn round_trip(
    tb: &Testbed,
    rt: &tokio::runtime::Runtime,
    config: ClientConfig,
    share: &'static str,
    name: &'static str,
    seed: u64,
    len: usize,
) -> (Client, String) {
    let (srv, creds) = (server(tb), tb.credentials());
    let data = Bytes::from(pattern(seed, len));
    client_block_on(rt, async move {
        let client = Client::connect(&srv, &creds, config)
            .await
            .unwrap_or_else(|e| panic!("Kerberos connect: {e}"));
        // Extra channels bind with a Kerberos authentication of their own.
        client.wait_for_channels(Duration::from_secs(10)).await;
        let share = client.share(share).await.expect("tree connect");
        let back = write_then_read(&share, name, data).await;
        (client, hex(&Sha256::digest(&back)))
    })
}

/// A Kerberos session on 3.1.1: the keys derived from the Kerberos session key sign (plain
/// share, signing mandatory on the server) and encrypt with AES-128-GCM and with AES-256-GCM,
/// which uses all 32 bytes of the AES256 session key (MS-SMB2 3.2.5.3.1).
#[test]
fn kerberos_session_signs_encrypts_and_round_trips() {
    let tb = kerberos_testbed();
    let k = tb.kerberos().expect("Kerberos info").clone();
    assert_eq!(k.realm, "TESTBED.LAN");
    assert_eq!(k.server_host, "dc.testbed.lan");
    assert_eq!(k.kdc, format!("{}:88", tb.server_addr(1)).parse().unwrap());
    let rt = tb.client_runtime();
    assert_eq!(
        service_tickets(&tb),
        0,
        "no tickets before the first session"
    );

    let len = 3 * 1024 * 1024 + 17;
    let (client, back) = round_trip(&tb, &rt, kerberos_config(&tb), "plain", "krb-plain", 1, len);
    let want = hex(&Sha256::digest(pattern(1, len)));
    assert_eq!(client.dialect(), Dialect::Smb311);
    assert!(
        client.signing().is_some(),
        "a Kerberos session must be signed"
    );
    assert_eq!(back, want, "bytes read back");
    assert_eq!(
        sha256_file(&tb.share_path("plain").join("krb-plain")),
        want,
        "bytes on the server's disk"
    );
    // The session (and every channel bound to it) was set up with a ticket from this KDC.
    let tickets = service_tickets(&tb);
    assert!(tickets >= 1, "the KDC issued no cifs/ ticket");
    let bound = client
        .multichannel()
        .pairs
        .iter()
        .map(|p| p.binds_ok)
        .sum::<u64>();
    eprintln!(
        "{tickets} service ticket(s) for the first session, {} channel(s), {bound} bound",
        client.channels().len()
    );
    assert!(bound >= 1, "{:#?}", client.multichannel());
    assert!(
        tickets as u64 > bound,
        "every bind took a ticket of its own"
    );
    drop(client);

    for (i, cipher) in [Cipher::Aes128Gcm, Cipher::Aes256Gcm]
        .into_iter()
        .enumerate()
    {
        let mut config = kerberos_config(&tb);
        config.ciphers = vec![cipher];
        let name = ["krb-enc-128", "krb-enc-256"][i];
        let seed = 10 + i as u64;
        let (client, back) = round_trip(&tb, &rt, config, "encrypted", name, seed, 1 << 20);
        let want = hex(&Sha256::digest(pattern(seed, 1 << 20)));
        assert_eq!(client.cipher(), Some(cipher));
        assert_eq!(back, want, "{cipher:?}: bytes read back");
        assert_eq!(
            sha256_file(&tb.share_path("encrypted").join(name)),
            want,
            "{cipher:?}: bytes on the server's disk"
        );
    }
    assert!(
        service_tickets(&tb) >= tickets + 2,
        "one ticket per new session at least"
    );
    drop(rt);
}

/// The server really refuses NTLM, so the sessions above were Kerberos; a wrong password is a
/// clear error naming the principal; an unreachable KDC is one too, and only with
/// `ntlm_fallback` does the client go on to try NTLM.
#[test]
fn ntlm_refused_wrong_password_and_unreachable_kdc() {
    let tb = kerberos_testbed();
    let rt = tb.client_runtime();
    let connect = |config: ClientConfig, creds: UserCredentials| {
        let srv = server(&tb);
        client_block_on(&rt, async move {
            let began = Instant::now();
            let r = Client::connect(&srv, &creds, config).await.map(drop);
            (r, began.elapsed())
        })
    };

    // NTLM (the default config) with the right password: the DC says no.
    let (r, _) = connect(ClientConfig::default(), tb.credentials());
    match r {
        Err(Error::Status { status, .. }) => assert_eq!(status, NTLM_BLOCKED),
        other => panic!("NTLM must be refused by the Kerberos testbed, got {other:?}"),
    }

    // Kerberos with a wrong password: the KDC refuses pre-authentication.
    let mut wrong = tb.credentials();
    wrong.password = format!("{}x", tb.password()).into();
    let (r, took) = connect(kerberos_config(&tb), wrong);
    match r {
        Err(Error::Auth {
            kind,
            detail: AuthDetail::Kerberos {
                principal, hint, ..
            },
        }) => {
            assert_eq!(kind, AuthFailure::SecurityPackage);
            assert_eq!(principal, "smbtest@TESTBED.LAN");
            assert_eq!(hint, Some(KerberosHint::WrongPassword));
        }
        other => panic!("wrong password: expected an Auth error, got {other:?}"),
    }
    assert!(took < Duration::from_secs(5), "took {took:?}");

    // A KDC address where nothing listens: refused at once.
    let mut config = kerberos_config(&tb);
    config.kerberos_kdc = Some(format!("{}:89", tb.server_addr(1)));
    let (r, _) = connect(config.clone(), tb.credentials());
    match r {
        Err(Error::Auth {
            detail: AuthDetail::Kerberos { hint, .. },
            ..
        }) => assert_eq!(hint, Some(KerberosHint::KdcUnreachable)),
        other => panic!("unreachable KDC: expected an Auth error, got {other:?}"),
    }
    // With the fallback allowed the client tries NTLM, which this server refuses.
    config.ntlm_fallback = true;
    let (r, _) = connect(config, tb.credentials());
    match r {
        Err(Error::Status { status, .. }) => assert_eq!(status, NTLM_BLOCKED),
        other => panic!("NTLM fallback: expected NTLM_BLOCKED, got {other:?}"),
    }
    drop(rt);
}
