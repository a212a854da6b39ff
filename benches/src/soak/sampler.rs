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

use crate::Context;
use serde_json::Value;

macro_rules! sample {
    ($($field:ident),* $(,)?) => {
        /// One sample: seconds since the start, then the counts, named as in `samples.csv`.
        /// `heap_kib` is 0 without a counting allocator; `tasks` are the runtime's live
        /// tasks (a daemon's: its library's), `library_tasks` the library's among them;
        /// `channels_listed` includes failed and retired channels.
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

            fn set(&mut self, name: &str, value: u64) {
                $(if name == stringify!($field) { self.$field = value; })*
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

impl Sample {
    fn csv(&self) -> String {
        let values: Vec<String> = self.values().iter().map(u64::to_string).collect();
        format!("{:.1},{}", self.t, values.join(","))
    }

    /// The sample as a JSON object keyed like the CSV header.
    pub(crate) fn json(&self) -> Value {
        let t = format!("{:.1}", self.t).parse::<f64>().unwrap_or(self.t);
        let counts = Self::FIELDS
            .iter()
            .zip(self.values())
            .map(|(n, v)| (n.to_string(), v.into()));
        Value::Object(
            std::iter::once(("t_s".to_string(), t.into()))
                .chain(counts)
                .collect(),
        )
    }
}

/// Resident set size in KiB of process `pid` (a number, or `self`); 0 once it is gone.
pub(crate) fn rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"));
    line.and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Open descriptors of process `pid` (the directory's own not counted for `self`).
pub(crate) fn fds(pid: &str) -> u64 {
    let n = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    n.saturating_sub(u64::from(pid == "self"))
}

/// The live tasks of each kind in a status document's `library_tasks`.
pub(crate) fn kinds(status: &Value) -> Vec<(String, u64)> {
    let kinds = status["library_tasks"].as_object().into_iter().flatten();
    kinds
        .map(|(kind, c)| (kind.clone(), c["live"].as_u64().unwrap_or(0)))
        .collect()
}

/// Channels whose state is `active` in a status document.
pub(crate) fn active(status: &Value) -> u64 {
    let channels = status["channels"].as_array().into_iter().flatten();
    channels.filter(|c| c["state"] == "active").count() as u64
}

/// A sample of process `pid`, `t` seconds into the run, from its status document (the form
/// of a mount's status socket); `tasks` the runtime's live tasks when known.
pub(crate) fn of(t: f64, status: &Value, pid: &str, tasks: Option<u64>) -> Sample {
    let (mc, n) = (&status["multichannel"], |v: &Value| v.as_u64().unwrap_or(0));
    let library = kinds(status).iter().map(|k| k.1).sum();
    let mut s = Sample {
        t,
        rss_kib: rss_kib(pid),
        heap_kib: n(&status["heap_in_use_bytes"]) / 1024,
        fds: fds(pid),
        tasks: tasks.unwrap_or(library),
        library_tasks: library,
        channels_active: active(status),
        channels_listed: status["channels"].as_array().map_or(0, Vec::len) as u64,
        channels_planned: n(&mc["planned"]),
        interface_queries: n(&mc["interface_queries"]),
        ..Sample::default()
    };
    let failover = mc["failover"].as_object().into_iter().flatten();
    failover.for_each(|(name, v)| s.set(name, n(v)));
    s
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
        let mut csv =
            std::fs::File::create(&path).ctx(format!("cannot create {}", path.display()))?;
        let (stop, samples) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(Mutex::new(Vec::new())),
        );
        let (done, kept) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            let _ = writeln!(csv, "t_s,{}", Sample::FIELDS.join(","));
            let (mut next, mut n) = (Instant::now(), 0u64);
            while !done.load(Ordering::Relaxed) {
                if Instant::now() >= next {
                    let s = sample();
                    let _ = writeln!(csv, "{}", s.csv()).and_then(|()| csv.flush());
                    if n % 6 == 0 {
                        say(&s);
                    }
                    (n, next) = (n + 1, next + every);
                    kept.lock().unwrap_or_else(PoisonError::into_inner).push(s);
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
    fn samples_read_a_status_document_and_name_the_same_counts_in_csv_and_json() {
        let status = serde_json::json!({"channels": [{"state": "active"}, {"state": "failed"}],
            "multichannel": {"planned": 4, "interface_queries": 9, "failover": {"replays": 3, "channel_sequence": 7}},
            "library_tasks": {"probe": {"live": 2, "started": 5}, "channel-reader": {"live": 1}},
            "heap_in_use_bytes": 4096});
        let s = of(12.34, &status, "self", None);
        let counts = [
            s.heap_kib,
            s.tasks,
            s.library_tasks,
            s.channels_active,
            s.channels_listed,
        ];
        assert_eq!(counts, [4, 3, 3, 1, 2]);
        assert_eq!(
            (s.channels_planned, s.interface_queries, s.replays),
            (4, 9, 3)
        );
        assert_eq!(
            kinds(&status),
            [("channel-reader".to_string(), 1), ("probe".to_string(), 2)]
        );
        assert_eq!(s.csv().split(',').count(), Sample::FIELDS.len() + 1);
        let json = s.json();
        assert_eq!(
            (json["t_s"].as_f64(), json["replays"].as_u64()),
            (Some(12.3), Some(3))
        );
    }
}
