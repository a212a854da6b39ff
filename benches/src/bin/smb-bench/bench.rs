//! What the modes share: the sizes of a run, testbeds, the reference file, runs repeated and
//! measured again when disturbed, raw TCP, and the generated section.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use smb3_benches::data::{self, Fingerprint, BIG_SEED};
use smb3_benches::Context;
use smb3_tests::{reap, run_iperf3_client, Testbed, TestbedConfig};

use crate::machine::{wait_until_quiet, Facts};
use crate::results::{channel_line, Results, Series};
use crate::transfer::{measure, Direction, Sample, SmbcpReport, Tool, Transfer};
use crate::{child, Common};

/// Names on the shares.
pub(crate) const REMOTE_BIG: &str = "big";
const REMOTE_UPLOAD: &str = "upload";

/// Other work using more than this many CPUs during a run makes the sample worthless on a
/// 2-core machine; undisturbed it stays within 0.05, the kernel's network work being charged
/// to the client and smbd.
const MAX_OTHER_CPUS: f64 = 0.25;
/// How often a disturbed run is measured again before its last sample is kept anyway.
const MAX_ATTEMPTS: usize = 5;

impl Common {
    /// `--size-mib`, else `mib` or `quick_mib` with `--quick`, in bytes.
    pub(crate) fn size(&self, mib: u64, quick_mib: u64) -> u64 {
        let mib = if self.quick { quick_mib } else { mib };
        self.size_mib.unwrap_or(mib).max(1) << 20
    }

    /// `--reps`, else `reps`, or 1 with `--quick`.
    pub(crate) fn reps(&self, reps: usize) -> usize {
        self.reps
            .unwrap_or(if self.quick { 1 } else { reps })
            .max(1)
    }

    pub(crate) fn rate(&self, default_mbit: u32) -> u32 {
        self.rate.unwrap_or(default_mbit)
    }

    pub(crate) fn quiet(&self) -> f64 {
        wait_until_quiet(Duration::from_secs(self.wait_quiet))
    }

    fn iperf_seconds(&self) -> u32 {
        self.iperf_seconds.unwrap_or(if self.quick { 2 } else { 5 })
    }

    /// smbcp from `--smbcp`, or the one built next to this binary, as an absolute path (the
    /// client namespace gets it as it is).
    pub(crate) fn smbcp(&self) -> Result<PathBuf, String> {
        match &self.smbcp {
            Some(p) => std::fs::canonicalize(p).ctx(p.display()),
            None => smb3_benches::beside(None, "smbcp"),
        }
    }

    /// Writes the chart `name` into `--svg-dir` (default: perf/ next to `--write-doc`'s file;
    /// nowhere without either); the section's line showing it, `alt` its text.
    pub(crate) fn chart(
        &self,
        name: &str,
        alt: &str,
        svg: impl FnOnce() -> Result<String, String>,
    ) -> Result<String, String> {
        let doc_dir = self.write_doc.as_ref().and_then(|d| d.parent());
        let Some(dir) = self.svg_dir.clone().or(doc_dir.map(|d| d.join("perf"))) else {
            return Ok(String::new());
        };
        let (path, svg) = (dir.join(name), svg()?);
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, svg))
            .ctx(path.display())?;
        eprintln!("smb-bench: wrote the chart {}", path.display());
        let shown = path
            .strip_prefix(doc_dir.unwrap_or(Path::new("")))
            .unwrap_or(&path);
        Ok(format!("\n![{alt}]({})\n", shown.display()))
    }

    /// Prints the section and, with `--write-doc`, puts it between the markers of `section`
    /// (added under `heading` when missing).
    pub(crate) fn publish(
        &self,
        name: &str,
        heading: Option<&str>,
        body: &str,
    ) -> Result<(), String> {
        println!("{body}");
        if let Some(path) = &self.write_doc {
            smb3_benches::doc::write_section(path, name, heading, body)?;
            eprintln!("smb-bench: wrote the {name} section of {}", path.display());
        }
        Ok(())
    }
}

/// One testbed: `links` veth links, each shaped to `rate_mbit` or unshaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkSetup {
    pub(crate) links: usize,
    pub(crate) rate_mbit: Option<u32>,
}

impl LinkSetup {
    pub(crate) const UNSHAPED: LinkSetup = LinkSetup {
        links: 1,
        rate_mbit: None,
    };

    pub(crate) fn shaped(links: usize, rate: u32) -> LinkSetup {
        LinkSetup {
            links,
            rate_mbit: Some(rate),
        }
    }

    /// `2 x 500 Mbit/s`, `1 x unshaped`.
    pub(crate) fn label(&self) -> String {
        match self.rate_mbit {
            Some(r) => format!("{} x {r} Mbit/s", self.links),
            None => format!("{} x unshaped", self.links),
        }
    }

    /// Brings the testbed up with `tmpfs_mib` behind the shares; `note` goes on the progress
    /// line.
    pub(crate) fn start(&self, tmpfs_mib: u64, note: &str) -> Result<Testbed, String> {
        let mut config = match self.rate_mbit {
            Some(mbit) => TestbedConfig::shaped(self.links, mbit),
            None => TestbedConfig::unshaped(self.links),
        };
        config.tmpfs_size = format!("{tmpfs_mib}m");
        eprintln!("smb-bench: testbed with {}{note}", self.label());
        Testbed::start(config).ctx("testbed")
    }
}

/// Measures with `measure` again (after waiting for quiet) while other work on the machine
/// disturbed it; `retried` counts the repeats.
pub(crate) fn undisturbed<T>(
    common: &Common,
    retried: &mut usize,
    mut measure: impl FnMut() -> Result<(Sample, T), String>,
) -> Result<(Sample, T), String> {
    let mut attempt = 1;
    loop {
        let (sample, more) = measure()?;
        let other = sample.other_cpus();
        if other <= MAX_OTHER_CPUS || attempt == MAX_ATTEMPTS {
            return Ok((sample, more));
        }
        eprintln!("  (disturbed: other work used {other:.2} CPUs; measuring again)");
        (*retried, attempt) = (*retried + 1, attempt + 1);
        common.quiet();
    }
}

/// Measures each of `tools` `reps` times into a series of its own, the tools taking turns
/// within a repetition so a slow drift of the machine hits all of them alike.
pub(crate) fn repeat(
    reps: usize,
    tools: &[Tool],
    mut series: impl FnMut(&Tool) -> Series,
    mut measure: impl FnMut(&Tool) -> Result<(Sample, Option<SmbcpReport>), String>,
) -> Result<Vec<Series>, String> {
    let mut out: Vec<Series> = tools.iter().map(&mut series).collect();
    for rep in 1..=reps {
        for (tool, s) in tools.iter().zip(&mut out) {
            child::check()?;
            let (sample, report) = measure(tool)?;
            let what = format!("{} [{}] {} {}", s.link, s.share, s.direction, s.client());
            eprintln!("  {what} #{rep}: {}", describe(&sample, report.as_ref()));
            s.samples.push(sample);
            s.reports.push(report);
        }
    }
    Ok(out)
}

/// One run on a progress line.
pub(crate) fn describe(s: &Sample, report: Option<&SmbcpReport>) -> String {
    let files = match s.files {
        0 | 1 => String::new(),
        _ => format!("{:.0} files/s, ", s.files_per_s()),
    };
    format!(
        "{files}{:.1} MB/s, client CPU {:.2} s, smbd CPU {:.2} s, machine {:.2} CPUs busy ({:.2} not client or smbd){}",
        s.mb_per_s(),
        s.client_cpu.as_secs_f64(),
        s.server_cpu.as_secs_f64(),
        s.machine_cpus(),
        s.other_cpus(),
        report.map_or(String::new(), channel_line)
    )
}

/// Local files of a run, on a tmpfs (/dev/shm) so the local disk is never the limit; removed
/// on drop.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn create(name: &str) -> Result<Scratch, String> {
        let dir = PathBuf::from(format!("/dev/shm/smb-bench-{name}.{}", std::process::id()));
        std::fs::create_dir_all(&dir).ctx(dir.display())?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a mode needs around its testbeds: the machine's facts and how busy it was before
/// each, the reference file of the modes that copy one (uploads read it, downloads go next
/// to it), smbcp, and what was measured.
pub(crate) struct Bench<'a> {
    pub(crate) common: &'a Common,
    pub(crate) facts: Facts,
    pub(crate) size: u64,
    pub(crate) reps: usize,
    pub(crate) scratch: Scratch,
    pub(crate) reference: Fingerprint,
    pub(crate) smbcp: PathBuf,
    pub(crate) results: Results,
    /// The machine's busy share before each testbed.
    pub(crate) busy: Vec<f64>,
}

impl<'a> Bench<'a> {
    /// Writes the reference file of `size` bytes.
    pub(crate) fn new(common: &'a Common, size: u64, reps: usize) -> Result<Bench<'a>, String> {
        let (smbcp, scratch, facts) =
            (common.smbcp()?, Scratch::create("files")?, Facts::collect());
        eprintln!("smb-bench: writing the {} MiB reference file", size >> 20);
        let reference = data::write_pattern(&scratch.0.join("source"), BIG_SEED, size)?;
        let (results, busy) = (Results::default(), Vec::new());
        Ok(Bench {
            common,
            facts,
            size,
            reps,
            scratch,
            reference,
            smbcp,
            results,
            busy,
        })
    }

    /// Once the machine is quiet, a testbed of `setup` with room for the reference file on
    /// both shares and an upload, the reference file on `shares`.
    pub(crate) fn testbed(
        &mut self,
        setup: &LinkSetup,
        shares: &[&str],
        note: &str,
    ) -> Result<Testbed, String> {
        self.busy.push(self.common.quiet());
        let tb = setup.start((self.size >> 20) * 4 + 256, note)?;
        for share in shares {
            let target = tb.share_path(share).join(REMOTE_BIG);
            std::fs::copy(self.scratch.0.join("source"), &target).ctx(target.display())?;
            data::verify(&target, &self.reference)?;
        }
        Ok(tb)
    }

    /// Raw TCP over all of `setup`'s links at once, each direction, `reps` times, as the
    /// rows of `label`.
    pub(crate) fn raw_tcp(
        &mut self,
        tb: &Testbed,
        setup: &LinkSetup,
        label: &str,
    ) -> Result<(), String> {
        let (links, seconds) = (setup.links, self.common.iperf_seconds());
        for direction in Direction::BOTH {
            let mut mbit = Vec::new();
            for rep in 1..=self.reps {
                let per_link = concurrent_iperf(tb, links, seconds, direction)?;
                let each: Vec<String> =
                    per_link.iter().map(|m| format!("{:.1}", m / 8.0)).collect();
                let (sum, each) = (per_link.iter().sum::<f64>(), each.join(" + "));
                eprintln!(
                    "  {label} raw TCP {direction} #{rep}: {:.1} MB/s ({each} MB/s per link)",
                    sum / 8.0
                );
                mbit.push(sum);
            }
            self.results
                .series
                .push(Series::raw(label, direction, links, &mbit));
        }
        self.common.quiet();
        Ok(())
    }

    /// The reference file moved `direction` between the scratch directory and `share`.
    pub(crate) fn job<'t>(
        &'t self,
        tb: &'t Testbed,
        share: &'t str,
        direction: Direction,
    ) -> Transfer<'t> {
        let (remote, local) = match direction {
            Direction::Download => (REMOTE_BIG, "download"),
            Direction::Upload => (REMOTE_UPLOAD, "source"),
        };
        let verify = Box::new(|path: &Path| data::verify(path, &self.reference));
        let (remote, local) = (remote.to_string(), self.scratch.0.join(local));
        Transfer {
            tb,
            share,
            direction,
            remote,
            local,
            tree: false,
            bytes: self.size,
            files: 1,
            verify,
            keep_target: false,
        }
    }

    /// Every tool `reps` times on `share`, download then upload.
    pub(crate) fn both_directions(
        &mut self,
        tb: &Testbed,
        link: &str,
        share: &str,
        tools: &[Tool],
    ) -> Result<(), String> {
        for direction in Direction::BOTH {
            let (mut retried, job) = (0, self.job(tb, share, direction));
            let series = repeat(
                self.reps,
                tools,
                |tool| Series::new(link, share, direction, tool),
                |tool| undisturbed(self.common, &mut retried, || measure(tool, &job)),
            )?;
            drop(job);
            self.results.series.extend(series);
            self.results.retried += retried;
        }
        Ok(())
    }

    /// The first paragraph of a section: where, what and how it was measured.
    pub(crate) fn header(&self) -> String {
        let what = format!(
            "file {} MiB (sha256 {}), {} repetition(s), median shown, iperf3 {} s per run",
            self.size >> 20,
            &self.reference.sha256[..16],
            self.reps,
            self.common.iperf_seconds()
        );
        let (other, retried) = (self.results.max_other_cpus(), self.results.retried);
        let kept = Some(("transfer", other, retried));
        self.facts.header(true, &what, &self.busy, kept)
    }
}

/// Receiver-side goodput of each of `links` links in Mbit/s, measured at once for
/// `seconds`: one iperf3 stream per link, so their sum is what the links carry together
/// while they share the machine's CPUs. Each link gets a one-off server on a port of its
/// own (clear of the default 5201 the testbed's own iperf3 uses), bound to the link's
/// server address, and a client bound to its client address.
fn concurrent_iperf(
    tb: &Testbed,
    links: usize,
    seconds: u32,
    direction: Direction,
) -> Result<Vec<f64>, String> {
    let (mut servers, mut clients) = (Vec::new(), Vec::new());
    let mut run = || -> Result<Vec<f64>, String> {
        for k in 1..=links {
            let mut server = tb.server_command("iperf3");
            server.args(format!("-s -1 -B {} -p {}", tb.server_addr(k), 5300 + k).split(' '));
            server
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            servers.push(
                server
                    .spawn()
                    .ctx(format!("cannot start iperf3 server for link {k}"))?,
            );
            tb.wait_listening(5300 + k as u16)?;
        }
        for k in 1..=links {
            let mut cmd = tb.client_command("iperf3");
            let (server, client) = (tb.server_addr(k), tb.client_addr(k));
            let args = format!(
                "-c {server} -B {client} -p {} -t {seconds} -J --connect-timeout 3000",
                5300 + k
            );
            cmd.args(args.split(' '))
                .args((direction == Direction::Download).then_some("-R"));
            clients.push(std::thread::spawn(move || {
                receiver_mbit(&run_iperf3_client(cmd)?)
            }));
        }
        let joined = clients
            .drain(..)
            .zip(1..)
            .map(|(c, k)| c.join().map_err(|_| "panicked".to_string())?.ctx(k));
        joined
            .collect::<Result<_, _>>()
            .map_err(|e| format!("iperf3 client for link {e}"))
    };
    let mbit = run();
    // Each one-off server exits after its test; one that has not is killed, so none is left.
    for server in &mut servers {
        reap(server, Duration::from_secs(5));
    }
    mbit
}

/// The receiver's average rate from iperf3's `-J` report, Mbit/s.
fn receiver_mbit(json_text: &str) -> Result<f64, String> {
    let json: serde_json::Value = serde_json::from_str(json_text)
        .map_err(|e| format!("iperf3 -J printed no JSON ({e}): {json_text}"))?;
    let bps = json["end"]["sum_received"]["bits_per_second"].as_f64();
    bps.filter(|b| b.is_finite() && *b >= 0.0)
        .map(|b| b / 1e6)
        .ok_or_else(|| format!("no end.sum_received.bits_per_second in iperf3's report: {json}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_receiver_rate() {
        let report = r#"{"end":{"sum_sent":{"bits_per_second":501000000.0},
            "sum_received":{"bits_per_second":478123456.0}}}"#;
        assert_eq!(receiver_mbit(report), Ok(478.123456));
        assert!(receiver_mbit(r#"{"end":{}}"#)
            .unwrap_err()
            .contains("sum_received"));
        assert!(receiver_mbit("iperf3: error").is_err());
    }
}
