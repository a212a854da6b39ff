//! The soak's faults: random link flaps from a seeded RNG, one at a time, and smbd restarts
//! at fixed points of the run. Runs on a plain thread (the testbed's commands block) and
//! always undoes the fault it holds before returning, also when told to stop.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smb3_tests::Testbed;

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

/// Bounds of the random schedule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    /// Shortest and longest time a flapped link stays bad.
    hold: (Duration, Duration),
    /// Shortest and longest quiet time between two faults.
    gap: (Duration, Duration),
    /// When smbd is restarted, after the start.
    restarts: [Duration; 2],
}

impl Schedule {
    /// Holds of 0.5-10 s, gaps of 2-20 s (about 220 faults an hour), restarts at a third and
    /// two thirds of a run of `length`.
    pub(crate) fn for_run(length: Duration) -> Schedule {
        Schedule {
            hold: (Duration::from_millis(500), Duration::from_secs(10)),
            gap: (Duration::from_secs(2), Duration::from_secs(20)),
            restarts: [length / 3, length * 2 / 3],
        }
    }
}

/// The next flap: kind (rst-all rarer, it costs the whole session), link and hold.
fn draw(rng: &mut StdRng, links: usize, s: &Schedule) -> (Flap, usize, Duration) {
    let kind = match rng.random_range(0..10) {
        0..=2 => Flap::Down,
        3..=5 => Flap::Drop,
        6..=8 => Flap::Rst,
        _ => Flap::RstAll,
    };
    (
        kind,
        rng.random_range(1..=links),
        rng.random_range(s.hold.0..=s.hold.1),
    )
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
        eprintln!(
            "soak fault {:7.1} s {} link {} hold {:.1} s {}",
            e.at, e.kind, e.link, e.hold, e.detail
        );
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

/// Faults until `stop`: 10 s of quiet first, then flaps and the two restarts.
pub(crate) fn run(
    tb: &Testbed,
    seed: u64,
    schedule: Schedule,
    t0: Instant,
    stop: &AtomicBool,
    log: &FaultLog,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut restarts = schedule.restarts.iter().peekable();
    if !nap(Duration::from_secs(10), stop) {
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        let at = t0.elapsed().as_secs_f64();
        if restarts.next_if(|&&when| t0.elapsed() >= when).is_some() {
            let started = Instant::now();
            match tb.restart() {
                Ok(pid) => log.record(Event {
                    at,
                    kind: "restart",
                    link: 0,
                    hold: started.elapsed().as_secs_f64(),
                    detail: format!("smbd pid {pid}"),
                }),
                Err(e) => log.error(format!("restart at {at:.1} s: {e}")),
            }
        } else {
            let (kind, link, hold) = draw(&mut rng, tb.links().len(), &schedule);
            flap(tb, kind, link, hold, at, stop, log);
        }
        if !nap(rng.random_range(schedule.gap.0..=schedule.gap.1), stop) {
            return;
        }
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
    log.record(Event {
        at,
        kind: kind.name(),
        link: if kind == Flap::RstAll { 0 } else { link },
        hold: held.elapsed().as_secs_f64(),
        detail,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_bounds_and_repeat_with_the_seed() {
        let s = Schedule::for_run(Duration::from_secs(3600));
        let (mut a, mut b) = (StdRng::seed_from_u64(5), StdRng::seed_from_u64(5));
        let mut kinds = std::collections::HashSet::new();
        for _ in 0..500 {
            let (k, l, h) = draw(&mut a, 4, &s);
            assert_eq!((k, l, h), draw(&mut b, 4, &s));
            assert!((1..=4).contains(&l) && h >= s.hold.0 && h <= s.hold.1);
            kinds.insert(k);
        }
        assert_eq!(kinds.len(), 4);
        assert_eq!(
            s.restarts,
            [Duration::from_secs(1200), Duration::from_secs(2400)]
        );
    }
}
