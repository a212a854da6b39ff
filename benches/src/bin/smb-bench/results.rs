//! What the copy modes measured, and the tables made from it. A table is a list of column
//! headers: every cell of a row is looked up by its header.

use std::time::Duration;

use smb3_benches::stats::{median, min_max, percentile};
use smb3_benches::table::{num, range, ratio, Table};

use crate::transfer::{Direction, Sample, SmbcpReport, Tool};

/// The main table's columns (main, mixed).
pub(crate) const THROUGHPUT: &str =
    "link | share | direction | client | >MB/s | >min-max | >x raw TCP | \
     >x smbclient | >client CPU s/GiB | >smbd CPU s/GiB | >CPUs busy";
/// Shaped links, per setup and direction (multichannel, mount).
pub(crate) const SHAPED: &str = "links | direction | client | >MB/s | >min-max | >x raw TCP | >x smbclient | \
     >channels (per link) | >all planned up | >bytes per link % | >copy-only MB/s | >client CPU s/GiB | \
     >client max RSS MiB | >smbd CPU s/GiB | >CPUs busy";
/// smbcp settings on one link against its single-channel run (multichannel).
pub(crate) const UNSHAPED: &str =
    "link | direction | client | >channels | >all planned up | >MB/s | \
     >min-max | >x 1 channel | >copy-only MB/s | >client CPU s/GiB | >client max RSS MiB | \
     >smbd CPU s/GiB | >CPUs busy";
/// The option of the run "x 1 channel" compares with.
pub(crate) const ONE_CHANNEL: &str = "--no-multichannel";
/// The tool of a raw TCP series: all links' iperf3 streams together, a sample of one
/// second's bytes per repetition, its `files` the number of streams.
pub(crate) const RAW_TCP: &str = "raw TCP";

/// Latency of one kind of operation.
#[derive(Debug, Clone)]
pub(crate) struct Latency {
    pub(crate) what: &'static str,
    /// The SMB requests one operation costs.
    pub(crate) requests: &'static str,
    pub(crate) ops: usize,
    pub(crate) median_us: f64,
    pub(crate) p99_us: f64,
}

impl Latency {
    pub(crate) fn of(what: &'static str, requests: &'static str, samples: &[Duration]) -> Latency {
        let us = || samples.iter().map(|d| d.as_secs_f64() * 1e6);
        let (ops, median_us, p99_us) = (samples.len(), median(us()), percentile(us(), 99.0));
        Latency {
            what,
            requests,
            ops,
            median_us,
            p99_us,
        }
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
    /// smbcp's own report of each repetition (`None` for the others), aligned with `samples`.
    pub(crate) reports: Vec<Option<SmbcpReport>>,
}

impl Series {
    pub(crate) fn new(link: &str, share: &str, direction: Direction, tool: &Tool) -> Series {
        let (tool, settings) = (tool.name(), tool.settings());
        let (link, share, samples, reports) = (link.into(), share.into(), Vec::new(), Vec::new());
        Series {
            link,
            share,
            direction,
            tool,
            settings,
            samples,
            reports,
        }
    }

    /// Raw TCP over `links` links, one sum of the streams per repetition, Mbit/s.
    pub(crate) fn raw(link: &str, direction: Direction, links: usize, mbit: &[f64]) -> Series {
        let second = |m: &f64| {
            let bytes = (m * 125_000.0) as u64;
            Sample {
                bytes,
                files: links as u64,
                wall: Duration::from_secs(1),
                ..Sample::default()
            }
        };
        let (samples, reports) = (mbit.iter().map(second).collect(), vec![None; mbit.len()]);
        let (link, share, settings) = (link.into(), "-".into(), String::new());
        Series {
            link,
            share,
            direction,
            tool: RAW_TCP,
            settings,
            samples,
            reports,
        }
    }

    /// The median of `f` over the repetitions.
    pub(crate) fn median_of(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        median(self.samples.iter().map(f))
    }

    /// Lowest and highest of `f` over the repetitions.
    pub(crate) fn range_of(&self, f: impl Fn(&Sample) -> f64) -> (f64, f64) {
        min_max(self.samples.iter().map(f))
    }

    pub(crate) fn mb_per_s(&self) -> f64 {
        self.median_of(Sample::mb_per_s)
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
        let runs = self.samples.iter().zip(&self.reports);
        let rates = runs.filter_map(|(s, r)| {
            let r = r.as_ref().filter(|r| r.copy_seconds > 0.0)?;
            Some(s.bytes as f64 / r.copy_seconds / 1e6)
        });
        median(rates)
    }

    /// `2 of 3`: of the repetitions whose planner wanted more than one channel, those that
    /// ended with all of them up.
    fn full_runs(&self) -> String {
        let multi: Vec<_> = self
            .reports
            .iter()
            .flatten()
            .filter(|r| r.planned > 1)
            .collect();
        let full = multi
            .iter()
            .filter(|r| r.live_channels() >= r.planned)
            .count();
        match multi.len() {
            0 => String::new(),
            n => format!("{full} of {n}"),
        }
    }
}

/// `4 (1+1+1+1)`: live channels at the end, in total and per link.
pub(crate) fn channels_cell(r: &SmbcpReport) -> String {
    let per: Vec<String> = r.per_server().iter().map(|p| p.1.to_string()).collect();
    match per.len() {
        0 | 1 => r.live_channels().to_string(),
        _ => format!("{} ({})", r.live_channels(), per.join("+")),
    }
}

/// `50/50`: each link's share of the bytes on the wire in percent, in link order.
fn bytes_per_link_cell(r: &SmbcpReport) -> String {
    let per = r.per_server();
    let total = per.iter().map(|p| p.2).sum::<u64>() as f64;
    let shares: Vec<String> = per
        .iter()
        .map(|p| format!("{:.0}", p.2 as f64 * 100.0 / total))
        .collect();
    if total == 0.0 {
        "-".into()
    } else {
        shares.join("/")
    }
}

/// `, channels 4 (2+2) (bytes per link 50/50 %)`, for progress lines.
pub(crate) fn channel_line(report: &SmbcpReport) -> String {
    let (channels, bytes) = (channels_cell(report), bytes_per_link_cell(report));
    format!(", channels {channels} (bytes per link {bytes} %)")
}

/// Everything a copy mode measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Results {
    /// Runs of the clients and raw TCP, in the order measured.
    pub(crate) series: Vec<Series>,
    /// Per link.
    pub(crate) latency: Vec<(String, Vec<Latency>)>,
    /// Runs measured again because other work disturbed them.
    pub(crate) retried: usize,
}

impl Results {
    /// The first series of `tool` on `link` in `direction`.
    pub(crate) fn find(&self, link: &str, tool: &str, direction: Direction) -> Option<&Series> {
        let mut all = self.series.iter();
        all.find(|s| s.link == link && s.tool == tool && s.direction == direction)
    }

    /// Raw TCP's median on `link` in `direction`, MB/s; NaN when it was not measured.
    pub(crate) fn raw(&self, link: &str, direction: Direction) -> f64 {
        self.find(link, RAW_TCP, direction)
            .map_or(f64::NAN, Series::mb_per_s)
    }

    /// The first series of `s`'s link, share and direction that `pick` selects.
    fn beside(&self, s: &Series, pick: impl Fn(&Series) -> bool) -> Option<&Series> {
        let same =
            |o: &&Series| (&o.link, &o.share, o.direction) == (&s.link, &s.share, s.direction);
        self.series.iter().filter(same).find(|o| pick(o))
    }

    /// smbclient's series of `s`'s link, share and direction.
    pub(crate) fn smbclient_for(&self, s: &Series) -> Option<&Series> {
        self.beside(s, |o| o.tool == "smbclient")
    }

    /// The highest CPU use of other work during any run kept, in CPUs.
    pub(crate) fn max_other_cpus(&self) -> f64 {
        let samples = self.series.iter().flat_map(|s| &s.samples);
        samples.map(Sample::other_cpus).fold(0.0, f64::max)
    }

    /// `s`'s row's cell under `column`; `per_setup` names raw TCP's streams per link.
    fn cell(&self, s: &Series, column: &str, per_setup: bool) -> String {
        let raw = s.tool == RAW_TCP;
        let against = |o: Option<&Series>| match o {
            Some(o) if o.client() != s.client() => ratio(s.mb_per_s(), o.mb_per_s()),
            _ => "-".into(),
        };
        let cpu = |f: fn(&Sample) -> Duration| num(s.median_of(|x| x.per_gib(f(x))), 2);
        let (report, streams) = (s.median_report(), s.samples.first().map_or(0, |x| x.files));
        let reverse = if s.direction == Direction::Download {
            " -R"
        } else {
            ""
        };
        match column {
            "link" | "links" => s.link.clone(),
            "share" => s.share.clone(),
            "direction" => s.direction.to_string(),
            "client" if raw && per_setup => format!("raw TCP, {streams} x iperf3{reverse}"),
            "client" if raw => format!("raw TCP (iperf3{reverse})"),
            "client" => s.client(),
            "MB/s" => num(s.mb_per_s(), 1),
            "min-max" => range(s.range_of(Sample::mb_per_s), 1),
            "x raw TCP" => ratio(s.mb_per_s(), self.raw(&s.link, s.direction)),
            "channels (per link)" if raw => streams.to_string(),
            _ if raw => String::new(),
            "x smbclient" => against(self.smbclient_for(s)),
            "x 1 channel" => against(self.beside(s, |o| o.settings.contains(ONE_CHANNEL))),
            "channels" | "channels (per link)" if s.tool == "smbclient" => "1 connection".into(),
            "channels" | "channels (per link)" => report.map_or(String::new(), channels_cell),
            "all planned up" => s.full_runs(),
            "bytes per link %" => report.map_or(String::new(), bytes_per_link_cell),
            "copy-only MB/s" => num(s.copy_mb_per_s(), 1),
            "client CPU s/GiB" => cpu(|x| x.client_cpu),
            "smbd CPU s/GiB" => cpu(|x| x.server_cpu),
            "client max RSS MiB" => {
                let mib = s
                    .samples
                    .iter()
                    .map(|x| x.client_max_rss as f64 / f64::from(1 << 20));
                num(mib.fold(f64::NAN, f64::max), 0)
            }
            "CPUs busy" => num(s.median_of(Sample::machine_cpus), 2),
            _ => unreachable!("no column {column}"),
        }
    }

    /// A table of `columns` ([`THROUGHPUT`], [`SHAPED`], [`UNSHAPED`]) with a row per series
    /// `keep` selects, in the order measured, each link and direction's raw TCP row before
    /// its first.
    pub(crate) fn table(&self, columns: &str, keep: impl Fn(&Series) -> bool) -> Table {
        let names: Vec<&str> = columns
            .split('|')
            .map(|c| c.trim().trim_start_matches('>'))
            .collect();
        let (mut t, mut shown, per_setup) = (Table::new(columns), Vec::new(), names[0] == "links");
        for s in self.series.iter().filter(|s| s.tool != RAW_TCP && keep(s)) {
            let raw = self.find(&s.link, RAW_TCP, s.direction);
            if let Some(r) = raw.filter(|r| !shown.contains(&(&r.link, r.direction))) {
                shown.push((&r.link, r.direction));
                t.row(names.iter().map(|c| self.cell(r, c, per_setup)).collect());
            }
            t.row(names.iter().map(|c| self.cell(s, c, per_setup)).collect());
        }
        t
    }

    pub(crate) fn latency_table(&self) -> Table {
        let rows = self
            .latency
            .iter()
            .flat_map(|(link, set)| set.iter().map(move |l| (link, l)));
        Table::of(
            rows,
            &[
                ("link", &|(link, _)| link.to_string()),
                ("what was timed", &|(_, l)| l.what.into()),
                ("requests per op", &|(_, l)| l.requests.into()),
                (">ops", &|(_, l)| l.ops.to_string()),
                (">median µs", &|(_, l)| num(l.median_us, 0)),
                (">p99 µs", &|(_, l)| num(l.p99_us, 0)),
            ],
        )
    }

    /// The sweep's table: a row per client setting, in the order measured, both directions.
    pub(crate) fn sweep_table(&self) -> Table {
        let first = self
            .series
            .iter()
            .filter(|s| s.direction == Direction::Download);
        let clients: Vec<String> = first.map(Series::client).collect();
        let of = |d: Direction, f: fn(&Sample) -> f64, decimals| {
            move |client: &String| {
                let s = self
                    .series
                    .iter()
                    .find(|s| s.client() == *client && s.direction == d);
                num(s.map_or(f64::NAN, |s| s.median_of(f)), decimals)
            }
        };
        let (client_cpu, server_cpu) = (
            |x: &Sample| x.per_gib(x.client_cpu),
            |x: &Sample| x.per_gib(x.server_cpu),
        );
        let (down, up) = (Direction::Download, Direction::Upload);
        Table::of(
            clients,
            &[
                ("client settings", &|c| c.clone()),
                (">download MB/s", &of(down, Sample::mb_per_s, 1)),
                (">upload MB/s", &of(up, Sample::mb_per_s, 1)),
                (">download client CPU s/GiB", &of(down, client_cpu, 2)),
                (">upload client CPU s/GiB", &of(up, client_cpu, 2)),
                (">download smbd CPU s/GiB", &of(down, server_cpu, 2)),
                (">upload smbd CPU s/GiB", &of(up, server_cpu, 2)),
            ],
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::transfer::ChannelUse;
    use smb3_benches::table::cells;

    /// A series of 10^9-byte copies at these MB/s, smbcp's with a report of channels on
    /// links 1, 2 and 2 (600, 300 and 100 bytes) and a copy time half a second shorter.
    pub(crate) fn series(link: &str, tool: &str, direction: Direction, mb_s: &[f64]) -> Series {
        let channel = |link: u8, bytes: u64| {
            let (local, server) = ([10, 100, link, 2].into(), [10, 100, link, 1].into());
            ChannelUse {
                local,
                server,
                bytes,
                requests: bytes / 100,
                live: true,
            }
        };
        let tool = if tool == "smbcp" {
            Tool::smbcp("smbcp".as_ref(), &[])
        } else {
            Tool::Smbclient
        };
        let mut s = Series::new(link, "plain", direction, &tool);
        for &v in mb_s {
            let (wall, one) = (Duration::from_secs_f64(1000.0 / v), Duration::from_secs(1));
            let sample = Sample {
                bytes: 1_000_000_000,
                files: 1,
                wall,
                client_max_rss: 40 << 20,
                ..Sample::default()
            };
            s.samples.push(Sample {
                client_cpu: one,
                server_cpu: one,
                machine_cpu: 2 * one,
                ..sample
            });
            let channels = vec![channel(1, 600), channel(2, 300), channel(2, 100)];
            let report = SmbcpReport {
                copy_seconds: wall.as_secs_f64() - 0.5,
                channels,
                planned: 3,
            };
            s.reports.push((s.tool == "smbcp").then_some(report));
        }
        s
    }

    #[test]
    fn the_median_report_belongs_to_the_median_sample() {
        let mut s = series("l", "smbcp", Direction::Upload, &[100.0, 200.0, 50.0]);
        assert_eq!(s.median_report().map(|r| r.copy_seconds), Some(9.5));
        // Copy-only rates 1e9 bytes in 9.5, 4.5 and 19.5 s: the median is 105.3 MB/s.
        assert_eq!(num(s.copy_mb_per_s(), 1), "105.3");
        s.reports[1].as_mut().unwrap().channels.pop();
        assert_eq!(s.full_runs(), "2 of 3");
        let report = s.median_report().unwrap();
        assert_eq!(
            (channels_cell(report), bytes_per_link_cell(report)),
            ("3 (1+2)".into(), "60/40".into())
        );
        s.reports = vec![None, None, None];
        assert!(
            s.median_report().is_none() && s.full_runs().is_empty() && s.copy_mb_per_s().is_nan()
        );
    }

    #[test]
    fn tables_put_raw_tcp_first_and_compare_with_it() {
        let label = "2 x 500 Mbit/s";
        let mut one = series(label, "smbcp", Direction::Download, &[50.0]);
        one.settings = format!(" {ONE_CHANNEL}");
        let series = vec![
            series(label, "smbcp", Direction::Download, &[90.0, 100.0, 110.0]),
            series(label, "smbclient", Direction::Download, &[50.0]),
            one,
            // 2 links x 480 Mbit/s: 120 MB/s together.
            Series::raw(label, Direction::Download, 2, &[960.0]),
        ];
        let results = Results {
            series,
            ..Results::default()
        };
        let rows = cells(&results.table(SHAPED, |_| true).markdown());
        assert_eq!(
            rows[0][2..8].join("|"),
            "raw TCP, 2 x iperf3 -R|120.0|120.0-120.0|1.000||2"
        );
        let want =
            "smbcp|100.0|90.0-110.0|0.833|2.000|3 (1+2)|3 of 3|60/40|105.3|1.07|40|1.07|0.20";
        assert_eq!(rows[1][2..].join("|"), want);
        assert_eq!(
            rows[2][2..9].join("|"),
            "smbclient|50.0|50.0-50.0|0.417|-|1 connection|"
        );
        let rows = cells(&results.table(THROUGHPUT, |s| s.tool == "smbcp").markdown());
        assert_eq!(
            rows[0][3..9].join("|"),
            "raw TCP (iperf3 -R)|120.0|120.0-120.0|1.000||"
        );
        let rows = cells(&results.table(UNSHAPED, |s| s.tool == "smbcp").markdown());
        assert_eq!((rows[1][7].as_str(), rows[2][7].as_str()), ("2.000", "-"));
    }
}
