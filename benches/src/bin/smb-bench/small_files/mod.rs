//! `smb-bench small-files`: trees of many small files copied up and down, `smbcp -r` against
//! `smbclient`'s `mput`/`mget`, in files per second and CPU per file. The `small-files`
//! section of docs/PERFORMANCE.md.
//!
//! Two trees are written once into `/dev/shm` (10,000 x 4 KiB in 100 directories and 1,000 x
//! 1 MiB in 10; a tenth with `--quick`); on 1 link and on 4, each shaped to `--rate`, both
//! are staged on the share for the downloads, and every tree is copied both ways by both
//! clients, taking turns. Each run is timed from spawn to exit with the client's and smbd's
//! CPU time, its report checked and the tree that arrived verified file by file; a failure
//! aborts the benchmark.

mod tree;

use std::path::Path;
use std::process::Command;

use smb3_benches::table::{num, Table};
use smb3_tests::Testbed;

use crate::bench::{header, repeat, undisturbed, LinkSetup, Scratch};
use crate::machine::{check_memory, wait_until_quiet, Facts};
use crate::results::Series;
use crate::transfer::{run_metered, smbclient, smbcp_json, Direction, Sample, Tool};
use crate::Common;
use tree::{Manifest, TreeSpec, FILES_PER_DIR};

/// smbcp's files per second should be at least this many times smbclient's, both ways.
const TARGET_X_SMBCLIENT: f64 = 3.0;
/// The directory on the share uploads go into (downloads read the trees from its root).
const INCOMING: &str = "incoming";

/// One tree and what it holds.
struct Tree {
    spec: TreeSpec,
    name: String,
    manifest: Manifest,
}

pub(crate) fn run(common: &Common) -> Result<(), String> {
    let smbcp = common.smbcp()?;
    let scale = if common.quick { 10 } else { 1 };
    let specs = [
        TreeSpec {
            files: 10_000 / scale,
            file_size: 4 << 10,
            seed: 0x5eed_0000_0004_f11e,
        },
        TreeSpec {
            files: 1_000 / scale,
            file_size: 1 << 20,
            seed: 0x5eed_0001_0000_f11e,
        },
    ];
    let total: u64 = specs.iter().map(TreeSpec::total_bytes).sum();
    // Each tree lives four times in memory: the local source and download, and on the
    // share's tmpfs the staged copy and the upload.
    check_memory(total * 4)?;
    let (facts, scratch, reps) = (
        Facts::collect(),
        Scratch::create("small-files")?,
        common.reps(3),
    );
    let (source, download) = (scratch.0.join("source"), scratch.0.join("download"));
    std::fs::create_dir_all(&download).map_err(|e| format!("{}: {e}", download.display()))?;
    let mut trees = Vec::new();
    for spec in specs {
        eprintln!("smb-bench: writing the tree {}", spec.label());
        let manifest = spec.write(&source.join(spec.name()))?;
        trees.push(Tree {
            name: spec.name(),
            spec,
            manifest,
        });
    }
    let (tools, rate) = (
        [Tool::smbcp(&smbcp, &[]), Tool::Smbclient],
        common.rate(1000),
    );
    let (mut series, mut quiet, mut retried) = (Vec::new(), Vec::new(), 0);
    for setup in [1, 4].map(|links| LinkSetup::shaped(links, rate)) {
        quiet.push(wait_until_quiet(common.wait_quiet()));
        // Both staged trees and one upload at a time, with slack for directories.
        let tb = setup.start(((total * 2) >> 20) + 512, "")?;
        for t in &trees {
            let to = tb.share_path("plain").join(&t.name);
            copy_tree(&source.join(&t.name), &to, &t.manifest)?;
            tb.give_to_user(&to);
            t.manifest.verify(&to)?;
        }
        let incoming = tb.share_path("plain").join(INCOMING);
        std::fs::create_dir_all(&incoming).map_err(|e| format!("{}: {e}", incoming.display()))?;
        tb.give_to_user(&incoming);
        wait_until_quiet(common.wait_quiet());
        for t in &trees {
            for direction in Direction::BOTH {
                let job = TreeJob {
                    tb: &tb,
                    direction,
                    local: (&source, &download),
                    tree: t,
                };
                series.extend(repeat(
                    reps,
                    &tools,
                    |tool| Series::new(&setup.label(), &t.spec.label(), direction, tool),
                    |tool| {
                        undisturbed(common.wait_quiet(), &mut retried, || {
                            Ok((job.measure(tool)?, None))
                        })
                    },
                )?);
            }
        }
    }
    let described: Vec<String> = (trees.iter())
        .map(|t| {
            let dirs = match t.spec.dirs() {
                1 => "1 directory".to_string(),
                n => format!("{n} directories of up to {FILES_PER_DIR}"),
            };
            format!(
                "{} in {dirs} (tree digest {})",
                t.spec.label(),
                &t.manifest.digest()[..16]
            )
        })
        .collect();
    let what = format!(
        "trees: {}; links shaped to {rate} Mbit/s each; {reps} repetition(s), median shown",
        described.join(", ")
    );
    let other = series
        .iter()
        .flat_map(|s| &s.samples)
        .map(Sample::other_cpus)
        .fold(0.0, f64::max);
    let mut body = header(
        &facts,
        false,
        &what,
        Some(&quiet),
        Some(("run", other, retried)),
    );
    body.push_str(&format!(
        "Target: smbcp's files/s at least {TARGET_X_SMBCLIENT:.0} x smbclient's, both ways.\n\n{}\n\n",
        target_lines(&series).join("\n")
    ));
    body.push_str(&table(&series).markdown());
    common.publish("small-files", Some("## Many small files"), &body)
}

/// Copies the tree `manifest` describes from `from` to `to` (on the host).
fn copy_tree(from: &Path, to: &Path, manifest: &Manifest) -> Result<(), String> {
    for dir in &manifest.dirs {
        std::fs::create_dir_all(to.join(dir))
            .map_err(|e| format!("{}: {e}", to.join(dir).display()))?;
    }
    for file in manifest.files.keys() {
        std::fs::copy(from.join(file), to.join(file))
            .map_err(|e| format!("{}: {e}", to.join(file).display()))?;
    }
    Ok(())
}

/// One tree copied one way; the local directories (source, download) hold trees under
/// their names, as the share does.
struct TreeJob<'a> {
    tb: &'a Testbed,
    direction: Direction,
    local: (&'a Path, &'a Path),
    tree: &'a Tree,
}

impl TreeJob<'_> {
    /// Where the copy lands, on the host.
    fn target(&self) -> std::path::PathBuf {
        match self.direction {
            Direction::Download => self.local.1.join(&self.tree.name),
            Direction::Upload => self
                .tb
                .share_path("plain")
                .join(INCOMING)
                .join(&self.tree.name),
        }
    }

    /// `tool`'s command: `smbcp -r` with its defaults (the target does not exist, so it
    /// creates it, as `cp -r` does), or smbclient with `mput`/`mget` under `recurse ON`
    /// (`prompt OFF` answers every per-file question), standing where the tree goes.
    fn command(&self, tool: &Tool) -> Result<Command, String> {
        let (name, (source, download)) = (&self.tree.name, self.local);
        match tool {
            Tool::Smbcp { binary, options } => {
                let share = smb3_benches::session::share_url(self.tb, "plain");
                let (from, to) = match self.direction {
                    Direction::Upload => (
                        source.join(name).display().to_string(),
                        format!("{share}/{INCOMING}/{name}"),
                    ),
                    Direction::Download => (
                        format!("{share}/{name}"),
                        download.join(name).display().to_string(),
                    ),
                };
                let mut cmd = self.tb.client_command(binary);
                cmd.env("SMB_PASSWORD", self.tb.password())
                    .args(options)
                    .args(["-q", "--json", "-r", &from, &to]);
                Ok(cmd)
            }
            Tool::Smbclient => {
                // `;` separates the script's commands and blanks its arguments.
                if [source, download].iter().any(|p| {
                    p.display()
                        .to_string()
                        .contains(|c: char| c == ';' || c.is_whitespace())
                }) {
                    return Err(format!(
                        "{}: smbclient's -c script cannot carry this path",
                        source.display()
                    ));
                }
                let script = match self.direction {
                    Direction::Upload => format!(
                        "prompt OFF; recurse ON; lcd {}; cd {INCOMING}; mput {name}",
                        source.display()
                    ),
                    Direction::Download => format!(
                        "prompt OFF; recurse ON; lcd {}; mget {name}",
                        download.display()
                    ),
                };
                let mut cmd = smbclient(self.tb, "plain");
                cmd.args(["-c", &script]);
                Ok(cmd)
            }
        }
    }

    /// Runs `tool` once, checks what it reported and the tree that arrived, and removes it.
    fn measure(&self, tool: &Tool) -> Result<Sample, String> {
        let target = self.target();
        // Every run starts without a target, so none profits from (or trips over) the last.
        smb3_benches::data::remove_if_present(&target)?;
        let manifest = &self.tree.manifest;
        let files = manifest.files.len() as u64;
        let (run, sample) =
            run_metered(self.tb, self.command(tool)?, manifest.total_bytes(), files)?;
        let what = format!(
            "{} -r {} of {}",
            tool.name(),
            self.direction,
            self.tree.name
        );
        run.success(&what)?;
        if let Tool::Smbcp { .. } = tool {
            let expected = [
                ("files", files),
                ("copied", files),
                ("failed", 0),
                ("bytes", manifest.total_bytes()),
            ];
            smbcp_json(&run, &expected).map_err(|e| format!("{what}: {e}"))?;
        }
        manifest
            .verify(&target)
            .map_err(|e| format!("{what}: {e}"))?;
        smb3_benches::data::remove_if_present(&target)?;
        Ok(sample)
    }
}

/// The figures of a row, medians over the repetitions.
struct Row {
    files_per_s: f64,
    range: (f64, f64),
    client_us: f64,
    smbd_us: f64,
    /// smbd's CPU time over the wall time: 1.0 is one core kept busy.
    smbd_cpus: f64,
}

fn row(s: &Series) -> Row {
    let per_file = |cpu: std::time::Duration, x: &Sample| cpu.as_secs_f64() * 1e6 / x.files as f64;
    Row {
        files_per_s: s.median_of(Sample::files_per_s),
        range: s.range_of(Sample::files_per_s),
        client_us: s.median_of(|x| per_file(x.client_cpu, x)),
        smbd_us: s.median_of(|x| per_file(x.server_cpu, x)),
        smbd_cpus: s.median_of(|x| x.server_cpu.as_secs_f64() / x.wall.as_secs_f64()),
    }
}

/// smbcp's files per second over smbclient's of the same testbed, tree and direction.
fn x_smbclient(all: &[Series], s: &Series) -> f64 {
    let same = |o: &&Series| {
        o.tool == "smbclient"
            && o.link == s.link
            && o.share == s.share
            && o.direction == s.direction
    };
    match all.iter().find(same) {
        Some(c) if s.tool != "smbclient" => row(s).files_per_s / row(c).files_per_s,
        _ => f64::NAN,
    }
}

fn table(all: &[Series]) -> Table {
    let mut t = Table::new(
        "link | tree | direction | client | >files/s | >MB/s | >min-max files/s | >x smbclient |\
        >client CPU µs/file | >smbd CPU µs/file | >smbd CPUs | >CPUs busy",
    );
    for s in all {
        let r = row(s);
        let x = x_smbclient(all, s);
        t.row(vec![
            s.link.clone(),
            s.share.clone(),
            s.direction.to_string(),
            s.tool.into(),
            num(r.files_per_s, 0),
            num(s.mb_per_s(), 1),
            format!("{}-{}", num(r.range.0, 0), num(r.range.1, 0)),
            if x.is_nan() {
                String::new()
            } else {
                format!("{x:.2}")
            },
            num(r.client_us, 0),
            num(r.smbd_us, 0),
            num(r.smbd_cpus, 2),
            num(s.median_of(Sample::machine_cpus), 2),
        ]);
    }
    t
}

/// A line per smbcp series: its ratio to smbclient against the target, and how close it
/// came to what one smbd can serve (Samba serves a session from one process: one core at the
/// measured smbd CPU per file).
fn target_lines(all: &[Series]) -> Vec<String> {
    let smbcp = all.iter().filter(|s| s.tool == "smbcp");
    smbcp
        .map(|s| {
            let (r, x) = (row(s), x_smbclient(all, s));
            let verdict = match x {
                x if x.is_nan() => "no smbclient run to compare",
                x if x >= TARGET_X_SMBCLIENT => "met",
                _ => "not met",
            };
            let ceiling = 1e6 / r.smbd_us;
            format!(
                "- {}, {}, {}: smbcp {} files/s, {} x smbclient (target {TARGET_X_SMBCLIENT:.0}): {verdict}; smbd {} µs \
                 per file and {} CPUs busy, so one smbd kept fully busy at that cost would serve about {} files/s ({} % \
                 reached)",
                s.link,
                s.share,
                s.direction,
                num(r.files_per_s, 0),
                num(x, 2),
                num(r.smbd_us, 0),
                num(r.smbd_cpus, 2),
                num(ceiling, 0),
                num(r.files_per_s / ceiling * 100.0, 0),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// 1000 files of 4 KiB in `wall` ms with this much client and smbd CPU.
    fn series(tool: &Tool, direction: Direction, runs: &[(u64, u64, u64)]) -> Series {
        let mut s = Series::new("1 x 1000 Mbit/s", "1000 x 4 KiB", direction, tool);
        let ms = Duration::from_millis;
        let sample = |&(wall, client, smbd): &(u64, u64, u64)| Sample {
            bytes: 1000 * 4096,
            files: 1000,
            wall: ms(wall),
            client_cpu: ms(client),
            server_cpu: ms(smbd),
            ..Sample::default()
        };
        s.samples = runs.iter().map(sample).collect();
        s
    }

    #[test]
    fn rows_take_medians_per_file_and_targets_compare_like_with_like() {
        let smbcp = Tool::smbcp(Path::new("smbcp"), &[]);
        // 1000 files in 0.5, 0.25 and 1 s: 2000, 4000 and 1000 files/s.
        let r = row(&series(
            &smbcp,
            Direction::Upload,
            &[(500, 100, 400), (250, 50, 200), (1000, 300, 500)],
        ));
        assert_eq!(
            (r.files_per_s, r.range, r.client_us, r.smbd_us),
            (2000.0, (1000.0, 4000.0), 100.0, 400.0)
        );
        assert!((r.smbd_cpus - 0.8).abs() < 1e-9);
        let ours = series(&smbcp, Direction::Upload, &[(250, 50, 200)]);
        let theirs = series(&Tool::Smbclient, Direction::Upload, &[(1000, 100, 400)]);
        let all = vec![
            series(&Tool::Smbclient, Direction::Download, &[(100, 10, 10)]),
            ours.clone(),
            theirs.clone(),
        ];
        assert!(x_smbclient(&all, &ours) == 4.0 && x_smbclient(&all, &theirs).is_nan());
        // 200 µs of smbd per file: one busy smbd would serve 5000 files/s; 4000 is 80 %.
        let line = &target_lines(&all)[0];
        assert!(
            line.contains("4.00 x smbclient (target 3): met")
                && line.contains("about 5000 files/s (80 % reached)"),
            "{line}"
        );
        let slow = series(&smbcp, Direction::Upload, &[(500, 50, 200)]);
        assert!(target_lines(&[slow, theirs])[0].contains("2.00 x smbclient (target 3): not met"));
        assert!(table(&all).markdown().contains(" 4.00 |"));
    }
}
