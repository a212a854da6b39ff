//! `smb-bench multichannel`: first one unshaped link with smbcp on one channel and on several
//! (does a second channel help when the CPUs are the limit?), then for each N of `--links` a
//! testbed of N links shaped to `--rate`: their aggregate raw TCP, smbcp (which binds channels
//! over every link by itself) and smbclient (one connection, so one link). The `multichannel`
//! section of docs/PERFORMANCE.md and its chart.

use smb3_benches::table::{num, Table};

use crate::bench::{Bench, LinkSetup};
use crate::chart::{BarChart, Frame};
use crate::results::{Results, Series, ONE_CHANNEL, SHAPED, UNSHAPED};
use crate::transfer::{ChannelUse, Direction, Tool};
use crate::Common;

/// The share of aggregate raw TCP smbcp should reach with 2 and 4 links.
const TARGET_OF_RAW_TCP: f64 = 0.97;

pub(crate) fn run(
    common: &Common,
    links: &[u16],
    channels: u16,
    variants: &[String],
) -> Result<(), String> {
    let mut bench = Bench::new(common, common.size(1024, 64), common.reps(3))?;
    let (smbcp, unshaped, rate) = (
        bench.smbcp.clone(),
        LinkSetup::UNSHAPED.label(),
        common.rate(500),
    );
    let several = Tool::smbcp(&smbcp, &["--channels-per-nic", &channels.to_string()]);
    let tb = bench.testbed(&LinkSetup::UNSHAPED, &["plain"], "")?;
    common.quiet();
    bench.both_directions(
        &tb,
        &unshaped,
        "plain",
        &[Tool::smbcp(&smbcp, &[ONE_CHANNEL]), several],
    )?;
    drop(tb);
    let shaped: Vec<LinkSetup> = links
        .iter()
        .map(|&n| LinkSetup::shaped(n.into(), rate))
        .collect();
    // smbcp's defaults first: the target lines and the chart take the first smbcp series.
    let mut tools = vec![Tool::smbcp(&smbcp, &[]), Tool::Smbclient];
    tools.extend(
        variants
            .iter()
            .map(|v| Tool::smbcp(&smbcp, &v.split_whitespace().collect::<Vec<_>>())),
    );
    for setup in &shaped {
        let tb = bench.testbed(setup, &["plain"], "")?;
        bench.raw_tcp(&tb, setup, &setup.label())?;
        bench.both_directions(&tb, &setup.label(), "plain", &tools)?;
    }

    let (results, mut body) = (&bench.results, bench.header());
    let widest = shaped.iter().max_by_key(|s| s.links);
    body.push_str(&widest.map_or(String::new(), |w| rate_verdict(results, w, &unshaped)));
    let lines = target_lines(results, &shaped);
    if !lines.is_empty() {
        let (target, lines) = (TARGET_OF_RAW_TCP * 100.0, lines.join("\n"));
        body += &format!("Targets (smbcp at least {target:.0} % of aggregate raw TCP with 2 and 4 links):\n\n{lines}\n\n");
    }
    let labels: Vec<String> = shaped.iter().map(LinkSetup::label).collect();
    body.push_str(
        &results
            .table(SHAPED, |s| labels.contains(&s.link))
            .markdown(),
    );
    if let Some(w) = widest.filter(|w| w.links > 1) {
        let table = channel_table(results, &w.label()).markdown();
        body += &format!(
            "\nChannels of smbcp's median run with {} links:\n\n{table}",
            w.links
        );
    }
    let table = results.table(UNSHAPED, |s| s.link == unshaped).markdown();
    body += &format!("\nOne unshaped link, smbcp with one channel (`{ONE_CHANNEL}`) and with several:\n\n{table}");
    let size = match bench.size {
        s if s == 1 << 30 => "1 GiB".to_string(),
        s => format!("{} MiB", s >> 20),
    };
    let title = format!("{size} copies over N links of {rate} Mbit/s each (median MB/s)");
    let alt = "MB/s per number of links: raw TCP, smbcp, smbclient";
    body += &common.chart("multichannel.svg", alt, || {
        chart(results, &shaped, &title).svg()
    })?;
    common.publish("multichannel", None, &body)
}

/// Why the rate is low enough: the most links together against what smbcp moved over one
/// unshaped link with one channel (the slower direction, CPU-bound). Half of what the CPUs
/// can move is the most that still leaves them clearly idle.
fn rate_verdict(results: &Results, widest: &LinkSetup, unshaped: &str) -> String {
    let one_channel = |s: &&Series| s.link == unshaped && s.settings.contains(ONE_CHANNEL);
    let single = results
        .series
        .iter()
        .filter(one_channel)
        .map(Series::mb_per_s)
        .fold(f64::NAN, f64::min);
    let raw = Direction::BOTH.map(|d| results.raw(&widest.label(), d));
    let (aggregate, n, rate) = (
        raw[0].max(raw[1]),
        widest.links,
        widest.rate_mbit.unwrap_or(0),
    );
    let pct = aggregate / single * 100.0;
    let verdict = match pct < 50.0 {
        true => "so the shaped runs are limited by the links, not by the two CPUs",
        false => {
            "which is not well below it: the CPUs may limit the shaped runs; choose a lower --rate"
        }
    };
    format!(
        "Each link is shaped to {rate} Mbit/s with tbf in both directions. The {n} links together carried \
         {aggregate:.1} MB/s of raw TCP, {pct:.0} % of the {single:.1} MB/s smbcp moved over one unshaped link \
         with one channel (the slower direction, CPU-bound), {verdict}.\n\n"
    )
}

/// A line per setup of more than one link and direction: smbcp against aggregate raw TCP and
/// the target, against smbclient, and the `--variant`s.
fn target_lines(results: &Results, setups: &[LinkSetup]) -> Vec<String> {
    let mut lines = Vec::new();
    for label in setups.iter().filter(|s| s.links > 1).map(LinkSetup::label) {
        for direction in Direction::BOTH {
            let (s, raw) = (
                results.find(&label, "smbcp", direction),
                results.raw(&label, direction),
            );
            let Some(s) = s.filter(|_| !raw.is_nan()) else {
                continue;
            };
            let (mb, of_raw) = (s.mb_per_s(), s.mb_per_s() / raw * 100.0);
            let verdict = if of_raw >= TARGET_OF_RAW_TCP * 100.0 {
                "met"
            } else {
                "missed"
            };
            let client = results
                .smbclient_for(s)
                .map(|c| format!(", {:.2}x smbclient", mb / c.mb_per_s()));
            let variant = |v: &&Series| {
                (&v.link, v.direction, v.tool) == (&label, direction, "smbcp")
                    && v.settings != s.settings
            };
            let variants = results.series.iter().filter(variant);
            let variants: String = variants
                .map(|v| {
                    format!(
                        "; `smbcp{}` {:.2} %",
                        v.settings,
                        v.mb_per_s() / raw * 100.0
                    )
                })
                .collect();
            // Two decimals: 96.99 % must not read as the 97.0 % it misses.
            lines.push(format!(
                "- {label}, {direction}: smbcp {mb:.1} MB/s = {of_raw:.2} % of aggregate raw TCP ({raw:.1} MB/s): target {:.0} % \
                 {verdict}{}{variants}.",
                TARGET_OF_RAW_TCP * 100.0,
                client.unwrap_or_default(),
            ));
        }
    }
    lines
}

/// The channels of smbcp's median run on `label`, a row per link: each channel's bytes and
/// requests, to show how the dispatcher spread the work.
fn channel_table(results: &Results, label: &str) -> Table {
    let mut rows = Vec::new();
    for direction in Direction::BOTH {
        let Some(report) = results
            .find(label, "smbcp", direction)
            .and_then(Series::median_report)
        else {
            continue;
        };
        let total: u64 = report.channels.iter().map(|c| c.bytes).sum();
        for (server, count, bytes) in report.per_server() {
            let mut on_link: Vec<&ChannelUse> = report
                .channels
                .iter()
                .filter(|c| c.server == server)
                .collect();
            on_link.sort_by_key(|c| std::cmp::Reverse(c.bytes));
            let mut locals: Vec<String> = on_link.iter().map(|c| c.local.to_string()).collect();
            locals.sort();
            locals.dedup();
            let link = format!("{} -> {server}", locals.join(", "));
            rows.push((
                direction,
                link,
                count,
                bytes as f64 * 100.0 / total as f64,
                on_link,
            ));
        }
    }
    let joined = |on_link: &[&ChannelUse], f: fn(&ChannelUse) -> String| {
        on_link.iter().map(|c| f(c)).collect::<Vec<_>>().join(" / ")
    };
    Table::of(
        rows,
        &[
            ("links", &|_| label.into()),
            ("direction", &|r| r.0.to_string()),
            ("link (client -> server)", &|r| r.1.clone()),
            (">channels", &|r| r.2.to_string()),
            ("MB on the wire, per channel", &|r| {
                joined(&r.4, |c| num(c.bytes as f64 / 1e6, 1))
            }),
            ("requests, per channel", &|r| {
                joined(&r.4, |c| c.requests.to_string())
            }),
            (">share of bytes %", &|r| num(r.3, 1)),
        ],
    )
}

/// Grouped bars: per setup, aggregate raw TCP, smbcp and smbclient; a panel per direction.
fn chart(results: &Results, setups: &[LinkSetup], title: &str) -> BarChart {
    let panel = |direction: Direction| {
        let groups = setups.iter().map(|setup| {
            let label = setup.label();
            let tool = |name| results.find(&label, name, direction).map(Series::mb_per_s);
            let name = format!(
                "{} link{}",
                setup.links,
                if setup.links == 1 { "" } else { "s" }
            );
            (
                name,
                vec![
                    Some(results.raw(&label, direction)),
                    tool("smbcp"),
                    tool("smbclient"),
                ],
            )
        });
        (direction.to_string(), groups.collect())
    };
    let series = [
        "raw TCP (one iperf3 stream per link, all at once)",
        "smbcp (multichannel)",
        "smbclient (one connection)",
    ];
    let frame = Frame {
        title: title.into(),
        series: series.map(String::from).to_vec(),
        y_unit: "MB/s".into(),
    };
    BarChart {
        frame,
        panels: Direction::BOTH.map(panel).to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::tests::series;
    use smb3_benches::table::cells;

    #[test]
    fn targets_channels_and_chart_use_the_aggregate() {
        let setups = [LinkSetup::shaped(2, 500)];
        let label = setups[0].label();
        let mut variant = series(&label, "smbcp", Direction::Download, &[117.6]);
        variant.settings = " --depth 32".into();
        let series = vec![
            series(&label, "smbcp", Direction::Download, &[90.0, 100.0, 110.0]),
            series(&label, "smbclient", Direction::Download, &[50.0]),
            variant,
            // 2 links x 480 Mbit/s: 120 MB/s together.
            Series::raw(&label, Direction::Download, 2, &[960.0]),
        ];
        let results = Results {
            series,
            ..Results::default()
        };
        assert_eq!(
            target_lines(&results, &setups),
            ["- 2 x 500 Mbit/s, download: smbcp 100.0 MB/s = 83.33 % of aggregate raw TCP (120.0 MB/s): target 97 % \
              missed, 2.00x smbclient; `smbcp --depth 32` 98.00 %."]
        );
        let rows = cells(&channel_table(&results, &label).markdown());
        assert_eq!(
            rows[1][2..7].join("|"),
            "10.100.2.2 -> 10.100.2.1|2|0.0 / 0.0|3 / 1|40.0"
        );
        let c = chart(&results, &setups, "t");
        assert_eq!(
            c.panels[0].1[0],
            ("2 links".into(), vec![Some(120.0), Some(100.0), Some(50.0)])
        );
    }
}
