//! `smb-bench --small-files`: many small files copied up and down as trees, `smbcp -r` against
//! `smbclient`'s `mput`/`mget` (issue 17, part 2).
//!
//! Two trees are generated once in `/dev/shm` (10,000 x 4 KiB in 100 directories and
//! 1,000 x 1 MiB in 10; a tenth of each with `--quick`), and two testbeds are brought up one
//! after the other: 1 link and 4 links, each shaped to `--rate` (1 Gbit/s by default). On
//! each, both trees are staged on the share's tmpfs for the downloads, then every tree is
//! copied both ways by both clients, the clients taking turns within a repetition. Each run is
//! timed from spawn to exit, its client and smbd CPU time taken as in the main run, and the
//! tree that arrived is verified (every file's size and SHA-256, nothing missing or extra);
//! a failure aborts the benchmark. The result is files per second, MB/s, CPU per file and how
//! busy smbd was, since Samba serves one session from one smbd process.

pub mod command;
pub mod measure;
pub mod report;
pub mod tree;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use smb3_tests::{Testbed, TestbedConfig};

use crate::interrupt;
use crate::machine::{check_memory, wait_until_quiet, Facts};
use crate::multichannel::LinkSetup;
use crate::transfer::{Direction, Sample, Tool};
use command::{Places, INCOMING, SHARE};
use measure::{measure, TreeJob};
use report::{table, target_lines, TreeSeries, TARGET_X_SMBCLIENT};
use tree::{Manifest, TreeSpec, FILES_PER_DIR};

/// The marker name of the generated section in docs/PERFORMANCE.md.
pub const SECTION: &str = "small-files";
/// The heading the section goes under when the document does not have it yet.
pub const HEADING: &str = "## Many small files";
/// Rate of every link, Mbit/s, unless `--rate` says otherwise.
pub const DEFAULT_RATE_MBIT: u32 = 1000;

/// Seeds of the two trees' contents.
const SMALL_TREE_SEED: u64 = 0x5eed_0000_0004_f11e;
const LARGE_TREE_SEED: u64 = 0x5eed_0001_0000_f11e;

/// The machine counts as quiet below this share of all CPUs busy (as in the main run).
const QUIET: f64 = 0.10;
/// A run during which other work used more than this many CPUs is measured again, at most
/// [`MAX_ATTEMPTS`] times in all (the main run's policy, see docs/PERFORMANCE.md).
const MAX_OTHER_CPUS: f64 = 0.25;
const MAX_ATTEMPTS: usize = 5;

/// What the run is asked to do.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A tenth of the files in each tree.
    pub quick: bool,
    /// Repetitions of every measurement.
    pub reps: usize,
    /// Rate of every link, Mbit/s.
    pub rate_mbit: u32,
    /// How long to wait for the machine to be quiet before each testbed and each disturbed run.
    pub wait_quiet: Duration,
    /// The smbcp binary (absolute path).
    pub smbcp: PathBuf,
}

/// The two trees: many 4 KiB files, and fewer 1 MiB ones.
pub fn trees(quick: bool) -> [TreeSpec; 2] {
    let scale = if quick { 10 } else { 1 };
    [
        TreeSpec {
            files: 10_000 / scale,
            file_size: 4 << 10,
            seed: SMALL_TREE_SEED,
        },
        TreeSpec {
            files: 1_000 / scale,
            file_size: 1 << 20,
            seed: LARGE_TREE_SEED,
        },
    ]
}

/// The two testbeds: one link and four, every link shaped to `rate_mbit`.
pub fn setups(rate_mbit: u32) -> [LinkSetup; 2] {
    [1, 4].map(|links| LinkSetup {
        links,
        rate_mbit: Some(rate_mbit),
    })
}

/// Local trees of the run, on a tmpfs (/dev/shm) so the local disk is never the limit.
/// Removed on drop.
struct Scratch {
    dir: PathBuf,
    /// Holds the source trees of uploads.
    source: PathBuf,
    /// Downloads write their trees here.
    download: PathBuf,
}

impl Scratch {
    fn create() -> Result<Scratch, String> {
        let dir = PathBuf::from(format!(
            "/dev/shm/smb-bench-small-files.{}",
            std::process::id()
        ));
        let scratch = Scratch {
            source: dir.join("source"),
            download: dir.join("download"),
            dir,
        };
        for d in [&scratch.source, &scratch.download] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        Ok(scratch)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One tree and what it holds.
struct Tree {
    spec: TreeSpec,
    name: String,
    manifest: Manifest,
}

/// Runs the whole benchmark and returns the Markdown of its section.
pub fn run(settings: &Settings) -> Result<String, String> {
    let specs = trees(settings.quick);
    let total: u64 = specs.iter().map(TreeSpec::total_bytes).sum();
    // Each tree lives four times in memory: the local source and download (tmpfs), and on
    // the share's tmpfs the staged copy and the upload.
    check_memory(total * 4)?;
    let facts = Facts::collect();
    let scratch = Scratch::create()?;
    let mut trees = Vec::new();
    for spec in specs {
        eprintln!("smb-bench: writing the tree {}", spec.label());
        let name = spec.name();
        let manifest = spec.write(&scratch.source.join(&name))?;
        trees.push(Tree {
            spec,
            name,
            manifest,
        });
    }
    let mut series = Vec::new();
    let mut quiet = Vec::new();
    let mut retried = 0;
    for setup in setups(settings.rate_mbit) {
        quiet.push(wait_until_quiet(QUIET, settings.wait_quiet));
        // Both staged trees and one upload at a time, with slack for directories and metadata.
        let tmpfs = format!("{}m", ((total * 2) >> 20) + 512);
        let tb = start(&setup, tmpfs)?;
        for t in &trees {
            stage(&tb, &scratch, t)?;
        }
        prepare_incoming(&tb)?;
        wait_until_quiet(QUIET, settings.wait_quiet);
        for t in &trees {
            for direction in [Direction::Download, Direction::Upload] {
                let job = TreeJob {
                    tb: &tb,
                    direction,
                    places: Places {
                        local_source: &scratch.source,
                        local_target: &scratch.download,
                        name: &t.name,
                    },
                    manifest: &t.manifest,
                };
                let run = Repetitions {
                    settings,
                    setup: setup.label(),
                    tree: &t.spec,
                    job: &job,
                };
                series.extend(run.measure_all(&mut retried)?);
            }
        }
    }
    let header = Header {
        facts: &facts,
        settings,
        trees: &trees,
        quiet: &quiet,
        series: &series,
        retried,
    };
    Ok(render(&header, &series))
}

/// A testbed of `setup`'s links with `tmpfs_size` behind the shares.
fn start(setup: &LinkSetup, tmpfs_size: String) -> Result<Testbed, String> {
    let mut config = match setup.rate_mbit {
        Some(mbit) => TestbedConfig::shaped(setup.links, mbit),
        None => TestbedConfig::unshaped(setup.links),
    };
    config.tmpfs_size = tmpfs_size;
    eprintln!("smb-bench: testbed with {}", setup.label());
    Testbed::start(config).map_err(|e| format!("testbed: {e}"))
}

/// Copies the local tree onto the share's tmpfs (from the host, once per testbed) for the
/// downloads, gives it to the test user and checks it.
fn stage(tb: &Testbed, scratch: &Scratch, tree: &Tree) -> Result<(), String> {
    let from = scratch.source.join(&tree.name);
    let to = tb.share_path(SHARE).join(&tree.name);
    for dir in &tree.manifest.dirs {
        let d = to.join(dir);
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    for file in tree.manifest.files.keys() {
        let target = to.join(file);
        std::fs::copy(from.join(file), &target)
            .map_err(|e| format!("{}: {e}", target.display()))?;
    }
    give_to_user(tb, &to)?;
    tree.manifest.verify(&to)
}

/// Creates the empty directory uploads go into, owned by the test user.
fn prepare_incoming(tb: &Testbed) -> Result<(), String> {
    let dir = tb.share_path(SHARE).join(INCOMING);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    give_to_user(tb, &dir)
}

/// `chown -R USER: path`: smbd serves the share as the test user, so what the host put there
/// must be that user's.
fn give_to_user(tb: &Testbed, path: &Path) -> Result<(), String> {
    let status = Command::new("chown")
        .args(["-R", &format!("{}:", tb.user())])
        .arg(path)
        .status()
        .map_err(|e| format!("chown: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("chown -R {}: {status}", path.display()))
    }
}

/// Every client `reps` times on one tree and direction.
struct Repetitions<'a> {
    settings: &'a Settings,
    setup: String,
    tree: &'a TreeSpec,
    job: &'a TreeJob<'a>,
}

impl Repetitions<'_> {
    /// smbcp and smbclient taking turns within each repetition, so a slow drift of the
    /// machine hits both alike; `retried` counts runs measured again.
    fn measure_all(&self, retried: &mut usize) -> Result<Vec<TreeSeries>, String> {
        let tools = [Tool::smbcp(&self.settings.smbcp), Tool::Smbclient];
        let mut series: Vec<TreeSeries> = tools
            .iter()
            .map(|tool| TreeSeries {
                setup: self.setup.clone(),
                tree: self.tree.label(),
                files: self.tree.files,
                direction: self.job.direction,
                tool: tool.name().into(),
                samples: Vec::new(),
            })
            .collect();
        for rep in 1..=self.settings.reps {
            for (tool, s) in tools.iter().zip(&mut series) {
                interrupt::check()?;
                let sample = self.measure_undisturbed(tool, retried)?;
                eprintln!(
                    "  {} {} {} {} #{rep}: {:.0} files/s, {:.1} MB/s, client CPU {:.2} s, smbd CPU {:.2} s, machine {:.2} CPUs busy ({:.2} not client or smbd)",
                    self.setup,
                    self.tree.label(),
                    self.job.direction,
                    s.tool,
                    report::files_per_s(self.tree.files, &sample),
                    sample.mb_per_s(),
                    sample.client_cpu.as_secs_f64(),
                    sample.server_cpu.as_secs_f64(),
                    sample.machine_cpus(),
                    sample.other_cpus(),
                );
                s.samples.push(sample);
            }
        }
        Ok(series)
    }

    /// One run, measured again (after waiting for quiet) while other work disturbed it.
    fn measure_undisturbed(&self, tool: &Tool, retried: &mut usize) -> Result<Sample, String> {
        let mut attempt = 1;
        loop {
            let sample = measure(tool, self.job)?;
            if sample.other_cpus() <= MAX_OTHER_CPUS || attempt == MAX_ATTEMPTS {
                return Ok(sample);
            }
            eprintln!(
                "  (disturbed: other work used {:.2} CPUs; measuring again)",
                sample.other_cpus()
            );
            *retried += 1;
            attempt += 1;
            wait_until_quiet(QUIET, self.settings.wait_quiet);
        }
    }
}

/// What the first paragraph of the section says about the run.
struct Header<'a> {
    facts: &'a Facts,
    settings: &'a Settings,
    trees: &'a [Tree],
    quiet: &'a [f64],
    series: &'a [TreeSeries],
    retried: usize,
}

/// The generated Markdown: how it was measured, the target lines, the table.
fn render(h: &Header<'_>, series: &[TreeSeries]) -> String {
    let command: Vec<String> = std::env::args().collect();
    let trees: Vec<String> = h
        .trees
        .iter()
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
    let busiest = h.quiet.iter().copied().fold(0.0, f64::max);
    let other = h
        .series
        .iter()
        .map(TreeSeries::max_other_cpus)
        .fold(0.0, f64::max);
    let mut out = format!(
        "{measured}, commit {commit}.\n\
         Command: `{cmd}`; trees: {trees}; links shaped to {rate} Mbit/s each; {reps} \
         repetition(s), median shown. Before each testbed the machine was at most {busy:.0} % \
         busy; during the runs kept, other work used at most {other:.2} CPUs ({retried} run(s) \
         measured again because other work disturbed them).\n\n",
        measured = h.facts.measured_on(),
        commit = h.facts.commit,
        cmd = command.join(" "),
        trees = trees.join(", "),
        rate = h.settings.rate_mbit,
        reps = h.settings.reps,
        busy = busiest * 100.0,
        retried = h.retried,
    );
    out.push_str(&format!(
        "Target: smbcp's files/s at least {TARGET_X_SMBCLIENT:.0} x smbclient's, both ways.\n\n{}\n\n",
        target_lines(series).join("\n")
    ));
    out.push_str(&table(series).markdown());
    out
}
