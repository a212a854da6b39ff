//! The background task that keeps a session's channels matching the plan (DESIGN §3 steps
//! 2-5 and 8): it asks the server for its interfaces after setup, every `interface_poll` and
//! soon after a channel is lost; plans; binds missing slots in the background (each with a
//! timeout, so an unreachable advertised address never stalls the session); drains channels
//! whose pair left the plan; and keeps the counters `smbctl channels` shows.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use rand::Rng;
use smb3_proto::msg::ioctl::{
    parse_network_interfaces, IoctlRequest, FSCTL_QUERY_NETWORK_INTERFACE_INFO,
};
use smb3_proto::msg::tree_connect::TreeConnectRequest;
use smb3_proto::msg::FileId;
use smb3_proto::Command;
use tokio::sync::{Notify, Semaphore};
// Tokio's clock, so the schedule's tests can pause and advance it.
use tokio::time::Instant;

use crate::addressing::TreeContext;
use crate::background::binding::{bind_channel, BindFailure};
use crate::channel::Channel;
use crate::engine::{Call, SessionCore};
use crate::error::Result;
use crate::error::{decode, decode_ioctl};
use crate::multichannel::channel_set::{Member, PathInfo};
use crate::multichannel::planner::{self, Plan, PlanConfig, ServerInterface, Slot, SlotKey};
use crate::multichannel::state::{Multichannel, Retry, State};
use crate::multichannel::{inventory, nic_facts};
use crate::tasks::{self, TaskKind};

/// Largest interface list accepted (about 430 entries of 152 bytes).
const MAX_INTERFACE_LIST: u32 = 64 * 1024;
/// After a channel is lost, ask for the interfaces again this soon.
const REQUERY_AFTER_LOSS: Duration = Duration::from_millis(100);
/// First and last delay between attempts to bind a slot that failed.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// TCP connects of new channels under way at once.
const MAX_CONNECTING: usize = 64;

/// How often a slot whose local link is down looks at the link again.
const LINK_WAIT: Duration = Duration::from_millis(250);

#[cfg(test)]
mod tests;

/// Start the manager for a session that may have several channels. It holds only a weak
/// reference, so it ends when the session is dropped.
pub(crate) fn start(core: &Arc<SessionCore>) {
    watch_for_death(&core.multichannel, &core.multichannel.channels.active()[0]);
    if core.multichannel.eligibility.is_err() {
        return;
    }
    let weak = Arc::downgrade(core);
    let wake = core.multichannel.wake.clone();
    tasks::spawn(TaskKind::ChannelManager, run(weak, wake));
}

/// Wake the manager when `member`'s connection dies, without keeping it open.
pub(crate) fn watch_for_death(mc: &Multichannel, member: &Member) {
    let death = member.channel.death_watch();
    let wake = mc.wake.clone();
    tasks::spawn(TaskKind::DeathWatch, async move {
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
            let mut st = core.multichannel.lock();
            let due = query_due(&st, Instant::now(), core.config.interface_poll);
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
            tasks::spawn(TaskKind::InterfaceQuery, async move {
                discover_and_plan(&core).await;
                core.multichannel.lock().querying = false;
                drop(core);
                wake.notify_one();
            });
        }
        let (planned, first_round_done) = {
            let st = core.multichannel.lock();
            (st.plan.is_some(), !st.querying && st.last_query.is_some())
        };
        if planned {
            reconcile(&core).await;
        }
        if first_round_done {
            core.multichannel.binding_round_done();
        }
        let sleep_for = next_wakeup(&core);
        drop(core);
        tokio::select! {
            _ = tokio::time::sleep(sleep_for) => {}
            _ = wake.notified() => {}
        }
    }
}

/// Whether the server's interfaces should be queried at `now`: at session setup (never
/// queried yet), every `interface_poll` after the last query, or when a re-query was asked
/// (a channel lost, a refresh) — unless a query is under way already.
fn query_due(st: &State, now: Instant, interface_poll: Duration) -> bool {
    !st.querying
        && (st.requery
            || st
                .last_query
                .is_none_or(|t| now.saturating_duration_since(t) >= interface_poll))
}

/// Time until something is due: the next poll, a slot's retry, or a requested re-query.
fn next_wakeup(core: &SessionCore) -> Duration {
    let st = core.multichannel.lock();
    time_to_next_due(&st, Instant::now(), core.config.interface_poll)
}

/// [`next_wakeup`] over the manager's state at `now`.
fn time_to_next_due(st: &State, now: Instant, interface_poll: Duration) -> Duration {
    if st.requery {
        return REQUERY_AFTER_LOSS;
    }
    // While a query runs, its task wakes the manager when done.
    let poll = if st.querying {
        interface_poll
    } else {
        st.last_query
            .map_or(Duration::ZERO, |t| {
                (t + interface_poll).saturating_duration_since(now)
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
    let server_on_loopback = core.multichannel.channels.active()[0]
        .channel
        .peer()
        .ip()
        .is_loopback();
    let local = inventory::local_interfaces(&core.config.nic_overrides)
        .map(|all| inventory::usable(all, server_on_loopback));
    let mut st = core.multichannel.lock();
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
    let resp = match core.send(&req, Call::tree(tree).internal()).await {
        Ok(r) => r,
        Err(e) => {
            // The tree may have been lost with a channel: connect it again next time.
            core.multichannel.lock().ipc = None;
            return Err(e);
        }
    };
    let out = decode_ioctl(&req, &resp.msg)?;
    let list = decode(Command::IOCTL, parse_network_interfaces(&out.output))?;
    Ok(list.iter().map(ServerInterface::from_wire).collect())
}

/// The session's IPC$ tree (MS-SMB2 3.2.4.20: FSCTLs about the server rather than a file go
/// there), connected on first use and kept.
pub(crate) async fn ipc_tree(core: &Arc<SessionCore>) -> Result<TreeContext> {
    if let Some(t) = core.multichannel.lock().ipc {
        return Ok(t);
    }
    let body = TreeConnectRequest::new(&core.server_name, "IPC$");
    let resp = core.send(&body, Call::session().internal()).await?;
    let tree = core
        .addressing
        .trees
        .add("IPC$", resp.header.tree_id, false);
    core.multichannel.lock().ipc = Some(tree);
    Ok(tree)
}

/// Make the channels match the plan: prune dead ones, claim the first channel's slot, drain
/// channels whose slot left the plan, bind the missing slots.
async fn reconcile(core: &Arc<SessionCore>) {
    let mc = &core.multichannel;
    mc.channels.draining(); // retires channels whose last request has been answered
    prune_dead(mc);
    if !mc.channels.any_alive() {
        // Nothing to bind to: the session itself is being re-established (see
        // `background::reconnect`), which wakes the manager when done.
        return;
    }
    let Some(plan) = mc.lock().plan.clone() else {
        return;
    };
    claim_unslotted(mc, &plan);
    let members = mc.channels.active();
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
            .partition(|s| nic_facts::carrier(&s.local_name) != Some(false));
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
            .channels
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
    let Some(removed) = mc.channels.remove(m.id, true) else {
        return;
    };
    let channel = removed.channel.clone();
    drop(removed);
    let wake = mc.wake.clone();
    tasks::spawn(TaskKind::ChannelRetire, async move {
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
    for m in mc.channels.active() {
        // Keep the last channel in the set even dead: callers get ConnectionLost from it
        // and status shows why.
        if !m.channel.is_dead() || mc.channels.active().len() <= 1 {
            continue;
        }
        let reason = m
            .channel
            .dead_reason()
            .map_or_else(String::new, |cause| cause.to_string());
        mc.channels.remove(m.id, false);
        // A channel the watchdog closed was counted (as silent) when it gave up on it.
        if !m.is_suspected() {
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
    let members = mc.channels.active();
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
    let members = mc.channels.active();
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
                .channels
                .add(channel, Some(slot.key), PathInfo::of_slot(slot), false);
            watch_for_death(mc, &member);
            let mut st = mc.lock();
            let c = st.pairs.entry(key).or_default();
            c.binds_tried += 1;
            c.binds_ok += 1;
            if let Some(lost_at) = st.retry.remove(&slot.key).and_then(|r| r.lost_at) {
                mc.failover
                    .reconnected(lost_at.into_std(), Instant::now().into_std());
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
