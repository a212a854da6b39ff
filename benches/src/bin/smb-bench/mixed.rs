//! `smb-bench mixed`: the sequence a user runs by hand rather than the main run's tidy blocks.
//! Round after round smbcp downloads the file, smbclient gets it, smbcp uploads what it
//! downloaded and smbclient puts what it got; every file is verified as it arrives and stays
//! until the next round writes it again, so uploads follow downloads and read files written a
//! moment before, with the machine's memory in whatever state that leaves. Reported as the
//! main table (median and range over the rounds, the worst being the minimum) with the
//! targets: unshaped, smbcp's worst round at least smbclient's median; on the shaped links,
//! smbcp's worst at least 90 % and its median at least 97 % of raw TCP. The `mixed` section
//! of docs/PERFORMANCE.md.

use crate::bench::{describe, undisturbed, Bench, LinkSetup, REMOTE_BIG};
use crate::child;
use crate::results::{Results, Series, THROUGHPUT};
use crate::transfer::{measure, Direction, Sample, Tool, Transfer};
use crate::Common;

pub(crate) fn run(common: &Common) -> Result<(), String> {
    let mut bench = Bench::new(common, common.size(1024, 256), common.reps(5))?;
    let setups = [LinkSetup::UNSHAPED, LinkSetup::shaped(4, common.rate(1000))];
    let tools = [Tool::smbcp(&bench.smbcp, &[]), Tool::Smbclient];
    for setup in &setups {
        let tb = bench.testbed(setup, &["plain"], " (mixed sequence)")?;
        let label = &setup.label();
        bench.raw_tcp(&tb, setup, label)?;
        let mut series: Vec<Series> = (Direction::BOTH.iter())
            .flat_map(|&d| tools.iter().map(move |t| Series::new(label, "plain", d, t)))
            .collect();
        let mut retried = 0;
        for round in 1..=bench.reps {
            for (d, &direction) in Direction::BOTH.iter().enumerate() {
                for (i, tool) in tools.iter().enumerate() {
                    child::check()?;
                    // A tool uploads the file it downloaded earlier in the round.
                    let job = Transfer {
                        remote: match direction {
                            Direction::Download => REMOTE_BIG.into(),
                            Direction::Upload => format!("mixed-upload-{}", tool.name()),
                        },
                        local: bench.scratch.0.join(format!("mixed-{}", tool.name())),
                        keep_target: true,
                        ..bench.job(&tb, "plain", direction)
                    };
                    let (sample, report) =
                        undisturbed(common, &mut retried, || measure(tool, &job))?;
                    let what = format!("{label} round {round}: {} {direction}", tool.name());
                    eprintln!("  {what}: {}", describe(&sample, report.as_ref()));
                    let s = &mut series[d * tools.len() + i];
                    s.samples.push(sample);
                    s.reports.push(report);
                }
            }
        }
        for tool in &tools {
            let _ = std::fs::remove_file(bench.scratch.0.join(format!("mixed-{}", tool.name())));
        }
        bench.results.series.extend(series);
        bench.results.retried += retried;
    }
    let mut body = bench.header();
    body.push_str(&target_lines(
        &bench.results,
        &setups[0].label(),
        &setups[1].label(),
    ));
    body.push('\n');
    body.push_str(&bench.results.table(THROUGHPUT, |_| true).markdown());
    common.publish("mixed", Some("## Mixed sequence"), &body)
}

/// The targets, a line each.
fn target_lines(results: &Results, unshaped: &str, shaped: &str) -> String {
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    let worst = |s: &Series| s.range_of(Sample::mb_per_s).0;
    let mut out = String::from("Targets:\n\n");
    for direction in Direction::BOTH {
        let tool = |link, name| results.find(link, name, direction);
        if let (Some(ours), Some(theirs)) = (tool(unshaped, "smbcp"), tool(unshaped, "smbclient")) {
            let ((lo, hi), median) = (theirs.range_of(Sample::mb_per_s), theirs.mb_per_s());
            out += &format!(
                "- {unshaped}, {direction}: smbcp's worst round {:.1} MB/s against smbclient's median {median:.1} (range \
                 {lo:.1}-{hi:.1}): worst at least smbclient's median {}.\n",
                worst(ours),
                verdict(worst(ours) >= median),
            );
        }
        let raw = results.raw(shaped, direction);
        if let Some(ours) = tool(shaped, "smbcp").filter(|_| !raw.is_nan()) {
            let (worst, median) = (worst(ours) / raw, ours.mb_per_s() / raw);
            out += &format!(
                "- {shaped}, {direction}: smbcp's worst round {:.1} % and median {:.1} % of the links' raw TCP ({raw:.1} \
                 MB/s): worst at least 90 % {}, median at least 97 % {}.\n",
                worst * 100.0,
                median * 100.0,
                verdict(worst >= 0.90),
                verdict(median >= 0.97),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::tests::series;

    #[test]
    fn targets_compare_the_worst_round_with_the_yardsticks() {
        let (u, s) = ("1 x unshaped", "4 x 1000 Mbit/s");
        let series = vec![
            series(u, "smbcp", Direction::Download, &[900.0, 700.0, 950.0]),
            series(u, "smbclient", Direction::Download, &[600.0, 650.0, 800.0]),
            series(u, "smbcp", Direction::Upload, &[900.0, 500.0, 950.0]),
            series(u, "smbclient", Direction::Upload, &[600.0, 650.0, 700.0]),
            // 500 MB/s of raw TCP: worst 95 %, median 98 %; then a median of 96 %.
            series(s, "smbcp", Direction::Download, &[475.0, 490.0, 495.0]),
            series(s, "smbcp", Direction::Upload, &[480.0, 470.0, 490.0]),
            Series::raw(s, Direction::Download, 4, &[4000.0]),
            Series::raw(s, Direction::Upload, 4, &[4000.0]),
        ];
        let text = target_lines(
            &Results {
                series,
                ..Results::default()
            },
            u,
            s,
        );
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("- ")).collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].contains("worst round 700.0") && lines[0].ends_with("median met."));
        assert!(lines[1].contains("worst at least 90 % met, median at least 97 % met"));
        assert!(lines[2].contains("worst round 500.0") && lines[2].ends_with("median missed."));
        assert!(lines[3].contains("median at least 97 % missed"));
    }
}
