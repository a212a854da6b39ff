//! The pure state behind multichannel, reachable from the criterion benches in `benches/`
//! (docs/PERFORMANCE.md, "Micro-benchmarks"): the channel planner and the credit window.
//!
//! Like `crate::fuzzing`, this is not part of the API: hidden, free to change with the
//! benches, built only with the `microbench` feature, and nothing in the client uses it. It holds no logic of its own: each item is a
//! thin handle on the crate-private type that the client runs, so a bench measures exactly
//! the code on the hot path, while that code stays `pub(crate)` and free to change shape.

use std::net::IpAddr;

use smb3_proto::msg::ioctl::NetworkInterfaceInfo;

use crate::channel::credits;
use crate::multichannel::inventory::LocalInterface;
use crate::multichannel::planner::{self, PlanConfig, ServerInterface, SlotKey};
use crate::ClientConfig;

/// The credit window of one connection (`channel::credits::CreditWindow`): what every request
/// goes through before it is sent and every reply after it arrives.
#[derive(Debug)]
pub struct CreditWindow(credits::CreditWindow);

impl CreditWindow {
    /// A fresh connection that tries to hold `target` credits.
    pub fn new(target: u32) -> Self {
        CreditWindow(credits::CreditWindow::new(target))
    }

    /// Take `charge` credits and MessageIds: `(first MessageId, CreditRequest)`, or `None`
    /// when not enough credits are available.
    pub fn reserve(&mut self, charge: u16) -> Option<(u64, u16)> {
        self.0
            .reserve(charge)
            .map(|r| (r.message_id, r.credit_request))
    }

    /// A reply to a request of `charge` granted `granted` credits; false when the server left
    /// the connection with none at all (starved).
    pub fn on_response(&mut self, charge: u16, granted: u16, final_response: bool) -> bool {
        self.0.on_response(charge, granted, final_response).is_ok()
    }

    /// Credits available now.
    pub fn available(&self) -> u32 {
        self.0.available()
    }

    /// Credits of requests still waiting for their final reply.
    pub fn in_flight(&self) -> u32 {
        self.0.in_flight()
    }
}

/// One local address as the interface inventory reports it.
#[derive(Debug, Clone)]
pub struct LocalNic(LocalInterface);

impl LocalNic {
    /// An address `address/prefix_len` on NIC `name` (OS index `if_index`), its link speed
    /// in bits per second, and whether the NIC has RSS.
    pub fn new(
        name: &str,
        if_index: u32,
        address: IpAddr,
        prefix_len: u8,
        link_speed: Option<u64>,
        rss: bool,
    ) -> Self {
        LocalNic(LocalInterface {
            name: name.to_string(),
            if_index,
            address,
            prefix_len,
            link_speed,
            rx_queues: if rss { 4 } else { 1 },
            rss: Some(rss),
            rdma: false,
            loopback: address.is_loopback(),
        })
    }
}

/// What the channel manager plans from: the server's interface list (as decoded from
/// FSCTL_QUERY_NETWORK_INTERFACE_INFO), the local inventory and the configuration.
#[derive(Debug, Clone)]
pub struct PlannerInput {
    server: Vec<ServerInterface>,
    local: Vec<LocalInterface>,
    config: PlanConfig,
}

impl PlannerInput {
    /// Clean the server's list the way the manager does (`ServerInterface::from_wire`).
    pub fn new(server: &[NetworkInterfaceInfo], local: &[LocalNic], config: &ClientConfig) -> Self {
        PlannerInput {
            server: server.iter().map(ServerInterface::from_wire).collect(),
            local: local.iter().map(|l| l.0.clone()).collect(),
            config: PlanConfig::from(config),
        }
    }

    /// `multichannel::planner::plan`: the wanted channel slots.
    pub fn plan(&self) -> Plan {
        Plan(planner::plan(&self.server, &self.local, &self.config))
    }
}

/// The planner's answer.
#[derive(Debug)]
pub struct Plan(planner::Plan);

impl Plan {
    /// Channel slots wanted.
    pub fn slots(&self) -> usize {
        self.0.slots.len()
    }

    /// `multichannel::planner::diff` from the slots of `current` to this plan: (slots to
    /// open, channels to close), as counts.
    pub fn diff_from(&self, current: &Plan) -> (usize, usize) {
        let current: Vec<SlotKey> = current.0.slots.iter().map(|s| s.key).collect();
        let (add, remove) = planner::diff(&current, &self.0);
        (add.len(), remove.len())
    }
}
