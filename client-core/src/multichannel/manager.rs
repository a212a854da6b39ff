//! The background task that keeps a session's channels matching the plan (DESIGN §3 steps
//! 2-5 and 8): it asks the server for its interfaces after setup, every `interface_poll` and
//! soon after a channel is lost; plans; binds missing slots in the background (each with a
//! timeout, so an unreachable advertised address never stalls the session); drains channels
//! whose pair left the plan; and keeps the counters `smbctl channels` shows.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use rand::Rng;
use smb3_proto::msg::ioctl::{
    parse_network_interfaces, IoctlRequest, IoctlResponse, FSCTL_QUERY_NETWORK_INTERFACE_INFO,
};
use smb3_proto::msg::tree_connect::TreeConnectRequest;
use smb3_proto::msg::{FileId, RequestBody};
use smb3_proto::Command;
use tokio::sync::{watch, Notify, Semaphore};

use crate::addressing::Target;
use crate::addressing::TreeContext;
use crate::channel::{Channel, Response};
use crate::client::SessionCore;
use crate::config::ClientConfig;
use crate::error::decode;
use crate::error::Result;
use crate::failover::replay;
use crate::failover::stats::FailoverState;
use crate::multichannel::binding::{bind_channel, BindFailure};
use crate::multichannel::channel_set::{ChannelSet, Member, PathInfo};
use crate::multichannel::eligibility::Ineligible;
use crate::multichannel::inventory::{self, LocalInterface};
use crate::multichannel::planner::{self, Plan, PlanConfig, ServerInterface, Slot, SlotKey};
use crate::multichannel::status::{
    ChannelInfo, ChannelState, LocalNic, MultichannelStatus, PairStatus, ServerNic,
};

/// Largest interface list accepted (about 430 entries of 152 bytes).
const MAX_INTERFACE_LIST: u32 = 64 * 1024;
/// After a channel is lost, ask for the interfaces again this soon.
const REQUERY_AFTER_LOSS: Duration = Duration::from_millis(100);
/// First and last delay between attempts to bind a slot that failed.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// TCP connects of new channels under way at once.
const MAX_CONNECTING: usize = 64;

/// Counters of one (local, server) address pair.
#[derive(Clone, Debug, Default)]
struct PairCounters {
    binds_tried: u64,
    binds_ok: u64,
    binds_refused: u64,
    binds_failed: u64,
    channel_failures: u64,
    last_error: Option<String>,
}

/// When a failed slot may be tried again.
#[derive(Clone, Copy, Debug)]
struct Retry {
    failures: u32,
    at: Instant,
    /// When the slot's channel was lost, if it had one: a successful bind is a reconnect.
    lost_at: Option<Instant>,
}

/// How often a slot whose local link is down looks at the link again.
const LINK_WAIT: Duration = Duration::from_millis(250);

#[derive(Debug, Default)]
struct State {
    server: Vec<ServerInterface>,
    local: Vec<LocalInterface>,
    plan: Option<Plan>,
    pairs: BTreeMap<(IpAddr, IpAddr), PairCounters>,
    queries: u64,
    last_query: Option<Instant>,
    query_error: Option<String>,
    retry: HashMap<SlotKey, Retry>,
    /// A channel was lost: ask the server for its interfaces again now.
    requery: bool,
    /// The IPC$ tree the interface queries go to.
    ipc: Option<TreeContext>,
    /// An interface query is under way (it runs as its own task).
    querying: bool,
}

/// A session's channels and the state of multichannel for it.
#[derive(Debug)]
pub(crate) struct Multichannel {
    pub(crate) set: ChannelSet,
    /// ChannelSequence and failover counters.
    pub(crate) failover: FailoverState,
    eligibility: std::result::Result<(), Ineligible>,
    state: Mutex<State>,
    /// Wakes the manager task (channel lost, refresh asked, session dropped).
    wake: Arc<Notify>,
    settled: watch::Sender<bool>,
}

impl Multichannel {
    pub(crate) fn new(
        primary: Channel,
        config: &ClientConfig,
        eligibility: std::result::Result<(), Ineligible>,
    ) -> Multichannel {
        let settled = watch::Sender::new(eligibility.is_err());
        Multichannel {
            set: ChannelSet::new(primary, config.dispatch),
            failover: FailoverState::default(),
            eligibility,
            state: Mutex::new(State::default()),
            wake: Arc::new(Notify::new()),
            settled,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
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
        for m in self.set.active().iter().filter(|m| m.channel.is_dead()) {
            self.set.remove(m.id, false);
            if !m.suspected.load(std::sync::atomic::Ordering::Acquire) {
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
        // Until the next binding round is done, callers waiting for a channel hold back (see
        // `rebinding`).
        if self.eligibility.is_ok() {
            self.settled.send_replace(false);
        }
        self.wake.notify_one();
    }

    /// The session came back on one channel and the manager is binding the others: requests
    /// that waited through the loss should wait a moment more and spread over all of them,
    /// rather than all queue on the first.
    pub(crate) fn rebinding(&self) -> bool {
        !*self.settled.borrow()
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
        let mut out: Vec<ChannelInfo> = self.set.active().iter().map(|m| m.info(None)).collect();
        out.extend(
            self.set
                .draining()
                .iter()
                .map(|m| m.info(Some(ChannelState::Draining))),
        );
        out.extend(self.set.retired());
        out
    }

    pub(crate) fn status(&self) -> MultichannelStatus {
        let members = self.set.active();
        let st = self.lock();
        let mut status = MultichannelStatus {
            off_reason: self.eligibility.as_ref().err().map(|e| e.to_string()),
            dispatch: self.set.policy(),
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
        rss: l.rss,
        link_speed: l.link_speed,
    }
}

/// Start the manager for a session that may have several channels. It holds only a weak
/// reference, so it ends when the session is dropped.
pub(crate) fn start(core: &Arc<SessionCore>) {
    watch_for_death(&core.mc, &core.mc.set.active()[0]);
    crate::failover::watchdog::start(core);
    crate::failover::reconnect::start(core);
    if core.mc.eligibility.is_err() {
        return;
    }
    let weak = Arc::downgrade(core);
    let wake = core.mc.wake.clone();
    tokio::spawn(run(weak, wake));
}

/// Wake the manager when `member`'s connection dies, without keeping it open.
pub(crate) fn watch_for_death(mc: &Multichannel, member: &Member) {
    let death = member.channel.death_watch();
    let wake = mc.wake.clone();
    tokio::spawn(async move {
        death.wait().await;
        wake.notify_one();
    });
}

async fn run(weak: Weak<SessionCore>, wake: Arc<Notify>) {
    loop {
        let Some(core) = weak.upgrade() else { return };
        if core.logged_off() {
            return;
        }
        let query_now = {
            let mut st = core.mc.lock();
            let due = !st.querying
                && (st.requery
                    || st
                        .last_query
                        .is_none_or(|t| t.elapsed() >= core.config.interface_poll));
            if due {
                st.querying = true;
                st.requery = false;
            }
            due
        };
        if query_now {
            // The query runs beside binding: its reply can queue behind bulk I/O for a
            // second or more, and lost slots must not wait for it.
            let (core, wake) = (core.clone(), wake.clone());
            tokio::spawn(async move {
                discover_and_plan(&core).await;
                core.mc.lock().querying = false;
                drop(core);
                wake.notify_one();
            });
        }
        let (planned, first_round_done) = {
            let st = core.mc.lock();
            (st.plan.is_some(), !st.querying && st.last_query.is_some())
        };
        if planned {
            reconcile(&core).await;
        }
        if first_round_done {
            core.mc.settled.send_replace(true);
        }
        let sleep_for = next_wakeup(&core);
        drop(core);
        tokio::select! {
            _ = tokio::time::sleep(sleep_for) => {}
            _ = wake.notified() => {}
        }
    }
}

/// Time until something is due: the next poll, a slot's retry, or a requested re-query.
fn next_wakeup(core: &SessionCore) -> Duration {
    let st = core.mc.lock();
    if st.requery {
        return REQUERY_AFTER_LOSS;
    }
    let now = Instant::now();
    // While a query runs, its task wakes the manager when done.
    let poll = if st.querying {
        core.config.interface_poll
    } else {
        st.last_query
            .map_or(Duration::ZERO, |t| {
                (t + core.config.interface_poll).saturating_duration_since(now)
            })
            .max(Duration::from_millis(10))
    };
    let retry = st
        .retry
        .values()
        .map(|r| r.at.saturating_duration_since(now))
        .min()
        .unwrap_or(poll);
    poll.min(retry)
}

/// Query the server's interfaces and the local ones, and plan.
async fn discover_and_plan(core: &Arc<SessionCore>) {
    let queried = query_interfaces(core).await;
    let server_on_loopback = core.mc.set.active()[0].channel.peer().ip().is_loopback();
    let local = inventory::local_interfaces(&core.config.nic_overrides)
        .map(|all| inventory::usable(all, server_on_loopback));
    let mut st = core.mc.lock();
    match queried {
        Ok(server) => {
            st.queries += 1;
            st.last_query = Some(Instant::now());
            st.query_error = None;
            st.server = server;
        }
        Err(e) => {
            tracing::warn!(error = %e, "interface query failed");
            // Keep the last good list; try again at the next poll.
            st.last_query = Some(Instant::now());
            st.query_error = Some(e.to_string());
            if st.queries == 0 {
                return;
            }
        }
    }
    match local {
        Ok(l) => st.local = l,
        Err(e) => {
            st.query_error = Some(format!("listing local interfaces failed: {e}"));
            return;
        }
    }
    let plan = planner::plan(&st.server, &st.local, &PlanConfig::from(&core.config));
    tracing::debug!(slots = plan.slots.len(), "channel plan");
    // Slots no longer planned need no retries.
    st.retry
        .retain(|k, _| plan.slots.iter().any(|s| s.key == *k));
    st.plan = Some(plan);
}

/// FSCTL_QUERY_NETWORK_INTERFACE_INFO on the session's IPC$ tree (MS-SMB2 3.2.4.20.10).
async fn query_interfaces(core: &Arc<SessionCore>) -> Result<Vec<ServerInterface>> {
    let tree = ipc_tree(core).await?;
    let req = IoctlRequest::fsctl(
        FSCTL_QUERY_NETWORK_INTERFACE_INFO,
        FileId::ANY,
        Bytes::new(),
        MAX_INTERFACE_LIST,
    );
    let resp = match call_without_waiting(core, &req, Some(tree)).await {
        Ok(r) => r,
        Err(e) => {
            // The tree may have been lost with a channel: connect it again next time.
            core.mc.lock().ipc = None;
            return Err(e);
        }
    };
    let out = decode(Command::IOCTL, IoctlResponse::decode(&resp.msg))?;
    let list = decode(Command::IOCTL, parse_network_interfaces(&out.output))?;
    Ok(list.iter().map(ServerInterface::from_wire).collect())
}

async fn ipc_tree(core: &Arc<SessionCore>) -> Result<TreeContext> {
    if let Some(t) = core.mc.lock().ipc {
        return Ok(t);
    }
    let body = TreeConnectRequest::new(&core.server_name, "IPC$");
    let resp = call_without_waiting(core, &body, None).await?;
    let tree = core
        .addressing
        .trees
        .add("IPC$", resp.header.tree_id, false);
    core.mc.lock().ipc = Some(tree);
    Ok(tree)
}

/// A request of the manager's own. It is replayed on a surviving channel like any other, but
/// never waits for a channel to come back: bringing channels back is the manager's job, so
/// waiting would stall the very thing it waits for.
async fn call_without_waiting<B: RequestBody>(
    core: &SessionCore,
    body: &B,
    tree: Option<TreeContext>,
) -> Result<Response> {
    let mut session = replay::Session::of(core);
    session.channels_return = false;
    session.internal = true;
    replay::call(
        &session,
        core.request(body, tree),
        &Target::tree(tree),
        B::COMMAND,
        body.replay(),
    )
    .await?
    .check(&[])
}

/// Make the channels match the plan: prune dead ones, claim the first channel's slot, drain
/// channels whose slot left the plan, bind the missing slots.
async fn reconcile(core: &Arc<SessionCore>) {
    let mc = &core.mc;
    mc.set.draining(); // retires channels whose last request has been answered
    prune_dead(mc);
    if !mc.set.any_alive() {
        // Nothing to bind to: the session itself is being re-established (see
        // `failover::reconnect`), which wakes the manager when done.
        return;
    }
    let Some(plan) = mc.lock().plan.clone() else {
        return;
    };
    claim_unslotted(mc, &plan);
    let members = mc.set.active();
    let current: Vec<SlotKey> = members.iter().filter_map(|m| m.slot()).collect();
    let (add, remove) = planner::diff(&current, &plan);
    let remove: HashSet<SlotKey> = remove.into_iter().collect();
    for m in &members {
        if m.slot().is_some_and(|k| remove.contains(&k)) {
            tracing::info!(local = %m.channel.local(), server = %m.channel.peer(), "channel leaves the plan; draining");
            drain(mc, m, core.config.request_timeout);
        }
    }
    let now = Instant::now();
    let due: Vec<Slot> = {
        let mut st = mc.lock();
        let due: Vec<Slot> = add
            .iter()
            .filter(|k| st.retry.get(k).is_none_or(|r| r.at <= now))
            .filter_map(|k| plan.slots.iter().find(|s| s.key == *k).cloned())
            .collect();
        // A slot whose local link has no carrier cannot connect: look again shortly instead
        // of spending an attempt (and a longer backoff), so it binds as soon as the link is
        // back.
        let (linked, unlinked): (Vec<Slot>, Vec<Slot>) = due
            .into_iter()
            .partition(|s| inventory::carrier(&s.local_name) != Some(false));
        for s in unlinked {
            let r = st.retry.entry(s.key).or_insert(Retry {
                failures: 0,
                at: now,
                lost_at: None,
            });
            r.at = now + LINK_WAIT;
        }
        linked
    };
    if !due.is_empty() {
        let port = mc
            .set
            .active()
            .first()
            .map_or(445, |m| m.channel.peer().port());
        // Every slot connects at once (an unreachable address costs one connect timeout, not
        // one per slot); the handshakes then take turns (see `binding::bind_channel`).
        let handshake = Semaphore::new(1);
        let mut binds = futures_util::stream::iter(due)
            .map(|slot| {
                let core = core.clone();
                let handshake = &handshake;
                async move {
                    let result = bind_channel(&core, &slot, port, handshake).await;
                    (slot, result)
                }
            })
            .buffer_unordered(MAX_CONNECTING);
        while let Some((slot, result)) = binds.next().await {
            record_bind(mc, &slot, result);
        }
    }
    retire_unplanned(mc, core.config.request_timeout);
}

/// Take `m` out of dispatch and wake the manager once its last request is answered (or
/// `limit` passed), so it is closed then and not at the next poll.
fn drain(mc: &Multichannel, m: &Member, limit: Duration) {
    let Some(removed) = mc.set.remove(m.id, true) else {
        return;
    };
    let channel = removed.channel.clone();
    drop(removed);
    let wake = mc.wake.clone();
    tokio::spawn(async move {
        let deadline = Instant::now() + limit;
        while channel.outstanding() > 0 && !channel.is_dead() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(channel);
        wake.notify_one();
    });
}

/// Remove channels whose connection died, counting the failure against their pair.
fn prune_dead(mc: &Multichannel) {
    for m in mc.set.active() {
        // Keep the last channel in the set even dead: callers get ConnectionLost from it
        // and status shows why.
        if !m.channel.is_dead() || mc.set.active().len() <= 1 {
            continue;
        }
        let reason = m.channel.dead_reason().unwrap_or_default();
        mc.set.remove(m.id, false);
        // A channel the watchdog closed was counted (as silent) when it gave up on it.
        if !m.suspected.load(std::sync::atomic::Ordering::Acquire) {
            mc.failover.count_loss(false);
        }
        let key = (m.channel.local().ip(), m.channel.peer().ip());
        let mut st = mc.lock();
        let c = st.pairs.entry(key).or_default();
        c.channel_failures += 1;
        c.last_error = Some(format!("channel lost: {reason}"));
        st.requery = true;
        if let Some(slot) = m.slot() {
            schedule_retry(&mut st, slot, false);
            if let Some(r) = st.retry.get_mut(&slot) {
                r.lost_at = Some(r.lost_at.unwrap_or_else(Instant::now));
            }
        }
        tracing::info!(local = %m.channel.local(), server = %m.channel.peer(), %reason, "channel lost");
    }
}

/// The first channel was opened before any plan: give it the planned slot of its own
/// address pair, if there is one, so it is not opened twice.
fn claim_unslotted(mc: &Multichannel, plan: &Plan) {
    let members = mc.set.active();
    let taken: HashSet<SlotKey> = members.iter().filter_map(|m| m.slot()).collect();
    for m in members.iter().filter(|m| m.slot().is_none()) {
        let free = plan
            .slots
            .iter()
            .find(|s| m.runs(s.key.local, s.key.server) && !taken.contains(&s.key));
        if let Some(slot) = free {
            *m.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(slot.key);
            *m.path.lock().unwrap_or_else(|e| e.into_inner()) = PathInfo::of_slot(slot);
        }
    }
}

/// A channel that fills no planned slot (the first one, opened to an address the plan does
/// not use) drains once a planned channel is up to take over.
fn retire_unplanned(mc: &Multichannel, drain_limit: Duration) {
    let members = mc.set.active();
    let planned_live = members
        .iter()
        .any(|m| m.slot().is_some() && !m.channel.is_dead());
    if !planned_live {
        return;
    }
    for m in members.iter().filter(|m| m.slot().is_none()) {
        tracing::info!(server = %m.channel.peer(), "first channel is not on a planned pair; draining");
        drain(mc, m, drain_limit);
    }
}

fn record_bind(mc: &Multichannel, slot: &Slot, result: std::result::Result<Channel, BindFailure>) {
    let key = (slot.key.local, slot.key.server);
    match result {
        Ok(channel) => {
            let member = mc
                .set
                .add(channel, Some(slot.key), PathInfo::of_slot(slot), false);
            watch_for_death(mc, &member);
            let mut st = mc.lock();
            let c = st.pairs.entry(key).or_default();
            c.binds_tried += 1;
            c.binds_ok += 1;
            if let Some(lost_at) = st.retry.remove(&slot.key).and_then(|r| r.lost_at) {
                mc.failover.reconnected(lost_at, Instant::now());
                tracing::info!(local = %slot.key.local, server = %slot.key.server, after_ms = lost_at.elapsed().as_millis() as u64, "lost channel bound again");
            }
        }
        Err(failure) => {
            tracing::info!(local = %slot.key.local, server = %slot.key.server, error = %failure, "binding failed");
            let mut st = mc.lock();
            let c = st.pairs.entry(key).or_default();
            c.binds_tried += 1;
            if failure.is_refusal() {
                c.binds_refused += 1;
            } else {
                c.binds_failed += 1;
            }
            c.last_error = Some(failure.to_string());
            schedule_retry(&mut st, slot.key, failure.is_refusal());
        }
    }
}

/// Jittered exponential backoff from 100 ms to 30 s; a refusal starts further up, since the
/// server will likely say no again soon.
fn schedule_retry(st: &mut State, slot: SlotKey, refused: bool) {
    let previous = st.retry.get(&slot);
    let lost_at = previous.and_then(|r| r.lost_at);
    let failures = previous.map_or(0, |r| r.failures) + if refused { 4 } else { 1 };
    let base = RETRY_MIN
        .saturating_mul(1u32 << failures.min(16))
        .min(RETRY_MAX);
    let jitter = rand::rng().random_range(0.5..1.0);
    st.retry.insert(
        slot,
        Retry {
            failures,
            at: Instant::now() + base.mul_f64(jitter),
            lost_at,
        },
    );
}
