//! Made-up runs and timelines for the unit tests of the analysis, the report and the chart.

use std::time::Duration;

use super::analysis::Timeline;
use super::run::{last_line, Check, Exit, FailoverCounters, Run};
use super::sampler::Reading;
use super::{Fault, Settings};
use crate::transfer::Direction;

/// A timeline sampled every 50 ms for `seconds`, each link moving `rate(k, t)` bytes/s.
pub(crate) fn timeline(links: usize, seconds: f64, rate: impl Fn(usize, f64) -> f64) -> Timeline {
    let steps = (seconds / 0.05).round() as usize;
    let t: Vec<f64> = (0..=steps).map(|i| i as f64 * 0.05).collect();
    let links = (0..links)
        .map(|k| {
            let mut total = 0.0;
            let mut out = vec![0u64];
            for w in t.windows(2) {
                total += rate(k + 1, w[0]) * (w[1] - w[0]);
                out.push(total.round() as u64);
            }
            out
        })
        .collect();
    Timeline { t, links }
}

pub(crate) const MB: f64 = 1e6;

pub(crate) fn run(fault: Fault, exit: Exit, stderr: &str) -> Run {
    run_with(fault, exit, stderr, 1, 6.0)
}

/// Four links at 1 MB/s for 10 s; link 2 carries nothing from the fault at 3 s until
/// `back` (the other links do not take over, so time lost grows with `back`), and one of
/// the four channels is missing from 3 s to 4 s.
pub(crate) fn run_with(fault: Fault, exit: Exit, stderr: &str, rep: usize, back: f64) -> Run {
    let tl = timeline(4, 10.0, |k, t| {
        if k == 2 && (3.0..back).contains(&t) {
            0.0
        } else {
            1.0 * MB
        }
    });
    let readings = (0..tl.t.len())
        .map(|i| Reading {
            t: tl.t[i],
            rx: tl.links.iter().map(|l| l[i]).collect(),
            tx: vec![0; 4],
            channels: Some(if (3.0..4.0).contains(&tl.t[i]) { 3 } else { 4 }),
        })
        .collect();
    Run {
        fault,
        direction: Direction::Download,
        rep,
        readings,
        fault_at: Some(3.0),
        fault_took: 0.04,
        cut: fault.resets().then_some(4),
        link_up_at: (fault == Fault::Silent).then_some(5.0),
        smbcp_span: (0.1, 10.0),
        exit,
        stderr_line: last_line(stderr),
        report: None,
        counters: (fault == Fault::All).then_some(FailoverCounters {
            channel_losses: 4,
            replays: 12,
            reconnects: 3,
            sessions_reestablished: 1,
            opens_reclaimed: 1,
            opens_lost: 0,
            last_reestablish_ms: Some(200 + 100 * rep as u64),
        }),
        check: if stderr.is_empty() {
            Check::Ok
        } else {
            Check::Missing
        },
        size: 40_000_000,
    }
}

pub(crate) fn settings() -> Settings {
    Settings {
        links: 4,
        rate_mbit: 100,
        fault_link: 2,
        down_for: Duration::from_secs(2),
        deadline: Duration::from_secs(60),
    }
}

pub(crate) fn cells(md: &str) -> Vec<Vec<String>> {
    md.lines()
        .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}
