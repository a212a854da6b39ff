//! Multichannel against the testbed's real smbd: discovery, planning, binding over several
//! links, dispatch over every channel, signing and sealing on bound channels, and channels
//! following the server's advertised interfaces at runtime.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sha2::{Digest, Sha256};
use smb3_client::{
    ChannelInfo, ChannelState, Client, ClientConfig, Dialect, Dispatch, OpenOptions, Share,
    UserCredentials,
};
use smb3_tests::{client_block_on, write_then_read, Advertise, Testbed, TestbedConfig};

fn start(config: TestbedConfig) -> Arc<Testbed> {
    Arc::new(Testbed::start(config).unwrap_or_else(|e| panic!("testbed: {e}")))
}

/// Run `test` in the client namespace with the testbed and its credentials.
fn in_client<F, Fut>(tb: &Arc<Testbed>, test: F)
where
    F: FnOnce(Arc<Testbed>, UserCredentials) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = tb.client_runtime();
    let fut = test(tb.clone(), creds(tb));
    client_block_on(&rt, fut);
}

fn creds(tb: &Testbed) -> UserCredentials {
    UserCredentials {
        user: tb.user().to_string(),
        domain: tb.domain().to_string(),
        password: tb.password().into(),
    }
}

/// Settings for tests: quick binding timeouts and a poll short enough to see changes.
fn config() -> ClientConfig {
    let mut c = ClientConfig::default();
    c.bind_timeout = Duration::from_secs(3);
    c.connect_timeout = Duration::from_secs(2);
    c
}

async fn connect(server: IpAddr, creds: &UserCredentials, config: ClientConfig) -> Client {
    let client = Client::connect(&format!("{server}:445"), creds, config)
        .await
        .expect("connect");
    assert!(
        client.wait_for_channels(Duration::from_secs(10)).await,
        "binding did not settle"
    );
    client
}

fn active(client: &Client) -> Vec<ChannelInfo> {
    client
        .channels()
        .into_iter()
        .filter(|c| c.state == ChannelState::Active)
        .collect()
}

/// Active channels per (local IP, server IP).
fn per_pair(client: &Client) -> BTreeMap<(IpAddr, IpAddr), usize> {
    let mut m = BTreeMap::new();
    for c in active(client) {
        *m.entry((c.local.ip(), c.server.ip())).or_default() += 1;
    }
    m
}

/// The testbed's deterministic test data, as `Bytes`.
fn pattern(seed: u64, len: usize) -> Bytes {
    Bytes::from(smb3_tests::pattern(seed, len))
}

fn sha256(b: &[u8]) -> Vec<u8> {
    Sha256::digest(b).to_vec()
}

/// Write `data` to `name`, read it back, and compare; also compare the server's file.
async fn round_trip(tb: &Testbed, share: &Share, share_name: &str, name: &str, data: &Bytes) {
    let back = write_then_read(share, name, data.clone()).await;
    assert_eq!(back.len(), data.len(), "{name}: length");
    assert!(back == *data, "{name}: data read back differs");
    let on_disk = std::fs::read(tb.share_path(share_name).join(name)).expect("server file");
    assert_eq!(
        sha256(&on_disk),
        sha256(data),
        "{name}: server's copy differs"
    );
}

/// Every active channel carried part of the I/O.
fn assert_all_carried(client: &Client, min_requests: u64) {
    for c in active(client) {
        assert!(
            c.requests >= min_requests,
            "channel {} -> {} carried only {} requests: {:#?}",
            c.local,
            c.server,
            c.requests,
            client.channels()
        );
    }
}

#[test]
fn four_rss_links_give_sixteen_channels_and_io_uses_them_all() {
    let tb = start(TestbedConfig::unshaped(4));
    in_client(&tb, |tb, creds| async move {
        let client = connect(tb.server_addr(1).into(), &creds, config()).await;
        let status = client.multichannel();
        assert_eq!(status.off_reason, None);
        assert_eq!(status.server_interfaces.len(), 4, "{status:#?}");
        assert_eq!(status.planned(), 16, "{status:#?}");
        let pairs = per_pair(&client);
        assert_eq!(pairs.len(), 4, "{pairs:?}");
        for k in 1..=4 {
            let key = (tb.client_addr(k).into(), tb.server_addr(k).into());
            assert_eq!(
                pairs.get(&key),
                Some(&4),
                "link {k}: {pairs:?} {:#?} {:#?}",
                client.multichannel().pairs,
                client.channels()
            );
        }
        let share = client.share("plain").await.expect("share");
        let data = pattern(4, 64 << 20);
        round_trip(&tb, &share, "plain", "mc4.bin", &data).await;
        assert_all_carried(&client, 2);
        // Each pair's channels reached the server over their own link.
        for c in active(&client) {
            assert_eq!(
                c.local.ip().to_string().rsplit('.').nth(1),
                c.server.ip().to_string().rsplit('.').nth(1)
            );
        }
    });
}

#[test]
fn two_links_least_loaded_and_explain() {
    let tb = start(TestbedConfig::unshaped(2));
    in_client(&tb, |tb, creds| async move {
        let mut cfg = config();
        cfg.dispatch = Dispatch::LeastLoaded;
        cfg.channels_per_rss_nic = 2;
        let client = connect(tb.server_addr(2).into(), &creds, cfg).await;
        assert_eq!(active(&client).len(), 4, "{:#?}", client.channels());
        let status = client.multichannel();
        assert_eq!(status.dispatch, Dispatch::LeastLoaded);
        let explain = status.explain().join("\n");
        assert!(
            explain.contains("4 of 4 planned channels are up"),
            "{explain}"
        );
        let share = client.share("plain").await.expect("share");
        round_trip(&tb, &share, "plain", "ll.bin", &pattern(2, 32 << 20)).await;
        assert_all_carried(&client, 2);
    });
}

#[test]

fn one_server_address_over_two_client_links_gives_eight_channels() {
    let mut cfg = TestbedConfig::unshaped(2);
    cfg.service_addr = true;
    cfg.advertise = Advertise::Service;
    let tb = start(cfg);
    let service = tb.service_addr().expect("service address");
    in_client(&tb, |tb, creds| async move {
        let client = connect(service.into(), &creds, config()).await;
        let pairs = per_pair(&client);
        assert_eq!(
            pairs,
            BTreeMap::from([
                ((tb.client_addr(1).into(), service.into()), 4),
                ((tb.client_addr(2).into(), service.into()), 4),
            ]),
            "{:#?}",
            client.multichannel()
        );
        let share = client.share("plain").await.expect("share");
        round_trip(&tb, &share, "plain", "svc.bin", &pattern(7, 32 << 20)).await;
        assert_all_carried(&client, 1);
    });
}

#[test]
fn bound_channels_sign_and_seal_on_every_smb3_dialect() {
    let tb = start(TestbedConfig::unshaped(2));
    in_client(&tb, |tb, creds| async move {
        for dialect in [Dialect::Smb300, Dialect::Smb302, Dialect::Smb311] {
            let mut cfg = config();
            cfg.min_dialect = dialect;
            cfg.max_dialect = dialect;
            cfg.channels_per_rss_nic = 2;
            let client = connect(tb.server_addr(1).into(), &creds, cfg).await;
            assert_eq!(client.dialect(), dialect);
            assert_eq!(
                active(&client).len(),
                4,
                "{dialect}: {:#?}",
                client.multichannel()
            );
            for share_name in ["encrypted", "signed"] {
                let share = client.share(share_name).await.expect("share");
                let name = format!("{share_name}-{dialect}.bin");
                round_trip(&tb, &share, share_name, &name, &pattern(3, 12 << 20)).await;
            }
            assert_all_carried(&client, 2);
            client.logoff().await.expect("logoff");
        }
    });
}

#[test]
fn smb21_and_disabled_sessions_stay_on_one_channel_and_say_why() {
    let tb = start(TestbedConfig::unshaped(2));
    in_client(&tb, |tb, creds| async move {
        let mut cfg = config();
        cfg.min_dialect = Dialect::Smb210;
        cfg.max_dialect = Dialect::Smb210;
        let client = connect(tb.server_addr(1).into(), &creds, cfg).await;
        assert_eq!(client.channels().len(), 1);
        let why = client.multichannel().explain().join(" ");
        assert!(why.contains("SMB 2.1") && why.contains("3.0"), "{why}");

        let mut cfg = config();
        cfg.multichannel = false;
        let client = connect(tb.server_addr(1).into(), &creds, cfg).await;
        assert_eq!(client.channels().len(), 1);
        let why = client.multichannel().explain().join(" ");
        assert!(why.contains("turned off"), "{why}");
    });
}

#[test]
fn max_channels_cuts_evenly() {
    let tb = start(TestbedConfig::unshaped(4));
    in_client(&tb, |tb, creds| async move {
        let mut cfg = config();
        cfg.max_channels = 6;
        let client = connect(tb.server_addr(1).into(), &creds, cfg).await;
        let mut counts: Vec<usize> = per_pair(&client).into_values().collect();
        counts.sort_unstable();
        assert_eq!(counts, vec![1, 1, 2, 2], "{:#?}", client.multichannel());
    });
}

#[test]
fn unreachable_advertised_address_does_not_stall_the_session() {
    let tb = start(TestbedConfig::unshaped(2));
    // The server gets a second address, 10.<id>.99.1, and advertises it; the client's only
    // route to it goes through a neighbour that does not exist, so every packet to it is
    // silently lost (no RST, no ICMP): connecting can only time out.
    let ghost: std::net::Ipv4Addr = {
        let o = tb.server_addr(1).octets();
        [o[0], o[1], 99, 1].into()
    };
    let nowhere: std::net::Ipv4Addr = {
        let o = tb.server_addr(1).octets();
        [o[0], o[1], 1, 77].into()
    };
    let out = tb
        .server_command("ip")
        .args(["addr", "add", &format!("{ghost}/32"), "dev", "srv1"])
        .output()
        .expect("ip addr add");
    assert!(out.status.success(), "{out:?}");
    let route = [
        "ip",
        "route",
        "add",
        &format!("{ghost}/32"),
        "via",
        &nowhere.to_string(),
        "dev",
        "cli1",
    ];
    // A permanent neighbour entry with a MAC nobody has: without it, ARP for the missing
    // neighbour fails after about 3 s and connect() ends in EHOSTUNREACH, not a timeout.
    let neighbour = [
        "ip",
        "neigh",
        "replace",
        &nowhere.to_string(),
        "lladdr",
        "02:00:00:00:00:77",
        "dev",
        "cli1",
        "nud",
        "permanent",
    ];
    let out = tb.exec_client(&neighbour);
    assert!(out.status.success(), "{out:?}");
    let out = tb.exec_client(&route);
    assert!(out.status.success(), "{out:?}");
    tb.set_interfaces(&[
        Testbed::interface_spec(tb.server_addr(1), 10_000_000_000, true),
        Testbed::interface_spec(ghost, 10_000_000_000, true),
    ])
    .expect("advertise");
    in_client(&tb, move |tb, creds| async move {
        // A connect timeout long enough that "did not wait for the ghost" and "waited for
        // it" stay apart on a busy machine; the bind timeout stays the longer one, so a
        // ghost bind ends in the connect timeout.
        let mut c = config();
        c.connect_timeout = Duration::from_secs(4);
        c.bind_timeout = Duration::from_secs(6);
        let ghost_wait = c.connect_timeout;
        let t0 = Instant::now();
        let client = Client::connect(&format!("{}:445", tb.server_addr(1)), &creds, c)
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("share");
        // The session works at once, while the ghost binds are still trying.
        round_trip(&tb, &share, "plain", "ghost.bin", &pattern(9, 1 << 20)).await;
        assert!(t0.elapsed() < ghost_wait, "{:?}", t0.elapsed());
        assert!(client.wait_for_channels(Duration::from_secs(10)).await);
        let status = client.multichannel();
        let ghost_pairs: Vec<_> = status
            .pairs
            .iter()
            .filter(|p| p.server == Some(ghost.into()))
            .collect();
        assert!(!ghost_pairs.is_empty(), "{status:#?}");
        for p in &ghost_pairs {
            assert_eq!(p.current, 0);
            assert!(p.binds_failed >= 1, "{p:#?}");
            let error = p.last_error.as_deref().unwrap_or_default();
            assert!(error.contains("connect"), "{error}");
        }
        let explain = status.explain().join("\n");
        assert!(explain.contains(&ghost.to_string()), "{explain}");
        // Link 1's planned channels are all up and carry the I/O.
        let link1 = (
            IpAddr::from(tb.client_addr(1)),
            IpAddr::from(tb.server_addr(1)),
        );
        assert_eq!(per_pair(&client).get(&link1), Some(&4), "{status:#?}");
        round_trip(&tb, &share, "plain", "ghost2.bin", &pattern(10, 8 << 20)).await;
    });
}

#[test]
fn channels_follow_interfaces_removed_and_added_during_a_transfer() {
    let tb = start(TestbedConfig::unshaped(3));
    let spec = |tb: &Testbed, k| Testbed::interface_spec(tb.server_addr(k), 10_000_000_000, true);
    tb.set_interfaces(&[spec(&tb, 1), spec(&tb, 2)])
        .expect("advertise 1, 2");
    in_client(&tb, move |tb, creds| async move {
        let mut cfg = config();
        cfg.interface_poll = Duration::from_secs(1);
        cfg.channels_per_rss_nic = 2;
        let client = connect(tb.server_addr(1).into(), &creds, cfg).await;
        let servers = |c: &Client| -> Vec<IpAddr> {
            let mut v: Vec<IpAddr> = active(c).iter().map(|c| c.server.ip()).collect();
            v.sort();
            v.dedup();
            v
        };
        assert_eq!(
            servers(&client),
            vec![IpAddr::from(tb.server_addr(1)), tb.server_addr(2).into()]
        );
        let share = client.share("plain").await.expect("share");
        let data = pattern(11, 256 << 20);
        let writer = {
            let share = share.clone();
            let data = data.clone();
            tokio::spawn(async move {
                let f = share
                    .open(
                        "moving.bin",
                        &OpenOptions::new().write(true).create(true).truncate(true),
                    )
                    .await
                    .expect("create");
                // Many small writes, so the transfer spans the change.
                for (i, chunk) in data.chunks(4 << 20).enumerate() {
                    f.write_at((i * (4 << 20)) as u64, Bytes::copy_from_slice(chunk))
                        .await
                        .expect("write");
                    tokio::time::sleep(Duration::from_millis(80)).await;
                }
                f.close().await.expect("close");
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        tb.set_interfaces(&[spec(&tb, 2), spec(&tb, 3)])
            .expect("advertise 2, 3");
        let deadline = Instant::now() + Duration::from_secs(10);
        let want = vec![IpAddr::from(tb.server_addr(2)), tb.server_addr(3).into()];
        while servers(&client) != want && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(servers(&client), want, "{:#?}", client.multichannel());
        assert!(
            !writer.is_finished(),
            "the transfer ended before the change"
        );
        writer.await.expect("writer");
        let on_disk = std::fs::read(tb.share_path("plain").join("moving.bin")).expect("file");
        assert_eq!(sha256(&on_disk), sha256(&data));
        // Link 1's channels carried part of it and were closed, not failed.
        let link1: Vec<ChannelInfo> = client
            .channels()
            .into_iter()
            .filter(|c| c.server.ip() == IpAddr::from(tb.server_addr(1)))
            .collect();
        assert!(!link1.is_empty());
        for c in &link1 {
            assert_ne!(c.state, ChannelState::Active, "{c:#?}");
            assert_ne!(c.state, ChannelState::Failed, "{c:#?}");
            assert!(c.requests > 0, "{c:#?}");
        }
        // Link 3's channels carry the rest.
        let link3: u64 = active(&client)
            .iter()
            .filter(|c| c.server.ip() == IpAddr::from(tb.server_addr(3)))
            .map(|c| c.requests)
            .sum();
        assert!(link3 > 0);
    });
}
