//! One measured file transfer, the same procedure for every client program: only the command
//! line and the check of the program's own report differ between `smbcp` and `smbclient`.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use smb3_tests::Testbed;

use crate::child::{run_measured, Finished};
use crate::data::{remove_if_present, verify, Fingerprint};
use crate::machine::CpuTicks;
use crate::server_cpu::ServerMeter;

/// Which way the data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Server to client (`get`).
    Download,
    /// Client to server (`put`).
    Upload,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        })
    }
}

/// The testbed's shares used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    /// `[plain]`: signed (the testbed makes signing mandatory), not encrypted.
    Plain,
    /// `[encrypted]`: `smb encrypt = required`; both clients are also told to encrypt.
    Encrypted,
}

impl ShareKind {
    /// The share name on the testbed.
    pub fn name(self) -> &'static str {
        match self {
            ShareKind::Plain => "plain",
            ShareKind::Encrypted => "encrypted",
        }
    }
}

/// A client program under test.
#[derive(Debug, Clone)]
pub enum Tool {
    /// This project's `smbcp`, with optional `--chunk-size` / `--depth` and further options.
    Smbcp {
        /// Path of the binary.
        binary: PathBuf,
        /// `--chunk-size` value, e.g. `"1M"` (`None`: the default).
        chunk: Option<String>,
        /// `--depth` value (`None`: the default).
        depth: Option<usize>,
        /// Further options, passed as they are (e.g. `["--no-multichannel"]`).
        extra: Vec<String>,
    },
    /// Samba's `smbclient` with its defaults (SMB3 maximum).
    Smbclient,
}

impl Tool {
    /// `smbcp` with its default settings.
    pub fn smbcp(binary: &Path) -> Tool {
        Tool::Smbcp {
            binary: binary.to_path_buf(),
            chunk: None,
            depth: None,
            extra: Vec::new(),
        }
    }

    /// `smbcp` with its default chunk size and depth and these further options.
    pub fn smbcp_with(binary: &Path, extra: &[&str]) -> Tool {
        Tool::Smbcp {
            binary: binary.to_path_buf(),
            chunk: None,
            depth: None,
            extra: extra.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// The options beyond the defaults, as they appear on the command line (`""` for none),
    /// with a leading space: `" --depth 4"`.
    pub fn settings(&self) -> String {
        match self {
            Tool::Smbcp {
                chunk,
                depth,
                extra,
                ..
            } => {
                let mut label = String::new();
                if let Some(c) = chunk {
                    label.push_str(&format!(" --chunk-size {c}"));
                }
                if let Some(d) = depth {
                    label.push_str(&format!(" --depth {d}"));
                }
                for e in extra {
                    label.push(' ');
                    label.push_str(e);
                }
                label
            }
            Tool::Smbclient => String::new(),
        }
    }

    /// Short name for tables.
    pub fn name(&self) -> &'static str {
        match self {
            Tool::Smbcp { .. } => "smbcp",
            Tool::Smbclient => "smbclient",
        }
    }

    /// The command that copies `remote` (share-relative) to or from `local`, run in the
    /// client namespace. Passwords go through the environment, never argv.
    pub(crate) fn command(
        &self,
        tb: &Testbed,
        share: ShareKind,
        dir: Direction,
        remote: &str,
        local: &Path,
    ) -> Command {
        let local = local.to_string_lossy().into_owned();
        match self {
            Tool::Smbcp {
                binary,
                chunk,
                depth,
                extra,
            } => {
                let url = format!(
                    "smb://{};{}@{}/{}/{remote}",
                    tb.domain(),
                    tb.user(),
                    tb.server_addr(1),
                    share.name()
                );
                let mut cmd = tb.client_command(binary);
                cmd.args(["-q", "--json"])
                    .env("SMB_PASSWORD", tb.password());
                if let Some(c) = chunk {
                    cmd.args(["--chunk-size", c]);
                }
                if let Some(d) = depth {
                    cmd.args(["--depth", &d.to_string()]);
                }
                cmd.args(extra);
                if share == ShareKind::Encrypted {
                    cmd.arg("--encrypt");
                }
                match dir {
                    Direction::Download => cmd.args([&url, &local]),
                    Direction::Upload => cmd.args([&local, &url]),
                };
                cmd
            }
            Tool::Smbclient => {
                let mut cmd = tb.client_command("smbclient");
                cmd.arg(tb.unc(1, share.name()))
                    .args(["-U", &format!("{}/{}", tb.domain(), tb.user())])
                    .args(["-m", "SMB3"])
                    // smbclient reads the password from PASSWD when -U has none.
                    .env("PASSWD", tb.password());
                if share == ShareKind::Encrypted {
                    cmd.arg("--client-protection=encrypt");
                }
                let script = match dir {
                    Direction::Download => format!("get {remote} {local}"),
                    Direction::Upload => format!("put {local} {remote}"),
                };
                cmd.args(["-c", &script]);
                cmd
            }
        }
    }

    /// Checks what the program said about its own run, beyond its exit status, and returns
    /// smbcp's report (smbclient has none).
    fn check_report(
        &self,
        run: &Finished,
        expected_bytes: u64,
    ) -> Result<Option<SmbcpReport>, String> {
        match self {
            Tool::Smbcp { .. } => {
                let json: serde_json::Value = serde_json::from_str(run.stdout.trim())
                    .map_err(|e| format!("smbcp --json printed no JSON ({e}): {}", run.stdout))?;
                let bytes = json["bytes"].as_u64();
                let failed = json["failed"].as_u64();
                if bytes != Some(expected_bytes) || failed != Some(0) {
                    return Err(format!("smbcp reported {json}"));
                }
                SmbcpReport::from_json(&json).map(Some)
            }
            // smbclient -c exits non-zero when a command fails; the data check does the rest.
            Tool::Smbclient => Ok(None),
        }
    }
}

/// One channel of a finished smbcp run, from its `--json` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelUse {
    /// Client address of the connection.
    pub local: Ipv4Addr,
    /// Server address of the connection; it tells which link the channel ran over.
    pub server: Ipv4Addr,
    /// Bytes sent plus bytes received on the channel (headers included).
    pub bytes: u64,
    /// Requests sent on the channel.
    pub requests: u64,
    /// False when the channel had failed or was closed at the end: the report keeps such
    /// channels for their counters, but they no longer carry anything.
    pub live: bool,
}

/// `state` values of smbcp's channel report that mean the connection is gone.
const GONE_STATES: [&str; 2] = ["failed", "closed"];

/// What smbcp said about its own run (`--json`).
#[derive(Debug, Clone, PartialEq)]
pub struct SmbcpReport {
    /// smbcp's own timing of the copy (after connecting and waiting for channels).
    pub copy_seconds: f64,
    /// Every channel the session had at the end, the first one included.
    pub channels: Vec<ChannelUse>,
    /// Channels the multichannel planner wanted in total (the sum of `planned` over its
    /// address pairs); 0 when multichannel was off or found nothing to plan.
    pub planned: usize,
}

impl SmbcpReport {
    /// Reads the fields the benchmark needs from smbcp's `--json` object; a missing or
    /// malformed field is an error, so a changed report format cannot pass silently.
    pub fn from_json(json: &serde_json::Value) -> Result<SmbcpReport, String> {
        let copy_seconds = json["seconds"]
            .as_f64()
            .ok_or_else(|| format!("smbcp report without \"seconds\": {json}"))?;
        let list = json["channels"]
            .as_array()
            .ok_or_else(|| format!("smbcp report without \"channels\": {json}"))?;
        let mut channels = Vec::with_capacity(list.len());
        for c in list {
            let addr = |key: &str| -> Result<Ipv4Addr, String> {
                c[key]
                    .as_str()
                    .and_then(|a| a.parse().ok())
                    .ok_or_else(|| format!("smbcp channel without an IPv4 \"{key}\": {c}"))
            };
            let number = |key: &str| -> Result<u64, String> {
                c[key]
                    .as_u64()
                    .ok_or_else(|| format!("smbcp channel without \"{key}\": {c}"))
            };
            channels.push(ChannelUse {
                local: addr("local")?,
                server: addr("server")?,
                bytes: number("bytes")?,
                requests: number("requests")?,
                // A report without states (older smbcp) lists only live channels.
                live: !c["state"]
                    .as_str()
                    .is_some_and(|state| GONE_STATES.contains(&state)),
            });
        }
        if channels.is_empty() {
            return Err(format!("smbcp reported no channel at all: {json}"));
        }
        // Absent pairs (multichannel off) plan nothing; a pair without a number is an error.
        let planned = match json["multichannel"]["pairs"].as_array() {
            None => 0,
            Some(pairs) => pairs
                .iter()
                .map(|p| {
                    p["planned"]
                        .as_u64()
                        .map(|n| n as usize)
                        .ok_or_else(|| format!("smbcp pair without \"planned\": {p}"))
                })
                .sum::<Result<usize, String>>()?,
        };
        Ok(SmbcpReport {
            copy_seconds,
            channels,
            planned,
        })
    }

    /// Channels still up at the end.
    pub fn live_channels(&self) -> usize {
        self.channels.iter().filter(|c| c.live).count()
    }

    /// Bytes (over every channel, gone ones too) and live channels per server address (i.e.
    /// per link), in address order.
    pub fn per_server(&self) -> Vec<(Ipv4Addr, usize, u64)> {
        let mut out: Vec<(Ipv4Addr, usize, u64)> = Vec::new();
        for c in &self.channels {
            let live = usize::from(c.live);
            match out.iter_mut().find(|(a, _, _)| *a == c.server) {
                Some((_, n, b)) => {
                    *n += live;
                    *b += c.bytes;
                }
                None => out.push((c.server, live, c.bytes)),
            }
        }
        out.sort_by_key(|(a, _, _)| *a);
        out
    }
}

/// Where one transfer reads and writes.
#[derive(Debug, Clone)]
pub struct Transfer<'a> {
    /// The testbed (link 1 is used).
    pub tb: &'a Testbed,
    /// Which share.
    pub share: ShareKind,
    /// Which way.
    pub direction: Direction,
    /// Share-relative name of the reference file (downloads read it).
    pub remote_source: &'a str,
    /// Share-relative name uploads write to.
    pub remote_target: &'a str,
    /// Local reference file (uploads read it), on a tmpfs.
    pub local_source: &'a Path,
    /// Local file downloads write to, on a tmpfs.
    pub local_target: &'a Path,
    /// What the reference file looks like.
    pub reference: &'a Fingerprint,
    /// Leave the verified target in place (a sequence whose next step reads it, or whose
    /// state it is part of); it is still removed before the next run into it.
    pub keep_target: bool,
}

impl Transfer<'_> {
    /// (remote path, local path, the file to verify afterwards, on the host).
    fn paths(&self) -> (&str, &Path, PathBuf) {
        match self.direction {
            Direction::Download => (
                self.remote_source,
                self.local_target,
                self.local_target.to_path_buf(),
            ),
            Direction::Upload => (
                self.remote_target,
                self.local_source,
                self.tb
                    .share_path(self.share.name())
                    .join(self.remote_target),
            ),
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Bytes moved.
    pub bytes: u64,
    /// Wall time of the whole client process (start, connect, copy, exit).
    pub wall: Duration,
    /// CPU time (user + system) of the client process.
    pub client_cpu: Duration,
    /// Peak resident set of the client process, bytes.
    pub client_max_rss: u64,
    /// CPU time of smbd (parent and connection child) meanwhile.
    pub server_cpu: Duration,
    /// CPU time used by everything on the machine meanwhile (to spot interference).
    pub machine_cpu: Duration,
}

impl Sample {
    /// Throughput in MB/s (10^6 bytes per second) over the process's wall time.
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64() / 1e6
    }

    /// CPU seconds per GiB moved for a CPU time.
    pub fn per_gib(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() / (self.bytes as f64 / (1u64 << 30) as f64)
    }

    /// How many CPUs the whole machine kept busy on average (2.0 = both cores saturated).
    pub fn machine_cpus(&self) -> f64 {
        self.machine_cpu.as_secs_f64() / self.wall.as_secs_f64()
    }

    /// CPU the machine spent on things other than this client and smbd, in CPUs (0.3 = 30 %
    /// of one core on average). Network stack work done in softirq context may land here too,
    /// so small values are normal.
    pub fn other_cpus(&self) -> f64 {
        let other = self
            .machine_cpu
            .saturating_sub(self.client_cpu)
            .saturating_sub(self.server_cpu);
        other.as_secs_f64() / self.wall.as_secs_f64()
    }
}

/// A client run with what the server and the machine spent meanwhile.
pub struct Metered {
    /// The client process: status, output, wall and CPU time.
    pub run: Finished,
    /// CPU time of smbd (parent and connection children) meanwhile.
    pub server_cpu: Duration,
    /// CPU time used by everything on the machine meanwhile.
    pub machine_cpu: Duration,
}

/// Runs the client command `cmd` to its end, metering `tb`'s smbd and the whole machine
/// around it.
pub fn run_metered(tb: &Testbed, cmd: Command) -> Result<Metered, String> {
    let meter = ServerMeter::start(tb.smbd_pid())?;
    let machine_before = CpuTicks::now();
    let run = run_measured(cmd)?;
    let machine_cpu = CpuTicks::now().busy_since(&machine_before);
    let server_cpu = meter.stop()?;
    Ok(Metered {
        run,
        server_cpu,
        machine_cpu,
    })
}

/// Runs `tool` once for `job`, verifies the result and returns the measurement. Fails if the
/// program fails, reports a problem, or the data that arrived is not the reference.
pub fn measure(tool: &Tool, job: &Transfer<'_>) -> Result<Sample, String> {
    measure_reported(tool, job).map(|(sample, _)| sample)
}

/// [`measure`], also returning smbcp's own report of the run (`None` for smbclient).
pub fn measure_reported(
    tool: &Tool,
    job: &Transfer<'_>,
) -> Result<(Sample, Option<SmbcpReport>), String> {
    let (remote, local, check) = job.paths();
    // Every run starts without a target, so no run profits from (or trips over) the last one.
    remove_if_present(&check)?;
    let cmd = tool.command(job.tb, job.share, job.direction, remote, local);
    let Metered {
        run,
        server_cpu,
        machine_cpu,
    } = run_metered(job.tb, cmd)?;
    let what = format!(
        "{} {} on [{}]",
        tool.name(),
        job.direction,
        job.share.name()
    );
    if !run.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            run.status,
            run.stderr_tail()
        ));
    }
    let report = tool
        .check_report(&run, job.reference.len)
        .map_err(|e| format!("{what}: {e}"))?;
    verify(&check, job.reference).map_err(|e| format!("{what}: {e}"))?;
    if !job.keep_target {
        remove_if_present(&check)?;
    }
    let sample = Sample {
        bytes: job.reference.len,
        wall: run.wall,
        client_cpu: run.cpu(),
        client_max_rss: run.max_rss,
        server_cpu,
        machine_cpu,
    };
    Ok((sample, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_smbcp_channel_report() {
        let json: serde_json::Value = serde_json::from_str(
            r#"{"bytes":1073741824,"seconds":4.5,"files":1,"failed":0,"channels":[
                {"local":"10.101.1.2","server":"10.101.1.1","bytes":700,"requests":7,"primary":true},
                {"local":"10.101.2.2","server":"10.101.2.1","bytes":200,"requests":2},
                {"local":"10.101.1.2","server":"10.101.1.1","bytes":100,"requests":1},
                {"local":"10.101.2.2","server":"10.101.2.1","bytes":50,"requests":1,"state":"failed"}],
                "multichannel":{"pairs":[{"planned":4},{"planned":4}]}}"#,
        )
        .unwrap();
        let r = SmbcpReport::from_json(&json).unwrap();
        assert_eq!(r.copy_seconds, 4.5);
        assert_eq!(r.planned, 8);
        assert_eq!(r.channels.len(), 4);
        assert_eq!(r.live_channels(), 3);
        assert_eq!(
            r.channels[1],
            ChannelUse {
                local: [10, 101, 2, 2].into(),
                server: [10, 101, 2, 1].into(),
                bytes: 200,
                requests: 2,
                live: true,
            }
        );
        assert_eq!(
            r.per_server(),
            vec![
                ([10, 101, 1, 1].into(), 2, 800),
                ([10, 101, 2, 1].into(), 1, 250)
            ]
        );
        let one = serde_json::json!({"seconds": 1.0, "channels": [
            {"local": "10.0.0.2", "server": "10.0.0.1", "bytes": 1, "requests": 1}],
            "multichannel": {"enabled": false, "pairs": []}});
        assert_eq!(SmbcpReport::from_json(&one).unwrap().planned, 0);
        let no_channels = serde_json::json!({"seconds": 1.0, "channels": []});
        assert!(SmbcpReport::from_json(&no_channels).is_err());
        let bad_addr = serde_json::json!({"seconds": 1.0, "channels": [
            {"local": "x", "server": "10.0.0.1", "bytes": 1, "requests": 1}]});
        assert!(SmbcpReport::from_json(&bad_addr)
            .unwrap_err()
            .contains("\"local\""));
    }
}
