//! One measured copy, the same procedure for every client program and for a file or a tree:
//! only the command line and the check of the program's own report differ between `smbcp`
//! and `smbclient`.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use smb3_benches::data::remove_if_present;
use smb3_benches::session::share_url;
use smb3_benches::Context;
use smb3_tests::Testbed;

use crate::child::{run_measured, Finished};
use crate::machine::{CpuTicks, ServerMeter};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Server to client.
    Download,
    Upload,
}

impl Direction {
    pub(crate) const BOTH: [Direction; 2] = [Direction::Download, Direction::Upload];
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        })
    }
}

/// A client program under test.
#[derive(Debug, Clone)]
pub(crate) enum Tool {
    /// This project's `smbcp` with these options beyond its defaults.
    Smbcp {
        binary: PathBuf,
        options: Vec<String>,
    },
    /// Samba's `smbclient` with its defaults (SMB3 maximum).
    Smbclient,
}

impl Tool {
    pub(crate) fn smbcp(binary: &Path, options: &[&str]) -> Tool {
        let options = options.iter().map(|o| o.to_string()).collect();
        Tool::Smbcp {
            binary: binary.to_path_buf(),
            options,
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Tool::Smbcp { .. } => "smbcp",
            Tool::Smbclient => "smbclient",
        }
    }

    /// The options beyond the defaults as on the command line, each after a space.
    pub(crate) fn settings(&self) -> String {
        match self {
            Tool::Smbcp { options, .. } => options.iter().map(|o| format!(" {o}")).collect(),
            Tool::Smbclient => String::new(),
        }
    }
}

/// `smbclient` on `share` over link 1 as the test user, run in the client namespace.
pub(crate) fn smbclient(tb: &Testbed, share: &str) -> Command {
    let mut cmd = tb.client_command("smbclient");
    let user = format!("{}/{}", tb.domain(), tb.user());
    cmd.arg(tb.unc(1, share)).args(["-U", &user, "-m", "SMB3"]);
    // smbclient reads the password from PASSWD when -U has none.
    cmd.env("PASSWD", tb.password());
    cmd
}

/// One channel of a finished smbcp run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChannelUse {
    pub(crate) local: Ipv4Addr,
    /// Which link the channel ran over.
    pub(crate) server: Ipv4Addr,
    /// Sent plus received, headers included.
    pub(crate) bytes: u64,
    pub(crate) requests: u64,
    /// False when it had failed or was closed at the end: kept for its counters only.
    pub(crate) live: bool,
}

/// What smbcp said about its own run (`--json`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SmbcpReport {
    /// Its own timing of the copy, after connecting.
    pub(crate) copy_seconds: f64,
    /// Every channel the session had at the end.
    pub(crate) channels: Vec<ChannelUse>,
    /// Channels the multichannel planner wanted (0 when multichannel was off).
    pub(crate) planned: usize,
}

impl SmbcpReport {
    /// A missing or malformed field is an error, so a changed report format cannot pass
    /// silently.
    pub(crate) fn from_json(json: &serde_json::Value) -> Result<SmbcpReport, String> {
        let missing = |what: &str| format!("smbcp report without {what}: {json}");
        let channel = |c: &serde_json::Value| {
            let addr = |key: &str| c[key].as_str()?.parse().ok();
            Some(ChannelUse {
                local: addr("local")?,
                server: addr("server")?,
                bytes: c["bytes"].as_u64()?,
                requests: c["requests"].as_u64()?,
                live: !matches!(c["state"].as_str(), Some("failed" | "closed")),
            })
        };
        let list = json["channels"]
            .as_array()
            .ok_or_else(|| missing("\"channels\""))?;
        let channels: Option<Vec<ChannelUse>> = list.iter().map(channel).collect();
        let channels = channels.ok_or_else(|| missing("a channel's addresses or counters"))?;
        if channels.is_empty() {
            return Err(missing("any channel"));
        }
        let pairs = json["multichannel"]["pairs"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        let planned: Option<u64> = pairs.iter().map(|p| p["planned"].as_u64()).sum();
        Ok(SmbcpReport {
            copy_seconds: json["seconds"]
                .as_f64()
                .ok_or_else(|| missing("\"seconds\""))?,
            channels,
            planned: planned.ok_or_else(|| missing("a pair's \"planned\""))? as usize,
        })
    }

    pub(crate) fn live_channels(&self) -> usize {
        self.channels.iter().filter(|c| c.live).count()
    }

    /// Per server address (i.e. per link), in address order: live channels and bytes over
    /// every channel, gone ones too.
    pub(crate) fn per_server(&self) -> Vec<(Ipv4Addr, usize, u64)> {
        let mut out: Vec<(Ipv4Addr, usize, u64)> = Vec::new();
        for c in &self.channels {
            match out.iter_mut().find(|(a, _, _)| *a == c.server) {
                Some((_, n, b)) => (*n, *b) = (*n + usize::from(c.live), *b + c.bytes),
                None => out.push((c.server, usize::from(c.live), c.bytes)),
            }
        }
        out.sort_by_key(|(a, _, _)| *a);
        out
    }
}

/// One measured run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sample {
    pub(crate) bytes: u64,
    /// Files moved (one for a single copy).
    pub(crate) files: u64,
    /// Of the whole client process: start, connect, copy, exit.
    pub(crate) wall: Duration,
    /// User + system CPU time of the client process.
    pub(crate) client_cpu: Duration,
    /// The client process's peak resident set, bytes.
    pub(crate) client_max_rss: u64,
    /// smbd's tree meanwhile.
    pub(crate) server_cpu: Duration,
    /// Everything on the machine meanwhile, to spot interference.
    pub(crate) machine_cpu: Duration,
}

impl Sample {
    /// MB/s (10^6 bytes a second) over the process's wall time.
    pub(crate) fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64() / 1e6
    }

    pub(crate) fn files_per_s(&self) -> f64 {
        self.files as f64 / self.wall.as_secs_f64()
    }

    /// CPU seconds per GiB moved.
    pub(crate) fn per_gib(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() / (self.bytes as f64 / (1u64 << 30) as f64)
    }

    /// CPUs the whole machine kept busy on average (2.0: both cores saturated).
    pub(crate) fn machine_cpus(&self) -> f64 {
        self.machine_cpu.as_secs_f64() / self.wall.as_secs_f64()
    }

    /// CPUs spent on other things than the client and smbd. The kernel's network work in
    /// softirq context may land here too, so small values are normal.
    pub(crate) fn other_cpus(&self) -> f64 {
        let other = self
            .machine_cpu
            .saturating_sub(self.client_cpu + self.server_cpu);
        other.as_secs_f64() / self.wall.as_secs_f64()
    }
}

/// Runs the client command `cmd` to its end, metering `tb`'s smbd and the whole machine
/// around it; the run and its sample of `bytes` in `files`.
pub(crate) fn run_metered(
    tb: &Testbed,
    cmd: Command,
    bytes: u64,
    files: u64,
) -> Result<(Finished, Sample), String> {
    let meter = ServerMeter::start(tb.smbd_pid())?;
    let machine_before = CpuTicks::now();
    let run = run_measured(cmd)?;
    let machine_cpu = CpuTicks::now().busy_since(&machine_before);
    let sample = Sample {
        bytes,
        files,
        wall: run.wall,
        client_cpu: run.cpu,
        client_max_rss: run.max_rss,
        server_cpu: meter.stop()?,
        machine_cpu,
    };
    Ok((run, sample))
}

/// Fails unless what arrived at the path is exactly what was copied.
pub(crate) type Verify<'a> = Box<dyn Fn(&Path) -> Result<(), String> + 'a>;

/// One copy: a file, or with `tree` a directory tree, between `local` (on a tmpfs, so the
/// local disk is never the limit) and `remote` on `share`, over link 1.
pub(crate) struct Transfer<'a> {
    pub(crate) tb: &'a Testbed,
    pub(crate) share: &'a str,
    pub(crate) direction: Direction,
    /// Share-relative: what downloads read, where uploads land.
    pub(crate) remote: String,
    /// What uploads read, where downloads land.
    pub(crate) local: PathBuf,
    pub(crate) tree: bool,
    pub(crate) bytes: u64,
    pub(crate) files: u64,
    pub(crate) verify: Verify<'a>,
    /// Leave the verified target in place (the next step of a sequence reads it); it is still
    /// removed before the next run into it.
    pub(crate) keep_target: bool,
}

impl Transfer<'_> {
    /// Where the copy lands, on the host.
    pub(crate) fn target(&self) -> PathBuf {
        match self.direction {
            Direction::Download => self.local.clone(),
            Direction::Upload => self.tb.share_path(self.share).join(&self.remote),
        }
    }

    /// `tool`'s command, run in the client namespace; passwords go through the environment,
    /// never argv. A tree is `smbcp -r` (the target does not exist, so it is created, as
    /// `cp -r` does), or smbclient's `mput`/`mget` under `recurse ON` standing where the tree
    /// goes (`prompt OFF` answers every per-file question).
    pub(crate) fn command(&self, tool: &Tool) -> Command {
        let (remote, local) = (&self.remote, self.local.display().to_string());
        let upload = self.direction == Direction::Upload;
        let encrypt = self.share == "encrypted";
        match tool {
            Tool::Smbcp { binary, options } => {
                let url = format!("{}/{remote}", share_url(self.tb, self.share));
                let mut cmd = self.tb.client_command(binary);
                cmd.args(["-q", "--json"])
                    .args(options)
                    .env("SMB_PASSWORD", self.tb.password());
                cmd.args(self.tree.then_some("-r"))
                    .args(encrypt.then_some("--encrypt"));
                match upload {
                    true => cmd.args([&local, &url]),
                    false => cmd.args([&url, &local]),
                };
                cmd
            }
            Tool::Smbclient => {
                let script = match (self.tree, upload) {
                    (false, false) => format!("get {remote} {local}"),
                    (false, true) => format!("put {local} {remote}"),
                    (true, _) => {
                        let (dir, name) = self.local.parent().zip(self.local.file_name()).unwrap();
                        let into = Path::new(remote)
                            .parent()
                            .filter(|p| upload && !p.as_os_str().is_empty());
                        let cd = into.map_or(String::new(), |p| format!("cd {}; ", p.display()));
                        let verb = if upload { "mput" } else { "mget" };
                        let (dir, name) = (dir.display(), name.to_string_lossy());
                        format!("prompt OFF; recurse ON; lcd {dir}; {cd}{verb} {name}")
                    }
                };
                let mut cmd = smbclient(self.tb, self.share);
                cmd.args(encrypt.then_some("--client-protection=encrypt"));
                cmd.args(["-c", &script]);
                cmd
            }
        }
    }
}

/// Runs `tool` once for `job` and verifies the result: the measurement, and smbcp's own
/// report. Fails if the program fails, reports a problem, or what arrived is not what was
/// sent.
pub(crate) fn measure(
    tool: &Tool,
    job: &Transfer<'_>,
) -> Result<(Sample, Option<SmbcpReport>), String> {
    let target = job.target();
    // Every run starts without a target, so none profits from (or trips over) the last one.
    remove_if_present(&target)?;
    let (run, sample) = run_metered(job.tb, job.command(tool), job.bytes, job.files)?;
    let what = format!("{} {} on [{}]", tool.name(), job.direction, job.share);
    run.success(&what)?;
    // smbclient -c exits non-zero when a command fails; the data check does the rest.
    let report = match tool {
        Tool::Smbcp { .. } => {
            let expected = [
                ("bytes", job.bytes),
                ("files", job.files),
                ("copied", job.files),
                ("failed", 0),
            ];
            let report = smbcp_json(&run, &expected).and_then(|j| SmbcpReport::from_json(&j));
            Some(report.ctx(&what)?)
        }
        Tool::Smbclient => None,
    };
    (job.verify)(&target).ctx(what)?;
    if !job.keep_target {
        remove_if_present(&target)?;
    }
    Ok((sample, report))
}

/// smbcp's `--json` object, with each of `expected`'s keys holding its number.
fn smbcp_json(run: &Finished, expected: &[(&str, u64)]) -> Result<serde_json::Value, String> {
    let json: serde_json::Value = serde_json::from_str(run.stdout.trim())
        .map_err(|e| format!("smbcp --json printed no JSON ({e}): {}", run.stdout))?;
    match expected
        .iter()
        .find(|(key, want)| json[key].as_u64() != Some(*want))
    {
        Some((key, want)) => Err(format!(
            "smbcp reported {key} = {} (expected {want}): {json}",
            json[key]
        )),
        None => Ok(json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_smbcp_channel_report() {
        let json = serde_json::json!({"seconds": 4.5, "channels": [
            {"local": "10.101.1.2", "server": "10.101.1.1", "bytes": 700, "requests": 7},
            {"local": "10.101.2.2", "server": "10.101.2.1", "bytes": 200, "requests": 2},
            {"local": "10.101.1.2", "server": "10.101.1.1", "bytes": 100, "requests": 1},
            {"local": "10.101.2.2", "server": "10.101.2.1", "bytes": 50, "requests": 1, "state": "failed"}],
            "multichannel": {"pairs": [{"planned": 4}, {"planned": 4}]}});
        let r = SmbcpReport::from_json(&json).unwrap();
        assert_eq!((r.copy_seconds, r.planned, r.live_channels()), (4.5, 8, 3));
        let per = r.per_server();
        assert_eq!(
            per,
            [
                ([10, 101, 1, 1].into(), 2, 800),
                ([10, 101, 2, 1].into(), 1, 250)
            ]
        );
        let one = serde_json::json!({"seconds": 1.0, "channels": [
            {"local": "10.0.0.2", "server": "10.0.0.1", "bytes": 1, "requests": 1}],
            "multichannel": {"enabled": false, "pairs": []}});
        assert_eq!(SmbcpReport::from_json(&one).unwrap().planned, 0);
        let none = serde_json::json!({"seconds": 1.0, "channels": []});
        let bad = serde_json::json!({"seconds": 1.0, "channels": [
            {"local": "x", "server": "10.0.0.1", "bytes": 1, "requests": 1}]});
        assert!(SmbcpReport::from_json(&none).is_err() && SmbcpReport::from_json(&bad).is_err());
    }
}
