//! The soak (docs/RELIABILITY.md, "Soak"): one session over shaped links carries a continuous,
//! verified workload for a long time while links flap at random and smbd is restarted twice;
//! what the client holds (RSS, heap, descriptors, tasks), its channels and its failover
//! counters are sampled as it goes. At the end: pass or fail with the reasons, and the files
//! `samples.csv`, `samples.json`, `events.csv` and `summary.json` ([`checks`]).
//!
//! [`run`] drives the library in-process ([`workload`]); [`mount::run`] the same through an
//! smbfuse mount. Both share the testbed, the faults ([`faults`]) and the samples ([`sampler`]).

pub mod checks;
mod faults;
pub mod heap;
pub mod mount;
mod sampler;
mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use smb3_client::tasks::TaskCount;
use smb3_client::{ChannelState, ClientConfig};
use smb3_tests::{client_block_on, Testbed, TestbedConfig};

use crate::session::connect_plain;
use faults::{FaultLog, Schedule};
use sampler::{Sample, Sampling};
use workload::{Ctx, Tally};

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
}

impl Settings {
    /// Samples before this are not judged for leaks: the reply-buffer pool fills, the
    /// allocator's arenas and tokio's blocking pool grow to their working size. A tenth of
    /// the run, 30 s to 2 minutes.
    fn warmup(&self) -> Duration {
        (self.duration / 10).clamp(Duration::from_secs(30), Duration::from_secs(120))
    }
}

/// The client at rest: workload stopped, every link up, every planned channel bound. RSS is
/// taken after the C allocator returned the free memory it held; the heap is `None` without
/// the counting allocator.
#[derive(Debug, Clone, Default)]
pub(crate) struct AtRest {
    pub(crate) fds: u64,
    pub(crate) tasks: u64,
    pub(crate) library: Vec<TaskCount>,
    pub(crate) rss_kib: u64,
    pub(crate) heap_bytes: Option<u64>,
    pub(crate) channels: u64,
}

impl AtRest {
    fn describe(&self) -> String {
        let live = self.library.iter().filter(|c| c.live > 0);
        let kinds: Vec<String> = live.map(|c| format!("{} {}", c.live, c.kind)).collect();
        let heap = self
            .heap_bytes
            .map_or("?".into(), |h| (h / 1024).to_string());
        format!(
            "fds {}, tasks {} (library: {}), RSS {} KiB, heap {heap} KiB, channels {}",
            self.fds,
            self.tasks,
            kinds.join(", "),
            self.rss_kib,
            self.channels
        )
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
    rest: (AtRest, AtRest),
    /// Handles the server still listed after everything was closed.
    open_at_server: Result<Vec<String>, String>,
    sessions_at_server: Result<usize, String>,
    /// The library's soak keeps its session to the end; the mount's is unmounted first, and
    /// its interface poll (15 minutes) is not checked.
    through_mount: bool,
    /// Taken at rest after the run.
    last: Sample,
}

/// How long the end of a run waits for the client to come to rest: channels bound again after
/// the last fault, the last background work done. The longest is a lease key held for a
/// durable open the server may still keep: its durable timeout and 5 s.
const REST_PATIENCE: Duration = Duration::from_secs(150);

/// Kinds whose live count is above the one in `before`, with both counts.
fn grown_kinds(before: &[TaskCount], after: &[TaskCount]) -> Vec<(String, u64, u64)> {
    let before_of = |a: &TaskCount| {
        before
            .iter()
            .find(|b| b.kind == a.kind)
            .map_or(0, |b| b.live)
    };
    let grown = after.iter().filter(|a| a.live > before_of(a));
    grown
        .map(|a| (a.kind.label().to_string(), before_of(a), a.live))
        .collect()
}

/// Waits (at most `patience`) until every planned channel is active and the library's tasks
/// have settled, back to `before`'s counts or, without `before`, no longer falling; after a
/// workload also until `quiet` has passed, so idle buffers were released. `state` tells the
/// planned and active channels and the live tasks, or nothing when the client does not
/// answer. The last state.
fn settle(
    patience: Duration,
    before: Option<&AtRest>,
    quiet: Duration,
    mut state: impl FnMut() -> Option<(u64, u64, Vec<TaskCount>)>,
) -> (u64, Vec<TaskCount>) {
    let start = Instant::now();
    let released = start + before.map_or(Duration::ZERO, |_| quiet);
    let mut last: (u64, u64, Vec<TaskCount>) = (0, 0, Vec::new());
    let mut said = false;
    loop {
        if let Some((planned, active, tasks)) = state() {
            let settled = match before {
                Some(b) => grown_kinds(&b.library, &tasks).is_empty(),
                None => {
                    tasks.iter().zip(&last.2).all(|(n, l)| n.live >= l.live) && !last.2.is_empty()
                }
            };
            if let (Some(b), false) = (before, said) {
                let grown = grown_kinds(&b.library, &tasks);
                let waiting: Vec<String> = grown
                    .iter()
                    .map(|(kind, b, a)| format!("{} {kind}", a - b))
                    .collect();
                if !waiting.is_empty() {
                    eprintln!(
                        "soak: waiting for library tasks above their counts at rest to end: {}",
                        waiting.join(", ")
                    );
                }
                said = true;
            }
            let ready = planned > 0 && active >= planned && settled;
            last = (planned, active, tasks);
            if ready && Instant::now() >= released {
                break;
            }
        }
        if start.elapsed() >= patience {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    (last.1, last.2)
}

/// Stops the run on SIGINT or SIGTERM, so the testbed is still taken down.
fn on_signal(rt: &tokio::runtime::Runtime, stop: Arc<AtomicBool>, interrupted: Arc<AtomicBool>) {
    rt.spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        tokio::select! { _ = tokio::signal::ctrl_c() => {} _ = term.recv() => {} }
        eprintln!("soak: signal received, stopping and cleaning up");
        interrupted.store(true, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });
}

/// Runs the soak through the library. `Err` only when it could not run at all (testbed,
/// connect, files); what a run finds is in the [`Outcome`] for [`checks::judge`].
pub fn run(s: &Settings) -> Result<Outcome, String> {
    let tb = start(s)?;
    let share_root = tb.share_path("plain");
    let seeded =
        workload::seed_files(&share_root, s.seed).map_err(|e| format!("seed files: {e}"))?;
    let rt = tb.client_runtime();
    let (stop, interrupted) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    on_signal(&rt, stop.clone(), interrupted.clone());
    let mut cfg = ClientConfig::default();
    // The interface re-query is the library's own poll, shortened from 15 minutes; a loaded
    // machine must not stall binding for 10 s a try.
    cfg.interface_poll = s.sample_every;
    (cfg.bind_timeout, cfg.connect_timeout) = (Duration::from_secs(3), Duration::from_secs(2));
    let (client, share) = client_block_on(&rt, connect_plain(&tb, cfg))?;
    let handle = rt.handle().clone();
    let at_rest = |patience, before: Option<&AtRest>| {
        let state = || {
            let channels = client.channels();
            let active = channels
                .iter()
                .filter(|c| c.state == ChannelState::Active)
                .count();
            Some((
                client.multichannel().planned() as u64,
                active as u64,
                smb3_client::tasks::live(),
            ))
        };
        // The library releases reply buffers unused for 10 s, checked every 250 ms.
        let (channels, library) = settle(patience, before, Duration::from_secs(11), state);
        heap::return_free_memory();
        AtRest {
            fds: sampler::fd_count(),
            tasks: handle.metrics().num_alive_tasks() as u64,
            library,
            rss_kib: sampler::rss_kib("self"),
            heap_bytes: heap::live_bytes(),
            channels,
        }
    };
    let rest_before = at_rest(Duration::from_secs(30), None);
    eprintln!(
        "soak: at rest before the workload: {}",
        rest_before.describe()
    );

    let t0 = Instant::now();
    let (tally, faults) = (Arc::new(Tally::default()), Arc::new(FaultLog::default()));
    let sample = {
        let (client, handle, tally, faults) = (
            client.clone(),
            handle.clone(),
            tally.clone(),
            faults.clone(),
        );
        move || sampler::of_library(&client, &handle, t0).progress(&tally, &faults)
    };
    let sampling = Sampling::start(&s.out_dir, s.sample_every, sample.clone())?;
    let ctx = Ctx {
        share: share.clone(),
        share_root,
        seeded: Arc::new(seeded),
        tally: tally.clone(),
        stop: stop.clone(),
        t0,
    };
    let mut workers = Vec::new();
    for i in 0..s.uploaders {
        workers.push(rt.spawn(workload::uploader(
            ctx.clone(),
            i,
            s.seed.wrapping_add(1000 + i as u64),
        )));
    }
    for i in 0..s.downloaders {
        workers.push(rt.spawn(workload::downloader(
            ctx.clone(),
            i,
            s.seed.wrapping_add(2000 + i as u64),
        )));
    }
    workers.push(rt.spawn(workload::metadata_loop(ctx, s.seed.wrapping_add(3000))));

    let ran_for = run_faults(&tb, s, t0, &stop, &faults);
    // Every operation is bounded by OP_LIMIT, so the workers end within it.
    let limit = workload::OP_LIMIT + Duration::from_secs(30);
    for w in workers {
        match client_block_on(&rt, async move { tokio::time::timeout(limit, w).await }) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tally.fail(t0, "soak", format!("a worker ended abnormally: {e}")),
            Err(_) => tally.fail(
                t0,
                "soak",
                format!("a worker did not stop within {limit:?}"),
            ),
        }
    }
    let rest_after = at_rest(REST_PATIENCE, Some(&rest_before));
    eprintln!(
        "soak: at rest after the workload: {}",
        rest_after.describe()
    );
    let open_at_server = wait_for_no_open_files(&tb);
    let sessions_at_server = tb.session_count();
    let (samples, last) = (sampling.finish(), sample());
    let _ = client_block_on(&rt, async move { client.logoff().await });
    drop(share);
    Ok(Outcome {
        settings: s.clone(),
        ran_for,
        interrupted: interrupted.load(Ordering::Relaxed),
        samples,
        tally,
        faults,
        rest: (rest_before, rest_after),
        open_at_server,
        sessions_at_server,
        through_mount: false,
        last,
    })
}

/// The run's directory and its testbed.
fn start(s: &Settings) -> Result<Arc<Testbed>, String> {
    std::fs::create_dir_all(&s.out_dir)
        .map_err(|e| format!("cannot create {}: {e}", s.out_dir.display()))?;
    Ok(Arc::new(Testbed::start(TestbedConfig::shaped(
        s.links,
        s.rate_mbit,
    ))?))
}

/// Lets the workload run for the settings' duration (or until a signal sets `stop`) while a
/// thread does the faults; then stops both and waits for the fault thread, which undoes its
/// last fault. How long the workload ran.
fn run_faults(
    tb: &Arc<Testbed>,
    s: &Settings,
    t0: Instant,
    stop: &Arc<AtomicBool>,
    log: &Arc<FaultLog>,
) -> Duration {
    let thread = {
        let (tb, stop, log, seed) = (tb.clone(), stop.clone(), log.clone(), s.seed);
        let schedule = Schedule::for_run(s.duration);
        std::thread::spawn(move || faults::run(&tb, seed, schedule, t0, &stop, &log))
    };
    while t0.elapsed() < s.duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let ran_for = t0.elapsed();
    eprintln!("soak: workload stops after {:.0} s", ran_for.as_secs_f64());
    if thread.join().is_err() {
        let mut errors = log.errors.lock().unwrap_or_else(PoisonError::into_inner);
        errors.push("the fault thread panicked".into());
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

/// Handles smbd still lists.
fn wait_for_no_open_files(tb: &Testbed) -> Result<Vec<String>, String> {
    let open = within_15_s(|| tb.open_files(), |open| open.is_empty())?;
    Ok(open
        .into_iter()
        .map(|o| format!("{} (lease {:?})", o.name, o.lease))
        .collect())
}
