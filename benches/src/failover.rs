//! The failover benchmark (`smb-bench --failover`): how long a multichannel transfer suffers
//! when one of its links fails, or all of its connections do, seen from outside the client.
//!
//! For each fault kind ([`Fault::Rst`]: the server resets link K's connections, the link stays
//! up; [`Fault::Silent`]: link K goes down without a word and comes back some seconds later;
//! [`Fault::All`]: the server resets every connection, so the session must be re-established)
//! and each direction, `smbcp` copies a file over N shaped links while a thread samples the
//! byte counters of every client-side veth, and the established connections to port 445,
//! every 50 ms. When about 30 % of the file has crossed the wire the fault is injected. The
//! counters give per-link and aggregate throughput over time, from which [`analyse`] computes
//! the failover gap, the bytes lost during it, and when link K carries its share again; the
//! connection count tells when every channel is back. smbcp's exit status, its failover
//! counters and the SHA-256 of what arrived are recorded; a transfer that fails or hangs is a
//! measured result (reported as such), never a reason for the benchmark to stop. Every
//! (fault, direction) may run several times: the [`table`] shows medians, the [`chart`] the
//! run of median time lost.
//!
//! The counters are read from `/proc/thread-self/net/{dev,tcp}` opened while the thread was
//! inside the client namespace: such a file keeps showing that namespace after the thread
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

use crate::child::drain;
use crate::data::{fingerprint, Fingerprint};
use crate::machine::Facts;
use crate::multichannel::channels_cell;
use crate::stats::{median, min_max};
use crate::svg::{ChartFrame, LineChart, LinePanel, Marker};
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
    /// `testbed cut`: the server resets every connection of port 445 at once, so the client
    /// loses every channel and has to re-establish the session (new connection with
    /// PreviousSessionId, durable opens reclaimed) before any I/O can resume.
    All,
}

impl Fault {
    /// Every kind, in report order.
    pub const ALL: [Fault; 3] = [Fault::Rst, Fault::Silent, Fault::All];

    /// Short name (table rows, file names).
    pub fn name(self) -> &'static str {
        match self {
            Fault::Rst => "rst",
            Fault::Silent => "silent",
            Fault::All => "all",
        }
    }

    /// True when the fault resets connections (and the links stay up), so recovery is
    /// measured from the fault rather than from a link-up.
    fn resets(self) -> bool {
        matches!(self, Fault::Rst | Fault::All)
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
struct Sampler {
    stop: Arc<AtomicBool>,
    readings: Arc<Mutex<Vec<Reading>>>,
    handle: Option<JoinHandle<Result<(), String>>>,
}

impl Sampler {
    /// Opens the client namespace's `/proc/net/dev` and starts sampling the links' client
    /// interfaces on the clock `t0`; returns once the first reading is in.
    fn start(tb: &Testbed, t0: Instant) -> Result<Sampler, String> {
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

/// What smbcp's `--json` report says about failover (its `"failover"` object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FailoverCounters {
    /// Channels lost.
    pub channel_losses: u64,
    /// Requests sent again on another channel.
    pub replays: u64,
    /// Channels connected again.
    pub reconnects: u64,
    /// Sessions re-established after every channel was lost.
    pub sessions_reestablished: u64,
    /// Durable opens reclaimed on a re-established session.
    pub opens_reclaimed: u64,
    /// Opens that could not be reclaimed.
    pub opens_lost: u64,
    /// How long the last re-establishment took (ms), if there was one.
    pub last_reestablish_ms: Option<u64>,
}

impl FailoverCounters {
    /// The counters from smbcp's whole `--json` object; a missing or malformed counter is an
    /// error, so a changed report format cannot pass as "nothing happened".
    pub fn from_json(json: &serde_json::Value) -> Result<FailoverCounters, String> {
        let f = &json["failover"];
        let count = |key: &str| {
            f[key]
                .as_u64()
                .ok_or_else(|| format!("smbcp report without failover \"{key}\": {f}"))
        };
        Ok(FailoverCounters {
            channel_losses: count("channel_losses")?,
            replays: count("replays")?,
            reconnects: count("reconnects")?,
            sessions_reestablished: count("sessions_reestablished")?,
            opens_reclaimed: count("opens_reclaimed")?,
            opens_lost: count("opens_lost")?,
            last_reestablish_ms: f["last_reestablish_ms"].as_u64(),
        })
    }
}

/// Everything one run produced.
#[derive(Debug, Clone)]
pub struct Run {
    /// Which fault.
    pub fault: Fault,
    /// Which way the data went.
    pub direction: Direction,
    /// Which repetition of (fault, direction), from 1.
    pub rep: usize,
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
    /// The failover counters of that report.
    pub counters: Option<FailoverCounters>,
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

/// Runs smbcp once (repetition `rep`) with `fault` injected at [`FAULT_AT`] of the file.
/// Errors are the harness's own failures (the testbed or the counters); smbcp failing,
/// hanging or delivering a wrong file is part of the returned [`Run`].
pub fn run_once(
    job: &Job<'_>,
    settings: &Settings,
    fault: Fault,
    direction: Direction,
    rep: usize,
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
                Fault::All => cut = Some(job.tb.cut(None)?),
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
    let json = serde_json::from_str::<serde_json::Value>(stdout.trim()).ok();
    let report = json
        .as_ref()
        .and_then(|json| SmbcpReport::from_json(json).ok());
    let counters = json
        .as_ref()
        .and_then(|json| FailoverCounters::from_json(json).ok());
    Ok(Run {
        fault,
        direction,
        rep,
        readings,
        fault_at,
        fault_took,
        cut,
        link_up_at,
        smbcp_span: (started, ended),
        exit,
        stderr_line: last_line(&stderr),
        report,
        counters,
        check,
        size,
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

/// When the session's channels were all back after the fault: the count of established
/// connections to port 445 (`channels` of `readings`) had fallen below the most seen before
/// the fault (`fault_at`), the plan the client had settled on, and is back at it. The most,
/// not the last: the testbed command takes a while, and the count may fall before the
/// fault's time is taken. Measured from `from` (the fault, or the link-up of a silent fault).
/// `None` when the sampler saw no count, or never saw it fall.
pub fn all_channels_back(readings: &[Reading], fault_at: f64, from: f64) -> Option<Outcome> {
    let target = readings
        .iter()
        .take_while(|r| r.t < fault_at)
        .filter_map(|r| r.channels)
        .max()
        .filter(|&n| n > 0)?;
    let after: Vec<(f64, usize)> = readings
        .iter()
        .filter(|r| r.t >= fault_at)
        .filter_map(|r| Some((r.t, r.channels?)))
        .collect();
    let fell = after.iter().position(|&(_, n)| n < target)?;
    let last = after.last().map_or(from, |&(t, _)| t);
    Some(
        match after[fell..]
            .iter()
            .find(|&&(t, n)| t >= from && n >= target)
        {
            Some(&(t, _)) => Outcome::After((t - from).max(0.0)),
            None => Outcome::NotWithin((last - from).max(0.0)),
        },
    )
}

/// The median of outcomes, a "not within" counting as later than any time: the middle one,
/// or for an even count the mean of the middle two when both are times.
pub fn median_outcome(outcomes: &[Outcome]) -> Option<Outcome> {
    let key = |o: &Outcome| match *o {
        Outcome::After(s) => (0, s),
        Outcome::NotWithin(s) => (1, s),
    };
    let mut sorted = outcomes.to_vec();
    sorted.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some(match (sorted[n / 2 - 1], sorted[n / 2]) {
            (Outcome::After(a), Outcome::After(b)) => Outcome::After((a + b) / 2.0),
            (_, later) => later,
        }),
    }
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

    /// Where recovery is measured from: the fault when it reset connections, the link-up
    /// when the link went down.
    fn recovery_from(&self) -> Option<f64> {
        if self.fault.resets() {
            self.fault_at
        } else {
            self.link_up_at
        }
    }

    /// When every channel was back (see [`all_channels_back`]).
    pub fn channels_back(&self) -> Option<Outcome> {
        all_channels_back(&self.readings, self.fault_at?, self.recovery_from()?)
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

    /// Why the run gives no numbers (smbcp failed, or the series says nothing); empty when
    /// it does.
    fn why_unmeasured(&self, fault_link: usize) -> String {
        self.failure()
            .unwrap_or_else(|| match self.metrics(fault_link) {
                Err(why) => format!("not measurable: {why}"),
                Ok(_) => String::new(),
            })
    }
}

/// The repetitions of one fault kind and direction.
#[derive(Debug, Clone)]
pub struct Group<'a> {
    /// Which fault.
    pub fault: Fault,
    /// Which way the data went.
    pub direction: Direction,
    /// The runs, in the order they ran.
    pub runs: Vec<&'a Run>,
}

/// The runs grouped by fault kind and direction, in the order each pair first ran.
pub fn groups(runs: &[Run]) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for run in runs {
        match out
            .iter_mut()
            .find(|g| g.fault == run.fault && g.direction == run.direction)
        {
            Some(group) => group.runs.push(run),
            None => out.push(Group {
                fault: run.fault,
                direction: run.direction,
                runs: vec![run],
            }),
        }
    }
    out
}

/// A run that smbcp finished and whose series could be measured, with its numbers.
struct Measured<'a> {
    run: &'a Run,
    metrics: Metrics,
}

impl<'a> Group<'a> {
    /// The runs the medians are taken over.
    fn measured(&self, fault_link: usize) -> Vec<Measured<'a>> {
        self.runs
            .iter()
            .filter(|run| run.failure().is_none())
            .filter_map(|&run| {
                let metrics = run.metrics(fault_link).ok()?;
                Some(Measured { run, metrics })
            })
            .collect()
    }

    /// The measured run of median time lost (the lower middle one of an even count), or the
    /// first run when none could be measured.
    pub fn median_run(&self, fault_link: usize) -> Option<&'a Run> {
        let mut measured = self.measured(fault_link);
        measured.sort_by(|a, b| a.metrics.time_lost.total_cmp(&b.metrics.time_lost));
        match measured.len() {
            0 => self.runs.first().copied(),
            n => Some(measured[(n - 1) / 2].run),
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

/// One value when every run gave the same, else each run's in run order.
fn per_run_cell(values: impl IntoIterator<Item = String>) -> String {
    let values: Vec<String> = values.into_iter().collect();
    match values.first() {
        Some(first) if values.iter().all(|v| v == first) => first.clone(),
        _ => values.join(", "),
    }
}

fn median_of(values: impl IntoIterator<Item = f64>) -> f64 {
    median(&values.into_iter().collect::<Vec<_>>()).unwrap_or(f64::NAN)
}

/// The table: one row per fault kind and direction, medians over its repetitions.
pub fn table(runs: &[Run], settings: &Settings) -> Table {
    let k = settings.fault_link;
    let mut t = Table::new(&[
        "fault",
        "direction",
        ">runs",
        ">pre-fault Mbit/s",
        ">gap ms",
        ">dip MB",
        ">time lost s",
        ">time lost range s",
        &format!(">link {k} back ms"),
        ">all channels back ms",
        ">sessions re-established",
        ">smbcp s",
        ">channels at end (per link)",
        "sha256",
        ">smbcp exit",
    ]);
    for group in groups(runs) {
        t.row(group_row(&group, settings));
    }
    t
}

fn group_row(group: &Group<'_>, settings: &Settings) -> Vec<String> {
    let measured = group.measured(settings.fault_link);
    let unmeasured = group.runs.len() - measured.len();
    let runs = match unmeasured {
        0 => group.runs.len().to_string(),
        n => format!("{} ({n} not measured)", group.runs.len()),
    };
    let channels_at_end = group
        .median_run(settings.fault_link)
        .and_then(|run| run.report.as_ref())
        .map_or("-".into(), |r| channels_cell(Some(r)));
    let mut cells = vec![group.fault.to_string(), group.direction.to_string(), runs];
    cells.extend(measured_cells(group, &measured, settings.fault_link));
    cells.extend([
        reestablished_cell(&group.runs),
        format!(
            "{:.1}",
            median_of(group.runs.iter().map(|r| r.smbcp_seconds()))
        ),
        channels_at_end,
        per_run_cell(group.runs.iter().map(|r| r.check.to_string())),
        per_run_cell(group.runs.iter().map(|r| r.exit.to_string())),
    ]);
    cells
}

/// Pre-fault rate, gap, dip, time lost and its range, link back, all channels back: the
/// medians over `measured`, or why there are none.
fn measured_cells(group: &Group<'_>, measured: &[Measured<'_>], fault_link: usize) -> Vec<String> {
    let dash = || "-".to_string();
    if measured.is_empty() {
        let why = group
            .runs
            .first()
            .map_or(String::new(), |run| run.why_unmeasured(fault_link));
        return vec![dash(), why, dash(), dash(), dash(), dash(), dash()];
    }
    let pre_fault = median_of(measured.iter().map(|m| m.metrics.pre_fault));
    let gaps: Vec<Outcome> = measured.iter().map(|m| m.metrics.gap).collect();
    let gap = median_outcome(&gaps);
    let dip = median_of(measured.iter().map(|m| m.metrics.dip)) / 1e6;
    let dip = match gap {
        Some(Outcome::NotWithin(_)) => format!(">= {dip:.1}"),
        _ => format!("{dip:.1}"),
    };
    let lost: Vec<f64> = measured.iter().map(|m| m.metrics.time_lost).collect();
    let range = min_max(&lost).map_or(dash(), |(lo, hi)| format!("{lo:.2}-{hi:.2}"));
    let backs: Vec<Outcome> = measured
        .iter()
        .filter_map(|m| m.metrics.link_back)
        .collect();
    let since = if group.fault.resets() {
        "the fault"
    } else {
        "link-up"
    };
    let link_back = match median_outcome(&backs) {
        Some(o) => format!("{} after {since}", outcome_cell(o)),
        None if group.fault.resets() => "transfer ended at the fault".into(),
        None => "transfer ended before link-up".into(),
    };
    let channels: Vec<Outcome> = measured
        .iter()
        .filter_map(|m| m.run.channels_back())
        .collect();
    vec![
        format!("{:.0}", pre_fault * 8.0 / 1e6),
        gap.map_or(dash(), outcome_cell),
        dip,
        format!("{:.2}", median_of(lost.iter().copied())),
        range,
        link_back,
        median_outcome(&channels).map_or(dash(), outcome_cell),
    ]
}

/// How many times smbcp re-established its session in each run, and the median time the
/// last re-establishment took.
fn reestablished_cell(runs: &[&Run]) -> String {
    let counters: Vec<FailoverCounters> = runs.iter().filter_map(|r| r.counters).collect();
    if counters.is_empty() {
        return "-".into();
    }
    let sessions = per_run_cell(
        counters
            .iter()
            .map(|c| c.sessions_reestablished.to_string()),
    );
    let took: Vec<f64> = counters
        .iter()
        .filter_map(|c| c.last_reestablish_ms)
        .map(|ms| ms as f64)
        .collect();
    match median(&took) {
        Some(ms) => format!("{sessions} in {ms:.0} ms"),
        None => sessions,
    }
}

/// One line per run with what happened when: the fault, the link-up, the end, and what
/// smbcp counted.
pub fn event_lines(runs: &[Run], settings: &Settings) -> Vec<String> {
    runs.iter().map(|run| event_line(run, settings)).collect()
}

fn event_line(run: &Run, settings: &Settings) -> String {
    let k = settings.fault_link;
    let tl = run.timeline();
    let moved = tl.aggregate().last().copied().unwrap_or(0);
    let (start, end) = run.smbcp_span;
    let mut line = format!(
        "- {} {} #{}: smbcp ran {start:.1}-{end:.1} s",
        run.fault, run.direction, run.rep
    );
    if let Some(at) = run.fault_at {
        let what = match (run.fault, run.cut) {
            (Fault::Rst, Some(n)) => format!("{n} connection(s) on link {k} reset"),
            (Fault::All, Some(n)) => format!("{n} connection(s) on every link reset"),
            _ => format!("link {k} down"),
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
    if let Some(c) = &run.counters {
        line.push_str(&format!("; {}", counters_text(c)));
    }
    if let Some(f) = run.failure() {
        line.push_str(&format!("; {f}"));
    }
    line.push('.');
    line
}

/// smbcp's failover counters in words.
fn counters_text(c: &FailoverCounters) -> String {
    let mut text = format!(
        "smbcp counted {} channel(s) lost, {} request(s) replayed, {} reconnect(s)",
        c.channel_losses, c.replays, c.reconnects
    );
    if c.sessions_reestablished > 0 {
        let took = c
            .last_reestablish_ms
            .map_or(String::new(), |ms| format!(", the last in {ms} ms"));
        text.push_str(&format!(
            ", session re-established {} time(s){took} ({} open(s) reclaimed, {} lost)",
            c.sessions_reestablished, c.opens_reclaimed, c.opens_lost
        ));
    }
    text
}

/// The run's counter readings as CSV: a `#` line with the events, a header, then one row per
/// reading with every link's received and sent bytes (cumulative, as the kernel counts them)
/// and the established connections to port 445 (empty when not read).
pub fn csv(run: &Run, settings: &Settings) -> String {
    let at = |t: Option<f64>| t.map_or("-".into(), |t| format!("{t:.3}"));
    let mut out = format!(
        "# {} {} #{} on link {}: fault at {} s, link up at {} s, smbcp {:.3}-{:.3} s, exit {}\n",
        run.fault,
        run.direction,
        run.rep,
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
    out.push_str(",channels\n");
    for r in &run.readings {
        out.push_str(&format!("{:.4}", r.t));
        for (rx, tx) in r.rx.iter().zip(&r.tx) {
            out.push_str(&format!(",{rx},{tx}"));
        }
        let channels = r.channels.map_or(String::new(), |n| n.to_string());
        out.push_str(&format!(",{channels}\n"));
    }
    out
}

/// The line chart of one fault kind: a panel per direction showing its median run,
/// aggregate and per-link Mbit/s over seconds from the fault, markers at the fault, the
/// link-up and when every channel was back.
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
        Fault::All => "every connection of port 445 reset by the server".into(),
    };
    let panels = groups(runs)
        .iter()
        .filter(|g| g.fault == fault)
        .filter_map(|g| {
            let run = g.median_run(settings.fault_link)?;
            Some(chart_panel(run, g.runs.len()))
        })
        .collect();
    LineChart {
        frame: ChartFrame {
            title: format!(
                "{}: {what} ({} MiB over {} x {} Mbit/s, 100 ms averages)",
                fault.name(),
                size >> 20,
                settings.links,
                settings.rate_mbit
            ),
            series,
            y_unit: "Mbit/s".into(),
        },
        x_label: "seconds from the fault".into(),
        panels,
    }
}

/// The panel of `run`, the median of `of` repetitions.
fn chart_panel(run: &Run, of: usize) -> LinePanel {
    let origin = run.fault_at.unwrap_or(0.0);
    let (agg, per_link) = plot_rates(&run.timeline(), origin);
    let mut lines = vec![agg];
    lines.extend(per_link);
    let mut markers = Vec::new();
    if run.fault_at.is_some() {
        markers.push(Marker {
            x: 0.0,
            label: run.fault.name().into(),
        });
    }
    if let Some(up) = run.link_up_at {
        markers.push(Marker {
            x: up - origin,
            label: "link up".into(),
        });
    }
    if let (Some(Outcome::After(s)), Some(from)) = (run.channels_back(), run.recovery_from()) {
        markers.push(Marker {
            x: from + s - origin,
            label: "all channels back".into(),
        });
    }
    let state = if run.failure().is_some() {
        format!(" (smbcp failed, exit {})", run.exit)
    } else {
        String::new()
    };
    let which = if of > 1 {
        format!(", run #{} of {of} (median time lost)", run.rep)
    } else {
        String::new()
    };
    LinePanel {
        title: format!("{}{state}{which}", run.direction),
        lines,
        markers,
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
    let reps = groups(runs).iter().map(|g| g.runs.len()).max().unwrap_or(0);
    let mut out = format!(
        "{measured}, commit {commit}.\n\
         Command: `{cmd}`; file {mib} MiB (sha256 {sha}); {links} links of {rate} Mbit/s each; \
         every fault kind and direction ran {reps} time(s), taking turns; the fault comes once \
         {pct:.0} % of the file has crossed the wire. \
         **rst** (`testbed cut {k}`): the server resets link {k}'s connections and the link \
         stays up, so the client loses those channels, moves their requests to the others and \
         can reconnect at once. \
         **silent** (`testbed link-down {k}`, `link-up {k}` {down} s later): link {k} drops \
         every packet without a word, so the client has to notice the loss by itself. \
         **all** (`testbed cut`): the server resets every connection of port 445 at once, so \
         no channel is left and the client must re-establish the session (PreviousSessionId, \
         durable opens reclaimed) before the transfer can go on. \
         Client-side veth byte counters and the established connections to port 445 are read \
         every {every} ms.\n\n\
         Gap: from the fault until the aggregate holds {gap:.0} % of what the surviving links \
         carry ({n1}/{n} of the pre-fault rate) for {sustain} ms, rates over a trailing {smooth} ms. \
         Dip: bytes short of the pre-fault rate during the gap. Time lost: how much longer the \
         whole transfer took than its bytes need at the pre-fault rate, which also counts a slow \
         tail of requests that waited on the dead link (a client that fails over perfectly loses \
         the dead link's share of the down time, {ideal:.1} s, in the silent case and next to \
         nothing with rst). Link {k} back: from the link-up (silent) or the fault (rst, all) until \
         link {k} holds {back:.0} % of its pre-fault share for {sustain} ms. All channels back: \
         from the same moment until the established connections to port 445, having fallen, are \
         as many again as before the fault (the planned channels). Sessions re-established: \
         smbcp's own count (`--json`) and how long the last one took. Each row shows the \
         medians over the runs smbcp finished, the range of time lost, and sha256 and exit of \
         every run; each chart shows the run of median time lost. Rates count bytes on the \
         wire (headers included).\n\n",
        ideal = settings.down_for.as_secs_f64() / settings.links as f64,
        measured = facts.measured_on(),
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
            channels: None,
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
        run_with(fault, exit, stderr, 1, 6.0)
    }

    /// Four links at 1 MB/s for 10 s; link 2 carries nothing from the fault at 3 s until
    /// `back` (the other links do not take over, so time lost grows with `back`), and one of
    /// the four channels is missing from 3 s to 4 s.
    fn run_with(fault: Fault, exit: Exit, stderr: &str, rep: usize, back: f64) -> Run {
        let tl = timeline(4, 10.0, |k, t| {
            if k == 2 && (3.0..back).contains(&t) {
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
                channels: Some(if (3.0..4.0).contains(&tl.t[i]) { 3 } else { 4 }),
            })
            .collect();
        Run {
            fault,
            direction: Direction::Download,
            rep,
            readings,
            fault_at: Some(3.0),
            fault_took: 0.04,
            cut: fault.resets().then_some(4),
            link_up_at: (fault == Fault::Silent).then_some(5.0),
            smbcp_span: (0.1, 10.0),
            exit,
            stderr_line: last_line(stderr),
            report: None,
            counters: (fault == Fault::All).then_some(FailoverCounters {
                channel_losses: 4,
                replays: 12,
                reconnects: 3,
                sessions_reestablished: 1,
                opens_reclaimed: 1,
                opens_lost: 0,
                last_reestablish_ms: Some(200 + 100 * rep as u64),
            }),
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
        // Header, separator, one row per (fault, direction).
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert_eq!(rows[0][9], "link 2 back ms");
        // Rst: 4 links at 1 MB/s = 32 Mbit/s before the fault; the three others go on at
        // exactly what they carried, all the surviving links can, so there is no gap. Link
        // 2's 3 MB missing over the 10 s cost 0.75 s at 4 MB/s. One channel is missing for
        // a second after the fault.
        assert_eq!(
            rows[2][1..11],
            [
                "rst",
                "download",
                "1",
                "32",
                "0",
                "0.0",
                "0.75",
                "0.75-0.75",
                "3000 after the fault",
                "1000"
            ]
        );
        assert_eq!(rows[2][11..16], ["-", "9.9", "-", "ok", "0"]);
        // Both silent runs failed: the first one's reason, every run's check and exit.
        assert_eq!(rows[3][3], "2 (2 not measured)");
        assert_eq!(
            rows[3][5],
            "transfer failed: smbcp: big: connection / reset"
        );
        assert_eq!(rows[3][6..11], ["-", "-", "-", "-", "-"]);
        assert_eq!(rows[3][14..16], ["no file", "1, killed after 60 s"]);
        let events = event_lines(&runs, &settings());
        assert!(
            events[0].contains("rst download #1: smbcp ran")
                && events[0].contains("4 connection(s) on link 2 reset at 3.00 s"),
            "{events:?}"
        );
        assert!(events[1].contains("link up at 5.00 s"), "{events:?}");
        let csv = csv(&runs[1], &settings());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "# silent download #1 on link 2: fault at 3.000 s, link up at 5.000 s, smbcp 0.100-10.000 s, exit 1"
        );
        assert_eq!(lines[1], "t_s,rx_bytes_link1,tx_bytes_link1,rx_bytes_link2,tx_bytes_link2,rx_bytes_link3,tx_bytes_link3,rx_bytes_link4,tx_bytes_link4,channels");
        assert_eq!(lines[3], "0.0500,50000,0,50000,0,50000,0,50000,0,4");
        assert_eq!(lines.len(), 2 + runs[1].readings.len());
    }

    #[test]
    fn repetitions_give_medians_and_the_range() {
        // Link 2 back after 3, 2 and 5 s: 0.75, 0.5 and 1.25 s lost.
        let mut runs = vec![
            run_with(Fault::Rst, Exit::Code(0), "", 1, 6.0),
            run_with(Fault::Rst, Exit::Code(0), "", 2, 5.0),
            run_with(Fault::Rst, Exit::Code(0), "", 3, 8.0),
            run_with(Fault::All, Exit::Code(0), "", 1, 6.0),
            run_with(Fault::All, Exit::Code(0), "", 2, 6.0),
        ];
        runs[2].check = Check::Mismatch(5);
        let rows = cells(&table(&runs, &settings()).markdown());
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert_eq!(rows[2][3], "3");
        assert_eq!(
            rows[2][7..10],
            ["0.75", "0.50-1.25", "3000 after the fault"]
        );
        // sha256 ok only when every run matched.
        assert_eq!(rows[2][14], "ok, ok, differs (5 bytes)");
        // The every-channel cut: smbcp's re-established sessions, the median time.
        assert_eq!(rows[3][1], "all");
        assert_eq!(rows[3][11], "1 in 350 ms");
        assert_eq!(rows[3][14], "ok");
        let groups = groups(&runs);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].median_run(2).map(|r| r.rep), Some(1));
        let events = event_lines(&runs, &settings());
        assert!(
            events[3].contains("4 connection(s) on every link reset")
                && events[3].contains("session re-established 1 time(s), the last in 300 ms"),
            "{events:?}"
        );
    }

    #[test]
    fn medians_of_outcomes_put_not_within_last() {
        use Outcome::{After, NotWithin};
        assert_eq!(median_outcome(&[]), None);
        assert_eq!(
            median_outcome(&[After(3.0), NotWithin(1.0), After(1.0)]),
            Some(After(3.0))
        );
        assert_eq!(median_outcome(&[After(3.0), After(1.0)]), Some(After(2.0)));
        assert_eq!(
            median_outcome(&[After(3.0), NotWithin(2.0)]),
            Some(NotWithin(2.0))
        );
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

    #[test]
    fn channels_back_needs_a_fall_and_a_return() {
        let at = |t: f64, n: Option<usize>| Reading {
            t,
            rx: vec![0],
            tx: vec![0],
            channels: n,
        };
        let readings = [
            at(0.0, Some(4)),
            at(1.0, Some(4)),
            at(1.5, Some(0)),
            at(2.0, Some(1)),
            at(3.0, Some(4)),
            at(4.0, Some(4)),
        ];
        assert_eq!(
            all_channels_back(&readings, 1.2, 1.2),
            Some(Outcome::After(1.8))
        );
        // Measured from a later link-up.
        assert_eq!(
            all_channels_back(&readings, 1.2, 3.5),
            Some(Outcome::After(0.5))
        );
        // Never fell after the fault, or no count at all: nothing to say.
        assert_eq!(all_channels_back(&readings, 3.0, 3.0), None);
        assert_eq!(
            all_channels_back(&[at(0.0, None), at(1.0, None)], 0.5, 0.5),
            None
        );
        // Fell and never came back.
        assert_eq!(
            all_channels_back(&readings[..4], 1.2, 1.2),
            Some(Outcome::NotWithin(0.8))
        );
    }

    #[test]
    fn failover_counters_come_from_the_json_report() {
        let json = serde_json::json!({"failover": {
            "channel_losses": 4, "replays": 9, "reconnects": 3, "sessions_reestablished": 1,
            "opens_reclaimed": 1, "opens_lost": 0, "last_reestablish_ms": 412}});
        let c = FailoverCounters::from_json(&json).unwrap();
        assert_eq!(c.sessions_reestablished, 1);
        assert_eq!(c.last_reestablish_ms, Some(412));
        assert!(
            FailoverCounters::from_json(&serde_json::json!({"bytes": 1}))
                .unwrap_err()
                .contains("channel_losses")
        );
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
        assert_eq!(c.frame.series.len(), 5);
        assert_eq!(c.panels.len(), 2);
        assert_eq!(c.panels[0].title, "download (smbcp failed, exit 1)");
        assert_eq!(c.panels[1].title, "upload");
        let xs: Vec<f64> = c.panels[0].markers.iter().map(|m| m.x).collect();
        // The fault, the link-up, every channel back right at the link-up.
        assert_eq!(xs.len(), 3, "{xs:?}");
        assert_eq!(xs[..2], [0.0, 2.0]);
        assert!((xs[2] - 2.0).abs() < 0.051, "{xs:?}");
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
        assert!(md.starts_with("Measured today on cpu (2 CPUs), kernel k, Samba 4, commit abc."));
        for kind in ["**rst**", "**silent**", "**all** (`testbed cut`)"] {
            assert!(md.contains(kind), "{kind}: {md}");
        }
    }

    #[test]
    fn chart_shows_the_median_run() {
        let runs = vec![
            run_with(Fault::All, Exit::Code(0), "", 1, 8.0),
            run_with(Fault::All, Exit::Code(0), "", 2, 5.0),
            run_with(Fault::All, Exit::Code(0), "", 3, 6.0),
        ];
        let c = chart(&runs, Fault::All, &settings(), 40 << 20);
        assert_eq!(c.panels.len(), 1);
        assert_eq!(
            c.panels[0].title,
            "download, run #3 of 3 (median time lost)"
        );
        assert!(c
            .frame
            .title
            .starts_with("all: every connection of port 445 reset"));
        assert!(chart(&runs, Fault::Rst, &settings(), 1).panels.is_empty());
    }
}
