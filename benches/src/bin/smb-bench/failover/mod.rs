//! `smb-bench failover`: what losing one of several links, or every connection at once, costs
//! a multichannel copy, seen from outside the client.
//!
//! For each fault kind and direction smbcp copies the file over N shaped links while a thread
//! samples every link's client-side byte counters and the connections to port 445 every
//! 50 ms ([`sampler`]); once 30 % of the file has crossed the wire the fault comes. The
//! counters give the throughput per link and in all, and from them the failover gap, the
//! bytes lost, the time lost and when the link carries its share again ([`analysis`]); the
//! connection count tells when every channel is back. A copy that fails or hangs is a
//! measured result, never a reason to stop. The table of medians, an event line per run and
//! a chart per fault kind ([`report`]) make the `failover` section of docs/PERFORMANCE.md.

mod analysis;
mod report;
mod sampler;

use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use smb3_benches::data::remove_if_present;
use smb3_tests::LinkDown;

use crate::bench::{Bench, LinkSetup};
use crate::child::Running;
use crate::machine::check_memory;
use crate::transfer::{Direction, SmbcpReport, Tool, Transfer};
use crate::Common;
use sampler::{sampling, Reading};

/// The link that fails. Not link 1: smbcp's session starts there, and losing the first
/// channel is another case than losing one of several.
const FAULT_LINK: usize = 2;
/// Share of the file moved before the fault.
const FAULT_AT: f64 = 0.30;

/// How a link fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// `testbed cut K`: the server resets link K's connections; the link stays up, so the
    /// client can reconnect at once.
    Rst,
    /// `testbed link-down K`, `link-up K` later: link K's packets are silently lost.
    Silent,
    /// `testbed cut`: the server resets every connection of port 445, so the client must
    /// re-establish the session (PreviousSessionId, durable opens reclaimed) first.
    All,
}

impl Fault {
    const ALL: [Fault; 3] = [Fault::Rst, Fault::Silent, Fault::All];

    /// Whether the fault resets connections (the links stay up), so recovery counts from
    /// the fault rather than from a link-up.
    fn resets(self) -> bool {
        self != Fault::Silent
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fault::Rst => "rst",
            Fault::Silent => "silent",
            Fault::All => "all",
        })
    }
}

/// How the runs are done.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) links: usize,
    pub(crate) rate_mbit: u32,
    /// How long the link stays down in the silent fault.
    pub(crate) down_for: Duration,
    /// smbcp is killed when it runs longer.
    pub(crate) deadline: Duration,
}

/// What N links of `rate_mbit` carry in payload bytes a second: TCP over tbf gets about
/// 95 % of the rate at MTU 1500.
fn payload_bytes_per_s(links: usize, rate_mbit: u32) -> f64 {
    links as f64 * f64::from(rate_mbit) * 1e6 / 8.0 * 0.95
}

/// The default file size, MiB: big enough that with a client that fails over well the copy
/// still runs `down_for` after the link is back (30 % before the fault, (N-1)/N of the rate
/// while it is down), at least 1 GiB (256 MiB with `quick`), in steps of 256 (64) MiB.
fn default_size_mib(links: usize, rate_mbit: u32, down_for: Duration, quick: bool) -> u64 {
    let (links, down) = (links.max(2), down_for.as_secs_f64());
    let after_fault = (links - 1) as f64 / links as f64 * down + down;
    let bytes = payload_bytes_per_s(links, rate_mbit) * after_fault / (1.0 - FAULT_AT);
    let (floor, step) = if quick { (256, 64) } else { (1024, 256) };
    ((bytes / (1u64 << 20) as f64).ceil() as u64)
        .div_ceil(step)
        .saturating_mul(step)
        .max(floor)
}

pub(crate) fn run(common: &Common, links: u16, down_seconds: Option<u64>) -> Result<(), String> {
    let (links, rate_mbit) = (usize::from(links), common.rate(100));
    let down_for = Duration::from_secs(down_seconds.unwrap_or(if common.quick { 4 } else { 8 }));
    let default = |quick| default_size_mib(links, rate_mbit, down_for, quick);
    let size = common.size(default(false), default(true));
    // The file lives four times in memory: the local source and download, the share's copy
    // and the upload.
    check_memory(size * 4)?;
    // Three times what the links need for the file plus two minutes (the client's own request
    // timeout is 60 s), so a stalled copy is ended and reported.
    let deadline = Duration::from_secs_f64(
        (size as f64 / payload_bytes_per_s(links, rate_mbit) + 10.0) * 3.0 + 120.0,
    );
    let settings = Settings {
        links,
        rate_mbit,
        down_for,
        deadline,
    };
    let mut bench = Bench::new(common, size, common.reps(3))?;
    let note = format!("; smbcp is given {} s per run", deadline.as_secs());
    let tb = bench.testbed(&LinkSetup::shaped(links, rate_mbit), &["plain"], &note)?;
    let mut runs = Vec::new();
    // The repetitions outermost, so a slow drift of the machine hits every kind alike.
    for rep in 1..=bench.reps {
        for fault in Fault::ALL {
            for direction in Direction::BOTH {
                common.quiet();
                eprintln!("smb-bench: failover {fault} {direction} #{rep}");
                let run = run_once(
                    &bench.job(&tb, "plain", direction),
                    &bench.smbcp,
                    &settings,
                    fault,
                    rep,
                )?;
                let one = std::slice::from_ref(&run);
                eprintln!(
                    "{}",
                    report::table(one).markdown().lines().nth(2).unwrap_or("")
                );
                eprintln!(" {}", report::event_lines(one).join(" "));
                runs.push(run);
                // Lets the server finish with the old session's connections first.
                std::thread::sleep(Duration::from_secs(2));
            }
        }
    }
    drop(tb);
    let mut body = report::section(&bench, &runs, &settings);
    for fault in Fault::ALL {
        let alt = format!("{fault}: Mbit/s per link and in all, seconds from the fault");
        let svg = || report::chart(&runs, fault, &settings, size).svg();
        body.push_str(&common.chart(&format!("failover-{fault}.svg"), &alt, svg)?);
    }
    common.publish("failover", Some("## Failover"), &body)
}

/// Everything one run produced. Times are on the readings' clock, in seconds.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub(crate) fault: Fault,
    pub(crate) direction: Direction,
    /// Which repetition of (fault, direction), from 1.
    pub(crate) rep: usize,
    pub(crate) readings: Vec<Reading>,
    /// When the fault was in place; `None` when the copy ended before it was due.
    pub(crate) fault_at: Option<f64>,
    /// How long the testbed command that made the fault took.
    pub(crate) fault_took: f64,
    /// Connections the server reset.
    pub(crate) cut: Option<usize>,
    /// When the link was up again (silent fault).
    pub(crate) link_up_at: Option<f64>,
    /// When smbcp started and ended.
    pub(crate) smbcp_span: (f64, f64),
    /// How smbcp ended: its exit code, the signal, or `killed after N s`.
    pub(crate) exit: String,
    /// `None` when smbcp exited 0, else what to show instead of numbers.
    pub(crate) failure: Option<String>,
    pub(crate) report: Option<SmbcpReport>,
    /// The `"failover"` object of smbcp's `--json` report (counters of losses, replays,
    /// reconnects, re-established sessions, reclaimed opens).
    pub(crate) counters: Option<serde_json::Value>,
    /// What the SHA-256 check of the copy found: `ok`, `differs (N bytes)` or `no file`.
    pub(crate) check: String,
    pub(crate) size: u64,
}

/// Copies `job` once with smbcp, `fault` coming at [`FAULT_AT`] of the file. Errors are the
/// harness's own (the testbed, the counters); smbcp failing, hanging or delivering a wrong
/// file is part of the [`Run`].
fn run_once(
    job: &Transfer<'_>,
    smbcp: &std::path::Path,
    settings: &Settings,
    fault: Fault,
    rep: usize,
) -> Result<Run, String> {
    let target = job.target();
    remove_if_present(&target)?;
    let t0 = Instant::now();
    let clock = || t0.elapsed().as_secs_f64();
    let mut run = Run {
        fault,
        direction: job.direction,
        rep,
        readings: Vec::new(),
        fault_at: None,
        fault_took: 0.0,
        cut: None,
        link_up_at: None,
        smbcp_span: (clock(), 0.0),
        exit: String::new(),
        failure: None,
        report: None,
        counters: None,
        check: String::new(),
        size: job.bytes,
    };
    let (ran, readings) = sampling(job.tb, t0, |progress| -> Result<_, String> {
        run.smbcp_span.0 = clock();
        let mut smbcp = Running::spawn(job.command(&Tool::smbcp(smbcp, &[])))?;
        // Taken down by a silent fault; up again on every way out of here.
        let mut link: Option<LinkDown<'_>> = None;
        let trigger = (job.bytes as f64 * FAULT_AT) as u64;
        let deadline = Instant::now() + settings.deadline;
        let killed = loop {
            if let Some(status) = smbcp.try_wait()? {
                run.exit = status.code().map_or_else(
                    || format!("signal {}", status.signal().unwrap_or(0)),
                    |c| c.to_string(),
                );
                break false;
            }
            if Instant::now() >= deadline {
                smbcp.kill()?;
                run.exit = format!("killed after {} s", settings.deadline.as_secs());
                break true;
            }
            if run.fault_at.is_none() && progress(job.direction) >= trigger {
                let before = Instant::now();
                match fault {
                    Fault::Rst => run.cut = Some(job.tb.cut(Some(FAULT_LINK))?),
                    Fault::All => run.cut = Some(job.tb.cut(None)?),
                    Fault::Silent => link = Some(job.tb.take_link_down(FAULT_LINK)?),
                }
                (run.fault_took, run.fault_at) = (before.elapsed().as_secs_f64(), Some(clock()));
            }
            let up_due = run
                .fault_at
                .is_some_and(|at| clock() >= at + settings.down_for.as_secs_f64());
            if let Some(down) = link.as_mut().filter(|l| l.is_down() && up_due) {
                down.up()?;
                run.link_up_at = Some(clock());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        run.smbcp_span.1 = clock();
        // The next run needs the link; a link-up after smbcp ended is still recorded.
        if let Some(down) = link.as_mut().filter(|l| l.is_down()) {
            down.up()?;
            run.link_up_at = Some(clock());
        }
        Ok((killed, smbcp.output()))
    })?;
    let (killed, (stdout, stderr)) = ran?;
    run.readings = readings;
    run.check = match (std::fs::metadata(&target), (job.verify)(&target)) {
        (Err(_), _) => "no file".into(),
        (Ok(_), Ok(())) => "ok".into(),
        (Ok(m), Err(_)) => format!("differs ({} bytes)", m.len()),
    };
    remove_if_present(&target)?;
    let json = serde_json::from_str::<serde_json::Value>(stdout.trim()).ok();
    run.report = json.as_ref().and_then(|j| SmbcpReport::from_json(j).ok());
    run.counters = json
        .map(|j| j["failover"].clone())
        .filter(|f| f.is_object());
    run.failure = match (run.exit.as_str(), last_line(&stderr).as_str()) {
        ("0", _) => None,
        _ if killed => Some(format!(
            "transfer failed: no end within {} s, smbcp killed",
            settings.deadline.as_secs()
        )),
        (e, "") => Some(format!("transfer failed: exit {e}, nothing on stderr")),
        (_, line) => Some(format!("transfer failed: {line}")),
    };
    Ok(run)
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
    match clean.chars().count() > 160 {
        true => format!("{}...", clean.chars().take(157).collect::<String>()),
        false => clean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fit_the_timeline() {
        let s = Duration::from_secs;
        // 4 x 100 Mbit/s, 8 s down: about 20 s of copying, under 1 GiB.
        assert_eq!(default_size_mib(4, 100, s(8), false), 1024);
        assert_eq!(default_size_mib(4, 100, s(4), true), 512);
        // Faster links need a bigger file: 4 x 500 Mbit/s carry 237.5 MB/s.
        assert_eq!(default_size_mib(4, 500, s(8), false), 4608);
        assert_eq!(last_line("copying\nsmbcp: a | b\n\n"), "smbcp: a / b");
    }
}
