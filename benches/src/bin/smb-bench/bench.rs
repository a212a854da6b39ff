//! What the modes share: the sizes of a run, testbeds, the local reference file, runs
//! repeated and measured again when disturbed, raw TCP, and the generated section.

use std::path::{Path, PathBuf};
use std::time::Duration;

use smb3_benches::data::{self, Fingerprint, BIG_SEED};
use smb3_benches::doc;
use smb3_tests::{Testbed, TestbedConfig};

use crate::child;
use crate::iperf;
use crate::machine::{wait_until_quiet, Facts};
use crate::results::{channel_line, RawTcp, Results, Series};
use crate::transfer::{Direction, Sample, ShareKind, SmbcpReport, Tool, Transfer};
use crate::Common;

/// Names on the shares.
pub(crate) const REMOTE_BIG: &str = "big";
pub(crate) const REMOTE_UPLOAD: &str = "upload";

/// Other work using more than this many CPUs during a run makes the sample worthless on a
/// 2-core machine; undisturbed it stays within 0.05, the kernel's network work being charged
/// to the client and smbd.
const MAX_OTHER_CPUS: f64 = 0.25;
/// How often a disturbed run is measured again before its last sample is kept anyway.
const MAX_ATTEMPTS: usize = 5;

impl Common {
    /// `--size-mib`, else `mib` or `quick_mib` with `--quick`, in bytes.
    pub(crate) fn size(&self, mib: u64, quick_mib: u64) -> u64 {
        self.size_mib
            .unwrap_or(if self.quick { quick_mib } else { mib })
            .max(1)
            << 20
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

    pub(crate) fn wait_quiet(&self) -> Duration {
        Duration::from_secs(self.wait_quiet)
    }

    fn iperf_seconds(&self) -> u32 {
        self.iperf_seconds.unwrap_or(if self.quick { 2 } else { 5 })
    }

    /// smbcp from `--smbcp`, or the one built next to this binary, as an absolute path (the
    /// client namespace gets it as it is).
    pub(crate) fn smbcp(&self) -> Result<PathBuf, String> {
        match &self.smbcp {
            Some(p) => std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display())),
            None => smb3_benches::beside(None, "smbcp"),
        }
    }

    /// Writes the chart `name` into `--svg-dir` (default: perf/ next to `--write-doc`'s file;
    /// nowhere without either); how the section refers to it.
    pub(crate) fn chart(
        &self,
        name: &str,
        svg: impl FnOnce() -> Result<String, String>,
    ) -> Result<Option<String>, String> {
        let doc_dir = self
            .write_doc
            .as_deref()
            .map(|d| d.parent().unwrap_or(Path::new("")));
        let Some(dir) = self
            .svg_dir
            .clone()
            .or_else(|| doc_dir.map(|d| d.join("perf")))
        else {
            return Ok(None);
        };
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(name);
        std::fs::write(&path, svg()?).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("smb-bench: wrote the chart {}", path.display());
        let shown = path
            .strip_prefix(doc_dir.unwrap_or(Path::new("")))
            .unwrap_or(&path);
        Ok(Some(shown.display().to_string()))
    }

    /// Prints the section and, with `--write-doc`, puts it between the markers of `section`
    /// (added under `heading` when missing).
    pub(crate) fn publish(
        &self,
        section: &str,
        heading: Option<&str>,
        body: &str,
    ) -> Result<(), String> {
        println!("{body}");
        let Some(path) = &self.write_doc else {
            return Ok(());
        };
        doc::write_section(path, section, heading, body)?;
        eprintln!(
            "smb-bench: wrote the {section} section of {}",
            path.display()
        );
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
    pub(crate) fn shaped(links: usize, rate_mbit: u32) -> LinkSetup {
        LinkSetup {
            links,
            rate_mbit: Some(rate_mbit),
        }
    }

    pub(crate) const UNSHAPED: LinkSetup = LinkSetup {
        links: 1,
        rate_mbit: None,
    };

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
        Testbed::start(config).map_err(|e| format!("testbed: {e}"))
    }
}

/// Measures with `measure` again (after waiting for quiet) while other work on the machine
/// disturbed it; `retried` counts the repeats.
pub(crate) fn undisturbed<T>(
    wait_quiet: Duration,
    retried: &mut usize,
    mut measure: impl FnMut() -> Result<(Sample, T), String>,
) -> Result<(Sample, T), String> {
    for attempt in 1.. {
        let (sample, more) = measure()?;
        if sample.other_cpus() <= MAX_OTHER_CPUS || attempt == MAX_ATTEMPTS {
            return Ok((sample, more));
        }
        eprintln!(
            "  (disturbed: other work used {:.2} CPUs; measuring again)",
            sample.other_cpus()
        );
        *retried += 1;
        wait_until_quiet(wait_quiet);
    }
    unreachable!("the attempts end at MAX_ATTEMPTS")
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
            eprintln!(
                "  {} #{rep}: {}",
                progress(s),
                describe(&sample, report.as_ref())
            );
            s.samples.push(sample);
            s.reports.push(report);
        }
    }
    Ok(out)
}

fn progress(s: &Series) -> String {
    format!("{} [{}] {} {}", s.link, s.share, s.direction, s.client())
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
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the modes that copy one big file need: the machine's facts, the reference file
/// (uploads read it, downloads go next to it), smbcp, and what was measured.
pub(crate) struct Bench<'a> {
    pub(crate) common: &'a Common,
    pub(crate) facts: Facts,
    pub(crate) size: u64,
    pub(crate) reps: usize,
    pub(crate) scratch: Scratch,
    pub(crate) source: PathBuf,
    pub(crate) download: PathBuf,
    pub(crate) reference: Fingerprint,
    pub(crate) smbcp: PathBuf,
    pub(crate) results: Results,
    /// The machine's busy share before each testbed.
    quiet: Vec<f64>,
}

impl<'a> Bench<'a> {
    /// Writes the reference file of `size` bytes.
    pub(crate) fn new(common: &'a Common, size: u64, reps: usize) -> Result<Bench<'a>, String> {
        let smbcp = common.smbcp()?;
        let scratch = Scratch::create("files")?;
        let (source, download) = (scratch.0.join("source"), scratch.0.join("download"));
        eprintln!("smb-bench: writing the {} MiB reference file", size >> 20);
        let reference = data::write_pattern(&source, BIG_SEED, size)?;
        Ok(Bench {
            common,
            facts: Facts::collect(),
            size,
            reps,
            scratch,
            source,
            download,
            reference,
            smbcp,
            results: Results::default(),
            quiet: Vec::new(),
        })
    }

    /// Once the machine is quiet, a testbed of `setup` with room for the reference file on
    /// both shares and an upload, the reference file on `shares`.
    pub(crate) fn testbed(
        &mut self,
        setup: &LinkSetup,
        shares: &[ShareKind],
        note: &str,
    ) -> Result<Testbed, String> {
        self.quiet.push(wait_until_quiet(self.common.wait_quiet()));
        let tb = setup.start((self.size >> 20) * 4 + 256, note)?;
        for share in shares {
            let target = tb.share_path(share.name()).join(REMOTE_BIG);
            std::fs::copy(&self.source, &target)
                .map_err(|e| format!("{}: {e}", target.display()))?;
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
        let links: Vec<usize> = (1..=setup.links).collect();
        for direction in Direction::BOTH {
            let mut sums = Vec::new();
            for rep in 1..=self.reps {
                let reverse = direction == Direction::Download;
                let per_link =
                    iperf::concurrent_mbit(tb, &links, self.common.iperf_seconds(), reverse)?;
                let each: Vec<String> =
                    per_link.iter().map(|m| format!("{:.1}", m / 8.0)).collect();
                let sum: f64 = per_link.iter().sum();
                eprintln!(
                    "  {label} raw TCP {direction} #{rep}: {:.1} MB/s ({} MB/s per link)",
                    sum / 8.0,
                    each.join(" + ")
                );
                sums.push(sum);
            }
            let raw = RawTcp {
                link: label.into(),
                direction,
                mbit: sums,
            };
            self.results.raw.push(raw);
        }
        wait_until_quiet(self.common.wait_quiet());
        Ok(())
    }

    /// The reference file moved `direction` between the scratch files and `share`.
    pub(crate) fn job<'t>(
        &'t self,
        tb: &'t Testbed,
        share: ShareKind,
        direction: Direction,
    ) -> Transfer<'t> {
        Transfer {
            tb,
            share,
            direction,
            remote_source: REMOTE_BIG,
            remote_target: REMOTE_UPLOAD,
            local_source: &self.source,
            local_target: &self.download,
            reference: &self.reference,
            keep_target: false,
        }
    }

    /// Every tool `reps` times on `share`, download then upload.
    pub(crate) fn both_directions(
        &mut self,
        tb: &Testbed,
        link: &str,
        share: ShareKind,
        tools: &[Tool],
    ) -> Result<(), String> {
        for direction in Direction::BOTH {
            let mut retried = 0;
            let (wait, job) = (self.common.wait_quiet(), self.job(tb, share, direction));
            let series = repeat(
                self.reps,
                tools,
                |tool| Series::new(link, share.name(), direction, tool),
                |tool| undisturbed(wait, &mut retried, || crate::transfer::measure(tool, &job)),
            )?;
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
        let kept = (
            "transfer",
            self.results.max_other_cpus(),
            self.results.retried,
        );
        header(&self.facts, true, &what, Some(&self.quiet), Some(kept))
    }
}

/// For modes that measure a disturbed run again: the noun of a run, the most other work
/// used during those kept, and how many were measured again.
pub(crate) type Kept<'a> = (&'a str, f64, usize);

/// "Measured ..., commit C.\nCommand: `...`; WHAT." then, given `busy` (the machine's busy
/// share before each testbed), how quiet it was, and with `kept` how much other work the
/// runs saw.
pub(crate) fn header(
    facts: &Facts,
    iperf: bool,
    what: &str,
    busy: Option<&[f64]>,
    kept: Option<Kept<'_>>,
) -> String {
    let command: Vec<String> = std::env::args().collect();
    let iperf = if iperf {
        format!(", {}", facts.iperf3)
    } else {
        String::new()
    };
    let mut out = format!(
        "{}{iperf}, commit {}.\nCommand: `{}`; {what}.",
        facts.measured_on(),
        facts.commit,
        command.join(" ")
    );
    if let Some(busy) = busy {
        let busiest = busy.iter().copied().fold(0.0, f64::max);
        out.push_str(&format!(
            " Before each testbed the machine was at most {:.0} % busy",
            busiest * 100.0
        ));
        if let Some((noun, other, retried)) = kept {
            out.push_str(&format!(
                "; during the {noun}s kept, other work used at most {other:.2} CPUs ({retried} {noun}(s) measured \
                 again because other work disturbed them)"
            ));
        }
        out.push('.');
    }
    out.push_str("\n\n");
    out
}
