//! The 50 ms sampler: every link's client-side byte counters and the established connections
//! to port 445, read from `/proc/thread-self/net/{dev,tcp}` opened while the thread was inside
//! the client namespace. Such a file keeps showing that namespace after the thread returns,
//! so the sampler needs neither a process per sample nor a private sysfs mount.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smb3_tests::Testbed;

use crate::transfer::Direction;

/// How often the counters are read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// One reading of every link's client-side byte counters.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Seconds since the run's clock started.
    pub t: f64,
    /// Bytes received per link (link 1 first).
    pub rx: Vec<u64>,
    /// Bytes sent per link.
    pub tx: Vec<u64>,
    /// Established TCP connections to port 445 (the session's channels), when the sampler
    /// could read the namespace's `/proc/net/tcp`.
    pub channels: Option<usize>,
}

/// SMB's TCP port as `/proc/net/tcp` writes it (hex).
const SMB_PORT_HEX: &str = "01BD";
/// `/proc/net/tcp`'s code for ESTABLISHED.
const TCP_ESTABLISHED: &str = "01";

/// How many connections in `/proc/net/tcp` text are established to port 445. A connection
/// the server reset leaves ESTABLISHED at once, so the count shows channels lost and back.
pub fn count_smb_connections(text: &str) -> usize {
    text.lines()
        .skip(1)
        .filter(|line| {
            // sl local_address rem_address st ...
            let fields: Vec<&str> = line.split_whitespace().take(4).collect();
            matches!(fields.as_slice(), [_, _, remote, state]
                if remote.rsplit(':').next() == Some(SMB_PORT_HEX) && *state == TCP_ESTABLISHED)
        })
        .count()
}

/// The rx and tx byte counters of the interfaces `names` from `/proc/net/dev` text.
pub fn parse_net_dev(text: &str, names: &[String]) -> Result<(Vec<u64>, Vec<u64>), String> {
    let mut rx = Vec::with_capacity(names.len());
    let mut tx = Vec::with_capacity(names.len());
    for name in names {
        let fields = text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(n, _)| n.trim() == name)
            .map(|(_, rest)| rest.split_whitespace().collect::<Vec<_>>())
            .ok_or_else(|| format!("no interface {name} in /proc/net/dev"))?;
        // Receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes ...
        let number = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| format!("malformed /proc/net/dev line for {name}"))
        };
        rx.push(number(0)?);
        tx.push(number(8)?);
    }
    Ok((rx, tx))
}

/// The client namespace's `/proc/net/dev` and `/proc/net/tcp`, opened from inside it: such
/// files keep showing that namespace after the thread returns.
struct CounterFiles {
    names: Vec<String>,
    dev: File,
    /// `None` when it could not be opened: the readings then carry no channel count.
    tcp: Option<File>,
    text: String,
}

impl CounterFiles {
    fn open(tb: &Testbed) -> Result<CounterFiles, String> {
        let _inside = tb.enter_client_netns()?;
        let dev = File::open("/proc/thread-self/net/dev")
            .map_err(|e| format!("cannot open the client namespace's /proc/net/dev: {e}"))?;
        Ok(CounterFiles {
            names: tb.links().iter().map(|l| l.client_if.clone()).collect(),
            dev,
            tcp: File::open("/proc/thread-self/net/tcp").ok(),
            text: String::new(),
        })
    }

    /// Reads both files once, stamped with the time since `t0`.
    fn read(&mut self, t0: Instant) -> Result<Reading, String> {
        reread(&mut self.dev, &mut self.text).map_err(|e| format!("reading /proc/net/dev: {e}"))?;
        let t = t0.elapsed().as_secs_f64();
        let (rx, tx) = parse_net_dev(&self.text, &self.names)?;
        let channels = match &mut self.tcp {
            Some(tcp) => reread(tcp, &mut self.text)
                .ok()
                .map(|()| count_smb_connections(&self.text)),
            None => None,
        };
        Ok(Reading {
            t,
            rx,
            tx,
            channels,
        })
    }
}

/// The whole of a `/proc` file again, from its start.
fn reread(file: &mut File, text: &mut String) -> std::io::Result<()> {
    text.clear();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_string(text).map(drop)
}

/// A thread that reads the counters every [`SAMPLE_EVERY`] until stopped (or dropped).
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    readings: Arc<Mutex<Vec<Reading>>>,
    handle: Option<JoinHandle<Result<(), String>>>,
}

impl Sampler {
    /// Opens the client namespace's `/proc/net/dev` and starts sampling the links' client
    /// interfaces on the clock `t0`; returns once the first reading is in.
    pub(crate) fn start(tb: &Testbed, t0: Instant) -> Result<Sampler, String> {
        let mut files = CounterFiles::open(tb)?;
        let mut read = move || files.read(t0);
        let first = read()?;
        let readings = Arc::new(Mutex::new(vec![first]));
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let readings = Arc::clone(&readings);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                // Ticks on a fixed schedule so a slow read does not shift every later one.
                let mut next = Instant::now() + SAMPLE_EVERY;
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                    next += SAMPLE_EVERY;
                    let reading = read()?;
                    readings
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(reading);
                }
                Ok(())
            })
        };
        Ok(Sampler {
            stop,
            readings,
            handle: Some(handle),
        })
    }

    /// Bytes moved in `direction` over all links since the first reading.
    pub(crate) fn progress(&self, direction: Direction) -> u64 {
        let r = self.readings.lock().unwrap_or_else(PoisonError::into_inner);
        match (r.first(), r.last()) {
            (Some(a), Some(b)) => {
                let (a, b) = match direction {
                    Direction::Download => (&a.rx, &b.rx),
                    Direction::Upload => (&a.tx, &b.tx),
                };
                b.iter().sum::<u64>().saturating_sub(a.iter().sum())
            }
            _ => 0,
        }
    }

    /// Stops the thread and returns every reading.
    pub(crate) fn finish(mut self) -> Result<Vec<Reading>, String> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            match handle.join() {
                Ok(result) => result?,
                Err(_) => return Err("the counter sampler panicked".into()),
            }
        }
        let readings =
            std::mem::take(&mut *self.readings.lock().unwrap_or_else(PoisonError::into_inner));
        Ok(readings)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // An early return must not leave the thread reading forever.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
             face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
             lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n  \
             cli2: 5000 7 0 0 0 0 0 0 600 3 0 0 0 0 0 0\n  \
             cli1:1234567890123 9 0 0 0 0 0 0 42 1 0 0 0 0 0 0\n";
        let names = vec!["cli1".to_string(), "cli2".to_string()];
        let (rx, tx) = parse_net_dev(text, &names).unwrap();
        assert_eq!(rx, vec![1_234_567_890_123, 5000]);
        assert_eq!(tx, vec![42, 600]);
        assert!(parse_net_dev(text, &["cli3".to_string()])
            .unwrap_err()
            .contains("cli3"));
        assert!(parse_net_dev("  cli1: 1 2 3\n", &["cli1".to_string()])
            .unwrap_err()
            .contains("malformed"));
    }

    #[test]
    fn counts_established_smb_connections() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
             0: 0201000A:D2A4 0101000A:01BD 01 00000000:00000000 00:00000000 00000000     0        0 1\n   \
             1: 0202000A:D2A6 0102000A:01BD 07 00000000:00000000 00:00000000 00000000     0        0 2\n   \
             2: 0203000A:01BD 0103000A:D2A8 01 00000000:00000000 00:00000000 00000000     0        0 3\n   \
             3: 0204000A:D2AA 0104000A:01BD 01 00000000:00000000 00:00000000 00000000     0        0 4\n";
        // Rows 0 and 3: established to port 445; row 1 is closed, row 2 comes from 445.
        assert_eq!(count_smb_connections(text), 2);
        assert_eq!(count_smb_connections(""), 0);
    }
}
