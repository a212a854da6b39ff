//! What a run measured, and the tables made from it.

use crate::latency::Latency;
use crate::stats::{median, min_max};
use crate::table::Table;
use crate::transfer::{Direction, Sample, ShareKind, SmbcpReport};

/// Raw TCP goodput of one link in one direction (iperf3 receiver rate).
#[derive(Debug, Clone)]
pub struct RawTcp {
    /// Link label, e.g. "1 Gbit/s".
    pub link: String,
    /// Download = server to client (`iperf3 -R`).
    pub direction: Direction,
    /// One value per repetition, Mbit/s.
    pub mbit: Vec<f64>,
}

impl RawTcp {
    /// Median in MB/s (10^6 bytes per second).
    pub fn mb_per_s(&self) -> f64 {
        median(&self.mbit).unwrap_or(f64::NAN) / 8.0
    }
}

/// Repeated runs of one client, link, share and direction.
#[derive(Debug, Clone)]
pub struct Series {
    /// Link label.
    pub link: String,
    /// Share.
    pub share: ShareKind,
    /// Direction.
    pub direction: Direction,
    /// Client name ("smbcp", "smbclient").
    pub tool: String,
    /// Extra description of the client's settings (sweep), empty for defaults.
    pub settings: String,
    /// One sample per repetition.
    pub samples: Vec<Sample>,
    /// smbcp's own report of each repetition (`None` for smbclient), index-aligned with
    /// `samples`.
    pub reports: Vec<Option<SmbcpReport>>,
}

impl Series {
    fn values(&self, f: impl Fn(&Sample) -> f64) -> Vec<f64> {
        self.samples.iter().map(f).collect()
    }

    /// Median throughput, MB/s.
    pub fn mb_per_s(&self) -> f64 {
        median(&self.values(Sample::mb_per_s)).unwrap_or(f64::NAN)
    }

    /// Lowest and highest throughput, MB/s.
    pub fn range(&self) -> (f64, f64) {
        min_max(&self.values(Sample::mb_per_s)).unwrap_or((f64::NAN, f64::NAN))
    }

    /// Median client CPU seconds per GiB.
    pub fn client_cpu_per_gib(&self) -> f64 {
        median(&self.values(|s| s.per_gib(s.client_cpu))).unwrap_or(f64::NAN)
    }

    /// The highest peak resident set of the client over the repetitions, MiB.
    pub fn client_max_rss_mib(&self) -> f64 {
        self.samples
            .iter()
            .map(|s| s.client_max_rss as f64 / f64::from(1 << 20))
            .fold(f64::NAN, f64::max)
    }

    /// Median smbd CPU seconds per GiB.
    pub fn server_cpu_per_gib(&self) -> f64 {
        median(&self.values(|s| s.per_gib(s.server_cpu))).unwrap_or(f64::NAN)
    }

    /// Median number of CPUs the machine kept busy.
    pub fn machine_cpus(&self) -> f64 {
        median(&self.values(Sample::machine_cpus)).unwrap_or(f64::NAN)
    }

    /// smbcp's report of the repetition with the median throughput (the lower of the middle
    /// two for an even count), if there is one.
    pub fn median_report(&self) -> Option<&SmbcpReport> {
        let mut order: Vec<usize> = (0..self.samples.len()).collect();
        order.sort_by(|&a, &b| {
            self.samples[a]
                .mb_per_s()
                .total_cmp(&self.samples[b].mb_per_s())
        });
        let middle = *order.get(order.len().checked_sub(1)? / 2)?;
        self.reports.get(middle)?.as_ref()
    }

    /// Median throughput by smbcp's own clock (copy only: from the first open to the last
    /// close, after connecting), MB/s; NaN without reports.
    pub fn copy_mb_per_s(&self) -> f64 {
        let values: Vec<f64> = self
            .samples
            .iter()
            .zip(&self.reports)
            .filter_map(|(s, r)| {
                r.as_ref()
                    .filter(|r| r.copy_seconds > 0.0)
                    .map(|r| s.bytes as f64 / r.copy_seconds / 1e6)
            })
            .collect();
        median(&values).unwrap_or(f64::NAN)
    }

    /// Of the repetitions where smbcp's planner wanted more than one channel, how many ended
    /// with all of them up, and how many there were; `None` when it never wanted more.
    pub fn full_channel_runs(&self) -> Option<(usize, usize)> {
        let multi: Vec<&SmbcpReport> = self
            .reports
            .iter()
            .flatten()
            .filter(|r| r.planned > 1)
            .collect();
        if multi.is_empty() {
            return None;
        }
        let full = multi
            .iter()
            .filter(|r| r.live_channels() >= r.planned)
            .count();
        Some((full, multi.len()))
    }

    /// Highest CPU use by other work during any repetition, in CPUs.
    pub fn max_other_cpus(&self) -> f64 {
        self.values(Sample::other_cpus)
            .into_iter()
            .fold(0.0, f64::max)
    }
}

/// Latency results of one link.
#[derive(Debug, Clone)]
pub struct LatencySet {
    /// Link label.
    pub link: String,
    /// The measurements.
    pub results: Vec<Latency>,
}

/// Everything one run measured.
#[derive(Debug, Clone, Default)]
pub struct Results {
    /// iperf3 numbers.
    pub raw: Vec<RawTcp>,
    /// File transfers.
    pub series: Vec<Series>,
    /// Small-read latency.
    pub latency: Vec<LatencySet>,
    /// Transfers measured again because other work on the machine disturbed them.
    pub retried: usize,
}

pub(crate) fn f0(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.0}")
    }
}

pub(crate) fn f1(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.1}")
    }
}

pub(crate) fn f2(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.2}")
    }
}

pub(crate) fn ratio(a: f64, b: f64) -> String {
    if a.is_nan() || b.is_nan() || b == 0.0 {
        "-".into()
    } else {
        format!("{:.3}", a / b)
    }
}

impl Results {
    pub(crate) fn raw_for(&self, link: &str, direction: Direction) -> Option<&RawTcp> {
        self.raw
            .iter()
            .find(|r| r.link == link && r.direction == direction)
    }

    pub(crate) fn smbclient_for(&self, s: &Series) -> Option<&Series> {
        self.series.iter().find(|o| {
            o.tool == "smbclient"
                && o.link == s.link
                && o.share == s.share
                && o.direction == s.direction
        })
    }

    /// The main table: per link, share and direction, raw TCP, then each client.
    pub fn throughput_table(&self) -> Table {
        let mut t = Table::new(&[
            "link",
            "share",
            "direction",
            "client",
            ">MB/s",
            ">min-max",
            ">x raw TCP",
            ">x smbclient",
            ">client CPU s/GiB",
            ">smbd CPU s/GiB",
            ">CPUs busy",
        ]);
        let mut shown_raw: Vec<(String, Direction)> = Vec::new();
        for s in &self.series {
            let raw = self.raw_for(&s.link, s.direction);
            if let Some(r) = raw.filter(|_| !shown_raw.contains(&(s.link.clone(), s.direction))) {
                shown_raw.push((s.link.clone(), s.direction));
                let how = match s.direction {
                    Direction::Download => "raw TCP (iperf3 -R)",
                    Direction::Upload => "raw TCP (iperf3)",
                };
                let (lo, hi) = min_max(&r.mbit).unwrap_or((f64::NAN, f64::NAN));
                t.row(vec![
                    s.link.clone(),
                    "-".into(),
                    s.direction.to_string(),
                    how.into(),
                    f1(r.mb_per_s()),
                    format!("{}-{}", f1(lo / 8.0), f1(hi / 8.0)),
                    "1.000".into(),
                ]);
            }
            let (lo, hi) = s.range();
            let vs_client = match self.smbclient_for(s) {
                Some(c) if c.tool != s.tool || c.settings != s.settings => {
                    ratio(s.mb_per_s(), c.mb_per_s())
                }
                _ => "-".into(),
            };
            t.row(vec![
                s.link.clone(),
                s.share.name().into(),
                s.direction.to_string(),
                format!("{}{}", s.tool, s.settings),
                f1(s.mb_per_s()),
                format!("{}-{}", f1(lo), f1(hi)),
                ratio(s.mb_per_s(), raw.map_or(f64::NAN, RawTcp::mb_per_s)),
                vs_client,
                f2(s.client_cpu_per_gib()),
                f2(s.server_cpu_per_gib()),
                f2(s.machine_cpus()),
            ]);
        }
        t
    }

    /// The latency table.
    pub fn latency_table(&self) -> Table {
        let mut t = Table::new(&[
            "link",
            "what was timed",
            "requests per op",
            ">ops",
            ">median µs",
            ">p99 µs",
        ]);
        for set in &self.latency {
            for l in &set.results {
                t.row(vec![
                    set.link.clone(),
                    l.what.clone(),
                    l.requests.into(),
                    l.ops.to_string(),
                    format!("{:.0}", l.median_us),
                    format!("{:.0}", l.p99_us),
                ]);
            }
        }
        t
    }

    /// The chunk-size/depth table of a sweep: one row per setting, both directions.
    pub fn sweep_table(&self) -> Table {
        let mut t = Table::new(&[
            "client settings",
            ">download MB/s",
            ">upload MB/s",
            ">download client CPU s/GiB",
            ">upload client CPU s/GiB",
            ">download smbd CPU s/GiB",
            ">upload smbd CPU s/GiB",
        ]);
        // One row per client setting, in the order they were measured.
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for s in &self.series {
            if !keys.contains(&(s.tool.as_str(), s.settings.as_str())) {
                keys.push((&s.tool, &s.settings));
            }
        }
        for (tool, settings) in keys {
            let find = |d: Direction| {
                self.series
                    .iter()
                    .find(|s| s.tool == tool && s.settings == settings && s.direction == d)
            };
            let (down, up) = (find(Direction::Download), find(Direction::Upload));
            let get = |s: Option<&Series>, f: fn(&Series) -> f64| s.map_or(f64::NAN, f);
            t.row(vec![
                format!("{tool}{settings}"),
                f1(get(down, Series::mb_per_s)),
                f1(get(up, Series::mb_per_s)),
                f2(get(down, Series::client_cpu_per_gib)),
                f2(get(up, Series::client_cpu_per_gib)),
                f2(get(down, Series::server_cpu_per_gib)),
                f2(get(up, Series::server_cpu_per_gib)),
            ]);
        }
        t
    }

    /// Highest CPU use by other work during any transfer, in CPUs.
    pub fn max_other_cpus(&self) -> f64 {
        self.series
            .iter()
            .map(Series::max_other_cpus)
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn median_report_belongs_to_the_median_sample() {
        let sample = |secs: f64| Sample {
            bytes: 1_000_000,
            wall: Duration::from_secs_f64(secs),
            client_cpu: Duration::ZERO,
            client_max_rss: 0,
            server_cpu: Duration::ZERO,
            machine_cpu: Duration::ZERO,
        };
        let report = |copy_seconds: f64| SmbcpReport {
            copy_seconds,
            channels: Vec::new(),
            planned: 0,
        };
        let mut s = Series {
            link: "l".into(),
            share: ShareKind::Plain,
            direction: Direction::Upload,
            tool: "smbcp".into(),
            settings: String::new(),
            // 0.5, 1 and 0.25 MB/s: the median is the 2 s run, the first one.
            samples: vec![sample(2.0), sample(1.0), sample(4.0)],
            reports: vec![Some(report(1.5)), Some(report(0.5)), Some(report(3.5))],
        };
        assert_eq!(s.median_report().map(|r| r.copy_seconds), Some(1.5));
        // Copy-only rates 0.667, 2 and 0.286 MB/s: median 0.667.
        assert!((s.copy_mb_per_s() - 1.0 / 1.5).abs() < 1e-9);
        assert_eq!(s.full_channel_runs(), None);
        let channel = crate::transfer::ChannelUse {
            local: [10, 0, 0, 2].into(),
            server: [10, 0, 0, 1].into(),
            bytes: 1,
            requests: 1,
            live: true,
        };
        s.reports[0] = Some(SmbcpReport {
            copy_seconds: 1.0,
            channels: vec![channel.clone(); 4],
            planned: 4,
        });
        s.reports[1] = Some(SmbcpReport {
            copy_seconds: 1.0,
            channels: vec![channel],
            planned: 4,
        });
        assert_eq!(s.full_channel_runs(), Some((1, 2)));
        s.reports = vec![None, None, None];
        assert_eq!(s.median_report(), None);
        assert!(s.copy_mb_per_s().is_nan());
        s.samples.clear();
        s.reports.clear();
        assert_eq!(s.median_report(), None);
    }
}
