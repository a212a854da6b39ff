//! What the queue-depth sweep measured, as numbers per point, medians over repetitions, the
//! table, the lines about the targets and the chart. Pure: filled in by the run,
//! tested with made-up samples.

use std::fmt;
use std::time::Duration;

use crate::chart::{BarChart, ChartFrame, Group, Panel};
use crate::results::{f0, f1, f2};
use crate::stats::{median, min_max, percentile};
use crate::table::Table;

/// The two kinds of operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// 4 KiB READs, each compared with the file.
    Read,
    /// 4 KiB WRITEs of a recomputable pattern.
    Write,
}

impl Op {
    /// Both, in the order they are measured and shown.
    pub const BOTH: [Op; 2] = [Op::Read, Op::Write];
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Read => "read",
            Op::Write => "write",
        })
    }
}

/// The queue depths of the sweep (from the issue).
pub const DEPTHS: [usize; 5] = [1, 4, 16, 32, 64];
/// At this depth several channels must give at least [`TARGET_DEEP_RATIO`] times the IOPS of
/// one.
pub const TARGET_DEEP_DEPTH: usize = 32;
/// The gain the issue asks of 4 channels over 1 at [`TARGET_DEEP_DEPTH`].
pub const TARGET_DEEP_RATIO: f64 = 2.0;
/// At queue depth 1 several channels must be no slower than one.
pub const TARGET_SHALLOW_RATIO: f64 = 1.0;

/// One measuring window of one point.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Operations completed inside the window.
    pub ops: usize,
    /// Those per second.
    pub iops: f64,
    /// Median latency, microseconds.
    pub median_us: f64,
    /// 99th-percentile latency, microseconds.
    pub p99_us: f64,
    /// smbd's CPU time over the window per operation, microseconds.
    pub smbd_us_per_op: f64,
    /// This process's CPU time (the library, and the bench's own checks) over the window per
    /// operation, microseconds.
    pub client_us_per_op: f64,
    /// CPUs the client and smbd kept busy together over the window: near the machine's CPU
    /// count, they and not the links are the limit.
    pub cpus_busy: f64,
}

/// CPU time used over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuUse {
    /// By smbd (every process of its tree).
    pub smbd: Duration,
    /// By the client (this process).
    pub client: Duration,
}

impl Sample {
    /// The sample of a window of length `window` in which operations took `latencies_us` and
    /// smbd and the client used `cpu`.
    pub fn new(latencies_us: &[f64], window: Duration, cpu: CpuUse) -> Sample {
        let ops = latencies_us.len();
        let per_op = |total: f64| {
            if ops == 0 {
                f64::NAN
            } else {
                total / ops as f64
            }
        };
        Sample {
            ops,
            iops: ops as f64 / window.as_secs_f64(),
            median_us: median(latencies_us).unwrap_or(f64::NAN),
            p99_us: percentile(latencies_us, 99.0).unwrap_or(f64::NAN),
            smbd_us_per_op: per_op(cpu.smbd.as_secs_f64() * 1e6),
            client_us_per_op: per_op(cpu.client.as_secs_f64() * 1e6),
            cpus_busy: (cpu.smbd + cpu.client).as_secs_f64() / window.as_secs_f64(),
        }
    }
}

/// One testbed of the sweep: `links` links at `rate_mbit`, one channel per link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// Links, and channels (one per link).
    pub links: usize,
    /// Rate of every link, Mbit/s.
    pub rate_mbit: u32,
}

impl Setup {
    /// `"1 x 1000 Mbit/s, 1 channel"`, `"4 x 1000 Mbit/s, 4 channels"`.
    pub fn label(&self) -> String {
        format!(
            "{} x {} Mbit/s, {} channel{}",
            self.links,
            self.rate_mbit,
            self.links,
            if self.links == 1 { "" } else { "s" }
        )
    }
}

/// Every repetition of one point.
#[derive(Debug, Clone)]
pub struct Series {
    /// Where.
    pub setup: Setup,
    /// What.
    pub op: Op,
    /// Operations in flight.
    pub depth: usize,
    /// One per repetition.
    pub samples: Vec<Sample>,
}

impl Series {
    fn median_of(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        let v: Vec<f64> = self.samples.iter().map(f).collect();
        median(&v).unwrap_or(f64::NAN)
    }

    /// Median IOPS over the repetitions.
    pub fn iops(&self) -> f64 {
        self.median_of(|s| s.iops)
    }

    /// Lowest and highest IOPS over the repetitions.
    pub fn iops_range(&self) -> (f64, f64) {
        let v: Vec<f64> = self.samples.iter().map(|s| s.iops).collect();
        min_max(&v).unwrap_or((f64::NAN, f64::NAN))
    }
}

/// Everything the sweep measured.
#[derive(Debug, Clone, Default)]
pub struct Sweep {
    /// One per (setup, op, depth), in the order first measured.
    pub series: Vec<Series>,
}

impl Sweep {
    /// Adds one repetition's sample of a point.
    pub fn push(&mut self, setup: Setup, op: Op, depth: usize, sample: Sample) {
        match self
            .series
            .iter_mut()
            .find(|s| s.setup == setup && s.op == op && s.depth == depth)
        {
            Some(s) => s.samples.push(sample),
            None => self.series.push(Series {
                setup,
                op,
                depth,
                samples: vec![sample],
            }),
        }
    }

    /// The series of a point, if measured.
    pub fn find(&self, links: usize, op: Op, depth: usize) -> Option<&Series> {
        self.series
            .iter()
            .find(|s| s.setup.links == links && s.op == op && s.depth == depth)
    }
}

/// `a / b` with three decimals, `-` when either is missing.
fn ratio_cell(a: f64, b: f64) -> String {
    let r = a / b;
    if r.is_finite() {
        format!("{r:.2}")
    } else {
        "-".into()
    }
}

/// The table: per setup, operation and depth, median IOPS (and range), the ratio to one
/// channel at the same point, median latencies, the client's and smbd's CPU per operation
/// and the CPUs they kept busy together.
pub fn table(sweep: &Sweep, setups: &[Setup]) -> Table {
    let mut t = Table::new(&[
        "links",
        "op",
        ">QD",
        ">IOPS",
        ">min-max",
        ">x 1 channel",
        ">median µs",
        ">p99 µs",
        ">client CPU µs/op",
        ">smbd CPU µs/op",
        ">CPUs busy",
    ]);
    for setup in setups {
        for op in Op::BOTH {
            for s in sweep
                .series
                .iter()
                .filter(|s| s.setup == *setup && s.op == op)
            {
                let (lo, hi) = s.iops_range();
                let vs_one = match sweep.find(1, op, s.depth) {
                    Some(one) if setup.links != 1 => ratio_cell(s.iops(), one.iops()),
                    _ => "-".into(),
                };
                t.row(vec![
                    setup.label(),
                    op.to_string(),
                    s.depth.to_string(),
                    f0(s.iops()),
                    format!("{}-{}", f0(lo), f0(hi)),
                    vs_one,
                    f0(s.median_of(|x| x.median_us)),
                    f0(s.median_of(|x| x.p99_us)),
                    f1(s.median_of(|x| x.client_us_per_op)),
                    f1(s.median_of(|x| x.smbd_us_per_op)),
                    f2(s.median_of(|x| x.cpus_busy)),
                ]);
            }
        }
    }
    t
}

/// One line per target of the issue and operation, for every setup with more than one link:
/// at QD 32 at least 2x one channel's IOPS, at QD 1 no fewer than one channel's.
pub fn target_lines(sweep: &Sweep, setups: &[Setup]) -> Vec<String> {
    let mut lines = Vec::new();
    for setup in setups.iter().filter(|s| s.links > 1) {
        for (depth, wanted, what) in [
            (TARGET_DEEP_DEPTH, TARGET_DEEP_RATIO, "at least 2x"),
            (1, TARGET_SHALLOW_RATIO, "no slower than"),
        ] {
            for op in Op::BOTH {
                let (Some(many), Some(one)) =
                    (sweep.find(setup.links, op, depth), sweep.find(1, op, depth))
                else {
                    continue;
                };
                let r = many.iops() / one.iops();
                let verdict = if r >= wanted { "met" } else { "missed" };
                lines.push(format!(
                    "- QD {depth}, {op}: {n} channels {many:.0} IOPS = {r:.2}x one channel \
                     ({one:.0} IOPS; median latency {ml:.0} µs against {ol:.0} µs): target \
                     \"{what} one channel\" {verdict}.",
                    n = setup.links,
                    many = many.iops(),
                    one = one.iops(),
                    ml = many.median_of(|x| x.median_us),
                    ol = one.median_of(|x| x.median_us),
                ));
            }
        }
    }
    lines
}

/// IOPS (thousands) against queue depth: a read and a write panel, a group per depth, a bar
/// per setup.
pub fn chart(sweep: &Sweep, setups: &[Setup], title: &str) -> BarChart {
    let panel = |op: Op| Panel {
        title: op.to_string(),
        groups: DEPTHS
            .iter()
            .map(|&depth| Group {
                label: format!("QD {depth}"),
                values: setups
                    .iter()
                    .map(|setup| {
                        sweep
                            .find(setup.links, op, depth)
                            .map(|s| s.iops() / 1000.0)
                    })
                    .collect(),
            })
            .collect(),
    };
    BarChart {
        frame: ChartFrame {
            title: title.into(),
            series: setups.iter().map(Setup::label).collect(),
            y_unit: "thousand IOPS".into(),
        },
        panels: Op::BOTH.into_iter().map(panel).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: Setup = Setup {
        links: 1,
        rate_mbit: 1000,
    };
    const FOUR: Setup = Setup {
        links: 4,
        rate_mbit: 1000,
    };

    fn sample(iops: f64, median_us: f64) -> Sample {
        Sample {
            ops: iops as usize,
            iops,
            median_us,
            p99_us: median_us * 2.0,
            smbd_us_per_op: 30.0,
            client_us_per_op: 20.0,
            cpus_busy: 1.5,
        }
    }

    #[test]
    fn sample_counts_ops_in_the_window() {
        let lat: Vec<f64> = (1..=200).map(f64::from).collect();
        let cpu = CpuUse {
            smbd: Duration::from_millis(10),
            client: Duration::from_millis(30),
        };
        let s = Sample::new(&lat, Duration::from_secs(2), cpu);
        assert_eq!(s.ops, 200);
        assert_eq!(s.iops, 100.0);
        assert_eq!(s.median_us, 100.5);
        assert_eq!(s.p99_us, 198.0);
        assert_eq!(s.smbd_us_per_op, 50.0);
        assert_eq!(s.client_us_per_op, 150.0);
        assert_eq!(s.cpus_busy, 0.02);
        let empty = Sample::new(&[], Duration::from_secs(1), CpuUse::default());
        assert_eq!(empty.iops, 0.0);
        assert!(empty.median_us.is_nan() && empty.smbd_us_per_op.is_nan());
        assert_eq!(empty.cpus_busy, 0.0);
    }

    #[test]
    fn repetitions_gather_under_their_point_and_give_medians() {
        let mut sw = Sweep::default();
        for iops in [300.0, 100.0, 200.0] {
            sw.push(ONE, Op::Read, 4, sample(iops, 10.0));
        }
        sw.push(ONE, Op::Write, 4, sample(50.0, 10.0));
        assert_eq!(sw.series.len(), 2);
        let s = sw.find(1, Op::Read, 4).unwrap();
        assert_eq!(s.iops(), 200.0);
        assert_eq!(s.iops_range(), (100.0, 300.0));
        assert!(sw.find(4, Op::Read, 4).is_none());
    }

    fn sweep() -> Sweep {
        let mut sw = Sweep::default();
        for op in Op::BOTH {
            sw.push(ONE, op, 1, sample(2000.0, 480.0));
            sw.push(ONE, op, 32, sample(10_000.0, 3000.0));
            // Reads: 4 channels lose at QD 1 and gain 2.5x at QD 32; writes: the other way.
            let (qd1, qd32) = match op {
                Op::Read => (1900.0, 25_000.0),
                Op::Write => (2000.0, 19_990.0),
            };
            sw.push(FOUR, op, 1, sample(qd1, 500.0));
            sw.push(FOUR, op, 32, sample(qd32, 1200.0));
        }
        sw
    }

    #[test]
    fn targets_compare_four_channels_with_one() {
        let lines = target_lines(&sweep(), &[ONE, FOUR]);
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(lines[0].starts_with("- QD 32, read: 4 channels 25000 IOPS = 2.50x"));
        assert!(lines[0].ends_with("met."), "{}", lines[0]);
        // 1.999x is not 2x.
        assert!(lines[1].contains("QD 32, write") && lines[1].ends_with("missed."));
        assert!(lines[2].contains("QD 1, read") && lines[2].ends_with("missed."));
        // Equal IOPS at QD 1 is "no slower".
        assert!(lines[3].contains("QD 1, write") && lines[3].ends_with("met."));
        // Nothing to compare without a multi-link setup.
        assert!(target_lines(&sweep(), &[ONE]).is_empty());
    }

    #[test]
    fn table_rows_carry_the_ratio_to_one_channel() {
        let md = table(&sweep(), &[ONE, FOUR]).markdown();
        let rows: Vec<Vec<&str>> = md
            .lines()
            .skip(2)
            .map(|l| l.split('|').map(str::trim).collect())
            .collect();
        assert_eq!(rows.len(), 8, "{md}");
        assert_eq!(
            rows[0][1..7],
            [
                "1 x 1000 Mbit/s, 1 channel",
                "read",
                "1",
                "2000",
                "2000-2000",
                "-"
            ]
        );
        let four_read_32 = &rows[5];
        assert_eq!(
            four_read_32[1..7],
            [
                "4 x 1000 Mbit/s, 4 channels",
                "read",
                "32",
                "25000",
                "25000-25000",
                "2.50"
            ]
        );
        assert_eq!(
            four_read_32[7..12],
            ["1200", "2400", "20.0", "30.0", "1.50"]
        );
    }

    #[test]
    fn chart_has_a_bar_per_setup_at_every_depth() {
        let c = chart(&sweep(), &[ONE, FOUR], "t");
        assert_eq!(c.panels.len(), 2);
        assert_eq!(c.panels[0].title, "read");
        assert_eq!(c.panels[0].groups.len(), DEPTHS.len());
        let qd32 = &c.panels[0].groups[3];
        assert_eq!(qd32.label, "QD 32");
        assert_eq!(qd32.values, vec![Some(10.0), Some(25.0)]);
        // Depths not measured have no bars.
        assert_eq!(c.panels[1].groups[1].values, vec![None, None]);
        assert!(c.svg().unwrap().contains("4 x 1000 Mbit/s, 4 channels"));
    }
}
