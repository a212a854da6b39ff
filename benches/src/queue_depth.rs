//! Small random I/O against queue depth (`smb-bench --queue-depth`): 4 KiB reads and writes
//! at random 4 KiB-aligned offsets of a 1 GiB file with exactly QD operations in flight, for
//! QD 1, 4, 16, 32 and 64, on one link with one channel and on four links with one channel
//! each (every link shaped to the same rate, 1 Gbit/s by default).
//!
//! The library runs in-process on a tokio runtime whose threads live in the client namespace
//! (as [`latency`](crate::latency) does), so what is measured is the library's request path,
//! not a tool's start-up. Before measuring, the client's channel list must show one active
//! channel per link. Every read is compared with the file on the server's disk; every write
//! puts a block the check can recompute ([`offsets::written_block`]), and the written file is
//! checked block by block afterwards ([`check::verify_written`]); any mismatch aborts the run.
//!
//! One module per job: [`offsets`] (where operations go, what writes put there), [`measure`]
//! (one point: the tasks, the window, smbd's CPU), [`check`] (the data checks), [`report`]
//! (medians, table, targets, chart). This file brings up the testbeds and walks the sweep.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use smb3_client::{ChannelState, Client, ClientConfig, File, OpenOptions};
use smb3_tests::{client_block_on, Testbed, TestbedConfig};

use crate::data::{self, Fingerprint, BIG_SEED};
use crate::machine::{self, wait_until_quiet, Facts};
use crate::session::Login;

pub mod check;
pub mod measure;
pub mod offsets;
pub mod report;

use check::{ReadReference, WrittenBlocks};
use measure::PointPlan;
use offsets::BLOCK;
use report::{Op, Setup, Sweep, DEPTHS};

/// Rate of every link unless `--rate` says otherwise (the 1 Gbit/s).
pub const DEFAULT_RATE_MBIT: u32 = 1000;
/// The testbeds, one after the other: links, with one channel per link.
pub const LINKS: [usize; 2] = [1, 4];
/// The machine counts as quiet below this share of all CPUs busy.
const QUIET: f64 = 0.10;
/// How long binding the extra channels may take before the run gives up.
const BIND_WAIT: Duration = Duration::from_secs(30);
/// Names on `[plain]`.
const READ_FILE: &str = "qd-read";
const WRITE_FILE: &str = "qd-write";

/// Sizes and times of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Rate of every link, Mbit/s.
    pub rate_mbit: u32,
    /// Size of the file, bytes (a multiple of 4 KiB).
    pub size: u64,
    /// Repetitions of every point; the median is shown.
    pub reps: usize,
    /// Time at each point before the window opens.
    pub warmup: Duration,
    /// The measuring window of each point.
    pub window: Duration,
    /// How long to wait for the machine to be quiet before each testbed.
    pub wait_quiet: Duration,
}

impl Settings {
    /// 1 GiB, 3 repetitions, 5 s per point after 0.5 s of warm-up; with `quick` 256 MiB, one
    /// repetition, 1 s after 0.2 s. `rate`, `reps` and `size_mib` override.
    pub fn new(
        quick: bool,
        rate: Option<u32>,
        reps: Option<usize>,
        size_mib: Option<u64>,
        wait_quiet: Duration,
    ) -> Settings {
        Settings {
            rate_mbit: rate.unwrap_or(DEFAULT_RATE_MBIT),
            size: size_mib.unwrap_or(if quick { 256 } else { 1024 }).max(1) << 20,
            reps: reps.unwrap_or(if quick { 1 } else { 3 }).max(1),
            warmup: Duration::from_millis(if quick { 200 } else { 500 }),
            window: Duration::from_secs(if quick { 1 } else { 5 }),
            wait_quiet,
        }
    }

    fn blocks(&self) -> u64 {
        self.size / BLOCK as u64
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The measurements.
    pub sweep: Sweep,
    /// The testbeds, in order.
    pub setups: Vec<Setup>,
    /// Per testbed, the channels it measured over and the requests each carried.
    pub channel_notes: Vec<String>,
    /// The busiest the machine was before a testbed (share of all CPUs).
    pub busiest_before: f64,
    /// The read file's fingerprint.
    pub reference: Fingerprint,
}

/// Runs the sweep on every testbed of [`LINKS`].
pub fn run(settings: &Settings) -> Result<Outcome, String> {
    // Two copies of the file on the server's tmpfs.
    machine::check_memory(settings.size * 2)?;
    let mut sweep = Sweep::default();
    let mut setups = Vec::new();
    let mut channel_notes = Vec::new();
    let mut busiest_before: f64 = 0.0;
    let mut reference = None;
    for links in LINKS {
        let setup = Setup {
            links,
            rate_mbit: settings.rate_mbit,
        };
        busiest_before = busiest_before.max(wait_until_quiet(QUIET, settings.wait_quiet));
        let mut config = TestbedConfig::shaped(links, settings.rate_mbit);
        config.tmpfs_size = format!("{}m", (settings.size >> 20) * 2 + 256);
        eprintln!("smb-bench: testbed with {}", setup.label());
        let tb = Testbed::start(config).map_err(|e| format!("testbed: {e}"))?;
        let staged = Staged::on(&tb, settings)?;
        let note = sweep_testbed(&tb, setup, settings, &staged, &mut sweep)?;
        eprintln!("  {note}");
        channel_notes.push(note);
        setups.push(setup);
        reference = Some(staged.reference);
    }
    Ok(Outcome {
        sweep,
        setups,
        channel_notes,
        busiest_before,
        reference: reference.ok_or("no testbed ran")?,
    })
}

/// The two files of a testbed, written straight into the tmpfs behind `[plain]`.
struct Staged {
    read_host: PathBuf,
    write_host: PathBuf,
    reference: Fingerprint,
}

impl Staged {
    fn on(tb: &Testbed, settings: &Settings) -> Result<Staged, String> {
        let dir = tb.share_path("plain");
        let read_host = dir.join(READ_FILE);
        let write_host = dir.join(WRITE_FILE);
        let reference = data::write_pattern(&read_host, BIG_SEED, settings.size)?;
        std::fs::copy(&read_host, &write_host)
            .map_err(|e| format!("{}: {e}", write_host.display()))?;
        // smbd serves the share as the test user, who must be able to write the second file.
        tb.give_to_user(&read_host);
        tb.give_to_user(&write_host);
        Ok(Staged {
            read_host,
            write_host,
            reference,
        })
    }
}

/// Every point on one testbed, then the data checks. Returns the line about the channels.
fn sweep_testbed(
    tb: &Testbed,
    setup: Setup,
    settings: &Settings,
    staged: &Staged,
    sweep: &mut Sweep,
) -> Result<String, String> {
    let reference = Arc::new(ReadReference::open(&staged.read_host)?);
    let login = Login::to(tb);
    let smbd_pid = tb.smbd_pid();
    let owned = settings.clone();
    let rt = tb.client_runtime();
    let result = client_block_on(&rt, async move {
        let (client, share) = login.plain_share(one_channel_per_link()).await?;
        let channels = await_one_channel_per_link(&client, setup.links).await?;
        let reader = share
            .open(READ_FILE, &OpenOptions::new().read(true))
            .await
            .map_err(|e| format!("open {READ_FILE}: {e}"))?;
        let writer = share
            .open(WRITE_FILE, &OpenOptions::new().read(true).write(true))
            .await
            .map_err(|e| format!("open {WRITE_FILE}: {e}"))?;
        let before = client.channels();
        let measured = points(setup, &owned, &reader, &writer, &reference, smbd_pid).await;
        let after = client.channels();
        let _ = reader.close().await;
        let _ = writer.close().await;
        let _ = client.logoff().await;
        let (samples, written) = measured?;
        let note = channel_note(setup, &channels, &before, &after);
        Ok::<_, String>((samples, written, note))
    });
    drop(rt);
    let (samples, written, note) = result?;
    for (op, depth, sample) in samples {
        sweep.push(setup, op, depth, sample);
    }
    check::verify_written(&staged.write_host, BIG_SEED, settings.size, &written)?;
    data::verify(&staged.read_host, &staged.reference)?;
    eprintln!(
        "  data checked: every read matched; {} blocks written, the file on the server \
         verifies",
        written.count()
    );
    Ok(note)
}

/// The library's defaults, except one channel per link: the testbed advertises RSS, and the
/// default of 4 channels per RSS pair would put 16 channels on 4 links.
fn one_channel_per_link() -> ClientConfig {
    let mut cfg = ClientConfig::default();
    cfg.channels_per_rss_nic = 1;
    cfg.channels_per_nic = 1;
    cfg
}

/// Waits for binding to settle, then insists on exactly one active channel per link
/// (distinct server addresses). Returns the server address of each channel.
async fn await_one_channel_per_link(client: &Client, links: usize) -> Result<Vec<String>, String> {
    if !client.wait_for_channels(BIND_WAIT).await {
        return Err(format!(
            "the extra channels were not bound within {} s",
            BIND_WAIT.as_secs()
        ));
    }
    let active: Vec<_> = client
        .channels()
        .into_iter()
        .filter(|c| c.state == ChannelState::Active)
        .collect();
    let mut servers: Vec<String> = active.iter().map(|c| c.server.ip().to_string()).collect();
    servers.sort();
    servers.dedup();
    if active.len() != links || servers.len() != links {
        let status = client.multichannel();
        return Err(format!(
            "expected {links} active channel(s), one per link, but the client has {} over {} \
             server address(es) ({}); multichannel off because: {}",
            active.len(),
            servers.len(),
            servers.join(", "),
            status.off_reason.as_deref().unwrap_or("(it is on)")
        ));
    }
    Ok(servers)
}

/// What one testbed's points produced: (op, depth, sample) per point and repetition, and the
/// blocks written.
type Points = (Vec<(Op, usize, report::Sample)>, WrittenBlocks);

/// Every depth and operation, `reps` times; the repetitions outermost so a slow drift of the
/// machine hits every point alike.
async fn points(
    setup: Setup,
    settings: &Settings,
    reader: &File,
    writer: &File,
    reference: &Arc<ReadReference>,
    smbd_pid: u32,
) -> Result<Points, String> {
    let mut out = Vec::new();
    let mut written = WrittenBlocks::new(settings.blocks());
    for rep in 1..=settings.reps {
        for depth in DEPTHS {
            for op in Op::BOTH {
                crate::interrupt::check()?;
                let plan = PointPlan {
                    op,
                    depth,
                    // The same offsets on every testbed, other ones in every repetition.
                    seed: BIG_SEED ^ ((rep as u64) << 32) ^ ((depth as u64) << 8) ^ op as u64,
                    blocks: settings.blocks(),
                    warmup: settings.warmup,
                    window: settings.window,
                    smbd_pid,
                };
                let file = match op {
                    Op::Read => reader,
                    Op::Write => writer,
                };
                let (sample, offsets) = measure::run_point(file, reference, &plan).await?;
                for offset in offsets {
                    written.mark(offset);
                }
                eprintln!(
                    "  {} {op} QD {depth} #{rep}: {:.0} IOPS, median {:.0} µs, p99 {:.0} µs, \
                     CPU per op client {:.1} µs, smbd {:.1} µs, {:.2} CPUs busy",
                    setup.label(),
                    sample.iops,
                    sample.median_us,
                    sample.p99_us,
                    sample.client_us_per_op,
                    sample.smbd_us_per_op,
                    sample.cpus_busy
                );
                out.push((op, depth, sample));
            }
        }
    }
    Ok((out, written))
}

/// `4 channels (10.100.1.1, ...); requests per channel during the sweep: 1200 / 1180 / ...`
fn channel_note(
    setup: Setup,
    servers: &[String],
    before: &[smb3_client::ChannelInfo],
    after: &[smb3_client::ChannelInfo],
) -> String {
    let per_channel: Vec<String> = after
        .iter()
        .map(|a| {
            let earlier = before
                .iter()
                .find(|b| b.local == a.local && b.server == a.server)
                .map_or(0, |b| b.requests);
            format!(
                "{} -> {}: {}",
                a.local.ip(),
                a.server.ip(),
                a.requests - earlier
            )
        })
        .collect();
    format!(
        "{}: {} active channel(s) to {}; requests per channel during the sweep: {}",
        setup.label(),
        servers.len(),
        servers.join(", "),
        per_channel.join(", ")
    )
}

impl Outcome {
    /// The chart of IOPS against queue depth.
    pub fn chart_svg(&self, settings: &Settings) -> Result<String, String> {
        let title = format!(
            "4 KiB random I/O on a {} MiB file: IOPS against queue depth (median)",
            settings.size >> 20
        );
        report::chart(&self.sweep, &self.setups, &title).svg()
    }

    /// The generated Markdown: how it was measured, the targets, the table, the chart.
    pub fn section(&self, settings: &Settings, chart: Option<&Path>) -> String {
        let facts = Facts::collect();
        let command: Vec<String> = std::env::args().collect();
        let mut out = format!(
            "{measured}, commit {commit}.\n\
             Command: `{cmd}`; file {mib} MiB (sha256 {sha}), {reps} repetition(s), median \
             shown; {window:.1} s measured per point after {warmup:.1} s of warm-up. Before each \
             testbed the machine was at most {busy:.0} % busy.\n\n",
            measured = facts.measured_on(),
            commit = facts.commit,
            cmd = command.join(" "),
            mib = settings.size >> 20,
            sha = &self.reference.sha256[..16],
            reps = settings.reps,
            window = settings.window.as_secs_f64(),
            warmup = settings.warmup.as_secs_f64(),
            busy = self.busiest_before * 100.0,
        );
        let lines = report::target_lines(&self.sweep, &self.setups);
        if !lines.is_empty() {
            out.push_str(&format!("Targets:\n\n{}\n\n", lines.join("\n")));
        }
        out.push_str(&report::table(&self.sweep, &self.setups).markdown());
        out.push_str("\nChannels:\n\n");
        for note in &self.channel_notes {
            out.push_str(&format!("- {note}\n"));
        }
        if let Some(path) = chart {
            out.push_str(&format!(
                "\n![IOPS against queue depth, one channel and four]({})\n",
                path.display()
            ));
        }
        out
    }
}
