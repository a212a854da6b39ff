//! The manager's schedule on tokio's paused clock: when the server's interfaces are asked
//! for, and how long a slot that failed to bind waits before the next attempt.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use tokio::time::Instant;

use super::{
    query_due, schedule_retry, time_to_next_due, REQUERY_AFTER_LOSS, RETRY_MAX, RETRY_MIN,
};
use crate::multichannel::planner::SlotKey;
use crate::multichannel::state::State;

const POLL: Duration = Duration::from_secs(15 * 60);

fn slot() -> SlotKey {
    SlotKey {
        local: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        server: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        ordinal: 0,
    }
}

/// The manager's state right after an interface query.
fn queried_now() -> State {
    State {
        last_query: Some(Instant::now()),
        ..State::default()
    }
}

#[tokio::test(start_paused = true)]
async fn the_interfaces_are_queried_at_setup_and_every_poll_interval_after() {
    let start = Instant::now();
    let mut st = State::default();
    let mut queried = Vec::new();
    // The manager's loop, with queries that take no time: query when due, then sleep until
    // the next thing is due.
    while start.elapsed() < POLL * 2 + POLL / 2 {
        let now = Instant::now();
        if query_due(&st, now, POLL) {
            queried.push(now - start);
            st.last_query = Some(now);
        }
        tokio::time::sleep(time_to_next_due(&st, now, POLL)).await;
    }
    assert_eq!(queried, [Duration::ZERO, POLL, POLL * 2]);
}

#[tokio::test(start_paused = true)]
async fn the_next_poll_is_not_due_a_moment_before_the_interval() {
    let mut st = queried_now();
    assert_eq!(time_to_next_due(&st, Instant::now(), POLL), POLL);
    tokio::time::advance(POLL - Duration::from_millis(1)).await;
    assert!(!query_due(&st, Instant::now(), POLL));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(query_due(&st, Instant::now(), POLL));
    // Not twice at once: a query under way is not started again.
    st.querying = true;
    assert!(!query_due(&st, Instant::now(), POLL));
}

#[tokio::test(start_paused = true)]
async fn a_lost_channel_asks_for_the_interfaces_again_soon() {
    let mut st = queried_now();
    st.requery = true;
    assert!(query_due(&st, Instant::now(), POLL));
    assert_eq!(
        time_to_next_due(&st, Instant::now(), POLL),
        REQUERY_AFTER_LOSS
    );
}

/// The documented schedule: 100 ms doubling to 30 s, each delay jittered down by up to half
/// (the n-th failure waits between half of and all of min(100 ms * 2^n, 30 s)).
fn bounds(failures: u32) -> (Duration, Duration) {
    let base = RETRY_MIN
        .saturating_mul(1 << failures.min(16))
        .min(RETRY_MAX);
    (base / 2, base)
}

#[tokio::test(start_paused = true)]
async fn a_slot_that_fails_to_bind_is_retried_after_delays_doubling_to_thirty_seconds() {
    let mut st = queried_now();
    let key = slot();
    let mut delays = Vec::new();
    for failures in 1..=12 {
        schedule_retry(&mut st, key, false);
        let retry = st.retry[&key];
        assert_eq!(retry.failures, failures);
        let delay = retry.at - Instant::now();
        let (low, high) = bounds(failures);
        assert!(
            low <= delay && delay <= high,
            "failure {failures}: {delay:?} not in {low:?}..={high:?}"
        );
        // The manager wakes exactly when the retry is due.
        assert_eq!(time_to_next_due(&st, Instant::now(), POLL), delay);
        tokio::time::advance(delay).await;
        delays.push(delay);
    }
    assert!(delays[0] >= Duration::from_millis(100));
    assert!(delays.iter().all(|d| *d <= Duration::from_secs(30)));
    assert!(delays[11] >= Duration::from_secs(15), "at the cap by then");
}

#[tokio::test(start_paused = true)]
async fn a_refused_bind_starts_further_up_the_schedule() {
    let mut st = State::default();
    schedule_retry(&mut st, slot(), true);
    let retry = st.retry[&slot()];
    assert_eq!(retry.failures, 4);
    let delay = retry.at - Instant::now();
    let (low, high) = bounds(4);
    assert!(low <= delay && delay <= high, "{delay:?}");
}

#[tokio::test(start_paused = true)]
async fn retry_delays_are_jittered() {
    // Slots failing together must not retry in lockstep.
    let delays: BTreeSet<Duration> = (0..32)
        .map(|_| {
            let mut st = State::default();
            schedule_retry(&mut st, slot(), false);
            st.retry[&slot()].at - Instant::now()
        })
        .collect();
    assert!(delays.len() > 1, "{delays:?}");
}
