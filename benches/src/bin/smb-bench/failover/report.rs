//! What the failover runs say: the table of medians per fault kind and direction, an event
//! line per run, the chart of a fault kind, and the section around them.

use smb3_benches::stats::{median, min_max};
use smb3_benches::table::Table;

use super::analysis::{self, all_channels_back, median_outcome, Metrics, Outcome, Timeline};
use super::sampler::SAMPLE_EVERY;
use super::{Fault, Run, Settings, FAULT_AT, FAULT_LINK};
use crate::bench::Bench;
use crate::chart::{Frame, Line, LineChart, LinePanel};
use crate::results::channels_cell;

impl Run {
    fn timeline(&self) -> Timeline {
        Timeline::from_readings(&self.readings, self.direction)
    }

    /// The metrics, or why there are none.
    fn metrics(&self) -> Result<Metrics, String> {
        let Some(at) = self.fault_at else {
            let moved = self.timeline().aggregate().last().copied().unwrap_or(0);
            let pct = moved as f64 * 100.0 / self.size.max(1) as f64;
            return Err(format!(
                "fault not injected: the transfer ended at {pct:.0} % of the file"
            ));
        };
        analysis::analyse(&self.timeline(), at, self.link_up_at, FAULT_LINK, self.size)
    }

    /// Where recovery counts from: the fault when it reset connections, else the link-up.
    fn recovery_from(&self) -> Option<f64> {
        if self.fault.resets() {
            self.fault_at
        } else {
            self.link_up_at
        }
    }

    fn channels_back(&self) -> Option<Outcome> {
        all_channels_back(&self.readings, self.fault_at?, self.recovery_from()?)
    }

    /// The metrics of a run smbcp finished.
    fn measured(&self) -> Option<Metrics> {
        self.failure
            .is_none()
            .then(|| self.metrics().ok())
            .flatten()
    }
}

/// The runs of each fault kind and direction, in the order each pair first ran.
fn groups(runs: &[Run]) -> Vec<Vec<&Run>> {
    let mut out: Vec<Vec<&Run>> = Vec::new();
    for run in runs {
        match out
            .iter_mut()
            .find(|g| (g[0].fault, g[0].direction) == (run.fault, run.direction))
        {
            Some(group) => group.push(run),
            None => out.push(vec![run]),
        }
    }
    out
}

/// The measured run of median time lost (the lower middle one of an even count), or the
/// first run when none could be measured.
fn median_run<'a>(group: &[&'a Run]) -> Option<&'a Run> {
    let mut measured: Vec<(&Run, f64)> = group
        .iter()
        .filter_map(|r| Some((*r, r.measured()?.time_lost)))
        .collect();
    measured.sort_by(|a, b| a.1.total_cmp(&b.1));
    match measured.len() {
        0 => group.first().copied(),
        n => Some(measured[(n - 1) / 2].0),
    }
}

fn outcome_cell(o: Outcome) -> String {
    match o {
        Outcome::After(s) => format!("{:.0}", s * 1e3),
        Outcome::NotWithin(s) => format!("not within {s:.1} s"),
    }
}

/// One value when every run gave the same, else each run's in run order.
fn per_run_cell(values: Vec<String>) -> String {
    match values.first() {
        Some(first) if values.iter().all(|v| v == first) => first.clone(),
        _ => values.join(", "),
    }
}

/// One row per fault kind and direction: medians over the runs smbcp finished.
pub(crate) fn table(runs: &[Run]) -> Table {
    let mut t = Table::new(&format!(
        "fault | direction | >runs | >pre-fault Mbit/s | >gap ms | >dip MB | >time lost s |\
         >time lost range s | >link {FAULT_LINK} back ms | >all channels back ms |\
         >sessions re-established | >smbcp s | >channels at end (per link) | sha256 | >smbcp exit"
    ));
    for group in groups(runs) {
        let (first, n) = (group[0], group.len());
        let measured: Vec<(&Run, Metrics)> = group
            .iter()
            .filter_map(|r| Some((*r, r.measured()?)))
            .collect();
        let runs = match n - measured.len() {
            0 => n.to_string(),
            missing => format!("{n} ({missing} not measured)"),
        };
        let mut row = vec![first.fault.to_string(), first.direction.to_string(), runs];
        if measured.is_empty() {
            let why = first.metrics().err().unwrap_or_default();
            let why = first
                .failure
                .clone()
                .unwrap_or_else(|| format!("not measurable: {why}"));
            row.extend(
                ["-".to_string(), why]
                    .into_iter()
                    .chain(["-"; 5].map(String::from)),
            );
        } else {
            let m = || measured.iter().map(|(_, m)| m);
            let gap = median_outcome(&m().map(|m| m.gap).collect::<Vec<_>>());
            let dip = median(m().map(|m| m.dip)) / 1e6;
            let lost = || m().map(|m| m.time_lost);
            let since = if first.fault.resets() {
                "the fault"
            } else {
                "link-up"
            };
            let link_back =
                match median_outcome(&m().filter_map(|m| m.link_back).collect::<Vec<_>>()) {
                    Some(o) => format!("{} after {since}", outcome_cell(o)),
                    None if first.fault.resets() => "transfer ended at the fault".into(),
                    None => "transfer ended before link-up".into(),
                };
            let channels: Vec<Outcome> = measured
                .iter()
                .filter_map(|(r, _)| r.channels_back())
                .collect();
            let (lo, hi) = min_max(lost());
            row.extend([
                format!("{:.0}", median(m().map(|m| m.pre_fault)) * 8.0 / 1e6),
                gap.map_or("-".into(), outcome_cell),
                match gap {
                    Some(Outcome::NotWithin(_)) => format!(">= {dip:.1}"),
                    _ => format!("{dip:.1}"),
                },
                format!("{:.2}", median(lost())),
                format!("{lo:.2}-{hi:.2}"),
                link_back,
                median_outcome(&channels).map_or("-".into(), outcome_cell),
            ]);
        }
        // How many times smbcp re-established its session in each run, and the median time
        // the last one took.
        let counters: Vec<&serde_json::Value> =
            group.iter().filter_map(|r| r.counters.as_ref()).collect();
        let sessions = per_run_cell(
            counters
                .iter()
                .map(|c| c["sessions_reestablished"].to_string())
                .collect(),
        );
        let took = median(
            counters
                .iter()
                .filter_map(|c| c["last_reestablish_ms"].as_f64()),
        );
        row.extend([
            match (counters.is_empty(), took.is_nan()) {
                (true, _) => "-".into(),
                (false, true) => sessions,
                (false, false) => format!("{sessions} in {took:.0} ms"),
            },
            format!(
                "{:.1}",
                median(group.iter().map(|r| r.smbcp_span.1 - r.smbcp_span.0))
            ),
            median_run(&group)
                .and_then(|r| r.report.as_ref())
                .map_or("-".into(), channels_cell),
            per_run_cell(group.iter().map(|r| r.check.clone()).collect()),
            per_run_cell(group.iter().map(|r| r.exit.clone()).collect()),
        ]);
        t.row(row);
    }
    t
}

/// One line per run with what happened when, and what smbcp counted.
pub(crate) fn event_lines(runs: &[Run]) -> Vec<String> {
    runs.iter().map(event_line).collect()
}

fn event_line(run: &Run) -> String {
    let (k, tl) = (FAULT_LINK, run.timeline());
    let (start, end) = run.smbcp_span;
    let mut line = format!(
        "- {} {} #{}: smbcp ran {start:.1}-{end:.1} s",
        run.fault, run.direction, run.rep
    );
    if let Some(at) = run.fault_at {
        let what = match (run.fault, run.cut) {
            (Fault::Rst, Some(n)) => format!("{n} connection(s) on link {k} reset"),
            (Fault::All, Some(n)) => format!("{n} connection(s) on every link reset"),
            _ => format!("link {k} down"),
        };
        let took = run.fault_took * 1e3;
        line.push_str(&format!(
            ", {what} at {at:.2} s (the testbed command took {took:.0} ms)"
        ));
    }
    if let Some(up) = run.link_up_at {
        line.push_str(&format!(", link up at {up:.2} s"));
    }
    let longest = tl.t.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max) * 1e3;
    let moved = tl.aggregate().last().copied().unwrap_or(0) as f64 / 1e6;
    let samples = tl.t.len();
    line.push_str(&format!("; {moved:.0} MB on the wire in all, sampled {samples} times (longest interval {longest:.0} ms)"));
    if let Some(c) = &run.counters {
        line.push_str(&format!(
            "; smbcp counted {} channel(s) lost, {} request(s) replayed, {} reconnect(s)",
            c["channel_losses"], c["replays"], c["reconnects"]
        ));
        if c["sessions_reestablished"].as_u64() > Some(0) {
            let took = c["last_reestablish_ms"]
                .as_u64()
                .map_or(String::new(), |ms| format!(", the last in {ms} ms"));
            line.push_str(&format!(
                ", session re-established {} time(s){took} ({} open(s) reclaimed, {} lost)",
                c["sessions_reestablished"], c["opens_reclaimed"], c["opens_lost"]
            ));
        }
    }
    if let Some(f) = &run.failure {
        line.push_str(&format!("; {f}"));
    }
    line + "."
}

/// The chart plots rates over this many sampling intervals (100 ms): less noise to read.
const PLOT_INTERVALS: usize = 2;

/// Per link and in all, Mbit/s over [`PLOT_INTERVALS`] at the middle of each stretch, x in
/// seconds from `origin`: the aggregate first, then each link.
fn plot_rates(tl: &Timeline, origin: f64) -> Vec<Line> {
    let rates = |bytes: &[u64]| -> Line {
        let points = (PLOT_INTERVALS..tl.t.len())
            .step_by(PLOT_INTERVALS)
            .map(|i| {
                let j = i - PLOT_INTERVALS;
                let mbit = (bytes[i] as f64 - bytes[j] as f64) * 8.0 / (tl.t[i] - tl.t[j]) / 1e6;
                ((tl.t[i] + tl.t[j]) / 2.0 - origin, mbit)
            });
        points.collect()
    };
    std::iter::once(rates(&tl.aggregate()))
        .chain(tl.links.iter().map(|l| rates(l)))
        .collect()
}

/// A panel per direction with its median run's rates over seconds from the fault, markers at
/// the fault, the link-up and when every channel was back.
pub(crate) fn chart(runs: &[Run], fault: Fault, settings: &Settings, size: u64) -> LineChart {
    let k = FAULT_LINK;
    let what = match fault {
        Fault::Rst => format!("link {k}'s connections reset by the server"),
        Fault::Silent => format!("link {k} down for {} s", settings.down_for.as_secs()),
        Fault::All => "every connection of port 445 reset by the server".into(),
    };
    let series = std::iter::once("all links".to_string())
        .chain((1..=settings.links).map(|k| format!("link {k}")));
    let groups = groups(runs).into_iter().filter(|g| g[0].fault == fault);
    let (links, rate, mib) = (settings.links, settings.rate_mbit, size >> 20);
    LineChart {
        frame: Frame {
            title: format!(
                "{fault}: {what} ({mib} MiB over {links} x {rate} Mbit/s, 100 ms averages)"
            ),
            series: series.collect(),
            y_unit: "Mbit/s".into(),
        },
        x_label: "seconds from the fault".into(),
        panels: groups
            .filter_map(|g| Some(chart_panel(median_run(&g)?, g.len())))
            .collect(),
    }
}

/// The panel of `run`, the median of `of` repetitions.
fn chart_panel(run: &Run, of: usize) -> LinePanel {
    let origin = run.fault_at.unwrap_or(0.0);
    let mut markers = Vec::new();
    if run.fault_at.is_some() {
        markers.push((0.0, run.fault.to_string()));
    }
    if let Some(up) = run.link_up_at {
        markers.push((up - origin, "link up".into()));
    }
    if let (Some(Outcome::After(s)), Some(from)) = (run.channels_back(), run.recovery_from()) {
        markers.push((from + s - origin, "all channels back".into()));
    }
    let state = run.failure.as_ref().map_or(String::new(), |_| {
        format!(" (smbcp failed, exit {})", run.exit)
    });
    let which = match of {
        1 => String::new(),
        _ => format!(", run #{} of {of} (median time lost)", run.rep),
    };
    let title = format!("{}{state}{which}", run.direction);
    LinePanel {
        title,
        lines: plot_rates(&run.timeline(), origin),
        markers,
    }
}

/// The generated section without its charts: how it was measured, the table, the events.
pub(crate) fn section(bench: &Bench<'_>, runs: &[Run], settings: &Settings) -> String {
    let reps = groups(runs).iter().map(Vec::len).max().unwrap_or(0);
    let (k, n) = (FAULT_LINK, settings.links);
    let what = format!(
        "file {mib} MiB (sha256 {sha}); {n} links of {rate} Mbit/s each; every fault kind and direction ran {reps} \
         time(s), taking turns; the fault comes once {pct:.0} % of the file has crossed the wire. **rst** (`testbed \
         cut {k}`): the server resets link {k}'s connections and the link stays up, so the client loses those \
         channels, moves their requests to the others and can reconnect at once. **silent** (`testbed link-down {k}`, \
         `link-up {k}` {down} s later): link {k} drops every packet without a word, so the client has to notice the \
         loss by itself. **all** (`testbed cut`): the server resets every connection of port 445 at once, so no \
         channel is left and the client must re-establish the session (PreviousSessionId, durable opens reclaimed) \
         before the transfer can go on. Client-side veth byte counters and the established connections to port 445 \
         are read every {every} ms",
        mib = bench.reference.len >> 20,
        sha = &bench.reference.sha256[..16],
        rate = settings.rate_mbit,
        pct = FAULT_AT * 100.0,
        down = settings.down_for.as_secs(),
        every = SAMPLE_EVERY.as_millis(),
    );
    let mut out = bench.facts.header(false, &what, &[], None);
    out.push_str(&format!(
        "Gap: from the fault until the aggregate holds {gap:.0} % of what the surviving links carry ({n1}/{n} of the \
         pre-fault rate) for {sustain} ms, rates over a trailing {smooth} ms. Dip: bytes short of the pre-fault rate \
         during the gap. Time lost: how much longer the whole transfer took than its bytes need at the pre-fault \
         rate, which also counts a slow tail of requests that waited on the dead link (a client that fails over \
         perfectly loses the dead link's share of the down time, {ideal:.1} s, in the silent case and next to nothing \
         with rst). Link {k} back: from the link-up (silent) or the fault (rst, all) until link {k} holds {back:.0} % \
         of its pre-fault share for {sustain} ms. All channels back: from the same moment until the established \
         connections to port 445, having fallen, are as many again as before the fault (the planned channels). \
         Sessions re-established: smbcp's own count (`--json`) and how long the last one took. Each row shows the \
         medians over the runs smbcp finished, the range of time lost, and sha256 and exit of every run; each chart \
         shows the run of median time lost. Rates count bytes on the wire (headers included).\n\n",
        gap = analysis::GAP_THRESHOLD * 100.0,
        n1 = n - 1,
        sustain = analysis::SUSTAIN * 1e3,
        smooth = SAMPLE_EVERY.as_millis() * analysis::SMOOTH_INTERVALS as u128,
        ideal = settings.down_for.as_secs_f64() / n as f64,
        back = analysis::LINK_BACK_THRESHOLD * 100.0,
    ));
    out.push_str(&table(runs).markdown());
    out.push_str(&format!("\n{}\n", event_lines(runs).join("\n")));
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::sampler::Reading;
    use super::*;
    use crate::failover::analysis::tests::{timeline, MB};
    use crate::transfer::Direction;
    use smb3_benches::table::cells;

    /// Four links at 1 MB/s for 10 s; link 2 carries nothing from the fault at 3 s until
    /// `back` (so 0.25 s are lost per MB it misses), and one of the four channels is missing
    /// from 3 s to 4 s. `exit` other than "0" fails the run.
    fn run(fault: Fault, exit: &str, rep: usize, back: f64) -> Run {
        let tl = timeline(4, 10.0, |k, t| {
            if k == 2 && (3.0..back).contains(&t) {
                0.0
            } else {
                MB
            }
        });
        let reading = |i: usize| {
            let (t, channels) = (
                tl.t[i],
                Some(if (3.0..4.0).contains(&tl.t[i]) { 3 } else { 4 }),
            );
            Reading {
                t,
                rx: tl.links.iter().map(|l| l[i]).collect(),
                tx: vec![0; 4],
                channels,
            }
        };
        let counters = serde_json::json!({"channel_losses": 4, "replays": 9, "reconnects": 4,
            "sessions_reestablished": 1, "last_reestablish_ms": 200 + 100 * rep, "opens_reclaimed": 1, "opens_lost": 0});
        let ok = exit == "0";
        Run {
            fault,
            direction: Direction::Download,
            rep,
            readings: (0..tl.t.len()).map(reading).collect(),
            fault_at: Some(3.0),
            fault_took: 0.04,
            cut: fault.resets().then_some(4),
            link_up_at: (fault == Fault::Silent).then_some(5.0),
            smbcp_span: (0.1, 10.0),
            exit: exit.into(),
            failure: (!ok).then(|| format!("transfer failed: exit {exit}")),
            report: None,
            counters: (fault == Fault::All).then_some(counters),
            check: if ok { "ok" } else { "no file" }.into(),
            size: 40_000_000,
        }
    }

    #[test]
    fn the_table_and_the_chart_show_medians_or_the_failure() {
        let runs = [
            (Fault::Rst, "0", 1, 6.0),
            (Fault::Rst, "0", 2, 5.0),
            (Fault::Rst, "0", 3, 8.0),
        ]
        .into_iter()
        .chain([
            (Fault::Silent, "1", 1, 6.0),
            (Fault::All, "0", 1, 6.0),
            (Fault::All, "0", 2, 6.0),
        ]);
        let runs: Vec<Run> = runs
            .map(|(f, exit, rep, back)| run(f, exit, rep, back))
            .collect();
        let rows = cells(&table(&runs).markdown());
        // 32 Mbit/s before the fault; no gap (the others carry on); link 2's missing 3, 2 and
        // 5 MB cost 0.75, 0.5 and 1.25 s; a channel is missing for a second.
        let rst = "rst|download|3|32|0|0.0|0.75|0.50-1.25|3000 after the fault|1000|-|9.9|-|ok|0";
        assert_eq!(rows[0].join("|"), rst);
        assert_eq!(
            rows[1][2..5].join("|"),
            "1 (1 not measured)|-|transfer failed: exit 1"
        );
        assert_eq!(
            (rows[2][0].as_str(), rows[2][10].as_str()),
            ("all", "1 in 350 ms")
        );
        let events = event_lines(&runs);
        assert!(
            events[0].contains("4 connection(s) on link 2 reset at 3.00 s"),
            "{events:?}"
        );
        assert!(events[3].contains("link up at 5.00 s"), "{events:?}");
        assert!(
            events[5].contains("session re-established 1 time(s), the last in 400 ms"),
            "{events:?}"
        );
        let settings = Settings {
            links: 4,
            rate_mbit: 100,
            down_for: Duration::from_secs(2),
            deadline: Duration::ZERO,
        };
        let c = chart(&runs, Fault::Silent, &settings, 40 << 20);
        assert_eq!(
            (c.frame.series.len(), c.panels[0].title.as_str()),
            (5, "download (smbcp failed, exit 1)")
        );
        // The fault, the link-up, every channel back right at the link-up; x from the fault.
        let xs: Vec<f64> = c.panels[0].markers.iter().map(|m| m.0).collect();
        assert!(
            xs[..2] == [0.0, 2.0] && (xs[2] - 2.0).abs() < 0.051,
            "{xs:?}"
        );
        assert!(c.svg().unwrap().contains("silent: link 2 down for 2 s"));
        let title = &chart(&runs, Fault::Rst, &settings, 1).panels[0].title;
        assert_eq!(title, "download, run #1 of 3 (median time lost)");
        let lines = plot_rates(&timeline(2, 1.0, |k, _| k as f64 * MB), 0.5);
        let (agg, link2) = (lines[0][0], lines[2][3]);
        assert!(
            (agg.0 + 0.45).abs() < 1e-9
                && (agg.1 - 24.0).abs() < 1e-6
                && (link2.1 - 16.0).abs() < 1e-6
        );
    }
}
