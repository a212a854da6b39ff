//! The 50 ms sampler: every link's client-side byte counters and the established connections
//! to port 445, read from `/proc/thread-self/net/{dev,tcp}` opened while the thread was inside
//! the client namespace. Such a file keeps showing that namespace after the thread returns, so
//! no process is needed per sample.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use smb3_tests::Testbed;

use crate::transfer::Direction;
use smb3_benches::Context;

/// How often the counters are read.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// One reading.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reading {
    /// Seconds on the run's clock.
    pub(crate) t: f64,
    /// Bytes received per link, link 1 first.
    pub(crate) rx: Vec<u64>,
    pub(crate) tx: Vec<u64>,
    /// Established connections to port 445 (the session's channels), when the namespace's
    /// `/proc/net/tcp` could be read.
    pub(crate) channels: Option<usize>,
}

impl Reading {
    pub(crate) fn bytes(&self, direction: Direction) -> &[u64] {
        match direction {
            Direction::Download => &self.rx,
            Direction::Upload => &self.tx,
        }
    }
}

/// Connections in `/proc/net/tcp` text that are established (`01`) to port 445 (`01BD`). A
/// connection the server reset leaves that state at once, so the count shows channels lost
/// and back.
fn count_smb_connections(text: &str) -> usize {
    let established_to_445 = |line: &&str| {
        let fields: Vec<&str> = line.split_whitespace().take(4).collect();
        matches!(fields[..], [_, _, remote, "01"] if remote.ends_with(":01BD"))
    };
    text.lines().skip(1).filter(established_to_445).count()
}

/// The rx and tx byte counters of the interfaces `names` in `/proc/net/dev` text.
fn parse_net_dev(text: &str, names: &[String]) -> Result<(Vec<u64>, Vec<u64>), String> {
    let (mut rx, mut tx) = (Vec::new(), Vec::new());
    for name in names {
        let line = text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(n, _)| n.trim() == name);
        let fields: Vec<&str> = line
            .ok_or_else(|| format!("no interface {name} in /proc/net/dev"))?
            .1
            .split_whitespace()
            .collect();
        // Received bytes first, sent bytes after the eight receive fields.
        let number = |i: usize| {
            let v = fields.get(i).and_then(|v| v.parse().ok());
            v.ok_or_else(|| format!("malformed /proc/net/dev line for {name}"))
        };
        rx.push(number(0)?);
        tx.push(number(8)?);
    }
    Ok((rx, tx))
}

/// The whole of a `/proc` file again, from its start.
fn reread(file: &mut File, text: &mut String) -> std::io::Result<()> {
    text.clear();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_string(text).map(drop)
}

/// Runs `work` while a thread reads `tb`'s client counters every [`SAMPLE_EVERY`] on the
/// clock `t0` (the first reading before `work` starts). `work` is given the bytes moved in a
/// direction over all links since then. What it returned, and every reading.
pub(crate) fn sampling<R>(
    tb: &Testbed,
    t0: Instant,
    work: impl FnOnce(&dyn Fn(Direction) -> u64) -> R,
) -> Result<(R, Vec<Reading>), String> {
    let (mut dev, mut tcp) = {
        let _inside = tb.enter_client_netns()?;
        let dev =
            File::open("/proc/thread-self/net/dev").ctx("the client namespace's /proc/net/dev")?;
        (dev, File::open("/proc/thread-self/net/tcp").ok())
    };
    let names: Vec<String> = tb.links().iter().map(|l| l.client_if.clone()).collect();
    let mut text = String::new();
    let mut read = move || -> Result<Reading, String> {
        reread(&mut dev, &mut text).ctx("reading /proc/net/dev")?;
        let t = t0.elapsed().as_secs_f64();
        let (rx, tx) = parse_net_dev(&text, &names)?;
        let channels = tcp
            .as_mut()
            .and_then(|f| reread(f, &mut text).ok())
            .map(|()| count_smb_connections(&text));
        Ok(Reading {
            t,
            rx,
            tx,
            channels,
        })
    };
    let readings = Mutex::new(vec![read()?]);
    let stop = AtomicBool::new(false);
    let lock = || readings.lock().unwrap_or_else(PoisonError::into_inner);
    let out = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| -> Result<(), String> {
            // A fixed schedule, so a slow read does not shift every later one.
            let mut next = Instant::now() + SAMPLE_EVERY;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                next += SAMPLE_EVERY;
                let reading = read()?;
                lock().push(reading);
            }
            Ok(())
        });
        let progress = |direction: Direction| {
            let r = lock();
            let sum = |r: Option<&Reading>| r.map_or(0, |r| r.bytes(direction).iter().sum::<u64>());
            sum(r.last()).saturating_sub(sum(r.first()))
        };
        let out = work(&progress);
        stop.store(true, Ordering::Relaxed);
        sampler
            .join()
            .map_err(|_| "the counter sampler panicked".to_string())?
            .map(|()| out)
    })?;
    Ok((
        out,
        readings
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_dev_and_tcp() {
        let dev = "Inter-|   Receive |  Transmit\n face |bytes packets|bytes\n    lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n  \
                   cli2: 5000 7 0 0 0 0 0 0 600 3 0 0 0 0 0 0\n  cli1:1234567890123 9 0 0 0 0 0 0 42 1 0 0 0 0 0 0\n";
        let names = vec!["cli1".to_string(), "cli2".to_string()];
        assert_eq!(
            parse_net_dev(dev, &names),
            Ok((vec![1_234_567_890_123, 5000], vec![42, 600]))
        );
        assert!(parse_net_dev(dev, &["cli3".to_string()])
            .unwrap_err()
            .contains("cli3"));
        assert!(parse_net_dev("  cli1: 1 2 3\n", &names[..1])
            .unwrap_err()
            .contains("malformed"));
        // Established to 445, closed to 445, established from 445, established to 445.
        let tcp = "  sl  local_address rem_address   st tx_queue\n   0: 0201000A:D2A4 0101000A:01BD 01 0\n   \
                   1: 0202000A:D2A6 0102000A:01BD 07 0\n   2: 0203000A:01BD 0103000A:D2A8 01 0\n   \
                   3: 0204000A:D2AA 0104000A:01BD 01 0\n";
        assert_eq!(
            (count_smb_connections(tcp), count_smb_connections("")),
            (2, 0)
        );
    }
}
