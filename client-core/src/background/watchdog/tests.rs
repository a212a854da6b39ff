//! The watchdog's judgement and probes over in-memory channels, on tokio's paused clock: the
//! instants at which a channel is suspected, a probe gives up and a keepalive is due are
//! exact, and no test sleeps for real.

use std::sync::Arc;
use std::time::Duration;

use smb3_proto::msg::echo::EchoRequest;
use smb3_proto::NtStatus;
use tokio::time::Instant;

use super::{echo_probe, probe_timeout, verdicts, TICK};
use crate::channel::{Channel, Request};
use crate::config::Dispatch;
use crate::engine::replay::tests::{channel, Peer};
use crate::failover::detector::{DetectorConfig, Verdict, Why};
use crate::multichannel::channel_set::{ChannelSet, Member, PathInfo};

/// Not the defaults, so that the tests show the configured values are the ones applied.
const CFG: DetectorConfig = DetectorConfig {
    silent_after: Duration::from_secs(2),
    keepalive_after: Duration::from_secs(20),
};

fn echo(timeout: Duration) -> Request {
    let mut req = Request::new(&EchoRequest {});
    req.timeout = timeout;
    req
}

/// Send ECHOs on `ch` for ever, one every `every`.
fn traffic(ch: Channel, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let _ = ch.call(echo(Duration::from_secs(60))).await;
            tokio::time::sleep(every).await;
        }
    })
}

/// Judge `members` at every watchdog tick, as the watchdog does, until a verdict satisfies
/// `wanted` (its time since `start`) or `limit` passes (`None`).
async fn first_tick_with(
    members: &[Arc<Member>],
    start: Instant,
    limit: Duration,
    wanted: impl Fn(&Verdict) -> bool,
) -> Option<(Duration, Verdict)> {
    let mut ticker = tokio::time::interval(TICK);
    while start.elapsed() <= limit {
        ticker.tick().await;
        if let Some(v) = verdicts(&CFG, members).into_iter().find(&wanted) {
            return Some((start.elapsed(), v));
        }
    }
    None
}

fn two_channels(first: Peer, second: Peer) -> (ChannelSet, Vec<Arc<Member>>) {
    let (a, _) = channel(1, first);
    let (b, _) = channel(2, second);
    let set = ChannelSet::new(a, Dispatch::RoundRobin);
    set.add(b, None, PathInfo::default(), false);
    let members = set.active();
    (set, members)
}

#[tokio::test(start_paused = true)]
async fn a_channel_stalled_while_another_progresses_is_suspected_after_the_limit() {
    let (_set, members) = two_channels(Peer::Silent, Peer::Answers(&[NtStatus::SUCCESS]));
    let (stalled, progressing) = (members[0].id, members[1].id);
    let start = Instant::now();
    // A request the first channel's peer never answers; the second answers every 100 ms.
    let held = traffic(members[0].channel.clone(), Duration::from_secs(3600));
    let busy = traffic(members[1].channel.clone(), Duration::from_millis(100));

    let found = first_tick_with(&members, start, Duration::from_secs(10), |v| {
        matches!(v, Verdict::Suspect { .. })
    })
    .await;

    held.abort();
    busy.abort();
    let (at, verdict) = found.expect("the stalled channel is suspected");
    assert_eq!(at, CFG.silent_after, "suspected at the limit, not before");
    assert_eq!(
        verdict,
        Verdict::Suspect {
            id: stalled,
            why: Why::NoProgress(CFG.silent_after),
        }
    );
    assert_ne!(stalled, progressing);
}

#[tokio::test(start_paused = true)]
async fn channels_stalled_together_are_not_suspected() {
    let (_set, members) = two_channels(Peer::Silent, Peer::Silent);
    let start = Instant::now();
    let a = traffic(members[0].channel.clone(), Duration::from_secs(3600));
    let b = traffic(members[1].channel.clone(), Duration::from_secs(3600));

    // Until the stall has lasted the poke limit, nothing at all; then each is poked, and
    // neither is blamed.
    let found = first_tick_with(&members, start, Duration::from_secs(30), |_| true).await;

    a.abort();
    b.abort();
    let (at, verdict) = found.expect("the stalled channels are poked");
    assert_eq!(at, CFG.silent_after * crate::failover::detector::POKE_AFTER);
    assert!(matches!(verdict, Verdict::Poke { .. }), "{verdict:?}");
}

#[tokio::test(start_paused = true)]
async fn an_idle_channel_gets_a_keepalive_after_the_configured_idle_time() {
    let (_set, members) = two_channels(
        Peer::Answers(&[NtStatus::SUCCESS]),
        Peer::Answers(&[NtStatus::SUCCESS]),
    );
    let start = Instant::now();
    // One exchange on each at the start, then nothing.
    for m in &members {
        m.channel.call(echo(Duration::from_secs(1))).await.unwrap();
    }
    assert_eq!(start.elapsed(), Duration::ZERO);

    let found = first_tick_with(&members, start, Duration::from_secs(60), |_| true).await;

    let (at, verdict) = found.expect("a keepalive is due");
    assert_eq!(
        at, CFG.keepalive_after,
        "due after the idle time, not before"
    );
    assert_eq!(verdict, Verdict::KeepAlive { id: members[0].id });
}

#[tokio::test(start_paused = true)]
async fn a_probe_unanswered_gives_up_at_its_timeout_and_an_answered_one_at_once() {
    let configured = Duration::from_millis(700);
    let (silent, _) = channel(1, Peer::Silent);
    let start = Instant::now();
    let (answered, timeout) = echo_probe(&silent, echo(Duration::ZERO), configured).await;
    assert!(!answered);
    assert_eq!(timeout, configured);
    assert_eq!(
        start.elapsed(),
        configured,
        "gave up exactly at the probe timeout"
    );

    let (answering, _) = channel(2, Peer::Answers(&[NtStatus::SUCCESS]));
    let start = Instant::now();
    let (answered, _) = echo_probe(&answering, echo(Duration::ZERO), configured).await;
    assert!(answered);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[test]
fn a_probe_waits_two_reply_gaps_on_a_slow_channel() {
    let configured = Duration::from_secs(1);
    assert_eq!(
        probe_timeout(configured, Duration::from_millis(100)),
        configured
    );
    assert_eq!(
        probe_timeout(configured, Duration::from_millis(800)),
        Duration::from_millis(1600)
    );
}
