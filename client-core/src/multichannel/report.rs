//! What an embedder (and `smbctl channels`) can see of a session's channels, in the spirit of
//! Windows' `Get-SmbMultichannelConnection`: per channel and per interface pair.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::config::{Dispatch, Transport};

/// Where a channel stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChannelState {
    /// Carrying requests.
    Active,
    /// Out of dispatch (its interface pair is no longer planned); finishing what it carries.
    Draining,
    /// Out of dispatch: it made no progress while others did, or its link went down. Its
    /// requests were replayed elsewhere; an ECHO probe decides whether it comes back.
    Suspected,
    /// The connection failed; see `failure`.
    Failed,
    /// Drained and closed by the client; the counters are final.
    Closed,
}

impl std::fmt::Display for ChannelState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChannelState::Active => "active",
            ChannelState::Draining => "draining",
            ChannelState::Suspected => "suspected",
            ChannelState::Failed => "failed",
            ChannelState::Closed => "closed",
        })
    }
}

/// One channel (TCP connection) of a session and what went over it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelInfo {
    /// What carries it: TCP, or QUIC (TLS 1.3 to a server whose certificate was verified).
    pub transport: Transport,
    /// The server accepted QUIC's TLS in place of sealing on this channel (MS-SMB2
    /// 2.2.4.1.5): nothing on it is sealed, every message is signed instead.
    pub sealing_left_to_tls: bool,
    /// Local address and port.
    pub local: SocketAddr,
    /// Server address and port.
    pub server: SocketAddr,
    /// Local interface name (empty when the channel was not opened for a planned pair).
    pub local_interface: String,
    /// Local interface index (0 when unknown).
    pub local_if_index: u32,
    /// The server's IfIndex for `server` (0 when unknown).
    pub server_if_index: u32,
    /// Both ends of the pair are RSS-capable.
    pub rss: bool,
    /// Both ends of the pair are RDMA-capable.
    pub rdma: bool,
    /// The pair's link speed in bits per second, when known.
    pub link_speed: Option<u64>,
    /// The connection the session was set up on.
    pub primary: bool,
    /// Active, draining or failed.
    pub state: ChannelState,
    /// Requests sent.
    pub requests: u64,
    /// Bytes sent (SMB2 messages, transport headers excluded).
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Credits held.
    pub credits: u32,
    /// Requests sent whose final reply has not arrived yet (including requests whose caller
    /// gave up: their late replies still come back and return their credits).
    pub outstanding: usize,
    /// SMB2 CANCELs sent for requests whose caller dropped the future (or timed out) while
    /// the server was still working on them.
    pub cancels_sent: u64,
    /// Why the channel is down, if it is.
    pub failure: Option<String>,
}

/// One network interface as the server advertised it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerNic {
    /// The server's interface number (several addresses may share one).
    pub if_index: u32,
    /// The address.
    pub address: IpAddr,
    /// RSS-capable.
    pub rss: bool,
    /// RDMA-capable.
    pub rdma: bool,
    /// Link speed in bits per second; `None` when the server sent 0 or its "unknown" value.
    pub link_speed: Option<u64>,
}

/// One local network interface address the planner considered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalNic {
    /// Interface name.
    pub name: String,
    /// Interface index.
    pub if_index: u32,
    /// The address.
    pub address: IpAddr,
    /// Receive queues the OS reports.
    pub rx_queues: u32,
    /// RSS-capable as the planner counts it: more than one receive queue, overridden, or
    /// assumed for a NIC of 10 Gb/s or more whose OS does not count queues (macOS).
    pub rss: bool,
    /// Link speed in bits per second, when known.
    pub link_speed: Option<u64>,
}

/// One (local address → server address) pair: what the plan wants and what exists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PairStatus {
    /// Local address.
    pub local: Option<IpAddr>,
    /// Local interface name.
    pub local_interface: String,
    /// Server address.
    pub server: Option<IpAddr>,
    /// The server's IfIndex.
    pub server_if_index: u32,
    /// Both ends RSS-capable.
    pub rss: bool,
    /// Link speed of the pair in bits per second, when known.
    pub link_speed: Option<u64>,
    /// Channels the pair is worth on its own (`channels_per_rss_nic` or `channels_per_nic`).
    pub max_channels: usize,
    /// Channels planned after `max_channels` was shared out.
    pub planned: usize,
    /// Channels active now.
    pub current: usize,
    /// Binding attempts so far.
    pub binds_tried: u64,
    /// Bindings that succeeded.
    pub binds_ok: u64,
    /// Bindings the server refused (or that reached another server).
    pub binds_refused: u64,
    /// Bindings that failed on the path (connect errors, timeouts).
    pub binds_failed: u64,
    /// Channels of this pair that failed after binding.
    pub channel_failures: u64,
    /// The last binding or channel error, in words.
    pub last_error: Option<String>,
}

/// The session's multichannel state: eligibility, both interface lists, and each pair.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MultichannelStatus {
    /// Why the session stays on one channel; `None` when multichannel is on.
    pub off_reason: Option<String>,
    /// How requests are spread.
    pub dispatch: Dispatch,
    /// The server's interfaces from the last successful query.
    pub server_interfaces: Vec<ServerNic>,
    /// Local interfaces considered at the last planning.
    pub local_interfaces: Vec<LocalNic>,
    /// Planned pairs and pairs that still have channels.
    pub pairs: Vec<PairStatus>,
    /// Why interfaces or pairs were left out, in words.
    pub notes: Vec<String>,
    /// FSCTL_QUERY_NETWORK_INTERFACE_INFO requests answered so far.
    pub interface_queries: u64,
    /// Time since the last answered query.
    pub since_last_query: Option<Duration>,
    /// Why the last query failed, if it did.
    pub query_error: Option<String>,
    /// Whether the first round of binding has finished.
    pub settled: bool,
    /// Channel losses, replays and reconnects so far.
    pub failover: crate::failover::FailoverCounters,
}

impl MultichannelStatus {
    /// Channels planned over all pairs.
    pub fn planned(&self) -> usize {
        self.pairs.iter().map(|p| p.planned).sum()
    }

    /// Channels active over all pairs.
    pub fn current(&self) -> usize {
        self.pairs.iter().map(|p| p.current).sum()
    }

    /// Sentences saying why multichannel is off, or why fewer channels exist than planned.
    pub fn explain(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(reason) = &self.off_reason {
            out.push(format!("multichannel is off: {reason}"));
            return out;
        }
        if let Some(e) = &self.query_error {
            out.push(format!("the last interface query failed: {e}"));
        }
        if self.interface_queries == 0 {
            out.push("the server's interfaces have not been queried yet".into());
            return out;
        }
        if self.server_interfaces.is_empty() {
            out.push("the server advertised no usable interface".into());
        }
        if self.pairs.iter().all(|p| p.planned == 0) {
            out.push(
                "no local interface can reach a server interface (same address family and \
                 subnet, or a routed address)"
                    .into(),
            );
        }
        out.extend(self.notes.iter().cloned());
        for p in &self.pairs {
            let pair = format!(
                "{} ({}) -> {}",
                p.local.map_or("?".into(), |a| a.to_string()),
                p.local_interface,
                p.server.map_or("?".into(), |a| a.to_string())
            );
            if p.current < p.planned {
                let why = p
                    .last_error
                    .as_deref()
                    .unwrap_or(if self.settled {
                        "binding not attempted yet"
                    } else {
                        "binding in progress"
                    })
                    .to_string();
                out.push(format!(
                    "{pair}: {} of {} planned channels up ({} binds tried, {} refused, {} failed): {why}",
                    p.current, p.planned, p.binds_tried, p.binds_refused, p.binds_failed
                ));
            } else if p.current > p.planned {
                out.push(format!(
                    "{pair}: {} channels up, {} planned: the rest are being drained",
                    p.current, p.planned
                ));
            }
        }
        let (planned, current) = (self.planned(), self.current());
        if out.is_empty() || planned == current {
            out.push(format!(
                "{current} of {planned} planned channels are up{}",
                if planned == current {
                    ": nothing is missing"
                } else {
                    ""
                }
            ));
        }
        out
    }
}
