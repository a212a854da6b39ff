//! Failover counters of one session, and the session's ChannelSequence.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What failover has done in a session so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailoverCounters {
    /// The session's ChannelSequence (MS-SMB2 3.2.4.1): how many channel losses the server
    /// has been told about.
    pub channel_sequence: u16,
    /// Requests sent again after their channel was lost, or refused as stale
    /// (STATUS_FILE_NOT_AVAILABLE).
    pub replays: u64,
    /// Requests that were lost with their channel and could not be replayed (not safe to
    /// send twice, or no channel left in time); their callers got the error.
    pub not_replayed: u64,
    /// Channels lost (connection error, reset, or found silent).
    pub channel_losses: u64,
    /// Of those, channels found silent: no progress while others progressed, or link down,
    /// and no answer to the ECHO probe.
    pub silent_losses: u64,
    /// Channels suspected that answered the probe after all and went back into service.
    pub false_alarms: u64,
    /// Lost channels bound again.
    pub reconnects: u64,
    /// Last time from a loss (for a silent one, from the last sign of life) to the first
    /// replayed request answered.
    pub last_failover: Option<Duration>,
    /// Longest such time.
    pub max_failover: Option<Duration>,
    /// Last time from a channel's loss to its slot being bound again.
    pub last_reconnect: Option<Duration>,
    /// Longest such time.
    pub max_reconnect: Option<Duration>,
    /// Times the session was re-established on a new connection after every channel was
    /// lost (new SessionId, PreviousSessionId naming the old one).
    pub sessions_reestablished: u64,
    /// Open files reclaimed by those re-establishments (durable reconnect).
    pub opens_reclaimed: u64,
    /// Open files the server would not give back (not durable, or the reclaim refused) that
    /// were opened again by path, proven to be the same file, and carried on: the requests
    /// the server had not answered were sent to the new handle.
    pub opens_reopened: u64,
    /// Open files that could be neither reclaimed nor reopened; requests on them fail with
    /// `Error::HandleLost`.
    pub opens_lost: u64,
    /// Last time from the loss of the last channel to the session being usable again.
    pub last_reestablish: Option<Duration>,
    /// Directory listings that lost a QUERY_DIRECTORY with its channel (or their handle with
    /// the session) and went on: the directory opened again and enumerated from its start,
    /// the names already handed out skipped. Those QUERY_DIRECTORYs are among
    /// `not_replayed`, but no caller saw an error for them.
    pub listings_resumed: u64,
}

#[derive(Debug, Default)]
struct Times {
    /// The oldest loss not yet followed by an answered replay.
    loss_at: Option<Instant>,
    last_failover: Option<Duration>,
    max_failover: Option<Duration>,
    last_reconnect: Option<Duration>,
    max_reconnect: Option<Duration>,
    last_reestablish: Option<Duration>,
}

/// Live failover state of one session.
#[derive(Debug, Default)]
pub(crate) struct FailoverState {
    sequence: AtomicU16,
    replays: AtomicU64,
    not_replayed: AtomicU64,
    channel_losses: AtomicU64,
    silent_losses: AtomicU64,
    false_alarms: AtomicU64,
    reconnects: AtomicU64,
    sessions_reestablished: AtomicU64,
    opens_reclaimed: AtomicU64,
    opens_reopened: AtomicU64,
    opens_lost: AtomicU64,
    listings_resumed: AtomicU64,
    times: Mutex<Times>,
    /// When requests first found no channel to go on in the outage under way (`None` when
    /// there is none), so that every request of one outage gives up at the same time.
    outage_since: Mutex<Option<Instant>>,
    in_outage: AtomicBool,
}

impl FailoverState {
    fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        self.times.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ChannelSequence new requests carry.
    pub(crate) fn sequence(&self) -> u16 {
        self.sequence.load(Ordering::Acquire)
    }

    /// A request sent with ChannelSequence `seen` was lost with its channel: make sure the
    /// session's ChannelSequence has moved past it, once per loss however many requests
    /// report it (MS-SMB2 3.2.7.1). Returns the sequence to replay with.
    pub(crate) fn advance_past(&self, seen: u16) -> u16 {
        let next = seen.wrapping_add(1);
        match self
            .sequence
            .compare_exchange(seen, next, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => next,
            Err(current) => current,
        }
    }

    /// Count a lost channel; `silent` when no TCP error said so. (When the failover started
    /// is told by [`FailoverState::loss_noticed`], at the moment requests are handed back.)
    pub(crate) fn count_loss(&self, silent: bool) {
        self.channel_losses.fetch_add(1, Ordering::Relaxed);
        if silent {
            self.silent_losses.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Remember when the current failover started, if this loss is the first of it.
    pub(crate) fn loss_noticed(&self, at: Instant) {
        let mut t = self.times();
        t.loss_at = Some(t.loss_at.map_or(at, |old| old.min(at)));
    }

    /// When a request that finds no usable channel at `now` gives up waiting for one: the
    /// outage's start plus `wait`. The first request of an outage starts it; requests made
    /// later in the same outage get what is left of it, not a whole `wait` each, so an
    /// application doing many small operations against a server that is gone sees its
    /// errors within `wait`, not `wait` per operation.
    pub(crate) fn outage_deadline(&self, now: Instant, wait: Duration) -> Instant {
        let mut since = self.outage_since.lock().unwrap_or_else(|e| e.into_inner());
        self.in_outage.store(true, Ordering::Release);
        let since = *since.get_or_insert(now);
        since
            .checked_add(wait)
            .unwrap_or(since + Duration::from_secs(365 * 24 * 3600))
    }

    /// A request was answered, or the session has a channel again: the outage is over.
    pub(crate) fn outage_over(&self) {
        // Called for every answered request: a plain load first, so the common case (no
        // outage) writes nothing shared between the cores.
        if self.in_outage.load(Ordering::Acquire) && self.in_outage.swap(false, Ordering::AcqRel) {
            *self.outage_since.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }

    /// A suspected channel answered its probe.
    pub(crate) fn false_alarm(&self) {
        self.false_alarms.fetch_add(1, Ordering::Relaxed);
    }

    /// A request is being sent again.
    pub(crate) fn replaying(&self) {
        self.replays.fetch_add(1, Ordering::Relaxed);
    }

    /// A lost request could not be replayed.
    pub(crate) fn not_replayed(&self) {
        self.not_replayed.fetch_add(1, Ordering::Relaxed);
    }

    /// Times the session was re-established so far (a handle opened before a change of this
    /// count belongs to a session that is gone).
    pub(crate) fn reestablishments(&self) -> u64 {
        self.sessions_reestablished.load(Ordering::Relaxed)
    }

    /// A directory listing went on after losing its QUERY_DIRECTORY or its handle.
    pub(crate) fn listing_resumed(&self) {
        self.listings_resumed.fetch_add(1, Ordering::Relaxed);
    }

    /// A replayed request was answered: the failover that started at the oldest pending
    /// loss is over.
    pub(crate) fn replay_answered(&self, now: Instant) {
        let mut t = self.times();
        if let Some(at) = t.loss_at.take() {
            let took = now.saturating_duration_since(at);
            t.last_failover = Some(took);
            t.max_failover = Some(t.max_failover.map_or(took, |m| m.max(took)));
        }
    }

    /// A slot lost at `lost_at` has a channel again.
    pub(crate) fn reconnected(&self, lost_at: Instant, now: Instant) {
        self.outage_over();
        self.reconnects.fetch_add(1, Ordering::Relaxed);
        let took = now.saturating_duration_since(lost_at);
        let mut t = self.times();
        t.last_reconnect = Some(took);
        t.max_reconnect = Some(t.max_reconnect.map_or(took, |m| m.max(took)));
    }

    /// The session was re-established after `took`; `reclaimed` opens came back, `reopened`
    /// were opened again by path, `lost` did not come back.
    pub(crate) fn reestablished(&self, took: Duration, reclaimed: u64, reopened: u64, lost: u64) {
        self.outage_over();
        self.sessions_reestablished.fetch_add(1, Ordering::Relaxed);
        self.opens_reclaimed.fetch_add(reclaimed, Ordering::Relaxed);
        self.opens_reopened.fetch_add(reopened, Ordering::Relaxed);
        self.opens_lost.fetch_add(lost, Ordering::Relaxed);
        self.times().last_reestablish = Some(took);
    }

    pub(crate) fn snapshot(&self) -> FailoverCounters {
        let t = self.times();
        FailoverCounters {
            channel_sequence: self.sequence(),
            replays: self.replays.load(Ordering::Relaxed),
            not_replayed: self.not_replayed.load(Ordering::Relaxed),
            channel_losses: self.channel_losses.load(Ordering::Relaxed),
            silent_losses: self.silent_losses.load(Ordering::Relaxed),
            false_alarms: self.false_alarms.load(Ordering::Relaxed),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            last_failover: t.last_failover,
            max_failover: t.max_failover,
            last_reconnect: t.last_reconnect,
            max_reconnect: t.max_reconnect,
            sessions_reestablished: self.sessions_reestablished.load(Ordering::Relaxed),
            opens_reclaimed: self.opens_reclaimed.load(Ordering::Relaxed),
            opens_reopened: self.opens_reopened.load(Ordering::Relaxed),
            opens_lost: self.opens_lost.load(Ordering::Relaxed),
            last_reestablish: t.last_reestablish,
            listings_resumed: self.listings_resumed.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_moves_once_per_loss_and_wraps() {
        let s = FailoverState::default();
        assert_eq!(s.sequence(), 0);
        // Three requests lost together all saw 0: one step.
        assert_eq!(s.advance_past(0), 1);
        assert_eq!(s.advance_past(0), 1);
        assert_eq!(s.advance_past(0), 1);
        assert_eq!(s.sequence(), 1);
        // A later loss of a request sent with 1.
        assert_eq!(s.advance_past(1), 2);
        s.sequence.store(u16::MAX, Ordering::Release);
        assert_eq!(s.advance_past(u16::MAX), 0);
    }

    #[test]
    fn failover_time_runs_from_the_first_loss_to_the_first_answered_replay() {
        let s = FailoverState::default();
        let t0 = Instant::now();
        s.count_loss(true);
        s.loss_noticed(t0 + Duration::from_millis(100));
        s.count_loss(false);
        s.loss_noticed(t0 + Duration::from_millis(50));
        s.replay_answered(t0 + Duration::from_millis(850));
        // A second answered replay of the same failover changes nothing.
        s.replay_answered(t0 + Duration::from_millis(2000));
        s.reconnected(t0, t0 + Duration::from_millis(1200));
        let c = s.snapshot();
        assert_eq!(c.channel_losses, 2);
        assert_eq!(c.silent_losses, 1);
        assert_eq!(c.last_failover, Some(Duration::from_millis(800)));
        assert_eq!(c.max_failover, Some(Duration::from_millis(800)));
        assert_eq!(c.reconnects, 1);
        assert_eq!(c.last_reconnect, Some(Duration::from_millis(1200)));
    }
}
