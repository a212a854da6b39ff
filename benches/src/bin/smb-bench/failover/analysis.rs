//! From counter readings to numbers, as pure functions: the cumulative bytes per link
//! ([`Timeline`]), the failover gap, the bytes lost in it, when the failed link carries its
//! share again and how much longer the copy took ([`analyse`]), when every channel was back
//! ([`all_channels_back`]), and medians of such outcomes.

use super::sampler::Reading;
use crate::transfer::Direction;

/// Trailing window the gap and link-back criteria smooth over, in sampling intervals: one
/// 50 ms interval swings by about 10 % with tbf's bursts alone.
pub(crate) const SMOOTH_INTERVALS: usize = 3;
/// How long throughput must hold, seconds, before it counts as recovered.
pub(crate) const SUSTAIN: f64 = 0.5;
/// Share of what the surviving links can carry that counts as recovered.
pub(crate) const GAP_THRESHOLD: f64 = 0.90;
/// Share of its pre-fault share that makes the failed link count as carrying traffic again.
pub(crate) const LINK_BACK_THRESHOLD: f64 = 0.50;
/// Share of the file on the wire before the copy counts as started.
const STARTED_AT: f64 = 0.01;
/// The copy counts as ended once all but this share of the file has crossed: the last few
/// packets (CLOSE, LOGOFF) are not data.
const ENDED_WITHIN: f64 = 0.001;
/// Longest and shortest stretch before the fault that gives the pre-fault rate, seconds.
const PRE_FAULT_WINDOW: (f64, f64) = (2.0, 0.3);

/// Cumulative bytes per link over time, for one direction.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timeline {
    /// Reading times, increasing.
    pub(crate) t: Vec<f64>,
    /// Per link, link 1 first: the bytes since the first reading, one per time.
    pub(crate) links: Vec<Vec<u64>>,
}

impl Timeline {
    /// The counters of `direction` relative to the first reading; readings whose time does
    /// not increase are dropped.
    pub(crate) fn from_readings(readings: &[Reading], direction: Direction) -> Timeline {
        let base = readings.first().map_or(&[][..], |r| r.bytes(direction));
        let (mut t, mut links) = (Vec::new(), vec![Vec::new(); base.len()]);
        for r in readings {
            if t.last().is_some_and(|&last| r.t <= last) {
                continue;
            }
            t.push(r.t);
            for (k, (v, b)) in r.bytes(direction).iter().zip(base).enumerate() {
                links[k].push(v.saturating_sub(*b));
            }
        }
        Timeline { t, links }
    }

    /// Every link's bytes added up, one per time.
    pub(crate) fn aggregate(&self) -> Vec<u64> {
        (0..self.t.len())
            .map(|i| self.links.iter().map(|l| l[i]).sum())
            .collect()
    }
}

/// A cumulative counter's value at time `at`, interpolated between readings (clamped to the
/// first and last).
fn value_at(t: &[f64], bytes: &[u64], at: f64) -> f64 {
    match t.iter().position(|&ti| ti >= at) {
        None => bytes.last().map_or(0.0, |&b| b as f64),
        Some(0) => bytes[0] as f64,
        Some(i) => {
            let (b0, b1) = (bytes[i - 1] as f64, bytes[i] as f64);
            b0 + (b1 - b0) * (at - t[i - 1]) / (t[i] - t[i - 1])
        }
    }
}

/// The first time at or after `from` where the rate of `bytes` (over the trailing
/// [`SMOOTH_INTERVALS`], windows wholly after `from`) is at least `threshold` and stays so for
/// [`SUSTAIN`]. The stretch's first interval must reach `threshold` on its own: otherwise a
/// window only partly filled with traffic would date the recovery up to two intervals early.
fn sustained_from(t: &[f64], bytes: &[u64], from: f64, threshold: f64) -> Option<f64> {
    let first = t.iter().position(|&ti| ti >= from)?;
    let rate = |j: usize, i: usize| (bytes[i] as f64 - bytes[j] as f64) / (t[i] - t[j]);
    'start: for s in first..t.len().saturating_sub(1) {
        if rate(s, s + 1) < threshold {
            continue;
        }
        for i in s + SMOOTH_INTERVALS.. {
            if i >= t.len() {
                // The series ends before the stretch is long enough.
                return None;
            }
            if rate(i - SMOOTH_INTERVALS, i) < threshold {
                continue 'start;
            }
            if t[i] - t[s] >= SUSTAIN {
                return Some(t[s]);
            }
        }
    }
    None
}

/// When something happened, or that it did not within what was observed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Outcome {
    After(f64),
    /// Not within this many seconds (the end of the series).
    NotWithin(f64),
}

/// What the series says about one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metrics {
    /// Aggregate rate before the fault, bytes/s on the wire (headers included).
    pub(crate) pre_fault: f64,
    /// From the fault until the aggregate holds [`GAP_THRESHOLD`] of what the surviving links
    /// carry (the pre-fault rate times (N-1)/N) for [`SUSTAIN`].
    pub(crate) gap: Outcome,
    /// Bytes short of the pre-fault rate during the gap (or to the end if it never closed).
    pub(crate) dip: f64,
    /// From the fault (rst) or the link-up (silent) until the failed link holds
    /// [`LINK_BACK_THRESHOLD`] of its pre-fault share for [`SUSTAIN`]; `None` when the link
    /// came up only after the copy ended.
    pub(crate) link_back: Option<Outcome>,
    /// How much longer the copy took than its bytes need at the pre-fault rate, seconds. The
    /// gap can be short while requests queued on the dead link arrive late and make a slow
    /// tail; this counts both. A client that fails over perfectly loses about the dead link's
    /// share of the time it is down.
    pub(crate) time_lost: f64,
}

/// [`Metrics`] of `tl` with the fault at `fault_at` on link `fault_link` (1-based), the link
/// up again at `link_up_at` (silent faults), and the file's size.
pub(crate) fn analyse(
    tl: &Timeline,
    fault_at: f64,
    link_up_at: Option<f64>,
    fault_link: usize,
    size: u64,
) -> Result<Metrics, String> {
    let n = tl.links.len();
    if fault_link == 0 || fault_link > n || tl.t.len() < 2 {
        return Err("too few readings or links".into());
    }
    let (agg, t) = (tl.aggregate(), &tl.t);
    let last = *t.last().unwrap_or(&0.0);
    // The copy starts when 1 % of the file has crossed; the steady part before the fault is
    // the later half of what came before it, at most the last 2 s.
    let started = agg
        .iter()
        .position(|&b| b as f64 >= size as f64 * STARTED_AT)
        .map(|i| t[i])
        .filter(|&s| s < fault_at)
        .ok_or("the transfer had not started at the fault")?;
    let window_start = (started + (fault_at - started) / 2.0).max(fault_at - PRE_FAULT_WINDOW.0);
    if fault_at - window_start < PRE_FAULT_WINDOW.1 {
        return Err(format!(
            "only {:.0} ms of transfer before the fault",
            (fault_at - started) * 1e3
        ));
    }
    let pre_fault =
        (value_at(t, &agg, fault_at) - value_at(t, &agg, window_start)) / (fault_at - window_start);
    let surviving = pre_fault * (n - 1) as f64 / n as f64;
    let (gap, until) = match sustained_from(t, &agg, fault_at, surviving * GAP_THRESHOLD) {
        Some(end) => (Outcome::After(end - fault_at), end),
        None => (Outcome::NotWithin(last - fault_at), last),
    };
    let moved = value_at(t, &agg, until) - value_at(t, &agg, fault_at);
    let dip = (pre_fault * (until - fault_at) - moved).max(0.0);
    let back_from = link_up_at.unwrap_or(fault_at);
    let link_back = (back_from < last).then(|| {
        let threshold = pre_fault / n as f64 * LINK_BACK_THRESHOLD;
        match sustained_from(t, &tl.links[fault_link - 1], back_from, threshold) {
            Some(at) => Outcome::After(at - back_from),
            None => Outcome::NotWithin(last - back_from),
        }
    });
    let total = agg.last().copied().unwrap_or(0);
    let ended = agg
        .iter()
        .position(|&b| b as f64 >= total as f64 - size as f64 * ENDED_WITHIN)
        .map_or(last, |i| t[i]);
    let time_lost = (ended - started) - (total as f64 - value_at(t, &agg, started)) / pre_fault;
    Ok(Metrics {
        pre_fault,
        gap,
        dip,
        link_back,
        time_lost,
    })
}

/// When the session's channels were all back: the count of established connections to port
/// 445 had fallen below the most seen before the fault (the plan the client had settled on;
/// the most, since the count may fall before the fault's time is taken) and is back at it,
/// measured from `from` (the fault, or a silent fault's link-up). `None` when there was no
/// count, or it never fell.
pub(crate) fn all_channels_back(readings: &[Reading], fault_at: f64, from: f64) -> Option<Outcome> {
    let before = readings.iter().take_while(|r| r.t < fault_at);
    let target = before.filter_map(|r| r.channels).max().filter(|&n| n > 0)?;
    let after: Vec<(f64, usize)> = readings
        .iter()
        .filter(|r| r.t >= fault_at)
        .filter_map(|r| Some((r.t, r.channels?)))
        .collect();
    let fell = after.iter().position(|&(_, n)| n < target)?;
    let last = after.last().map_or(from, |&(t, _)| t);
    Some(
        match after[fell..]
            .iter()
            .find(|&&(t, n)| t >= from && n >= target)
        {
            Some(&(t, _)) => Outcome::After((t - from).max(0.0)),
            None => Outcome::NotWithin((last - from).max(0.0)),
        },
    )
}

/// The median of outcomes, a "not within" counting as later than any time: the middle one,
/// or for an even count the mean of the middle two when both are times.
pub(crate) fn median_outcome(outcomes: &[Outcome]) -> Option<Outcome> {
    let key = |o: &Outcome| match *o {
        Outcome::After(s) => (0, s),
        Outcome::NotWithin(s) => (1, s),
    };
    let mut sorted = outcomes.to_vec();
    sorted.sort_by(|a, b| key(a).0.cmp(&key(b).0).then(key(a).1.total_cmp(&key(b).1)));
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some(match (sorted[n / 2 - 1], sorted[n / 2]) {
            (Outcome::After(a), Outcome::After(b)) => Outcome::After((a + b) / 2.0),
            (_, later) => later,
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use Outcome::{After, NotWithin};

    pub(crate) const MB: f64 = 1e6;

    /// A timeline sampled every 50 ms for `seconds`, link k moving `rate(k, t)` bytes/s.
    pub(crate) fn timeline(
        links: usize,
        seconds: f64,
        rate: impl Fn(usize, f64) -> f64,
    ) -> Timeline {
        let t: Vec<f64> = (0..=(seconds / 0.05).round() as usize)
            .map(|i| i as f64 * 0.05)
            .collect();
        let link = |k: usize| {
            let mut total = 0.0;
            let steps = t.windows(2).map(|w| {
                total += rate(k, w[0]) * (w[1] - w[0]);
                total.round() as u64
            });
            std::iter::once(0).chain(steps).collect()
        };
        let links = (1..=links).map(link).collect();
        Timeline { t, links }
    }

    fn after(o: Outcome) -> f64 {
        match o {
            After(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn timeline_takes_the_direction_relative_to_the_start() {
        let r = |t: f64, rx: [u64; 2], tx: [u64; 2]| Reading {
            t,
            rx: rx.to_vec(),
            tx: tx.to_vec(),
            channels: None,
        };
        // The third reading is late (its time does not increase): dropped.
        let readings = [
            r(0.0, [100, 200], [5, 6]),
            r(0.05, [150, 260], [7, 6]),
            r(0.05, [999, 999], [9, 9]),
        ];
        let readings = [&readings[..], &[r(0.1, [250, 300], [9, 16])]].concat();
        let down = Timeline::from_readings(&readings, Direction::Download);
        assert_eq!(
            (down.t, down.links),
            (
                vec![0.0, 0.05, 0.1],
                vec![vec![0, 50, 150], vec![0, 60, 100]]
            )
        );
        assert_eq!(
            Timeline::from_readings(&readings, Direction::Upload).aggregate(),
            vec![0, 2, 14]
        );
    }

    #[test]
    fn perfect_failover_has_no_gap() {
        // Four links at 10 MB/s; link 2 stops at 5 s, the others take over at once, link 2 is
        // back 8 s later.
        let tl = timeline(4, 20.0, |k, t| match (k, (5.0..13.0).contains(&t)) {
            (2, true) => 0.0,
            (_, true) => 40.0 * MB / 3.0,
            _ => 10.0 * MB,
        });
        let m = analyse(&tl, 5.0, Some(13.0), 2, 100_000_000).unwrap();
        assert!((m.pre_fault - 40.0 * MB).abs() < 0.01 * MB, "{m:?}");
        assert_eq!((m.gap, m.link_back), (After(0.0), Some(After(0.0))));
        assert!(m.dip < 0.01 * MB && m.time_lost.abs() < 0.01, "{m:?}");
    }

    #[test]
    fn a_stall_gives_gap_dip_and_time_lost() {
        // Everything stops for 2 s after the fault, then the three other links go on; link 2
        // returns 1 s after the link-up at 13 s.
        let tl = timeline(4, 20.0, |k, t| match (k, t) {
            (_, t) if (5.0..7.0).contains(&t) => 0.0,
            (2, t) if (5.0..14.0).contains(&t) => 0.0,
            _ => 10.0 * MB,
        });
        let m = analyse(&tl, 5.0, Some(13.0), 2, 100_000_000).unwrap();
        assert!((after(m.gap) - 2.0).abs() < 0.051, "{m:?}");
        assert!((m.dip - 80.0 * MB).abs() < 2.5 * MB, "{m:?}");
        assert!((after(m.link_back.unwrap()) - 1.0).abs() < 0.051, "{m:?}");
        // 80 MB not moved in the stall and link 2's 70 MB from 7 to 14 s, at 40 MB/s.
        assert!((m.time_lost - 3.75).abs() < 0.06, "{m:?}");
    }

    #[test]
    fn a_slow_tail_counts_as_time_lost_and_a_burst_does_not_end_the_gap() {
        // No gap, but link 2's backlog arrives at the end alone: after 10 s only it moves.
        let tl = timeline(4, 12.0, |k, t| match (k, t) {
            (2, t) if (3.0..6.0).contains(&t) => 0.0,
            (2, _) => 10.0 * MB,
            (_, t) if t >= 10.0 => 0.0,
            _ => 10.0 * MB,
        });
        let m = analyse(&tl, 3.0, Some(6.0), 2, 100_000_000).unwrap();
        assert_eq!(m.gap, After(0.0));
        assert!((m.time_lost - 2.25).abs() < 0.06, "{m:?}");
        // A 200 ms burst 1 s after the fault does not hold for 500 ms; recovery at 3 s.
        let stop = |t: f64| (5.0..8.0).contains(&t) && !(6.0..6.2).contains(&t);
        let tl = timeline(2, 12.0, |_, t| if stop(t) { 0.0 } else { 10.0 * MB });
        assert!((after(analyse(&tl, 5.0, None, 2, 10_000_000).unwrap().gap) - 3.0).abs() < 0.051);
    }

    #[test]
    fn no_recovery_and_too_early_a_fault_are_reported_as_such() {
        let tl = timeline(4, 10.0, |_, t| if t >= 5.0 { 0.0 } else { 10.0 * MB });
        let m = analyse(&tl, 5.0, Some(9.0), 2, 100_000_000).unwrap();
        assert_eq!((m.gap, m.link_back), (NotWithin(5.0), Some(NotWithin(1.0))));
        assert!((m.dip - 200.0 * MB).abs() < 1.0 * MB, "{m:?}");
        assert_eq!(
            analyse(&tl, 5.0, Some(12.0), 2, 100_000_000)
                .unwrap()
                .link_back,
            None
        );
        let steady = timeline(4, 10.0, |_, _| 10.0 * MB);
        assert!(analyse(&steady, 0.2, None, 2, 100_000_000)
            .unwrap_err()
            .contains("before the fault"));
        assert!(analyse(&steady, 5.0, None, 5, 100_000_000).is_err());
        let idle = timeline(4, 10.0, |_, _| 0.0);
        assert!(analyse(&idle, 5.0, None, 2, 100_000_000)
            .unwrap_err()
            .contains("not started"));
    }

    #[test]
    fn medians_put_not_within_last_and_channels_need_a_fall_and_a_return() {
        assert_eq!(median_outcome(&[]), None);
        assert_eq!(
            median_outcome(&[After(3.0), NotWithin(1.0), After(1.0)]),
            Some(After(3.0))
        );
        assert_eq!(median_outcome(&[After(3.0), After(1.0)]), Some(After(2.0)));
        assert_eq!(
            median_outcome(&[After(3.0), NotWithin(2.0)]),
            Some(NotWithin(2.0))
        );
        let at = |t: f64, n: Option<usize>| Reading {
            t,
            rx: vec![0],
            tx: vec![0],
            channels: n,
        };
        let counts = [(0.0, 4), (1.0, 4), (1.5, 0), (2.0, 1), (3.0, 4), (4.0, 4)];
        let r: Vec<Reading> = counts.iter().map(|&(t, n)| at(t, Some(n))).collect();
        assert_eq!(all_channels_back(&r, 1.2, 1.2), Some(After(1.8)));
        assert_eq!(all_channels_back(&r, 1.2, 3.5), Some(After(0.5)));
        assert_eq!(all_channels_back(&r, 3.0, 3.0), None);
        assert_eq!(
            all_channels_back(&[at(0.0, None), at(1.0, None)], 0.5, 0.5),
            None
        );
        assert_eq!(all_channels_back(&r[..4], 1.2, 1.2), Some(NotWithin(0.8)));
    }
}
