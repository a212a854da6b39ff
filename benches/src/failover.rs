//! The failover benchmark (`smb-bench --failover`): how long a multichannel transfer suffers
//! when one of its links fails, seen from outside the client.
//!
//! For each fault kind ([`Fault::Rst`]: the server resets link K's connections, the link stays
//! up; [`Fault::Silent`]: link K goes down without a word and comes back some seconds later)
//! and each direction, `smbcp` copies a file over N shaped links while a thread samples the
//! byte counters of every client-side veth every 50 ms. When about 30 % of the file has
//! crossed the wire the fault is injected on link K. The counters give per-link and aggregate
//! throughput over time, from which [`analyse`] computes the failover gap, the bytes lost
//! during it, and when link K carries its share again. smbcp's exit status and the SHA-256 of
//! what arrived are recorded; a transfer that fails or hangs is a measured result (reported
//! as such), never a reason for the benchmark to stop.
//!
//! The counters are read from `/proc/thread-self/net/dev` opened while the thread was inside
//! the client namespace: such a file keeps showing that namespace's devices after the thread
//! returns, so the sampler needs neither a process per sample nor a private sysfs mount.

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smb3_tests::Testbed;

use crate::data::{fingerprint, Fingerprint};
use crate::machine::Facts;
use crate::multichannel::channels_cell;
use crate::svg::{LineChart, LinePanel, Marker};
use crate::table::Table;
use crate::transfer::{Direction, SmbcpReport};

// ---------------------------------------------------------------------------- settings

/// The link the fault hits (1-based). Not link 1: smbcp's session starts there, and losing
/// the first channel is a different (harder) case than losing one of several.
pub const FAULT_LINK: usize = 2;
/// Links of the default testbed.
pub const DEFAULT_LINKS: usize = 4;
/// Per-link rate (Mbit/s) by default: low enough that a 1 GiB file lasts long enough for the
/// fault, the link-down time and a recovery afterwards, and that the two CPUs are never the
/// limit (4 links carry about 48 MB/s).
pub const DEFAULT_RATE_MBIT: u32 = 100;
/// Share of the file moved before the fault.
pub const FAULT_AT: f64 = 0.30;
/// How often the counters are read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// Trailing window the gap and link-back criteria smooth over, in sampling intervals (150 ms):
/// one 50 ms interval swings by about 10 % with tbf's bursts alone.
const SMOOTH_INTERVALS: usize = 3;
/// How long throughput must hold before it counts as recovered.
pub const SUSTAIN: f64 = 0.5;
/// Share of what the surviving links can carry that counts as recovered.
pub const GAP_THRESHOLD: f64 = 0.90;
/// Share of its pre-fault share that makes the failed link count as carrying traffic again.
pub const LINK_BACK_THRESHOLD: f64 = 0.50;
/// The chart plots rates over this many sampling intervals (100 ms): less noise to read.
const PLOT_INTERVALS: usize = 2;
/// Share of the file that must have crossed the wire before the transfer counts as started.
const STARTED_AT: f64 = 0.01;
/// The transfer counts as ended once all but this share of the file has crossed (the last
/// few packets - CLOSE, LOGOFF - are not data).
const ENDED_WITHIN: f64 = 0.001;
/// Longest stretch before the fault used for the pre-fault rate (seconds).
const PRE_FAULT_WINDOW: f64 = 2.0;
/// Shortest usable pre-fault stretch (seconds).
const MIN_PRE_FAULT: f64 = 0.3;

/// How a link fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `testbed cut K`: the server resets every TCP connection over link K; the link stays
    /// up, so the client can reconnect at once.
    Rst,
    /// `testbed link-down K`: packets on link K are silently lost; `link-up K` follows after
    /// the configured time.
    Silent,
}

impl Fault {
    /// Both kinds, in report order.
    pub const ALL: [Fault; 2] = [Fault::Rst, Fault::Silent];

    /// Short name (table rows, file names).
    pub fn name(self) -> &'static str {
        match self {
            Fault::Rst => "rst",
            Fault::Silent => "silent",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How one failover run is done.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Links of the testbed.
    pub links: usize,
    /// Rate of every link (Mbit/s).
    pub rate_mbit: u32,
    /// The link that fails (1-based).
    pub fault_link: usize,
    /// How long link `fault_link` stays down for [`Fault::Silent`].
    pub down_for: Duration,
    /// smbcp is killed when it runs longer than this.
    pub deadline: Duration,
}

/// What N links of `rate_mbit` carry in payload bytes per second (TCP goodput over tbf is
/// about 95 % of the rate at MTU 1500).
pub fn payload_bytes_per_s(links: usize, rate_mbit: u32) -> f64 {
    links as f64 * f64::from(rate_mbit) * 1e6 / 8.0 * 0.95
}

/// The default file size in MiB: big enough that, with a client that fails over well, the
/// transfer still runs `down_for` seconds after the link is back (so recovery can be seen),
/// counting 30 % before the fault and 3/4 of the rate while the link is down. At least 1 GiB
/// (256 MiB with `quick`), rounded up to 256 MiB (64 MiB).
pub fn default_size_mib(links: usize, rate_mbit: u32, down_for: Duration, quick: bool) -> u64 {
    let links = links.max(2);
    let rate = payload_bytes_per_s(links, rate_mbit);
    let down = down_for.as_secs_f64();
    let surviving = (links - 1) as f64 / links as f64;
    let after_fault_s = surviving * down + down;
    let bytes = rate * after_fault_s / (1.0 - FAULT_AT);
    let (floor, step) = if quick { (256, 64) } else { (1024, 256) };
    let mib = (bytes / (1u64 << 20) as f64).ceil() as u64;
    mib.div_ceil(step).saturating_mul(step).max(floor)
}

/// The default link-down time: 8 s, 4 s with `--quick`.
pub fn default_down_for(quick: bool) -> Duration {
    Duration::from_secs(if quick { 4 } else { 8 })
}

/// How long smbcp may run: three times what the links need for the file plus two minutes
/// (the client's own request timeout is 60 s), so a stalled transfer is ended and reported.
pub fn default_deadline(size: u64, links: usize, rate_mbit: u32) -> Duration {
    let expected = size as f64 / payload_bytes_per_s(links.max(1), rate_mbit) + 10.0;
    Duration::from_secs_f64(expected * 3.0 + 120.0)
}

/// Fails with a suggestion when `bytes` would take more than 80 % of the memory available
/// now (`MemAvailable`); the files live on tmpfs, and swapping would distort the timeline.
pub fn check_memory(bytes: u64) -> Result<(), String> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .map_err(|e| format!("cannot read /proc/meminfo: {e}"))?;
    let available = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or("no MemAvailable in /proc/meminfo")?;
    if bytes as f64 > available as f64 * 0.8 {
        return Err(format!(
            "the files need {} MiB of memory (tmpfs), but only {} MiB are available: \
             choose a lower --rate or a smaller --size-mib",
            bytes >> 20,
            available >> 20
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------- counters

/// One reading of every link's client-side byte counters.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Seconds since the run's clock started.
    pub t: f64,
    /// Bytes received per link (link 1 first).
    pub rx: Vec<u64>,
    /// Bytes sent per link.
    pub tx: Vec<u64>,
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

/// A thread that reads the counters every [`SAMPLE_EVERY`] until stopped (or dropped).
struct Sampler {
    stop: Arc<AtomicBool>,
    readings: Arc<Mutex<Vec<Reading>>>,
    handle: Option<JoinHandle<Result<(), String>>>,
}

impl Sampler {
    /// Opens the client namespace's `/proc/net/dev` and starts sampling the links' client
    /// interfaces on the clock `t0`; returns once the first reading is in.
    fn start(tb: &Testbed, t0: Instant) -> Result<Sampler, String> {
        let names: Vec<String> = tb.links().iter().map(|l| l.client_if.clone()).collect();
        let mut file = {
            let _inside = tb.enter_client_netns()?;
            File::open("/proc/thread-self/net/dev")
                .map_err(|e| format!("cannot open the client namespace's /proc/net/dev: {e}"))?
        };
        let mut text = String::new();
        let mut read = move || -> Result<Reading, String> {
            text.clear();
            file.seek(SeekFrom::Start(0))
                .and_then(|_| file.read_to_string(&mut text))
                .map_err(|e| format!("reading /proc/net/dev: {e}"))?;
            let t = t0.elapsed().as_secs_f64();
            let (rx, tx) = parse_net_dev(&text, &names)?;
            Ok(Reading { t, rx, tx })
        };
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
    fn progress(&self, direction: Direction) -> u64 {
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
    fn finish(mut self) -> Result<Vec<Reading>, String> {
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

/// smbcp while it runs: killed (by its PID) and reaped when dropped before it ended, so an
/// early return of the harness leaves no copy running.
struct Running {
    child: Child,
    ended: bool,
}

impl Running {
    fn try_wait(&mut self) -> Result<Option<Exit>, String> {
        let status = self
            .child
            .try_wait()
            .map_err(|e| format!("waiting for smbcp: {e}"))?;
        self.ended |= status.is_some();
        Ok(status.map(Exit::from_status))
    }

    /// Kills smbcp after it ran `after` and reaps it.
    fn kill(&mut self, after: Duration) -> Result<Exit, String> {
        self.child
            .kill()
            .and_then(|()| self.child.wait())
            .map_err(|e| format!("cannot end smbcp (pid {}): {e}", self.child.id()))?;
        self.ended = true;
        Ok(Exit::Killed(after.as_secs()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------- one run

/// How smbcp ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// It ran past the deadline (seconds) and was killed.
    Killed(u64),
}

impl Exit {
    fn from_status(status: ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(c), _) => Exit::Code(c),
            (None, Some(s)) => Exit::Signal(s),
            (None, None) => Exit::Code(-1),
        }
    }

    /// True for exit code 0.
    pub fn success(&self) -> bool {
        *self == Exit::Code(0)
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "{c}"),
            Exit::Signal(s) => write!(f, "signal {s}"),
            Exit::Killed(s) => write!(f, "killed after {s} s"),
        }
    }
}

/// What the SHA-256 check of the copy found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Same size and SHA-256 as the reference.
    Ok,
    /// There is a file, but not the reference: its size.
    Mismatch(u64),
    /// No file at all.
    Missing,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Ok => f.write_str("ok"),
            Check::Mismatch(len) => write!(f, "differs ({len} bytes)"),
            Check::Missing => f.write_str("no file"),
        }
    }
}

/// Everything one run produced.
#[derive(Debug, Clone)]
pub struct Run {
    /// Which fault.
    pub fault: Fault,
    /// Which way the data went.
    pub direction: Direction,
    /// Counter readings, every [`SAMPLE_EVERY`].
    pub readings: Vec<Reading>,
    /// When the fault was in place (the testbed command had returned), on the readings'
    /// clock; `None` when the transfer ended before it was due.
    pub fault_at: Option<f64>,
    /// How long the testbed command that made the fault took (seconds).
    pub fault_took: f64,
    /// Connections the server reset ([`Fault::Rst`]).
    pub cut: Option<usize>,
    /// When link K was up again ([`Fault::Silent`]), on the readings' clock.
    pub link_up_at: Option<f64>,
    /// When smbcp was started and when it ended, on the readings' clock.
    pub smbcp_span: (f64, f64),
    /// How smbcp ended.
    pub exit: Exit,
    /// smbcp's last line on stderr (empty if none).
    pub stderr_line: String,
    /// smbcp's `--json` report when it printed one.
    pub report: Option<SmbcpReport>,
    /// The SHA-256 check of the copy.
    pub check: Check,
    /// File size.
    pub size: u64,
}

/// Where one run reads and writes.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    /// The testbed.
    pub tb: &'a Testbed,
    /// The smbcp binary.
    pub smbcp: &'a Path,
    /// Share (`[plain]`) name of the reference file, read by downloads.
    pub remote_source: &'a str,
    /// Share name uploads write to.
    pub remote_target: &'a str,
    /// Local reference file, read by uploads.
    pub local_source: &'a Path,
    /// Local file downloads write to.
    pub local_target: &'a Path,
    /// What the reference file looks like.
    pub reference: &'a Fingerprint,
}

const SHARE: &str = "plain";

impl Job<'_> {
    /// Where the copy lands, on the host.
    fn result_path(&self, direction: Direction) -> PathBuf {
        match direction {
            Direction::Download => self.local_target.to_path_buf(),
            Direction::Upload => self.tb.share_path(SHARE).join(self.remote_target),
        }
    }

    /// smbcp copying the file `direction`, in the client namespace, password in the
    /// environment.
    fn command(&self, direction: Direction) -> Command {
        let tb = self.tb;
        let url = |name: &str| {
            format!(
                "smb://{};{}@{}/{SHARE}/{name}",
                tb.domain(),
                tb.user(),
                tb.server_addr(1)
            )
        };
        let mut cmd = tb.client_command(self.smbcp);
        cmd.args(["-q", "--json"])
            .env("SMB_PASSWORD", tb.password());
        match direction {
            Direction::Download => cmd
                .arg(url(self.remote_source))
                .arg(self.local_target.as_os_str()),
            Direction::Upload => cmd
                .arg(self.local_source.as_os_str())
                .arg(url(self.remote_target)),
        };
        cmd
    }
}

/// Takes link K back up when dropped, so no early return leaves it down for the next run.
struct LinkDown<'a> {
    tb: &'a Testbed,
    link: usize,
    down: bool,
}

impl LinkDown<'_> {
    fn up(&mut self) -> Result<(), String> {
        if self.down {
            self.tb.link_up(self.link)?;
            self.down = false;
        }
        Ok(())
    }
}

impl Drop for LinkDown<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.up() {
            eprintln!("smb-bench: cannot take link {} up again: {e}", self.link);
        }
    }
}

/// Runs smbcp once with `fault` injected on the fault link at [`FAULT_AT`] of the file.
/// Errors are the harness's own failures (the testbed or the counters); smbcp failing,
/// hanging or delivering a wrong file is part of the returned [`Run`].
pub fn run_once(
    job: &Job<'_>,
    settings: &Settings,
    fault: Fault,
    direction: Direction,
) -> Result<Run, String> {
    let result = job.result_path(direction);
    remove_if_present(&result)?;
    let size = job.reference.len;
    let t0 = Instant::now();
    let sampler = Sampler::start(job.tb, t0)?;
    let mut cmd = job.command(direction);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = t0.elapsed().as_secs_f64();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", job.smbcp.display()))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let mut smbcp = Running {
        child,
        ended: false,
    };

    let mut link = LinkDown {
        tb: job.tb,
        link: settings.fault_link,
        down: false,
    };
    let mut fault_at = None;
    let mut fault_took = 0.0;
    let mut cut = None;
    let mut link_up_at = None;
    let trigger = (size as f64 * FAULT_AT) as u64;
    let deadline = Instant::now() + settings.deadline;
    let exit = loop {
        if let Some(exit) = smbcp.try_wait()? {
            break exit;
        }
        if Instant::now() >= deadline {
            break smbcp.kill(settings.deadline)?;
        }
        if fault_at.is_none() && sampler.progress(direction) >= trigger {
            let before = Instant::now();
            match fault {
                Fault::Rst => cut = Some(job.tb.cut(Some(settings.fault_link))?),
                Fault::Silent => {
                    link.down = true;
                    job.tb.link_down(settings.fault_link)?;
                }
            }
            fault_took = before.elapsed().as_secs_f64();
            fault_at = Some(t0.elapsed().as_secs_f64());
        }
        if let (Fault::Silent, Some(at)) = (fault, fault_at) {
            if link.down && t0.elapsed().as_secs_f64() >= at + settings.down_for.as_secs_f64() {
                link.up()?;
                link_up_at = Some(t0.elapsed().as_secs_f64());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let ended = t0.elapsed().as_secs_f64();
    // The next run needs the link; a link-up after smbcp ended is still recorded.
    if link.down {
        link.up()?;
        link_up_at = Some(t0.elapsed().as_secs_f64());
    }
    let readings = sampler.finish()?;
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let check = match fingerprint(&result) {
        Ok(got) if got == *job.reference => Check::Ok,
        Ok(got) => Check::Mismatch(got.len),
        Err(_) => Check::Missing,
    };
    remove_if_present(&result)?;
    let report = serde_json::from_str::<serde_json::Value>(stdout.trim())
        .ok()
        .and_then(|json| SmbcpReport::from_json(&json).ok());
    Ok(Run {
        fault,
        direction,
        readings,
        fault_at,
        fault_took,
        cut,
        link_up_at,
        smbcp_span: (started, ended),
        exit,
        stderr_line: last_line(&stderr),
        report,
        check,
        size,
    })
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    })
}

/// The last non-empty line of `text`, made safe for a table cell and kept short.
fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let clean = line.replace('|', "/");
    if clean.chars().count() > 160 {
        format!("{}...", clean.chars().take(157).collect::<String>())
    } else {
        clean
    }
}

fn remove_if_present(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
    }
}

// ---------------------------------------------------------------------------- analysis

/// Cumulative bytes per link over time, for one direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Reading times (seconds, increasing).
    pub t: Vec<f64>,
    /// Per link (link 1 first), the bytes since the first reading, one per time.
    pub links: Vec<Vec<u64>>,
}

impl Timeline {
    /// The counters of `direction` (rx for downloads, tx for uploads) from `readings`,
    /// relative to the first reading. Readings whose time does not increase are dropped.
    pub fn from_readings(readings: &[Reading], direction: Direction) -> Timeline {
        let pick = |r: &Reading| -> Vec<u64> {
            match direction {
                Direction::Download => r.rx.clone(),
                Direction::Upload => r.tx.clone(),
            }
        };
        let n = readings.first().map_or(0, |r| pick(r).len());
        let base = readings.first().map(pick).unwrap_or_default();
        let mut t = Vec::new();
        let mut links = vec![Vec::new(); n];
        for r in readings {
            if t.last().is_some_and(|&last| r.t <= last) {
                continue;
            }
            t.push(r.t);
            for (k, (v, b)) in pick(r).iter().zip(&base).enumerate() {
                links[k].push(v.saturating_sub(*b));
            }
        }
        Timeline { t, links }
    }

    /// Every link's bytes added up, one per time.
    pub fn aggregate(&self) -> Vec<u64> {
        (0..self.t.len())
            .map(|i| self.links.iter().map(|l| l[i]).sum())
            .collect()
    }
}

/// A cumulative counter's value at time `at`, interpolated between readings (clamped to the
/// first and last).
fn value_at(t: &[f64], bytes: &[u64], at: f64) -> f64 {
    let Some(i) = t.iter().position(|&ti| ti >= at) else {
        return bytes.last().map_or(0.0, |&b| b as f64);
    };
    if i == 0 {
        return bytes[0] as f64;
    }
    let (t0, t1) = (t[i - 1], t[i]);
    let (b0, b1) = (bytes[i - 1] as f64, bytes[i] as f64);
    b0 + (b1 - b0) * (at - t0) / (t1 - t0)
}

/// The first time at or after `from` where the rate of `bytes` (bytes/s over the trailing
/// [`SMOOTH_INTERVALS`], windows wholly after `from`) is at least `threshold` and stays so for
/// [`SUSTAIN`] seconds. Returns the start of that stretch, whose first interval must reach
/// `threshold` on its own: otherwise a window only partly filled with traffic would date the
/// recovery up to two intervals early.
pub fn sustained_from(t: &[f64], bytes: &[u64], from: f64, threshold: f64) -> Option<f64> {
    let first = t.iter().position(|&ti| ti >= from)?;
    let rate_over = |j: usize, i: usize| (bytes[i] as f64 - bytes[j] as f64) / (t[i] - t[j]);
    let rate = |i: usize| rate_over(i - SMOOTH_INTERVALS, i);
    'start: for s in first..t.len().saturating_sub(1) {
        if rate_over(s, s + 1) < threshold {
            continue;
        }
        let mut i = s + SMOOTH_INTERVALS;
        loop {
            if i >= t.len() {
                // The series ends before the stretch is long enough.
                return None;
            }
            if rate(i) < threshold {
                continue 'start;
            }
            if t[i] - t[s] >= SUSTAIN {
                return Some(t[s]);
            }
            i += 1;
        }
    }
    None
}

/// When something happened, or that it did not within what was observed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// After this many seconds.
    After(f64),
    /// Not within this many seconds (the end of the series).
    NotWithin(f64),
}

/// What the series says about one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Aggregate rate before the fault, bytes/s (on the wire, headers included).
    pub pre_fault: f64,
    /// From the fault until the aggregate holds [`GAP_THRESHOLD`] of what the surviving links
    /// carry (pre-fault rate times (N-1)/N) for [`SUSTAIN`].
    pub gap: Outcome,
    /// Bytes short of the pre-fault rate during the gap (or until the end if it never
    /// closed).
    pub dip: f64,
    /// From the fault (rst) or the link-up (silent) until the failed link holds
    /// [`LINK_BACK_THRESHOLD`] of its pre-fault share for [`SUSTAIN`]; `None` when the link
    /// came up only after the transfer had ended.
    pub link_back: Option<Outcome>,
    /// How much longer the whole transfer took than its bytes need at the pre-fault rate
    /// (seconds). The gap can be short while requests queued on the dead link still arrive
    /// late and make a slow tail; this counts both. A client that fails over perfectly loses
    /// about the dead link's share of the time it is down.
    pub time_lost: f64,
}

/// Computes [`Metrics`] from `tl`, the fault at `fault_at` on link `fault_link` (1-based),
/// the link up again at `link_up_at` (silent faults), and the file size.
pub fn analyse(
    tl: &Timeline,
    fault_at: f64,
    link_up_at: Option<f64>,
    fault_link: usize,
    size: u64,
) -> Result<Metrics, String> {
    let n = tl.links.len();
    if fault_link == 0 || fault_link > n || tl.t.len() < 2 {
        return Err("too few readings or links".into());
    }
    let agg = tl.aggregate();
    let t = &tl.t;
    let last = *t.last().unwrap_or(&0.0);
    // The transfer starts when 1 % of the file has crossed; the steady part before the fault
    // is the later half of what came before it, at most the last 2 s.
    let started = agg
        .iter()
        .position(|&b| b as f64 >= size as f64 * STARTED_AT)
        .map(|i| t[i])
        .filter(|&s| s < fault_at)
        .ok_or("the transfer had not started at the fault")?;
    let window_start = (started + (fault_at - started) / 2.0).max(fault_at - PRE_FAULT_WINDOW);
    if fault_at - window_start < MIN_PRE_FAULT {
        return Err(format!(
            "only {:.0} ms of transfer before the fault",
            (fault_at - started) * 1e3
        ));
    }
    let pre_fault =
        (value_at(t, &agg, fault_at) - value_at(t, &agg, window_start)) / (fault_at - window_start);
    let surviving = pre_fault * (n - 1) as f64 / n as f64;
    let gap_end = sustained_from(t, &agg, fault_at, surviving * GAP_THRESHOLD);
    let (gap, until) = match gap_end {
        Some(end) => (Outcome::After(end - fault_at), end),
        None => (Outcome::NotWithin(last - fault_at), last),
    };
    let moved = value_at(t, &agg, until) - value_at(t, &agg, fault_at);
    let dip = (pre_fault * (until - fault_at) - moved).max(0.0);
    let share = pre_fault / n as f64;
    let back_from = link_up_at.unwrap_or(fault_at);
    let link_back = if back_from >= last {
        None
    } else {
        let link = &tl.links[fault_link - 1];
        Some(
            match sustained_from(t, link, back_from, share * LINK_BACK_THRESHOLD) {
                Some(at) => Outcome::After(at - back_from),
                None => Outcome::NotWithin(last - back_from),
            },
        )
    };
    let total = agg.last().copied().unwrap_or(0);
    let ended = agg
        .iter()
        .position(|&b| b as f64 >= total as f64 - size as f64 * ENDED_WITHIN)
        .map_or(last, |i| t[i]);
    let after_start = total as f64 - value_at(t, &agg, started);
    let time_lost = (ended - started) - after_start / pre_fault;
    Ok(Metrics {
        time_lost,
        pre_fault,
        gap,
        dip,
        link_back,
    })
}

/// Points of a line: (seconds, Mbit/s).
pub type Points = Vec<(f64, f64)>;

/// Rates for plotting: per link and aggregate, Mbit/s over [`PLOT_INTERVALS`], at the middle
/// of each stretch, x in seconds relative to `origin`. Returns (aggregate, per link).
pub fn plot_rates(tl: &Timeline, origin: f64) -> (Points, Vec<Points>) {
    let series = |bytes: &[u64]| -> Points {
        (PLOT_INTERVALS..tl.t.len())
            .step_by(PLOT_INTERVALS)
            .map(|i| {
                let j = i - PLOT_INTERVALS;
                let dt = tl.t[i] - tl.t[j];
                let mbit = (bytes[i] as f64 - bytes[j] as f64) * 8.0 / dt / 1e6;
                ((tl.t[i] + tl.t[j]) / 2.0 - origin, mbit)
            })
            .collect()
    };
    let agg = tl.aggregate();
    (series(&agg), tl.links.iter().map(|l| series(l)).collect())
}

// ---------------------------------------------------------------------------- report

impl Run {
    /// The series of this run's direction.
    pub fn timeline(&self) -> Timeline {
        Timeline::from_readings(&self.readings, self.direction)
    }

    /// The metrics, or why there are none.
    pub fn metrics(&self, fault_link: usize) -> Result<Metrics, String> {
        let at = self.fault_at.ok_or_else(|| {
            let moved = self.timeline().aggregate().last().copied().unwrap_or(0);
            format!(
                "fault not injected: the transfer ended at {:.0} % of the file",
                moved as f64 * 100.0 / self.size.max(1) as f64
            )
        })?;
        analyse(&self.timeline(), at, self.link_up_at, fault_link, self.size)
    }

    /// How long smbcp ran.
    pub fn smbcp_seconds(&self) -> f64 {
        self.smbcp_span.1 - self.smbcp_span.0
    }

    /// `None` when smbcp succeeded, else what to show instead of numbers.
    pub fn failure(&self) -> Option<String> {
        match (&self.exit, self.stderr_line.as_str()) {
            (e, _) if e.success() => None,
            (Exit::Killed(s), _) => Some(format!(
                "transfer failed: no end within {s} s, smbcp killed"
            )),
            (e, "") => Some(format!("transfer failed: exit {e}, nothing on stderr")),
            (_, line) => Some(format!("transfer failed: {line}")),
        }
    }
}

fn ms(seconds: f64) -> String {
    format!("{:.0}", seconds * 1e3)
}

fn outcome_cell(o: Outcome) -> String {
    match o {
        Outcome::After(s) => ms(s),
        Outcome::NotWithin(s) => format!("not within {s:.1} s"),
    }
}

/// The table: one row per fault and direction.
pub fn table(runs: &[Run], settings: &Settings) -> Table {
    let k = settings.fault_link;
    let mut t = Table::new(&[
        "fault",
        "direction",
        ">pre-fault Mbit/s",
        ">gap ms",
        ">dip MB",
        ">time lost s",
        &format!(">link {k} back ms"),
        ">smbcp s",
        ">channels at end (per link)",
        "sha256",
        ">smbcp exit",
    ]);
    for run in runs {
        let metrics = run.metrics(k);
        let pre = metrics
            .as_ref()
            .map_or("-".into(), |m| format!("{:.0}", m.pre_fault * 8.0 / 1e6));
        let (gap, dip, lost, back) = match (run.failure(), &metrics) {
            (Some(failed), _) => (failed, "-".into(), "-".into(), "-".into()),
            (None, Err(why)) => (
                format!("not measurable: {why}"),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
            (None, Ok(m)) => {
                let dip = match m.gap {
                    Outcome::After(_) => format!("{:.1}", m.dip / 1e6),
                    Outcome::NotWithin(_) => format!(">= {:.1}", m.dip / 1e6),
                };
                let back = match (run.fault, m.link_back) {
                    (Fault::Silent, None) => "transfer ended before link-up".into(),
                    (Fault::Rst, None) => "transfer ended at the fault".into(),
                    (Fault::Silent, Some(o)) => format!("{} after link-up", outcome_cell(o)),
                    (Fault::Rst, Some(o)) => format!("{} after the fault", outcome_cell(o)),
                };
                (
                    outcome_cell(m.gap),
                    dip,
                    format!("{:.2}", m.time_lost),
                    back,
                )
            }
        };
        t.row(vec![
            run.fault.to_string(),
            run.direction.to_string(),
            pre,
            gap,
            dip,
            lost,
            back,
            format!("{:.1}", run.smbcp_seconds()),
            run.report
                .as_ref()
                .map_or("-".into(), |r| channels_cell(Some(r))),
            run.check.to_string(),
            run.exit.to_string(),
        ]);
    }
    t
}

/// One line per run with what happened when: the fault, the link-up, the end.
pub fn event_lines(runs: &[Run], settings: &Settings) -> Vec<String> {
    runs.iter()
        .map(|run| {
            let tl = run.timeline();
            let moved = tl.aggregate().last().copied().unwrap_or(0);
            let (start, end) = run.smbcp_span;
            let mut line = format!(
                "- {} {}: smbcp ran {start:.1}-{end:.1} s",
                run.fault, run.direction
            );
            if let Some(at) = run.fault_at {
                let what = match (run.fault, run.cut) {
                    (Fault::Rst, Some(n)) => {
                        format!("{n} connection(s) on link {} reset", settings.fault_link)
                    }
                    _ => format!("link {} down", settings.fault_link),
                };
                line.push_str(&format!(
                    ", {what} at {at:.2} s (the testbed command took {:.0} ms)",
                    run.fault_took * 1e3
                ));
            }
            if let Some(up) = run.link_up_at {
                line.push_str(&format!(", link up at {up:.2} s"));
            }
            line.push_str(&format!(
                "; {:.0} MB on the wire in all, sampled {} times (longest interval {:.0} ms)",
                moved as f64 / 1e6,
                tl.t.len(),
                tl.t.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max) * 1e3
            ));
            if let Some(f) = run.failure() {
                line.push_str(&format!("; {f}"));
            }
            line.push('.');
            line
        })
        .collect()
}

/// The run's counter readings as CSV: a `#` line with the events, a header, then one row per
/// reading with every link's received and sent bytes (cumulative, as the kernel counts them).
pub fn csv(run: &Run, settings: &Settings) -> String {
    let at = |t: Option<f64>| t.map_or("-".into(), |t| format!("{t:.3}"));
    let mut out = format!(
        "# {} {} on link {}: fault at {} s, link up at {} s, smbcp {:.3}-{:.3} s, exit {}\n",
        run.fault,
        run.direction,
        settings.fault_link,
        at(run.fault_at),
        at(run.link_up_at),
        run.smbcp_span.0,
        run.smbcp_span.1,
        run.exit
    );
    let links = run.readings.first().map_or(0, |r| r.rx.len());
    out.push_str("t_s");
    for k in 1..=links {
        out.push_str(&format!(",rx_bytes_link{k},tx_bytes_link{k}"));
    }
    out.push('\n');
    for r in &run.readings {
        out.push_str(&format!("{:.4}", r.t));
        for (rx, tx) in r.rx.iter().zip(&r.tx) {
            out.push_str(&format!(",{rx},{tx}"));
        }
        out.push('\n');
    }
    out
}

/// The line chart of one fault kind: a panel per direction, aggregate and per-link Mbit/s
/// over seconds from the fault, markers at the fault and the link-up.
pub fn chart(runs: &[Run], fault: Fault, settings: &Settings, size: u64) -> LineChart {
    let mut series = vec!["all links".to_string()];
    series.extend((1..=settings.links).map(|k| format!("link {k}")));
    let what = match fault {
        Fault::Rst => format!(
            "link {}'s connections reset by the server",
            settings.fault_link
        ),
        Fault::Silent => format!(
            "link {} down for {} s",
            settings.fault_link,
            settings.down_for.as_secs()
        ),
    };
    let panels = runs
        .iter()
        .filter(|r| r.fault == fault)
        .map(|run| {
            let origin = run.fault_at.unwrap_or(0.0);
            let (agg, per_link) = plot_rates(&run.timeline(), origin);
            let mut lines = vec![agg];
            lines.extend(per_link);
            let mut markers = Vec::new();
            if run.fault_at.is_some() {
                markers.push(Marker {
                    x: 0.0,
                    label: fault.name().into(),
                });
            }
            if let Some(up) = run.link_up_at {
                markers.push(Marker {
                    x: up - origin,
                    label: "link up".into(),
                });
            }
            let state = if run.failure().is_some() {
                format!(" (smbcp failed, exit {})", run.exit)
            } else {
                String::new()
            };
            LinePanel {
                title: format!("{}{state}", run.direction),
                lines,
                markers,
            }
        })
        .collect();
    LineChart {
        title: format!(
            "{}: {what} ({} MiB over {} x {} Mbit/s, 100 ms averages)",
            fault.name(),
            size >> 20,
            settings.links,
            settings.rate_mbit
        ),
        x_label: "seconds from the fault".into(),
        y_unit: "Mbit/s".into(),
        series,
        panels,
    }
}

/// The generated Markdown section: how it was measured, the table, the events, the charts
/// (`charts`: fault kind and the path to show for its SVG).
pub fn section(
    facts: &Facts,
    runs: &[Run],
    settings: &Settings,
    reference: &Fingerprint,
    charts: &[(Fault, String)],
) -> String {
    let command: Vec<String> = std::env::args().collect();
    let mut out = format!(
        "Measured {date} on {cpu} ({nproc} CPUs), kernel {kernel}, {samba}, commit {commit}.\n\
         Command: `{cmd}`; file {mib} MiB (sha256 {sha}); {links} links of {rate} Mbit/s each; \
         the fault hits link {k} once {pct:.0} % of the file has crossed the wire \
         (rst: `testbed cut {k}`; silent: `testbed link-down {k}`, `link-up {k}` {down} s \
         later); client-side veth byte counters read every {every} ms.\n\n\
         Gap: from the fault until the aggregate holds {gap:.0} % of what the surviving links \
         carry ({n1}/{n} of the pre-fault rate) for {sustain} ms, rates over a trailing {smooth} ms. \
         Dip: bytes short of the pre-fault rate during the gap. Time lost: how much longer the \
         whole transfer took than its bytes need at the pre-fault rate, which also counts a slow \
         tail of requests that waited on the dead link (a client that fails over perfectly loses \
         the dead link's share of the down time, {ideal:.1} s, in the silent case and next to \
         nothing with rst). Link {k} back: from the link-up (silent) or the fault (rst) until \
         link {k} holds {back:.0} % of its pre-fault share for {sustain} ms. Rates count bytes on \
         the wire (headers included).\n\n",
        ideal = settings.down_for.as_secs_f64() / settings.links as f64,
        date = facts.date,
        cpu = facts.cpu,
        nproc = facts.nproc,
        kernel = facts.kernel,
        samba = facts.samba,
        commit = facts.commit,
        cmd = command.join(" "),
        mib = reference.len >> 20,
        sha = &reference.sha256[..16.min(reference.sha256.len())],
        links = settings.links,
        rate = settings.rate_mbit,
        k = settings.fault_link,
        pct = FAULT_AT * 100.0,
        down = settings.down_for.as_secs(),
        every = SAMPLE_EVERY.as_millis(),
        gap = GAP_THRESHOLD * 100.0,
        n1 = settings.links - 1,
        n = settings.links,
        sustain = SUSTAIN * 1e3,
        smooth = SAMPLE_EVERY.as_millis() * SMOOTH_INTERVALS as u128,
        back = LINK_BACK_THRESHOLD * 100.0,
    );
    out.push_str(&table(runs, settings).markdown());
    out.push('\n');
    out.push_str(&event_lines(runs, settings).join("\n"));
    out.push('\n');
    for (fault, path) in charts {
        out.push_str(&format!(
            "\n![{fault}: Mbit/s per link and in all, seconds from the fault]({path})\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timeline sampled every 50 ms for `seconds`, each link moving `rate(k, t)` bytes/s.
    fn timeline(links: usize, seconds: f64, rate: impl Fn(usize, f64) -> f64) -> Timeline {
        let steps = (seconds / 0.05).round() as usize;
        let t: Vec<f64> = (0..=steps).map(|i| i as f64 * 0.05).collect();
        let links = (0..links)
            .map(|k| {
                let mut total = 0.0;
                let mut out = vec![0u64];
                for w in t.windows(2) {
                    total += rate(k + 1, w[0]) * (w[1] - w[0]);
                    out.push(total.round() as u64);
                }
                out
            })
            .collect();
        Timeline { t, links }
    }

    const MB: f64 = 1e6;

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
    fn timeline_takes_the_direction_relative_to_the_start() {
        let r = |t: f64, rx: [u64; 2], tx: [u64; 2]| Reading {
            t,
            rx: rx.to_vec(),
            tx: tx.to_vec(),
        };
        let readings = [
            r(0.0, [100, 200], [5, 6]),
            r(0.05, [150, 260], [7, 6]),
            // Out of order (a late reading): dropped.
            r(0.05, [999, 999], [999, 999]),
            r(0.10, [250, 300], [9, 16]),
        ];
        let down = Timeline::from_readings(&readings, Direction::Download);
        assert_eq!(down.t, vec![0.0, 0.05, 0.10]);
        assert_eq!(down.links, vec![vec![0, 50, 150], vec![0, 60, 100]]);
        assert_eq!(down.aggregate(), vec![0, 110, 250]);
        let up = Timeline::from_readings(&readings, Direction::Upload);
        assert_eq!(up.links, vec![vec![0, 2, 4], vec![0, 0, 10]]);
    }

    #[test]
    fn perfect_failover_has_no_gap() {
        // Four links at 10 MB/s each; link 2 stops at 5 s, the others take over at once (each
        // 13.33 MB/s), link 2 is back 8 s later.
        let tl = timeline(4, 20.0, |k, t| match (k, t) {
            (2, t) if (5.0..13.0).contains(&t) => 0.0,
            (_, t) if (5.0..13.0).contains(&t) => 40.0 * MB / 3.0,
            _ => 10.0 * MB,
        });
        let m = analyse(&tl, 5.0, Some(13.0), 2, 100_000_000).unwrap();
        assert!((m.pre_fault - 40.0 * MB).abs() < 0.01 * MB, "{m:?}");
        assert_eq!(m.gap, Outcome::After(0.0));
        assert!(m.dip < 0.01 * MB, "{m:?}");
        assert_eq!(m.link_back, Some(Outcome::After(0.0)));
        assert!(m.time_lost.abs() < 0.01, "{m:?}");
    }

    #[test]
    fn stall_gives_gap_and_dip() {
        // Everything stops for 2 s after the fault (requests stuck on link 2), then the three
        // other links carry 10 MB/s each; link 2 returns 1 s after the link-up at 13 s.
        let tl = timeline(4, 20.0, |k, t| match (k, t) {
            (_, t) if (5.0..7.0).contains(&t) => 0.0,
            (2, t) if (5.0..14.0).contains(&t) => 0.0,
            _ => 10.0 * MB,
        });
        let m = analyse(&tl, 5.0, Some(13.0), 2, 100_000_000).unwrap();
        let Outcome::After(gap) = m.gap else {
            panic!("{m:?}")
        };
        assert!((gap - 2.0).abs() < 0.051, "{m:?}");
        // 2 s at 40 MB/s missing entirely.
        assert!((m.dip - 80.0 * MB).abs() < 2.5 * MB, "{m:?}");
        let Some(Outcome::After(back)) = m.link_back else {
            panic!("{m:?}")
        };
        assert!((back - 1.0).abs() < 0.051, "{m:?}");
        // 80 MB not moved in the stall and link 2's 70 MB from 7 to 14 s, at 40 MB/s.
        assert!((m.time_lost - 3.75).abs() < 0.06, "{m:?}");
    }

    #[test]
    fn a_slow_tail_counts_as_time_lost() {
        // No gap (the others carry on at full speed), but link 2's backlog arrives at the
        // end alone: after 10 s only link 2 moves, for 2 s.
        let tl = timeline(4, 12.0, |k, t| match (k, t) {
            (2, t) if (3.0..6.0).contains(&t) => 0.0,
            (2, _) => 10.0 * MB,
            (_, t) if t >= 10.0 => 0.0,
            _ => 10.0 * MB,
        });
        let m = analyse(&tl, 3.0, Some(6.0), 2, 100_000_000).unwrap();
        assert_eq!(m.gap, Outcome::After(0.0));
        // 12 s for 390 MB that need 9.75 s at 40 MB/s (from the 1 % mark at 0.05 s).
        assert!((m.time_lost - 2.25).abs() < 0.06, "{m:?}");
    }

    #[test]
    fn a_short_burst_does_not_end_the_gap() {
        // A 200 ms burst at 1 s after the fault does not hold for 500 ms; recovery at 3 s.
        let tl = timeline(2, 12.0, |_, t| {
            if (5.0..8.0).contains(&t) && !(6.0..6.2).contains(&t) {
                0.0
            } else {
                10.0 * MB
            }
        });
        let m = analyse(&tl, 5.0, None, 2, 10_000_000).unwrap();
        let Outcome::After(gap) = m.gap else {
            panic!("{m:?}")
        };
        assert!((gap - 3.0).abs() < 0.051, "{m:?}");
    }

    #[test]
    fn no_recovery_is_reported_as_such() {
        // Link 2 down at 5 s and everything stops: the series ends at 10 s.
        let tl = timeline(4, 10.0, |_, t| if t >= 5.0 { 0.0 } else { 10.0 * MB });
        let m = analyse(&tl, 5.0, Some(9.0), 2, 100_000_000).unwrap();
        assert_eq!(m.gap, Outcome::NotWithin(5.0));
        assert!((m.dip - 200.0 * MB).abs() < 1.0 * MB, "{m:?}");
        assert_eq!(m.link_back, Some(Outcome::NotWithin(1.0)));
        // A link-up after the end: nothing to say about the link coming back.
        let m = analyse(&tl, 5.0, Some(12.0), 2, 100_000_000).unwrap();
        assert_eq!(m.link_back, None);
    }

    #[test]
    fn too_early_a_fault_is_not_measured() {
        let tl = timeline(4, 10.0, |_, _| 10.0 * MB);
        assert!(analyse(&tl, 0.2, None, 2, 100_000_000)
            .unwrap_err()
            .contains("before the fault"));
        assert!(analyse(&tl, 5.0, None, 5, 100_000_000).is_err());
        let idle = timeline(4, 10.0, |_, _| 0.0);
        assert!(analyse(&idle, 5.0, None, 2, 100_000_000)
            .unwrap_err()
            .contains("not started"));
    }

    #[test]
    fn plot_rates_are_mbit_at_interval_middles() {
        let tl = timeline(2, 1.0, |k, _| k as f64 * MB);
        let (agg, links) = plot_rates(&tl, 0.5);
        assert_eq!(agg.len(), 10);
        assert!((agg[0].0 - (0.05 - 0.5)).abs() < 1e-9);
        assert!((agg[0].1 - 24.0).abs() < 1e-6, "{agg:?}");
        assert!((links[1][3].1 - 16.0).abs() < 1e-6);
    }

    #[test]
    fn sizes_fit_the_timeline() {
        // 4 x 100 Mbit/s, 8 s down: about 20 s of transfer at full rate, under 1 GiB.
        assert_eq!(
            default_size_mib(4, 100, Duration::from_secs(8), false),
            1024
        );
        assert_eq!(default_size_mib(4, 100, Duration::from_secs(4), true), 512);
        // Faster links need a bigger file: 4 x 500 Mbit/s carry 237.5 MB/s.
        assert_eq!(
            default_size_mib(4, 500, Duration::from_secs(8), false),
            4608
        );
        assert!(default_deadline(1 << 30, 4, 100) > Duration::from_secs(120));
    }

    fn run(fault: Fault, exit: Exit, stderr: &str) -> Run {
        let tl = timeline(4, 10.0, |k, t| {
            if k == 2 && (3.0..6.0).contains(&t) {
                0.0
            } else {
                1.0 * MB
            }
        });
        let readings = (0..tl.t.len())
            .map(|i| Reading {
                t: tl.t[i],
                rx: tl.links.iter().map(|l| l[i]).collect(),
                tx: vec![0; 4],
            })
            .collect();
        Run {
            fault,
            direction: Direction::Download,
            readings,
            fault_at: Some(3.0),
            fault_took: 0.04,
            cut: (fault == Fault::Rst).then_some(4),
            link_up_at: (fault == Fault::Silent).then_some(5.0),
            smbcp_span: (0.1, 10.0),
            exit,
            stderr_line: last_line(stderr),
            report: None,
            check: if stderr.is_empty() {
                Check::Ok
            } else {
                Check::Missing
            },
            size: 40_000_000,
        }
    }

    fn settings() -> Settings {
        Settings {
            links: 4,
            rate_mbit: 100,
            fault_link: 2,
            down_for: Duration::from_secs(2),
            deadline: Duration::from_secs(60),
        }
    }

    fn cells(md: &str) -> Vec<Vec<String>> {
        md.lines()
            .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
            .collect()
    }

    #[test]
    fn table_shows_numbers_or_the_failure() {
        let runs = vec![
            run(Fault::Rst, Exit::Code(0), ""),
            run(
                Fault::Silent,
                Exit::Code(1),
                "copying\nsmbcp: big: connection | reset\n\n",
            ),
            run(Fault::Silent, Exit::Killed(60), "stuck"),
        ];
        let rows = cells(&table(&runs, &settings()).markdown());
        assert_eq!(rows.len(), 5, "{rows:?}");
        assert_eq!(rows[0][7], "link 2 back ms");
        // Rst: 4 links at 1 MB/s = 32 Mbit/s before the fault; the three others go on at
        // exactly what they carried, all the surviving links can, so there is no gap. Link
        // 2's 3 MB missing over the 10 s cost 0.75 s at 4 MB/s.
        assert_eq!(
            rows[2][1..8],
            [
                "rst",
                "download",
                "32",
                "0",
                "0.0",
                "0.75",
                "3000 after the fault"
            ]
        );
        assert_eq!(rows[2][10..12], ["ok", "0"]);
        assert_eq!(
            rows[3][4],
            "transfer failed: smbcp: big: connection / reset"
        );
        assert_eq!(rows[3][5..8], ["-", "-", "-"]);
        assert_eq!(rows[3][10..12], ["no file", "1"]);
        assert_eq!(
            rows[4][4],
            "transfer failed: no end within 60 s, smbcp killed"
        );
        assert_eq!(rows[4][11], "killed after 60 s");
        let events = event_lines(&runs, &settings());
        assert!(
            events[0].contains("4 connection(s) on link 2 reset at 3.00 s"),
            "{events:?}"
        );
        assert!(events[1].contains("link up at 5.00 s"), "{events:?}");
        let csv = csv(&runs[1], &settings());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "# silent download on link 2: fault at 3.000 s, link up at 5.000 s, smbcp 0.100-10.000 s, exit 1"
        );
        assert_eq!(lines[1], "t_s,rx_bytes_link1,tx_bytes_link1,rx_bytes_link2,tx_bytes_link2,rx_bytes_link3,tx_bytes_link3,rx_bytes_link4,tx_bytes_link4");
        assert_eq!(lines[3], "0.0500,50000,0,50000,0,50000,0,50000,0");
        assert_eq!(lines.len(), 2 + runs[1].readings.len());
    }

    #[test]
    fn chart_has_a_panel_per_direction_with_markers() {
        let mut up = run(Fault::Silent, Exit::Code(0), "");
        up.direction = Direction::Upload;
        let runs = vec![
            run(Fault::Rst, Exit::Code(0), ""),
            run(Fault::Silent, Exit::Code(1), "x"),
            up,
        ];
        let c = chart(&runs, Fault::Silent, &settings(), 40 << 20);
        assert_eq!(c.series.len(), 5);
        assert_eq!(c.panels.len(), 2);
        assert_eq!(c.panels[0].title, "download (smbcp failed, exit 1)");
        assert_eq!(c.panels[1].title, "upload");
        let xs: Vec<f64> = c.panels[0].markers.iter().map(|m| m.x).collect();
        assert_eq!(xs, vec![0.0, 2.0]);
        // x is relative to the fault at 3 s.
        assert!(c.panels[0].lines[0][0].0 < -2.9);
        let svg = c.svg();
        assert!(svg.contains("silent: link 2 down for 2 s"), "{svg}");
        let facts = Facts {
            date: "today".into(),
            nproc: 2,
            cpu: "cpu".into(),
            kernel: "k".into(),
            samba: "Samba 4".into(),
            iperf3: "iperf 3".into(),
            commit: "abc".into(),
        };
        let md = section(
            &facts,
            &runs,
            &settings(),
            &Fingerprint {
                len: 40 << 20,
                sha256: "ab".repeat(32),
            },
            &[(Fault::Silent, "perf/failover-silent.svg".into())],
        );
        assert!(md.contains("](perf/failover-silent.svg)"), "{md}");
    }
}
