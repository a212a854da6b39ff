//! What a soak must show at its end, and the files it leaves: pass/fail with the reasons,
//! `summary.json`, `samples.json`, `events.csv` (the CSV of samples is written as the run
//! goes).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use super::verdict::{self, Tolerance, Trend};
use super::Outcome;

/// The heap in use (or, without the counting allocator, RSS) may grow by 10 % of its
/// first-quarter level or 32 MiB, whichever is more, between the first and the last quarter.
/// Why so much: at any moment up to nine 8 MiB chunks are being generated, sent, received or
/// hashed by the workers and the reply-buffer pool holds up to 64 MiB; which of these happen
/// to be allocated at a sample swings the median by tens of MiB. A leak worth the name over
/// an hour (a buffer or a request per operation: thousands of them) is far larger. RSS is
/// shown beside it but not judged when the heap is counted: glibc keeps freed memory in its
/// arenas, so RSS moves with the allocator's fragmentation, not with what the client holds.
pub const HEAP: Tolerance = Tolerance {
    absolute: 32.0 * 1024.0,
    relative: 0.10,
};
/// Descriptors may grow by 6 between the quarters. Only samples with every planned channel
/// active are judged (a link down means four sockets fewer); in those the count is the 16
/// channel sockets, the process's fixed ones, and at a given moment up to three server files
/// being hashed by the upload checks and three pipes of a testbed command. A socket leaked
/// per flap would add about 200 an hour, one per operation thousands.
pub const FDS: Tolerance = Tolerance {
    absolute: 6.0,
    relative: 0.0,
};
/// Live tasks may grow by 40 between the quarters (same samples as the descriptors): the
/// channels' reader and writer tasks and the session's own are constant, but every transfer
/// in flight has helpers (its requests in flight, read-ahead, write-behind, hash jobs) and the
/// library spawns short ones (orphan closes, break acks, probes, binds); six transfers at once
/// swung the count between 77 and 141 in a 3-minute run. The exact check is the one at rest
/// ([`AT_REST_SLACK`]); this one catches a leak that grows while the run goes on: a task per
/// flap adds about 200 an hour, one per operation thousands.
pub const TASKS: Tolerance = Tolerance {
    absolute: 40.0,
    relative: 0.0,
};
/// At rest after the run the process may hold at most this many more descriptors or tasks
/// than at rest before it (a bind or a probe that had just started).
pub const AT_REST_SLACK: u64 = 2;
/// At rest after the run the heap may hold at most this much more than at rest before it:
/// what the session learns as it goes and keeps (the interface list, per-channel counters
/// and histories, the lease table's reserved keys) and the runtime's and the allocator's own
/// bookkeeping. The reply-buffer pool is not in it: idle for 10 s, it is released.
pub const HEAP_AT_REST_SLACK_KIB: u64 = 4 * 1024;
/// At rest after the run, with the C allocator asked to return its free memory
/// (`malloc_trim`), RSS may exceed RSS at rest before it by at most this much: what glibc
/// cannot return because blocks still in use share pages with freed ones in its per-thread
/// arenas (fragmentation left by the run's 1-8 MiB buffers), and thread stacks. The client's
/// own share of it is judged by the heap check above.
pub const RSS_AT_REST_SLACK_KIB: u64 = 64 * 1024;
/// The same bound for the smbfuse daemon, whose runtime and FUSE threads spread the same
/// buffers over more arenas: measured 47-93 MiB above its RSS before a 1-4 minute run, after
/// its own `malloc_trim`, with its heap in use back within 1 MiB (`/proc/PID/smaps`: the
/// resident pages are in glibc's per-thread arena heaps, not in live blocks).
pub const MOUNT_RSS_AT_REST_SLACK_KIB: u64 = 128 * 1024;

/// The run's verdict: every reason it failed (empty: passed).
pub fn judge(o: &Outcome) -> Vec<String> {
    let mut why = Vec::new();
    let t = &o.tally;
    for f in t
        .failures
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
    {
        why.push(format!("operation failed: {f}"));
    }
    for e in o
        .faults
        .errors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
    {
        why.push(format!("testbed fault command failed: {e}"));
    }
    if o.interrupted {
        why.push("interrupted by a signal before the end".into());
    }
    let restarts = o.faults.count("restart");
    if restarts < 2 {
        why.push(format!("only {restarts} of 2 smbd restarts were done"));
    }
    let last = &o.last;
    if last.opens_lost > 0 {
        why.push(format!("{} open(s) lost", last.opens_lost));
    }
    if (last.sessions_reestablished as usize) < restarts {
        why.push(format!(
            "{} smbd restart(s) but only {} session re-establishment(s)",
            restarts, last.sessions_reestablished
        ));
    }
    let (before, after) = (&o.rest.0, &o.rest.1);
    if after.channels < last.channels_planned {
        why.push(format!(
            "at the end {} of {} planned channels are active",
            after.channels, last.channels_planned
        ));
    }
    if after.fds > before.fds + AT_REST_SLACK {
        why.push(format!(
            "at rest the process holds {} file descriptors after the run, {} before",
            after.fds, before.fds
        ));
    }
    if after.tasks > before.tasks + AT_REST_SLACK {
        why.push(format!(
            "at rest the runtime has {} live tasks after the run, {} before",
            after.tasks, before.tasks
        ));
    }
    if let (Some(b), Some(a)) = (before.heap_bytes, after.heap_bytes) {
        if a / 1024 > b / 1024 + HEAP_AT_REST_SLACK_KIB {
            why.push(format!(
                "at rest the heap holds {} KiB after the run, {} KiB before (tolerance +{} KiB)",
                a / 1024,
                b / 1024,
                HEAP_AT_REST_SLACK_KIB
            ));
        }
    }
    let rss_slack = if o.through_mount {
        MOUNT_RSS_AT_REST_SLACK_KIB
    } else {
        RSS_AT_REST_SLACK_KIB
    };
    if after.rss_kib > before.rss_kib + rss_slack {
        why.push(format!(
            "at rest RSS is {} KiB after the run, {} KiB before (tolerance +{rss_slack} KiB)",
            after.rss_kib, before.rss_kib
        ));
    }
    for (kind, b, a) in super::grown_kinds(&before.library, &after.library) {
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
    match &o.sessions_at_server {
        Ok(n) if *n == o.expected_sessions => {}
        Ok(n) => why.push(format!(
            "smbd lists {n} sessions at the end, expected {}",
            o.expected_sessions
        )),
        Err(e) => why.push(format!("cannot count the server's sessions: {e}")),
    }
    // The library's own interface poll, set to the sampling interval, must have run.
    let expected = o.ran_for.as_secs_f64() / o.settings.sample_every.as_secs_f64();
    if !o.through_mount && (last.interface_queries as f64) < 0.8 * expected {
        why.push(format!(
            "{} interface queries in {:.0} s, expected about {expected:.0}",
            last.interface_queries,
            o.ran_for.as_secs_f64()
        ));
    }
    if t.ops() == 0 {
        why.push("no operation completed".into());
    }
    for (name, unit, trend, tol) in trends(o) {
        match trend {
            Some(tr) => {
                if let Err(e) = verdict::judge(name, unit, &tr, tol) {
                    why.push(e);
                }
            }
            None => why.push(format!("too few samples to judge {name}")),
        }
    }
    why
}

type Judged = (&'static str, &'static str, Option<Trend>, Tolerance);

/// The RSS trend, shown (not judged) when the heap is judged instead.
fn rss_shown(o: &Outcome) -> Option<Trend> {
    if !o.samples.iter().any(|s| s.heap_kib > 0) {
        return None;
    }
    let points: Vec<(f64, f64)> = o
        .samples
        .iter()
        .map(|s| (s.t, s.rss_kib as f64 / 1024.0))
        .collect();
    verdict::trend(&points, o.settings.warmup().as_secs_f64())
}

/// Memory (the heap in use, or RSS), descriptors and tasks over the run, after the warm-up.
pub fn trends(o: &Outcome) -> [Judged; 3] {
    let warm = o.settings.warmup().as_secs_f64();
    let series = |f: fn(&super::Sample) -> f64| -> Vec<(f64, f64)> {
        o.samples.iter().map(|s| (s.t, f(s))).collect()
    };
    // Descriptors and tasks move with the number of channels; compare like with like.
    let full_plan = |f: fn(&super::Sample) -> f64| -> Vec<(f64, f64)> {
        o.samples
            .iter()
            .filter(|s| s.channels_planned > 0 && s.channels_active == s.channels_planned)
            .map(|s| (s.t, f(s)))
            .collect()
    };
    let mib = Tolerance {
        absolute: HEAP.absolute / 1024.0,
        relative: HEAP.relative,
    };
    let heap_counted = o.samples.iter().any(|s| s.heap_kib > 0);
    let memory = if heap_counted {
        (
            "heap in use",
            verdict::trend(&series(|s| s.heap_kib as f64 / 1024.0), warm),
        )
    } else {
        (
            "RSS",
            verdict::trend(&series(|s| s.rss_kib as f64 / 1024.0), warm),
        )
    };
    [
        (memory.0, "MiB", memory.1, mib),
        (
            "open fds",
            "",
            verdict::trend(&full_plan(|s| s.fds as f64), warm),
            FDS,
        ),
        (
            "tokio tasks",
            "",
            verdict::trend(&full_plan(|s| s.tasks as f64), warm),
            TASKS,
        ),
    ]
}

fn trend_json(t: &Option<Trend>, tol: Tolerance) -> serde_json::Value {
    match t {
        Some(t) => serde_json::json!({
            "first_quarter_median": t.first_quarter,
            "last_quarter_median": t.last_quarter,
            "growth": t.growth(),
            "allowed": tol.allowed(t.first_quarter),
            "min": t.min,
            "max": t.max,
            "samples": t.samples,
        }),
        None => serde_json::Value::Null,
    }
}

/// `summary.json`.
pub fn summary_json(o: &Outcome, reasons: &[String]) -> serde_json::Value {
    let t = &o.tally;
    let ld = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let kinds: serde_json::Map<String, serde_json::Value> =
        ["down", "drop", "rst", "rst-all", "restart"]
            .iter()
            .map(|k| (k.to_string(), o.faults.count(k).into()))
            .collect();
    let trends: serde_json::Map<String, serde_json::Value> = trends(o)
        .iter()
        .map(|(n, _, tr, tol)| (n.to_string(), trend_json(tr, *tol)))
        .collect();
    let (b, a) = (&o.rest.0, &o.rest.1);
    let library = |r: &super::AtRest| -> serde_json::Value {
        r.library
            .iter()
            .filter(|c| c.live > 0)
            .map(|c| (c.kind.label().to_string(), serde_json::Value::from(c.live)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    serde_json::json!({
        "passed": reasons.is_empty(),
        "reasons": reasons,
        "seed": o.settings.seed,
        "minutes_asked": o.settings.duration.as_secs_f64() / 60.0,
        "seconds_run": o.ran_for.as_secs_f64(),
        "links": o.settings.links,
        "rate_mbit": o.settings.rate_mbit,
        "uploaders": o.settings.uploaders,
        "downloaders": o.settings.downloaders,
        "faults": kinds,
        "operations": {
            "uploads": ld(&t.uploads),
            "downloads": ld(&t.downloads),
            "metadata_rounds": ld(&t.metadata_ops),
            "bytes_up_verified": ld(&t.bytes_up),
            "bytes_down_verified": ld(&t.bytes_down),
            "failed": ld(&t.failed),
            "listings_resumed": o.last.listings_resumed,
        },
        "failures": *t.failures.lock().unwrap_or_else(PoisonError::into_inner),
        "trends": trends,
        "at_rest": {
            "before": {"fds": b.fds, "tasks": b.tasks, "library_tasks": library(b), "rss_kib": b.rss_kib, "heap_bytes": b.heap_bytes, "channels": b.channels},
            "after": {"fds": a.fds, "tasks": a.tasks, "library_tasks": library(a), "rss_kib": a.rss_kib, "heap_bytes": a.heap_bytes, "channels": a.channels},
        },
        "first_sample": o.samples.first().map(|s| s.json()),
        "last_sample": o.last.json(),
        "open_at_server": o.open_at_server.clone().map_err(|e| e.to_string()).ok(),
        "sessions_at_server": o.sessions_at_server.clone().ok(),
    })
}

/// The summary in words.
pub fn summary_text(o: &Outcome, reasons: &[String]) -> String {
    let t = &o.tally;
    let ld = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let l = &o.last;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "soak: seed {}, {:.1} min over {} links at {} Mbit/s",
        o.settings.seed,
        o.ran_for.as_secs_f64() / 60.0,
        o.settings.links,
        o.settings.rate_mbit
    );
    let _ = writeln!(
        s,
        "faults: {} down, {} drop, {} rst, {} rst-all, {} smbd restarts",
        o.faults.count("down"),
        o.faults.count("drop"),
        o.faults.count("rst"),
        o.faults.count("rst-all"),
        o.faults.count("restart")
    );
    // Through a mount the same three counters are fio write+verify jobs, read-backs of the
    // renamed file, and `ls -R` rounds.
    let (up, down, meta) = if o.through_mount {
        ("fio write+verify jobs", "renamed-file read-backs", "ls -R")
    } else {
        ("uploads", "downloads", "metadata")
    };
    let _ = writeln!(
        s,
        "operations verified: {} {up} ({:.2} GiB), {} {down} ({:.2} GiB), {} {meta} \
         rounds; {} failed, {} listing(s) resumed",
        ld(&t.uploads),
        ld(&t.bytes_up) as f64 / (1u64 << 30) as f64,
        ld(&t.downloads),
        ld(&t.bytes_down) as f64 / (1u64 << 30) as f64,
        ld(&t.metadata_ops),
        ld(&t.failed),
        l.listings_resumed
    );
    let _ = writeln!(
        s,
        "failover: losses {} (silent {}), false alarms {}, replays {}, not replayed {}, \
         reconnects {}, sessions re-established {}, opens reclaimed {} / reopened {} / lost {}; \
         interface queries {}",
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
    for (name, unit, tr, tol) in trends(o) {
        if let Some(tr) = tr {
            let _ = writeln!(
                s,
                "{name}: first quarter {:.1} {unit}, last quarter {:.1} {unit} (+{:.1}, \
                 allowed +{:.1}); min {:.1}, max {:.1}",
                tr.first_quarter,
                tr.last_quarter,
                tr.growth(),
                tol.allowed(tr.first_quarter),
                tr.min,
                tr.max
            );
        }
    }
    if let Some(tr) = rss_shown(o) {
        let _ = writeln!(
            s,
            "RSS (shown, not judged): first quarter {:.1} MiB, last quarter {:.1} MiB; min {:.1}, \
             max {:.1}",
            tr.first_quarter, tr.last_quarter, tr.min, tr.max
        );
    }
    let (b, a) = (&o.rest.0, &o.rest.1);
    let _ = writeln!(
        s,
        "at rest before/after: fds {}/{}, tasks {}/{} (library {}/{}), RSS {}/{} MiB, \
         heap {}/{} KiB, channels {}/{}",
        b.fds,
        a.fds,
        b.tasks,
        a.tasks,
        b.library.iter().map(|c| c.live).sum::<u64>(),
        a.library.iter().map(|c| c.live).sum::<u64>(),
        b.rss_kib / 1024,
        a.rss_kib / 1024,
        b.heap_bytes.map_or("?".into(), |h| (h / 1024).to_string()),
        a.heap_bytes.map_or("?".into(), |h| (h / 1024).to_string()),
        b.channels,
        a.channels
    );
    if reasons.is_empty() {
        let _ = writeln!(s, "PASSED");
    } else {
        let _ = writeln!(s, "FAILED:");
        for r in reasons {
            let _ = writeln!(s, "  - {r}");
        }
    }
    s
}

/// Write `summary.json`, `samples.json` and `events.csv` into the run's directory.
pub fn write_files(o: &Outcome, reasons: &[String]) -> Result<(), String> {
    let dir = &o.settings.out_dir;
    let w = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))
    };
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    w("summary.json", pretty(&summary_json(o, reasons)))?;
    let samples: Vec<serde_json::Value> = o.samples.iter().map(|s| s.json()).collect();
    w("samples.json", pretty(&serde_json::Value::Array(samples)))?;
    let mut events = String::from("t_s,kind,link,hold_s,detail\n");
    for e in o
        .faults
        .events
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
    {
        let _ = writeln!(
            events,
            "{:.1},{},{},{:.2},{}",
            e.at,
            e.kind,
            e.link,
            e.hold,
            e.detail.replace(',', ";")
        );
    }
    w("events.csv", events)
}
