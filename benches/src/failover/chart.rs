//! The chart of one fault kind: per direction, the median run's aggregate and per-link rates
//! around the fault, with markers at the fault, the link-up and when every channel was back.

use super::analysis::{Outcome, Timeline};
use super::report::groups;
use super::run::Run;
use super::{Fault, Settings};
use crate::chart::{ChartFrame, LineChart, LinePanel, Marker};

/// The chart plots rates over this many sampling intervals (100 ms): less noise to read.
const PLOT_INTERVALS: usize = 2;

/// Points of a line: (seconds, Mbit/s).
pub type Points = Vec<(f64, f64)>;

/// Rates for plotting: per link and aggregate, Mbit/s over [`PLOT_INTERVALS`], at the middle
/// of each stretch, x in seconds relative to `origin`. Returns (aggregate, per link).
pub fn plot_rates(tl: &Timeline, origin: f64) -> (Points, Vec<Points>) {
    let series = |bytes: &[u64]| -> Points {
        (PLOT_INTERVALS..tl.t.len())
            .step_by(PLOT_INTERVALS)
            .map(|i| {
                let j = i - PLOT_INTERVALS;
                let dt = tl.t[i] - tl.t[j];
                let mbit = (bytes[i] as f64 - bytes[j] as f64) * 8.0 / dt / 1e6;
                ((tl.t[i] + tl.t[j]) / 2.0 - origin, mbit)
            })
            .collect()
    };
    let agg = tl.aggregate();
    (series(&agg), tl.links.iter().map(|l| series(l)).collect())
}

/// The line chart of one fault kind: a panel per direction showing its median run,
/// aggregate and per-link Mbit/s over seconds from the fault, markers at the fault, the
/// link-up and when every channel was back.
pub fn chart(runs: &[Run], fault: Fault, settings: &Settings, size: u64) -> LineChart {
    let mut series = vec!["all links".to_string()];
    series.extend((1..=settings.links).map(|k| format!("link {k}")));
    let what = match fault {
        Fault::Rst => format!(
            "link {}'s connections reset by the server",
            settings.fault_link
        ),
        Fault::Silent => format!(
            "link {} down for {} s",
            settings.fault_link,
            settings.down_for.as_secs()
        ),
        Fault::All => "every connection of port 445 reset by the server".into(),
    };
    let panels = groups(runs)
        .iter()
        .filter(|g| g.fault == fault)
        .filter_map(|g| {
            let run = g.median_run(settings.fault_link)?;
            Some(chart_panel(run, g.runs.len()))
        })
        .collect();
    LineChart {
        frame: ChartFrame {
            title: format!(
                "{}: {what} ({} MiB over {} x {} Mbit/s, 100 ms averages)",
                fault.name(),
                size >> 20,
                settings.links,
                settings.rate_mbit
            ),
            series,
            y_unit: "Mbit/s".into(),
        },
        x_label: "seconds from the fault".into(),
        panels,
    }
}

/// The panel of `run`, the median of `of` repetitions.
fn chart_panel(run: &Run, of: usize) -> LinePanel {
    let origin = run.fault_at.unwrap_or(0.0);
    let (agg, per_link) = plot_rates(&run.timeline(), origin);
    let mut lines = vec![agg];
    lines.extend(per_link);
    let mut markers = Vec::new();
    if run.fault_at.is_some() {
        markers.push(Marker {
            x: 0.0,
            label: run.fault.name().into(),
        });
    }
    if let Some(up) = run.link_up_at {
        markers.push(Marker {
            x: up - origin,
            label: "link up".into(),
        });
    }
    if let (Some(Outcome::After(s)), Some(from)) = (run.channels_back(), run.recovery_from()) {
        markers.push(Marker {
            x: from + s - origin,
            label: "all channels back".into(),
        });
    }
    let state = if run.failure().is_some() {
        format!(" (smbcp failed, exit {})", run.exit)
    } else {
        String::new()
    };
    let which = if of > 1 {
        format!(", run #{} of {of} (median time lost)", run.rep)
    } else {
        String::new()
    };
    LinePanel {
        title: format!("{}{state}{which}", run.direction),
        lines,
        markers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Fingerprint;
    use crate::failover::fixtures::{run, run_with, settings, timeline, MB};
    use crate::failover::report::section;
    use crate::failover::run::Exit;
    use crate::machine::Facts;
    use crate::transfer::Direction;

    #[test]
    fn plot_rates_are_mbit_at_interval_middles() {
        let tl = timeline(2, 1.0, |k, _| k as f64 * MB);
        let (agg, links) = plot_rates(&tl, 0.5);
        assert_eq!(agg.len(), 10);
        assert!((agg[0].0 - (0.05 - 0.5)).abs() < 1e-9);
        assert!((agg[0].1 - 24.0).abs() < 1e-6, "{agg:?}");
        assert!((links[1][3].1 - 16.0).abs() < 1e-6);
    }

    #[test]
    fn chart_has_a_panel_per_direction_with_markers() {
        let mut up = run(Fault::Silent, Exit::Code(0), "");
        up.direction = Direction::Upload;
        let runs = vec![
            run(Fault::Rst, Exit::Code(0), ""),
            run(Fault::Silent, Exit::Code(1), "x"),
            up,
        ];
        let c = chart(&runs, Fault::Silent, &settings(), 40 << 20);
        assert_eq!(c.frame.series.len(), 5);
        assert_eq!(c.panels.len(), 2);
        assert_eq!(c.panels[0].title, "download (smbcp failed, exit 1)");
        assert_eq!(c.panels[1].title, "upload");
        let xs: Vec<f64> = c.panels[0].markers.iter().map(|m| m.x).collect();
        // The fault, the link-up, every channel back right at the link-up.
        assert_eq!(xs.len(), 3, "{xs:?}");
        assert_eq!(xs[..2], [0.0, 2.0]);
        assert!((xs[2] - 2.0).abs() < 0.051, "{xs:?}");
        // x is relative to the fault at 3 s.
        assert!(c.panels[0].lines[0][0].0 < -2.9);
        let svg = c.svg().unwrap();
        assert!(svg.contains("silent: link 2 down for 2 s"), "{svg}");
        let facts = Facts {
            date: "today".into(),
            nproc: 2,
            cpu: "cpu".into(),
            kernel: "k".into(),
            samba: "Samba 4".into(),
            iperf3: "iperf 3".into(),
            commit: "abc".into(),
        };
        let md = section(
            &facts,
            &runs,
            &settings(),
            &Fingerprint {
                len: 40 << 20,
                sha256: "ab".repeat(32),
            },
            &[(Fault::Silent, "perf/failover-silent.svg".into())],
        );
        assert!(md.contains("](perf/failover-silent.svg)"), "{md}");
        assert!(md.starts_with("Measured today on cpu (2 CPUs), kernel k, Samba 4, commit abc."));
        for kind in ["**rst**", "**silent**", "**all** (`testbed cut`)"] {
            assert!(md.contains(kind), "{kind}: {md}");
        }
    }

    #[test]
    fn chart_shows_the_median_run() {
        let runs = vec![
            run_with(Fault::All, Exit::Code(0), "", 1, 8.0),
            run_with(Fault::All, Exit::Code(0), "", 2, 5.0),
            run_with(Fault::All, Exit::Code(0), "", 3, 6.0),
        ];
        let c = chart(&runs, Fault::All, &settings(), 40 << 20);
        assert_eq!(c.panels.len(), 1);
        assert_eq!(
            c.panels[0].title,
            "download, run #3 of 3 (median time lost)"
        );
        assert!(c
            .frame
            .title
            .starts_with("all: every connection of port 445 reset"));
        assert!(chart(&runs, Fault::Rst, &settings(), 1).panels.is_empty());
    }
}
