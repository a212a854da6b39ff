//! The soak's faults: random link flaps from a seeded RNG, one at a time, held 0.5-10 s and
//! 2-20 s apart (about 220 an hour), and smbd restarts at a third and two thirds of the run.
//! Runs on a plain thread (the testbed's commands block) and always undoes the fault it holds
//! before returning, also when told to stop.

use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smb3_tests::Testbed;

/// How long a flapped link stays bad, and the quiet time between two faults.
const HOLD: RangeInclusive<Duration> = Duration::from_millis(500)..=Duration::from_secs(10);
const GAP: RangeInclusive<Duration> = Duration::from_secs(2)..=Duration::from_secs(20);

/// How a link fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Flap {
    /// The server side of the link goes down: packets lost, the client's NIC loses carrier.
    Down,
    /// The server side silently drops everything it sends; carrier stays, so only the
    /// client's progress watch finds it.
    Drop,
    /// The link's connections are reset, then the link is held down, so the slot cannot be
    /// bound again at once.
    Rst,
    /// Every connection is reset at once: the session must be re-established.
    RstAll,
}

impl Flap {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Flap::Down => "down",
            Flap::Drop => "drop",
            Flap::Rst => "rst",
            Flap::RstAll => "rst-all",
        }
    }
}

/// The next flap: kind (rst-all rarer, it costs the whole session), link and hold.
fn draw(rng: &mut StdRng, links: usize) -> (Flap, usize, Duration) {
    let kinds = [Flap::Down, Flap::Drop, Flap::Rst];
    let kind = kinds
        .get(rng.random_range(0..10) / 3)
        .copied()
        .unwrap_or(Flap::RstAll);
    (kind, rng.random_range(1..=links), rng.random_range(HOLD))
}

/// One fault done, a line of `events.csv`.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    /// Seconds after the start.
    pub(crate) at: f64,
    /// A flap's name or `restart`.
    pub(crate) kind: &'static str,
    /// 0 for every link or the server.
    pub(crate) link: usize,
    /// Seconds held.
    pub(crate) hold: f64,
    /// What the testbed said.
    pub(crate) detail: String,
}

/// What the fault thread did, shared with the sampler and the report.
#[derive(Debug, Default)]
pub(crate) struct FaultLog {
    pub(crate) done: AtomicU64,
    pub(crate) events: Mutex<Vec<Event>>,
    /// Testbed commands that failed: the run is then not trustworthy.
    pub(crate) errors: Mutex<Vec<String>>,
}

impl FaultLog {
    fn record(&self, e: Event) {
        let (at, kind, link, hold, detail) = (e.at, e.kind, e.link, e.hold, &e.detail);
        eprintln!("soak fault {at:7.1} s {kind} link {link} hold {hold:.1} s {detail}");
        self.done.fetch_add(1, Ordering::Relaxed);
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(e);
    }

    fn error(&self, what: String) {
        eprintln!("soak fault ERROR {what}");
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(what);
    }

    /// Events of one kind.
    pub(crate) fn count(&self, kind: &str) -> usize {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        events.iter().filter(|e| e.kind == kind).count()
    }
}

/// Sleeps `d`, waking early when `stop` is set; whether it slept the whole time.
fn nap(d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(100)));
    }
    true
}

/// Faults until `stop`: 10 s of quiet first, then flaps, and smbd restarted at a third and
/// two thirds of `length`.
pub(crate) fn run(
    tb: &Testbed,
    seed: u64,
    length: Duration,
    t0: Instant,
    stop: &AtomicBool,
    log: &FaultLog,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut restarts = [length / 3, length * 2 / 3].into_iter().peekable();
    let mut go_on = nap(Duration::from_secs(10), stop);
    while go_on && !stop.load(Ordering::Relaxed) {
        let at = t0.elapsed().as_secs_f64();
        if restarts.next_if(|&when| t0.elapsed() >= when).is_some() {
            let started = Instant::now();
            match tb.restart() {
                Ok(pid) => {
                    let hold = started.elapsed().as_secs_f64();
                    log.record(Event {
                        at,
                        kind: "restart",
                        link: 0,
                        hold,
                        detail: format!("smbd pid {pid}"),
                    })
                }
                Err(e) => log.error(format!("restart at {at:.1} s: {e}")),
            }
        } else {
            let (kind, link, hold) = draw(&mut rng, tb.links().len());
            flap(tb, kind, link, hold, at, stop, log);
        }
        go_on = nap(rng.random_range(GAP), stop);
    }
}

/// One flap at `at`: break, hold (cut short by `stop`), repair. A failed repair is retried:
/// a link left down would make the rest of the run and the final checks meaningless.
fn flap(
    tb: &Testbed,
    kind: Flap,
    link: usize,
    hold: Duration,
    at: f64,
    stop: &AtomicBool,
    log: &FaultLog,
) {
    let reset = |n: usize| format!("{n} connection(s) reset");
    let broke = match kind {
        Flap::Down => tb.link_down(link).map(|()| String::new()),
        Flap::Drop => tb.drop_link(link).map(|()| String::new()),
        Flap::Rst => tb
            .cut(Some(link))
            .and_then(|n| tb.link_down(link).map(|()| reset(n))),
        Flap::RstAll => tb.cut(None).map(reset),
    };
    let detail = broke.unwrap_or_else(|e| {
        log.error(format!("{} link {link} at {at:.1} s: {e}", kind.name()));
        "(failed)".into()
    });
    let held = Instant::now();
    if kind != Flap::RstAll {
        nap(hold, stop);
    }
    for attempt in 1..=5 {
        let repaired = match kind {
            Flap::Down | Flap::Rst => tb.link_up(link),
            Flap::Drop => tb.undrop(link),
            Flap::RstAll => Ok(()),
        };
        match repaired {
            Ok(()) => break,
            Err(e) => log.error(format!(
                "repair of {} link {link}, try {attempt}: {e}",
                kind.name()
            )),
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let (link, hold) = (
        if kind == Flap::RstAll { 0 } else { link },
        held.elapsed().as_secs_f64(),
    );
    log.record(Event {
        at,
        kind: kind.name(),
        link,
        hold,
        detail,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_bounds_and_repeat_with_the_seed() {
        let (mut a, mut b) = (StdRng::seed_from_u64(5), StdRng::seed_from_u64(5));
        let mut kinds = std::collections::HashSet::new();
        for _ in 0..500 {
            let (k, l, h) = draw(&mut a, 4);
            assert_eq!((k, l, h), draw(&mut b, 4));
            assert!((1..=4).contains(&l) && HOLD.contains(&h));
            kinds.insert(k);
        }
        assert_eq!(kinds.len(), 4);
    }
}
