//! What the queue-depth sweep measured: a sample per point and repetition, medians, the
//! table, the target lines and the chart. Pure: tested with made-up samples.

use std::fmt;
use std::time::Duration;

use smb3_benches::stats::{median, min_max, percentile};
use smb3_benches::table::{num, Table};

use crate::chart::{BarChart, Frame};

/// The two kinds of operation, in the order measured and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// 4 KiB READs, each compared with the file.
    Read,
    /// 4 KiB WRITEs of a recomputable pattern.
    Write,
}

impl Op {
    pub(crate) const BOTH: [Op; 2] = [Op::Read, Op::Write];
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if *self == Op::Read { "read" } else { "write" })
    }
}

/// The queue depths of the sweep.
pub(crate) const DEPTHS: [usize; 5] = [1, 4, 16, 32, 64];

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
        let ops = latencies_us.len();
        let per_op = |cpu: Duration| {
            if ops == 0 {
                f64::NAN
            } else {
                cpu.as_secs_f64() * 1e6 / ops as f64
            }
        };
        Sample {
            iops: ops as f64 / window.as_secs_f64(),
            median_us: median(latencies_us).unwrap_or(f64::NAN),
            p99_us: percentile(latencies_us, 99.0).unwrap_or(f64::NAN),
            smbd_us_per_op: per_op(smbd),
            client_us_per_op: per_op(client),
            cpus_busy: (smbd + client).as_secs_f64() / window.as_secs_f64(),
        }
    }
}

/// One testbed: `links` links at `rate_mbit`, one channel per link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Setup {
    pub(crate) links: usize,
    pub(crate) rate_mbit: u32,
}

impl Setup {
    /// `1 x 1000 Mbit/s, 1 channel`.
    pub(crate) fn label(&self) -> String {
        let s = if self.links == 1 { "" } else { "s" };
        format!(
            "{} x {} Mbit/s, {} channel{s}",
            self.links, self.rate_mbit, self.links
        )
    }
}

/// Every repetition of one point.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    setup: Setup,
    op: Op,
    depth: usize,
    samples: Vec<Sample>,
}

impl Series {
    fn median_of(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        median(&self.samples.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    }

    fn iops(&self) -> f64 {
        self.median_of(|s| s.iops)
    }
}

/// Everything the sweep measured: a series per (setup, op, depth), in the order first
/// measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sweep(Vec<Series>);

impl Sweep {
    pub(crate) fn push(&mut self, setup: Setup, op: Op, depth: usize, sample: Sample) {
        match self
            .0
            .iter_mut()
            .find(|s| s.setup == setup && s.op == op && s.depth == depth)
        {
            Some(s) => s.samples.push(sample),
            None => self.0.push(Series {
                setup,
                op,
                depth,
                samples: vec![sample],
            }),
        }
    }

    fn find(&self, links: usize, op: Op, depth: usize) -> Option<&Series> {
        self.0
            .iter()
            .find(|s| s.setup.links == links && s.op == op && s.depth == depth)
    }

    /// Per setup, op and depth: median IOPS and range, against one channel at the same point,
    /// median latencies, the client's and smbd's CPU per op and the CPUs they kept busy.
    pub(crate) fn table(&self, setups: &[Setup]) -> Table {
        let mut t = Table::new(
            "links | op | >QD | >IOPS | >min-max | >x 1 channel | >median µs | >p99 µs |\
            >client CPU µs/op | >smbd CPU µs/op | >CPUs busy",
        );
        for setup in setups {
            for op in Op::BOTH {
                for s in self.0.iter().filter(|s| s.setup == *setup && s.op == op) {
                    let (lo, hi) = min_max(&s.samples.iter().map(|x| x.iops).collect::<Vec<_>>())
                        .unwrap_or((f64::NAN, f64::NAN));
                    let vs_one = match self.find(1, op, s.depth) {
                        Some(one) if setup.links != 1 => num(s.iops() / one.iops(), 2),
                        _ => "-".into(),
                    };
                    t.row(vec![
                        setup.label(),
                        op.to_string(),
                        s.depth.to_string(),
                        num(s.iops(), 0),
                        format!("{}-{}", num(lo, 0), num(hi, 0)),
                        vs_one,
                        num(s.median_of(|x| x.median_us), 0),
                        num(s.median_of(|x| x.p99_us), 0),
                        num(s.median_of(|x| x.client_us_per_op), 1),
                        num(s.median_of(|x| x.smbd_us_per_op), 1),
                        num(s.median_of(|x| x.cpus_busy), 2),
                    ]);
                }
            }
        }
        t
    }

    /// A line per target and op for every setup of more than one link: at QD 32 at least 2x
    /// one channel's IOPS, at QD 1 no fewer.
    pub(crate) fn target_lines(&self, setups: &[Setup]) -> Vec<String> {
        let mut lines = Vec::new();
        for setup in setups.iter().filter(|s| s.links > 1) {
            for (depth, wanted, what) in [(32, 2.0, "at least 2x"), (1, 1.0, "no slower than")] {
                for op in Op::BOTH {
                    let (Some(many), Some(one)) =
                        (self.find(setup.links, op, depth), self.find(1, op, depth))
                    else {
                        continue;
                    };
                    let r = many.iops() / one.iops();
                    lines.push(format!(
                        "- QD {depth}, {op}: {n} channels {many:.0} IOPS = {r:.2}x one channel ({one:.0} IOPS; median \
                         latency {ml:.0} µs against {ol:.0} µs): target \"{what} one channel\" {verdict}.",
                        n = setup.links,
                        many = many.iops(),
                        one = one.iops(),
                        ml = many.median_of(|x| x.median_us),
                        ol = one.median_of(|x| x.median_us),
                        verdict = if r >= wanted { "met" } else { "missed" },
                    ));
                }
            }
        }
        lines
    }

    /// Thousands of IOPS against queue depth: a panel per op, a group per depth, a bar per
    /// setup.
    pub(crate) fn chart(&self, setups: &[Setup], title: &str) -> BarChart {
        let panel = |op: Op| {
            let groups = DEPTHS.iter().map(|&depth| {
                let values = setups
                    .iter()
                    .map(|s| self.find(s.links, op, depth).map(|s| s.iops() / 1000.0));
                (format!("QD {depth}"), values.collect())
            });
            (op.to_string(), groups.collect())
        };
        BarChart {
            frame: Frame {
                title: title.into(),
                series: setups.iter().map(Setup::label).collect(),
                y_unit: "thousand IOPS".into(),
            },
            panels: Op::BOTH.map(panel).to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_table_and_chart_compare_four_channels_with_one() {
        let lat: Vec<f64> = (1..=200).map(f64::from).collect();
        let s = Sample::new(
            &lat,
            Duration::from_secs(2),
            (Duration::from_millis(10), Duration::from_millis(30)),
        );
        assert_eq!(
            [
                s.iops,
                s.median_us,
                s.p99_us,
                s.smbd_us_per_op,
                s.client_us_per_op,
                s.cpus_busy
            ],
            [100.0, 100.5, 198.0, 50.0, 150.0, 0.02]
        );
        assert!(Sample::new(
            &[],
            Duration::from_secs(1),
            (Duration::ZERO, Duration::ZERO)
        )
        .median_us
        .is_nan());
        let (one, four) = (
            Setup {
                links: 1,
                rate_mbit: 1000,
            },
            Setup {
                links: 4,
                rate_mbit: 1000,
            },
        );
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
        let lines = sw.target_lines(&[one, four]);
        assert!(
            lines[0].starts_with("- QD 32, read: 4 channels 25000 IOPS = 2.27x")
                && lines[0].ends_with("met."),
            "{lines:?}"
        );
        let verdicts: Vec<bool> = lines.iter().map(|l| l.ends_with(" met.")).collect();
        assert_eq!(verdicts, [true, false, false, true], "{lines:?}");
        assert!(sw.target_lines(&[one]).is_empty());
        let md = sw.table(&[one, four]).markdown();
        let rows: Vec<Vec<&str>> = md
            .lines()
            .skip(2)
            .map(|l| l.split('|').map(str::trim).collect())
            .collect();
        assert_eq!(
            rows[1][1..7],
            [
                "1 x 1000 Mbit/s, 1 channel",
                "read",
                "32",
                "11000",
                "10000-12000",
                "-"
            ],
            "{md}"
        );
        assert_eq!(
            rows[5][3..12],
            [
                "32",
                "25000",
                "25000-25000",
                "2.27",
                "100",
                "200",
                "20.0",
                "30.0",
                "1.50"
            ],
            "{md}"
        );
        let c = sw.chart(&[one, four], "t");
        assert_eq!(
            c.panels[0].1[3],
            ("QD 32".to_string(), vec![Some(11.0), Some(25.0)])
        );
        assert_eq!(c.panels[1].1[2].1, vec![None, None]);
    }
}
