//! `smb-bench queue-depth`: 4 KiB reads and writes at random aligned offsets of a file with
//! exactly QD operations in flight, for QD 1 to 64, on one link with one channel and on four
//! links with one channel each. The library runs in-process on a runtime in the client
//! namespace, so what is measured is its request path, not a tool's start-up; before
//! measuring, the client must show one active channel per link. Every read and the written
//! file are verified ([`point`]). The `queue-depth` section of docs/PERFORMANCE.md and its
//! chart.

mod point;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use smb3_benches::data::{self, Fingerprint, BIG_SEED};
use smb3_benches::session::connect_plain;
use smb3_benches::stats::{median, min_max, percentile};
use smb3_benches::table::{num, range, Table};
use smb3_benches::Context;
use smb3_client::{ChannelInfo, ChannelState, Client, ClientConfig, OpenOptions};
use smb3_tests::{client_block_on, Testbed};

use crate::bench::LinkSetup;
use crate::chart::{BarChart, Frame};
use crate::machine::{check_memory, Facts};
use crate::Common;
use point::{PointPlan, BLOCK};

/// How long binding the extra channels may take.
const BIND_WAIT: Duration = Duration::from_secs(30);
/// Names on `[plain]`.
const READ_FILE: &str = "qd-read";
const WRITE_FILE: &str = "qd-write";
/// The queue depths of the sweep.
const DEPTHS: [usize; 5] = [1, 4, 16, 32, 64];

/// The two kinds of operation, in the order measured and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// 4 KiB READs, each compared with the file.
    Read,
    /// 4 KiB WRITEs of a recomputable pattern.
    Write,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if *self == Op::Read { "read" } else { "write" })
    }
}

/// The links of a testbed, one channel each: `1 x 1000 Mbit/s, 1 channel`.
fn label(setup: &LinkSetup) -> String {
    let s = if setup.links == 1 { "" } else { "s" };
    format!("{}, {} channel{s}", setup.label(), setup.links)
}

/// Sizes and times of a run.
#[derive(Debug, Clone)]
struct Settings {
    size: u64,
    reps: usize,
    warmup: Duration,
    window: Duration,
}

pub(crate) fn run(common: &Common) -> Result<(), String> {
    let settings = Settings {
        size: common.size(1024, 256),
        reps: common.reps(3),
        warmup: Duration::from_millis(if common.quick { 200 } else { 500 }),
        window: Duration::from_secs(if common.quick { 1 } else { 5 }),
    };
    // Two copies of the file on the server's tmpfs.
    check_memory(settings.size * 2)?;
    let (mut sweep, mut notes, mut busy, mut reference) =
        (Sweep::default(), Vec::new(), Vec::new(), None);
    let setups = [1, 4].map(|links| LinkSetup::shaped(links, common.rate(1000)));
    for setup in &setups {
        busy.push(common.quiet());
        let tb = setup.start((settings.size >> 20) * 2 + 256, "")?;
        let note = sweep_testbed(&tb, setup, &settings, &mut sweep, &mut reference)?;
        eprintln!("  {note}");
        notes.push(note);
    }
    let reference = reference.ok_or("no testbed ran")?;
    let what = format!(
        "file {} MiB (sha256 {}), {} repetition(s), median shown; {:.1} s measured per point after {:.1} s of warm-up",
        settings.size >> 20,
        &reference.sha256[..16],
        settings.reps,
        settings.window.as_secs_f64(),
        settings.warmup.as_secs_f64(),
    );
    let mut body = Facts::collect().header(false, &what, &busy, None);
    let lines = sweep.target_lines();
    if !lines.is_empty() {
        body.push_str(&format!("Targets:\n\n{}\n\n", lines.join("\n")));
    }
    body.push_str(&sweep.table().markdown());
    body.push_str("\nChannels:\n\n");
    for note in &notes {
        body.push_str(&format!("- {note}\n"));
    }
    let title = format!(
        "4 KiB random I/O on a {} MiB file: IOPS against queue depth (median)",
        settings.size >> 20
    );
    let alt = "IOPS against queue depth, one channel and four";
    body.push_str(&common.chart("queue-depth.svg", alt, || {
        sweep.chart(&setups, &title).svg()
    })?);
    common.publish(
        "queue-depth",
        Some("## Small random I/O and queue depth"),
        &body,
    )
}

/// Every point on one testbed, then the data checks; the line about the channels.
fn sweep_testbed(
    tb: &Testbed,
    setup: &LinkSetup,
    settings: &Settings,
    sweep: &mut Sweep,
    reference: &mut Option<Fingerprint>,
) -> Result<String, String> {
    // Both files written straight into the tmpfs behind `[plain]`, given to the test user who
    // writes the second.
    let dir = tb.share_path("plain");
    let (read_host, write_host) = (dir.join(READ_FILE), dir.join(WRITE_FILE));
    let fingerprint = data::write_pattern(&read_host, BIG_SEED, settings.size)?;
    std::fs::copy(&read_host, &write_host).ctx(write_host.display())?;
    tb.give_to_user(&read_host);
    tb.give_to_user(&write_host);
    let host = Arc::new(std::fs::File::open(&read_host).ctx(read_host.display())?);
    // The library's defaults but one channel per link: the testbed advertises RSS, and 4
    // channels per RSS pair would put 16 on 4 links.
    let mut cfg = ClientConfig::default();
    (cfg.channels_per_rss_nic, cfg.channels_per_nic) = (1, 1);
    let (connect, smbd_pid, owned, links) = (
        connect_plain(tb, cfg),
        tb.smbd_pid(),
        settings.clone(),
        setup.links,
    );
    let label = label(setup);
    let rt = tb.client_runtime();
    let (samples, written, note) = client_block_on(&rt, async move {
        let (client, share) = connect.await?;
        let servers = one_channel_per_link(&client, links).await?;
        let open = |name: &'static str, write: bool| {
            let share = share.clone();
            async move {
                let how = OpenOptions::new().read(true).write(write);
                share.open(name, &how).await.ctx(format!("open {name}"))
            }
        };
        let (reader, writer) = (open(READ_FILE, false).await?, open(WRITE_FILE, true).await?);
        let before = client.channels();
        let blocks = owned.size / BLOCK as u64;
        let (mut samples, mut written) = (Vec::new(), vec![false; blocks as usize]);
        // The repetitions outermost, so a slow drift of the machine hits every point alike.
        let measured: Result<(), String> = async {
            for rep in 1..=owned.reps {
                for depth in DEPTHS {
                    for op in [Op::Read, Op::Write] {
                        crate::child::check()?;
                        let plan = PointPlan {
                            op,
                            depth,
                            // The same offsets on every testbed, other ones every repetition.
                            seed: BIG_SEED ^ ((rep as u64) << 32) ^ ((depth as u64) << 8) ^ op as u64,
                            blocks,
                            warmup: owned.warmup,
                            window: owned.window,
                            smbd_pid,
                        };
                        let file = if op == Op::Read { &reader } else { &writer };
                        let (sample, blocks) = point::run_point(file, &host, &plan).await?;
                        for b in blocks {
                            written[b as usize] = true;
                        }
                        eprintln!(
                            "  {label} {op} QD {depth} #{rep}: {:.0} IOPS, median {:.0} µs, p99 {:.0} µs, CPU per op \
                             client {:.1} µs, smbd {:.1} µs, {:.2} CPUs busy",
                            sample.iops,
                            sample.median_us,
                            sample.p99_us,
                            sample.client_us_per_op,
                            sample.smbd_us_per_op,
                            sample.cpus_busy
                        );
                        samples.push((op, depth, sample));
                    }
                }
            }
            Ok(())
        }
        .await;
        let note = channel_note(&label, &servers, &before, &client.channels());
        let _ = reader.close().await;
        let _ = writer.close().await;
        let _ = client.logoff().await;
        measured.map(|()| (samples, written, note))
    })?;
    drop(rt);
    for (op, depth, sample) in samples {
        sweep.push(*setup, op, depth, sample);
    }
    point::verify_written(&write_host, BIG_SEED, settings.size, &written)?;
    data::verify(&read_host, &fingerprint)?;
    let count = written.iter().filter(|w| **w).count();
    eprintln!("  data checked: every read matched; {count} blocks written, the file on the server verifies");
    *reference = Some(fingerprint);
    Ok(note)
}

/// Waits for binding to settle, then insists on exactly one active channel per link
/// (distinct server addresses); their server addresses.
async fn one_channel_per_link(client: &Client, links: usize) -> Result<Vec<String>, String> {
    if !client.wait_for_channels(BIND_WAIT).await {
        return Err(format!(
            "the extra channels were not bound within {} s",
            BIND_WAIT.as_secs()
        ));
    }
    let channels = client.channels();
    let active: Vec<_> = channels
        .iter()
        .filter(|c| c.state == ChannelState::Active)
        .collect();
    let mut servers: Vec<String> = active.iter().map(|c| c.server.ip().to_string()).collect();
    servers.sort();
    servers.dedup();
    if active.len() == links && servers.len() == links {
        return Ok(servers);
    }
    Err(format!(
        "expected {links} active channel(s), one per link, but the client has {} over {} server address(es) ({}); \
         multichannel off because: {}",
        active.len(),
        servers.len(),
        servers.join(", "),
        client.multichannel().off_reason.as_deref().unwrap_or("(it is on)")
    ))
}

/// `4 x 1000 Mbit/s, 4 channels: 4 active channel(s) to ...; requests per channel during the
/// sweep: 10.1.1.2 -> 10.1.1.1: 1200, ...`
fn channel_note(
    label: &str,
    servers: &[String],
    before: &[ChannelInfo],
    after: &[ChannelInfo],
) -> String {
    let per_channel: Vec<String> = (after.iter())
        .map(|a| {
            let same = |b: &&ChannelInfo| b.local == a.local && b.server == a.server;
            let earlier = before.iter().find(same).map_or(0, |b| b.requests);
            format!(
                "{} -> {}: {}",
                a.local.ip(),
                a.server.ip(),
                a.requests - earlier
            )
        })
        .collect();
    format!(
        "{label}: {} active channel(s) to {}; requests per channel during the sweep: {}",
        servers.len(),
        servers.join(", "),
        per_channel.join(", ")
    )
}

/// One measuring window of one point.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) iops: f64,
    pub(crate) median_us: f64,
    pub(crate) p99_us: f64,
    /// smbd's CPU time over the window per operation, µs.
    pub(crate) smbd_us_per_op: f64,
    /// This process's (the library and the bench's own checks), µs.
    pub(crate) client_us_per_op: f64,
    /// CPUs the client and smbd kept busy together: near the machine's count, they and not
    /// the links are the limit.
    pub(crate) cpus_busy: f64,
}

impl Sample {
    /// A window of `window` in which operations took `latencies_us` and smbd and the client
    /// used `(smbd, client)` CPU.
    pub(crate) fn new(
        latencies_us: &[f64],
        window: Duration,
        (smbd, client): (Duration, Duration),
    ) -> Sample {
        let ops = latencies_us.len() as f64;
        let per_op = |cpu: Duration| cpu.as_secs_f64() * 1e6 / ops;
        Sample {
            iops: ops / window.as_secs_f64(),
            median_us: median(latencies_us.iter().copied()),
            p99_us: percentile(latencies_us.iter().copied(), 99.0),
            smbd_us_per_op: per_op(smbd),
            client_us_per_op: per_op(client),
            cpus_busy: (smbd + client).as_secs_f64() / window.as_secs_f64(),
        }
    }
}

/// Every repetition of a point: its links, op and depth.
type Series = ((LinkSetup, Op, usize), Vec<Sample>);

fn median_of(s: &Series, f: impl Fn(&Sample) -> f64) -> f64 {
    median(s.1.iter().map(f))
}

fn iops(s: &Series) -> f64 {
    median_of(s, |x| x.iops)
}

/// Everything the sweep measured, a series per point in the order first measured.
#[derive(Debug, Clone, Default)]
struct Sweep(Vec<Series>);

impl Sweep {
    fn push(&mut self, setup: LinkSetup, op: Op, depth: usize, sample: Sample) {
        match self.0.iter_mut().find(|s| s.0 == (setup, op, depth)) {
            Some(s) => s.1.push(sample),
            None => self.0.push(((setup, op, depth), vec![sample])),
        }
    }

    /// The point of `op` at `depth` with `links` links.
    fn find(&self, links: usize, op: Op, depth: usize) -> Option<&Series> {
        self.0
            .iter()
            .find(|((setup, o, d), _)| setup.links == links && (*o, *d) == (op, depth))
    }

    /// Per setup, op and depth: median IOPS and range, against one channel at the same point,
    /// median latencies, the client's and smbd's CPU per op and the CPUs they kept busy.
    fn table(&self) -> Table {
        let mut rows: Vec<&Series> = self.0.iter().collect();
        rows.sort_by_key(|((setup, op, _), _)| (setup.links, *op == Op::Write));
        let x_one = |s: &&Series| match self.find(1, s.0 .1, s.0 .2) {
            Some(one) if s.0 .0.links != 1 => num(iops(s) / iops(one), 2),
            _ => "-".into(),
        };
        Table::of(
            rows,
            &[
                ("links", &|s| label(&s.0 .0)),
                ("op", &|s| s.0 .1.to_string()),
                (">QD", &|s| s.0 .2.to_string()),
                (">IOPS", &|s| num(iops(s), 0)),
                (">min-max", &|s| {
                    range(min_max(s.1.iter().map(|x| x.iops)), 0)
                }),
                (">x 1 channel", &x_one),
                (">median µs", &|s| num(median_of(s, |x| x.median_us), 0)),
                (">p99 µs", &|s| num(median_of(s, |x| x.p99_us), 0)),
                (">client CPU µs/op", &|s| {
                    num(median_of(s, |x| x.client_us_per_op), 1)
                }),
                (">smbd CPU µs/op", &|s| {
                    num(median_of(s, |x| x.smbd_us_per_op), 1)
                }),
                (">CPUs busy", &|s| num(median_of(s, |x| x.cpus_busy), 2)),
            ],
        )
    }

    /// A line per target and op for every setup of more than one link: at QD 32 at least 2x
    /// one channel's IOPS, at QD 1 no fewer.
    fn target_lines(&self) -> Vec<String> {
        let mut setups: Vec<LinkSetup> = self
            .0
            .iter()
            .map(|s| s.0 .0)
            .filter(|s| s.links > 1)
            .collect();
        setups.dedup();
        let mut lines = Vec::new();
        for setup in setups {
            for (depth, wanted, what) in [(32, 2.0, "at least 2x"), (1, 1.0, "no slower than")] {
                for op in [Op::Read, Op::Write] {
                    let (Some(many), Some(one)) =
                        (self.find(setup.links, op, depth), self.find(1, op, depth))
                    else {
                        continue;
                    };
                    let r = iops(many) / iops(one);
                    lines.push(format!(
                        "- QD {depth}, {op}: {n} channels {many:.0} IOPS = {r:.2}x one channel ({one:.0} IOPS; median \
                         latency {ml:.0} µs against {ol:.0} µs): target \"{what} one channel\" {verdict}.",
                        n = setup.links,
                        many = iops(many),
                        one = iops(one),
                        ml = median_of(many, |x| x.median_us),
                        ol = median_of(one, |x| x.median_us),
                        verdict = if r >= wanted { "met" } else { "missed" },
                    ));
                }
            }
        }
        lines
    }

    /// Thousands of IOPS against queue depth: a panel per op, a group per depth, a bar per
    /// setup.
    fn chart(&self, setups: &[LinkSetup], title: &str) -> BarChart {
        let panel = |op: Op| {
            let groups = DEPTHS.iter().map(|&depth| {
                let values = setups
                    .iter()
                    .map(|s| self.find(s.links, op, depth).map(|s| iops(s) / 1000.0));
                (format!("QD {depth}"), values.collect())
            });
            (op.to_string(), groups.collect())
        };
        let series = setups.iter().map(label).collect();
        BarChart {
            frame: Frame {
                title: title.into(),
                series,
                y_unit: "thousand IOPS".into(),
            },
            panels: [Op::Read, Op::Write].map(panel).to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb3_benches::table::cells;

    #[test]
    fn targets_table_and_chart_compare_four_channels_with_one() {
        let lat: Vec<f64> = (1..=200).map(f64::from).collect();
        let ms = Duration::from_millis;
        let s = Sample::new(&lat, Duration::from_secs(2), (ms(10), ms(30)));
        let got = [
            s.iops,
            s.median_us,
            s.p99_us,
            s.smbd_us_per_op,
            s.client_us_per_op,
            s.cpus_busy,
        ];
        assert_eq!(got, [100.0, 100.5, 198.0, 50.0, 150.0, 0.02]);
        assert!(Sample::new(&[], Duration::from_secs(1), (ms(0), ms(0)))
            .median_us
            .is_nan());
        let (one, four) = (LinkSetup::shaped(1, 1000), LinkSetup::shaped(4, 1000));
        let sample = |iops: f64| Sample {
            iops,
            median_us: 100.0,
            p99_us: 200.0,
            smbd_us_per_op: 30.0,
            client_us_per_op: 20.0,
            cpus_busy: 1.5,
        };
        // Reads: four channels lose at QD 1 and gain 2.5x at QD 32; writes just miss 2x.
        let mut sw = Sweep::default();
        for (op, qd1, qd32) in [(Op::Read, 1900.0, 25_000.0), (Op::Write, 2000.0, 19_990.0)] {
            sw.push(one, op, 1, sample(2000.0));
            sw.push(one, op, 32, sample(10_000.0));
            sw.push(four, op, 1, sample(qd1));
            sw.push(four, op, 32, sample(qd32));
        }
        sw.push(one, Op::Read, 32, sample(12_000.0));
        let lines = sw.target_lines();
        assert!(
            lines[0].starts_with("- QD 32, read: 4 channels 25000 IOPS = 2.27x"),
            "{lines:?}"
        );
        let verdicts: Vec<bool> = lines.iter().map(|l| l.ends_with(" met.")).collect();
        assert_eq!(verdicts, [true, false, false, true], "{lines:?}");
        let rows = cells(&sw.table().markdown());
        assert_eq!(
            rows[1][..6],
            [
                "1 x 1000 Mbit/s, 1 channel",
                "read",
                "32",
                "11000",
                "10000-12000",
                "-"
            ]
        );
        let want = [
            "32",
            "25000",
            "25000-25000",
            "2.27",
            "100",
            "200",
            "20.0",
            "30.0",
            "1.50",
        ];
        assert_eq!(rows[5][2..], want);
        let c = sw.chart(&[one, four], "t");
        assert_eq!(
            c.panels[0].1[3],
            ("QD 32".to_string(), vec![Some(11.0), Some(25.0)])
        );
        assert_eq!(c.panels[1].1[2].1, vec![None, None]);
    }
}
