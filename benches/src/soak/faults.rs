//! The soak's faults: random link flaps from a seeded RNG, one at a time, and smbd restarts
//! at fixed points of the run. Runs on a plain thread (the testbed's commands block) and always
//! undoes the fault it holds before returning, also when told to stop.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smb3_tests::Testbed;

/// How a link fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flap {
    /// The server side of the link goes down: packets lost, the client's NIC loses carrier.
    Down,
    /// The server side silently drops everything it sends; carrier stays (found only by the
    /// client's progress watch).
    Drop,
    /// The server resets the link's connections (the client sees RST), then the link stays
    /// down for the hold, so the slot cannot be bound again at once.
    Rst,
    /// The server resets every connection at once: the session must be re-established.
    RstAll,
}

impl Flap {
    /// Short name (events, counts).
    pub fn name(self) -> &'static str {
        match self {
            Flap::Down => "down",
            Flap::Drop => "drop",
            Flap::Rst => "rst",
            Flap::RstAll => "rst-all",
        }
    }

    /// Every kind, in report order.
    pub const ALL: [Flap; 4] = [Flap::Down, Flap::Drop, Flap::Rst, Flap::RstAll];
}

/// Bounds of the random schedule.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Shortest and longest time a flapped link stays bad (issue 14: 0.5-10 s).
    pub hold: (Duration, Duration),
    /// Shortest and longest quiet time between two faults.
    pub gap: (Duration, Duration),
    /// Times after the start at which smbd is restarted.
    pub restarts: [Duration; 2],
}

impl Schedule {
    /// The schedule of a run of `length`: holds of 0.5-10 s, gaps of 2-20 s (about 220
    /// faults an hour), restarts at a third and two thirds of the run.
    pub fn for_run(length: Duration) -> Schedule {
        Schedule {
            hold: (Duration::from_millis(500), Duration::from_secs(10)),
            gap: (Duration::from_secs(2), Duration::from_secs(20)),
            restarts: [length / 3, length * 2 / 3],
        }
    }
}

/// The next flap drawn from `rng`: kind (rst-all rarer: it costs the whole session), link
/// (1..=links) and hold.
pub fn draw(rng: &mut StdRng, links: usize, s: &Schedule) -> (Flap, usize, Duration) {
    let kind = match rng.random_range(0..10) {
        0..=2 => Flap::Down,
        3..=5 => Flap::Drop,
        6..=8 => Flap::Rst,
        _ => Flap::RstAll,
    };
    let link = rng.random_range(1..=links);
    let hold = rng.random_range(s.hold.0..=s.hold.1);
    (kind, link, hold)
}

/// One fault done, for the events file.
#[derive(Debug, Clone)]
pub struct Event {
    /// Seconds after the start.
    pub at: f64,
    /// `down`, `drop`, `rst`, `rst-all` or `restart`.
    pub kind: &'static str,
    /// The link (0 for all / the server).
    pub link: usize,
    /// How long it was held, seconds.
    pub hold: f64,
    /// What the testbed said, or the error.
    pub detail: String,
}

/// What the fault thread did, shared with the sampler and the report.
#[derive(Debug, Default)]
pub struct FaultLog {
    /// Faults done so far (flaps and restarts).
    pub done: AtomicU64,
    /// Every event.
    pub events: Mutex<Vec<Event>>,
    /// Testbed commands that failed (the run is then not trustworthy).
    pub errors: Mutex<Vec<String>>,
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
    pub fn count(&self, kind: &str) -> usize {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|e| e.kind == kind)
            .count()
    }
}

/// Sleep `d`, waking early when `stop` is set; returns whether it slept the whole time.
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

/// Run faults until `stop`: first a quiet `lead_in`, then flaps and the two restarts.
pub fn run(
    tb: Arc<Testbed>,
    seed: u64,
    schedule: Schedule,
    lead_in: Duration,
    t0: Instant,
    stop: Arc<AtomicBool>,
    log: Arc<FaultLog>,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let links = tb.links().len();
    let mut restarts = schedule.restarts.iter().peekable();
    if !nap(lead_in, &stop) {
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        if restarts.peek().is_some_and(|at| t0.elapsed() >= **at) {
            restarts.next();
            let at = t0.elapsed().as_secs_f64();
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
            let (kind, link, hold) = draw(&mut rng, links, &schedule);
            flap(&tb, kind, link, hold, t0, &stop, &log);
        }
        let gap = rng.random_range(schedule.gap.0..=schedule.gap.1);
        if !nap(gap, &stop) {
            return;
        }
    }
}

/// One flap: break, hold (cut short by `stop`), repair. A failed repair is retried, since a
/// link left down would leave the rest of the run and the final checks meaningless.
fn flap(
    tb: &Testbed,
    kind: Flap,
    link: usize,
    hold: Duration,
    t0: Instant,
    stop: &AtomicBool,
    log: &FaultLog,
) {
    let at = t0.elapsed().as_secs_f64();
    let broke = match kind {
        Flap::Down => tb.link_down(link).map(|()| String::new()),
        Flap::Drop => tb.drop_link(link).map(|()| String::new()),
        Flap::Rst => tb.cut(Some(link)).and_then(|n| {
            tb.link_down(link)
                .map(|()| format!("{n} connection(s) reset"))
        }),
        Flap::RstAll => tb.cut(None).map(|n| format!("{n} connection(s) reset")),
    };
    let detail = match broke {
        Ok(d) => d,
        Err(e) => {
            log.error(format!("{} link {link} at {at:.1} s: {e}", kind.name()));
            String::from("(failed)")
        }
    };
    let held = Instant::now();
    if kind != Flap::RstAll {
        nap(hold, stop);
    }
    let repair = || match kind {
        Flap::Down | Flap::Rst => tb.link_up(link),
        Flap::Drop => tb.undrop(link),
        Flap::RstAll => Ok(()),
    };
    for attempt in 1..=5 {
        match repair() {
            Ok(()) => break,
            Err(e) => {
                log.error(format!(
                    "repair of {} link {link}, try {attempt}: {e}",
                    kind.name()
                ));
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
    let link_no = if kind == Flap::RstAll { 0 } else { link };
    log.record(Event {
        at,
        kind: kind.name(),
        link: link_no,
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
        let mut a = StdRng::seed_from_u64(5);
        let mut b = StdRng::seed_from_u64(5);
        let mut kinds = std::collections::HashSet::new();
        for _ in 0..500 {
            let (k, l, h) = draw(&mut a, 4, &s);
            assert_eq!((k, l, h), draw(&mut b, 4, &s));
            assert!((1..=4).contains(&l));
            assert!(h >= s.hold.0 && h <= s.hold.1);
            kinds.insert(k);
        }
        assert_eq!(kinds.len(), Flap::ALL.len());
        assert_eq!(
            s.restarts,
            [Duration::from_secs(1200), Duration::from_secs(2400)]
        );
    }
}
