//! Every 10 s: what the process holds (RSS, open file descriptors, live tokio tasks) and what
//! the session says (channels, failover counters, interface queries), plus the workload's and
//! the faults' progress. Runs on its own thread so it keeps sampling even if the client's
//! runtime were wedged; each sample is appended to the CSV at once, so a run that dies still
//! leaves its samples.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use smb3_client::{ChannelState, Client};

use super::faults::FaultLog;
use super::workload::Tally;

/// One sample.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Seconds after the start.
    pub t: f64,
    /// Resident set size, KiB (`VmRSS`).
    pub rss_kib: u64,
    /// Heap allocated and not freed, KiB (0 without the counting allocator, `heap`).
    pub heap_kib: u64,
    /// Open file descriptors (`/proc/self/fd`).
    pub fds: u64,
    /// Live tasks of the client's runtime (`RuntimeMetrics::num_alive_tasks`).
    pub tasks: u64,
    /// Of those, the library's background tasks (`smb3_client::tasks`).
    pub library_tasks: u64,
    /// Channels active / listed (listed includes failed and retired ones) / planned.
    pub channels_active: u64,
    /// Channels the session lists in any state.
    pub channels_listed: u64,
    /// Channels the plan wants.
    pub channels_planned: u64,
    /// Interface queries the library has made (its `interface_poll`).
    pub interface_queries: u64,
    /// Failover counters.
    pub channel_losses: u64,
    /// Of those, silent.
    pub silent_losses: u64,
    /// Suspected channels that answered their probe.
    pub false_alarms: u64,
    /// Requests sent again.
    pub replays: u64,
    /// Requests lost and not sent again.
    pub not_replayed: u64,
    /// Lost slots bound again.
    pub reconnects: u64,
    /// Sessions re-established.
    pub sessions_reestablished: u64,
    /// Opens reclaimed with DH2C.
    pub opens_reclaimed: u64,
    /// Opens opened again by path after a refused reclaim.
    pub opens_reopened: u64,
    /// Opens lost.
    pub opens_lost: u64,
    /// Listings that went on after losing a QUERY_DIRECTORY.
    pub listings_resumed: u64,
    /// Verified operations so far.
    pub ops: u64,
    /// Verified bytes so far.
    pub bytes: u64,
    /// Failures so far.
    pub failures: u64,
    /// Faults done so far.
    pub faults: u64,
}

/// The CSV header, in [`Sample::csv`] order.
pub const CSV_HEADER: &str = "t_s,rss_kib,heap_kib,fds,tasks,library_tasks,channels_active,\
channels_listed,channels_planned,interface_queries,channel_losses,silent_losses,false_alarms,\
replays,not_replayed,reconnects,sessions_reestablished,opens_reclaimed,opens_reopened,\
opens_lost,listings_resumed,ops,bytes,failures,faults";

impl Sample {
    /// One CSV line.
    pub fn csv(&self) -> String {
        let v = [
            self.rss_kib,
            self.heap_kib,
            self.fds,
            self.tasks,
            self.library_tasks,
            self.channels_active,
            self.channels_listed,
            self.channels_planned,
            self.interface_queries,
            self.channel_losses,
            self.silent_losses,
            self.false_alarms,
            self.replays,
            self.not_replayed,
            self.reconnects,
            self.sessions_reestablished,
            self.opens_reclaimed,
            self.opens_reopened,
            self.opens_lost,
            self.listings_resumed,
            self.ops,
            self.bytes,
            self.failures,
            self.faults,
        ];
        let rest: Vec<String> = v.iter().map(u64::to_string).collect();
        format!("{:.1},{}", self.t, rest.join(","))
    }

    /// The sample as a JSON object keyed like the CSV header.
    pub fn json(&self) -> serde_json::Value {
        let line = self.csv();
        let map: serde_json::Map<String, serde_json::Value> = CSV_HEADER
            .split(',')
            .zip(line.split(','))
            .map(|(k, v)| {
                let n: serde_json::Value = match v.parse::<u64>() {
                    Ok(i) => i.into(),
                    Err(_) => v.parse::<f64>().map_or(v.into(), Into::into),
                };
                (k.to_string(), n)
            })
            .collect();
        serde_json::Value::Object(map)
    }
}

/// Resident set size of this process in KiB.
pub fn rss_kib() -> u64 {
    rss_kib_of("self")
}

/// Resident set size in KiB of the process `pid` (a number, or `self`); 0 if it is gone.
pub fn rss_kib_of(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Open file descriptors of this process (the directory's own descriptor not counted).
pub fn fd_count() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count().saturating_sub(1) as u64)
        .unwrap_or(0)
}

/// What the sampler reads from.
#[derive(Clone)]
pub struct Sources {
    /// The session.
    pub client: Client,
    /// The client's runtime (task count).
    pub runtime: tokio::runtime::Handle,
    /// The workload's counts.
    pub tally: Arc<Tally>,
    /// The faults done.
    pub faults: Arc<FaultLog>,
    /// Start of the run.
    pub t0: Instant,
}

impl Sources {
    /// One sample now.
    pub fn sample(&self) -> Sample {
        let mc = self.client.multichannel();
        let channels = self.client.channels();
        let f = &mc.failover;
        let t = &self.tally;
        Sample {
            t: self.t0.elapsed().as_secs_f64(),
            rss_kib: rss_kib(),
            heap_kib: super::heap::live_bytes().unwrap_or(0) / 1024,
            fds: fd_count(),
            tasks: self.runtime.metrics().num_alive_tasks() as u64,
            library_tasks: smb3_client::tasks::live_total(),
            channels_active: channels
                .iter()
                .filter(|c| c.state == ChannelState::Active)
                .count() as u64,
            channels_listed: channels.len() as u64,
            channels_planned: mc.planned() as u64,
            interface_queries: mc.interface_queries,
            channel_losses: f.channel_losses,
            silent_losses: f.silent_losses,
            false_alarms: f.false_alarms,
            replays: f.replays,
            not_replayed: f.not_replayed,
            reconnects: f.reconnects,
            sessions_reestablished: f.sessions_reestablished,
            opens_reclaimed: f.opens_reclaimed,
            opens_reopened: f.opens_reopened,
            opens_lost: f.opens_lost,
            listings_resumed: f.listings_resumed,
            ops: t.ops(),
            bytes: t.bytes(),
            failures: t.failed.load(Ordering::Relaxed),
            faults: self.faults.done.load(Ordering::Relaxed),
        }
    }
}

/// Sample every `every` until `stop`, appending to `csv` and to `out`; prints one progress
/// line a minute.
pub fn run(
    sample: impl Fn() -> Sample,
    every: Duration,
    mut csv: std::fs::File,
    out: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
) {
    let _ = writeln!(csv, "{CSV_HEADER}");
    let mut next = Instant::now();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= next {
            let s = sample();
            let _ = writeln!(csv, "{}", s.csv());
            let _ = csv.flush();
            if n % 6 == 0 {
                eprintln!(
                    "soak {:6.0} s: rss {} MiB (heap {} MiB), fds {}, tasks {} ({} library), channels {}/{}, \
                     ops {}, {:.1} GiB verified, faults {}, losses {}, replays {}, \
                     listings resumed {}, failures {}",
                    s.t,
                    s.rss_kib / 1024,
                    s.heap_kib / 1024,
                    s.fds,
                    s.tasks,
                    s.library_tasks,
                    s.channels_active,
                    s.channels_planned,
                    s.ops,
                    s.bytes as f64 / (1u64 << 30) as f64,
                    s.faults,
                    s.channel_losses,
                    s.replays,
                    s.listings_resumed,
                    s.failures
                );
            }
            n += 1;
            out.lock().unwrap_or_else(PoisonError::into_inner).push(s);
            next += every;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The sampler of a run on its own thread, writing `samples.csv` in the run's directory as it
/// goes and keeping every sample for the report.
pub struct Sampling {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
    samples: Arc<Mutex<Vec<Sample>>>,
}

impl Sampling {
    /// Start sampling with `sample` every `every` into `out_dir/samples.csv`.
    pub fn start(
        out_dir: &std::path::Path,
        every: Duration,
        sample: impl Fn() -> Sample + Send + 'static,
    ) -> Result<Sampling, String> {
        let path = out_dir.join("samples.csv");
        let csv = std::fs::File::create(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, samples) = (stop.clone(), samples.clone());
            std::thread::spawn(move || run(sample, every, csv, samples, stop))
        };
        Ok(Sampling {
            stop,
            thread,
            samples,
        })
    }

    /// Stop sampling; the samples taken.
    pub fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
