//! What the small-files runs measured, turned into per-row figures (medians over the
//! repetitions), the table, and the lines that hold smbcp against the target.

use crate::results::{f0, f1, f2};
use crate::stats::{median, min_max};
use crate::table::Table;
use crate::transfer::{Direction, Sample};

/// The target: smbcp's files per second at least this many times smbclient's, both
/// ways.
pub const TARGET_X_SMBCLIENT: f64 = 3.0;

/// Repeated runs of one client copying one tree one way on one testbed.
#[derive(Debug, Clone)]
pub struct TreeSeries {
    /// Testbed label, e.g. `4 x 1000 Mbit/s`.
    pub setup: String,
    /// Tree label, e.g. `10000 x 4 KiB`.
    pub tree: String,
    /// Files in the tree.
    pub files: usize,
    /// Which way.
    pub direction: Direction,
    /// Client name (`smbcp`, `smbclient`).
    pub tool: String,
    /// One sample per repetition.
    pub samples: Vec<Sample>,
}

/// Files per second of one run: files over the client process's wall time.
pub fn files_per_s(files: usize, s: &Sample) -> f64 {
    files as f64 / s.wall.as_secs_f64()
}

/// `cpu` of one run in microseconds per file.
fn us_per_file(files: usize, cpu: std::time::Duration) -> f64 {
    cpu.as_secs_f64() * 1e6 / files as f64
}

/// The figures of one row, each a median over the repetitions (NaN without samples).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// Files per second.
    pub files_per_s: f64,
    /// Lowest and highest files per second.
    pub range: (f64, f64),
    /// MB/s (10^6 bytes per second) over the same wall time.
    pub mb_per_s: f64,
    /// Client CPU (user + system) per file, microseconds.
    pub client_us_per_file: f64,
    /// smbd CPU per file, microseconds.
    pub smbd_us_per_file: f64,
    /// smbd's CPU time over the wall time: 1.0 = one core kept busy.
    pub smbd_cpus: f64,
    /// CPUs the whole machine kept busy.
    pub machine_cpus: f64,
}

impl TreeSeries {
    fn median_of(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        let values: Vec<f64> = self.samples.iter().map(f).collect();
        median(&values).unwrap_or(f64::NAN)
    }

    /// The row's figures.
    pub fn row(&self) -> Row {
        let n = self.files;
        let rates: Vec<f64> = self.samples.iter().map(|s| files_per_s(n, s)).collect();
        Row {
            files_per_s: median(&rates).unwrap_or(f64::NAN),
            range: min_max(&rates).unwrap_or((f64::NAN, f64::NAN)),
            mb_per_s: self.median_of(Sample::mb_per_s),
            client_us_per_file: self.median_of(|s| us_per_file(n, s.client_cpu)),
            smbd_us_per_file: self.median_of(|s| us_per_file(n, s.server_cpu)),
            smbd_cpus: self.median_of(|s| s.server_cpu.as_secs_f64() / s.wall.as_secs_f64()),
            machine_cpus: self.median_of(Sample::machine_cpus),
        }
    }

    /// The highest CPU use of other work during any kept run, in CPUs.
    pub fn max_other_cpus(&self) -> f64 {
        self.samples
            .iter()
            .map(Sample::other_cpus)
            .fold(0.0, f64::max)
    }

    fn same_case(&self, other: &TreeSeries) -> bool {
        self.setup == other.setup && self.tree == other.tree && self.direction == other.direction
    }
}

/// smbclient's series of the same testbed, tree and direction as `s`.
fn smbclient_of<'a>(all: &'a [TreeSeries], s: &TreeSeries) -> Option<&'a TreeSeries> {
    all.iter().find(|o| o.tool == "smbclient" && o.same_case(s))
}

/// smbcp's files per second over smbclient's (medians), NaN when either is missing.
pub fn x_smbclient(all: &[TreeSeries], s: &TreeSeries) -> f64 {
    match smbclient_of(all, s) {
        Some(c) if c.tool != s.tool => s.row().files_per_s / c.row().files_per_s,
        _ => f64::NAN,
    }
}

fn ratio_cell(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.2}")
    }
}

/// One row per series, in the order measured.
pub fn table(all: &[TreeSeries]) -> Table {
    let mut t = Table::new(&[
        "link",
        "tree",
        "direction",
        "client",
        ">files/s",
        ">MB/s",
        ">min-max files/s",
        ">x smbclient",
        ">client CPU µs/file",
        ">smbd CPU µs/file",
        ">smbd CPUs",
        ">CPUs busy",
    ]);
    for s in all {
        let r = s.row();
        t.row(vec![
            s.setup.clone(),
            s.tree.clone(),
            s.direction.to_string(),
            s.tool.clone(),
            f0(r.files_per_s),
            f1(r.mb_per_s),
            format!("{}-{}", f0(r.range.0), f0(r.range.1)),
            ratio_cell(x_smbclient(all, s)),
            f0(r.client_us_per_file),
            f0(r.smbd_us_per_file),
            f2(r.smbd_cpus),
            f2(r.machine_cpus),
        ]);
    }
    t
}

/// One line per smbcp series: its ratio to smbclient against the target, and how close it
/// came to what one smbd can serve (one core at the measured smbd CPU per file).
pub fn target_lines(all: &[TreeSeries]) -> Vec<String> {
    all.iter()
        .filter(|s| s.tool == "smbcp")
        .map(|s| {
            let r = s.row();
            let x = x_smbclient(all, s);
            let verdict = if x.is_nan() {
                "no smbclient run to compare"
            } else if x >= TARGET_X_SMBCLIENT {
                "met"
            } else {
                "not met"
            };
            let ceiling = 1e6 / r.smbd_us_per_file;
            format!(
                "- {}, {}, {}: smbcp {} files/s, {} x smbclient (target {TARGET_X_SMBCLIENT:.0}): \
                 {verdict}; smbd {} µs per file and {} CPUs busy, so one smbd kept fully busy at \
                 that cost would serve about {} files/s ({} % reached)",
                s.setup,
                s.tree,
                s.direction,
                f0(r.files_per_s),
                f2(x),
                f0(r.smbd_us_per_file),
                f2(r.smbd_cpus),
                f0(ceiling),
                f0(r.files_per_s / ceiling * 100.0),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample(wall_ms: u64, client_ms: u64, smbd_ms: u64) -> Sample {
        Sample {
            bytes: 1000 * 4096,
            wall: Duration::from_millis(wall_ms),
            client_cpu: Duration::from_millis(client_ms),
            client_max_rss: 0,
            server_cpu: Duration::from_millis(smbd_ms),
            machine_cpu: Duration::from_millis(client_ms + smbd_ms),
        }
    }

    fn series(tool: &str, samples: Vec<Sample>) -> TreeSeries {
        TreeSeries {
            setup: "1 x 1000 Mbit/s".into(),
            tree: "1000 x 4 KiB".into(),
            files: 1000,
            direction: Direction::Upload,
            tool: tool.into(),
            samples,
        }
    }

    #[test]
    fn row_takes_medians_per_file() {
        // 1000 files in 0.5 s, 0.25 s and 1 s: 2000, 4000, 1000 files/s.
        let s = series(
            "smbcp",
            vec![
                sample(500, 100, 400),
                sample(250, 50, 200),
                sample(1000, 300, 500),
            ],
        );
        let r = s.row();
        assert_eq!(r.files_per_s, 2000.0);
        assert_eq!(r.range, (1000.0, 4000.0));
        assert!((r.mb_per_s - 4096.0 * 1000.0 / 0.5 / 1e6).abs() < 1e-9);
        // Client 100, 50, 300 µs per file; smbd 400, 200, 500.
        assert_eq!(r.client_us_per_file, 100.0);
        assert_eq!(r.smbd_us_per_file, 400.0);
        // smbd busy 0.8, 0.8, 0.5 of one CPU.
        assert!((r.smbd_cpus - 0.8).abs() < 1e-9);
    }

    #[test]
    fn ratio_and_target_compare_with_smbclient_of_the_same_case() {
        let smbcp = series("smbcp", vec![sample(250, 50, 200)]);
        let client = series("smbclient", vec![sample(1000, 100, 400)]);
        let mut other_way = series("smbclient", vec![sample(100, 10, 10)]);
        other_way.direction = Direction::Download;
        let all = vec![other_way, smbcp.clone(), client.clone()];
        assert_eq!(x_smbclient(&all, &smbcp), 4.0);
        assert!(x_smbclient(&all, &client).is_nan());
        let lines = target_lines(&all);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("4.00 x smbclient (target 3): met"),
            "{}",
            lines[0]
        );
        // 200 µs of smbd per file: one busy smbd would serve 5000 files/s; 4000 is 80 %.
        assert!(
            lines[0].contains("about 5000 files/s (80 % reached)"),
            "{}",
            lines[0]
        );
        let slow = series("smbcp", vec![sample(500, 50, 200)]);
        let lines = target_lines(&[slow, client]);
        assert!(
            lines[0].contains("2.00 x smbclient (target 3): not met"),
            "{}",
            lines[0]
        );
        let md = table(&all).markdown();
        assert!(md.contains(" 4.00 |"), "{md}");
    }
}
