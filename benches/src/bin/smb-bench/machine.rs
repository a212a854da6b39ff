//! The machine a result was measured on, and the CPU time spent on it: by everything
//! (`/proc/stat`), by smbd (its process tree) and by one process.

use smb3_benches::Context;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

/// What every generated section is stamped with: the machine and its software, and the
/// working tree's commit (`-dirty` when it has changes).
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    measured_on: String,
    iperf3: String,
    commit: String,
}

/// For modes that measure a disturbed run again: the noun of a run, the most other work
/// used during those kept, and how many were measured again.
pub(crate) type Kept<'a> = (&'a str, f64, usize);

/// The first line a command prints, or `?`.
fn first_line(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success());
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    text.lines()
        .next()
        .map_or("?".into(), |l| l.trim().to_string())
}

impl Facts {
    pub(crate) fn collect() -> Facts {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name")?.split_once(':'));
        let (cpu, nproc) = (
            cpu.map_or("?", |(_, v)| v.trim()),
            std::thread::available_parallelism(),
        );
        let (date, kernel) = (
            first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            first_line("uname", &["-r"]),
        );
        let samba = first_line("smbclient", &["--version"]).replace("Version ", "Samba ");
        let nproc = nproc.map_or(0, |n| n.get());
        let measured_on =
            format!("Measured {date} on {cpu} ({nproc} CPUs), kernel {kernel}, {samba}");
        let dirty = first_line("git", &["status", "--porcelain", "--untracked-files=no"]) != "?";
        let commit = first_line("git", &["rev-parse", "--short", "HEAD"])
            + if dirty { "-dirty" } else { "" };
        Facts {
            measured_on,
            iperf3: first_line("iperf3", &["--version"]),
            commit,
        }
    }

    /// The first paragraph of a section: "Measured ..., commit C.\nCommand: `...`; WHAT."
    /// then, given `busy` (the machine's busy share before each testbed), how quiet it was,
    /// and with `kept` how much other work the runs saw.
    pub(crate) fn header(
        &self,
        iperf: bool,
        what: &str,
        busy: &[f64],
        kept: Option<Kept<'_>>,
    ) -> String {
        let command: Vec<String> = std::env::args().collect();
        let (on, commit, command) = (&self.measured_on, &self.commit, command.join(" "));
        let iperf = if iperf {
            format!(", {}", self.iperf3)
        } else {
            String::new()
        };
        let mut out = format!("{on}{iperf}, commit {commit}.\nCommand: `{command}`; {what}.");
        if !busy.is_empty() {
            let busiest = busy.iter().copied().fold(0.0, f64::max) * 100.0;
            out += &format!(" Before each testbed the machine was at most {busiest:.0} % busy");
            if let Some((noun, other, retried)) = kept {
                out += &format!(
                    "; during the {noun}s kept, other work used at most {other:.2} CPUs ({retried} {noun}(s) measured \
                     again because other work disturbed them)"
                );
            }
            out.push('.');
        }
        out + "\n\n"
    }
}

/// Fails with a suggestion when `bytes` would take more than 80 % of the memory available
/// now: the files live on tmpfs, and swapping would distort what is measured.
pub(crate) fn check_memory(bytes: u64) -> Result<(), String> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ctx("/proc/meminfo")?;
    let available = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or("no MemAvailable in /proc/meminfo")?
        * 1024;
    if bytes as f64 <= available as f64 * 0.8 {
        return Ok(());
    }
    Err(format!(
        "the files need {} MiB of memory (tmpfs), but only {} MiB are available: choose a lower \
         --rate or a smaller --size-mib",
        bytes >> 20,
        available >> 20
    ))
}

/// `/proc` counts CPU time in USER_HZ ticks, 100 a second on every Linux architecture.
fn ticks(n: u64) -> Duration {
    Duration::from_millis(n * 10)
}

/// Machine-wide CPU counters from `/proc/stat` (all CPUs), in ticks: (busy, total).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuTicks(u64, u64);

impl CpuTicks {
    pub(crate) fn now() -> CpuTicks {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let line = stat.lines().next().unwrap_or("");
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user already).
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
        CpuTicks(busy, busy + get(3) + get(4))
    }

    /// CPU time everything (the kernel too) used since `earlier`, as time of one CPU.
    pub(crate) fn busy_since(&self, earlier: &CpuTicks) -> Duration {
        ticks(self.0.saturating_sub(earlier.0))
    }

    /// Share of all CPUs busy since `earlier`.
    fn busy_fraction_since(&self, earlier: &CpuTicks) -> f64 {
        let total = self.1.saturating_sub(earlier.1);
        self.0.saturating_sub(earlier.0) as f64 / total.max(1) as f64
    }
}

/// The machine counts as quiet below this share of all CPUs busy.
const QUIET: f64 = 0.10;

/// Waits up to `max_wait` for the machine to be quiet (under [`QUIET`] over one second), so
/// other work (a build) does not skew the numbers. The last reading.
pub(crate) fn wait_until_quiet(max_wait: Duration) -> f64 {
    let deadline = Instant::now() + max_wait;
    loop {
        let before = CpuTicks::now();
        std::thread::sleep(Duration::from_secs(1));
        let busy = CpuTicks::now().busy_fraction_since(&before);
        if busy < QUIET || Instant::now() >= deadline {
            return busy;
        }
        eprintln!(
            "smb-bench: machine is {:.0} % busy with other work; waiting for it to calm down",
            busy * 100.0
        );
        std::thread::sleep(Duration::from_secs(4));
    }
}

/// CPU time spent by smbd's tree while something ran.
///
/// smbd forks a child per connection, which exits when the client disconnects, taking its
/// counters with it. The kernel moves a reaped child's time into its parent's `cutime` and
/// `cstime`, so `utime + stime + cutime + cstime` over the tree only ever grows, whatever was
/// reaped in between: the meter reads that sum at both ends, after waiting until the parent
/// has reaped the connection children (a zombie's time is in neither place).
#[derive(Debug)]
pub(crate) struct ServerMeter {
    pid: u32,
    children_before: BTreeSet<u32>,
    ticks_before: u64,
}

impl ServerMeter {
    /// The starting reading of the tree whose parent is `smbd_pid`.
    pub(crate) fn start(smbd_pid: u32) -> Result<ServerMeter, String> {
        Ok(ServerMeter {
            pid: smbd_pid,
            children_before: children(smbd_pid),
            ticks_before: tree_ticks(smbd_pid)?,
        })
    }

    /// CPU time smbd used since [`ServerMeter::start`], once the connection children that
    /// appeared meanwhile are gone (at most 5 s).
    pub(crate) fn stop(self) -> Result<Duration, String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !children(self.pid).is_subset(&self.children_before) {
            if Instant::now() > deadline {
                return Err("smbd's connection child did not exit within 5 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(ticks(
            tree_ticks(self.pid)?.saturating_sub(self.ticks_before),
        ))
    }
}

/// Direct children of `pid` (of its main thread, the one that forks in smbd).
fn children(pid: u32) -> BTreeSet<u32> {
    let list =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    list.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn tree_ticks(pid: u32) -> Result<u64, String> {
    let (mut total, mut stack) = (0, vec![pid]);
    while let Some(p) = stack.pop() {
        match process_ticks(p) {
            Some(t) => total += t,
            // Only the root must exist; a descendant may exit between listing and reading.
            None if p == pid => return Err(format!("smbd (pid {pid}) is gone")),
            None => {}
        }
        stack.extend(children(p));
    }
    Ok(total)
}

/// CPU time process `pid` has used so far (all threads, reaped children included).
pub(crate) fn process_cpu(pid: u32) -> Option<Duration> {
    process_ticks(pid).map(ticks)
}

fn process_ticks(pid: u32) -> Option<u64> {
    parse_stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Fields 14-17 of `/proc/PID/stat` (utime, stime, cutime, cstime) summed. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // fields[0] is field 3.
    let ticks = fields
        .get(11..15)?
        .iter()
        .map(|f| f.parse::<i64>().ok().map(|v| v.max(0) as u64));
    ticks.sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ticks_with_an_awkward_command_name() {
        let stat =
            "17066 (smbd (x) y) S 1 17066 17066 0 -1 4194560 2415 482867 15 5 2 1 140 569 20 0";
        assert_eq!(parse_stat_ticks(stat), Some(2 + 1 + 140 + 569));
        assert_eq!(parse_stat_ticks("1 (short) S 1 2"), None);
        assert!(tree_ticks(std::process::id()).is_ok());
    }
}
