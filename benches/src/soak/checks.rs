//! What a soak must show at its end, and the files it leaves: pass or fail with the reasons,
//! `summary.json`, `samples.json` and `events.csv` (`samples.csv` is written as the run goes).
//!
//! Leaks are judged two ways: at rest (before the workload against after it), and as a trend
//! over the run: the median of the first quarter of the samples after the warm-up against the
//! median of the last quarter. Medians, because a sample that lands during a flap (four
//! sockets fewer, a reconnect task more) or a 64 MiB upload is an outlier of the moment.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::PoisonError;

use serde_json::{json, Value};

use super::{grown_kinds, Outcome, Rest, Sample};
use crate::stats::{median, min_max};

/// How much a quantity may grow between the quarters: the larger of an absolute amount and a
/// share of the first quarter's level.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Tolerance(f64, f64);

impl Tolerance {
    fn allowed(&self, level: f64) -> f64 {
        self.0.max(self.1 * level)
    }
}

/// The heap in use (MiB; RSS without the counting allocator) may grow by 32 MiB or 10 %. Up
/// to nine 8 MiB chunks are being generated, sent, received or hashed at any moment and the
/// reply-buffer pool holds up to 64 MiB, so which of these are allocated at a sample swings
/// the median by tens of MiB; a leak worth the name over an hour (a buffer or a request per
/// operation: thousands) is far larger. RSS is shown but not judged when the heap is counted:
/// it moves with glibc's fragmentation, not with what the client holds.
const MEMORY: Tolerance = Tolerance(32.0, 0.10);
/// Descriptors may grow by 6, judged only over samples with every planned channel active (a
/// link down means four sockets fewer). At a sample up to three server files may be open for
/// the upload checks and three pipes for a testbed command; a socket leaked per flap would
/// add about 200 an hour.
const FDS: Tolerance = Tolerance(6.0, 0.0);
/// Live tasks may grow by 40 (same samples): every transfer in flight has helpers (requests,
/// read-ahead, write-behind, hash jobs) and the library spawns short ones (orphan closes,
/// break acks, probes, binds); six transfers swung the count between 77 and 141 in a short
/// run. The exact check is the one at rest; this one catches a leak that grows as the run
/// goes: a task per flap adds about 200 an hour.
const TASKS: Tolerance = Tolerance(40.0, 0.0);
/// At rest the process may hold this many more descriptors or tasks than before the run (a
/// bind or a probe that had just started).
const AT_REST_SLACK: u64 = 2;
/// At rest the heap may hold this much more (KiB): what the session learns and keeps
/// (interface list, per-channel counters, reserved lease keys) and the runtime's
/// bookkeeping. The reply-buffer pool is not in it: idle for 10 s, it is released.
const HEAP_AT_REST_SLACK_KIB: u64 = 4 * 1024;
/// At rest, after `malloc_trim`, RSS may exceed RSS before by this much (KiB): what glibc
/// cannot return because blocks in use share pages with freed ones in its per-thread arenas,
/// and thread stacks; the client's own share is judged by the heap check. The smbfuse daemon,
/// whose runtime and FUSE threads spread the same buffers over more arenas, was measured at
/// 47-93 MiB above its RSS before a 1-4 minute run, its heap back within 1 MiB.
const RSS_AT_REST_SLACK_KIB: (u64, u64) = (64 * 1024, 128 * 1024);

/// One quantity over the run after the warm-up.
#[derive(Debug, Clone, PartialEq)]
struct Trend {
    first_quarter: f64,
    last_quarter: f64,
    min: f64,
    max: f64,
    samples: usize,
}

/// The trend of `(seconds, value)` points at or after `warmup` seconds; `None` with fewer
/// than four (no quarters to compare).
fn trend(points: &[(f64, f64)], warmup: f64) -> Option<Trend> {
    let kept: Vec<f64> = points
        .iter()
        .filter(|(t, _)| *t >= warmup)
        .map(|p| p.1)
        .collect();
    let (q, (min, max)) = (kept.len() / 4, min_max(&kept));
    let (first_quarter, last_quarter) = (median(&kept[..q]), median(&kept[kept.len() - q..]));
    (q > 0).then_some(Trend {
        first_quarter,
        last_quarter,
        min,
        max,
        samples: kept.len(),
    })
}

/// `Err` with the reason when `t` grew by more than `tolerance` allows.
fn judge_trend(name: &str, unit: &str, t: &Trend, tolerance: Tolerance) -> Result<(), String> {
    let (first, last) = (t.first_quarter, t.last_quarter);
    let (growth, allowed) = (last - first, tolerance.allowed(first));
    if growth <= allowed {
        return Ok(());
    }
    Err(format!(
        "{name} grew from {first:.1} to {last:.1} {unit} between the first and last quarter \
         (+{growth:.1}, tolerance +{allowed:.1})"
    ))
}

type Judged = (&'static str, &'static str, Option<Trend>, Tolerance);

fn heap_counted(o: &Outcome) -> bool {
    o.samples.iter().any(|s| s.heap_kib > 0)
}

/// The trend of `f`; with `full_plan`, over the samples with every planned channel up only.
fn series(o: &Outcome, full_plan: bool, f: fn(&Sample) -> f64) -> Option<Trend> {
    let all_up = |s: &&Sample| s.channels_planned > 0 && s.channels_active == s.channels_planned;
    let kept = o.samples.iter().filter(|s| !full_plan || all_up(s));
    trend(
        &kept.map(|s| (s.t, f(s))).collect::<Vec<_>>(),
        o.settings.warmup().as_secs_f64(),
    )
}

/// Memory (the heap in use, or RSS; MiB), descriptors and tasks over the run. Descriptors
/// and tasks move with the number of channels, so only samples with every planned channel up
/// are compared.
fn trends(o: &Outcome) -> [Judged; 3] {
    let memory = match heap_counted(o) {
        true => (
            "heap in use",
            series(o, false, |s| s.heap_kib as f64 / 1024.0),
        ),
        false => ("RSS", series(o, false, |s| s.rss_kib as f64 / 1024.0)),
    };
    [
        (memory.0, "MiB", memory.1, MEMORY),
        ("open fds", "", series(o, true, |s| s.fds as f64), FDS),
        (
            "tokio tasks",
            "",
            series(o, true, |s| s.tasks as f64),
            TASKS,
        ),
    ]
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// The run's verdict: every reason it failed (none: passed).
pub fn judge(o: &Outcome) -> Vec<String> {
    let failures = o
        .tally
        .failures
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut why: Vec<String> = failures
        .iter()
        .map(|f| format!("operation failed: {f}"))
        .collect();
    let errors = o
        .faults
        .errors
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    why.extend(
        errors
            .iter()
            .map(|e| format!("testbed fault command failed: {e}")),
    );
    let (restarts, last, mount) = (
        o.faults.count("restart"),
        &o.last,
        o.settings.mount.is_some(),
    );
    let (b, a) = (&o.rest.0 .0, &o.rest.1 .0);
    let rss_slack = if mount {
        RSS_AT_REST_SLACK_KIB.1
    } else {
        RSS_AT_REST_SLACK_KIB.0
    };
    // The library's own interface poll, set to the sampling interval, must have run; the
    // mount's (15 minutes) is not checked.
    let queries = o.ran_for.as_secs_f64() / o.settings.sample_every.as_secs_f64();
    let checks = [
        (o.interrupted, "interrupted by a signal before the end".to_string()),
        (restarts < 2, format!("only {restarts} of 2 smbd restarts were done")),
        (last.opens_lost > 0, format!("{} open(s) lost", last.opens_lost)),
        (
            (last.sessions_reestablished as usize) < restarts,
            format!("{restarts} smbd restart(s) but only {} session re-establishment(s)", last.sessions_reestablished),
        ),
        (
            a.channels_active < last.channels_planned,
            format!("at the end {} of {} planned channels are active", a.channels_active, last.channels_planned),
        ),
        (
            a.fds > b.fds + AT_REST_SLACK,
            format!("at rest the process holds {} file descriptors after the run, {} before", a.fds, b.fds),
        ),
        (
            a.tasks > b.tasks + AT_REST_SLACK,
            format!("at rest the runtime has {} live tasks after the run, {} before", a.tasks, b.tasks),
        ),
        (
            a.heap_kib > b.heap_kib + HEAP_AT_REST_SLACK_KIB,
            format!(
                "at rest the heap holds {} KiB after the run, {} KiB before (tolerance +{HEAP_AT_REST_SLACK_KIB} KiB)",
                a.heap_kib, b.heap_kib
            ),
        ),
        (
            a.rss_kib > b.rss_kib + rss_slack,
            format!("at rest RSS is {} KiB after the run, {} KiB before (tolerance +{rss_slack} KiB)", a.rss_kib, b.rss_kib),
        ),
        (
            !mount && (last.interface_queries as f64) < 0.8 * queries,
            format!(
                "{} interface queries in {:.0} s, expected about {queries:.0}",
                last.interface_queries,
                o.ran_for.as_secs_f64()
            ),
        ),
        (o.tally.ops() == 0, "no operation completed".into()),
    ];
    why.extend(checks.into_iter().filter(|c| c.0).map(|c| c.1));
    for (kind, b, a) in grown_kinds(&o.rest.0 .1, &o.rest.1 .1) {
        why.push(format!(
            "at rest the library has {a} live {kind} task(s) after the run, {b} before"
        ));
    }
    match &o.open_at_server {
        Ok(open) if open.is_empty() => {}
        Ok(open) => why.push(format!(
            "{} handle(s) still open at the server after the run: {}",
            open.len(),
            open.join(", ")
        )),
        Err(e) => why.push(format!("cannot list the server's open files: {e}")),
    }
    let sessions = if mount { 0 } else { 1 };
    match &o.sessions_at_server {
        Ok(n) if *n == sessions => {}
        Ok(n) => why.push(format!(
            "smbd lists {n} sessions at the end, expected {sessions}"
        )),
        Err(e) => why.push(format!("cannot count the server's sessions: {e}")),
    }
    for (name, unit, trend, tolerance) in trends(o) {
        match trend {
            Some(t) => why.extend(judge_trend(name, unit, &t, tolerance).err()),
            None => why.push(format!("too few samples to judge {name}")),
        }
    }
    why
}

fn rest_json(Rest(s, kinds): &Rest) -> Value {
    let library: serde_json::Map<String, Value> = kinds
        .iter()
        .filter(|k| k.1 > 0)
        .map(|(k, n)| (k.clone(), (*n).into()))
        .collect();
    json!({"fds": s.fds, "tasks": s.tasks, "library_tasks": library, "rss_kib": s.rss_kib,
        "heap_bytes": s.heap_kib * 1024, "channels": s.channels_active})
}

fn summary_json(o: &Outcome, reasons: &[String]) -> Value {
    let (t, s) = (&o.tally, &o.settings);
    let kinds = ["down", "drop", "rst", "rst-all", "restart"]
        .map(|k| (k.to_string(), o.faults.count(k).into()));
    let trend_json = |(name, _, t, tol): Judged| {
        let v = t.map(|t| {
            json!({"first_quarter_median": t.first_quarter, "last_quarter_median": t.last_quarter,
                "growth": t.last_quarter - t.first_quarter, "allowed": tol.allowed(t.first_quarter),
                "min": t.min, "max": t.max, "samples": t.samples})
        });
        (name.to_string(), v.unwrap_or_default())
    };
    json!({
        "passed": reasons.is_empty(),
        "reasons": reasons,
        "seed": s.seed,
        "minutes_asked": s.duration.as_secs_f64() / 60.0,
        "seconds_run": o.ran_for.as_secs_f64(),
        "links": s.links,
        "rate_mbit": s.rate_mbit,
        "uploaders": s.uploaders,
        "downloaders": s.downloaders,
        "faults": serde_json::Map::from_iter(kinds),
        "operations": {
            "uploads": load(&t.uploads),
            "downloads": load(&t.downloads),
            "metadata_rounds": load(&t.metadata_ops),
            "bytes_up_verified": load(&t.bytes_up),
            "bytes_down_verified": load(&t.bytes_down),
            "failed": load(&t.failed),
            "listings_resumed": o.last.listings_resumed,
        },
        "failures": *t.failures.lock().unwrap_or_else(PoisonError::into_inner),
        "trends": serde_json::Map::from_iter(trends(o).map(trend_json)),
        "at_rest": {"before": rest_json(&o.rest.0), "after": rest_json(&o.rest.1)},
        "first_sample": o.samples.first().map(Sample::json),
        "last_sample": o.last.json(),
        "open_at_server": o.open_at_server.clone().ok(),
        "sessions_at_server": o.sessions_at_server.clone().ok(),
    })
}

/// The summary in words.
pub fn summary_text(o: &Outcome, reasons: &[String]) -> String {
    let (t, l, s) = (&o.tally, &o.last, &o.settings);
    let gib = |a: &AtomicU64| load(a) as f64 / (1u64 << 30) as f64;
    let count = |k| o.faults.count(k);
    let (up, down, meta) = match s.mount.is_some() {
        true => ("fio write+verify jobs", "renamed-file read-backs", "ls -R"),
        false => ("uploads", "downloads", "metadata"),
    };
    let mut text = format!(
        "soak: seed {}, {:.1} min over {} links at {} Mbit/s\n\
         faults: {} down, {} drop, {} rst, {} rst-all, {} smbd restarts\n\
         operations verified: {} {up} ({:.2} GiB), {} {down} ({:.2} GiB), {} {meta} rounds; {} failed, {} \
         listing(s) resumed\n\
         failover: losses {} (silent {}), false alarms {}, replays {}, not replayed {}, reconnects {}, sessions \
         re-established {}, opens reclaimed {} / reopened {} / lost {}; interface queries {}\n",
        s.seed,
        o.ran_for.as_secs_f64() / 60.0,
        s.links,
        s.rate_mbit,
        count("down"),
        count("drop"),
        count("rst"),
        count("rst-all"),
        count("restart"),
        load(&t.uploads),
        gib(&t.bytes_up),
        load(&t.downloads),
        gib(&t.bytes_down),
        load(&t.metadata_ops),
        load(&t.failed),
        l.listings_resumed,
        l.channel_losses,
        l.silent_losses,
        l.false_alarms,
        l.replays,
        l.not_replayed,
        l.reconnects,
        l.sessions_reestablished,
        l.opens_reclaimed,
        l.opens_reopened,
        l.opens_lost,
        l.interface_queries
    );
    let rss = series(o, false, |s| s.rss_kib as f64 / 1024.0).filter(|_| heap_counted(o));
    let shown = rss.map(|t| ("RSS (shown, not judged)", "MiB", Some(t), None));
    let judged = trends(o).map(|(name, unit, t, tol)| (name, unit, t, Some(tol)));
    for (name, unit, t, tol) in judged.into_iter().chain(shown) {
        let Some(t) = t else { continue };
        let (first, last) = (t.first_quarter, t.last_quarter);
        let allowed = tol.map_or(String::new(), |tol| {
            format!(
                " (+{:.1}, allowed +{:.1})",
                last - first,
                tol.allowed(first)
            )
        });
        let (min, max) = (t.min, t.max);
        let _ = writeln!(
            text,
            "{name}: first quarter {first:.1} {unit}, last quarter {last:.1} {unit}{allowed}; min {min:.1}, max {max:.1}"
        );
    }
    let (b, a) = (&o.rest.0 .0, &o.rest.1 .0);
    let _ = writeln!(
        text,
        "at rest before/after: fds {}/{}, tasks {}/{} (library {}/{}), RSS {}/{} MiB, heap {}/{} KiB, channels {}/{}",
        b.fds,
        a.fds,
        b.tasks,
        a.tasks,
        b.library_tasks,
        a.library_tasks,
        b.rss_kib / 1024,
        a.rss_kib / 1024,
        b.heap_kib,
        a.heap_kib,
        b.channels_active,
        a.channels_active
    );
    text.push_str(if reasons.is_empty() {
        "PASSED\n"
    } else {
        "FAILED:\n"
    });
    for r in reasons {
        let _ = writeln!(text, "  - {r}");
    }
    text
}

/// Writes `summary.json`, `samples.json` and `events.csv` into the run's directory.
pub fn write_files(o: &Outcome, reasons: &[String]) -> Result<(), String> {
    let dir = &o.settings.out_dir;
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))
    };
    let pretty = |v: Value| serde_json::to_string_pretty(&v).unwrap_or_default();
    write("summary.json", pretty(summary_json(o, reasons)))?;
    write(
        "samples.json",
        pretty(o.samples.iter().map(Sample::json).collect()),
    )?;
    let mut events = String::from("t_s,kind,link,hold_s,detail\n");
    for e in o
        .faults
        .events
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
    {
        let detail = e.detail.replace(',', ";");
        let _ = writeln!(
            events,
            "{:.1},{},{},{:.2},{detail}",
            e.at, e.kind, e.link, e.hold
        );
    }
    write("events.csv", events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarters_use_medians_skip_the_warm_up_and_allow_their_tolerance() {
        let points = |v: &[f64]| {
            v.iter()
                .enumerate()
                .map(|(i, v)| (i as f64 * 10.0, *v))
                .collect::<Vec<_>>()
        };
        // Warm-up (t < 20) at 1; first quarter 10, 10, 99 (an outlier); last quarter 12.
        let p = points(&[
            1.0, 1.0, 10.0, 10.0, 99.0, 11.0, 11.0, 11.0, 12.0, 12.0, 12.0,
        ]);
        let t = trend(&p, 20.0).expect("enough samples");
        assert_eq!(
            (t.samples, t.first_quarter, t.last_quarter, t.min, t.max),
            (9, 10.0, 12.0, 10.0, 99.0)
        );
        assert!(trend(&p[..5], 20.0).is_none());
        let t = trend(
            &points(&[100.0, 100.0, 100.0, 100.0, 130.0, 130.0, 130.0, 130.0]),
            0.0,
        )
        .unwrap();
        assert!(judge_trend("x", "u", &t, Tolerance(5.0, 0.5)).is_ok());
        assert!(judge_trend("x", "u", &t, Tolerance(5.0, 0.1))
            .unwrap_err()
            .contains("100.0 to 130.0"));
        // Shrinking is never a leak.
        let down = trend(&points(&[9.0, 9.0, 9.0, 9.0, 1.0, 1.0, 1.0, 1.0]), 0.0).unwrap();
        assert!(judge_trend("x", "u", &down, Tolerance(5.0, 0.1)).is_ok());
    }
}
