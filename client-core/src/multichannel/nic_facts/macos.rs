//! macOS: fetch the routing sysctl's interface list (`NET_RT_IFLIST2`) and parse it.
//!
//! `getifaddrs` has the same `if_data` behind each AF_LINK entry's `ifa_data`, but reaching it
//! means dereferencing a raw pointer, and this crate forbids unsafe code. The routing sysctl
//! hands the same records over as bytes instead; the `sysctl` crate makes the call (its unsafe
//! code is its own) and returns them, and `route_iflist` reads them with safe code.
//!
//! Not verified on a real Mac from this project's CI (it builds on Linux only): when the call
//! fails or returns nothing readable, every NIC's speed and state are simply unknown, as on a
//! platform without a source of its own, and `nic_overrides` in the config still apply.

use sysctl::{Ctl, CtlValue, Sysctl};

use super::route_iflist::{parse_iflist2, RouteInterface};

/// `CTL_NET`, `PF_ROUTE`, protocol 0, every address family (0), `NET_RT_IFLIST2`, every
/// interface (0): `<sys/sysctl.h>`, `<sys/socket.h>`.
const IFLIST2_OID: [i32; 6] = [4, 17, 0, 0, 6, 0];

/// Attempts at the call: the list can grow between the crate's size query and its read
/// (an interface appearing), which fails the read with ENOMEM.
const ATTEMPTS: usize = 3;

/// Every interface the kernel lists, empty when the call fails.
pub(super) fn interfaces() -> Vec<RouteInterface> {
    for _ in 0..ATTEMPTS {
        match Ctl::Oid(IFLIST2_OID.to_vec()).value() {
            Ok(CtlValue::Node(bytes) | CtlValue::Struct(bytes)) => return parse_iflist2(&bytes),
            Ok(other) => {
                tracing::debug!(?other, "NET_RT_IFLIST2 sysctl returned no bytes");
                return Vec::new();
            }
            Err(e) => tracing::debug!(error = %e, "NET_RT_IFLIST2 sysctl failed"),
        }
    }
    Vec::new()
}
