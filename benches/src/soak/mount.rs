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
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::{spawn, JoinHandle};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smb3_tests::{reap, Testbed};

use super::workload::OP_LIMIT;
use super::{Ctx, Settings, Subject};
use crate::fuse_mount::Mount;
use crate::Context;

/// The tree `ls -R` lists: directories, and files in each.
const TREE: (usize, usize) = (10, 30);
/// Size of the file the renamer moves.
const RENAMED_SIZE: usize = 1 << 20;
/// Sizes of the files one fio job writes and verifies, MiB.
const FIO_SIZES_MIB: [u64; 3] = [4, 16, 48];

/// Seeds `tree/d<i>/f<j>` on the server's disk and the workers' directories, made
/// world-writable (smbd acts as the test user), then mounts the share with `smbfuse`.
pub(crate) fn start(tb: &Testbed, smbfuse: &Path) -> Result<Mount, String> {
    let root = tb.share_path("plain");
    let seeded = (0..TREE.0).try_for_each(|i| {
        let d = root.join(format!("tree/d{i}"));
        std::fs::create_dir_all(&d)?;
        (0..TREE.1).try_for_each(|j| std::fs::write(d.join(format!("f{j}")), format!("{i}/{j}")))
    });
    let made = ["tree", "fio", "ren"].iter().try_for_each(|d| {
        std::fs::create_dir_all(root.join(d))?;
        std::fs::set_permissions(root.join(d), std::fs::Permissions::from_mode(0o777))
    });
    seeded.and(made).ctx("seed the tree")?;
    Mount::start(tb, smbfuse, "soak", &[])
}

/// The daemon as the checks see it: its status socket, asked with `smbctl`, and its process;
/// it gives its free memory back after 15 s without I/O, looked at every 5 s.
pub(crate) fn subject(mount: &Arc<Mount>, smbctl: &Path) -> Subject {
    let (mount, smbctl) = (mount.clone(), smbctl.to_path_buf());
    let pid = mount.daemon_pid().to_string();
    let status = move || mount.status(&smbctl).ok();
    Subject {
        status: Arc::new(status),
        pid,
        runtime: None,
        release: Duration::from_secs(22),
    }
}

/// Starts the fio jobs (one per uploader), the listing and the renamer, each on a thread.
pub(crate) fn workers(mount: &Mount, ctx: &Ctx, s: &Settings) -> Vec<JoinHandle<()>> {
    let base = s.seed;
    let seed = move |n: u64| base.wrapping_add(n);
    let fio = (0..s.uploaders.max(1)).map(|i| {
        worker(mount, ctx, move |c, d| {
            fio_loop(c, d, i, seed(1000 + i as u64))
        })
    });
    let others = [
        worker(mount, ctx, listing_loop),
        worker(mount, ctx, move |c, d| rename_loop(c, d, seed(3000))),
    ];
    fio.chain(others).collect()
}

/// `job` on a thread of its own, with the mount point.
fn worker(
    mount: &Mount,
    ctx: &Ctx,
    job: impl FnOnce(&Ctx, &Path) + Send + 'static,
) -> JoinHandle<()> {
    let (ctx, dir) = (ctx.clone(), mount.dir.clone());
    spawn(move || job(&ctx, &dir))
}

/// A failing worker pauses a second so a broken setup does not flood the log.
fn fail(ctx: &Ctx, who: &str, what: String) {
    ctx.tally.fail(ctx.t0, who, what);
    std::thread::sleep(Duration::from_secs(1));
}

/// fio job `id`: a file of a random size written in 1 MiB blocks and every block read back
/// against its CRC, again and again.
fn fio_loop(ctx: &Ctx, mount: &Path, id: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    while !ctx.stopped() {
        let mib = FIO_SIZES_MIB[rng.random_range(0..FIO_SIZES_MIB.len())];
        let mut cmd = Command::new("fio");
        cmd.arg(format!("--name=soak{id}"))
            .arg(format!("--directory={}", mount.join("fio").display()))
            .args(["--rw=write", "--bs=1M", "--ioengine=psync", "--end_fsync=1"])
            .args(["--verify=crc32c", "--do_verify=1", "--verify_fatal=1"])
            .arg(format!("--size={mib}M"))
            .arg(format!("--randseed={}", rng.random::<u32>()))
            // Without these fio leaves a verify state file in its working directory.
            .args([
                "--output-format=terse",
                "--unlink=0",
                "--verify_state_save=0",
            ]);
        match run_bounded(cmd) {
            Ok(()) => {
                ctx.tally.uploads.fetch_add(1, Ordering::Relaxed);
                ctx.tally.bytes_up.fetch_add(mib << 20, Ordering::Relaxed);
            }
            Err(e) => fail(
                ctx,
                &format!("fio {id}"),
                format!("fio write+verify of {mib} MiB: {e}"),
            ),
        }
    }
}

/// Runs `cmd` to its end, killed after [`OP_LIMIT`]: `Err` with its stderr's last lines
/// unless it exited 0.
fn run_bounded(mut cmd: Command) -> Result<(), String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().ctx("cannot start")?;
    let Some(status) = reap(&mut child, OP_LIMIT) else {
        return Err(format!("not done after {OP_LIMIT:?}"));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take().filter(|_| !status.success()) {
        let _ = e.read_to_string(&mut err);
    }
    let tail: Vec<&str> = err.lines().collect();
    match status.success() {
        true => Ok(()),
        false => Err(format!(
            "{status}: {}",
            tail[tail.len().saturating_sub(3)..].join(" | ")
        )),
    }
}

/// `ls -R` of the seeded tree every half second: it must succeed and name every file.
fn listing_loop(ctx: &Ctx, mount: &Path) {
    let want = TREE.0 * TREE.1;
    while !ctx.stopped() {
        let out = Command::new("ls")
            .arg("-R")
            .arg(mount.join("tree"))
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(out) if out.status.success() => {
                let text = String::from_utf8_lossy(&out.stdout);
                match text.lines().filter(|l| l.starts_with('f')).count() {
                    n if n == want => _ = ctx.tally.metadata_ops.fetch_add(1, Ordering::Relaxed),
                    n => fail(ctx, "ls -R", format!("listed {n} of {want} files")),
                }
            }
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stderr);
                fail(ctx, "ls -R", format!("{}: {}", out.status, why.trim()));
            }
            Err(e) => fail(ctx, "ls -R", format!("cannot run: {e}")),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A 1 MiB file renamed `a` -> `b` -> `a`, read back and compared after each rename.
fn rename_loop(ctx: &Ctx, mount: &Path, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (a, b): (PathBuf, PathBuf) = (mount.join("ren/a"), mount.join("ren/b"));
    let mut content = vec![0u8; RENAMED_SIZE];
    rng.fill(&mut content[..]);
    if let Err(e) = std::fs::write(&a, &content) {
        return fail(ctx, "rename", format!("write {}: {e}", a.display()));
    }
    while !ctx.stopped() {
        for (from, to) in [(&a, &b), (&b, &a)] {
            let renamed = std::fs::rename(from, to);
            let what = match (renamed, std::fs::read(to)) {
                (Err(e), _) => format!("{} -> {}: {e}", from.display(), to.display()),
                (Ok(()), Err(e)) => format!("read {}: {e}", to.display()),
                (Ok(()), Ok(got)) if got != content => {
                    format!(
                        "{} reads back {} bytes, not the file's",
                        to.display(),
                        got.len()
                    )
                }
                (Ok(()), Ok(_)) => {
                    ctx.tally.downloads.fetch_add(1, Ordering::Relaxed);
                    ctx.tally
                        .bytes_down
                        .fetch_add(RENAMED_SIZE as u64, Ordering::Relaxed);
                    continue;
                }
            };
            return fail(ctx, "rename", what);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
