//! The mount's soak (`soak --mount`): the same links, faults, samples and checks as the
//! library's soak, with the workload going through an smbfuse mount the way programs use one:
//! `fio` jobs that write files and verify every block they read back, `ls -R` of a seeded
//! tree (every name present), and a file renamed back and forth and read back after each
//! rename. Any failing command or system call is a failure: the mount must hide every fault.
//!
//! The client is the smbfuse daemon: its RSS and descriptors come from /proc, its channels,
//! failover counters, library tasks and heap from its status socket. At the end the share is
//! unmounted and the server must list no session and no open handle.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smb3_client::tasks::{TaskCount, TaskKind};
use smb3_tests::reap;

use super::faults::FaultLog;
use super::sampler::{self, Sample, Sampling, FAILOVER};
use super::workload::{Tally, OP_LIMIT};
use super::{settle, within_15_s, AtRest, Outcome, Settings, REST_PATIENCE};
use crate::fuse_mount::Mount;

/// The tree `ls -R` lists: directories, and files in each.
const TREE: (usize, usize) = (10, 30);
/// Size of the file the renamer moves.
const RENAMED_SIZE: usize = 1 << 20;
/// Sizes of the files one fio job writes and verifies, MiB.
const FIO_SIZES_MIB: [u64; 3] = [4, 16, 48];

/// Runs the mount's soak with `s`, mounting with `smbfuse` and asking `smbctl`.
pub fn run(s: &Settings, smbfuse: &Path, smbctl: &Path) -> Result<Outcome, String> {
    let tb = super::start(s)?;
    seed_tree(&tb.share_path("plain")).map_err(|e| format!("seed the tree: {e}"))?;
    let mount = Arc::new(Mount::start(&tb, smbfuse, "soak", &[])?);
    let daemon = Daemon {
        mount: mount.clone(),
        smbctl: smbctl.to_path_buf(),
    };
    let rest_before = daemon.at_rest(Duration::from_secs(30), None);
    eprintln!(
        "soak: at rest before the workload: {}",
        rest_before.describe()
    );

    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let (tally, fault_log) = (Arc::new(Tally::default()), Arc::new(FaultLog::default()));
    let sample = {
        let (d, tally, log) = (daemon.clone(), tally.clone(), fault_log.clone());
        move || d.sample(t0).progress(&tally, &log)
    };
    let sampling = Sampling::start(&s.out_dir, s.sample_every, sample.clone())?;

    let ctx = Ctx {
        mount: mount.dir.clone(),
        tally: tally.clone(),
        stop: stop.clone(),
        t0,
    };
    let mut workers = Vec::new();
    for i in 0..s.uploaders.max(1) {
        let (ctx, seed) = (ctx.clone(), s.seed.wrapping_add(1000 + i as u64));
        workers.push(std::thread::spawn(move || fio_loop(&ctx, i, seed)));
    }
    let listing = ctx.clone();
    workers.push(std::thread::spawn(move || listing_loop(&listing)));
    let seed = s.seed.wrapping_add(3000);
    workers.push(std::thread::spawn(move || rename_loop(&ctx, seed)));

    let ran_for = super::run_faults(&tb, s, t0, &stop, &fault_log);
    // fio is killed past OP_LIMIT; a system call on the mount is not bounded, so a worker
    // stuck in one is reported and left behind.
    let deadline = Instant::now() + OP_LIMIT + Duration::from_secs(30);
    for w in workers {
        while !w.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        if !w.is_finished() {
            tally.fail(t0, "soak", "a worker did not stop in time".into());
        } else if w.join().is_err() {
            tally.fail(t0, "soak", "a worker panicked".into());
        }
    }

    let rest_after = daemon.at_rest(REST_PATIENCE, Some(&rest_before));
    eprintln!(
        "soak: at rest after the workload: {}",
        rest_after.describe()
    );
    let samples = sampling.finish();
    let last = sample();
    drop((sample, daemon, mount));
    let open_at_server = super::wait_for_no_open_files(&tb);
    let sessions_at_server = within_15_s(|| tb.session_count(), |n| *n == 0);
    Ok(Outcome {
        settings: s.clone(),
        ran_for,
        interrupted: false,
        samples,
        tally,
        faults: fault_log,
        rest: (rest_before, rest_after),
        open_at_server,
        sessions_at_server,
        through_mount: true,
        last,
    })
}

/// `tree/d<i>/f<j>` on the server's disk, and the workers' directories, made world-writable
/// (smbd acts as the test user).
fn seed_tree(share_root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for i in 0..TREE.0 {
        let d = share_root.join(format!("tree/d{i}"));
        std::fs::create_dir_all(&d)?;
        for j in 0..TREE.1 {
            std::fs::write(d.join(format!("f{j}")), format!("{i}/{j}"))?;
        }
    }
    for d in ["tree", "fio", "ren"] {
        std::fs::create_dir_all(share_root.join(d))?;
        std::fs::set_permissions(share_root.join(d), std::fs::Permissions::from_mode(0o777))?;
    }
    Ok(())
}

/// What every worker gets.
#[derive(Clone)]
struct Ctx {
    mount: PathBuf,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    t0: Instant,
}

impl Ctx {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A failing worker pauses a second so a broken setup does not flood the log.
    fn fail(&self, who: &str, what: String) {
        self.tally.fail(self.t0, who, what);
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// fio job `id`: a file of a random size written in 1 MiB blocks and every block read back
/// against its CRC, again and again.
fn fio_loop(ctx: &Ctx, id: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = ctx.mount.join("fio");
    while !ctx.stopped() {
        let mib = FIO_SIZES_MIB[rng.random_range(0..FIO_SIZES_MIB.len())];
        let mut cmd = Command::new("fio");
        cmd.arg(format!("--name=soak{id}"))
            .arg(format!("--directory={}", dir.display()))
            .args(["--rw=write", "--bs=1M", "--ioengine=psync", "--end_fsync=1"])
            .args(["--verify=crc32c", "--do_verify=1", "--verify_fatal=1"])
            .arg(format!("--size={mib}M"))
            .arg(format!("--randseed={}", rng.random::<u32>()))
            // Without these fio leaves a verify state file in its working directory.
            .args([
                "--output-format=terse",
                "--unlink=0",
                "--verify_state_save=0",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match run_bounded(cmd) {
            Ok(()) => {
                ctx.tally.uploads.fetch_add(1, Ordering::Relaxed);
                ctx.tally.bytes_up.fetch_add(mib << 20, Ordering::Relaxed);
            }
            Err(e) => ctx.fail(
                &format!("fio {id}"),
                format!("fio write+verify of {mib} MiB: {e}"),
            ),
        }
    }
}

/// Runs `cmd` to its end, killed after [`OP_LIMIT`]: `Err` with its stderr's last lines
/// unless it exited 0.
fn run_bounded(mut cmd: Command) -> Result<(), String> {
    let mut child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let Some(status) = reap(&mut child, OP_LIMIT) else {
        return Err(format!("not done after {OP_LIMIT:?}"));
    };
    if status.success() {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let tail: Vec<&str> = err.lines().collect();
    Err(format!(
        "{status}: {}",
        tail[tail.len().saturating_sub(3)..].join(" | ")
    ))
}

/// `ls -R` of the seeded tree every half second: it must succeed and name every file.
fn listing_loop(ctx: &Ctx) {
    let want = TREE.0 * TREE.1;
    while !ctx.stopped() {
        let out = Command::new("ls")
            .arg("-R")
            .arg(ctx.mount.join("tree"))
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(out) if out.status.success() => {
                let text = String::from_utf8_lossy(&out.stdout);
                match text.lines().filter(|l| l.starts_with('f')).count() {
                    n if n == want => {
                        ctx.tally.metadata_ops.fetch_add(1, Ordering::Relaxed);
                    }
                    n => ctx.fail("ls -R", format!("listed {n} of {want} files")),
                }
            }
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stderr);
                ctx.fail("ls -R", format!("{}: {}", out.status, why.trim()));
            }
            Err(e) => ctx.fail("ls -R", format!("cannot run: {e}")),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A 1 MiB file renamed `a` -> `b` -> `a`, read back and compared after each rename.
fn rename_loop(ctx: &Ctx, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (a, b) = (ctx.mount.join("ren/a"), ctx.mount.join("ren/b"));
    let mut content = vec![0u8; RENAMED_SIZE];
    rng.fill(&mut content[..]);
    if let Err(e) = std::fs::write(&a, &content) {
        return ctx.fail("rename", format!("write {}: {e}", a.display()));
    }
    while !ctx.stopped() {
        for (from, to) in [(&a, &b), (&b, &a)] {
            if let Err(e) = std::fs::rename(from, to) {
                return ctx.fail(
                    "rename",
                    format!("{} -> {}: {e}", from.display(), to.display()),
                );
            }
            match std::fs::read(to) {
                Ok(got) if got == content => {
                    ctx.tally.downloads.fetch_add(1, Ordering::Relaxed);
                    ctx.tally
                        .bytes_down
                        .fetch_add(RENAMED_SIZE as u64, Ordering::Relaxed);
                }
                Ok(got) => {
                    let what = format!(
                        "{} reads back {} bytes, not the file's",
                        to.display(),
                        got.len()
                    );
                    return ctx.fail("rename", what);
                }
                Err(e) => return ctx.fail("rename", format!("read {}: {e}", to.display())),
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The smbfuse daemon, seen from outside.
#[derive(Clone)]
struct Daemon {
    mount: Arc<Mount>,
    smbctl: PathBuf,
}

fn active_channels(status: &serde_json::Value) -> u64 {
    let channels = status["channels"].as_array().map_or(&[][..], Vec::as_slice);
    channels.iter().filter(|c| c["state"] == "active").count() as u64
}

/// The status document's library tasks, per kind.
fn library_tasks(v: &serde_json::Value) -> Vec<TaskCount> {
    let count =
        |kind: TaskKind, what: &str| v["library_tasks"][kind.label()][what].as_u64().unwrap_or(0);
    let kinds = TaskKind::ALL.iter();
    kinds
        .map(|&kind| TaskCount {
            kind,
            live: count(kind, "live"),
            started: count(kind, "started"),
        })
        .collect()
}

impl Daemon {
    fn pid(&self) -> String {
        self.mount.daemon_pid().to_string()
    }

    /// One sample from /proc and the status socket; zeros for what the status lacks, when
    /// the socket does not answer in the middle of a fault.
    fn sample(&self, t0: Instant) -> Sample {
        let v = self.mount.status(&self.smbctl).unwrap_or_default();
        let mc = &v["multichannel"];
        let library: u64 = library_tasks(&v).iter().map(|c| c.live).sum();
        let mut s = Sample {
            t: t0.elapsed().as_secs_f64(),
            rss_kib: sampler::rss_kib(&self.pid()),
            heap_kib: v["heap_in_use_bytes"].as_u64().unwrap_or(0) / 1024,
            fds: sampler::fds_of(&self.pid()),
            tasks: library,
            library_tasks: library,
            channels_active: active_channels(&v),
            channels_listed: v["channels"].as_array().map_or(0, Vec::len) as u64,
            channels_planned: mc["planned"].as_u64().unwrap_or(0),
            interface_queries: mc["interface_queries"].as_u64().unwrap_or(0),
            ..Sample::default()
        };
        for name in FAILOVER {
            s.set(name, mc["failover"][name].as_u64().unwrap_or(0));
        }
        s
    }

    /// The daemon at rest (see [`settle`]); after a workload also once it has given its free
    /// memory back (15 s without I/O, looked at every 5 s, and a margin).
    fn at_rest(&self, patience: Duration, before: Option<&AtRest>) -> AtRest {
        let mut last = serde_json::Value::Null;
        let state = || {
            last = self.mount.status(&self.smbctl).ok()?;
            let planned = last["multichannel"]["planned"].as_u64().unwrap_or(0);
            Some((planned, active_channels(&last), library_tasks(&last)))
        };
        let (channels, library) = settle(patience, before, Duration::from_secs(22), state);
        AtRest {
            fds: sampler::fds_of(&self.pid()),
            tasks: library.iter().map(|c| c.live).sum(),
            library,
            rss_kib: sampler::rss_kib(&self.pid()),
            heap_bytes: last["heap_in_use_bytes"].as_u64(),
            channels,
        }
    }
}
