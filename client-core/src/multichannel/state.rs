//! What a session knows of multichannel: its channels, the interfaces on both sides, the
//! plan, and the counters `smbctl channels` shows. The manager task (`manager`) keeps it
//! up to date; the request path and the public API only read it.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};
// The manager's schedule runs on tokio's clock, so its tests can pause and advance it.
use tokio::time::Instant;

use crate::addressing::TreeContext;
use crate::channel::Channel;
use crate::config::ClientConfig;
use crate::failover::stats::FailoverState;
use crate::multichannel::channel_set::ChannelSet;
use crate::multichannel::eligibility::Ineligible;
use crate::multichannel::inventory::LocalInterface;
use crate::multichannel::planner::{Plan, ServerInterface, SlotKey};
use crate::multichannel::report::{
    ChannelInfo, ChannelState, LocalNic, MultichannelStatus, PairStatus, ServerNic,
};

/// Counters of one (local, server) address pair.
#[derive(Clone, Debug, Default)]
pub(crate) struct PairCounters {
    pub(crate) binds_tried: u64,
    pub(crate) binds_ok: u64,
    pub(crate) binds_refused: u64,
    pub(crate) binds_failed: u64,
    pub(crate) channel_failures: u64,
    pub(crate) last_error: Option<String>,
}

/// When a failed slot may be tried again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retry {
    pub(crate) failures: u32,
    pub(crate) at: Instant,
    /// When the slot's channel was lost, if it had one: a successful bind is a reconnect.
    pub(crate) lost_at: Option<Instant>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) server: Vec<ServerInterface>,
    pub(crate) local: Vec<LocalInterface>,
    pub(crate) plan: Option<Plan>,
    pub(crate) pairs: BTreeMap<(IpAddr, IpAddr), PairCounters>,
    pub(crate) queries: u64,
    pub(crate) last_query: Option<Instant>,
    pub(crate) query_error: Option<String>,
    pub(crate) retry: HashMap<SlotKey, Retry>,
    /// A channel was lost: ask the server for its interfaces again now.
    pub(crate) requery: bool,
    /// The IPC$ tree the interface queries go to.
    pub(crate) ipc: Option<TreeContext>,
    /// An interface query is under way (it runs as its own task).
    pub(crate) querying: bool,
}

/// A session's channels and the state of multichannel for it.
#[derive(Debug)]
pub(crate) struct Multichannel {
    pub(crate) channels: ChannelSet,
    /// ChannelSequence and failover counters.
    pub(crate) failover: FailoverState,
    pub(crate) eligibility: std::result::Result<(), Ineligible>,
    pub(crate) state: Mutex<State>,
    /// Wakes the manager task (channel lost, refresh asked, session dropped).
    pub(crate) wake: Arc<Notify>,
    pub(crate) settled: watch::Sender<bool>,
}

impl Multichannel {
    pub(crate) fn new(
        primary: Channel,
        config: &ClientConfig,
        eligibility: std::result::Result<(), Ineligible>,
    ) -> Multichannel {
        let settled = watch::Sender::new(eligibility.is_err());
        Multichannel {
            channels: ChannelSet::new(primary, config.dispatch),
            failover: FailoverState::default(),
            eligibility,
            state: Mutex::new(State::default()),
            wake: Arc::new(Notify::new()),
            settled,
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ask the manager to query the server's interfaces and re-plan now.
    pub(crate) fn refresh(&self) {
        self.lock().requery = true;
        self.wake.notify_one();
    }

    /// The addresses the server last said it listens on.
    pub(crate) fn server_addresses(&self) -> Vec<IpAddr> {
        self.lock().server.iter().map(|s| s.address).collect()
    }

    /// A session without the manager (multichannel off) has nobody to prune its dead
    /// channels: once the session is re-established, count them lost and drop them here.
    pub(crate) fn drop_dead_if_unmanaged(&self) {
        if self.eligibility.is_ok() {
            return;
        }
        for m in self
            .channels
            .active()
            .iter()
            .filter(|m| m.channel.is_dead())
        {
            self.channels.remove(m.id, false);
            if !m.is_suspected() {
                self.failover.count_loss(false);
            }
        }
    }

    /// The session was re-established on a new channel: bind the other slots now rather
    /// than after the backoff their failed binds (to the old session) earned, and ask the
    /// server for its interfaces again.
    pub(crate) fn after_reestablish(&self) {
        let now = Instant::now();
        let mut st = self.lock();
        for r in st.retry.values_mut() {
            r.at = now;
            r.failures = 0;
        }
        st.requery = true;
        drop(st);
        self.rebinding_begins();
        self.wake.notify_one();
    }

    /// Until the next binding round is done, callers waiting for a channel hold back (see
    /// `rebinding`). Called before the re-established session's channel joins the set too:
    /// the waiters that channel wakes must already see the binding round under way, or they
    /// would all go to it.
    pub(crate) fn rebinding_begins(&self) {
        if self.eligibility.is_ok() {
            self.settled.send_replace(false);
        }
    }

    /// The session came back on one channel and the manager is binding the others: requests
    /// that waited through the loss should wait a moment more and spread over all of them,
    /// rather than all queue on the first.
    pub(crate) fn rebinding(&self) -> bool {
        !*self.settled.borrow()
    }

    /// The manager finished a round of binding: requests held back for it may go.
    pub(crate) fn binding_round_done(&self) {
        self.settled.send_replace(true);
    }

    /// Follows [`Multichannel::rebinding`]: changes when a binding round starts or ends.
    pub(crate) fn settled_changes(&self) -> watch::Receiver<bool> {
        self.settled.subscribe()
    }

    /// Stop the manager (the session is going away).
    pub(crate) fn shutdown(&self) {
        self.wake.notify_one();
    }

    /// Wait until the first round of binding has finished (or `timeout`).
    pub(crate) async fn wait_settled(&self, timeout: Duration) -> bool {
        let mut rx = self.settled.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|s| *s))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Every channel, active, draining or failed.
    pub(crate) fn channel_infos(&self) -> Vec<ChannelInfo> {
        let mut out: Vec<ChannelInfo> = self
            .channels
            .active()
            .iter()
            .map(|m| m.info(None))
            .collect();
        out.extend(
            self.channels
                .draining()
                .iter()
                .map(|m| m.info(Some(ChannelState::Draining))),
        );
        out.extend(self.channels.retired());
        out
    }

    pub(crate) fn status(&self) -> MultichannelStatus {
        let members = self.channels.active();
        let st = self.lock();
        let mut status = MultichannelStatus {
            off_reason: self.eligibility.as_ref().err().map(|e| e.to_string()),
            dispatch: self.channels.policy(),
            server_interfaces: st.server.iter().map(server_nic).collect(),
            local_interfaces: st.local.iter().map(local_nic).collect(),
            pairs: Vec::new(),
            notes: st
                .plan
                .as_ref()
                .map(|p| p.notes.clone())
                .unwrap_or_default(),
            interface_queries: st.queries,
            since_last_query: st.last_query.map(|t| t.elapsed()),
            query_error: st.query_error.clone(),
            settled: *self.settled.borrow(),
            failover: self.failover.snapshot(),
        };
        let mut pairs: BTreeMap<(IpAddr, IpAddr), PairStatus> = BTreeMap::new();
        if let Some(plan) = &st.plan {
            for p in &plan.pairs {
                let slot = plan
                    .slots
                    .iter()
                    .find(|s| s.key.local == p.local && s.key.server == p.server);
                pairs.insert(
                    (p.local, p.server),
                    PairStatus {
                        local: Some(p.local),
                        local_interface: p.local_name.clone(),
                        server: Some(p.server),
                        server_if_index: p.server_if_index,
                        rss: slot.is_some_and(|s| s.rss),
                        link_speed: slot.and_then(|s| s.link_speed),
                        max_channels: p.max_channels,
                        planned: p.planned,
                        ..PairStatus::default()
                    },
                );
            }
        }
        for m in members.iter().filter(|m| !m.channel.is_dead()) {
            let key = (m.channel.local().ip(), m.channel.peer().ip());
            let path = m.path();
            let entry = pairs.entry(key).or_insert_with(|| PairStatus {
                local: Some(key.0),
                local_interface: path.local_name.clone(),
                server: Some(key.1),
                server_if_index: path.server_if_index,
                rss: path.rss,
                link_speed: path.link_speed,
                ..PairStatus::default()
            });
            entry.current += 1;
        }
        for (key, c) in &st.pairs {
            if let Some(p) = pairs.get_mut(key) {
                p.binds_tried = c.binds_tried;
                p.binds_ok = c.binds_ok;
                p.binds_refused = c.binds_refused;
                p.binds_failed = c.binds_failed;
                p.channel_failures = c.channel_failures;
                p.last_error = c.last_error.clone();
            }
        }
        status.pairs = pairs.into_values().collect();
        status
    }
}

fn server_nic(s: &ServerInterface) -> ServerNic {
    ServerNic {
        if_index: s.if_index,
        address: s.address,
        rss: s.rss,
        rdma: s.rdma,
        link_speed: s.link_speed,
    }
}

fn local_nic(l: &LocalInterface) -> LocalNic {
    LocalNic {
        name: l.name.clone(),
        if_index: l.if_index,
        address: l.address,
        rx_queues: l.rx_queues,
        rss: l.rss_capable(),
        link_speed: l.link_speed,
    }
}
