//! One run: smbcp copies the reference file while the sampler reads the counters, the fault
//! is injected once [`FAULT_AT`] of the file has crossed the wire (and undone after the
//! link-down time), then the copy is checked against the reference.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use smb3_tests::{LinkDown, Testbed};

use super::sampler::{Reading, Sampler};
use super::{Fault, Settings, FAULT_AT};
use crate::child::Background;
use crate::data::{fingerprint, remove_if_present, Fingerprint};
use crate::transfer::{Direction, ShareKind, SmbcpReport, Tool};

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
    /// Counter readings, every [`SAMPLE_EVERY`](super::SAMPLE_EVERY).
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

impl Job<'_> {
    /// What the copy reads from and writes to: the share-relative remote name and the local
    /// path.
    fn ends(&self, direction: Direction) -> (&str, &Path) {
        match direction {
            Direction::Download => (self.remote_source, self.local_target),
            Direction::Upload => (self.remote_target, self.local_source),
        }
    }

    /// Where the copy lands, on the host.
    fn result_path(&self, direction: Direction) -> PathBuf {
        match direction {
            Direction::Download => self.local_target.to_path_buf(),
            Direction::Upload => self
                .tb
                .share_path(ShareKind::Plain.name())
                .join(self.remote_target),
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
    let (remote, local) = job.ends(direction);
    let cmd = Tool::smbcp(job.smbcp).command(job.tb, ShareKind::Plain, direction, remote, local);
    let t0 = Instant::now();
    let sampler = Sampler::start(job.tb, t0)?;
    let started = t0.elapsed().as_secs_f64();
    let mut smbcp = Background::spawn(cmd)?;

    // Taken down by a silent fault; up again on every way out of here.
    let mut link: Option<LinkDown<'_>> = None;
    let mut fault_at = None;
    let mut fault_took = 0.0;
    let mut cut = None;
    let mut link_up_at = None;
    let trigger = (size as f64 * FAULT_AT) as u64;
    let deadline = Instant::now() + settings.deadline;
    let exit = loop {
        if let Some(status) = smbcp.try_wait()? {
            break Exit::from_status(status);
        }
        if Instant::now() >= deadline {
            smbcp.kill()?;
            break Exit::Killed(settings.deadline.as_secs());
        }
        if fault_at.is_none() && sampler.progress(direction) >= trigger {
            let before = Instant::now();
            match fault {
                Fault::Rst => cut = Some(job.tb.cut(Some(settings.fault_link))?),
                Fault::All => cut = Some(job.tb.cut(None)?),
                Fault::Silent => link = Some(job.tb.take_link_down(settings.fault_link)?),
            }
            fault_took = before.elapsed().as_secs_f64();
            fault_at = Some(t0.elapsed().as_secs_f64());
        }
        if let (Some(down), Some(at)) = (link.as_mut(), fault_at) {
            if down.is_down() && t0.elapsed().as_secs_f64() >= at + settings.down_for.as_secs_f64()
            {
                down.up()?;
                link_up_at = Some(t0.elapsed().as_secs_f64());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let ended = t0.elapsed().as_secs_f64();
    // The next run needs the link; a link-up after smbcp ended is still recorded.
    if let Some(down) = link.as_mut().filter(|l| l.is_down()) {
        down.up()?;
        link_up_at = Some(t0.elapsed().as_secs_f64());
    }
    let readings = sampler.finish()?;
    let (stdout, stderr) = smbcp.output();
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
pub(crate) fn last_line(text: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
