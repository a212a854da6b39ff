//! The soak (issue 14, part 4): one session over four shaped links carries a continuous,
//! verified workload for a long time (an hour by default) while links flap at random and smbd
//! is restarted twice; the process's RSS, file descriptors and tokio tasks, the channels and
//! the failover counters are sampled every 10 s. At the end: pass or fail with the reasons,
//! the samples as CSV and JSON, the faults as CSV, and a summary (`summary.json`).
//!
//! Parts: [`content`] (the files' bytes), [`workload`] (uploaders, downloaders, metadata
//! loop), [`faults`] (flaps and restarts), [`sampler`] (the 10 s samples), [`verdict`] (leak
//! judgement), [`checks`] (everything the run must show at its end).

pub mod checks;
pub mod content;
pub mod faults;
pub mod heap;
pub mod mount;
pub mod sampler;
pub mod verdict;
pub mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use smb3_client::tasks::TaskCount;
use smb3_client::{ChannelState, Client, ClientConfig};
use smb3_tests::{client_block_on, Testbed, TestbedConfig};

use crate::session::Login;
use faults::{FaultLog, Schedule};
use sampler::{Sample, Sources};
use workload::{Ctx, Tally};

/// How a soak runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Length of the workload.
    pub duration: Duration,
    /// Seed of every random choice (faults, sizes, files, modes).
    pub seed: u64,
    /// Links of the testbed (channels: 4 per link).
    pub links: usize,
    /// Rate of every link, Mbit/s.
    pub rate_mbit: u32,
    /// Upload and download workers.
    pub uploaders: usize,
    /// Download workers.
    pub downloaders: usize,
    /// Where the results go.
    pub out_dir: PathBuf,
    /// How often to sample (and the library's interface poll).
    pub sample_every: Duration,
}

impl Settings {
    /// Samples before this are not judged for leaks: the reply-buffer pool (64 MiB) fills,
    /// the allocator's arenas and tokio's blocking pool grow to their working size. A tenth of
    /// the run, at least 30 s and at most 2 minutes.
    pub fn warmup(&self) -> Duration {
        (self.duration / 10).clamp(Duration::from_secs(30), Duration::from_secs(120))
    }
}

/// The process at rest: workload stopped, every link up, every planned channel bound.
#[derive(Debug, Clone, Default)]
pub struct AtRest {
    /// Open file descriptors.
    pub fds: u64,
    /// Live tokio tasks.
    pub tasks: u64,
    /// The library's live background tasks, per kind (`smb3_client::tasks`).
    pub library: Vec<TaskCount>,
    /// RSS, KiB, after the C allocator returned the free memory it held.
    pub rss_kib: u64,
    /// Heap allocated and not freed, bytes ([`heap::live_bytes`]; `None` without the
    /// counting allocator).
    pub heap_bytes: Option<u64>,
    /// Active channels.
    pub channels: u64,
}

impl AtRest {
    /// One line for the log: the counts, and the library's live tasks by kind.
    pub fn describe(&self) -> String {
        let kinds: Vec<String> = self
            .library
            .iter()
            .filter(|c| c.live > 0)
            .map(|c| format!("{} {}", c.live, c.kind))
            .collect();
        format!(
            "fds {}, tasks {} (library: {}), RSS {} KiB, heap {} KiB, channels {}",
            self.fds,
            self.tasks,
            kinds.join(", "),
            self.rss_kib,
            self.heap_bytes
                .map_or("?".into(), |h| (h / 1024).to_string()),
            self.channels
        )
    }
}

/// Everything a finished run produced.
pub struct Outcome {
    /// The settings.
    pub settings: Settings,
    /// Wall time of the workload.
    pub ran_for: Duration,
    /// Whether SIGINT/SIGTERM cut the run short.
    pub interrupted: bool,
    /// The samples.
    pub samples: Vec<Sample>,
    /// The workload's counts.
    pub tally: Arc<Tally>,
    /// The faults done.
    pub faults: Arc<FaultLog>,
    /// At rest before the workload and after it.
    pub rest: (AtRest, AtRest),
    /// Handles the server still listed after everything was closed (name and lease).
    pub open_at_server: Result<Vec<String>, String>,
    /// Sessions smbd listed at the end.
    pub sessions_at_server: Result<usize, String>,
    /// Sessions smbd should list at the end: the library's soak keeps its session, the
    /// mount's is unmounted first.
    pub expected_sessions: usize,
    /// Whether the workload went through an smbfuse mount ([`mount`]): its interface poll is
    /// the default 15 minutes, so the count of interface queries is not checked.
    pub through_mount: bool,
    /// The last sample, taken at rest after the run.
    pub last: Sample,
}

fn client_config(s: &Settings) -> ClientConfig {
    let mut c = ClientConfig::default();
    // The interface re-query of issue 14 is the library's own poll, shortened from 15 min.
    c.interface_poll = s.sample_every;
    // As the failover tests: a loaded machine must not stall binding for 10 s per try.
    c.bind_timeout = Duration::from_secs(3);
    c.connect_timeout = Duration::from_secs(2);
    c
}

fn active(client: &Client) -> u64 {
    client
        .channels()
        .iter()
        .filter(|c| c.state == ChannelState::Active)
        .count() as u64
}

/// Kinds whose live count is above the one in `before`, with both counts.
pub fn grown_kinds(before: &[TaskCount], after: &[TaskCount]) -> Vec<(String, u64, u64)> {
    after
        .iter()
        .filter_map(|a| {
            let b = before
                .iter()
                .find(|b| b.kind == a.kind)
                .map_or(0, |b| b.live);
            (a.live > b).then(|| (a.kind.label().to_string(), b, a.live))
        })
        .collect()
}

/// Wait (bounded by `patience`) until every planned channel is active and the library's
/// background work of the last operations (closes, lease acks, probes, held lease keys) has
/// ended: its tasks back to `before`'s counts, or, without `before`, no longer falling. Then
/// read the process at rest.
async fn at_rest(client: &Client, patience: Duration, before: Option<&AtRest>) -> AtRest {
    let deadline = Instant::now() + patience;
    while Instant::now() < deadline {
        let planned = client.multichannel().planned() as u64;
        if planned > 0 && active(client) >= planned {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The reply-buffer pool is released once unused for 10 s; after a workload, give it that.
    let pool_released = Instant::now() + before.map_or(Duration::ZERO, |_| POOL_RELEASE);
    let mut library = smb3_client::tasks::live();
    if let Some(b) = before {
        let waiting: Vec<String> = grown_kinds(&b.library, &library)
            .iter()
            .map(|(kind, b, a)| format!("{} {kind}", a - b))
            .collect();
        if !waiting.is_empty() {
            eprintln!(
                "soak: waiting for library tasks above their counts at rest to end: {}",
                waiting.join(", ")
            );
        }
    }
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = smb3_client::tasks::live();
        let settled = match before {
            Some(b) => grown_kinds(&b.library, &now).is_empty(),
            None => now.iter().zip(&library).all(|(n, l)| n.live >= l.live),
        };
        library = now;
        let at = Instant::now();
        if (settled && at >= pool_released) || at >= deadline {
            break;
        }
    }
    let metrics = tokio::runtime::Handle::current().metrics();
    heap::return_free_memory();
    AtRest {
        fds: sampler::fd_count(),
        // The caller's own task (this one) is not part of the library's count.
        tasks: metrics.num_alive_tasks().saturating_sub(1) as u64,
        library,
        rss_kib: sampler::rss_kib(),
        heap_bytes: heap::live_bytes(),
        channels: active(client),
    }
}

/// How long the end of a run waits for the process to come to rest: channels bound again after
/// the last fault, the last background work done. A lease key held for a durable open the
/// server may still keep lasts the server's durable timeout and 5 s (`reconnect.rs`).
const REST_PATIENCE: Duration = Duration::from_secs(150);

/// The library releases its idle reply buffers once they went unused for 10 s (its
/// `QUIET_BEFORE_RELEASE`), checked every 250 ms.
const POOL_RELEASE: Duration = Duration::from_secs(11);

/// Stop the run on SIGINT or SIGTERM, so the testbed is still taken down.
fn on_signal(rt: &tokio::runtime::Runtime, stop: Arc<AtomicBool>, interrupted: Arc<AtomicBool>) {
    rt.spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("soak: signal received, stopping and cleaning up");
        interrupted.store(true, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });
}

/// Run the soak. `Err` only when it could not run at all (testbed, connect, files); a run
/// that finds problems returns them in the [`Outcome`] for [`checks::judge`].
pub fn run(s: &Settings) -> Result<Outcome, String> {
    std::fs::create_dir_all(&s.out_dir)
        .map_err(|e| format!("cannot create {}: {e}", s.out_dir.display()))?;
    let tb = Arc::new(Testbed::start(TestbedConfig::shaped(s.links, s.rate_mbit))?);
    let share_root = tb.share_path("plain");
    let seeded = Arc::new(
        workload::seed_files(&share_root, s.seed).map_err(|e| format!("seed files: {e}"))?,
    );
    let rt = tb.client_runtime();
    let stop = Arc::new(AtomicBool::new(false));
    let interrupted = Arc::new(AtomicBool::new(false));
    on_signal(&rt, stop.clone(), interrupted.clone());

    let (client, share, rest_before) = client_block_on(&rt, {
        let (login, cfg) = (Login::to(&tb), client_config(s));
        async move {
            let (client, share) = login.plain_share(cfg).await?;
            let rest = at_rest(&client, Duration::from_secs(30), None).await;
            Ok::<_, String>((client, share, rest))
        }
    })?;
    eprintln!(
        "soak: at rest before the workload: {}",
        rest_before.describe()
    );

    let t0 = Instant::now();
    let tally = Arc::new(Tally::default());
    let fault_log = Arc::new(FaultLog::default());
    let sources = Sources {
        client: client.clone(),
        runtime: rt.handle().clone(),
        tally: tally.clone(),
        faults: fault_log.clone(),
        t0,
    };
    let sampling = {
        let src = sources.clone();
        sampler::Sampling::start(&s.out_dir, s.sample_every, move || src.sample())?
    };

    let ctx = Ctx {
        share: share.clone(),
        share_root,
        seeded,
        tally: tally.clone(),
        stop: stop.clone(),
        t0,
    };
    let mut workers = Vec::new();
    for i in 0..s.uploaders {
        let seed = s.seed.wrapping_add(1000 + i as u64);
        workers.push(rt.spawn(workload::uploader(ctx.clone(), i, seed)));
    }
    for i in 0..s.downloaders {
        let seed = s.seed.wrapping_add(2000 + i as u64);
        workers.push(rt.spawn(workload::downloader(ctx.clone(), i, seed)));
    }
    workers.push(rt.spawn(workload::metadata_loop(
        ctx.clone(),
        s.seed.wrapping_add(3000),
    )));
    drop(ctx);

    let fault_thread = start_faults(&tb, s, t0, &stop, &fault_log);
    let ran_for = run_for_duration(s, t0, &stop, fault_thread, &fault_log);
    // Every operation is bounded by OP_LIMIT, so the workers end within it.
    client_block_on(&rt, {
        let tally = tally.clone();
        async move {
            for w in workers {
                let limit = workload::OP_LIMIT + Duration::from_secs(30);
                match tokio::time::timeout(limit, w).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tally
                        .failures
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(format!("a worker ended abnormally: {e}")),
                    Err(_) => tally
                        .failures
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(format!("a worker did not stop within {limit:?}")),
                }
            }
        }
    });

    let rest_after = client_block_on(&rt, {
        let (client, before) = (client.clone(), rest_before.clone());
        async move { at_rest(&client, REST_PATIENCE, Some(&before)).await }
    });
    eprintln!(
        "soak: at rest after the workload: {}",
        rest_after.describe()
    );
    let open_at_server = wait_for_no_open_files(&tb);
    let sessions_at_server = tb.session_count();
    let samples = sampling.finish();
    let last = sources.sample();

    drop(sources);
    let _ = client_block_on(&rt, async move {
        let r = client.logoff().await;
        drop(share);
        r
    });
    drop(rt);
    drop(tb);

    Ok(Outcome {
        settings: s.clone(),
        ran_for,
        interrupted: interrupted.load(Ordering::Relaxed),
        samples,
        tally,
        faults: fault_log,
        rest: (rest_before, rest_after),
        open_at_server,
        sessions_at_server,
        expected_sessions: 1,
        through_mount: false,
        last,
    })
}

/// Start the faults of a run of `s` on their own thread, after 10 s of quiet.
fn start_faults(
    tb: &Arc<Testbed>,
    s: &Settings,
    t0: Instant,
    stop: &Arc<AtomicBool>,
    log: &Arc<FaultLog>,
) -> std::thread::JoinHandle<()> {
    let (tb, stop, log) = (tb.clone(), stop.clone(), log.clone());
    let (schedule, seed) = (Schedule::for_run(s.duration), s.seed);
    std::thread::spawn(move || {
        faults::run(tb, seed, schedule, Duration::from_secs(10), t0, stop, log)
    })
}

/// Let the workload run for the settings' duration (or until `stop` is set by a signal),
/// then stop it and wait for the fault thread, which undoes its last fault. How long it ran.
fn run_for_duration(
    s: &Settings,
    t0: Instant,
    stop: &AtomicBool,
    fault_thread: std::thread::JoinHandle<()>,
    fault_log: &FaultLog,
) -> Duration {
    while t0.elapsed() < s.duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let ran_for = t0.elapsed();
    eprintln!("soak: workload stops after {:.0} s", ran_for.as_secs_f64());
    if fault_thread.join().is_err() {
        fault_log
            .errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push("the fault thread panicked".into());
    }
    ran_for
}

/// Handles smbd still lists, after waiting (bounded) for background closes to land.
fn wait_for_no_open_files(tb: &Testbed) -> Result<Vec<String>, String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let open = tb.open_files()?;
        if open.is_empty() || Instant::now() > deadline {
            return Ok(open
                .into_iter()
                .map(|o| format!("{} (lease {:?})", o.name, o.lease))
                .collect());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
