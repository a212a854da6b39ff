//! What the runs say, in words and numbers: the table of medians per fault kind and
//! direction, one event line per run, the counter readings as CSV, and the Markdown section
//! for docs/PERFORMANCE.md.

use super::analysis::{
    all_channels_back, analyse, median_outcome, Metrics, Outcome, Timeline, GAP_THRESHOLD,
    LINK_BACK_THRESHOLD, SMOOTH_INTERVALS, SUSTAIN,
};
use super::run::{Exit, FailoverCounters, Run};
use super::sampler::SAMPLE_EVERY;
use super::{Fault, Settings, FAULT_AT};
use crate::data::Fingerprint;
use crate::machine::Facts;
use crate::multichannel::channels_cell;
use crate::stats::{median, min_max};
use crate::table::Table;
use crate::transfer::Direction;

impl Run {
    /// The series of this run's direction.
    pub fn timeline(&self) -> Timeline {
        Timeline::from_readings(&self.readings, self.direction)
    }

    /// The metrics, or why there are none.
    pub fn metrics(&self, fault_link: usize) -> Result<Metrics, String> {
        let at = self.fault_at.ok_or_else(|| {
            let moved = self.timeline().aggregate().last().copied().unwrap_or(0);
            format!(
                "fault not injected: the transfer ended at {:.0} % of the file",
                moved as f64 * 100.0 / self.size.max(1) as f64
            )
        })?;
        analyse(&self.timeline(), at, self.link_up_at, fault_link, self.size)
    }

    /// Where recovery is measured from: the fault when it reset connections, the link-up
    /// when the link went down.
    pub(crate) fn recovery_from(&self) -> Option<f64> {
        if self.fault.resets() {
            self.fault_at
        } else {
            self.link_up_at
        }
    }

    /// When every channel was back (see [`all_channels_back`]).
    pub fn channels_back(&self) -> Option<Outcome> {
        all_channels_back(&self.readings, self.fault_at?, self.recovery_from()?)
    }

    /// How long smbcp ran.
    pub fn smbcp_seconds(&self) -> f64 {
        self.smbcp_span.1 - self.smbcp_span.0
    }

    /// `None` when smbcp succeeded, else what to show instead of numbers.
    pub fn failure(&self) -> Option<String> {
        match (&self.exit, self.stderr_line.as_str()) {
            (e, _) if e.success() => None,
            (Exit::Killed(s), _) => Some(format!(
                "transfer failed: no end within {s} s, smbcp killed"
            )),
            (e, "") => Some(format!("transfer failed: exit {e}, nothing on stderr")),
            (_, line) => Some(format!("transfer failed: {line}")),
        }
    }

    /// Why the run gives no numbers (smbcp failed, or the series says nothing); empty when
    /// it does.
    fn why_unmeasured(&self, fault_link: usize) -> String {
        self.failure()
            .unwrap_or_else(|| match self.metrics(fault_link) {
                Err(why) => format!("not measurable: {why}"),
                Ok(_) => String::new(),
            })
    }
}

/// The repetitions of one fault kind and direction.
#[derive(Debug, Clone)]
pub struct Group<'a> {
    /// Which fault.
    pub fault: Fault,
    /// Which way the data went.
    pub direction: Direction,
    /// The runs, in the order they ran.
    pub runs: Vec<&'a Run>,
}

/// The runs grouped by fault kind and direction, in the order each pair first ran.
pub fn groups(runs: &[Run]) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for run in runs {
        match out
            .iter_mut()
            .find(|g| g.fault == run.fault && g.direction == run.direction)
        {
            Some(group) => group.runs.push(run),
            None => out.push(Group {
                fault: run.fault,
                direction: run.direction,
                runs: vec![run],
            }),
        }
    }
    out
}

/// A run that smbcp finished and whose series could be measured, with its numbers.
struct Measured<'a> {
    run: &'a Run,
    metrics: Metrics,
}

impl<'a> Group<'a> {
    /// The runs the medians are taken over.
    fn measured(&self, fault_link: usize) -> Vec<Measured<'a>> {
        self.runs
            .iter()
            .filter(|run| run.failure().is_none())
            .filter_map(|&run| {
                let metrics = run.metrics(fault_link).ok()?;
                Some(Measured { run, metrics })
            })
            .collect()
    }

    /// The measured run of median time lost (the lower middle one of an even count), or the
    /// first run when none could be measured.
    pub fn median_run(&self, fault_link: usize) -> Option<&'a Run> {
        let mut measured = self.measured(fault_link);
        measured.sort_by(|a, b| a.metrics.time_lost.total_cmp(&b.metrics.time_lost));
        match measured.len() {
            0 => self.runs.first().copied(),
            n => Some(measured[(n - 1) / 2].run),
        }
    }
}

fn ms(seconds: f64) -> String {
    format!("{:.0}", seconds * 1e3)
}

fn outcome_cell(o: Outcome) -> String {
    match o {
        Outcome::After(s) => ms(s),
        Outcome::NotWithin(s) => format!("not within {s:.1} s"),
    }
}

/// One value when every run gave the same, else each run's in run order.
fn per_run_cell(values: impl IntoIterator<Item = String>) -> String {
    let values: Vec<String> = values.into_iter().collect();
    match values.first() {
        Some(first) if values.iter().all(|v| v == first) => first.clone(),
        _ => values.join(", "),
    }
}

fn median_of(values: impl IntoIterator<Item = f64>) -> f64 {
    median(&values.into_iter().collect::<Vec<_>>()).unwrap_or(f64::NAN)
}

/// The table: one row per fault kind and direction, medians over its repetitions.
pub fn table(runs: &[Run], settings: &Settings) -> Table {
    let k = settings.fault_link;
    let mut t = Table::new(&[
        "fault",
        "direction",
        ">runs",
        ">pre-fault Mbit/s",
        ">gap ms",
        ">dip MB",
        ">time lost s",
        ">time lost range s",
        &format!(">link {k} back ms"),
        ">all channels back ms",
        ">sessions re-established",
        ">smbcp s",
        ">channels at end (per link)",
        "sha256",
        ">smbcp exit",
    ]);
    for group in groups(runs) {
        t.row(group_row(&group, settings));
    }
    t
}

fn group_row(group: &Group<'_>, settings: &Settings) -> Vec<String> {
    let measured = group.measured(settings.fault_link);
    let unmeasured = group.runs.len() - measured.len();
    let runs = match unmeasured {
        0 => group.runs.len().to_string(),
        n => format!("{} ({n} not measured)", group.runs.len()),
    };
    let channels_at_end = group
        .median_run(settings.fault_link)
        .and_then(|run| run.report.as_ref())
        .map_or("-".into(), |r| channels_cell(Some(r)));
    let mut cells = vec![group.fault.to_string(), group.direction.to_string(), runs];
    cells.extend(measured_cells(group, &measured, settings.fault_link));
    cells.extend([
        reestablished_cell(&group.runs),
        format!(
            "{:.1}",
            median_of(group.runs.iter().map(|r| r.smbcp_seconds()))
        ),
        channels_at_end,
        per_run_cell(group.runs.iter().map(|r| r.check.to_string())),
        per_run_cell(group.runs.iter().map(|r| r.exit.to_string())),
    ]);
    cells
}

/// Pre-fault rate, gap, dip, time lost and its range, link back, all channels back: the
/// medians over `measured`, or why there are none.
fn measured_cells(group: &Group<'_>, measured: &[Measured<'_>], fault_link: usize) -> Vec<String> {
    let dash = || "-".to_string();
    if measured.is_empty() {
        let why = group
            .runs
            .first()
            .map_or(String::new(), |run| run.why_unmeasured(fault_link));
        return vec![dash(), why, dash(), dash(), dash(), dash(), dash()];
    }
    let pre_fault = median_of(measured.iter().map(|m| m.metrics.pre_fault));
    let gaps: Vec<Outcome> = measured.iter().map(|m| m.metrics.gap).collect();
    let gap = median_outcome(&gaps);
    let dip = median_of(measured.iter().map(|m| m.metrics.dip)) / 1e6;
    let dip = match gap {
        Some(Outcome::NotWithin(_)) => format!(">= {dip:.1}"),
        _ => format!("{dip:.1}"),
    };
    let lost: Vec<f64> = measured.iter().map(|m| m.metrics.time_lost).collect();
    let range = min_max(&lost).map_or(dash(), |(lo, hi)| format!("{lo:.2}-{hi:.2}"));
    let backs: Vec<Outcome> = measured
        .iter()
        .filter_map(|m| m.metrics.link_back)
        .collect();
    let since = if group.fault.resets() {
        "the fault"
    } else {
        "link-up"
    };
    let link_back = match median_outcome(&backs) {
        Some(o) => format!("{} after {since}", outcome_cell(o)),
        None if group.fault.resets() => "transfer ended at the fault".into(),
        None => "transfer ended before link-up".into(),
    };
    let channels: Vec<Outcome> = measured
        .iter()
        .filter_map(|m| m.run.channels_back())
        .collect();
    vec![
        format!("{:.0}", pre_fault * 8.0 / 1e6),
        gap.map_or(dash(), outcome_cell),
        dip,
        format!("{:.2}", median_of(lost.iter().copied())),
        range,
        link_back,
        median_outcome(&channels).map_or(dash(), outcome_cell),
    ]
}

/// How many times smbcp re-established its session in each run, and the median time the
/// last re-establishment took.
fn reestablished_cell(runs: &[&Run]) -> String {
    let counters: Vec<FailoverCounters> = runs.iter().filter_map(|r| r.counters).collect();
    if counters.is_empty() {
        return "-".into();
    }
    let sessions = per_run_cell(
        counters
            .iter()
            .map(|c| c.sessions_reestablished.to_string()),
    );
    let took: Vec<f64> = counters
        .iter()
        .filter_map(|c| c.last_reestablish_ms)
        .map(|ms| ms as f64)
        .collect();
    match median(&took) {
        Some(ms) => format!("{sessions} in {ms:.0} ms"),
        None => sessions,
    }
}

/// One line per run with what happened when: the fault, the link-up, the end, and what
/// smbcp counted.
pub fn event_lines(runs: &[Run], settings: &Settings) -> Vec<String> {
    runs.iter().map(|run| event_line(run, settings)).collect()
}

fn event_line(run: &Run, settings: &Settings) -> String {
    let k = settings.fault_link;
    let tl = run.timeline();
    let moved = tl.aggregate().last().copied().unwrap_or(0);
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
        line.push_str(&format!(
            ", {what} at {at:.2} s (the testbed command took {:.0} ms)",
            run.fault_took * 1e3
        ));
    }
    if let Some(up) = run.link_up_at {
        line.push_str(&format!(", link up at {up:.2} s"));
    }
    line.push_str(&format!(
        "; {:.0} MB on the wire in all, sampled {} times (longest interval {:.0} ms)",
        moved as f64 / 1e6,
        tl.t.len(),
        tl.t.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max) * 1e3
    ));
    if let Some(c) = &run.counters {
        line.push_str(&format!("; {}", counters_text(c)));
    }
    if let Some(f) = run.failure() {
        line.push_str(&format!("; {f}"));
    }
    line.push('.');
    line
}

/// smbcp's failover counters in words.
fn counters_text(c: &FailoverCounters) -> String {
    let mut text = format!(
        "smbcp counted {} channel(s) lost, {} request(s) replayed, {} reconnect(s)",
        c.channel_losses, c.replays, c.reconnects
    );
    if c.sessions_reestablished > 0 {
        let took = c
            .last_reestablish_ms
            .map_or(String::new(), |ms| format!(", the last in {ms} ms"));
        text.push_str(&format!(
            ", session re-established {} time(s){took} ({} open(s) reclaimed, {} lost)",
            c.sessions_reestablished, c.opens_reclaimed, c.opens_lost
        ));
    }
    text
}

/// The run's counter readings as CSV: a `#` line with the events, a header, then one row per
/// reading with every link's received and sent bytes (cumulative, as the kernel counts them)
/// and the established connections to port 445 (empty when not read).
pub fn csv(run: &Run, settings: &Settings) -> String {
    let at = |t: Option<f64>| t.map_or("-".into(), |t| format!("{t:.3}"));
    let mut out = format!(
        "# {} {} #{} on link {}: fault at {} s, link up at {} s, smbcp {:.3}-{:.3} s, exit {}\n",
        run.fault,
        run.direction,
        run.rep,
        settings.fault_link,
        at(run.fault_at),
        at(run.link_up_at),
        run.smbcp_span.0,
        run.smbcp_span.1,
        run.exit
    );
    let links = run.readings.first().map_or(0, |r| r.rx.len());
    out.push_str("t_s");
    for k in 1..=links {
        out.push_str(&format!(",rx_bytes_link{k},tx_bytes_link{k}"));
    }
    out.push_str(",channels\n");
    for r in &run.readings {
        out.push_str(&format!("{:.4}", r.t));
        for (rx, tx) in r.rx.iter().zip(&r.tx) {
            out.push_str(&format!(",{rx},{tx}"));
        }
        let channels = r.channels.map_or(String::new(), |n| n.to_string());
        out.push_str(&format!(",{channels}\n"));
    }
    out
}

/// The generated Markdown section: how it was measured, the table, the events, the charts
/// (`charts`: fault kind and the path to show for its SVG).
pub fn section(
    facts: &Facts,
    runs: &[Run],
    settings: &Settings,
    reference: &Fingerprint,
    charts: &[(Fault, String)],
) -> String {
    let command: Vec<String> = std::env::args().collect();
    let reps = groups(runs).iter().map(|g| g.runs.len()).max().unwrap_or(0);
    let mut out = format!(
        "{measured}, commit {commit}.\n\
         Command: `{cmd}`; file {mib} MiB (sha256 {sha}); {links} links of {rate} Mbit/s each; \
         every fault kind and direction ran {reps} time(s), taking turns; the fault comes once \
         {pct:.0} % of the file has crossed the wire. \
         **rst** (`testbed cut {k}`): the server resets link {k}'s connections and the link \
         stays up, so the client loses those channels, moves their requests to the others and \
         can reconnect at once. \
         **silent** (`testbed link-down {k}`, `link-up {k}` {down} s later): link {k} drops \
         every packet without a word, so the client has to notice the loss by itself. \
         **all** (`testbed cut`): the server resets every connection of port 445 at once, so \
         no channel is left and the client must re-establish the session (PreviousSessionId, \
         durable opens reclaimed) before the transfer can go on. \
         Client-side veth byte counters and the established connections to port 445 are read \
         every {every} ms.\n\n\
         Gap: from the fault until the aggregate holds {gap:.0} % of what the surviving links \
         carry ({n1}/{n} of the pre-fault rate) for {sustain} ms, rates over a trailing {smooth} ms. \
         Dip: bytes short of the pre-fault rate during the gap. Time lost: how much longer the \
         whole transfer took than its bytes need at the pre-fault rate, which also counts a slow \
         tail of requests that waited on the dead link (a client that fails over perfectly loses \
         the dead link's share of the down time, {ideal:.1} s, in the silent case and next to \
         nothing with rst). Link {k} back: from the link-up (silent) or the fault (rst, all) until \
         link {k} holds {back:.0} % of its pre-fault share for {sustain} ms. All channels back: \
         from the same moment until the established connections to port 445, having fallen, are \
         as many again as before the fault (the planned channels). Sessions re-established: \
         smbcp's own count (`--json`) and how long the last one took. Each row shows the \
         medians over the runs smbcp finished, the range of time lost, and sha256 and exit of \
         every run; each chart shows the run of median time lost. Rates count bytes on the \
         wire (headers included).\n\n",
        ideal = settings.down_for.as_secs_f64() / settings.links as f64,
        measured = facts.measured_on(),
        commit = facts.commit,
        cmd = command.join(" "),
        mib = reference.len >> 20,
        sha = &reference.sha256[..16.min(reference.sha256.len())],
        links = settings.links,
        rate = settings.rate_mbit,
        k = settings.fault_link,
        pct = FAULT_AT * 100.0,
        down = settings.down_for.as_secs(),
        every = SAMPLE_EVERY.as_millis(),
        gap = GAP_THRESHOLD * 100.0,
        n1 = settings.links - 1,
        n = settings.links,
        sustain = SUSTAIN * 1e3,
        smooth = SAMPLE_EVERY.as_millis() * SMOOTH_INTERVALS as u128,
        back = LINK_BACK_THRESHOLD * 100.0,
    );
    out.push_str(&table(runs, settings).markdown());
    out.push('\n');
    out.push_str(&event_lines(runs, settings).join("\n"));
    out.push('\n');
    for (fault, path) in charts {
        out.push_str(&format!(
            "\n![{fault}: Mbit/s per link and in all, seconds from the fault]({path})\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failover::fixtures::{cells, run, run_with, settings};
    use crate::failover::run::Check;

    #[test]
    fn table_shows_numbers_or_the_failure() {
        let runs = vec![
            run(Fault::Rst, Exit::Code(0), ""),
            run(
                Fault::Silent,
                Exit::Code(1),
                "copying\nsmbcp: big: connection | reset\n\n",
            ),
            run(Fault::Silent, Exit::Killed(60), "stuck"),
        ];
        let rows = cells(&table(&runs, &settings()).markdown());
        // Header, separator, one row per (fault, direction).
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert_eq!(rows[0][9], "link 2 back ms");
        // Rst: 4 links at 1 MB/s = 32 Mbit/s before the fault; the three others go on at
        // exactly what they carried, all the surviving links can, so there is no gap. Link
        // 2's 3 MB missing over the 10 s cost 0.75 s at 4 MB/s. One channel is missing for
        // a second after the fault.
        assert_eq!(
            rows[2][1..11],
            [
                "rst",
                "download",
                "1",
                "32",
                "0",
                "0.0",
                "0.75",
                "0.75-0.75",
                "3000 after the fault",
                "1000"
            ]
        );
        assert_eq!(rows[2][11..16], ["-", "9.9", "-", "ok", "0"]);
        // Both silent runs failed: the first one's reason, every run's check and exit.
        assert_eq!(rows[3][3], "2 (2 not measured)");
        assert_eq!(
            rows[3][5],
            "transfer failed: smbcp: big: connection / reset"
        );
        assert_eq!(rows[3][6..11], ["-", "-", "-", "-", "-"]);
        assert_eq!(rows[3][14..16], ["no file", "1, killed after 60 s"]);
        let events = event_lines(&runs, &settings());
        assert!(
            events[0].contains("rst download #1: smbcp ran")
                && events[0].contains("4 connection(s) on link 2 reset at 3.00 s"),
            "{events:?}"
        );
        assert!(events[1].contains("link up at 5.00 s"), "{events:?}");
        let csv = csv(&runs[1], &settings());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "# silent download #1 on link 2: fault at 3.000 s, link up at 5.000 s, smbcp 0.100-10.000 s, exit 1"
        );
        assert_eq!(lines[1], "t_s,rx_bytes_link1,tx_bytes_link1,rx_bytes_link2,tx_bytes_link2,rx_bytes_link3,tx_bytes_link3,rx_bytes_link4,tx_bytes_link4,channels");
        assert_eq!(lines[3], "0.0500,50000,0,50000,0,50000,0,50000,0,4");
        assert_eq!(lines.len(), 2 + runs[1].readings.len());
    }

    #[test]
    fn repetitions_give_medians_and_the_range() {
        // Link 2 back after 3, 2 and 5 s: 0.75, 0.5 and 1.25 s lost.
        let mut runs = vec![
            run_with(Fault::Rst, Exit::Code(0), "", 1, 6.0),
            run_with(Fault::Rst, Exit::Code(0), "", 2, 5.0),
            run_with(Fault::Rst, Exit::Code(0), "", 3, 8.0),
            run_with(Fault::All, Exit::Code(0), "", 1, 6.0),
            run_with(Fault::All, Exit::Code(0), "", 2, 6.0),
        ];
        runs[2].check = Check::Mismatch(5);
        let rows = cells(&table(&runs, &settings()).markdown());
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert_eq!(rows[2][3], "3");
        assert_eq!(
            rows[2][7..10],
            ["0.75", "0.50-1.25", "3000 after the fault"]
        );
        // sha256 ok only when every run matched.
        assert_eq!(rows[2][14], "ok, ok, differs (5 bytes)");
        // The every-channel cut: smbcp's re-established sessions, the median time.
        assert_eq!(rows[3][1], "all");
        assert_eq!(rows[3][11], "1 in 350 ms");
        assert_eq!(rows[3][14], "ok");
        let groups = groups(&runs);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].median_run(2).map(|r| r.rep), Some(1));
        let events = event_lines(&runs, &settings());
        assert!(
            events[3].contains("4 connection(s) on every link reset")
                && events[3].contains("session re-established 1 time(s), the last in 300 ms"),
            "{events:?}"
        );
    }
}
