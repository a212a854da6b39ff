//! Facts about the machine a result was measured on, and how busy it was.

use std::process::Command;
use std::time::Duration;

/// One line of text from a command, or `"?"`.
fn command_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.lines().next().map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// Fails with a suggestion when `bytes` would take more than 80 % of the memory available
/// now (`MemAvailable`): the benchmark's files live on tmpfs, and swapping would distort
/// what is measured.
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

/// What a results table is stamped with.
#[derive(Debug, Clone)]
pub struct Facts {
    /// UTC date and time of the run.
    pub date: String,
    /// CPUs available to this process.
    pub nproc: usize,
    /// CPU model name.
    pub cpu: String,
    /// Kernel release.
    pub kernel: String,
    /// Samba version (of smbclient; smbd comes from the same package).
    pub samba: String,
    /// iperf3 version.
    pub iperf3: String,
    /// Git commit of the working tree, with `-dirty` when it has changes.
    pub commit: String,
}

impl Facts {
    /// Collects the facts now.
    pub fn collect() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "?".into());
        let dirty = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=no"])
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false);
        let commit = command_line("git", &["rev-parse", "--short", "HEAD"]);
        Facts {
            date: command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into()),
            samba: command_line("smbclient", &["--version"]).replace("Version ", "Samba "),
            iperf3: command_line("iperf3", &["--version"]),
            commit: if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            },
        }
    }

    /// "Measured DATE on CPU (N CPUs), kernel K, Samba V": how every generated section starts.
    pub fn measured_on(&self) -> String {
        format!(
            "Measured {} on {} ({} CPUs), kernel {}, {}",
            self.date, self.cpu, self.nproc, self.kernel, self.samba
        )
    }
}

/// Machine-wide CPU counters from `/proc/stat` (all CPUs), in USER_HZ ticks.
#[derive(Debug, Clone, Copy)]
pub struct CpuTicks {
    busy: u64,
    total: u64,
}

impl CpuTicks {
    /// Reads the counters now.
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let values: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user already).
        let get = |i: usize| values.get(i).copied().unwrap_or(0);
        let idle = get(3) + get(4);
        let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
        CpuTicks {
            busy,
            total: busy + idle,
        }
    }

    /// CPU time all processes (and the kernel) used since `earlier`, as seconds of one CPU.
    pub fn busy_since(&self, earlier: &CpuTicks) -> Duration {
        Duration::from_millis(self.busy.saturating_sub(earlier.busy) * 10)
    }

    /// Share of all CPUs busy since `earlier`, 0.0..=1.0.
    pub fn busy_fraction_since(&self, earlier: &CpuTicks) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            0.0
        } else {
            self.busy.saturating_sub(earlier.busy) as f64 / total as f64
        }
    }
}

/// Share of all CPUs busy over the next `window`.
pub fn busy_fraction(window: Duration) -> f64 {
    let before = CpuTicks::now();
    std::thread::sleep(window);
    CpuTicks::now().busy_fraction_since(&before)
}

/// Waits up to `max_wait` for the machine to be quiet (under `threshold` of all CPUs busy over
/// one second) so other work (a build) does not skew the numbers. Returns the last reading.
pub fn wait_until_quiet(threshold: f64, max_wait: Duration) -> f64 {
    let deadline = std::time::Instant::now() + max_wait;
    loop {
        let busy = busy_fraction(Duration::from_secs(1));
        if busy < threshold || std::time::Instant::now() >= deadline {
            return busy;
        }
        eprintln!(
            "smb-bench: machine is {:.0} % busy with other work; waiting for it to calm down",
            busy * 100.0
        );
        std::thread::sleep(Duration::from_secs(4));
    }
}
