//! The samples: what the client holds (RSS, heap, open descriptors, live tasks) and what its
//! session says (channels, failover counters, interface queries), with the workload's and the
//! faults' progress. Taken on a thread of their own, so sampling goes on even if the client's
//! runtime were wedged; each is appended to `samples.csv` at once, so a run that dies still
//! leaves its samples.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use smb3_client::{ChannelState, Client};

use super::faults::FaultLog;
use super::workload::Tally;

macro_rules! sample {
    ($($field:ident),* $(,)?) => {
        /// One sample: seconds since the start, then the counts, named as in `samples.csv`.
        /// `heap_kib` is 0 without the counting allocator; `tasks` are the runtime's live
        /// tasks, `library_tasks` the library's among them; `channels_listed` includes failed
        /// and retired channels.
        #[derive(Debug, Clone, Default)]
        pub(crate) struct Sample {
            pub(crate) t: f64,
            $(pub(crate) $field: u64,)*
        }

        impl Sample {
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            fn values(&self) -> Vec<u64> {
                vec![$(self.$field),*]
            }

            /// Sets the count called `name` (unknown names are ignored).
            pub(crate) fn set(&mut self, name: &str, value: u64) {
                match name {
                    $(stringify!($field) => self.$field = value,)*
                    _ => {}
                }
            }
        }
    };
}

sample!(
    rss_kib,
    heap_kib,
    fds,
    tasks,
    library_tasks,
    channels_active,
    channels_listed,
    channels_planned,
    interface_queries,
    channel_losses,
    silent_losses,
    false_alarms,
    replays,
    not_replayed,
    reconnects,
    sessions_reestablished,
    opens_reclaimed,
    opens_reopened,
    opens_lost,
    listings_resumed,
    ops,
    bytes,
    failures,
    faults,
);

/// The failover counters, named as the library's status document names them.
pub(crate) const FAILOVER: [&str; 11] = [
    "channel_losses",
    "silent_losses",
    "false_alarms",
    "replays",
    "not_replayed",
    "reconnects",
    "sessions_reestablished",
    "opens_reclaimed",
    "opens_reopened",
    "opens_lost",
    "listings_resumed",
];

impl Sample {
    fn csv_header() -> String {
        format!("t_s,{}", Self::FIELDS.join(","))
    }

    fn csv(&self) -> String {
        let values: Vec<String> = self.values().iter().map(u64::to_string).collect();
        format!("{:.1},{}", self.t, values.join(","))
    }

    /// The sample as a JSON object keyed like the CSV header.
    pub(crate) fn json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        let t = format!("{:.1}", self.t).parse::<f64>().unwrap_or(self.t);
        map.insert("t_s".into(), t.into());
        for (name, value) in Self::FIELDS.iter().zip(self.values()) {
            map.insert(name.to_string(), value.into());
        }
        map.into()
    }

    /// The workload's and the faults' progress.
    pub(crate) fn progress(mut self, tally: &Tally, faults: &FaultLog) -> Sample {
        self.ops = tally.ops();
        self.bytes = tally.bytes();
        self.failures = tally.failed.load(Ordering::Relaxed);
        self.faults = faults.done.load(Ordering::Relaxed);
        self
    }
}

/// Resident set size in KiB of process `pid` (a number, or `self`); 0 once it is gone.
pub(crate) fn rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"));
    line.and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Open descriptors of process `pid` (a number, or `self`).
pub(crate) fn fds_of(pid: &str) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// Open descriptors of this process, the directory's own not counted.
pub(crate) fn fd_count() -> u64 {
    fds_of("self").saturating_sub(1)
}

/// One sample of the in-process client `client`, whose runtime is `rt`.
pub(crate) fn of_library(client: &Client, rt: &tokio::runtime::Handle, t0: Instant) -> Sample {
    let (mc, channels) = (client.multichannel(), client.channels());
    let f = &mc.failover;
    let active = channels.iter().filter(|c| c.state == ChannelState::Active);
    Sample {
        t: t0.elapsed().as_secs_f64(),
        rss_kib: rss_kib("self"),
        heap_kib: super::heap::live_bytes().unwrap_or(0) / 1024,
        fds: fd_count(),
        tasks: rt.metrics().num_alive_tasks() as u64,
        library_tasks: smb3_client::tasks::live_total(),
        channels_active: active.count() as u64,
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
        ..Sample::default()
    }
}

/// The sampler of a run on its own thread: a sample every `every` into `samples.csv` in the
/// run's directory and into memory, and a progress line a minute.
pub(crate) struct Sampling {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
    samples: Arc<Mutex<Vec<Sample>>>,
}

impl Sampling {
    pub(crate) fn start(
        out_dir: &Path,
        every: Duration,
        sample: impl Fn() -> Sample + Send + 'static,
    ) -> Result<Sampling, String> {
        let path = out_dir.join("samples.csv");
        let mut csv = std::fs::File::create(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (done, kept) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            let _ = writeln!(csv, "{}", Sample::csv_header());
            let (mut next, mut n) = (Instant::now(), 0u64);
            while !done.load(Ordering::Relaxed) {
                if Instant::now() >= next {
                    let s = sample();
                    let _ = writeln!(csv, "{}", s.csv());
                    let _ = csv.flush();
                    if n % 6 == 0 {
                        say(&s);
                    }
                    n += 1;
                    kept.lock().unwrap_or_else(PoisonError::into_inner).push(s);
                    next += every;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Ok(Sampling {
            stop,
            thread,
            samples,
        })
    }

    /// Stops sampling; the samples taken.
    pub(crate) fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn say(s: &Sample) {
    eprintln!(
        "soak {:6.0} s: rss {} MiB (heap {} MiB), fds {}, tasks {} ({} library), channels {}/{}, \
         ops {}, {:.1} GiB verified, faults {}, losses {}, replays {}, listings resumed {}, \
         failures {}",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_json_name_the_same_counts() {
        let mut s = Sample {
            t: 12.34,
            fds: 7,
            ..Sample::default()
        };
        s.set("replays", 3);
        let header = Sample::csv_header();
        assert!(
            header.starts_with("t_s,rss_kib,heap_kib,fds,") && header.ends_with(",failures,faults")
        );
        assert_eq!(s.csv().split(',').count(), header.split(',').count());
        let json = s.json();
        assert_eq!(
            (json["t_s"].as_f64(), json["fds"].as_u64()),
            (Some(12.3), Some(7))
        );
        assert_eq!(json["replays"], 3);
    }
}
