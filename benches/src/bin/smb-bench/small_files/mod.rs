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

use std::time::Duration;

use smb3_benches::table::{num, range, Table};
use smb3_benches::Context;

use crate::bench::{repeat, undisturbed, LinkSetup, Scratch};
use crate::machine::{check_memory, Facts};
use crate::results::Series;
use crate::transfer::{measure, Direction, Sample, Tool, Transfer};
use crate::Common;
use tree::{Manifest, TreeSpec, FILES_PER_DIR};

/// smbcp's files per second should be at least this many times smbclient's, both ways.
const TARGET_X_SMBCLIENT: f64 = 3.0;
/// The directory on the share uploads go into (downloads read the trees from its root).
const INCOMING: &str = "incoming";

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
    std::fs::create_dir_all(&download).ctx(download.display())?;
    let mut trees: Vec<(TreeSpec, Manifest)> = Vec::new();
    for spec in specs {
        eprintln!("smb-bench: writing the tree {}", spec.label());
        trees.push((spec, spec.write(&source.join(spec.name()))?));
    }
    let (tools, rate) = (
        [Tool::smbcp(&smbcp, &[]), Tool::Smbclient],
        common.rate(1000),
    );
    let (mut series, mut busy, mut retried) = (Vec::new(), Vec::new(), 0);
    for setup in [1, 4].map(|links| LinkSetup::shaped(links, rate)) {
        busy.push(common.quiet());
        // Both staged trees and one upload at a time, with slack for directories.
        let tb = setup.start(((total * 2) >> 20) + 512, "")?;
        let plain = tb.share_path("plain");
        for (spec, manifest) in &trees {
            let (from, to) = (source.join(spec.name()), plain.join(spec.name()));
            for (rel, fp) in &manifest.0 {
                let made = match fp {
                    None => std::fs::create_dir_all(to.join(rel)),
                    Some(_) => std::fs::copy(from.join(rel), to.join(rel)).map(drop),
                };
                made.map_err(|e| format!("{}: {e}", to.join(rel).display()))?;
            }
            tb.give_to_user(&to);
            manifest.verify(&to)?;
        }
        std::fs::create_dir_all(plain.join(INCOMING)).ctx(INCOMING)?;
        tb.give_to_user(&plain.join(INCOMING));
        common.quiet();
        for (spec, manifest) in &trees {
            for direction in Direction::BOTH {
                let name = spec.name();
                let job = Transfer {
                    tb: &tb,
                    share: "plain",
                    direction,
                    remote: match direction {
                        Direction::Download => name.clone(),
                        Direction::Upload => format!("{INCOMING}/{name}"),
                    },
                    local: match direction {
                        Direction::Download => download.join(&name),
                        Direction::Upload => source.join(&name),
                    },
                    tree: true,
                    bytes: manifest.total_bytes(),
                    files: manifest.files(),
                    verify: Box::new(|path| manifest.verify(path)),
                    keep_target: false,
                };
                series.extend(repeat(
                    reps,
                    &tools,
                    |tool| Series::new(&setup.label(), &spec.label(), direction, tool),
                    |tool| undisturbed(common, &mut retried, || measure(tool, &job)),
                )?);
            }
        }
    }
    let described: Vec<String> = (trees.iter())
        .map(|(spec, manifest)| {
            let dirs = match spec.dirs() {
                1 => "1 directory".to_string(),
                n => format!("{n} directories of up to {FILES_PER_DIR}"),
            };
            format!(
                "{} in {dirs} (tree digest {})",
                spec.label(),
                &manifest.digest()[..16]
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
    let mut body = facts.header(false, &what, &busy, Some(("run", other, retried)));
    body.push_str(&format!(
        "Target: smbcp's files/s at least {TARGET_X_SMBCLIENT:.0} x smbclient's, both ways.\n\n{}\n\n",
        target_lines(&series).join("\n")
    ));
    body.push_str(&table(&series).markdown());
    common.publish("small-files", Some("## Many small files"), &body)
}

/// The figures of a row, medians over the repetitions.
struct Row {
    files_per_s: f64,
    client_us: f64,
    smbd_us: f64,
    /// smbd's CPU time over the wall time: 1.0 is one core kept busy.
    smbd_cpus: f64,
    /// smbcp's files per second over smbclient's of the same testbed, tree and direction.
    x_smbclient: f64,
}

fn row(all: &[Series], s: &Series) -> Row {
    let per_file = |cpu: Duration, x: &Sample| cpu.as_secs_f64() * 1e6 / x.files as f64;
    let rate = |s: &Series| s.median_of(Sample::files_per_s);
    let same = |o: &&Series| {
        o.tool == "smbclient"
            && o.link == s.link
            && o.share == s.share
            && o.direction == s.direction
    };
    Row {
        files_per_s: rate(s),
        client_us: s.median_of(|x| per_file(x.client_cpu, x)),
        smbd_us: s.median_of(|x| per_file(x.server_cpu, x)),
        smbd_cpus: s.median_of(|x| x.server_cpu.as_secs_f64() / x.wall.as_secs_f64()),
        x_smbclient: all
            .iter()
            .find(same)
            .filter(|_| s.tool != "smbclient")
            .map_or(f64::NAN, |c| rate(s) / rate(c)),
    }
}

fn table(all: &[Series]) -> Table {
    let rows = all.iter().map(|s| (s, row(all, s)));
    Table::of(
        rows,
        &[
            ("link", &|(s, _)| s.link.clone()),
            ("tree", &|(s, _)| s.share.clone()),
            ("direction", &|(s, _)| s.direction.to_string()),
            ("client", &|(s, _)| s.tool.into()),
            (">files/s", &|(_, r)| num(r.files_per_s, 0)),
            (">MB/s", &|(s, _)| num(s.mb_per_s(), 1)),
            (">min-max files/s", &|(s, _)| {
                range(s.range_of(Sample::files_per_s), 0)
            }),
            (">x smbclient", &|(_, r)| {
                if r.x_smbclient.is_nan() {
                    String::new()
                } else {
                    num(r.x_smbclient, 2)
                }
            }),
            (">client CPU µs/file", &|(_, r)| num(r.client_us, 0)),
            (">smbd CPU µs/file", &|(_, r)| num(r.smbd_us, 0)),
            (">smbd CPUs", &|(_, r)| num(r.smbd_cpus, 2)),
            (">CPUs busy", &|(s, _)| {
                num(s.median_of(Sample::machine_cpus), 2)
            }),
        ],
    )
}

/// A line per smbcp series: its ratio to smbclient against the target, and how close it
/// came to what one smbd can serve (Samba serves a session from one process: one core at the
/// measured smbd CPU per file).
fn target_lines(all: &[Series]) -> Vec<String> {
    let smbcp = all.iter().filter(|s| s.tool == "smbcp");
    smbcp
        .map(|s| {
            let r = row(all, s);
            let verdict = match r.x_smbclient {
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
                num(r.x_smbclient, 2),
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
        let smbcp = Tool::smbcp("smbcp".as_ref(), &[]);
        // 1000 files in 0.5, 0.25 and 1 s: 2000, 4000 and 1000 files/s.
        let s = series(
            &smbcp,
            Direction::Upload,
            &[(500, 100, 400), (250, 50, 200), (1000, 300, 500)],
        );
        let r = row(&[], &s);
        assert_eq!(
            (r.files_per_s, r.client_us, r.smbd_us),
            (2000.0, 100.0, 400.0)
        );
        assert!((r.smbd_cpus - 0.8).abs() < 1e-9 && r.x_smbclient.is_nan());
        let ours = series(&smbcp, Direction::Upload, &[(250, 50, 200)]);
        let theirs = series(&Tool::Smbclient, Direction::Upload, &[(1000, 100, 400)]);
        let all = vec![
            series(&Tool::Smbclient, Direction::Download, &[(100, 10, 10)]),
            ours.clone(),
            theirs.clone(),
        ];
        assert!(row(&all, &ours).x_smbclient == 4.0 && row(&all, &theirs).x_smbclient.is_nan());
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
