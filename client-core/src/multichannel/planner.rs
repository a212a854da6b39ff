//! Which channels a session wants: a pure function of the interfaces on both ends.
//!
//! Every (local address, server address) pair that can reach each other gets a class (RDMA, RSS,
//! speed); only the pairs of the best class are used, as Windows and macOS do, because channels
//! over a slower path would hold back striped I/O (DESIGN §3 step 4). Each used pair gets a few
//! numbered slots; the channel manager opens one channel per slot and [`diff`]s plans when the
//! interfaces change, so channels whose slot is still wanted are kept.

use std::collections::HashSet;
use std::net::IpAddr;

use smb3_proto::msg::ioctl::{InterfaceCapability, NetworkInterfaceInfo};

use super::inventory::{is_ipv6_link_local, LocalInterface};
use crate::config::ClientConfig;

/// LinkSpeed at or above this is Samba's "unknown" (u32::MAX Mb/s in bits per second).
const UNKNOWN_LINK_SPEED: u64 = 4_294_967_295_000_000;

/// Most slots one pair can have: ordinals are u16.
const MAX_SLOTS_PER_PAIR: usize = u16::MAX as usize + 1;

/// One server address as reported by FSCTL_QUERY_NETWORK_INTERFACE_INFO, cleaned up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ServerInterface {
    /// The server's interface number (several addresses can share one).
    pub(crate) if_index: u32,
    /// The address to connect to.
    pub(crate) address: IpAddr,
    /// RSS_CAPABLE.
    pub(crate) rss: bool,
    /// RDMA_CAPABLE.
    pub(crate) rdma: bool,
    /// Link speed in bits per second; `None` when the server does not know.
    pub(crate) link_speed: Option<u64>,
}

impl ServerInterface {
    /// From a decoded NETWORK_INTERFACE_INFO (MS-SMB2 2.2.32.5). LinkSpeed 0 and values at or
    /// above 4294967295000000 (Samba's "unknown": u32::MAX Mb/s) become `None`.
    pub(crate) fn from_wire(info: &NetworkInterfaceInfo) -> Self {
        let link_speed = match info.link_speed {
            0 => None,
            s if s >= UNKNOWN_LINK_SPEED => None,
            s => Some(s),
        };
        ServerInterface {
            if_index: info.if_index,
            address: info.address,
            rss: info.capability.has(InterfaceCapability::RSS),
            rdma: info.capability.has(InterfaceCapability::RDMA),
            link_speed,
        }
    }
}

/// The planner's share of [`ClientConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlanConfig {
    /// Most channels in total (the cap cuts evenly across pairs).
    pub(crate) max_channels: usize,
    /// Slots per pair where both ends are RSS-capable.
    pub(crate) channels_per_rss_nic: usize,
    /// Slots per pair otherwise.
    pub(crate) channels_per_nic: usize,
}

impl From<&ClientConfig> for PlanConfig {
    fn from(cfg: &ClientConfig) -> Self {
        PlanConfig {
            max_channels: cfg.max_channels,
            channels_per_rss_nic: cfg.channels_per_rss_nic,
            channels_per_nic: cfg.channels_per_nic,
        }
    }
}

/// What a pair offers. The derived order is the preference: RDMA first, then RSS, then speed,
/// with unknown speed (`None`) below any known speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PairClass {
    /// Both ends RDMA-capable.
    pub(crate) rdma: bool,
    /// Both ends RSS-capable.
    pub(crate) rss: bool,
    /// The slower end's speed, the known one when only one is known, `None` when neither is.
    pub(crate) link_speed: Option<u64>,
}

impl PairClass {
    /// The class of a channel from `local` to `server`.
    fn of(local: &LocalInterface, server: &ServerInterface) -> Self {
        let link_speed = match (local.link_speed, server.link_speed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        PairClass {
            rdma: local.rdma && server.rdma,
            rss: local.rss_capable() && server.rss,
            link_speed,
        }
    }

    /// "RSS, 10 Gb/s" and the like, for notes.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.rdma {
            parts.push("RDMA".to_string());
        }
        if self.rss {
            parts.push("RSS".to_string());
        }
        parts.push(describe_speed(self.link_speed));
        parts.join(", ")
    }
}

/// Identity of one wanted channel: the same pair and ordinal in two plans is the same slot,
/// so a channel that fills it survives a re-plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct SlotKey {
    /// Local address the channel's socket binds to.
    pub(crate) local: IpAddr,
    /// Server address it connects to.
    pub(crate) server: IpAddr,
    /// 0.. within the pair.
    pub(crate) ordinal: u16,
}

/// One wanted channel, with what `smbctl channels` shows about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Identity.
    pub(crate) key: SlotKey,
    /// Local interface name.
    pub(crate) local_name: String,
    /// Local interface index.
    pub(crate) local_if_index: u32,
    /// Server interface index.
    pub(crate) server_if_index: u32,
    /// Both ends RSS-capable.
    pub(crate) rss: bool,
    /// Both ends RDMA-capable.
    pub(crate) rdma: bool,
    /// The pair's speed in bits per second (see [`PairClass`]).
    pub(crate) link_speed: Option<u64>,
}

/// One used pair and how many slots it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PairPlan {
    /// Local address.
    pub(crate) local: IpAddr,
    /// Local interface name.
    pub(crate) local_name: String,
    /// Server address.
    pub(crate) server: IpAddr,
    /// Server interface index.
    pub(crate) server_if_index: u32,
    /// What the pair offers.
    pub(crate) class: PairClass,
    /// Slots the pair would get without the `max_channels` cap.
    pub(crate) max_channels: usize,
    /// Slots it got (may be 0 when there are more pairs than `max_channels`).
    pub(crate) planned: usize,
}

/// The wanted channels and why the rest were left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Wanted channels, interleaved: ordinal 0 of every pair, then ordinal 1, ..., pairs by
    /// (local, server) address; opening them in this order spreads early channels over all NICs.
    pub(crate) slots: Vec<Slot>,
    /// The pairs of the best class, by (local, server) address, including those the cap left
    /// at 0.
    pub(crate) pairs: Vec<PairPlan>,
    /// Why interfaces and pairs were left out, in words.
    pub(crate) notes: Vec<String>,
}

impl Plan {
    /// The slots' keys, in plan order.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> Vec<SlotKey> {
        self.slots.iter().map(|s| s.key).collect()
    }
}

/// A candidate pair before the class cut.
struct Candidate<'a> {
    local: &'a LocalInterface,
    server: &'a ServerInterface,
    class: PairClass,
}

/// The wanted channels from the server's interfaces, the usable local ones and the config.
///
/// Pairs only join the same address family. A server address inside the subnet of one or more
/// local addresses pairs only with those (on-link); any other server address is reached by
/// routing and pairs with every non-loopback local address of its family. Only pairs of the
/// best [`PairClass`] are used; each gets `channels_per_rss_nic` slots when both ends are RSS,
/// else `channels_per_nic`; above `max_channels` the cap cuts evenly, the remainder going one
/// each to the first pairs by (local, server) address.
pub(crate) fn plan(server: &[ServerInterface], local: &[LocalInterface], cfg: &PlanConfig) -> Plan {
    let mut notes = Vec::new();
    let servers = clean_servers(server, &mut notes);
    let locals = clean_locals(local, &mut notes);

    let mut candidates = Vec::new();
    for s in &servers {
        candidates.extend(pairs_for_server(s, &locals, &mut notes));
    }
    for l in &locals {
        if !candidates.iter().any(|c| c.local.address == l.address) {
            notes.push(format!(
                "local {} ({}) unused: no server address reachable from it",
                l.address, l.name
            ));
        }
    }

    let Some(best) = candidates.iter().map(|c| c.class).max() else {
        if !servers.is_empty() && !locals.is_empty() {
            notes.push("no usable interface pair".to_string());
        }
        return Plan {
            notes,
            ..Plan::default()
        };
    };
    let (mut used, worse): (Vec<_>, Vec<_>) = candidates.into_iter().partition(|c| c.class == best);
    for c in worse {
        notes.push(format!(
            "{} ({}) -> {} ({}) not used: {}",
            c.local.address,
            c.local.name,
            c.server.address,
            c.class.describe(),
            why_worse(c.class, best)
        ));
    }
    used.sort_by_key(|c| (c.local.address, c.server.address));

    let pairs = allocate(&used, cfg, &mut notes);
    let slots = interleave_slots(&used, &pairs);
    Plan {
        slots,
        pairs,
        notes,
    }
}

/// Which slots to open and which channels to close to go from `current` to `plan`: (to add, in
/// plan order; to remove, in `current` order). Slots in both are kept untouched.
pub(crate) fn diff(current: &[SlotKey], plan: &Plan) -> (Vec<SlotKey>, Vec<SlotKey>) {
    let have: HashSet<SlotKey> = current.iter().copied().collect();
    let want: HashSet<SlotKey> = plan.slots.iter().map(|s| s.key).collect();
    let add = plan
        .slots
        .iter()
        .map(|s| s.key)
        .filter(|k| !have.contains(k))
        .collect();
    let remove = current
        .iter()
        .copied()
        .filter(|k| !want.contains(k))
        .collect();
    (add, remove)
}

/// Server entries one per address (a repeated address merges: capabilities OR-ed, the higher
/// known speed kept, the first if_index kept), minus addresses no channel can use.
fn clean_servers(server: &[ServerInterface], notes: &mut Vec<String>) -> Vec<ServerInterface> {
    let mut out: Vec<ServerInterface> = Vec::new();
    let mut found = Vec::new();
    for s in server {
        if let Some(seen) = out.iter_mut().find(|o| o.address == s.address) {
            seen.rss |= s.rss;
            seen.rdma |= s.rdma;
            seen.link_speed = seen.link_speed.max(s.link_speed);
            found.push(format!("server {} listed twice: merged", s.address));
            continue;
        }
        if let Some(why) = unusable_server_address(s.address) {
            found.push(format!("server {} skipped: {why}", s.address));
            continue;
        }
        out.push(*s);
    }
    notes.extend(counted(found));
    out
}

/// Each distinct note once, in order of first appearance, with how often it came when more
/// than once: a list repeating one address a hundred times gives one line, not a hundred.
fn counted(notes: Vec<String>) -> Vec<String> {
    let mut distinct: Vec<(String, usize)> = Vec::new();
    for note in notes {
        match distinct.iter_mut().find(|(n, _)| *n == note) {
            Some((_, times)) => *times += 1,
            None => distinct.push((note, 1)),
        }
    }
    distinct
        .into_iter()
        .map(|(note, times)| match times {
            1 => note,
            n => format!("{note} ({n} times)"),
        })
        .collect()
}

/// Why a server address cannot take a channel, if it cannot.
fn unusable_server_address(addr: IpAddr) -> Option<&'static str> {
    if addr.is_unspecified() {
        Some("unspecified address")
    } else if addr.is_multicast() {
        Some("multicast address")
    } else if is_ipv6_link_local(addr) {
        // Reaching fe80::/10 needs the scope id of our own NIC, which the server cannot know.
        Some("IPv6 link-local address")
    } else if matches!(addr, IpAddr::V4(v4) if v4.is_broadcast()) {
        Some("broadcast address")
    } else {
        None
    }
}

/// Local entries one per address, minus IPv6 link-local ones (should `usable` have let any by).
fn clean_locals<'a>(
    local: &'a [LocalInterface],
    notes: &mut Vec<String>,
) -> Vec<&'a LocalInterface> {
    let mut out: Vec<&LocalInterface> = Vec::new();
    for l in local {
        if is_ipv6_link_local(l.address) {
            notes.push(format!(
                "local {} ({}) skipped: IPv6 link-local address",
                l.address, l.name
            ));
        } else if let Some(first) = out.iter().find(|o| o.address == l.address) {
            notes.push(format!(
                "local {} ({}) skipped: address already on {}",
                l.address, l.name, first.name
            ));
        } else {
            out.push(l);
        }
    }
    out
}

/// The local addresses `server` pairs with: the on-link ones when there are any, else (routed)
/// every non-loopback one of its family.
fn pairs_for_server<'a>(
    server: &'a ServerInterface,
    locals: &[&'a LocalInterface],
    notes: &mut Vec<String>,
) -> Vec<Candidate<'a>> {
    let family: Vec<&LocalInterface> = locals
        .iter()
        .copied()
        .filter(|l| l.address.is_ipv4() == server.address.is_ipv4())
        .collect();
    if family.is_empty() {
        let fam = if server.address.is_ipv4() {
            "IPv4"
        } else {
            "IPv6"
        };
        notes.push(format!(
            "server {} not used: no local {fam} address",
            server.address
        ));
        return Vec::new();
    }
    let on_link: Vec<&LocalInterface> = family
        .iter()
        .copied()
        .filter(|l| in_subnet(server.address, l.address, l.prefix_len))
        .collect();
    let chosen = if !on_link.is_empty() {
        on_link
    } else if server.address.is_loopback() {
        // The server's own loopback: reachable only over ours, which is on-link when present.
        Vec::new()
    } else {
        // Our loopback cannot route to another host's address.
        family.into_iter().filter(|l| !l.loopback).collect()
    };
    if chosen.is_empty() {
        notes.push(format!(
            "server {} not used: no local address can reach it",
            server.address
        ));
    }
    chosen
        .into_iter()
        .map(|l| Candidate {
            local: l,
            server,
            class: PairClass::of(l, server),
        })
        .collect()
}

/// Whether `addr` lies in the subnet `net`/`prefix_len` (same family only).
fn in_subnet(addr: IpAddr, net: IpAddr, prefix_len: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let keep = u32::from(prefix_len.min(32));
            let mask = u32::MAX.checked_shl(32 - keep).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let keep = u32::from(prefix_len.min(128));
            let mask = u128::MAX.checked_shl(128 - keep).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Why a pair of class `worse` lost to `best`.
fn why_worse(worse: PairClass, best: PairClass) -> String {
    if best.rdma && !worse.rdma {
        format!("RDMA pairs ({}) come first", best.describe())
    } else if best.rss && !worse.rss {
        format!("RSS pairs ({}) come before speed", best.describe())
    } else {
        format!("{} pairs are faster", describe_speed(best.link_speed))
    }
}

/// Slots per pair, cut evenly under `max_channels`. The used pairs share one class, so they all
/// want the same number; when the total is too large each gets floor(max / pairs) and the
/// remainder goes one each to the first pairs.
fn allocate(used: &[Candidate<'_>], cfg: &PlanConfig, notes: &mut Vec<String>) -> Vec<PairPlan> {
    let want_of = |c: &Candidate<'_>| {
        let n = if c.class.rss {
            cfg.channels_per_rss_nic
        } else {
            cfg.channels_per_nic
        };
        n.min(MAX_SLOTS_PER_PAIR)
    };
    let total = used
        .iter()
        .fold(0usize, |acc, c| acc.saturating_add(want_of(c)));
    let capped = total > cfg.max_channels;
    let share = cfg.max_channels / used.len().max(1);
    let remainder = cfg.max_channels % used.len().max(1);
    if capped {
        notes.push(format!(
            "{total} channels wanted over {} pairs, capped at max_channels {}",
            used.len(),
            cfg.max_channels
        ));
    }
    let mut out = Vec::with_capacity(used.len());
    for (i, c) in used.iter().enumerate() {
        let want = want_of(c);
        let planned = if capped {
            want.min(share + usize::from(i < remainder))
        } else {
            want
        };
        if planned == 0 && want > 0 {
            notes.push(format!(
                "{} ({}) -> {} gets no channel: max_channels {} is below the {} pairs",
                c.local.address,
                c.local.name,
                c.server.address,
                cfg.max_channels,
                used.len()
            ));
        }
        out.push(PairPlan {
            local: c.local.address,
            local_name: c.local.name.clone(),
            server: c.server.address,
            server_if_index: c.server.if_index,
            class: c.class,
            max_channels: want,
            planned,
        });
    }
    out
}

/// The slots of `pairs` (parallel to `used`), ordinal 0 of every pair first.
fn interleave_slots(used: &[Candidate<'_>], pairs: &[PairPlan]) -> Vec<Slot> {
    let rounds = pairs.iter().map(|p| p.planned).max().unwrap_or(0);
    let mut slots = Vec::with_capacity(pairs.iter().map(|p| p.planned).sum());
    for ordinal in 0..rounds {
        // `planned` never exceeds MAX_SLOTS_PER_PAIR, so every ordinal fits.
        let Ok(ordinal16) = u16::try_from(ordinal) else {
            break;
        };
        for (c, p) in used.iter().zip(pairs).filter(|(_, p)| ordinal < p.planned) {
            slots.push(Slot {
                key: SlotKey {
                    local: p.local,
                    server: p.server,
                    ordinal: ordinal16,
                },
                local_name: p.local_name.clone(),
                local_if_index: c.local.if_index,
                server_if_index: p.server_if_index,
                rss: p.class.rss,
                rdma: p.class.rdma,
                link_speed: p.class.link_speed,
            });
        }
    }
    slots
}

/// "10 Gb/s", "2.5 Gb/s", "100 Mb/s", "unknown speed".
fn describe_speed(speed: Option<u64>) -> String {
    const G: u64 = 1_000_000_000;
    const M: u64 = 1_000_000;
    match speed {
        None => "unknown speed".to_string(),
        Some(s) if s >= G && s % G == 0 => format!("{} Gb/s", s / G),
        Some(s) if s >= G => format!("{:.1} Gb/s", s as f64 / G as f64),
        Some(s) if s >= M && s % M == 0 => format!("{} Mb/s", s / M),
        Some(s) if s >= M => format!("{:.1} Mb/s", s as f64 / M as f64),
        Some(s) => format!("{s} b/s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G10: u64 = 10_000_000_000;
    const G1: u64 = 1_000_000_000;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn local(
        name: &str,
        addr: &str,
        prefix_len: u8,
        rss: bool,
        speed: Option<u64>,
    ) -> LocalInterface {
        let address = ip(addr);
        LocalInterface {
            name: name.into(),
            if_index: 2,
            address,
            prefix_len,
            link_speed: speed,
            rx_queues: if rss { 4 } else { 1 },
            rss: Some(rss),
            rdma: false,
            loopback: address.is_loopback(),
        }
    }

    fn server(if_index: u32, addr: &str, rss: bool, speed: Option<u64>) -> ServerInterface {
        ServerInterface {
            if_index,
            address: ip(addr),
            rss,
            rdma: false,
            link_speed: speed,
        }
    }

    fn cfg(max_channels: usize) -> PlanConfig {
        PlanConfig {
            max_channels,
            channels_per_rss_nic: 4,
            channels_per_nic: 1,
        }
    }

    fn key(local: &str, server: &str, ordinal: u16) -> SlotKey {
        SlotKey {
            local: ip(local),
            server: ip(server),
            ordinal,
        }
    }

    /// Planned slot count per (local, server) pair, in pair order.
    fn planned(p: &Plan) -> Vec<(IpAddr, IpAddr, usize)> {
        p.pairs
            .iter()
            .map(|x| (x.local, x.server, x.planned))
            .collect()
    }

    fn wire(link_speed: u64, capability: u32) -> NetworkInterfaceInfo {
        NetworkInterfaceInfo {
            if_index: 5,
            capability: InterfaceCapability(capability),
            link_speed,
            address: ip("10.0.0.1"),
            port: 0,
            flow_info: 0,
            scope_id: 0,
        }
    }

    #[test]
    fn from_wire_reads_capabilities_and_speed() {
        let s = ServerInterface::from_wire(&wire(G10, InterfaceCapability::RSS));
        assert_eq!(
            s,
            ServerInterface {
                if_index: 5,
                address: ip("10.0.0.1"),
                rss: true,
                rdma: false,
                link_speed: Some(G10),
            }
        );
        let s = ServerInterface::from_wire(&wire(G1, InterfaceCapability::RDMA));
        assert!(!s.rss && s.rdma);
        let s = ServerInterface::from_wire(&wire(1, 0));
        assert!(!s.rss && !s.rdma);
        assert_eq!(s.link_speed, Some(1));
    }

    #[test]
    fn from_wire_zero_and_samba_unknown_speeds_are_none() {
        assert_eq!(ServerInterface::from_wire(&wire(0, 0)).link_speed, None);
        assert_eq!(
            ServerInterface::from_wire(&wire(4_294_967_295_000_000, 0)).link_speed,
            None
        );
        assert_eq!(
            ServerInterface::from_wire(&wire(u64::MAX, 0)).link_speed,
            None
        );
        assert_eq!(
            ServerInterface::from_wire(&wire(4_294_967_294_999_999, 0)).link_speed,
            Some(4_294_967_294_999_999)
        );
    }

    #[test]
    fn plan_config_from_client_config_defaults() {
        let c = PlanConfig::from(&ClientConfig::default());
        assert_eq!(
            c,
            PlanConfig {
                max_channels: 32,
                channels_per_rss_nic: 4,
                channels_per_nic: 1
            }
        );
    }

    #[test]
    fn one_server_address_two_rss_client_nics_gives_8_interleaved_slots() {
        // Routed: the server's single address is on neither client subnet.
        let p = plan(
            &[server(3, "192.168.9.1", true, Some(G10))],
            &[
                local("eth1", "10.0.2.2", 24, true, Some(G10)),
                local("eth0", "10.0.1.2", 24, true, Some(G10)),
            ],
            &cfg(32),
        );
        let mut want = Vec::new();
        for ordinal in 0..4 {
            want.push(key("10.0.1.2", "192.168.9.1", ordinal));
            want.push(key("10.0.2.2", "192.168.9.1", ordinal));
        }
        assert_eq!(p.keys(), want);
        assert_eq!(
            planned(&p),
            vec![
                (ip("10.0.1.2"), ip("192.168.9.1"), 4),
                (ip("10.0.2.2"), ip("192.168.9.1"), 4)
            ]
        );
        let first = &p.slots[0];
        assert_eq!(first.local_name, "eth0");
        assert_eq!(first.server_if_index, 3);
        assert!(first.rss && !first.rdma);
        assert_eq!(first.link_speed, Some(G10));
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    #[test]
    fn on_link_server_address_pairs_only_with_its_subnet() {
        let p = plan(
            &[
                server(1, "10.0.1.1", false, None),
                server(2, "10.0.2.1", false, None),
            ],
            &[
                local("eth0", "10.0.1.2", 24, false, None),
                local("eth1", "10.0.2.2", 24, false, None),
            ],
            &cfg(32),
        );
        assert_eq!(
            p.keys(),
            vec![
                key("10.0.1.2", "10.0.1.1", 0),
                key("10.0.2.2", "10.0.2.1", 0)
            ]
        );
    }

    #[test]
    fn only_the_fastest_server_interfaces_are_used() {
        let servers: Vec<_> = (1..=6)
            .map(|n| {
                let speed = if n <= 4 { G10 } else { G1 };
                server(n, &format!("10.0.{n}.1"), false, Some(speed))
            })
            .collect();
        let locals: Vec<_> = (1..=6)
            .map(|n| {
                local(
                    &format!("eth{n}"),
                    &format!("10.0.{n}.2"),
                    24,
                    false,
                    Some(G10),
                )
            })
            .collect();
        let p = plan(&servers, &locals, &cfg(32));
        assert_eq!(
            p.keys(),
            (1..=4)
                .map(|n| key(&format!("10.0.{n}.2"), &format!("10.0.{n}.1"), 0))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            p.notes,
            vec![
                "10.0.5.2 (eth5) -> 10.0.5.1 (1 Gb/s) not used: 10 Gb/s pairs are faster",
                "10.0.6.2 (eth6) -> 10.0.6.1 (1 Gb/s) not used: 10 Gb/s pairs are faster",
            ]
        );
    }

    #[test]
    fn sixteen_rss_pairs_under_a_cap_of_32_get_2_each() {
        let servers: Vec<_> = (0..16)
            .map(|n| server(n, &format!("10.0.{n}.1"), true, Some(G10)))
            .collect();
        let locals: Vec<_> = (0..16)
            .map(|n| {
                local(
                    &format!("eth{n}"),
                    &format!("10.0.{n}.2"),
                    24,
                    true,
                    Some(G10),
                )
            })
            .collect();
        let p = plan(&servers, &locals, &cfg(32));
        assert_eq!(p.slots.len(), 32);
        assert_eq!(p.pairs.len(), 16);
        for pair in &p.pairs {
            assert_eq!((pair.max_channels, pair.planned), (4, 2));
        }
        let mut keys = p.keys();
        keys.sort();
        let mut want: Vec<_> = (0..16)
            .flat_map(|n| {
                let (l, s) = (format!("10.0.{n}.2"), format!("10.0.{n}.1"));
                [key(&l, &s, 0), key(&l, &s, 1)]
            })
            .collect();
        want.sort();
        assert_eq!(keys, want);
        assert_eq!(
            p.notes,
            vec!["64 channels wanted over 16 pairs, capped at max_channels 32"]
        );
    }

    #[test]
    fn cap_of_10_over_3_rss_pairs_gives_4_3_3() {
        let p = plan(
            &[server(1, "192.168.9.1", true, Some(G10))],
            &[
                local("eth2", "10.0.3.2", 24, true, Some(G10)),
                local("eth0", "10.0.1.2", 24, true, Some(G10)),
                local("eth1", "10.0.2.2", 24, true, Some(G10)),
            ],
            &cfg(10),
        );
        let s = ip("192.168.9.1");
        assert_eq!(
            planned(&p),
            vec![
                (ip("10.0.1.2"), s, 4),
                (ip("10.0.2.2"), s, 3),
                (ip("10.0.3.2"), s, 3)
            ]
        );
        assert_eq!(p.slots.len(), 10);
        assert_eq!(p.slots[9].key, key("10.0.1.2", "192.168.9.1", 3));
    }

    #[test]
    fn ipv6_server_and_ipv4_client_make_no_pair() {
        let p = plan(
            &[server(1, "2001:db8::1", true, Some(G10))],
            &[local("eth0", "10.0.1.2", 24, true, Some(G10))],
            &cfg(32),
        );
        assert!(p.slots.is_empty());
        assert!(p.pairs.is_empty());
        assert_eq!(
            p.notes,
            vec![
                "server 2001:db8::1 not used: no local IPv6 address",
                "local 10.0.1.2 (eth0) unused: no server address reachable from it",
                "no usable interface pair",
            ]
        );
    }

    #[test]
    fn rss_pair_beats_a_faster_plain_pair() {
        let p = plan(
            &[
                server(1, "192.168.9.1", true, Some(G10)),
                server(2, "192.168.9.2", false, Some(4 * G10)),
            ],
            &[local("eth0", "10.0.1.2", 16, true, None)],
            &cfg(32),
        );
        assert_eq!(
            p.keys(),
            (0..4)
                .map(|o| key("10.0.1.2", "192.168.9.1", o))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            p.notes,
            vec!["10.0.1.2 (eth0) -> 192.168.9.2 (40 Gb/s) not used: RSS pairs (RSS, 10 Gb/s) come before speed"]
        );
    }

    #[test]
    fn unknown_speed_ranks_below_known() {
        let mut zero = wire(0, 0);
        zero.address = ip("192.168.9.1");
        let mut samba_unknown = wire(4_294_967_295_000_000, 0);
        samba_unknown.address = ip("192.168.9.2");
        let mut slow = wire(100_000_000, 0);
        slow.address = ip("192.168.9.3");
        let servers: Vec<_> = [zero, samba_unknown, slow]
            .iter()
            .map(ServerInterface::from_wire)
            .collect();
        let p = plan(
            &servers,
            &[local("eth0", "10.0.1.2", 24, false, None)],
            &cfg(32),
        );
        assert_eq!(p.keys(), vec![key("10.0.1.2", "192.168.9.3", 0)]);
        assert_eq!(p.pairs[0].class.link_speed, Some(100_000_000));
        assert_eq!(
            p.notes,
            vec![
                "10.0.1.2 (eth0) -> 192.168.9.1 (unknown speed) not used: 100 Mb/s pairs are faster",
                "10.0.1.2 (eth0) -> 192.168.9.2 (unknown speed) not used: 100 Mb/s pairs are faster",
            ]
        );
    }

    #[test]
    fn a_nic_of_unknown_rss_gets_rss_slots_at_10_gbps_and_one_below() {
        // As on macOS: speed from the OS, no queue count.
        let unknown = |name: &str, addr: &str, speed: Option<u64>| LocalInterface {
            rss: None,
            rx_queues: 0,
            ..local(name, addr, 24, false, speed)
        };
        let servers = [server(1, "10.0.1.1", true, Some(G10))];
        let count = |l: LocalInterface| plan(&servers, &[l], &cfg(32)).slots.len();
        assert_eq!(count(unknown("en0", "10.0.1.2", Some(G10))), 4);
        assert_eq!(count(unknown("en0", "10.0.1.2", Some(G1))), 1);
        assert_eq!(count(unknown("en0", "10.0.1.2", None)), 1);
        // What the OS or an override said wins over the rule.
        let said_no = LocalInterface {
            rss: Some(false),
            ..unknown("en0", "10.0.1.2", Some(G10))
        };
        assert_eq!(count(said_no), 1);
        // The server must still report RSS.
        let plain_server = plan(
            &[server(1, "10.0.1.1", false, Some(G10))],
            &[unknown("en0", "10.0.1.2", Some(G10))],
            &cfg(32),
        );
        assert_eq!(plain_server.slots.len(), 1);
        assert!(!plain_server.slots[0].rss);
    }

    #[test]
    fn pair_speed_is_the_slower_known_end() {
        let l = local("eth0", "10.0.1.2", 24, false, Some(G1));
        let known = PairClass::of(&l, &server(1, "10.0.1.1", false, Some(G10)));
        assert_eq!(known.link_speed, Some(G1));
        let one_known = PairClass::of(&l, &server(1, "10.0.1.1", false, None));
        assert_eq!(one_known.link_speed, Some(G1));
        let l_unknown = local("eth0", "10.0.1.2", 24, false, None);
        let neither = PairClass::of(&l_unknown, &server(1, "10.0.1.1", false, None));
        assert_eq!(neither.link_speed, None);
    }

    #[test]
    fn rdma_on_the_server_side_only_is_not_an_rdma_pair() {
        let mut rdma_server = server(1, "192.168.9.1", false, Some(G1));
        rdma_server.rdma = true;
        let fast_server = server(2, "192.168.9.2", false, Some(G10));
        let p = plan(
            &[rdma_server, fast_server],
            &[local("eth0", "10.0.1.2", 24, false, None)],
            &cfg(32),
        );
        assert_eq!(p.keys(), vec![key("10.0.1.2", "192.168.9.2", 0)]);
        assert!(!p.slots[0].rdma);
        assert_eq!(
            p.notes,
            vec!["10.0.1.2 (eth0) -> 192.168.9.1 (1 Gb/s) not used: 10 Gb/s pairs are faster"]
        );
    }

    #[test]
    fn rdma_on_both_ends_ranks_first() {
        let mut l = local("eth0", "10.0.1.2", 24, false, None);
        l.rdma = true;
        let mut rdma_server = server(1, "192.168.9.1", false, Some(G1));
        rdma_server.rdma = true;
        let p = plan(
            &[server(2, "192.168.9.2", true, Some(G10)), rdma_server],
            &[l],
            &cfg(32),
        );
        assert_eq!(p.keys(), vec![key("10.0.1.2", "192.168.9.1", 0)]);
        assert!(p.slots[0].rdma);
    }

    #[test]
    fn an_interface_gone_removes_exactly_its_slots() {
        let servers = [server(1, "192.168.9.1", true, Some(G10))];
        let eth0 = local("eth0", "10.0.1.2", 24, true, Some(G10));
        let eth1 = local("eth1", "10.0.2.2", 24, true, Some(G10));
        let before = plan(&servers, &[eth0.clone(), eth1], &cfg(32));
        let after = plan(&servers, &[eth0], &cfg(32));
        let (add, remove) = diff(&before.keys(), &after);
        assert!(add.is_empty());
        assert_eq!(
            remove,
            (0..4)
                .map(|o| key("10.0.2.2", "192.168.9.1", o))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_new_interface_adds_exactly_its_slots_and_existing_keys_stay() {
        let servers = [server(1, "192.168.9.1", true, Some(G10))];
        let eth0 = local("eth0", "10.0.1.2", 24, true, Some(G10));
        let eth1 = local("eth1", "10.0.2.2", 24, true, Some(G10));
        let before = plan(&servers, std::slice::from_ref(&eth0), &cfg(32));
        let after = plan(&servers, &[eth1, eth0], &cfg(32));
        let (add, remove) = diff(&before.keys(), &after);
        assert!(remove.is_empty());
        assert_eq!(
            add,
            (0..4)
                .map(|o| key("10.0.2.2", "192.168.9.1", o))
                .collect::<Vec<_>>()
        );
        let after_keys: HashSet<_> = after.keys().into_iter().collect();
        assert!(before.keys().iter().all(|k| after_keys.contains(k)));
    }

    #[test]
    fn a_new_server_interface_keeps_ordinals_of_existing_pairs() {
        let eth0 = local("eth0", "10.0.1.2", 16, false, None);
        let s1 = server(1, "10.0.1.1", false, None);
        let s2 = server(2, "10.0.2.1", false, None);
        let before = plan(&[s1], std::slice::from_ref(&eth0), &cfg(32));
        let after = plan(&[s2, s1], &[eth0], &cfg(32));
        let (add, remove) = diff(&before.keys(), &after);
        assert_eq!(add, vec![key("10.0.1.2", "10.0.2.1", 0)]);
        assert!(remove.is_empty());
    }

    #[test]
    fn max_channels_1_gives_one_slot() {
        let p = plan(
            &[server(1, "192.168.9.1", true, Some(G10))],
            &[
                local("eth0", "10.0.1.2", 24, true, Some(G10)),
                local("eth1", "10.0.2.2", 24, true, Some(G10)),
            ],
            &cfg(1),
        );
        assert_eq!(p.keys(), vec![key("10.0.1.2", "192.168.9.1", 0)]);
        assert_eq!(
            planned(&p),
            vec![
                (ip("10.0.1.2"), ip("192.168.9.1"), 1),
                (ip("10.0.2.2"), ip("192.168.9.1"), 0)
            ]
        );
        assert_eq!(
            p.notes,
            vec![
                "8 channels wanted over 2 pairs, capped at max_channels 1",
                "10.0.2.2 (eth1) -> 192.168.9.1 gets no channel: max_channels 1 is below the 2 pairs",
            ]
        );
    }

    #[test]
    fn duplicate_server_addresses_are_merged() {
        let p = plan(
            &[
                server(1, "192.168.9.1", false, None),
                server(1, "192.168.9.1", true, Some(G10)),
            ],
            &[local("eth0", "10.0.1.2", 24, true, None)],
            &cfg(32),
        );
        assert_eq!(p.slots.len(), 4);
        assert_eq!(p.pairs.len(), 1);
        assert_eq!(
            p.pairs[0].class,
            PairClass {
                rdma: false,
                rss: true,
                link_speed: Some(G10)
            }
        );
        assert_eq!(p.notes, vec!["server 192.168.9.1 listed twice: merged"]);
    }

    #[test]
    fn server_loopback_pairs_with_local_loopback_only() {
        let lo = local("lo", "127.0.0.1", 8, false, None);
        let eth0 = local("eth0", "10.0.1.2", 24, false, None);
        let servers = [
            server(1, "127.0.0.1", false, None),
            server(2, "192.168.9.1", false, None),
        ];
        let p = plan(&servers, &[lo, eth0.clone()], &cfg(32));
        // The routed address does not pair with lo; 127.0.0.1 pairs with lo only.
        assert_eq!(
            p.keys(),
            vec![
                key("10.0.1.2", "192.168.9.1", 0),
                key("127.0.0.1", "127.0.0.1", 0)
            ]
        );
        // Without a local loopback (server not on loopback), its 127.0.0.1 is unreachable.
        let p = plan(&servers[..1], &[eth0], &cfg(32));
        assert!(p.slots.is_empty());
        assert_eq!(
            p.notes[0],
            "server 127.0.0.1 not used: no local address can reach it"
        );
    }

    #[test]
    fn link_local_and_unspecified_addresses_are_skipped_with_notes() {
        let p = plan(
            &[
                server(1, "fe80::1", true, Some(G10)),
                server(2, "0.0.0.0", true, Some(G10)),
                server(3, "2001:db8::1", false, Some(G1)),
            ],
            &[
                local("eth0", "fe80::2", 64, true, Some(G10)),
                local("eth0", "2001:db8::2", 64, false, Some(G1)),
            ],
            &cfg(32),
        );
        assert_eq!(p.keys(), vec![key("2001:db8::2", "2001:db8::1", 0)]);
        assert_eq!(
            p.notes,
            vec![
                "server fe80::1 skipped: IPv6 link-local address",
                "server 0.0.0.0 skipped: unspecified address",
                "local fe80::2 (eth0) skipped: IPv6 link-local address",
            ]
        );
    }

    #[test]
    fn a_list_repeating_addresses_gives_one_note_per_address_and_one_slot_set() {
        let mut servers = Vec::new();
        for i in 0..100 {
            servers.push(server(i, "10.0.1.1", i % 2 == 0, Some(G10)));
            servers.push(server(1000 + i, "0.0.0.0", true, Some(G10)));
        }
        let p = plan(
            &servers,
            &[local("eth0", "10.0.1.2", 24, true, Some(G10))],
            &cfg(32),
        );
        assert_eq!(p.keys().len(), 4, "one RSS pair: four slots");
        assert_eq!(
            p.notes,
            vec![
                "server 0.0.0.0 skipped: unspecified address (100 times)",
                "server 10.0.1.1 listed twice: merged (99 times)",
            ]
        );
    }

    #[test]
    fn plan_does_not_depend_on_input_order() {
        let servers = vec![
            server(1, "10.0.1.1", true, Some(G10)),
            server(2, "10.0.2.1", true, Some(G10)),
            server(3, "192.168.9.1", true, Some(G10)),
        ];
        let locals = vec![
            local("eth0", "10.0.1.2", 24, true, Some(G10)),
            local("eth1", "10.0.2.2", 24, true, Some(G10)),
        ];
        let a = plan(&servers, &locals, &cfg(7));
        let rev_s: Vec<_> = servers.iter().rev().copied().collect();
        let rev_l: Vec<_> = locals.iter().rev().cloned().collect();
        let b = plan(&rev_s, &rev_l, &cfg(7));
        assert_eq!(a.slots, b.slots);
        assert_eq!(a.pairs, b.pairs);
        assert_eq!(a.slots.len(), 7);
    }

    #[test]
    fn subnet_membership() {
        assert!(in_subnet(ip("10.0.1.9"), ip("10.0.1.2"), 24));
        assert!(!in_subnet(ip("10.0.2.9"), ip("10.0.1.2"), 24));
        assert!(in_subnet(ip("8.8.8.8"), ip("10.0.1.2"), 0));
        assert!(!in_subnet(ip("10.0.1.3"), ip("10.0.1.2"), 32));
        assert!(in_subnet(ip("2001:db8::9"), ip("2001:db8::2"), 64));
        assert!(!in_subnet(ip("2001:db9::9"), ip("2001:db8::2"), 64));
        assert!(!in_subnet(ip("10.0.1.9"), ip("::1"), 0));
    }

    #[test]
    fn speeds_in_words() {
        assert_eq!(describe_speed(Some(G10)), "10 Gb/s");
        assert_eq!(describe_speed(Some(2_500_000_000)), "2.5 Gb/s");
        assert_eq!(describe_speed(Some(100_000_000)), "100 Mb/s");
        assert_eq!(describe_speed(Some(999)), "999 b/s");
        assert_eq!(describe_speed(None), "unknown speed");
    }
}
