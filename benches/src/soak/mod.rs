//! The soak (docs/RELIABILITY.md, "Soak"): one session over shaped links carries a continuous,
//! verified workload for a long time while links flap at random and smbd is restarted twice;
//! what the client holds (RSS, heap, descriptors, tasks), its channels and its failover
//! counters are sampled as it goes. At the end: pass or fail with the reasons, and the files
//! `samples.csv`, `samples.json`, `events.csv` and `summary.json` ([`checks`]).
//!
//! The workload runs through the library in-process ([`workload`]) or, with
//! [`Settings::mount`], through an smbfuse mount ([`mount`]). Both are seen the same way, as a
//! status document in the form of a mount's status socket and the process holding the
//! client, and share the testbed, the faults ([`faults`]), the samples ([`sampler`]) and the
//! checks.

pub mod checks;
mod faults;
pub mod heap;
mod mount;
mod sampler;
mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use smb3_tests::{Testbed, TestbedConfig};

use crate::Context;
use faults::FaultLog;
use sampler::{Sample, Sampling};

/// How a soak runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Length of the workload.
    pub duration: Duration,
    /// Seed of every random choice (faults, sizes, files, modes).
    pub seed: u64,
    /// Links of the testbed.
    pub links: usize,
    /// Rate of every link, Mbit/s.
    pub rate_mbit: u32,
    /// Upload workers (fio jobs through a mount).
    pub uploaders: usize,
    /// Download workers.
    pub downloaders: usize,
    /// Where the results go.
    pub out_dir: PathBuf,
    /// How often to sample, and the library's interface poll.
    pub sample_every: Duration,
    /// Through an smbfuse mount rather than the library: the `smbfuse` and `smbctl` to use.
    pub mount: Option<(PathBuf, PathBuf)>,
}

impl Settings {
    /// Samples before this are not judged for leaks: the reply-buffer pool fills, the
    /// allocator's arenas and tokio's blocking pool grow to their working size. A tenth of
    /// the run, 30 s to 2 minutes.
    fn warmup(&self) -> Duration {
        (self.duration / 10).clamp(Duration::from_secs(30), Duration::from_secs(120))
    }
}

/// Counts shared by the workers, the sampler and the report. Through a mount, uploads are
/// fio write+verify jobs, downloads renamed-file read-backs and metadata rounds `ls -R`.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) uploads: AtomicU64,
    pub(crate) downloads: AtomicU64,
    pub(crate) metadata_ops: AtomicU64,
    pub(crate) bytes_up: AtomicU64,
    pub(crate) bytes_down: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// Every failure, with the time and the worker.
    pub(crate) failures: Mutex<Vec<String>>,
}

impl Tally {
    fn ops(&self) -> u64 {
        [&self.uploads, &self.downloads, &self.metadata_ops]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Records a failure of `who`, stamped with the time since `t0`.
    pub(crate) fn fail(&self, t0: Instant, who: &str, what: String) {
        let line = format!("{:7.1} s {who}: {what}", t0.elapsed().as_secs_f64());
        eprintln!("soak FAILURE {line}");
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }
}

/// What every worker gets.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) tally: Arc<Tally>,
    /// Set when the run is over: workers finish their operation and return.
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) t0: Instant,
}

impl Ctx {
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// The client under soak as the checks see it.
#[derive(Clone)]
pub(crate) struct Subject {
    /// Its status document (channels, multichannel with failover counters, library tasks,
    /// heap), or nothing when it does not answer in the middle of a fault.
    pub(crate) status: Arc<dyn Fn() -> Option<Value> + Send + Sync>,
    /// The process holding it: `self` or the smbfuse daemon's pid.
    pub(crate) pid: String,
    /// The in-process client's runtime, whose live tasks are counted.
    pub(crate) runtime: Option<tokio::runtime::Handle>,
    /// How long it must be idle before it has given its free memory back.
    pub(crate) release: Duration,
}

/// The client at rest (workload stopped, every link up, every planned channel bound): a
/// sample, and the library's live tasks per kind.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rest(pub(crate) Sample, pub(crate) Vec<(String, u64)>);

impl Rest {
    fn describe(&self) -> String {
        let kinds: Vec<String> = self
            .1
            .iter()
            .filter(|k| k.1 > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let s = &self.0;
        format!(
            "fds {}, tasks {} (library: {}), RSS {} KiB, heap {} KiB, channels {}",
            s.fds,
            s.tasks,
            kinds.join(", "),
            s.rss_kib,
            s.heap_kib,
            s.channels_active
        )
    }
}

/// Kinds whose live count is above the one in `before`, with both counts.
fn grown_kinds(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64, u64)> {
    let before_of = |kind: &str| before.iter().find(|b| b.0 == kind).map_or(0, |b| b.1);
    let grown = after.iter().filter(|a| a.1 > before_of(&a.0));
    grown.map(|a| (a.0.clone(), before_of(&a.0), a.1)).collect()
}

impl Subject {
    fn sample(&self, t0: Instant) -> Sample {
        let status = (self.status)().unwrap_or_default();
        let tasks = self
            .runtime
            .as_ref()
            .map(|rt| rt.metrics().num_alive_tasks() as u64);
        sampler::of(t0.elapsed().as_secs_f64(), &status, &self.pid, tasks)
    }

    /// Waits (at most `patience`) until every planned channel is active and the library's
    /// tasks have settled, back to `before`'s counts or, without `before`, no longer falling;
    /// after a workload also until it has been idle long enough to release its memory. Then
    /// the in-process client's C allocator returns what it holds free, so that RSS shows what
    /// is in use.
    fn at_rest(&self, patience: Duration, before: Option<&Rest>) -> Rest {
        let start = Instant::now();
        let released = start + before.map_or(Duration::ZERO, |_| self.release);
        let (mut last, mut said): (Vec<(String, u64)>, bool) = (Vec::new(), false);
        while start.elapsed() < patience {
            if let Some(status) = (self.status)() {
                let kinds = sampler::kinds(&status);
                let settled = match before {
                    Some(b) => grown_kinds(&b.1, &kinds).is_empty(),
                    None => !last.is_empty() && kinds.iter().zip(&last).all(|(n, l)| n.1 >= l.1),
                };
                let grown = before
                    .map(|b| grown_kinds(&b.1, &kinds))
                    .unwrap_or_default();
                if !grown.is_empty() && !said {
                    let waiting: Vec<String> = grown
                        .iter()
                        .map(|(kind, b, a)| format!("{} {kind}", a - b))
                        .collect();
                    eprintln!(
                        "soak: waiting for library tasks above their counts at rest to end: {}",
                        waiting.join(", ")
                    );
                }
                said |= before.is_some();
                let planned = status["multichannel"]["planned"].as_u64().unwrap_or(0);
                let ready = planned > 0 && sampler::active(&status) >= planned && settled;
                last = kinds;
                if ready && Instant::now() >= released {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        if self.pid == "self" {
            heap::return_free_memory();
        }
        Rest(self.sample(start), last)
    }
}

/// Everything a finished run produced, for [`checks`].
pub struct Outcome {
    settings: Settings,
    ran_for: Duration,
    /// SIGINT or SIGTERM cut the run short.
    interrupted: bool,
    samples: Vec<Sample>,
    tally: Arc<Tally>,
    faults: Arc<FaultLog>,
    /// Before the workload and after it.
    rest: (Rest, Rest),
    /// Handles the server still listed after everything was closed.
    open_at_server: Result<Vec<String>, String>,
    sessions_at_server: Result<usize, String>,
    /// Taken at rest after the run.
    last: Sample,
}

/// How long the end of a run waits for the client to come to rest: channels bound again after
/// the last fault, the last background work done. The longest is a lease key held for a
/// durable open the server may still keep: its durable timeout and 5 s.
const REST_PATIENCE: Duration = Duration::from_secs(150);

/// The client of a run.
enum Client {
    Library(workload::Library),
    Mount(Arc<crate::fuse_mount::Mount>, PathBuf),
}

/// Runs the soak. `Err` only when it could not run at all (testbed, connect, files); what a
/// run finds is in the [`Outcome`] for [`checks::judge`].
pub fn run(s: &Settings) -> Result<Outcome, String> {
    std::fs::create_dir_all(&s.out_dir).ctx(format!("cannot create {}", s.out_dir.display()))?;
    let tb = Arc::new(Testbed::start(TestbedConfig::shaped(s.links, s.rate_mbit))?);
    let (stop, interrupted) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    on_signal(stop.clone(), interrupted.clone());
    let client = match &s.mount {
        None => Client::Library(workload::Library::start(&tb, s)?),
        Some((smbfuse, smbctl)) => {
            Client::Mount(Arc::new(mount::start(&tb, smbfuse)?), smbctl.clone())
        }
    };
    let subject = match &client {
        Client::Library(library) => library.subject(),
        Client::Mount(m, smbctl) => mount::subject(m, smbctl),
    };
    let rest_before = subject.at_rest(Duration::from_secs(30), None);
    eprintln!(
        "soak: at rest before the workload: {}",
        rest_before.describe()
    );

    let ctx = Ctx {
        tally: Arc::default(),
        stop: stop.clone(),
        t0: Instant::now(),
    };
    let faults = Arc::new(FaultLog::default());
    let sample = {
        let (subject, tally, faults, t0) =
            (subject.clone(), ctx.tally.clone(), faults.clone(), ctx.t0);
        move || Sample {
            ops: tally.ops(),
            bytes: tally.bytes_up.load(Ordering::Relaxed)
                + tally.bytes_down.load(Ordering::Relaxed),
            failures: tally.failed.load(Ordering::Relaxed),
            faults: faults.done.load(Ordering::Relaxed),
            ..subject.sample(t0)
        }
    };
    let sampling = Sampling::start(&s.out_dir, s.sample_every, sample.clone())?;
    let workers = match &client {
        Client::Library(library) => library.workers(&ctx, s),
        Client::Mount(m, _) => mount::workers(m, &ctx, s),
    };
    let ran_for = run_faults(&tb, s, &ctx, &faults);
    // Every library operation and fio run is bounded by OP_LIMIT, so the workers end within
    // it; a system call on the mount is not bounded, so a worker stuck in one is reported
    // and left behind.
    let deadline = Instant::now() + workload::OP_LIMIT + Duration::from_secs(30);
    for w in workers {
        while !w.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        match w.is_finished() {
            false => ctx
                .tally
                .fail(ctx.t0, "soak", "a worker did not stop in time".into()),
            true if w.join().is_err() => {
                ctx.tally
                    .fail(ctx.t0, "soak", "a worker ended abnormally".into())
            }
            true => {}
        }
    }
    let rest_after = subject.at_rest(REST_PATIENCE, Some(&rest_before));
    eprintln!(
        "soak: at rest after the workload: {}",
        rest_after.describe()
    );
    let (samples, last) = (sampling.finish(), sample());
    drop((subject, sample));
    // The library's session is checked while it is still up; the mount is unmounted first
    // (its own handles, on watched directories, would be listed) and no session may remain.
    let (library, sessions) = match client {
        Client::Library(library) => (Some(library), 1),
        Client::Mount(mount, _) => {
            drop(mount);
            (None, 0)
        }
    };
    let open = within_15_s(|| tb.open_files(), |open| open.is_empty());
    let open_at_server = open.map(|o| {
        o.into_iter()
            .map(|o| format!("{} (lease {:?})", o.name, o.lease))
            .collect()
    });
    let sessions_at_server = within_15_s(|| tb.session_count(), |n| *n == sessions);
    if let Some(library) = library {
        library.finish();
    }
    Ok(Outcome {
        settings: s.clone(),
        ran_for,
        interrupted: interrupted.load(Ordering::Relaxed),
        samples,
        tally: ctx.tally,
        faults,
        rest: (rest_before, rest_after),
        open_at_server,
        sessions_at_server,
        last,
    })
}

/// Stops the run on SIGINT or SIGTERM, so the testbed is still taken down.
fn on_signal(stop: Arc<AtomicBool>, interrupted: Arc<AtomicBool>) {
    let first = move || {
        eprintln!("soak: signal received, stopping and cleaning up");
        interrupted.store(true, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    };
    if let Err(e) = crate::on_signals(first, || {}) {
        eprintln!("soak: no signal handling ({e}): Ctrl-C will leave the testbed behind");
    }
}

/// Lets the workload run for the settings' duration (or until a signal sets `stop`) while a
/// thread does the faults; then stops both and waits for the fault thread, which undoes its
/// last fault. How long the workload ran.
fn run_faults(tb: &Arc<Testbed>, s: &Settings, ctx: &Ctx, log: &Arc<FaultLog>) -> Duration {
    let thread = {
        let (tb, stop, log, seed, length, t0) = (
            tb.clone(),
            ctx.stop.clone(),
            log.clone(),
            s.seed,
            s.duration,
            ctx.t0,
        );
        std::thread::spawn(move || faults::run(&tb, seed, length, t0, &stop, &log))
    };
    while ctx.t0.elapsed() < s.duration && !ctx.stopped() {
        std::thread::sleep(Duration::from_millis(500));
    }
    ctx.stop.store(true, Ordering::Relaxed);
    let ran_for = ctx.t0.elapsed();
    eprintln!("soak: workload stops after {:.0} s", ran_for.as_secs_f64());
    if thread.join().is_err() {
        log.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push("the fault thread panicked".into());
    }
    ran_for
}

/// What `f` gives once `done` holds for it, or after 15 s (closes and logoffs in the
/// background take a moment to land).
fn within_15_s<T>(
    mut f: impl FnMut() -> Result<T, String>,
    done: impl Fn(&T) -> bool,
) -> Result<T, String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let v = f()?;
        if done(&v) || Instant::now() > deadline {
            return Ok(v);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
