//! Finding channels that died without saying so: a link that went down or a path that drops
//! packets gives no TCP error for minutes. Pure decisions over what the channels report and
//! a clock the caller passes in, so they are tested without sockets or sleeps.
//!
//! A busy channel (requests outstanding) is suspected when it has shown no progress for
//! `silent_after` — or eight of its own usual gaps between replies, if those are longer —
//! while some other channel of the session did get a reply in that time: the server is
//! answering, just not on this path. When every channel stalls together the server is slow
//! and nobody is blamed. A channel whose NIC has lost carrier is suspected at once, unless
//! every channel has (then TCP keeps the requests until a link returns). An idle channel
//! silent for `keepalive_after` is probed.

use std::time::Duration;

// The channels' clock (see `channel::Progress`).
use tokio::time::Instant;

use crate::channel::Progress;

/// How many of a channel's usual reply gaps count as "no progress".
const GAP_FACTOR: u32 = 8;

/// Thresholds of the detector.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DetectorConfig {
    pub(crate) silent_after: Duration,
    pub(crate) keepalive_after: Duration,
}

/// What one channel looks like now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Observed {
    pub(crate) id: u64,
    pub(crate) progress: Progress,
    /// Whether the channel's local NIC has carrier, when the OS says.
    pub(crate) carrier: Option<bool>,
}

/// Why a channel is suspected: public, since the requests it hands back fail with it
/// ([`ConnectionLossCause::Suspected`](crate::error::ConnectionLossCause::Suspected)).
pub(crate) use crate::error::LossSign as Why;

/// What to do about one channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Take it out of dispatch, replay its requests elsewhere, probe it.
    Suspect { id: u64, why: Why },
    /// Idle too long: probe it.
    KeepAlive { id: u64 },
    /// Stalled together with every other channel for [`POKE_AFTER`] stall limits: nobody is
    /// blamed (the server may just be slow), but an ECHO goes out. After a long outage the
    /// server may have dropped the connections while every request of ours had already been
    /// acknowledged by its TCP: nothing the client sends would then make TCP find out, and
    /// the requests would wait for their timeout. A dead connection answers the ECHO with a
    /// reset, which fails the channel and replays its requests.
    Poke { id: u64 },
}

/// How many stall limits every channel must be stalled together before each is poked.
pub(crate) const POKE_AFTER: u32 = 4;

/// How long a channel with this reply pace may go without progress.
pub(crate) fn stall_limit(cfg: &DetectorConfig, reply_gap: Duration) -> Duration {
    cfg.silent_after.max(reply_gap * GAP_FACTOR)
}

/// Judge every channel at `now`.
pub(crate) fn judge(cfg: &DetectorConfig, now: Instant, channels: &[Observed]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for c in channels {
        let p = &c.progress;
        if c.carrier == Some(false) {
            // With every link down there is nowhere to replay to: leave the requests where
            // TCP will deliver them once a link returns.
            let elsewhere = channels
                .iter()
                .any(|o| o.id != c.id && o.carrier != Some(false));
            if elsewhere {
                out.push(Verdict::Suspect {
                    id: c.id,
                    why: Why::LinkDown,
                });
            }
            continue;
        }
        if p.outstanding == 0 {
            if now.saturating_duration_since(p.last_reply) >= cfg.keepalive_after {
                out.push(Verdict::KeepAlive { id: c.id });
            }
            continue;
        }
        let stalled = now.saturating_duration_since(p.last_progress);
        let limit = stall_limit(cfg, p.reply_gap);
        if stalled < limit {
            continue;
        }
        let window_start = now.checked_sub(limit).unwrap_or(now);
        let others_progress = channels
            .iter()
            .any(|o| o.id != c.id && o.progress.last_reply > window_start);
        if others_progress {
            out.push(Verdict::Suspect {
                id: c.id,
                why: Why::NoProgress(stalled),
            });
        } else if stalled >= limit * POKE_AFTER {
            out.push(Verdict::Poke { id: c.id });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: DetectorConfig = DetectorConfig {
        silent_after: Duration::from_millis(1500),
        keepalive_after: Duration::from_secs(30),
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A channel with `outstanding` requests, last reply `ago` before `now`.
    fn chan(id: u64, now: Instant, outstanding: usize, ago: Duration, gap: Duration) -> Observed {
        Observed {
            id,
            progress: Progress {
                outstanding,
                last_progress: now - ago,
                last_reply: now - ago,
                reply_gap: gap,
            },
            carrier: Some(true),
        }
    }

    fn base() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    #[test]
    fn a_stalled_busy_channel_is_suspected_when_a_sibling_progresses() {
        let now = base();
        let chans = [
            chan(1, now, 4, ms(1600), ms(70)),
            chan(2, now, 4, ms(20), ms(70)),
            chan(3, now, 4, ms(90), ms(70)),
        ];
        assert_eq!(
            judge(&CFG, now, &chans),
            vec![Verdict::Suspect {
                id: 1,
                why: Why::NoProgress(ms(1600))
            }]
        );
    }

    #[test]
    fn nothing_is_suspected_before_the_limit() {
        let now = base();
        let chans = [
            chan(1, now, 4, ms(1400), ms(70)),
            chan(2, now, 4, ms(20), ms(70)),
        ];
        assert!(judge(&CFG, now, &chans).is_empty());
    }

    #[test]
    fn when_every_channel_stalls_the_server_is_slow_and_nobody_is_blamed() {
        let now = base();
        let chans = [
            chan(1, now, 4, ms(5000), ms(70)),
            chan(2, now, 4, ms(4000), ms(70)),
        ];
        assert!(judge(&CFG, now, &chans).is_empty());
        // A lone channel has no sibling to compare with either.
        assert!(judge(&CFG, now, &chans[..1]).is_empty());
        // Stalled together for four limits (6 s): poked, still not blamed.
        let long = [
            chan(1, now, 4, ms(6500), ms(70)),
            chan(2, now, 4, ms(6000), ms(70)),
        ];
        assert_eq!(
            judge(&CFG, now, &long),
            vec![Verdict::Poke { id: 1 }, Verdict::Poke { id: 2 }]
        );
    }

    #[test]
    fn a_channel_with_slow_replies_gets_eight_of_its_gaps() {
        let now = base();
        // Large chunks on a slow link: a reply every 400 ms is normal, 3 s is not yet alarming.
        let slow = [
            chan(1, now, 4, ms(3000), ms(400)),
            chan(2, now, 4, ms(10), ms(70)),
        ];
        assert_eq!(stall_limit(&CFG, ms(400)), ms(3200));
        assert!(judge(&CFG, now, &slow).is_empty());
        let slower = [
            chan(1, now, 4, ms(3300), ms(400)),
            chan(2, now, 4, ms(10), ms(70)),
        ];
        assert_eq!(judge(&CFG, now, &slower).len(), 1);
    }

    #[test]
    fn progress_counts_from_when_the_channel_became_busy() {
        let now = base();
        // Idle for a minute, then given work 200 ms ago: not stalled.
        let mut c = chan(1, now, 2, ms(60_000), ms(0));
        c.progress.last_progress = now - ms(200);
        let chans = [c, chan(2, now, 4, ms(10), ms(70))];
        assert!(judge(&CFG, now, &chans).is_empty());
    }

    #[test]
    fn lost_carrier_is_suspected_at_once_and_idle_channels_get_keepalives() {
        let now = base();
        let mut down = chan(1, now, 0, ms(10), ms(0));
        down.carrier = Some(false);
        let idle = chan(2, now, 0, ms(31_000), ms(0));
        let fresh = chan(3, now, 0, ms(29_000), ms(0));
        assert_eq!(
            judge(&CFG, now, &[down, idle, fresh]),
            vec![
                Verdict::Suspect {
                    id: 1,
                    why: Why::LinkDown
                },
                Verdict::KeepAlive { id: 2 }
            ]
        );
    }

    #[test]
    fn with_every_link_down_nobody_is_suspected() {
        let now = base();
        let mut a = chan(1, now, 4, ms(3000), ms(70));
        let mut b = chan(2, now, 4, ms(3000), ms(70));
        a.carrier = Some(false);
        b.carrier = Some(false);
        assert!(judge(&CFG, now, &[a, b]).is_empty());
    }
}
