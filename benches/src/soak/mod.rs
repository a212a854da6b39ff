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
pub mod sampler;
pub mod verdict;
pub mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

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
#[derive(Debug, Clone, Copy, Default)]
pub struct AtRest {
    /// Open file descriptors.
    pub fds: u64,
    /// Live tokio tasks.
    pub tasks: u64,
    /// RSS, KiB.
    pub rss_kib: u64,
    /// Active channels.
    pub channels: u64,
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

/// Wait (bounded) until every planned channel is active and the task count stops falling,
/// then read the process at rest.
async fn at_rest(client: &Client, patience: Duration) -> AtRest {
    let deadline = Instant::now() + patience;
    while Instant::now() < deadline {
        let planned = client.multichannel().planned() as u64;
        if planned > 0 && active(client) >= planned {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let background work of the last operations (orphan closes, lease acks, probes) end.
    let metrics = tokio::runtime::Handle::current().metrics();
    let mut tasks = metrics.num_alive_tasks();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = metrics.num_alive_tasks();
        if now >= tasks {
            tasks = now;
            break;
        }
        tasks = now;
    }
    AtRest {
        fds: sampler::fd_count(),
        // The caller's own task (this one) is not part of the library's count.
        tasks: tasks.saturating_sub(1) as u64,
        rss_kib: sampler::rss_kib(),
        channels: active(client),
    }
}

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
            let rest = at_rest(&client, Duration::from_secs(30)).await;
            Ok::<_, String>((client, share, rest))
        }
    })?;
    eprintln!("soak: at rest before the workload: {rest_before:?}");

    let t0 = Instant::now();
    let tally = Arc::new(Tally::default());
    let fault_log = Arc::new(FaultLog::default());
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sources = Sources {
        client: client.clone(),
        runtime: rt.handle().clone(),
        tally: tally.clone(),
        faults: fault_log.clone(),
        t0,
    };
    let csv_path = s.out_dir.join("samples.csv");
    let csv = std::fs::File::create(&csv_path)
        .map_err(|e| format!("cannot create {}: {e}", csv_path.display()))?;
    let sampler_stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (src, out, st, every) = (
            sources.clone(),
            samples.clone(),
            sampler_stop.clone(),
            s.sample_every,
        );
        std::thread::spawn(move || sampler::run(src, every, csv, out, st))
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

    let fault_thread = {
        let (tb, stop, log) = (tb.clone(), stop.clone(), fault_log.clone());
        let schedule = Schedule::for_run(s.duration);
        let seed = s.seed;
        std::thread::spawn(move || {
            faults::run(tb, seed, schedule, Duration::from_secs(10), t0, stop, log)
        })
    };

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
        let client = client.clone();
        async move { at_rest(&client, Duration::from_secs(60)).await }
    });
    eprintln!("soak: at rest after the workload: {rest_after:?}");
    let open_at_server = wait_for_no_open_files(&tb);
    let sessions_at_server = tb.session_count();
    sampler_stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let last = sources.sample();

    drop(sources);
    let _ = client_block_on(&rt, async move {
        let r = client.logoff().await;
        drop(share);
        r
    });
    drop(rt);
    drop(tb);

    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(PoisonError::into_inner));
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
        last,
    })
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
