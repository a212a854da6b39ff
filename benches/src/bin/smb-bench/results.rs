//! What the copy modes measured, and the tables made from it.

use smb3_benches::stats::{median, min_max};
use smb3_benches::table::{num, range, ratio, Table};

use crate::latency::Latency;
use crate::transfer::{Direction, Sample, SmbcpReport, Tool};

/// Raw TCP goodput of a testbed's links in one direction (the sum of one iperf3 stream per
/// link, receiver side).
#[derive(Debug, Clone)]
pub(crate) struct RawTcp {
    pub(crate) link: String,
    pub(crate) direction: Direction,
    /// One sum per repetition, Mbit/s.
    pub(crate) mbit: Vec<f64>,
}

impl RawTcp {
    /// Median, MB/s.
    pub(crate) fn mb_per_s(&self) -> f64 {
        median(&self.mbit).unwrap_or(f64::NAN) / 8.0
    }

    fn range(&self) -> String {
        let (lo, hi) = min_max(&self.mbit).unwrap_or((f64::NAN, f64::NAN));
        range((lo / 8.0, hi / 8.0))
    }
}

/// Repeated runs of one client, link, share (or tree) and direction.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) link: String,
    /// The share's name, or what was copied (a tree).
    pub(crate) share: String,
    pub(crate) direction: Direction,
    pub(crate) tool: &'static str,
    /// The client's options beyond its defaults.
    pub(crate) settings: String,
    pub(crate) samples: Vec<Sample>,
    /// smbcp's own report of each repetition (`None` for smbclient), aligned with `samples`.
    pub(crate) reports: Vec<Option<SmbcpReport>>,
}

impl Series {
    pub(crate) fn new(link: &str, share: &str, direction: Direction, tool: &Tool) -> Series {
        Series {
            link: link.into(),
            share: share.into(),
            direction,
            tool: tool.name(),
            settings: tool.settings(),
            samples: Vec::new(),
            reports: Vec::new(),
        }
    }

    /// The median of `f` over the repetitions (NaN without any).
    pub(crate) fn median_of(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        median(&self.samples.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    }

    /// Lowest and highest of `f` over the repetitions.
    pub(crate) fn range_of(&self, f: impl Fn(&Sample) -> f64) -> (f64, f64) {
        min_max(&self.samples.iter().map(f).collect::<Vec<_>>()).unwrap_or((f64::NAN, f64::NAN))
    }

    pub(crate) fn mb_per_s(&self) -> f64 {
        self.median_of(Sample::mb_per_s)
    }

    fn client_cpu_per_gib(&self) -> f64 {
        self.median_of(|s| s.per_gib(s.client_cpu))
    }

    fn server_cpu_per_gib(&self) -> f64 {
        self.median_of(|s| s.per_gib(s.server_cpu))
    }

    /// The client name with its settings, as in the tables.
    pub(crate) fn client(&self) -> String {
        format!("{}{}", self.tool, self.settings)
    }

    /// The repetition of median throughput (the lower middle one of an even count): its
    /// smbcp report.
    pub(crate) fn median_report(&self) -> Option<&SmbcpReport> {
        let mut order: Vec<usize> = (0..self.samples.len()).collect();
        order.sort_by(|&a, &b| {
            self.samples[a]
                .mb_per_s()
                .total_cmp(&self.samples[b].mb_per_s())
        });
        let middle = *order.get(order.len().checked_sub(1)? / 2)?;
        self.reports.get(middle)?.as_ref()
    }

    /// Median MB/s by smbcp's own clock (the copy, after connecting); NaN without reports.
    pub(crate) fn copy_mb_per_s(&self) -> f64 {
        let rates: Vec<f64> = (self.samples.iter().zip(&self.reports))
            .filter_map(|(s, r)| {
                r.as_ref()
                    .filter(|r| r.copy_seconds > 0.0)
                    .map(|r| s.bytes as f64 / r.copy_seconds / 1e6)
            })
            .collect();
        median(&rates).unwrap_or(f64::NAN)
    }

    /// `2 of 3`: of the repetitions whose planner wanted more than one channel, those that
    /// ended with all of them up.
    fn full_runs(&self) -> String {
        let multi: Vec<&SmbcpReport> = self
            .reports
            .iter()
            .flatten()
            .filter(|r| r.planned > 1)
            .collect();
        let full = multi
            .iter()
            .filter(|r| r.live_channels() >= r.planned)
            .count();
        if multi.is_empty() {
            String::new()
        } else {
            format!("{full} of {}", multi.len())
        }
    }

    fn max_other_cpus(&self) -> f64 {
        self.samples
            .iter()
            .map(Sample::other_cpus)
            .fold(0.0, f64::max)
    }

    /// Client CPU, its peak RSS, smbd CPU and CPUs busy.
    fn cpu_cells(&self, rss: bool) -> Vec<String> {
        let mut cells = vec![num(self.client_cpu_per_gib(), 2)];
        if rss {
            let peak = self
                .samples
                .iter()
                .map(|s| s.client_max_rss as f64 / f64::from(1 << 20))
                .fold(f64::NAN, f64::max);
            cells.push(num(peak, 0));
        }
        cells.extend([
            num(self.server_cpu_per_gib(), 2),
            num(self.median_of(Sample::machine_cpus), 2),
        ]);
        cells
    }
}

/// `4 (1+1+1+1)`: live channels at the end, in total and per link.
pub(crate) fn channels_cell(report: Option<&SmbcpReport>) -> String {
    let Some(r) = report else {
        return String::new();
    };
    let per: Vec<String> = r
        .per_server()
        .iter()
        .map(|(_, n, _)| n.to_string())
        .collect();
    match per.len() {
        0 | 1 => r.live_channels().to_string(),
        _ => format!("{} ({})", r.live_channels(), per.join("+")),
    }
}

/// `, channels 4 (2+2) (bytes per link 50/50 %)`, for progress lines.
pub(crate) fn channel_line(report: &SmbcpReport) -> String {
    let (channels, bytes) = (
        channels_cell(Some(report)),
        bytes_per_link_cell(Some(report)),
    );
    format!(", channels {channels} (bytes per link {bytes} %)")
}

/// `50/50`: each link's share of the bytes on the wire in percent, in link order.
pub(crate) fn bytes_per_link_cell(report: Option<&SmbcpReport>) -> String {
    let Some(r) = report else {
        return String::new();
    };
    let per = r.per_server();
    let total: u64 = per.iter().map(|(_, _, b)| b).sum();
    let shares = per
        .iter()
        .map(|(_, _, b)| format!("{:.0}", *b as f64 * 100.0 / total as f64));
    if total == 0 {
        "-".into()
    } else {
        shares.collect::<Vec<_>>().join("/")
    }
}

/// Everything a copy mode measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Results {
    pub(crate) raw: Vec<RawTcp>,
    pub(crate) series: Vec<Series>,
    /// Per link.
    pub(crate) latency: Vec<(String, Vec<Latency>)>,
    /// Runs measured again because other work disturbed them.
    pub(crate) retried: usize,
}

impl Results {
    pub(crate) fn raw_for(&self, link: &str, direction: Direction) -> Option<&RawTcp> {
        self.raw
            .iter()
            .find(|r| r.link == link && r.direction == direction)
    }

    /// The first series of `tool` on `link` in `direction`.
    pub(crate) fn find(&self, link: &str, tool: &str, direction: Direction) -> Option<&Series> {
        self.series
            .iter()
            .find(|s| s.link == link && s.tool == tool && s.direction == direction)
    }

    /// smbclient's series of `s`'s link, share and direction.
    pub(crate) fn smbclient_for(&self, s: &Series) -> Option<&Series> {
        self.series.iter().find(|o| {
            o.tool == "smbclient"
                && o.link == s.link
                && o.share == s.share
                && o.direction == s.direction
        })
    }

    /// `s`'s throughput over smbclient's, `-` for smbclient itself.
    fn x_smbclient(&self, s: &Series) -> String {
        match self.smbclient_for(s) {
            Some(c) if c.client() != s.client() => ratio(s.mb_per_s(), c.mb_per_s()),
            _ => "-".into(),
        }
    }

    /// The highest CPU use of other work during any run kept, in CPUs.
    pub(crate) fn max_other_cpus(&self) -> f64 {
        self.series
            .iter()
            .map(Series::max_other_cpus)
            .fold(0.0, f64::max)
    }

    /// The main table: per link, share and direction, raw TCP, then each client.
    pub(crate) fn throughput_table(&self) -> Table {
        let mut t = Table::new(
            "link | share | direction | client | >MB/s | >min-max | >x raw TCP | >x smbclient |\
            >client CPU s/GiB | >smbd CPU s/GiB | >CPUs busy",
        );
        let mut shown: Vec<(&str, Direction)> = Vec::new();
        for s in &self.series {
            let raw = self.raw_for(&s.link, s.direction);
            if let Some(r) = raw.filter(|_| !shown.contains(&(&s.link, s.direction))) {
                shown.push((&s.link, s.direction));
                let how = match s.direction {
                    Direction::Download => "raw TCP (iperf3 -R)",
                    Direction::Upload => "raw TCP (iperf3)",
                };
                let cells = [
                    &s.link,
                    "-",
                    &s.direction.to_string(),
                    how,
                    &num(r.mb_per_s(), 1),
                    &r.range(),
                    "1.000",
                ];
                t.row(cells.map(String::from).to_vec());
            }
            let mut row = vec![
                s.link.clone(),
                s.share.clone(),
                s.direction.to_string(),
                s.client(),
                num(s.mb_per_s(), 1),
                range(s.range_of(Sample::mb_per_s)),
                ratio(s.mb_per_s(), raw.map_or(f64::NAN, RawTcp::mb_per_s)),
                self.x_smbclient(s),
            ];
            row.extend(s.cpu_cells(false));
            t.row(row);
        }
        t
    }

    pub(crate) fn latency_table(&self) -> Table {
        let mut t =
            Table::new("link | what was timed | requests per op | >ops | >median µs | >p99 µs");
        for (link, set) in &self.latency {
            for l in set {
                let cells = [
                    link.clone(),
                    l.what.into(),
                    l.requests.into(),
                    l.ops.to_string(),
                ];
                t.row([cells.to_vec(), vec![num(l.median_us, 0), num(l.p99_us, 0)]].concat());
            }
        }
        t
    }

    /// The sweep's table: a row per client setting, in the order measured, both directions.
    pub(crate) fn sweep_table(&self) -> Table {
        let mut t = Table::new(
            "client settings | >download MB/s | >upload MB/s | >download client CPU s/GiB |\
            >upload client CPU s/GiB | >download smbd CPU s/GiB | >upload smbd CPU s/GiB",
        );
        let mut clients: Vec<String> = Vec::new();
        for s in &self.series {
            if !clients.contains(&s.client()) {
                clients.push(s.client());
            }
        }
        for client in clients {
            let of = |d: Direction, f: fn(&Series) -> f64, decimals| {
                let s = self
                    .series
                    .iter()
                    .find(|s| s.client() == client && s.direction == d);
                num(s.map_or(f64::NAN, f), decimals)
            };
            let mut row = vec![client.clone()];
            for (f, decimals) in [
                (Series::mb_per_s as fn(&Series) -> f64, 1),
                (Series::client_cpu_per_gib, 2),
                (Series::server_cpu_per_gib, 2),
            ] {
                row.extend(Direction::BOTH.map(|d| of(d, f, decimals)));
            }
            t.row(row);
        }
        t
    }

    /// The shaped-links table of the multichannel and mount modes: per setup and direction,
    /// aggregate raw TCP, then each client with its ratios, channels and how the bytes spread
    /// over the links.
    pub(crate) fn shaped_table(&self, links: &[(String, usize)]) -> Table {
        let mut t = Table::new(
            "links | direction | client | >MB/s | >min-max | >x raw TCP | >x smbclient |\
            >channels (per link) | >all planned up | >bytes per link % | >copy-only MB/s |\
            >client CPU s/GiB | >client max RSS MiB | >smbd CPU s/GiB | >CPUs busy",
        );
        for (label, streams) in links {
            for direction in Direction::BOTH {
                let raw = self.raw_for(label, direction);
                if let Some(r) = raw {
                    let how = match direction {
                        Direction::Download => format!("raw TCP, {streams} x iperf3 -R"),
                        Direction::Upload => format!("raw TCP, {streams} x iperf3"),
                    };
                    let cells = [
                        label.clone(),
                        direction.to_string(),
                        how,
                        num(r.mb_per_s(), 1),
                        r.range(),
                    ];
                    t.row(
                        [
                            &cells[..],
                            &["1.000".into(), String::new(), streams.to_string()],
                        ]
                        .concat(),
                    );
                }
                for s in self
                    .series
                    .iter()
                    .filter(|s| &s.link == label && s.direction == direction)
                {
                    let report = s.median_report();
                    let mut row = vec![
                        label.clone(),
                        direction.to_string(),
                        s.client(),
                        num(s.mb_per_s(), 1),
                        range(s.range_of(Sample::mb_per_s)),
                        ratio(s.mb_per_s(), raw.map_or(f64::NAN, RawTcp::mb_per_s)),
                        self.x_smbclient(s),
                        if s.tool == "smbclient" {
                            "1 connection".into()
                        } else {
                            channels_cell(report)
                        },
                        s.full_runs(),
                        bytes_per_link_cell(report),
                        num(s.copy_mb_per_s(), 1),
                    ];
                    row.extend(s.cpu_cells(true));
                    t.row(row);
                }
            }
        }
        t
    }

    /// smbcp settings on one link, each against `baseline` (the settings of its single-channel
    /// run).
    pub(crate) fn unshaped_table(&self, label: &str, baseline: &str) -> Table {
        let mut t = Table::new(
            "link | direction | client | >channels | >all planned up | >MB/s | >min-max |\
            >x 1 channel | >copy-only MB/s | >client CPU s/GiB | >client max RSS MiB |\
            >smbd CPU s/GiB | >CPUs busy",
        );
        for direction in Direction::BOTH {
            let on_link = || {
                self.series
                    .iter()
                    .filter(move |s| s.link == label && s.direction == direction)
            };
            let base = on_link().find(|s| s.settings == baseline);
            for s in on_link() {
                let vs_base = match base {
                    Some(b) if b.settings != s.settings => ratio(s.mb_per_s(), b.mb_per_s()),
                    _ => "-".into(),
                };
                let mut row = vec![
                    label.into(),
                    direction.to_string(),
                    s.client(),
                    channels_cell(s.median_report()),
                    s.full_runs(),
                    num(s.mb_per_s(), 1),
                    range(s.range_of(Sample::mb_per_s)),
                    vs_base,
                    num(s.copy_mb_per_s(), 1),
                ];
                row.extend(s.cpu_cells(true));
                t.row(row);
            }
        }
        t
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::transfer::ChannelUse;

    /// A series of 10^9-byte copies at these MB/s, smbcp's with a report of channels on
    /// links 1, 2 and 2 (600, 300 and 100 bytes) and a copy time half a second shorter.
    pub(crate) fn series(link: &str, tool: &str, direction: Direction, mb_s: &[f64]) -> Series {
        let channel = |link: u8, bytes: u64| ChannelUse {
            local: [10, 100, link, 2].into(),
            server: [10, 100, link, 1].into(),
            bytes,
            requests: bytes / 100,
            live: true,
        };
        let wall = |v: f64| Duration::from_secs_f64(1000.0 / v);
        Series {
            link: link.into(),
            share: "plain".into(),
            direction,
            tool: if tool == "smbcp" {
                "smbcp"
            } else {
                "smbclient"
            },
            settings: String::new(),
            samples: mb_s
                .iter()
                .map(|&v| Sample {
                    bytes: 1_000_000_000,
                    files: 1,
                    wall: wall(v),
                    client_cpu: Duration::from_secs(1),
                    client_max_rss: 40 << 20,
                    server_cpu: Duration::from_secs(1),
                    machine_cpu: Duration::from_secs(2),
                })
                .collect(),
            reports: mb_s
                .iter()
                .map(|&v| {
                    (tool == "smbcp").then(|| SmbcpReport {
                        copy_seconds: wall(v).as_secs_f64() - 0.5,
                        channels: vec![channel(1, 600), channel(2, 300), channel(2, 100)],
                        planned: 3,
                    })
                })
                .collect(),
        }
    }

    /// The cells of `table`'s rows below its header.
    pub(crate) fn cells(table: &Table) -> Vec<Vec<String>> {
        let md = table.markdown();
        let row = |l: &str| {
            let cells: Vec<String> = l.split('|').map(|c| c.trim().to_string()).collect();
            cells[1..cells.len() - 1].to_vec()
        };
        md.lines().skip(2).map(row).collect()
    }

    #[test]
    fn the_median_report_belongs_to_the_median_sample() {
        let mut s = series("l", "smbcp", Direction::Upload, &[100.0, 200.0, 50.0]);
        assert_eq!(s.median_report().map(|r| r.copy_seconds), Some(9.5));
        // Copy-only rates 1e9 bytes in 9.5, 4.5 and 19.5 s: the median is 105.3 MB/s.
        assert_eq!(num(s.copy_mb_per_s(), 1), "105.3");
        s.reports[1].as_mut().unwrap().channels.pop();
        assert_eq!(s.full_runs(), "2 of 3");
        let report = s.median_report();
        assert_eq!(
            (channels_cell(report), bytes_per_link_cell(report)),
            ("3 (1+2)".into(), "60/40".into())
        );
        s.reports = vec![None, None, None];
        assert_eq!((s.median_report(), s.full_runs()), (None, String::new()));
        assert!(s.copy_mb_per_s().is_nan());
    }
}
