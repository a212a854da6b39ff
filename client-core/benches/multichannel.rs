//! Criterion micro-benchmarks of the pure parts of multichannel: the channel planner (run at
//! session setup and on every interface re-query) and the credit window (run twice for every
//! request: reserve before sending, grant on the reply).
//!
//! They reach the crate-private code through the hidden `smb3_client::microbench` handles, so
//! what is measured is what the client runs.
//!
//! Run: `cargo bench -p smb3-client --bench multichannel` (docs/PERFORMANCE.md,
//! "Micro-benchmarks").

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use criterion::{criterion_main, BatchSize, Criterion, Throughput};
use smb3_client::microbench::{CreditWindow, LocalNic, PlannerInput};
use smb3_client::ClientConfig;
use smb3_proto::msg::credit_charge;
use smb3_proto::msg::ioctl::{InterfaceCapability, NetworkInterfaceInfo};

const GBIT: u64 = 1_000_000_000;

fn server_nic(if_index: u32, address: IpAddr, rss: bool, link_speed: u64) -> NetworkInterfaceInfo {
    NetworkInterfaceInfo {
        if_index,
        capability: InterfaceCapability(if rss { InterfaceCapability::RSS } else { 0 }),
        link_speed,
        address,
        port: 0,
        flow_info: 0,
        scope_id: 0,
    }
}

/// The testbed's shape (DESIGN §4): `links` veth pairs, one /24 each, RSS on both ends at
/// 1 Gbit/s: four slots per pair.
fn testbed(links: u8) -> PlannerInput {
    let server: Vec<_> = (1..=links)
        .map(|k| {
            let addr = IpAddr::V4(Ipv4Addr::new(10, 0, k, 1));
            server_nic(u32::from(k) + 10, addr, true, GBIT)
        })
        .collect();
    let local: Vec<_> = (1..=links)
        .map(|k| {
            let addr = IpAddr::V4(Ipv4Addr::new(10, 0, k, 2));
            LocalNic::new(
                &format!("veth{k}"),
                u32::from(k) + 1,
                addr,
                24,
                Some(GBIT),
                true,
            )
        })
        .collect();
    PlannerInput::new(&server, &local, &ClientConfig::default())
}

/// A big file server: 16 NICs of mixed speed and RSS, each with an IPv4 and a routable IPv6
/// address (32 entries, as many as the interface list of a large Windows server), against a
/// client with 8 such NICs. Every pair must be classed and only the best class kept, then the
/// cap of 32 channels spread over it: the planner's worst realistic input.
fn big_server() -> PlannerInput {
    let mut server = Vec::new();
    for k in 0..16u8 {
        let (rss, speed) = (k % 2 == 0, if k < 8 { 25 * GBIT } else { 10 * GBIT });
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 1, k, 1));
        let v6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, u16::from(k), 0, 0, 0, 1));
        server.push(server_nic(u32::from(k) + 1, v4, rss, speed));
        server.push(server_nic(u32::from(k) + 1, v6, rss, speed));
    }
    let mut local = Vec::new();
    for k in 0..8u8 {
        let name = format!("eth{k}");
        let (rss, speed) = (k % 2 == 0, if k < 4 { 25 * GBIT } else { 10 * GBIT });
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 1, k, 2));
        let v6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, u16::from(k), 0, 0, 0, 2));
        local.push(LocalNic::new(
            &name,
            u32::from(k) + 2,
            v4,
            24,
            Some(speed),
            rss,
        ));
        local.push(LocalNic::new(
            &name,
            u32::from(k) + 2,
            v6,
            64,
            Some(speed),
            rss,
        ));
    }
    PlannerInput::new(&server, &local, &ClientConfig::default())
}

fn planner(c: &mut Criterion) {
    let mut g = c.benchmark_group("planner");
    for (name, input) in [
        ("plan 1 link (testbed)", testbed(1)),
        ("plan 4 links (testbed)", testbed(4)),
        ("plan 32 server x 16 local addresses", big_server()),
    ] {
        assert!(
            input.plan().slots() > 0,
            "{name}: the planner found no channel"
        );
        g.bench_function(name, |b| b.iter(|| black_box(&input).plan()));
    }
    // An interface re-query that finds a link gone: plan again and diff against the channels
    // open now, which is what the manager does every `interface_poll` and after a failure.
    let (before, after) = (testbed(4).plan(), testbed(3));
    assert_eq!(after.plan().diff_from(&before), (0, 4));
    g.bench_function("re-plan 4 -> 3 links + diff", |b| {
        b.iter(|| black_box(&after).plan().diff_from(black_box(&before)))
    });
    g.finish();
}

/// A window that has received `credits` from the server, as after SESSION_SETUP.
fn granted_window(credits: u16) -> CreditWindow {
    let mut w = CreditWindow::new(512);
    w.reserve(1).expect("a new connection holds one credit");
    assert!(w.on_response(1, credits, true));
    w
}

fn credits(c: &mut Criterion) {
    let mut g = c.benchmark_group("credits");
    g.throughput(Throughput::Elements(1));
    // One request and its final reply, the reply granting back what was spent: the steady
    // state of a busy channel. 4 KiB costs one credit, 1 MiB sixteen (MS-SMB2 3.2.4.1.5).
    for (name, bytes) in [("4 KiB", 4u32 << 10), ("1 MiB", 1 << 20)] {
        let charge = credit_charge(bytes);
        let mut w = granted_window(512);
        g.bench_function(format!("reserve + final reply, {name} request"), |b| {
            b.iter(|| {
                let (id, _) = w.reserve(black_box(charge)).expect("credits are returned");
                assert!(w.on_response(charge, charge, true));
                id
            })
        });
    }
    // 32 requests of 1 MiB in flight, an interim STATUS_PENDING for each, then the final
    // replies: the pattern of a pipelined large read. Timed per request.
    const QD: usize = 32;
    let charge = credit_charge(1 << 20);
    g.throughput(Throughput::Elements(QD as u64));
    g.bench_function("32 x 1 MiB in flight: reserve, interim, final", |b| {
        b.iter_batched_ref(
            || granted_window(512),
            |w| {
                for _ in 0..QD {
                    w.reserve(charge).expect("512 credits cover 32 x 16");
                }
                for _ in 0..QD {
                    assert!(w.on_response(charge, 1, false));
                }
                for _ in 0..QD {
                    assert!(w.on_response(charge, charge - 1, true));
                }
                debug_assert_eq!(w.in_flight(), 0);
                w.available()
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// These run in nanoseconds, so short runs already give tight intervals.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

/// Every case of this file. Written out rather than with `criterion_group!`, whose generated
/// `pub fn` has no doc comment and so fails the workspace's `missing_docs` under `-D warnings`.
pub fn benches() {
    let mut c = config().configure_from_args();
    planner(&mut c);
    credits(&mut c);
}

criterion_main!(benches);
