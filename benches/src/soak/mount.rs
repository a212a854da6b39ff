//! The mount's soak (`soak --mount`): the same links, faults, samples and checks as the
//! library's soak, with the workload going through an smbfuse mount the way programs use one:
//! `fio` jobs that write files and verify every block they read back, `ls -R` of a seeded
//! tree (every name present), and a file renamed back and forth and read back after each
//! rename. Any failing command or system call is a failure: the mount must hide every fault.
//!
//! The client is the smbfuse daemon: its RSS and descriptors come from /proc, its channels,
//! failover counters and library tasks from its status socket (`smbctl status --json`). At
//! the end the share is unmounted and the server must list no session and no open handle.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smb3_client::tasks::{TaskCount, TaskKind};
use smb3_tests::{Testbed, TestbedConfig};

use super::faults::FaultLog;
use super::sampler::{self, Sample};
use super::workload::{Tally, OP_LIMIT};
use super::{grown_kinds, AtRest, Outcome, Settings, REST_PATIENCE};
use crate::mount::Mount;

/// Directories and files of the tree `ls -R` lists.
const TREE_DIRS: usize = 10;
const FILES_PER_DIR: usize = 30;
/// Size of the file the renamer moves.
const RENAMED_SIZE: usize = 1 << 20;
/// Sizes of the files one fio job writes and verifies, MiB.
const FIO_SIZES_MIB: [u64; 3] = [4, 16, 48];

/// How long after its last I/O the daemon has given its free memory back
/// (`smbfuse::idle_memory`: 15 s quiet, looked at every 5 s) and a margin.
const MEMORY_RETURNED: Duration = Duration::from_secs(22);

/// Run the mount's soak with `s`; `smbfuse` and `smbctl` are the programs to use.
pub fn run(s: &Settings, smbfuse: &Path, smbctl: &Path) -> Result<Outcome, String> {
    std::fs::create_dir_all(&s.out_dir)
        .map_err(|e| format!("cannot create {}: {e}", s.out_dir.display()))?;
    let tb = Arc::new(Testbed::start(TestbedConfig::shaped(s.links, s.rate_mbit))?);
    seed_tree(&tb.share_path("plain")).map_err(|e| format!("seed the tree: {e}"))?;
    let mount = Mount::start(&tb, smbfuse, "soak", &[])?;
    let daemon = Daemon {
        pid: mount.daemon_pid(),
        dir: mount.dir.clone(),
        smbctl: smbctl.to_path_buf(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let rest_before = daemon.at_rest(Duration::from_secs(30), None)?;
    eprintln!(
        "soak: at rest before the workload: {}",
        rest_before.describe()
    );

    let t0 = Instant::now();
    let tally = Arc::new(Tally::default());
    let fault_log = Arc::new(FaultLog::default());
    let sampling = {
        let (d, tally, log) = (daemon.clone(), tally.clone(), fault_log.clone());
        sampler::Sampling::start(&s.out_dir, s.sample_every, move || {
            d.sample(t0, &tally, &log)
        })?
    };

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
    {
        let ctx = ctx.clone();
        workers.push(std::thread::spawn(move || listing_loop(&ctx)));
    }
    {
        let (ctx, seed) = (ctx.clone(), s.seed.wrapping_add(3000));
        workers.push(std::thread::spawn(move || rename_loop(&ctx, seed)));
    }

    let fault_thread = super::start_faults(&tb, s, t0, &stop, &fault_log);
    let ran_for = super::run_for_duration(s, t0, &stop, fault_thread, &fault_log);
    // Every operation is bounded by OP_LIMIT (fio is killed past it; a system call on the
    // mount is not, so a worker stuck in one is reported and left behind).
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

    let rest_after = daemon.at_rest(REST_PATIENCE, Some(&rest_before))?;
    eprintln!(
        "soak: at rest after the workload: {}",
        rest_after.describe()
    );
    let samples = sampling.finish();
    let last = daemon.sample(t0, &tally, &fault_log);
    drop(mount);
    let open_at_server = super::wait_for_no_open_files(&tb);
    let sessions_at_server = wait_for_no_session(&tb);
    drop(tb);

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
        expected_sessions: 0,
        through_mount: true,
        last,
    })
}

/// Sessions smbd lists after the unmount, once its LOGOFF has landed (bounded).
fn wait_for_no_session(tb: &Testbed) -> Result<usize, String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let n = tb.session_count()?;
        if n == 0 || Instant::now() > deadline {
            return Ok(n);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `tree/d<i>/f<j>` on the server's disk, made world-writable like the other soak files.
fn seed_tree(share_root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for i in 0..TREE_DIRS {
        let d = share_root.join(format!("tree/d{i}"));
        std::fs::create_dir_all(&d)?;
        for j in 0..FILES_PER_DIR {
            std::fs::write(d.join(format!("f{j}")), format!("{i}/{j}"))?;
        }
    }
    for d in ["tree", "fio", "ren"] {
        let p = share_root.join(d);
        std::fs::create_dir_all(&p)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777))?;
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

/// fio job `id`: write a file of a random size in 1 MiB blocks and read every block back,
/// checking its CRC (`--verify=crc32c --verify_fatal=1`), again and again.
fn fio_loop(ctx: &Ctx, id: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let who = format!("fio {id}");
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
            // fio would leave a verify state file in its working directory after a failure.
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
            Err(e) => ctx.fail(&who, format!("fio write+verify of {mib} MiB: {e}")),
        }
    }
}

/// Run `cmd` to its end, at most [`OP_LIMIT`] (then it is killed): `Err` with its stderr's
/// last lines unless it exited 0.
fn run_bounded(mut cmd: Command) -> Result<(), String> {
    let mut child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let deadline = Instant::now() + OP_LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("not done after {OP_LIMIT:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    let tail: Vec<&str> = err.lines().rev().take(3).collect();
    Err(format!(
        "{status}: {}",
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    ))
}

/// `ls -R` of the seeded tree: it must succeed and name every file, every half second.
fn listing_loop(ctx: &Ctx) {
    let tree = ctx.mount.join("tree");
    while !ctx.stopped() {
        let mut cmd = Command::new("ls");
        cmd.arg("-R")
            .arg(&tree)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match cmd.output() {
            Ok(out) if out.status.success() => {
                let text = String::from_utf8_lossy(&out.stdout);
                let files = text.lines().filter(|l| l.starts_with('f')).count();
                if files == TREE_DIRS * FILES_PER_DIR {
                    ctx.tally.metadata_ops.fetch_add(1, Ordering::Relaxed);
                } else {
                    ctx.fail(
                        "ls -R",
                        format!("listed {files} of {} files", TREE_DIRS * FILES_PER_DIR),
                    );
                }
            }
            Ok(out) => ctx.fail(
                "ls -R",
                format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ),
            Err(e) => ctx.fail("ls -R", format!("cannot run: {e}")),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A 1 MiB file renamed `a` → `b` → `a`, read back and compared after each rename.
fn rename_loop(ctx: &Ctx, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = ctx.mount.join("ren");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let mut content = vec![0u8; RENAMED_SIZE];
    rng.fill(&mut content[..]);
    if let Err(e) = std::fs::write(&a, &content) {
        ctx.fail("rename", format!("write {}: {e}", a.display()));
        return;
    }
    while !ctx.stopped() {
        for (from, to) in [(&a, &b), (&b, &a)] {
            if let Err(e) = std::fs::rename(from, to) {
                ctx.fail(
                    "rename",
                    format!("{} -> {}: {e}", from.display(), to.display()),
                );
                return;
            }
            match std::fs::read(to) {
                Ok(got) if got == content => {
                    ctx.tally.downloads.fetch_add(1, Ordering::Relaxed);
                    ctx.tally
                        .bytes_down
                        .fetch_add(RENAMED_SIZE as u64, Ordering::Relaxed);
                }
                Ok(got) => {
                    ctx.fail(
                        "rename",
                        format!(
                            "{} reads back {} bytes, not the file's",
                            to.display(),
                            got.len()
                        ),
                    );
                    return;
                }
                Err(e) => {
                    ctx.fail("rename", format!("read {}: {e}", to.display()));
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The smbfuse daemon, seen from outside.
#[derive(Clone)]
struct Daemon {
    pid: u32,
    dir: PathBuf,
    smbctl: PathBuf,
}

impl Daemon {
    fn status(&self) -> Result<serde_json::Value, String> {
        let out = Command::new(&self.smbctl)
            .args(["status", "--json"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.smbctl.display()))?;
        if !out.status.success() {
            return Err(format!(
                "smbctl status: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("smbctl status --json: {e}"))
    }

    fn rss_kib(&self) -> u64 {
        sampler::rss_kib_of(&self.pid.to_string())
    }

    fn fds(&self) -> u64 {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid)).map_or(0, |d| d.count() as u64)
    }

    /// One sample from /proc and the status socket (zeros for what the status lacks, when
    /// the socket does not answer in the middle of a fault).
    fn sample(&self, t0: Instant, tally: &Tally, faults: &FaultLog) -> Sample {
        let v = self.status().unwrap_or_default();
        let fo = &v["multichannel"]["failover"];
        let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
        let channels = v["channels"].as_array().cloned().unwrap_or_default();
        let library = library_tasks(&v).iter().map(|c| c.live).sum();
        Sample {
            t: t0.elapsed().as_secs_f64(),
            rss_kib: self.rss_kib(),
            heap_kib: v["heap_in_use_bytes"].as_u64().unwrap_or(0) / 1024,
            fds: self.fds(),
            tasks: library,
            library_tasks: library,
            channels_active: channels.iter().filter(|c| c["state"] == "active").count() as u64,
            channels_listed: channels.len() as u64,
            channels_planned: n(&v["multichannel"]["planned"]),
            interface_queries: n(&v["multichannel"]["interface_queries"]),
            channel_losses: n(&fo["channel_losses"]),
            silent_losses: n(&fo["silent_losses"]),
            false_alarms: n(&fo["false_alarms"]),
            replays: n(&fo["replays"]),
            not_replayed: n(&fo["not_replayed"]),
            reconnects: n(&fo["reconnects"]),
            sessions_reestablished: n(&fo["sessions_reestablished"]),
            opens_reclaimed: n(&fo["opens_reclaimed"]),
            opens_reopened: n(&fo["opens_reopened"]),
            opens_lost: n(&fo["opens_lost"]),
            listings_resumed: n(&fo["listings_resumed"]),
            ops: tally.ops(),
            bytes: tally.bytes(),
            failures: tally.failed.load(Ordering::Relaxed),
            faults: faults.done.load(Ordering::Relaxed),
        }
    }

    /// Wait (bounded) until every planned channel is active and the daemon's library tasks
    /// are back to `before`'s counts (or stop falling), then read it at rest.
    fn at_rest(&self, patience: Duration, before: Option<&AtRest>) -> Result<AtRest, String> {
        let start = Instant::now();
        let deadline = start + patience;
        // After a workload: the library drops its idle reply buffers after 10 s, the daemon
        // gives free memory back after 15 s without I/O, looked at every 5 s.
        let pool_released = start + before.map_or(Duration::ZERO, |_| MEMORY_RETURNED);
        let mut last = self.status()?;
        let mut library = library_tasks(&last);
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let Ok(now) = self.status() else { continue };
            let channels = now["channels"].as_array().cloned().unwrap_or_default();
            let active = channels.iter().filter(|c| c["state"] == "active").count() as u64;
            let planned = now["multichannel"]["planned"].as_u64().unwrap_or(0);
            let tasks = library_tasks(&now);
            let settled = match before {
                Some(b) => grown_kinds(&b.library, &tasks).is_empty(),
                None => tasks.iter().zip(&library).all(|(n, l)| n.live >= l.live),
            };
            library = tasks;
            last = now;
            let at = Instant::now();
            let ready = planned > 0 && active >= planned && settled && at >= pool_released;
            if ready || at >= deadline {
                break;
            }
        }
        let channels = last["channels"].as_array().cloned().unwrap_or_default();
        let total = library.iter().map(|c| c.live).sum();
        Ok(AtRest {
            fds: self.fds(),
            tasks: total,
            library,
            rss_kib: self.rss_kib(),
            heap_bytes: last["heap_in_use_bytes"].as_u64(),
            channels: channels.iter().filter(|c| c["state"] == "active").count() as u64,
        })
    }
}

/// The status document's library tasks, per kind.
fn library_tasks(v: &serde_json::Value) -> Vec<TaskCount> {
    TaskKind::ALL
        .iter()
        .map(|&kind| {
            let c = &v["library_tasks"][kind.label()];
            TaskCount {
                kind,
                live: c["live"].as_u64().unwrap_or(0),
                started: c["started"].as_u64().unwrap_or(0),
            }
        })
        .collect()
}
