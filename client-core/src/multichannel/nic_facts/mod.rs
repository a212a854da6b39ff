//! What the OS says about a local NIC beyond its addresses: link speed, receive queues (RSS)
//! and whether its link is up. One source per OS, chosen by `cfg`:
//!
//! - Linux: sysfs (`sysfs`): speed, number of rx queues, carrier.
//! - macOS: the routing sysctl's interface list (`route_iflist` parses it, `macos` fetches
//!   it): speed (`ifi_baudrate`) and up/running flags; the number of receive queues is not
//!   there, so RSS is unknown (`inventory::assumes_rss` decides then).
//! - Elsewhere: nothing known; `NicOverride`s in the config can say it instead.
//!
//! The parsers are compiled on every platform so their tests run on Linux CI; only the calls
//! that read the OS are behind `cfg`.

#![cfg_attr(not(any(target_os = "linux", target_os = "macos")), allow(dead_code))]

use std::collections::HashMap;

#[cfg(target_os = "macos")]
mod macos;
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
pub(crate) mod route_iflist;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) mod sysfs;

/// What the OS says about one NIC beyond its addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkFacts {
    /// Link speed in bits per second; `None` when unknown.
    pub(crate) link_speed: Option<u64>,
    /// Receive queues (0 when unknown); more than one means RSS.
    pub(crate) rx_queues: u32,
}

impl LinkFacts {
    /// Whether the NIC spreads receive work over several queues (RSS): `None` when the OS
    /// did not count its queues.
    pub(crate) fn rss(&self) -> Option<bool> {
        (self.rx_queues > 0).then_some(self.rx_queues > 1)
    }
}

/// The facts of each NIC in `names` (a name the OS does not know gets the default, unknown).
pub(crate) fn link_facts(names: &[&str]) -> HashMap<String, LinkFacts> {
    #[cfg(target_os = "linux")]
    let facts_of = |name: &str| sysfs::link_facts(std::path::Path::new("/sys"), name);
    // One sysctl for the whole list rather than one per NIC.
    #[cfg(target_os = "macos")]
    let facts_of = {
        let table = macos::interfaces();
        move |name: &str| {
            table
                .iter()
                .find(|i| i.name == name)
                .map(route_iflist::RouteInterface::link_facts)
                .unwrap_or_default()
        }
    };
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let facts_of = |_name: &str| LinkFacts::default();
    names
        .iter()
        .map(|name| (name.to_string(), facts_of(name)))
        .collect()
}

/// Whether NIC `name`'s link is up, when this OS says. Failover uses it to suspect a channel
/// at once when its link goes down, and to retry a lost channel's slot as soon as the link is
/// back instead of when its backoff ends. Linux: sysfs carrier; macOS: IFF_UP and
/// IFF_RUNNING (see [`route_iflist::RouteInterface::is_up`]); elsewhere unknown.
pub(crate) fn carrier(name: &str) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        sysfs::carrier(std::path::Path::new("/sys"), name)
    }
    #[cfg(target_os = "macos")]
    {
        macos::interfaces()
            .iter()
            .find(|i| i.name == name)
            .map(route_iflist::RouteInterface::is_up)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = name;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::route_iflist::{parse_iflist2, tests::ifinfo2};
    use super::*;

    #[test]
    fn rss_is_known_only_when_queues_were_counted() {
        let facts = |rx_queues| LinkFacts {
            link_speed: None,
            rx_queues,
        };
        assert_eq!(facts(0).rss(), None);
        assert_eq!(facts(1).rss(), Some(false));
        assert_eq!(facts(8).rss(), Some(true));
    }

    #[test]
    fn a_macos_interface_gives_its_speed_and_leaves_rss_unknown() {
        let buf = [
            ifinfo2("en0", 4, 0x8863, 10_000_000_000),
            ifinfo2("utun0", 12, 0x8051, 0),
        ]
        .concat();
        let parsed = parse_iflist2(&buf);
        let en0 = parsed[0].link_facts();
        assert_eq!(en0.link_speed, Some(10_000_000_000));
        assert_eq!(en0.rss(), None);
        assert_eq!(parsed[1].link_facts(), LinkFacts::default());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_loopback_has_carrier_and_a_missing_nic_is_unknown() {
        assert_eq!(carrier("lo"), Some(true));
        assert_eq!(carrier("no-such-nic0"), None);
        assert_eq!(
            link_facts(&["no-such-nic0"])["no-such-nic0"],
            LinkFacts::default()
        );
    }
}
