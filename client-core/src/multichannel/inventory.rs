//! Local network interfaces, their link speed and RSS capability, read from the OS.
//!
//! Addresses, names and indices come from `if-addrs`; link speed and the number of receive
//! queues come from the OS (see `nic_facts`: Linux sysfs, macOS the routing sysctl), and
//! `NicOverride`s from the config replace either when the OS does not know or is wrong
//! (virtual NICs often report nothing useful).

use std::io;
use std::net::IpAddr;

use super::nic_facts;
use crate::config::NicOverride;

/// One address of one local NIC: a NIC with two addresses gives two entries sharing a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LocalInterface {
    /// OS interface name (`eth0`).
    pub(crate) name: String,
    /// OS interface index (0 when the OS did not say).
    pub(crate) if_index: u32,
    /// This entry's address.
    pub(crate) address: IpAddr,
    /// Prefix length of the address's subnet, for on-link checks in the planner.
    pub(crate) prefix_len: u8,
    /// Link speed in bits per second; `None` when unknown.
    pub(crate) link_speed: Option<u64>,
    /// Receive queues the NIC has (0 when unknown).
    pub(crate) rx_queues: u32,
    /// Whether the NIC spreads receive work over several CPUs (RSS), as the OS or an override
    /// says; `None` when neither does (macOS). [`LocalInterface::rss_capable`] decides then.
    pub(crate) rss: Option<bool>,
    /// Always false: this client has no SMB Direct; kept so the planner can rank RDMA pairs.
    pub(crate) rdma: bool,
    /// Whether this is a loopback address.
    pub(crate) loopback: bool,
}

impl LocalInterface {
    /// Whether the planner counts this NIC as RSS-capable: what the OS or an override said,
    /// else the rule for an unknown NIC ([`assumes_rss`]).
    pub(crate) fn rss_capable(&self) -> bool {
        self.rss.unwrap_or_else(|| assumes_rss(self.link_speed))
    }
}

/// A local NIC whose RSS the OS does not report (macOS) counts as RSS-capable from this link
/// speed up (bits per second): see [`assumes_rss`].
pub(crate) const ASSUMED_RSS_MIN_SPEED: u64 = 10_000_000_000;

/// Whether a local NIC whose RSS capability nobody reported (the OS has no queue count, as on
/// macOS, and no `NicOverride` says) is treated as RSS-capable: yes when its link speed is
/// known and at least 10 Gb/s ([`ASSUMED_RSS_MIN_SPEED`]).
///
/// Why: at 10 Gb/s and more one TCP connection is bound by the one core that handles its
/// receive path, which is what several channels per NIC pair relieve, and NICs of that class
/// are multi-queue hardware as a rule, so with the server's RSS this gives the pair the
/// `channels_per_rss_nic` Windows would give it where the driver reports RSS.
/// Below 10 Gb/s one connection fills the link anyway and more would only add handshakes; an
/// unknown speed gives no reason to assume anything. Either way, a pair still needs the
/// server to report RSS_CAPABLE, and `nic_overrides` replace the guess.
pub(crate) fn assumes_rss(link_speed: Option<u64>) -> bool {
    link_speed.is_some_and(|speed| speed >= ASSUMED_RSS_MIN_SPEED)
}

/// The local NICs' addresses with speed and RSS from the OS, `overrides` applied. Loopback and
/// link-local entries are kept; [`usable`] filters them.
pub(crate) fn local_interfaces(overrides: &[NicOverride]) -> io::Result<Vec<LocalInterface>> {
    let addrs = if_addrs::get_if_addrs()?;
    let mut names: Vec<&str> = addrs.iter().map(|i| i.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let facts_by_name = nic_facts::link_facts(&names);
    let mut out = Vec::new();
    for iface in addrs {
        let facts = facts_by_name.get(&iface.name).copied().unwrap_or_default();
        let prefix_len = match &iface.addr {
            if_addrs::IfAddr::V4(v4) => v4.prefixlen,
            if_addrs::IfAddr::V6(v6) => v6.prefixlen,
        };
        out.push(LocalInterface {
            if_index: iface.index.unwrap_or(0),
            address: iface.ip(),
            prefix_len,
            link_speed: facts.link_speed,
            rx_queues: facts.rx_queues,
            rss: facts.rss(),
            rdma: false,
            loopback: iface.is_loopback(),
            name: iface.name,
        });
    }
    apply_overrides(&mut out, overrides);
    Ok(out)
}

/// The interfaces a channel can use: IPv6 link-local addresses (fe80::/10) are dropped (they
/// need a scope id, and servers do not report one), loopback is dropped unless the server itself
/// is reached over loopback.
pub(crate) fn usable(all: Vec<LocalInterface>, server_on_loopback: bool) -> Vec<LocalInterface> {
    all.into_iter()
        .filter(|i| !is_ipv6_link_local(i.address))
        .filter(|i| server_on_loopback || !i.loopback)
        .collect()
}

/// Whether `addr` is in fe80::/10.
pub(crate) fn is_ipv6_link_local(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
        IpAddr::V4(_) => false,
    }
}

/// Replace speed and/or RSS of the NICs each override names. An override matches a NIC by name
/// or by any of its addresses, and then applies to every entry of that NIC, since speed and RSS
/// belong to the NIC, not the address. Later overrides win.
pub(crate) fn apply_overrides(ifaces: &mut [LocalInterface], overrides: &[NicOverride]) {
    for ov in overrides {
        let by_address: Option<IpAddr> = ov.nic.trim().parse().ok();
        let names: Vec<String> = ifaces
            .iter()
            .filter(|i| i.name == ov.nic || Some(i.address) == by_address)
            .map(|i| i.name.clone())
            .collect();
        for iface in ifaces.iter_mut().filter(|i| names.contains(&i.name)) {
            if let Some(speed) = ov.link_speed {
                iface.link_speed = Some(speed);
            }
            if let Some(rss) = ov.rss {
                iface.rss = Some(rss);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn unknown_rss_counts_as_rss_from_10_gbps_up() {
        assert!(!assumes_rss(None));
        assert!(!assumes_rss(Some(ASSUMED_RSS_MIN_SPEED - 1)));
        assert!(assumes_rss(Some(ASSUMED_RSS_MIN_SPEED)));
        assert!(assumes_rss(Some(100 * ASSUMED_RSS_MIN_SPEED)));
    }

    fn iface(name: &str, address: &str) -> LocalInterface {
        let address: IpAddr = address.parse().unwrap();
        LocalInterface {
            name: name.into(),
            if_index: 7,
            address,
            prefix_len: 24,
            link_speed: None,
            rx_queues: 1,
            rss: Some(false),
            rdma: false,
            loopback: address.is_loopback(),
        }
    }

    #[test]
    fn override_by_name_sets_speed_and_rss_on_every_address_of_the_nic() {
        let mut ifaces = vec![
            iface("eth0", "10.0.0.2"),
            iface("eth0", "2001:db8::2"),
            iface("eth1", "10.0.1.2"),
        ];
        let mut ov = NicOverride::new("eth0");
        ov.link_speed = Some(25_000_000_000);
        ov.rss = Some(true);
        apply_overrides(&mut ifaces, &[ov]);
        for i in &ifaces[..2] {
            assert_eq!(i.link_speed, Some(25_000_000_000));
            assert_eq!(i.rss, Some(true));
        }
        assert_eq!(ifaces[2].link_speed, None);
        assert_eq!(ifaces[2].rss, Some(false));
    }

    #[test]
    fn override_by_address_applies_to_the_nic_holding_it() {
        let mut ifaces = vec![
            iface("eth0", "10.0.0.2"),
            iface("eth1", "10.0.1.2"),
            iface("eth1", "10.0.9.2"),
        ];
        let mut ov = NicOverride::new("10.0.9.2");
        ov.link_speed = Some(1_000_000_000);
        apply_overrides(&mut ifaces, &[ov]);
        assert_eq!(ifaces[0].link_speed, None);
        assert_eq!(ifaces[1].link_speed, Some(1_000_000_000));
        assert_eq!(ifaces[2].link_speed, Some(1_000_000_000));
        // Only the speed was overridden.
        assert_eq!(ifaces[1].rss, Some(false));
    }

    #[test]
    fn override_matching_nothing_changes_nothing_and_later_overrides_win() {
        let mut ifaces = vec![iface("eth0", "10.0.0.2")];
        let before = ifaces.clone();
        let mut ov = NicOverride::new("wlan0");
        ov.rss = Some(true);
        apply_overrides(&mut ifaces, &[ov]);
        assert_eq!(ifaces, before);

        let mut first = NicOverride::new("eth0");
        first.link_speed = Some(1_000_000_000);
        first.rss = Some(true);
        let mut second = NicOverride::new("10.0.0.2");
        second.rss = Some(false);
        apply_overrides(&mut ifaces, &[first, second]);
        assert_eq!(ifaces[0].link_speed, Some(1_000_000_000));
        assert_eq!(ifaces[0].rss, Some(false));
    }

    #[test]
    fn usable_drops_ipv6_link_local_and_loopback_unless_server_is_on_loopback() {
        let all = vec![
            iface("lo", "127.0.0.1"),
            iface("lo", "::1"),
            iface("eth0", "10.0.0.2"),
            iface("eth0", "fe80::1"),
            iface("eth0", "febf::1"),
            iface("eth0", "2001:db8::2"),
        ];
        let addrs = |v: Vec<LocalInterface>| v.into_iter().map(|i| i.address).collect::<Vec<_>>();
        assert_eq!(
            addrs(usable(all.clone(), false)),
            vec![
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
                "2001:db8::2".parse::<IpAddr>().unwrap(),
            ]
        );
        assert_eq!(
            addrs(usable(all, true)),
            vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
                "2001:db8::2".parse::<IpAddr>().unwrap(),
            ]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn real_inventory_has_loopback() {
        let all = local_interfaces(&[]).unwrap();
        let lo = all
            .iter()
            .find(|i| i.name == "lo" && i.address == IpAddr::V4(Ipv4Addr::LOCALHOST))
            .expect("lo with 127.0.0.1");
        assert!(lo.loopback);
        assert_eq!(lo.prefix_len, 8);
        assert!(lo.if_index > 0);
        assert!(!lo.rdma);
    }
}
