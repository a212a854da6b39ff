//! The task that applies the loss detector to a session's channels every quarter second:
//! a suspected channel leaves dispatch, its outstanding requests are handed back to their
//! callers (who replay them elsewhere) and an ECHO probe decides its fate — back into service
//! if it answers, closed as lost if not. Idle channels get the same probe as a keepalive.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use smb3_proto::msg::echo::EchoRequest;
use smb3_proto::replay::harmless_if_late;

use crate::channel::frame_buffers::QUIET_BEFORE_RELEASE;
use crate::channel::{Channel, Request};
use crate::engine::SessionCore;
use crate::error::ConnectionLossCause;
use crate::failover::detector::{self, DetectorConfig, Observed, Verdict, Why};
use crate::multichannel::channel_set::Member;
use crate::multichannel::nic_facts;
use crate::tasks::{self, TaskKind};

#[cfg(test)]
mod tests;

/// How often the channels are looked at.
const TICK: Duration = Duration::from_millis(250);

/// Start the watchdog of a session; it ends when the session is dropped or logged off.
pub(crate) fn start(core: &Arc<SessionCore>) {
    let weak = Arc::downgrade(core);
    tasks::spawn(TaskKind::Watchdog, run(weak));
}

async fn run(weak: Weak<SessionCore>) {
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(core) = weak.upgrade() else { return };
        if core.logged_off() {
            return;
        }
        check(&core);
        // The session's one periodic tick also hands back reply buffers nobody has used for
        // a while, so a client at rest does not keep its busy-time pool.
        core.frame_buffers
            .release_if_quiet(std::time::Instant::now(), QUIET_BEFORE_RELEASE);
    }
}

fn check(core: &Arc<SessionCore>) {
    let cfg = DetectorConfig {
        silent_after: core.config.silent_loss_after,
        keepalive_after: core.config.keepalive_interval,
    };
    let members: Vec<Arc<Member>> = core.multichannel.channels.active();
    for verdict in verdicts(&cfg, &members) {
        let (id, suspect) = match verdict {
            Verdict::Suspect { id, why } => (id, Some(why)),
            Verdict::KeepAlive { id } => (id, None),
            Verdict::Poke { id } => {
                if let Some(member) = members.iter().find(|m| m.id == id) {
                    if !member.probing.swap(true, Ordering::AcqRel) {
                        tasks::spawn(
                            TaskKind::KeepAlive,
                            poke(Arc::downgrade(core), member.clone()),
                        );
                    }
                }
                continue;
            }
        };
        let Some(member) = members.iter().find(|m| m.id == id) else {
            continue;
        };
        if member.probing.swap(true, Ordering::AcqRel) {
            continue;
        }
        if let Some(why) = suspect {
            if suspect_member(core, member, why) == Suspected::Closed {
                member.probing.store(false, Ordering::Release);
                continue;
            }
        }
        tasks::spawn(
            TaskKind::Probe,
            probe(Arc::downgrade(core), member.clone(), suspect),
        );
    }
}

/// The detector's verdicts on the usable channels among `members` that no probe is already
/// looking at, now.
fn verdicts(cfg: &DetectorConfig, members: &[Arc<Member>]) -> Vec<Verdict> {
    let observed: Vec<Observed> = members
        .iter()
        .filter(|m| m.usable() && !m.probing.load(Ordering::Acquire))
        .map(|m| Observed {
            id: m.id,
            progress: m.channel.progress(),
            carrier: carrier_of(m),
        })
        .collect();
    detector::judge(cfg, Instant::now(), &observed)
}

fn carrier_of(m: &Member) -> Option<bool> {
    let name = m.path().local_name;
    if name.is_empty() {
        return None;
    }
    nic_facts::carrier(&name)
}

/// What became of a suspected channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Suspected {
    /// Kept, out of dispatch, to be probed.
    Probing,
    /// Closed at once: it held a request that must not reach the server late.
    Closed,
}

/// Out of dispatch, and its outstanding requests back to their callers for replay. The
/// failover clock starts at the channel's last sign of life.
///
/// A suspected channel stays open while it is probed, so what it holds may still reach the
/// server when its path comes back, after the callers were told it was lost. For most
/// requests that is harmless (see [`harmless_if_late`]); a channel holding any other is
/// closed at once instead of probed, and its requests go back to their callers only once
/// its socket, with whatever it still queues, is gone (see `channel::socket`).
fn suspect_member(core: &SessionCore, member: &Member, why: Why) -> Suspected {
    member.suspect();
    core.multichannel
        .failover
        .loss_noticed(member.channel.progress().last_progress.into_std());
    match member.channel.abandon_outstanding(
        harmless_if_late,
        ConnectionLossCause::Suspected { sign: why },
    ) {
        Ok(handed_back) => {
            tracing::info!(
                local = %member.channel.local(),
                server = %member.channel.peer(),
                %why,
                handed_back = handed_back.len(),
                "channel suspected lost; replaying its requests elsewhere"
            );
            Suspected::Probing
        }
        Err(held) => {
            tracing::info!(
                local = %member.channel.local(),
                server = %member.channel.peer(),
                %why,
                %held,
                "channel suspected lost; closing it at once, it held a request that must not arrive late"
            );
            core.multichannel.failover.count_loss(true);
            member
                .channel
                .close(ConnectionLossCause::SuspectedHoldingUnsafe { sign: why, held });
            Suspected::Closed
        }
    }
}

/// ECHO on a channel stalled with every other (see `Verdict::Poke`), whatever its answer:
/// a connection the server dropped answers with a reset, which fails the channel.
async fn poke(weak: Weak<SessionCore>, member: Arc<Member>) {
    let Some(core) = weak.upgrade() else { return };
    let req = core.request(&EchoRequest {}, None);
    let configured = core.config.probe_timeout;
    drop(core);
    let _ = echo_probe(&member.channel, req, configured).await;
    member.probing.store(false, Ordering::Release);
}

/// How long a probe waits for its ECHO: the configured time, or two of the channel's usual
/// gaps between replies if longer (a slow link with large chunks in flight).
fn probe_timeout(configured: Duration, reply_gap: Duration) -> Duration {
    configured.max(reply_gap * 2)
}

/// Send `echo` on `channel` and wait for its answer at most [`probe_timeout`]: whether it
/// was answered, and the timeout it had.
async fn echo_probe(
    channel: &Channel,
    mut echo: Request,
    configured: Duration,
) -> (bool, Duration) {
    let timeout = probe_timeout(configured, channel.progress().reply_gap);
    echo.timeout = timeout;
    (channel.call(echo).await.is_ok(), timeout)
}

/// ECHO on the member's own channel. Answered: back into service. Not answered in time:
/// closed as lost, which wakes the manager to rebind its slot.
async fn probe(weak: Weak<SessionCore>, member: Arc<Member>, suspect: Option<Why>) {
    let Some(core) = weak.upgrade() else { return };
    let req = core.request(&EchoRequest {}, None);
    let configured = core.config.probe_timeout;
    // The probe must not keep the session alive while it waits.
    drop(core);
    let (answered, timeout) = echo_probe(&member.channel, req, configured).await;
    let Some(core) = weak.upgrade() else { return };
    if answered {
        if suspect.is_some() {
            tracing::info!(server = %member.channel.peer(), "suspected channel answered its probe; back in service");
            core.multichannel.failover.false_alarm();
        }
        member.clear_suspicion();
    } else if suspect.is_none() && !core.multichannel.channels.any_usable_besides(member.id) {
        // The session's only usable channel: closing it would end the session, and a link
        // that returns lets TCP deliver what waits. Keep it; the next keepalive asks again.
        tracing::debug!(server = %member.channel.peer(), "keepalive unanswered on the last channel; keeping it");
    } else if !member.channel.is_dead() {
        let reason = ConnectionLossCause::Unresponsive {
            sign: suspect,
            probe_timeout: timeout,
        };
        core.multichannel.failover.count_loss(true);
        tracing::info!(server = %member.channel.peer(), %reason, "closing channel");
        member.channel.close(reason);
    }
    member.probing.store(false, Ordering::Release);
}
