//! `smb-bench`: the project's throughput benchmark (see `docs/PERFORMANCE.md`).
//!
//! One run brings up the testbed twice, one link unshaped and then one link shaped to
//! 1 Gbit/s, and on each measures raw TCP (iperf3), `smbcp` and `smbclient` moving the same
//! file both ways (plus the `[encrypted]` share on the unshaped link) and small-read latency.
//! `--sweep` instead tries several `smbcp --chunk-size/--depth` settings on the unshaped link.
//! `--links 1,2,4` instead measures multichannel: for each N a testbed with N links shaped to
//! `--rate`, aggregate raw TCP (one iperf3 stream per link, all at once), smbcp over all links
//! and smbclient (one connection); and one unshaped link with smbcp on one channel and on
//! several.
//! `--failover` instead measures faults during a download and an upload over `--links`
//! (default 4) shaped links, `--reps` times each: one link's connections reset (rst), one link
//! silently down (silent), every connection reset (all); the throughput per link over time
//! from the client's link counters, the failover gap, the bytes lost, when the link carries
//! traffic again and when every channel is back, as medians; a failing or hanging smbcp is
//! reported, not fatal.
//! `--mount` instead measures smbfuse: on 1 link at 1 Gbit/s, 4 links at 1 Gbit/s and 1
//! unshaped link, fio sequential reads and writes (1 MiB blocks, 1 and 4 jobs) through a mount
//! against smbcp and raw TCP, and on the first one listing and stat of a 10,000-entry
//! directory through the mount against the library's `read_dir`.
//! `--small-files` instead copies trees of many small files (10,000 x 4 KiB, 1,000 x 1 MiB)
//! up and down with `smbcp -r` and `smbclient` on 1 and 4 links shaped to `--rate` (default
//! 1000), in files per second (see `small_files` in the library).
//! `--queue-depth` instead measures 4 KiB random reads and writes through the library at queue
//! depths 1 to 64, on 1 link and on 4 links at `--rate` (default 1000), one channel per link.
//! It fails only when a transfer fails or its data does not verify; it asserts nothing about
//! time.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

mod mixed;
use mixed::MIXED_ROUNDS;
use smb3_benches::data::{self, Fingerprint, BIG_SEED, SMALL_SEED};
use smb3_benches::doc;
use smb3_benches::failover::{self, Fault};
use smb3_benches::interrupt;
use smb3_benches::iperf;
use smb3_benches::latency::{self, LatencyFiles, READ_SIZE};
use smb3_benches::machine::{self, wait_until_quiet, Facts};
use smb3_benches::mount::{self as fuse_mount, FioJob, FioSeries, FioSetup, Listing, Mount};
use smb3_benches::multichannel::{self, LinkSetup};
use smb3_benches::queue_depth;
use smb3_benches::results::{LatencySet, RawTcp, Results, Series};
use smb3_benches::small_files;
use smb3_benches::transfer::{
    measure_reported, Direction, Sample, ShareKind, SmbcpReport, Tool, Transfer,
};
use smb3_tests::{Testbed, TestbedConfig};

/// Throughput and latency of smbcp and the library against smbclient and raw TCP.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// Fast check: 256 MiB file (64 MiB with --links), 1 repetition, 2 s iperf3 runs.
    #[arg(long)]
    quick: bool,
    /// Write the results into this Markdown file between marker comments (e.g.
    /// docs/PERFORMANCE.md); the text around the markers is kept.
    #[arg(long)]
    write_doc: Option<PathBuf>,
    /// Instead of the main benchmark, try smbcp chunk sizes and depths on the unshaped link.
    #[arg(long)]
    sweep: bool,
    /// Instead of the main benchmark, measure multichannel with these numbers of links (e.g.
    /// 1,2,4), each link shaped to --rate, plus one unshaped link with 1 and several channels.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..=32))]
    links: Vec<u16>,
    /// Instead of the main benchmark, inject link faults during smbcp transfers over --links
    /// links (one number, default 4) and measure the failover gap (see docs/PERFORMANCE.md).
    #[arg(long)]
    failover: bool,
    /// Instead of the main benchmark, measure the smbfuse mount with fio against smbcp (see
    /// docs/PERFORMANCE.md, "smbfuse").
    #[arg(long)]
    mount: bool,
    /// With --mount: also read through another mount with these `-o` options (e.g.
    /// `cache=none,prefetch=0`), in the same repetitions, as rows of their own; repeatable.
    #[arg(long, value_name = "OPTIONS", requires = "mount")]
    mount_compare: Vec<String>,
    /// Instead of the main benchmark, copy trees of many small files both ways with smbcp -r
    /// and smbclient on 1 and 4 links shaped to --rate (see docs/PERFORMANCE.md, "Many small
    /// files"); --quick: a tenth of the files.
    #[arg(long)]
    small_files: bool,
    /// Instead of the main benchmark, measure 4 KiB random reads and writes through the
    /// library at queue depths 1-64 on one channel and on four (see docs/PERFORMANCE.md).
    #[arg(long, conflicts_with_all = ["mount", "failover", "sweep", "links", "small_files"])]
    queue_depth: bool,
    /// Instead of the main benchmark, the sequence a user runs by hand, round after round:
    /// smbcp download, smbclient get, smbcp upload of what smbcp downloaded, smbclient put of
    /// what it got; on one unshaped link, then on 4 links shaped to --rate (default 1000);
    /// 5 rounds unless --reps (see docs/PERFORMANCE.md, "Mixed sequence").
    #[arg(long, conflicts_with_all = ["mount", "failover", "sweep", "links", "small_files", "queue_depth"])]
    mixed: bool,
    /// Rate of every link in Mbit/s for --links (default 500), --failover (default 100),
    /// --small-files and --queue-depth (default 1000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rate: Option<u32>,
    /// With --failover: seconds the link stays down in the silent fault (default 8, or 4
    /// with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
    down_seconds: Option<u64>,
    /// With --failover: directory for the charts failover-rst.svg, failover-silent.svg and
    /// failover-all.svg (default: perf/ next to --write-doc's file; none without --write-doc).
    #[arg(long)]
    svg_dir: Option<PathBuf>,
    /// With --failover: also write every run's counter readings as CSV into this directory
    /// (failover-<fault>-<direction>-<rep>.csv).
    #[arg(long)]
    raw_dir: Option<PathBuf>,
    /// With --failover: kill smbcp after this many seconds (default: three times what the
    /// links need for the file, plus two minutes).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    deadline_seconds: Option<u64>,
    /// Channels for the multi-channel smbcp run on the unshaped link (--links), passed as
    /// `--channels-per-nic`.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=64))]
    unshaped_channels: u16,
    /// With --links: also measure smbcp with these options on the shaped links, next to its
    /// defaults (repeatable; one quoted string of options each, e.g. --variant "--depth 32").
    #[arg(long = "variant", value_name = "OPTIONS", allow_hyphen_values = true)]
    variants: Vec<String>,
    /// Where --links writes its chart (default: perf/multichannel.svg next to --write-doc's
    /// file; none without --write-doc); --queue-depth's default is perf/queue-depth.svg.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// File size in MiB (default 1024, or 256 with --quick, 64 with --quick --links; with
    /// --failover what the links need for the fault's timeline, at least 1024, or 256 with
    /// --quick).
    #[arg(long)]
    size_mib: Option<u64>,
    /// Repetitions of every measurement (with --failover: of every fault kind and direction);
    /// the median is reported (default 3, or 1 with --quick).
    #[arg(long)]
    reps: Option<usize>,
    /// Seconds per iperf3 run (default 5, or 2 with --quick).
    #[arg(long)]
    iperf_seconds: Option<u32>,
    /// Timed operations per latency measurement.
    #[arg(long, default_value_t = 2000)]
    latency_ops: usize,
    /// The smbcp binary (default: next to this binary, i.e. target/release/smbcp).
    #[arg(long)]
    smbcp: Option<PathBuf>,
    /// Seconds to wait, before each testbed, for other work on the machine to stop (under
    /// 10 % of all CPUs busy); measuring goes ahead afterwards either way.
    #[arg(long, default_value_t = 300)]
    wait_quiet: u64,
}

/// Sizes and counts of one run.
#[derive(Debug, Clone, Copy)]
struct Plan {
    size: u64,
    reps: usize,
    iperf_seconds: u32,
    latency_ops: usize,
    wait_quiet: Duration,
}

impl Args {
    /// The per-link rate: `--rate`, or the default of the mode.
    fn rate(&self) -> u32 {
        self.rate.unwrap_or(if self.failover {
            failover::DEFAULT_RATE_MBIT
        } else {
            500
        })
    }

    /// How long the silent fault keeps the link down.
    fn down_for(&self) -> Duration {
        self.down_seconds
            .map_or(failover::default_down_for(self.quick), Duration::from_secs)
    }

    /// The number of links of the --failover testbed.
    fn failover_links(&self) -> Result<usize, String> {
        match self.links.as_slice() {
            [] => Ok(failover::DEFAULT_LINKS),
            [n] if usize::from(*n) >= failover::FAULT_LINK.max(2) => Ok(usize::from(*n)),
            [_] => Err(format!(
                "--failover needs at least 2 links (the fault hits link {})",
                failover::FAULT_LINK
            )),
            _ => Err("--failover takes one --links number (e.g. --links 4)".into()),
        }
    }
}

impl Plan {
    /// The plan of the run; fails on arguments the mode cannot use.
    fn from_args(a: &Args) -> Result<Plan, String> {
        if a.mount && (a.failover || a.sweep || !a.links.is_empty()) {
            return Err("--mount is a run of its own: drop --failover, --sweep and --links".into());
        }
        let default_mib = match (a.quick, a.links.is_empty()) {
            _ if a.failover => {
                failover::default_size_mib(a.failover_links()?, a.rate(), a.down_for(), a.quick)
            }
            (false, _) => 1024,
            (true, true) => 256,
            (true, false) => 64,
        };
        Ok(Plan {
            size: a.size_mib.unwrap_or(default_mib) << 20,
            reps: a
                .reps
                .unwrap_or(match (a.quick, a.mixed) {
                    (true, _) => 1,
                    (false, true) => MIXED_ROUNDS,
                    (false, false) => 3,
                })
                .max(1),
            iperf_seconds: a.iperf_seconds.unwrap_or(if a.quick { 2 } else { 5 }),
            latency_ops: a.latency_ops.max(1),
            wait_quiet: Duration::from_secs(a.wait_quiet),
        })
    }

    /// Room for the reference file on both shares plus one upload target, with slack.
    fn tmpfs_size(&self) -> String {
        format!("{}m", (self.size >> 20) * 4 + 256)
    }
}

/// One testbed setup.
#[derive(Debug, Clone, Copy)]
struct Link {
    label: &'static str,
    rate_mbit: Option<u32>,
    /// Also measure the `[encrypted]` share.
    encrypted: bool,
}

const UNSHAPED: Link = Link {
    label: "unshaped",
    rate_mbit: None,
    encrypted: true,
};
const SHAPED_1G: Link = Link {
    label: "1 Gbit/s",
    rate_mbit: Some(1000),
    encrypted: false,
};

/// Local files of the run, on a tmpfs (/dev/shm) so the local disk is never the limit.
/// Removed on drop.
struct Scratch {
    dir: PathBuf,
    /// The reference file; uploads read it.
    source: PathBuf,
    /// Where downloads go.
    download: PathBuf,
}

impl Scratch {
    fn create() -> Result<Scratch, String> {
        let dir = PathBuf::from(format!("/dev/shm/smb-bench.{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Scratch {
            source: dir.join("source"),
            download: dir.join("download"),
            dir,
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The machine counts as quiet below this share of all CPUs busy.
const QUIET: f64 = 0.10;

/// Names on the shares.
const REMOTE_BIG: &str = "big";
const REMOTE_SMALL: &str = "small4k";
const REMOTE_UPLOAD: &str = "upload";

/// What every part of a run needs: the arguments, the plan, the machine, the local files.
struct Bench<'a> {
    args: &'a Args,
    plan: Plan,
    facts: Facts,
    scratch: &'a Scratch,
    reference: Fingerprint,
    smbcp: PathBuf,
}

impl Bench<'_> {
    /// The reference file moved `direction` between the scratch files and `share`.
    fn job<'t>(&'t self, tb: &'t Testbed, share: ShareKind, direction: Direction) -> Transfer<'t> {
        Transfer {
            tb,
            share,
            direction,
            remote_source: REMOTE_BIG,
            remote_target: REMOTE_UPLOAD,
            local_source: &self.scratch.source,
            local_target: &self.scratch.download,
            reference: &self.reference,
            keep_target: false,
        }
    }

    /// Every tool `reps` times on `share`, download then upload, into `results`.
    fn both_directions(
        &self,
        tb: &Testbed,
        label: &str,
        share: ShareKind,
        tools: &[Tool],
        results: &mut Results,
    ) -> Result<(), String> {
        for direction in [Direction::Download, Direction::Upload] {
            let job = self.job(tb, share, direction);
            let series = repeat(label, tools, &job, &self.plan, &mut results.retried)?;
            results.series.extend(series);
        }
        Ok(())
    }
}

pub(super) fn main() -> ExitCode {
    let args = Args::parse();
    interrupt::install();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smb-bench: {e}");
            if interrupt::interrupted() {
                ExitCode::from(interrupt::EXIT_INTERRUPTED)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    if args.queue_depth {
        return queue_depth_run(args);
    }
    // Checks the arguments before minutes go into writing the reference file.
    let plan = Plan::from_args(args)?;
    if args.small_files {
        return small_files_run(args, &plan);
    }
    let failover = match args.failover {
        true => Some(failover_settings(args, &plan)?),
        false => None,
    };
    if failover.is_some() {
        // The file lives four times in memory: the local source and download (tmpfs), the
        // share's copy and the upload (the testbed's tmpfs).
        machine::check_memory(plan.size * 4)?;
    }
    let smbcp = locate_smbcp(args.smbcp.as_deref())?;
    let facts = Facts::collect();
    let scratch = Scratch::create()?;
    eprintln!(
        "smb-bench: writing the {} MiB reference file",
        plan.size >> 20
    );
    let reference = data::write_pattern(&scratch.source, BIG_SEED, plan.size)?;
    let bench = Bench {
        args,
        plan,
        facts,
        scratch: &scratch,
        reference,
        smbcp,
    };
    if let Some(settings) = failover {
        return failover_run(&bench, &settings);
    }
    let mut results = Results::default();
    if args.mount {
        return mount_run(&bench, &mut results);
    }
    if !args.links.is_empty() {
        return multichannel_run(&bench, &mut results);
    }
    if args.mixed {
        return mixed::run(&bench, &mut results);
    }
    main_run(&bench, &mut results)
}

/// The main benchmark (or `--sweep`): one unshaped link, then one shaped to 1 Gbit/s.
fn main_run(bench: &Bench<'_>, results: &mut Results) -> Result<(), String> {
    let Bench { args, plan, .. } = bench;
    let mut quiet = Vec::new();
    let links: &[Link] = if args.sweep {
        &[UNSHAPED]
    } else {
        &[UNSHAPED, SHAPED_1G]
    };
    for link in links {
        quiet.push(wait_until_quiet(QUIET, plan.wait_quiet));
        let tb = start_testbed(link, plan)?;
        let files = stage_files(&tb, link, bench.scratch, &bench.reference)?;
        if !args.sweep {
            raw_tcp(&tb, link, plan, results)?;
            wait_until_quiet(QUIET, plan.wait_quiet);
        }
        transfers(bench, &tb, link, results)?;
        if !args.sweep {
            small_reads(&tb, link, plan, &files, results)?;
        }
        drop(tb);
    }
    let section = if args.sweep { "sweep" } else { "results" };
    publish(args, section, None, &render(bench, &quiet, results))
}

/// The `--small-files` run: it brings its own trees, so no reference file is written.
fn small_files_run(args: &Args, plan: &Plan) -> Result<(), String> {
    if args.mount || args.failover || args.sweep || !args.links.is_empty() {
        return Err(
            "--small-files is a run of its own: drop --mount, --failover, --sweep and --links"
                .into(),
        );
    }
    let settings = small_files::Settings {
        quick: args.quick,
        reps: plan.reps,
        rate_mbit: args.rate.unwrap_or(small_files::DEFAULT_RATE_MBIT),
        wait_quiet: plan.wait_quiet,
        smbcp: locate_smbcp(args.smbcp.as_deref())?,
    };
    let body = small_files::run(&settings)?;
    publish(
        args,
        small_files::SECTION,
        Some(small_files::HEADING),
        &body,
    )
}

/// smbcp from `--smbcp`, or the one built next to this binary.
fn locate_smbcp(given: Option<&Path>) -> Result<PathBuf, String> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find my own path: {e}"))?
            .with_file_name("smbcp"),
    };
    // The client namespace gets the path as is; make it absolute so cwd does not matter.
    let path = std::fs::canonicalize(&path).map_err(|_| {
        format!(
            "{} not found: build it first (cargo build --release -p smbcp -p smb3-benches) or pass --smbcp",
            path.display()
        )
    })?;
    Ok(path)
}

fn start_testbed(link: &Link, plan: &Plan) -> Result<Testbed, String> {
    let setup = LinkSetup {
        links: 1,
        rate_mbit: link.rate_mbit,
    };
    start_setup(&setup, plan.tmpfs_size(), "")
}

/// Puts the reference file on the shares (written straight into the tmpfs behind them) and a
/// 4 KiB file for the latency runs.
fn stage_files(
    tb: &Testbed,
    link: &Link,
    scratch: &Scratch,
    reference: &Fingerprint,
) -> Result<LatencyFiles, String> {
    let mut shares = vec![ShareKind::Plain];
    if link.encrypted {
        shares.push(ShareKind::Encrypted);
    }
    for share in shares {
        let target = tb.share_path(share.name()).join(REMOTE_BIG);
        std::fs::copy(&scratch.source, &target)
            .map_err(|e| format!("{}: {e}", target.display()))?;
        data::verify(&target, reference)?;
    }
    let small = tb.share_path("plain").join(REMOTE_SMALL);
    data::write_pattern(&small, SMALL_SEED, READ_SIZE as u64)?;
    Ok(LatencyFiles {
        big: REMOTE_BIG.into(),
        big_host: tb.share_path("plain").join(REMOTE_BIG),
        small: REMOTE_SMALL.into(),
        small_contents: std::fs::read(&small).map_err(|e| format!("{}: {e}", small.display()))?,
    })
}

fn raw_tcp(tb: &Testbed, link: &Link, plan: &Plan, results: &mut Results) -> Result<(), String> {
    for direction in [Direction::Download, Direction::Upload] {
        let mut mbit = Vec::new();
        for rep in 1..=plan.reps {
            let reverse = direction == Direction::Download;
            let m = tb.iperf3_mbit(1, plan.iperf_seconds, reverse)?;
            eprintln!(
                "  {} raw TCP {direction} #{rep}: {:.1} MB/s",
                link.label,
                m / 8.0
            );
            mbit.push(m);
        }
        results.raw.push(RawTcp {
            link: link.label.into(),
            direction,
            mbit,
        });
    }
    Ok(())
}

/// The copies on this link, each direction: smbcp and smbclient on each of its shares, or
/// with `--sweep` smbcp with several chunk sizes and depths (and smbclient as the yardstick)
/// on `[plain]`.
fn transfers(
    bench: &Bench<'_>,
    tb: &Testbed,
    link: &Link,
    results: &mut Results,
) -> Result<(), String> {
    let (tools, shares) = if bench.args.sweep {
        (sweep_tools(&bench.smbcp), vec![ShareKind::Plain])
    } else {
        let tools = vec![Tool::smbcp(&bench.smbcp), Tool::Smbclient];
        let mut shares = vec![ShareKind::Plain];
        if link.encrypted {
            shares.push(ShareKind::Encrypted);
        }
        (tools, shares)
    };
    for share in shares {
        bench.both_directions(tb, link.label, share, &tools, results)?;
    }
    Ok(())
}

/// smbclient, then smbcp with every chunk size and depth of the sweep.
fn sweep_tools(smbcp: &Path) -> Vec<Tool> {
    let mut tools = vec![Tool::Smbclient];
    for chunk in ["256K", "1M", "4M", "8M"] {
        for depth in [4, 16, 64] {
            tools.push(Tool::Smbcp {
                binary: smbcp.to_path_buf(),
                chunk: Some(chunk.into()),
                depth: Some(depth),
                extra: Vec::new(),
            });
        }
    }
    tools
}

/// Runs every tool `reps` times on `job`, the tools taking turns within each repetition so a
/// slow drift of the machine hits all of them alike.
fn repeat(
    label: &str,
    tools: &[Tool],
    job: &Transfer<'_>,
    plan: &Plan,
    retried: &mut usize,
) -> Result<Vec<Series>, String> {
    let mut series: Vec<Series> = tools
        .iter()
        .map(|tool| Series {
            link: label.into(),
            share: job.share,
            direction: job.direction,
            tool: tool.name().into(),
            settings: tool.settings(),
            samples: Vec::new(),
            reports: Vec::new(),
        })
        .collect();
    for rep in 1..=plan.reps {
        for (tool, s) in tools.iter().zip(&mut series) {
            interrupt::check()?;
            let (sample, report) = measure_undisturbed(tool, job, plan, retried)?;
            eprintln!(
                "  {} [{}] {} {}{} #{rep}: {:.1} MB/s, client CPU {:.2} s, smbd CPU {:.2} s, machine {:.2} CPUs busy ({:.2} not client or smbd){}",
                label,
                job.share.name(),
                job.direction,
                s.tool,
                s.settings,
                sample.mb_per_s(),
                sample.client_cpu.as_secs_f64(),
                sample.server_cpu.as_secs_f64(),
                sample.machine_cpus(),
                sample.other_cpus(),
                report.as_ref().map_or(String::new(), |r| format!(
                    ", channels {} (bytes per link {} %)",
                    multichannel::channels_cell(Some(r)),
                    multichannel::bytes_per_link_cell(Some(r))
                ))
            );
            s.samples.push(sample);
            s.reports.push(report);
        }
    }
    Ok(series)
}

/// Other work using more than this many CPUs during a transfer makes the sample worthless on
/// a 2-core machine. In an undisturbed run it is within 0.05: the kernel's network work is
/// charged to the client and smbd here.
const MAX_OTHER_CPUS: f64 = 0.25;
/// How often a disturbed transfer is measured again before its last sample is kept anyway.
const MAX_ATTEMPTS: usize = 5;

/// One transfer, measured again (after waiting for quiet) while other work on the machine
/// disturbed it; `retried` counts the repeats.
fn measure_undisturbed(
    tool: &Tool,
    job: &Transfer<'_>,
    plan: &Plan,
    retried: &mut usize,
) -> Result<(Sample, Option<SmbcpReport>), String> {
    let mut attempt = 1;
    loop {
        let (sample, report) = measure_reported(tool, job)?;
        if sample.other_cpus() <= MAX_OTHER_CPUS || attempt == MAX_ATTEMPTS {
            return Ok((sample, report));
        }
        eprintln!(
            "  (disturbed: other work used {:.2} CPUs; measuring again)",
            sample.other_cpus()
        );
        *retried += 1;
        attempt += 1;
        wait_until_quiet(QUIET, plan.wait_quiet);
    }
}

fn small_reads(
    tb: &Testbed,
    link: &Link,
    plan: &Plan,
    files: &LatencyFiles,
    results: &mut Results,
) -> Result<(), String> {
    wait_until_quiet(QUIET, plan.wait_quiet);
    let mut set = latency::library(tb, files, plan.latency_ops, BIG_SEED ^ 0x1a7e)?;
    set.push(latency::smbclient(tb, files, plan.latency_ops)?);
    for l in &set {
        eprintln!(
            "  {} {}: median {:.0} µs, p99 {:.0} µs",
            link.label, l.what, l.median_us, l.p99_us
        );
    }
    results.latency.push(LatencySet {
        link: link.label.into(),
        results: set,
    });
    Ok(())
}

/// The generated Markdown: how it was measured, then the tables.
fn render(bench: &Bench<'_>, quiet: &[f64], results: &Results) -> String {
    let mut out = header(bench, quiet, results);
    if bench.args.sweep {
        out.push_str(&results.sweep_table().markdown());
    } else {
        out.push_str(&results.throughput_table().markdown());
        out.push_str("\nSmall reads at queue depth 1 (4 KiB, `[plain]` share):\n\n");
        out.push_str(&results.latency_table().markdown());
    }
    out
}

/// The first paragraph of every generated section: where, what and how it was measured.
fn header(bench: &Bench<'_>, quiet: &[f64], results: &Results) -> String {
    let Bench {
        facts,
        plan,
        reference,
        ..
    } = bench;
    let command: Vec<String> = std::env::args().collect();
    let busiest = quiet.iter().copied().fold(0.0, f64::max);
    format!(
        "{measured}, {iperf}, commit {commit}.\n\
         Command: `{cmd}`; file {mib} MiB (sha256 {sha}), {reps} repetition(s), median shown, \
         iperf3 {secs} s per run. Before each testbed the machine was at most {busy:.0} % busy; \
         during the transfers kept, other work used at most {other:.2} CPUs \
         ({retried} transfer(s) measured again because other work disturbed them).\n\n",
        measured = facts.measured_on(),
        iperf = facts.iperf3,
        commit = facts.commit,
        cmd = command.join(" "),
        mib = plan.size >> 20,
        sha = &reference.sha256[..16],
        reps = plan.reps,
        secs = plan.iperf_seconds,
        busy = busiest * 100.0,
        other = results.max_other_cpus(),
        retried = results.retried,
    )
}

// ---------------------------------------------------------------------------- multichannel

/// The `--links` run: one unshaped link with smbcp on one channel and on several, then for each
/// N a testbed of N shaped links with aggregate raw TCP, smbcp and smbclient.
fn multichannel_run(bench: &Bench<'_>, results: &mut Results) -> Result<(), String> {
    let Bench {
        args, plan, smbcp, ..
    } = bench;
    let mut quiet = Vec::new();

    // Unshaped first: what one link carries when the CPUs are the limit, the number the shaped
    // rate has to stay well below.
    let unshaped = LinkSetup {
        links: 1,
        rate_mbit: None,
    };
    let per_nic = args.unshaped_channels.to_string();
    let baseline = Tool::smbcp_with(smbcp, &["--no-multichannel"]);
    let unshaped_tools = [
        baseline.clone(),
        Tool::smbcp_with(smbcp, &["--channels-per-nic", per_nic.as_str()]),
    ];
    quiet.push(wait_until_quiet(QUIET, plan.wait_quiet));
    {
        let tb = start_setup(&unshaped, plan.tmpfs_size(), "")?;
        stage_big(&tb, bench)?;
        wait_until_quiet(QUIET, plan.wait_quiet);
        let label = unshaped.label();
        bench.both_directions(&tb, &label, ShareKind::Plain, &unshaped_tools, results)?;
    }

    let shaped: Vec<LinkSetup> = args
        .links
        .iter()
        .map(|&n| LinkSetup {
            links: usize::from(n),
            rate_mbit: Some(args.rate()),
        })
        .collect();
    // smbcp's defaults first: the target lines and the chart take the first smbcp series.
    let mut tools = vec![Tool::smbcp(smbcp), Tool::Smbclient];
    for variant in &args.variants {
        let options: Vec<&str> = variant.split_whitespace().collect();
        tools.push(Tool::smbcp_with(smbcp, &options));
    }
    for setup in &shaped {
        quiet.push(wait_until_quiet(QUIET, plan.wait_quiet));
        let tb = start_setup(setup, plan.tmpfs_size(), "")?;
        stage_big(&tb, bench)?;
        aggregate_raw_tcp(&tb, setup, plan, results)?;
        wait_until_quiet(QUIET, plan.wait_quiet);
        bench.both_directions(&tb, &setup.label(), ShareKind::Plain, &tools, results)?;
    }

    let svg_path = output_path(args, args.svg.as_deref(), "perf/multichannel.svg");
    let body = render_multichannel(
        bench,
        &quiet,
        results,
        (&unshaped, &baseline.settings()),
        &shaped,
        svg_path.as_deref(),
    );
    if let Some(path) = &svg_path {
        let title = format!(
            "1 GiB copies over N links of {} Mbit/s each (median MB/s)",
            args.rate()
        );
        let title = if plan.size == 1 << 30 {
            title
        } else {
            title.replace("1 GiB", &format!("{} MiB", plan.size >> 20))
        };
        write_output(path, &multichannel::chart(results, &shaped, &title).svg()?)?;
        eprintln!("smb-bench: wrote the chart {}", path.display());
    }
    publish(args, "multichannel", None, &body)
}

/// A testbed of `setup`'s links with `tmpfs_size` behind the shares; `note` is added to the
/// progress line.
fn start_setup(setup: &LinkSetup, tmpfs_size: String, note: &str) -> Result<Testbed, String> {
    let mut config = match setup.rate_mbit {
        Some(mbit) => TestbedConfig::shaped(setup.links, mbit),
        None => TestbedConfig::unshaped(setup.links),
    };
    config.tmpfs_size = tmpfs_size;
    eprintln!("smb-bench: testbed with {}{note}", setup.label());
    Testbed::start(config).map_err(|e| format!("testbed: {e}"))
}

/// Puts the reference file on `[plain]` (straight into the tmpfs behind it).
fn stage_big(tb: &Testbed, bench: &Bench<'_>) -> Result<(), String> {
    let target = tb.share_path(ShareKind::Plain.name()).join(REMOTE_BIG);
    std::fs::copy(&bench.scratch.source, &target)
        .map_err(|e| format!("{}: {e}", target.display()))?;
    data::verify(&target, &bench.reference)
}

/// Raw TCP over all links at once, each direction, `reps` times; records the per-repetition
/// sums.
fn aggregate_raw_tcp(
    tb: &Testbed,
    setup: &LinkSetup,
    plan: &Plan,
    results: &mut Results,
) -> Result<(), String> {
    let links: Vec<usize> = (1..=setup.links).collect();
    for direction in [Direction::Download, Direction::Upload] {
        let mut sums = Vec::new();
        for rep in 1..=plan.reps {
            let reverse = direction == Direction::Download;
            let per_link = iperf::concurrent_mbit(tb, &links, plan.iperf_seconds, reverse)?;
            let sum: f64 = per_link.iter().sum();
            let each: Vec<String> = per_link.iter().map(|m| format!("{:.1}", m / 8.0)).collect();
            eprintln!(
                "  {} raw TCP {direction} #{rep}: {:.1} MB/s ({} MB/s per link)",
                setup.label(),
                sum / 8.0,
                each.join(" + ")
            );
            sums.push(sum);
        }
        results.raw.push(RawTcp {
            link: setup.label(),
            direction,
            mbit: sums,
        });
    }
    Ok(())
}

/// `value` of the download and the upload combined by `combine` (NaN when neither has one).
fn both_ways(combine: fn(f64, f64) -> f64, value: impl Fn(Direction) -> Option<f64>) -> f64 {
    [Direction::Download, Direction::Upload]
        .into_iter()
        .filter_map(value)
        .fold(f64::NAN, combine)
}

/// The generated Markdown of a `--links` run.
#[allow(clippy::too_many_arguments)]
fn render_multichannel(
    bench: &Bench<'_>,
    quiet: &[f64],
    results: &Results,
    (unshaped, baseline): (&LinkSetup, &str),
    shaped: &[LinkSetup],
    svg: Option<&Path>,
) -> String {
    let args = bench.args;
    let mut out = header(bench, quiet, results);
    // Why the rate is low enough: the most links together against one unshaped link's smbcp.
    let widest = shaped.iter().max_by_key(|s| s.links);
    let unshaped_single = both_ways(f64::min, |d| {
        results
            .series
            .iter()
            .find(|s| s.link == unshaped.label() && s.direction == d && s.settings == baseline)
            .map(Series::mb_per_s)
    });
    if let Some(w) = widest {
        let aggregate = both_ways(f64::max, |d| {
            results
                .raw
                .iter()
                .find(|r| r.link == w.label() && r.direction == d)
                .map(RawTcp::mb_per_s)
        });
        let share = aggregate / unshaped_single;
        // Half of what the CPUs can move is the most that still leaves them clearly idle.
        let verdict = if share < 0.5 {
            "so the shaped runs are limited by the links, not by the two CPUs"
        } else {
            "which is not well below it: the CPUs may limit the shaped runs; choose a lower --rate"
        };
        out.push_str(&format!(
            "Each link is shaped to {rate} Mbit/s with tbf in both directions. The {n} links \
             together carried {agg:.1} MB/s of raw TCP, {pct:.0} % of the {single:.1} MB/s smbcp \
             moved over one unshaped link with one channel (the slower direction, CPU-bound), \
             {verdict}.\n\n",
            rate = args.rate(),
            n = w.links,
            agg = aggregate,
            pct = share * 100.0,
            single = unshaped_single,
        ));
    }
    let lines = multichannel::target_lines(results, shaped);
    if !lines.is_empty() {
        out.push_str(&format!(
            "Targets (smbcp at least {:.0} % of aggregate raw TCP with 2 and 4 links):\n\n{}\n\n",
            multichannel::TARGET_OF_RAW_TCP * 100.0,
            lines.join("\n")
        ));
    }
    out.push_str(&multichannel::shaped_table(results, shaped).markdown());
    if let Some(w) = widest.filter(|w| w.links > 1) {
        out.push_str(&format!(
            "\nChannels of smbcp's median run with {} links:\n\n",
            w.links
        ));
        out.push_str(&multichannel::channel_table(results, w).markdown());
    }
    out.push_str(&format!(
        "\nOne unshaped link, smbcp with one channel (`{}`) and with several:\n\n",
        baseline.trim()
    ));
    out.push_str(&multichannel::unshaped_table(results, unshaped, baseline).markdown());
    if let Some(svg) = svg {
        out.push_str(&format!(
            "\n![MB/s per number of links: raw TCP, smbcp, smbclient]({})\n",
            shown_from_doc(args, svg)
        ));
    }
    out
}

// ---------------------------------------------------------------------------- queue depth

/// The `--queue-depth` run (see [`queue_depth`]): the sweep, its chart and its section.
fn queue_depth_run(args: &Args) -> Result<(), String> {
    let settings = queue_depth::Settings::new(
        args.quick,
        args.rate,
        args.reps,
        args.size_mib,
        Duration::from_secs(args.wait_quiet),
    );
    let outcome = queue_depth::run(&settings)?;
    let svg = output_path(args, args.svg.as_deref(), "perf/queue-depth.svg");
    if let Some(path) = &svg {
        write_output(path, &outcome.chart_svg(&settings)?)?;
        eprintln!("smb-bench: wrote the chart {}", path.display());
    }
    let shown = svg
        .as_deref()
        .map(|p| PathBuf::from(shown_from_doc(args, p)));
    let body = outcome.section(&settings, shown.as_deref());
    let heading = "## Small random I/O and queue depth";
    publish(args, "queue-depth", Some(heading), &body)
}

// ---------------------------------------------------------------------------- failover

/// The failover settings from the arguments: links, rate, link-down time and smbcp's
/// deadline.
fn failover_settings(args: &Args, plan: &Plan) -> Result<failover::Settings, String> {
    let links = args.failover_links()?;
    let deadline = match args.deadline_seconds {
        Some(s) => Duration::from_secs(s),
        None => failover::default_deadline(plan.size, links, args.rate()),
    };
    Ok(failover::Settings {
        links,
        rate_mbit: args.rate(),
        fault_link: failover::FAULT_LINK,
        down_for: args.down_for(),
        deadline,
    })
}

/// The `--failover` run: one testbed of N shaped links; `reps` times, for each fault kind a
/// download and an upload with the fault at 30 % of the file; the table of medians, the
/// events, one chart per fault kind.
fn failover_run(bench: &Bench<'_>, settings: &failover::Settings) -> Result<(), String> {
    let Bench { args, plan, .. } = bench;
    wait_until_quiet(QUIET, plan.wait_quiet);
    let setup = LinkSetup {
        links: settings.links,
        rate_mbit: Some(settings.rate_mbit),
    };
    // The reference file and one upload at a time, with slack.
    let tmpfs = format!("{}m", (plan.size >> 20) * 2 + 256);
    let note = format!("; smbcp is given {} s per run", settings.deadline.as_secs());
    let tb = start_setup(&setup, tmpfs, &note)?;
    stage_big(&tb, bench)?;
    let runs = failover_runs(bench, &tb, settings)?;
    drop(tb);

    let mut shown = Vec::new();
    if let Some(dir) = output_path(args, args.svg_dir.as_deref(), "perf") {
        for fault in Fault::ALL {
            let path = dir.join(format!("failover-{}.svg", fault.name()));
            let svg = failover::chart(&runs, fault, settings, plan.size).svg()?;
            write_output(&path, &svg)?;
            eprintln!("smb-bench: wrote the chart {}", path.display());
            shown.push((fault, shown_from_doc(args, &path)));
        }
    }
    let body = failover::section(&bench.facts, &runs, settings, &bench.reference, &shown);
    publish(args, "failover", Some("## Failover"), &body)
}

/// Every fault kind and direction, `reps` times; the repetitions outermost, so a slow drift
/// of the machine hits every kind alike.
fn failover_runs(
    bench: &Bench<'_>,
    tb: &Testbed,
    settings: &failover::Settings,
) -> Result<Vec<failover::Run>, String> {
    let job = failover::Job {
        tb,
        smbcp: &bench.smbcp,
        remote_source: REMOTE_BIG,
        remote_target: REMOTE_UPLOAD,
        local_source: &bench.scratch.source,
        local_target: &bench.scratch.download,
        reference: &bench.reference,
    };
    let mut runs = Vec::new();
    for rep in 1..=bench.plan.reps {
        for fault in Fault::ALL {
            for direction in [Direction::Download, Direction::Upload] {
                wait_until_quiet(QUIET, bench.plan.wait_quiet);
                eprintln!("smb-bench: failover {fault} {direction} #{rep}");
                let run = failover::run_once(&job, settings, fault, direction, rep)?;
                report_failover_run(bench.args, &run, settings)?;
                runs.push(run);
                // Let the server finish with the old session's connections before the next one.
                std::thread::sleep(Duration::from_secs(2));
            }
        }
    }
    Ok(runs)
}

/// Prints one failover run's row and events while the benchmark goes on, and with
/// `--raw-dir` writes its counter readings.
fn report_failover_run(
    args: &Args,
    run: &failover::Run,
    settings: &failover::Settings,
) -> Result<(), String> {
    let one = std::slice::from_ref(run);
    let table = failover::table(one, settings).markdown();
    eprintln!("{}", table.lines().nth(2).unwrap_or(""));
    eprintln!(" {}", failover::event_lines(one, settings).join(" "));
    if let Some(dir) = &args.raw_dir {
        let path = dir.join(format!(
            "failover-{}-{}-{}.csv",
            run.fault, run.direction, run.rep
        ));
        write_output(&path, &failover::csv(run, settings))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------- output files

/// Where an output goes: `given`, else `default` next to `--write-doc`'s file, else nowhere.
fn output_path(args: &Args, given: Option<&Path>, default: &str) -> Option<PathBuf> {
    match (given, &args.write_doc) {
        (Some(p), _) => Some(p.to_path_buf()),
        (None, Some(doc)) => Some(doc.parent().unwrap_or(Path::new(".")).join(default)),
        (None, None) => None,
    }
}

/// How the generated Markdown refers to `path`: relative to `--write-doc`'s directory.
fn shown_from_doc(args: &Args, path: &Path) -> String {
    let doc_dir = args
        .write_doc
        .as_deref()
        .and_then(Path::parent)
        .unwrap_or(Path::new(""));
    path.strip_prefix(doc_dir)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Prints the generated Markdown and, with `--write-doc`, puts it into the doc between the
/// markers of `section` (created under the heading `under` when missing).
fn publish(args: &Args, section: &str, under: Option<&str>, body: &str) -> Result<(), String> {
    println!("{body}");
    let Some(path) = &args.write_doc else {
        return Ok(());
    };
    match under {
        Some(heading) => doc::write_section_under(path, heading, section, body)?,
        None => doc::write_section(path, section, body)?,
    }
    eprintln!(
        "smb-bench: wrote the {section} section of {}",
        path.display()
    );
    Ok(())
}

/// Writes `contents` to `path`, creating its directory first.
fn write_output(path: &Path, contents: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, contents).map_err(|e| format!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------- mount

/// The `--mount` run: per setup, raw TCP (shaped links), smbcp and smbclient both ways, then
/// fio through a smbfuse mount of the same share; on the first setup also the listing
/// measurements.
fn mount_run(bench: &Bench<'_>, results: &mut Results) -> Result<(), String> {
    let Bench {
        args, plan, smbcp, ..
    } = bench;
    let smbfuse = sibling(smbcp, "smbfuse")?;
    let smbctl = sibling(smbcp, "smbctl")?;
    let setups = [
        LinkSetup {
            links: 1,
            rate_mbit: Some(1000),
        },
        LinkSetup {
            links: 4,
            rate_mbit: Some(1000),
        },
        LinkSetup {
            links: 1,
            rate_mbit: None,
        },
    ];
    let jobs: Vec<FioJob> = [Direction::Download, Direction::Upload]
        .into_iter()
        .flat_map(|direction| [1, 4].map(|jobs| FioJob { direction, jobs }))
        .collect();
    let mut quiet = Vec::new();
    // fio's own start-up, to read the wall-time columns by (quiet machine, before any testbed).
    wait_until_quiet(QUIET, plan.wait_quiet);
    let startup: Vec<String> = jobs
        .iter()
        .filter(|j| j.direction == Direction::Download)
        .map(|j| {
            fuse_mount::fio_startup(j.jobs, plan.reps)
                .map(|d| format!("{:.2} s with {}", d.as_secs_f64(), j.label()))
        })
        .collect::<Result<_, _>>()?;
    eprintln!("smb-bench: fio's own start-up: {}", startup.join(", "));
    let mut fio: Vec<FioSeries> = Vec::new();
    let mut listing = Listing::default();
    let listing_link = setups[0].label();
    for (n, setup) in setups.iter().enumerate() {
        let label = setup.label();
        quiet.push(wait_until_quiet(QUIET, plan.wait_quiet));
        let tb = start_setup(setup, plan.tmpfs_size(), "")?;
        stage_big(&tb, bench)?;
        if setup.rate_mbit.is_some() {
            aggregate_raw_tcp(&tb, setup, plan, results)?;
        }
        wait_until_quiet(QUIET, plan.wait_quiet);
        bench.both_directions(
            &tb,
            &label,
            ShareKind::Plain,
            &[Tool::smbcp(smbcp), Tool::Smbclient],
            results,
        )?;

        let mut series: Vec<FioSeries> = jobs
            .iter()
            .map(|&job| FioSeries {
                link: label.clone(),
                job,
                options: None,
                samples: Vec::new(),
            })
            .collect();
        for o in &args.mount_compare {
            // Reads only: the options compared so far are read-side ones.
            let reads = jobs.iter().filter(|j| j.direction == Direction::Download);
            series.extend(reads.map(|&job| FioSeries {
                link: label.clone(),
                job,
                options: Some(o.clone()),
                samples: Vec::new(),
            }));
        }
        // One mount at a time: another mount of the share would watch the directory fio
        // writes into and answer every batch of changes meanwhile (see smbfuse's
        // `dir_watch`), which costs the server CPU the mount measured needs.
        let variants: Vec<Option<String>> = std::iter::once(None)
            .chain(args.mount_compare.iter().cloned().map(Some))
            .collect();
        for rep in 1..=plan.reps {
            for (k, options) in variants.iter().enumerate() {
                let mount = match options {
                    None => Mount::start(&tb, &smbfuse, "fio", &[])?,
                    Some(o) => Mount::start(&tb, &smbfuse, &format!("fio-cmp{k}"), &[o])?,
                };
                let setup = FioSetup {
                    tb: &tb,
                    mount: &mount,
                    smbctl: &smbctl,
                    file: REMOTE_BIG,
                    size: plan.size,
                };
                for s in series.iter_mut().filter(|s| &s.options == options) {
                    let sample = fuse_mount::run_fio(&setup, s.job)?;
                    eprintln!(
                        "  {label} {} {}{} #{rep}: {:.1} MB/s, client CPU {:.2} s, smbd CPU {:.2} s, {} of {} requests 1 MiB",
                        s.job.direction,
                        s.job.label(),
                        s.options.as_ref().map_or(String::new(), |o| format!(" ({o})")),
                        sample.mb_per_s(),
                        sample.client_cpu.as_secs_f64(),
                        sample.server_cpu.as_secs_f64(),
                        sample.full_requests,
                        sample.requests,
                    );
                    s.samples.push(sample);
                }
            }
        }
        fio.extend(series);

        if n == 0 {
            fuse_mount::stage_listing(&tb)?;
            let mount = Mount::start(&tb, &smbfuse, "ls", &[])?;
            fuse_mount::time_ls(&mount, plan.reps, &mut listing)?;
            drop(mount);
            for _ in 0..plan.reps {
                // A fresh mount each time: nothing cached; a long attribute timeout so the
                // second pass comes from the cache.
                let mount = Mount::start(&tb, &smbfuse, "stat", &["actimeo=600"])?;
                fuse_mount::time_stats(&mount, &mut listing)?;
            }
            fuse_mount::time_read_dir(&tb, plan.reps, &mut listing)?;
            eprintln!("  {label} listing: {listing:?}");
        }
    }
    let mut body = header(bench, &quiet, results);
    body.push_str(&format!(
        "fio through `smbfuse` (default options) against smbcp's and smbclient's medians on the \
         same testbed. Two clocks, each compared with its like: fio's runtime (open to last \
         read, or to the end of the final fsync of a write) against smbcp's copy time (first \
         open to last close, after connecting) and iperf3's rate; and the wall time of the \
         whole process against smbcp's and smbclient's, where fio's start-up counts for the \
         mount (measured in this run on a file in local memory: {}) and smbcp's connection \
         and logon for smbcp. Client CPU is fio's plus the daemon's.\n\n",
        startup.join(", ")
    ));
    body.push_str(&fuse_mount::throughput_table(&fio, results).markdown());
    body.push_str(&format!(
        "\nsmbcp and raw TCP on the same testbeds:\n\n{}",
        multichannel::shaped_table(results, &setups).markdown()
    ));
    body.push_str(&format!(
        "\nA directory of {} empty files ({listing_link}), median of {} repetition(s):\n\n{}",
        fuse_mount::LISTED,
        plan.reps,
        fuse_mount::listing_table(&listing_link, &listing).markdown()
    ));
    publish(
        args,
        "mount",
        Some("## smbfuse: fio through the mount against smbcp"),
        &body,
    )
}

/// The program `name` built next to `smbcp`.
fn sibling(smbcp: &Path, name: &str) -> Result<PathBuf, String> {
    let path = smbcp.with_file_name(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found: build it first (cargo build --release -p smbfuse -p smbcp)",
            path.display()
        ))
    }
}
