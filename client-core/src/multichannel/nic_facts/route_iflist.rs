//! Parser of macOS's interface list from the routing sysctl
//! (`CTL_NET, PF_ROUTE, 0, 0, NET_RT_IFLIST2, 0`): per interface, its name, flags and link
//! speed (`ifi_baudrate`).
//!
//! Only fetching the bytes is macOS-specific (see `super::macos`); parsing is plain safe code
//! over a byte slice, compiled and tested on every platform with records built from the
//! documented layouts below, so a mistake in an offset shows on Linux CI too.
//!
//! The buffer is a sequence of routing messages. Each interface contributes one `RTM_IFINFO2`
//! message (`struct if_msghdr2` followed by the interface's link-layer `struct sockaddr_dl`) and
//! then one `RTM_NEWADDR` message per address, which are skipped here (addresses come from
//! `if-addrs`). Layouts, from the macOS SDK's `<net/if.h>`, `<net/if_var.h>`, `<net/route.h>`
//! and `<net/if_dl.h>` (the same on x86_64 and arm64: both LP64 little-endian, and every field
//! up to `ifi_baudrate` is naturally aligned, so `#pragma pack(4)` around `if_data64` moves
//! nothing we read):
//!
//! ```text
//! struct if_msghdr2 {                      offset
//!     u_short ifm_msglen;                  0   length of the whole message, sockaddrs included
//!     u_char  ifm_version;                 2   RTM_VERSION (5)
//!     u_char  ifm_type;                    3   RTM_IFINFO2 (0x12)
//!     int     ifm_addrs;                   4   RTA_* bits: which sockaddrs follow
//!     int     ifm_flags;                   8   IFF_UP 0x1, IFF_RUNNING 0x40, ...
//!     u_short ifm_index;                   12
//!     int     ifm_snd_len, ifm_snd_maxlen,
//!             ifm_snd_drops, ifm_timer;    16, 20, 24, 28
//!     struct if_data64 ifm_data;           32  (128 bytes: 8 u_char, u_int32 mtu, metric,
//! };                                           u_int64 baudrate at +16, 11 u_int64 counters,
//!                                              2 u_int32, struct timeval32) -> sizeof 160
//! struct sockaddr_dl {                     offset from the sockaddr
//!     u_char sdl_len, sdl_family;          0, 1  (AF_LINK = 18)
//!     u_short sdl_index;                   2
//!     u_char sdl_type, sdl_nlen,
//!            sdl_alen, sdl_slen;           4, 5, 6, 7
//!     char   sdl_data[];                   8   the name (sdl_nlen bytes, no NUL), then the address
//! };
//! ```
//!
//! The sockaddrs after the header are in RTA bit order, each padded to a multiple of 4 bytes
//! (XNU's `ROUNDUP32`; a zero length takes 4); the interface's own is `RTA_IFP` (0x10).

use super::LinkFacts;

/// `RTM_VERSION` of `<net/route.h>`.
const RTM_VERSION: u8 = 5;
/// `RTM_IFINFO2`: an interface's `if_msghdr2`.
const RTM_IFINFO2: u8 = 0x12;
/// `sizeof(struct if_msghdr2)`: where the sockaddrs begin.
const IF_MSGHDR2_LEN: usize = 160;
/// Offsets in `if_msghdr2` (see the module doc).
const OFF_ADDRS: usize = 4;
const OFF_FLAGS: usize = 8;
const OFF_INDEX: usize = 12;
const OFF_BAUDRATE: usize = 32 + 16;
/// `RTAX_IFP`: the bit of `RTA_IFP` (0x10) in `ifm_addrs`.
const RTAX_IFP: u32 = 4;
/// `RTAX_MAX`: the number of sockaddr slots.
const RTAX_MAX: u32 = 8;
/// `AF_LINK`.
const AF_LINK: u8 = 18;
/// Where `sdl_data` (the name) begins in a `sockaddr_dl`.
const SDL_DATA: usize = 8;
/// `IFF_UP`: administratively up.
const IFF_UP: u32 = 0x1;
/// `IFF_RUNNING`: the driver has its resources and runs.
const IFF_RUNNING: u32 = 0x40;

/// One interface as the routing sysctl reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RouteInterface {
    /// Interface name (`en0`).
    pub(crate) name: String,
    /// Interface index.
    pub(crate) index: u16,
    /// `ifm_flags` (IFF_*).
    pub(crate) flags: u32,
    /// `ifi_baudrate`: bits per second, 0 when the driver does not say.
    pub(crate) baudrate: u64,
}

impl RouteInterface {
    /// Link speed in bits per second; `None` when the driver reports 0.
    pub(crate) fn link_speed(&self) -> Option<u64> {
        (self.baudrate > 0).then_some(self.baudrate)
    }

    /// What this entry tells of the NIC: its speed, and no queue count (RSS unknown).
    pub(crate) fn link_facts(&self) -> LinkFacts {
        LinkFacts {
            link_speed: self.link_speed(),
            rx_queues: 0,
        }
    }

    /// Whether the interface is up and running. The routing message carries no link state of
    /// its own (that is the media status, an ioctl), so this is the closest it says: an
    /// interface taken down, or whose driver stopped, cannot carry a channel.
    pub(crate) fn is_up(&self) -> bool {
        self.flags & IFF_UP != 0 && self.flags & IFF_RUNNING != 0
    }
}

/// The interfaces in a `NET_RT_IFLIST2` buffer. Messages of other types or versions are
/// skipped by their length; a message whose length is too short or runs past the buffer ends
/// the walk (what came before it is kept), and an `RTM_IFINFO2` without a readable name is
/// left out.
pub(crate) fn parse_iflist2(buf: &[u8]) -> Vec<RouteInterface> {
    let mut out = Vec::new();
    let mut rest = buf;
    while rest.len() >= 4 {
        let msglen = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        if msglen < 4 || msglen > rest.len() {
            break;
        }
        let (msg, tail) = rest.split_at(msglen);
        rest = tail;
        if msg[2] != RTM_VERSION || msg[3] != RTM_IFINFO2 {
            continue;
        }
        if let Some(iface) = parse_ifinfo2(msg) {
            out.push(iface);
        }
    }
    out
}

/// One `RTM_IFINFO2` message, `msg` exactly `ifm_msglen` long.
fn parse_ifinfo2(msg: &[u8]) -> Option<RouteInterface> {
    if msg.len() < IF_MSGHDR2_LEN {
        return None;
    }
    let addrs = u32_at(msg, OFF_ADDRS)?;
    let flags = u32_at(msg, OFF_FLAGS)?;
    let index = u16::from_le_bytes(msg.get(OFF_INDEX..OFF_INDEX + 2)?.try_into().ok()?);
    let baudrate = u64::from_le_bytes(msg.get(OFF_BAUDRATE..OFF_BAUDRATE + 8)?.try_into().ok()?);
    let name = link_name(&msg[IF_MSGHDR2_LEN..], addrs)?;
    Some(RouteInterface {
        name,
        index,
        flags,
        baudrate,
    })
}

/// The name in the `RTA_IFP` sockaddr_dl among the sockaddrs `addrs` says follow.
fn link_name(mut sockaddrs: &[u8], addrs: u32) -> Option<String> {
    for bit in 0..RTAX_MAX {
        if addrs & (1 << bit) == 0 {
            continue;
        }
        let sa_len = usize::from(*sockaddrs.first()?);
        if bit == RTAX_IFP {
            let sa = sockaddrs.get(..sa_len)?;
            if sa.get(1) != Some(&AF_LINK) {
                return None;
            }
            let nlen = usize::from(*sa.get(5)?);
            let name = sa.get(SDL_DATA..SDL_DATA + nlen)?;
            if name.is_empty() {
                return None;
            }
            return std::str::from_utf8(name).ok().map(str::to_string);
        }
        // XNU's ROUNDUP32: a multiple of 4, and 4 for an empty sockaddr.
        let step = if sa_len == 0 {
            4
        } else {
            sa_len.div_ceil(4) * 4
        };
        sockaddrs = sockaddrs.get(step..)?;
    }
    None
}

fn u32_at(buf: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(off..off + 4)?.try_into().ok()?))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An `RTM_IFINFO2` message laid out as in the module doc: header, then the sockaddrs
    /// `extra_before` (RTA bits below IFP, each a raw sockaddr) and the interface's
    /// sockaddr_dl with `name` and a 6-byte Ethernet address.
    pub(crate) fn ifinfo2(name: &str, index: u16, flags: u32, baudrate: u64) -> Vec<u8> {
        ifinfo2_with(name, index, flags, baudrate, &[])
    }

    fn ifinfo2_with(
        name: &str,
        index: u16,
        flags: u32,
        baudrate: u64,
        extra_before: &[(u32, Vec<u8>)],
    ) -> Vec<u8> {
        let mut msg = vec![0u8; IF_MSGHDR2_LEN];
        msg[2] = RTM_VERSION;
        msg[3] = RTM_IFINFO2;
        let mut addrs = 1u32 << RTAX_IFP;
        for (bit, _) in extra_before {
            addrs |= 1 << bit;
        }
        msg[OFF_ADDRS..OFF_ADDRS + 4].copy_from_slice(&addrs.to_le_bytes());
        msg[OFF_FLAGS..OFF_FLAGS + 4].copy_from_slice(&flags.to_le_bytes());
        msg[OFF_INDEX..OFF_INDEX + 2].copy_from_slice(&index.to_le_bytes());
        // ifi_type (IFT_ETHER) and ifi_mtu, to show neighbours do not leak into what is read.
        msg[32] = 0x06;
        msg[40..44].copy_from_slice(&1500u32.to_le_bytes());
        msg[OFF_BAUDRATE..OFF_BAUDRATE + 8].copy_from_slice(&baudrate.to_le_bytes());
        // ifi_ipackets right after the baudrate.
        msg[56..64].copy_from_slice(&u64::MAX.to_le_bytes());
        for (_, sa) in extra_before {
            msg.extend_from_slice(sa);
            while msg.len() % 4 != 0 {
                msg.push(0);
            }
        }
        let mut dl = vec![0u8; SDL_DATA];
        dl[1] = AF_LINK;
        dl[2..4].copy_from_slice(&index.to_le_bytes());
        dl[4] = 0x06;
        dl[5] = u8::try_from(name.len()).unwrap();
        dl[6] = 6;
        dl.extend_from_slice(name.as_bytes());
        dl.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        dl[0] = u8::try_from(dl.len()).unwrap();
        msg.extend_from_slice(&dl);
        while msg.len() % 4 != 0 {
            msg.push(0);
        }
        let len = u16::try_from(msg.len()).unwrap();
        msg[0..2].copy_from_slice(&len.to_le_bytes());
        msg
    }

    /// An `RTM_NEWADDR` message (`struct ifa_msghdr`, 20 bytes, + one sockaddr_in): present
    /// in the real buffer after each interface, and to be skipped.
    fn newaddr() -> Vec<u8> {
        let mut msg = vec![0u8; 20];
        msg[2] = RTM_VERSION;
        msg[3] = 0x0c; // RTM_NEWADDR
        msg[4..8].copy_from_slice(&0x04u32.to_le_bytes()); // RTA_NETMASK
        msg.extend_from_slice(&[16, 2, 0, 0, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let len = u16::try_from(msg.len()).unwrap();
        msg[0..2].copy_from_slice(&len.to_le_bytes());
        msg
    }

    fn iface(name: &str, index: u16, flags: u32, baudrate: u64) -> RouteInterface {
        RouteInterface {
            name: name.into(),
            index,
            flags,
            baudrate,
        }
    }

    #[test]
    fn interfaces_with_their_speed_and_flags_and_addresses_skipped() {
        let mut buf = ifinfo2("lo0", 1, 0x8049, 0);
        buf.extend(newaddr());
        buf.extend(ifinfo2("en0", 4, 0x8863, 10_000_000_000));
        buf.extend(newaddr());
        buf.extend(newaddr());
        buf.extend(ifinfo2("en1", 5, 0x8822, 1_000_000_000));
        let got = parse_iflist2(&buf);
        assert_eq!(
            got,
            vec![
                iface("lo0", 1, 0x8049, 0),
                iface("en0", 4, 0x8863, 10_000_000_000),
                iface("en1", 5, 0x8822, 1_000_000_000),
            ]
        );
        assert_eq!(got[0].link_speed(), None);
        assert_eq!(got[1].link_speed(), Some(10_000_000_000));
        assert!(got[0].is_up() && got[1].is_up());
        // 0x8822: IFF_BROADCAST | IFF_SIMPLEX | IFF_MULTICAST | IFF_SMART, not up nor running.
        assert!(!got[2].is_up());
        assert!(!iface("en2", 6, IFF_UP, 0).is_up());
        assert!(!iface("en2", 6, IFF_RUNNING, 0).is_up());
    }

    #[test]
    fn sockaddrs_before_the_interface_are_stepped_over_by_their_rounded_length() {
        // A 6-byte sockaddr (padded to 8) at RTAX_DST and an empty one (taking 4) at
        // RTAX_NETMASK before the sockaddr_dl.
        let buf = ifinfo2_with(
            "bridge0",
            9,
            0x8863,
            2_500_000_000,
            &[(0, vec![6, 2, 0, 0, 10, 0]), (2, vec![0])],
        );
        assert_eq!(
            parse_iflist2(&buf),
            vec![iface("bridge0", 9, 0x8863, 2_500_000_000)]
        );
    }

    #[test]
    fn truncated_or_garbled_buffers_keep_what_came_before() {
        let good = ifinfo2("en0", 4, 0x8863, 1_000_000_000);
        let expected = vec![iface("en0", 4, 0x8863, 1_000_000_000)];

        // A second message cut short: its length runs past the buffer.
        let mut buf = good.clone();
        let second = ifinfo2("en1", 5, 0x8863, 1_000_000_000);
        buf.extend_from_slice(&second[..second.len() - 1]);
        assert_eq!(parse_iflist2(&buf), expected);

        // A length below the 4 bytes every message has ends the walk instead of looping.
        let mut buf = good.clone();
        buf.extend_from_slice(&[2, 0, RTM_VERSION, RTM_IFINFO2, 0, 0]);
        buf.extend(ifinfo2("en1", 5, 0x8863, 1_000_000_000));
        assert_eq!(parse_iflist2(&buf), expected);

        // Trailing bytes too few for a header.
        let mut buf = good.clone();
        buf.extend_from_slice(&[0, 0, 0]);
        assert_eq!(parse_iflist2(&buf), expected);

        assert_eq!(parse_iflist2(&[]), vec![]);
    }

    #[test]
    fn an_ifinfo2_shorter_than_its_header_or_without_a_name_is_left_out() {
        // Header only, no sockaddr_dl although RTA_IFP is set.
        let mut short = ifinfo2("en0", 4, 0x8863, 1);
        short.truncate(IF_MSGHDR2_LEN);
        short[0..2].copy_from_slice(&(IF_MSGHDR2_LEN as u16).to_le_bytes());
        // Shorter than if_msghdr2.
        let mut tiny = vec![0u8; 64];
        tiny[0] = 64;
        tiny[2] = RTM_VERSION;
        tiny[3] = RTM_IFINFO2;
        // A sockaddr at RTA_IFP that is not AF_LINK.
        let mut not_link = ifinfo2("en5", 8, 0x8863, 1);
        not_link[IF_MSGHDR2_LEN + 1] = 2;
        // Another routing-socket version: skipped whole.
        let mut other_version = ifinfo2("en6", 10, 0x8863, 1);
        other_version[2] = RTM_VERSION + 1;

        let mut buf = short;
        buf.extend(tiny);
        buf.extend(not_link);
        buf.extend(other_version);
        buf.extend(ifinfo2("en7", 11, 0x8863, 5_000_000_000));
        assert_eq!(
            parse_iflist2(&buf),
            vec![iface("en7", 11, 0x8863, 5_000_000_000)]
        );
    }

    #[test]
    fn a_name_longer_than_its_sockaddr_is_left_out() {
        let mut msg = ifinfo2("en0", 4, 0x8863, 1);
        // sdl_nlen claims more than sdl_len holds.
        msg[IF_MSGHDR2_LEN + 5] = 40;
        assert_eq!(parse_iflist2(&msg), vec![]);
    }
}
