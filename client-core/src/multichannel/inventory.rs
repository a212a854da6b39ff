//! Local network interfaces, their link speed and RSS capability, read from the OS.
//!
//! Addresses, names and indices come from `if-addrs`; link speed and the number of receive
//! queues come from the OS (Linux sysfs), and `NicOverride`s from the config replace either
//! when the OS does not know or is wrong (virtual NICs often report nothing useful).

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::path::Path;

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
    /// Whether the NIC spreads receive work over several CPUs (RSS).
    pub(crate) rss: bool,
    /// Always false: this client has no SMB Direct; kept so the planner can rank RDMA pairs.
    pub(crate) rdma: bool,
    /// Whether this is a loopback address.
    pub(crate) loopback: bool,
}

/// What the OS says about one NIC beyond its addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkFacts {
    /// Link speed in bits per second; `None` when unknown.
    pub(crate) link_speed: Option<u64>,
    /// Receive queues (0 when unknown); more than one means RSS.
    pub(crate) rx_queues: u32,
}

impl LinkFacts {
    /// Whether the NIC has more than one receive queue, i.e. receive-side scaling.
    pub(crate) fn rss(&self) -> bool {
        self.rx_queues > 1
    }
}

/// The local NICs' addresses with speed and RSS from the OS, `overrides` applied. Loopback and
/// link-local entries are kept; [`usable`] filters them.
pub(crate) fn local_interfaces(overrides: &[NicOverride]) -> io::Result<Vec<LocalInterface>> {
    let mut facts_by_name: HashMap<String, LinkFacts> = HashMap::new();
    let mut out = Vec::new();
    for iface in if_addrs::get_if_addrs()? {
        let facts = *facts_by_name
            .entry(iface.name.clone())
            .or_insert_with(|| os_link_facts(&iface.name));
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
                iface.rss = rss;
            }
        }
    }
}

/// Speed and receive queues of NIC `name` from this OS.
#[cfg(target_os = "linux")]
fn os_link_facts(name: &str) -> LinkFacts {
    sysfs_link_facts(Path::new("/sys"), name)
}

/// Speed and receive queues of NIC `name` from this OS: unknown here.
///
/// macOS has the speed in `getifaddrs`' `if_data.ifi_baudrate`, but reaching it needs a raw
/// pointer cast and this crate forbids unsafe code; other OSes have no cheap source either. The
/// planner treats unknown speed as slowest and no RSS as one channel per pair; `nic_overrides`
/// in the config set both when they matter.
#[cfg(not(target_os = "linux"))]
fn os_link_facts(_name: &str) -> LinkFacts {
    LinkFacts::default()
}

/// Whether NIC `name` has carrier (its link is up), when this OS says. Failover uses it to
/// suspect a channel at once when its link goes down, and to retry a lost channel's slot as
/// soon as the link is back instead of when its backoff ends.
#[cfg(target_os = "linux")]
pub(crate) fn carrier(name: &str) -> Option<bool> {
    sysfs_carrier(Path::new("/sys"), name)
}

/// Whether NIC `name` has carrier: not known on this OS.
#[cfg(not(target_os = "linux"))]
pub(crate) fn carrier(_name: &str) -> Option<bool> {
    None
}

/// `class/net/NAME/carrier` under `sysfs_root`: "1" up, "0" down; reading it fails with
/// EINVAL while the NIC is administratively down, which is down as well. A missing NIC or
/// an unsafe name is unknown.
pub(crate) fn sysfs_carrier(sysfs_root: &Path, name: &str) -> Option<bool> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return None;
    }
    let dir = sysfs_root.join("class/net").join(name);
    if !dir.exists() {
        return None;
    }
    match std::fs::read_to_string(dir.join("carrier")) {
        Ok(text) => match text.trim() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        },
        Err(e) if e.raw_os_error() == Some(22) => Some(false),
        Err(_) => None,
    }
}

/// Speed and receive queues of NIC `name` from a sysfs tree rooted at `sysfs_root` (`/sys`):
/// `class/net/NAME/speed` holds Mb/s (-1, unreadable or absent: unknown; reading it on a down
/// or virtual NIC fails with EINVAL), and each `class/net/NAME/queues/rx-N` directory is one
/// receive queue.
pub(crate) fn sysfs_link_facts(sysfs_root: &Path, name: &str) -> LinkFacts {
    // A name that could walk out of the NIC's directory is not a NIC name.
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return LinkFacts::default();
    }
    let dir = sysfs_root.join("class/net").join(name);
    let link_speed = std::fs::read_to_string(dir.join("speed"))
        .ok()
        .and_then(|text| parse_sysfs_speed(&text));
    let rx_queues = std::fs::read_dir(dir.join("queues"))
        .map(|entries| {
            let count = entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count();
            u32::try_from(count).unwrap_or(u32::MAX)
        })
        .unwrap_or(0);
    LinkFacts {
        link_speed,
        rx_queues,
    }
}

/// Mb/s text from sysfs to bits per second. -1 (SPEED_UNKNOWN), 0, its u32 form 4294967295,
/// and anything not a number mean unknown.
fn parse_sysfs_speed(text: &str) -> Option<u64> {
    let mbps: i64 = text.trim().parse().ok()?;
    if mbps <= 0 || mbps >= i64::from(u32::MAX) {
        return None;
    }
    u64::try_from(mbps).ok()?.checked_mul(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "smb3-inventory-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        /// Make `class/net/NAME` with an optional speed file and `rx` rx-queue directories
        /// (plus one tx queue, which must not count).
        fn nic(&self, name: &str, speed: Option<&str>, rx: usize) {
            let dir = self.0.join("class/net").join(name);
            std::fs::create_dir_all(dir.join("queues/tx-0")).unwrap();
            for n in 0..rx {
                std::fs::create_dir_all(dir.join(format!("queues/rx-{n}"))).unwrap();
            }
            if let Some(text) = speed {
                std::fs::write(dir.join("speed"), text).unwrap();
            }
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
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
            rss: false,
            rdma: false,
            loopback: address.is_loopback(),
        }
    }

    #[test]
    fn sysfs_speed_10000_mbps_is_10_gbps_and_4_rx_queues_is_rss() {
        let root = TempDir::new();
        root.nic("eth0", Some("10000\n"), 4);
        let facts = sysfs_link_facts(&root.0, "eth0");
        assert_eq!(
            facts,
            LinkFacts {
                link_speed: Some(10_000_000_000),
                rx_queues: 4
            }
        );
        assert!(facts.rss());
    }

    #[test]
    fn sysfs_speed_minus_one_is_unknown_and_1_rx_queue_is_not_rss() {
        let root = TempDir::new();
        root.nic("veth1", Some("-1\n"), 1);
        let facts = sysfs_link_facts(&root.0, "veth1");
        assert_eq!(
            facts,
            LinkFacts {
                link_speed: None,
                rx_queues: 1
            }
        );
        assert!(!facts.rss());
    }

    #[test]
    fn sysfs_missing_speed_file_is_unknown() {
        let root = TempDir::new();
        root.nic("lo", None, 1);
        assert_eq!(sysfs_link_facts(&root.0, "lo").link_speed, None);
    }

    #[test]
    fn carrier_comes_from_sysfs_and_unknown_when_absent() {
        let t = TempDir::new();
        t.nic("up0", None, 1);
        t.nic("down0", None, 1);
        t.nic("odd0", None, 1);
        let dir = |n: &str| t.0.join("class/net").join(n);
        std::fs::write(dir("up0").join("carrier"), "1\n").unwrap();
        std::fs::write(dir("down0").join("carrier"), "0\n").unwrap();
        std::fs::write(dir("odd0").join("carrier"), "x\n").unwrap();
        assert_eq!(sysfs_carrier(&t.0, "up0"), Some(true));
        assert_eq!(sysfs_carrier(&t.0, "down0"), Some(false));
        assert_eq!(sysfs_carrier(&t.0, "odd0"), None);
        assert_eq!(sysfs_carrier(&t.0, "gone0"), None);
        assert_eq!(sysfs_carrier(&t.0, "../up0"), None);
    }

    #[test]
    fn sysfs_missing_nic_knows_nothing() {
        let root = TempDir::new();
        assert_eq!(sysfs_link_facts(&root.0, "eth9"), LinkFacts::default());
        assert_eq!(sysfs_link_facts(&root.0, ".."), LinkFacts::default());
    }

    #[test]
    fn sysfs_speed_text_edge_cases() {
        assert_eq!(parse_sysfs_speed("1000\n"), Some(1_000_000_000));
        assert_eq!(parse_sysfs_speed("2500"), Some(2_500_000_000));
        assert_eq!(parse_sysfs_speed("0"), None);
        assert_eq!(parse_sysfs_speed("4294967295"), None);
        assert_eq!(parse_sysfs_speed("fast"), None);
        assert_eq!(parse_sysfs_speed(""), None);
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
            assert!(i.rss);
        }
        assert_eq!(ifaces[2].link_speed, None);
        assert!(!ifaces[2].rss);
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
        assert!(!ifaces[1].rss);
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
        assert!(!ifaces[0].rss);
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
