//! The smbfuse part of the benchmark (`smb-bench --mount`): `fio` through a mount against
//! `smbcp` on the same testbed, and how fast the mount lists and stats a large directory
//! against the library's own `read_dir`.
//!
//! The mount is `smbfuse -f` started in the client network namespace, as a user would run it;
//! fio runs on the host side of the mount (a FUSE mount is seen from every network namespace).
//! Throughput is measured two ways. By the clocks of the tools: fio's runtime (from the file's
//! open to the last read, or to the end of the final `fsync` of a write) against smbcp's copy
//! time (from the first open to the last close, after connecting); neither counts its
//! process's start-up. And by wall time of the whole process, start-up included in both: fio
//! starts its job processes (about a quarter of a second, measured in each run on a file in
//! local memory by [`fio_startup`] and printed with the table), smbcp connects and logs on.
//! Client CPU is fio's plus the daemon's. The share of the kernel's READ/WRITE requests that
//! were 1 MiB comes from the mount's status socket (`smbctl status --json`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smb3_client::ClientConfig;
use smb3_tests::{client_block_on, Testbed};

use crate::child::run_measured;
use crate::results::{f1, f2, ratio, Results};
use crate::server_cpu::{process_cpu, ServerMeter};
use crate::session::Login;
use crate::stats::{median, min_max};
use crate::table::Table;
use crate::transfer::Direction;

/// A share mounted with `smbfuse -f`; unmounted, and the daemon gone, when dropped.
#[derive(Debug)]
pub struct Mount {
    /// The mount point.
    pub dir: PathBuf,
    daemon: Child,
}

impl Mount {
    /// Mount `tb`'s `[plain]` share on a fresh directory under `/tmp` with `options` (`-o`),
    /// waiting (at most 30 s) until it is mounted.
    pub fn start(
        tb: &Testbed,
        smbfuse: &Path,
        name: &str,
        options: &[&str],
    ) -> Result<Mount, String> {
        let dir = std::env::temp_dir().join(format!("smb-bench-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let source = format!(
            "smb://{};{}@{}/plain",
            tb.domain(),
            tb.user(),
            tb.server_addr(1)
        );
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", tb.client_ns()))
            .arg("--")
            .arg(smbfuse)
            .arg(&source)
            .arg(&dir)
            .arg("-f")
            .env("SMB_PASSWORD", tb.password())
            .env_remove("SMB_USER")
            .env_remove("SMB_DOMAIN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for o in options {
            cmd.args(["-o", o]);
        }
        let daemon = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", smbfuse.display()))?;
        let mut mount = Mount { dir, daemon };
        let started = Instant::now();
        while !mount.is_mounted() {
            if let Ok(Some(status)) = mount.daemon.try_wait() {
                return Err(format!("smbfuse exited before mounting: {status}"));
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!("smbfuse did not mount {source} within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(mount)
    }

    fn is_mounted(&self) -> bool {
        let want = self.dir.to_string_lossy();
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(want.as_ref()))
    }

    /// The daemon's process ID.
    pub fn daemon_pid(&self) -> u32 {
        self.daemon.id()
    }

    /// CPU time the daemon has used so far.
    pub fn daemon_cpu(&self) -> Duration {
        process_cpu(self.daemon.id()).unwrap_or_default()
    }

    /// The mount's status document (see `smbctl status`).
    pub fn status(&self, smbctl: &Path) -> Result<serde_json::Value, String> {
        let out = Command::new(smbctl)
            .args(["status", "--json"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", smbctl.display()))?;
        if !out.status.success() {
            return Err(format!(
                "smbctl status: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("smbctl status --json: {e}"))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // The daemon ends once unmounted; bounded, then it is stopped the hard way.
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(self.daemon.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if matches!(self.daemon.try_wait(), Ok(None)) {
            let _ = self.daemon.kill();
            let _ = self.daemon.wait();
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// One fio job through the mount: sequential, 1 MiB blocks, `jobs` processes each moving its
/// own quarter (half, …) of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FioJob {
    /// Read an existing file or write new ones.
    pub direction: Direction,
    /// fio's `numjobs`.
    pub jobs: usize,
}

impl FioJob {
    /// `fio, 4 jobs`.
    pub fn label(&self) -> String {
        match self.jobs {
            1 => "fio, 1 job".into(),
            n => format!("fio, {n} jobs"),
        }
    }

    /// The fio command: a read of `file` (each job its own range of it), or a write of one
    /// new file per job in `dir` ending with an fsync, so the time includes the bytes reaching
    /// the server.
    fn command(&self, dir: &Path, file: &str, size: u64) -> Command {
        let per_job = size / self.jobs as u64;
        let mut cmd = Command::new("fio");
        cmd.args([
            "--name=seq",
            "--bs=1M",
            "--ioengine=psync",
            "--group_reporting",
            "--output-format=json",
            "--fallocate=none",
        ])
        .arg(format!("--numjobs={}", self.jobs))
        .arg(format!("--size={per_job}"));
        match self.direction {
            Direction::Download => {
                cmd.arg("--rw=read")
                    .arg(format!("--filename={}", dir.join(file).display()))
                    .arg(format!("--offset_increment={per_job}"));
            }
            Direction::Upload => {
                cmd.arg("--rw=write")
                    .arg(format!("--directory={}", dir.display()))
                    .arg("--filename_format=fio-write.$jobnum")
                    .arg("--end_fsync=1");
            }
        }
        cmd
    }
}

/// One measured fio run.
#[derive(Debug, Clone)]
pub struct FioSample {
    /// Bytes fio read or wrote.
    pub bytes: u64,
    /// Wall time of the fio process.
    pub wall: Duration,
    /// fio's own runtime of the job (the longest job's, with several).
    pub fio_runtime: Duration,
    /// fio's CPU time plus the mount daemon's meanwhile.
    pub client_cpu: Duration,
    /// smbd's CPU time meanwhile.
    pub server_cpu: Duration,
    /// The kernel's READ (or WRITE) requests meanwhile, and how many were 1 MiB.
    pub requests: u64,
    /// See `requests`.
    pub full_requests: u64,
}

impl FioSample {
    /// MB/s (10^6 bytes per second) by fio's own clock.
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.fio_runtime.as_secs_f64() / 1e6
    }

    /// MB/s over the fio process's wall time.
    pub fn wall_mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64() / 1e6
    }

    fn per_gib(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() / (self.bytes as f64 / (1u64 << 30) as f64)
    }
}

/// The request counters of `direction` in a status document: (requests, full size).
fn request_counts(status: &serde_json::Value, direction: Direction) -> (u64, u64) {
    let kind = match direction {
        Direction::Download => "read",
        Direction::Upload => "write",
    };
    let c = &status["fuse_io"][kind];
    (
        c["requests"].as_u64().unwrap_or(0),
        c["full_size"].as_u64().unwrap_or(0),
    )
}

/// What a fio run needs besides the job.
#[derive(Debug)]
pub struct FioSetup<'a> {
    /// The testbed (for smbd's pid and the share's host path).
    pub tb: &'a Testbed,
    /// The mount.
    pub mount: &'a Mount,
    /// `smbctl`, for the request counters.
    pub smbctl: &'a Path,
    /// The file reads read (share-relative), `size` bytes long.
    pub file: &'a str,
    /// Bytes per run.
    pub size: u64,
}

/// Run `job` once and measure it. The written files are checked for size on the server and
/// removed; a fio that fails or moves fewer bytes than asked is an error.
pub fn run_fio(setup: &FioSetup<'_>, job: FioJob) -> Result<FioSample, String> {
    // Reads start cold: nothing of the file in this machine's page cache.
    std::fs::write("/proc/sys/vm/drop_caches", b"3")
        .map_err(|e| format!("dropping the page cache: {e}"))?;
    let before = request_counts(&setup.mount.status(setup.smbctl)?, job.direction);
    let meter = ServerMeter::start(setup.tb.smbd_pid())?;
    let daemon_before = setup.mount.daemon_cpu();
    let fin = run_measured(job.command(&setup.mount.dir, setup.file, setup.size))?;
    let daemon_cpu = setup.mount.daemon_cpu().saturating_sub(daemon_before);
    let server_cpu = meter.stop()?;
    let after = request_counts(&setup.mount.status(setup.smbctl)?, job.direction);
    if !fin.status.success() {
        return Err(format!(
            "fio {}: {} ({})",
            job.label(),
            fin.status,
            fin.stderr_tail()
        ));
    }
    let (bytes, fio_runtime) = fio_report(&fin.stdout, job.direction)?;
    if bytes != setup.size {
        return Err(format!(
            "fio {} moved {bytes} bytes, not {}",
            job.label(),
            setup.size
        ));
    }
    if job.direction == Direction::Upload {
        check_and_remove_written(setup, job)?;
    }
    Ok(FioSample {
        bytes,
        wall: fin.wall,
        fio_runtime,
        client_cpu: fin.cpu() + daemon_cpu,
        server_cpu,
        requests: after.0.saturating_sub(before.0),
        full_requests: after.1.saturating_sub(before.1),
    })
}

/// fio's own start-up: the wall time of a fio process reading a 64 MiB file from local memory
/// (`/dev/shm`) with `jobs` jobs, less its runtime, median of `reps`. It is what separates
/// the wall-time columns from fio's clock whatever the file system, so the tables show it.
pub fn fio_startup(jobs: usize, reps: usize) -> Result<Duration, String> {
    const SIZE: u64 = 64 << 20;
    let dir = Path::new("/dev/shm");
    let name = format!("smb-bench-fio-startup-{}", std::process::id());
    let path = dir.join(&name);
    crate::data::write_pattern(&path, crate::data::SMALL_SEED, SIZE)?;
    let job = FioJob {
        direction: Direction::Download,
        jobs,
    };
    let mut startups = Vec::new();
    let result = (|| {
        for _ in 0..reps.max(1) {
            let fin = run_measured(job.command(dir, &name, SIZE))?;
            if !fin.status.success() {
                return Err(format!("fio on {}: {}", path.display(), fin.stderr_tail()));
            }
            let (_, runtime) = fio_report(&fin.stdout, Direction::Download)?;
            startups.push(fin.wall.saturating_sub(runtime).as_secs_f64());
        }
        Ok(())
    })();
    let removed = crate::data::remove_if_present(&path);
    result?;
    removed?;
    median(&startups)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| "no fio start-up measured".to_string())
}

/// The bytes fio's JSON report says the group moved (`io_bytes`) and in how long (`runtime`,
/// milliseconds: with `group_reporting` the longest job's, with `end_fsync` the final fsync
/// included).
fn fio_report(json: &str, direction: Direction) -> Result<(u64, Duration), String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("fio's JSON report: {e}"))?;
    let kind = match direction {
        Direction::Download => "read",
        Direction::Upload => "write",
    };
    let field = |name: &str| {
        v["jobs"][0][kind][name]
            .as_u64()
            .ok_or_else(|| format!("fio's JSON report has no jobs[0].{kind}.{name}"))
    };
    let runtime_ms = field("runtime")?;
    if runtime_ms == 0 {
        return Err(format!("fio's JSON report gives jobs[0].{kind}.runtime 0"));
    }
    Ok((field("io_bytes")?, Duration::from_millis(runtime_ms)))
}

/// Every file a write job made has its full size on the server's disk; then it goes.
fn check_and_remove_written(setup: &FioSetup<'_>, job: FioJob) -> Result<(), String> {
    let per_job = setup.size / job.jobs as u64;
    for n in 0..job.jobs {
        let name = format!("fio-write.{n}");
        let on_server = setup.tb.share_path("plain").join(&name);
        let len = std::fs::metadata(&on_server)
            .map_err(|e| format!("{}: {e}", on_server.display()))?
            .len();
        if len != per_job {
            return Err(format!(
                "{name} is {len} bytes on the server, not {per_job}"
            ));
        }
        std::fs::remove_file(setup.mount.dir.join(&name))
            .map_err(|e| format!("removing {name} through the mount: {e}"))?;
    }
    Ok(())
}

/// The fio runs of one setup and direction, with smbcp's and raw TCP's medians beside them.
#[derive(Debug, Clone)]
pub struct FioSeries {
    /// The link setup's label.
    pub link: String,
    /// The job.
    pub job: FioJob,
    /// The mount's `-o` options when not the defaults (`--mount-compare`).
    pub options: Option<String>,
    /// One sample per repetition.
    pub samples: Vec<FioSample>,
}

impl FioSeries {
    fn mb_per_s(&self) -> Vec<f64> {
        self.samples.iter().map(FioSample::mb_per_s).collect()
    }

    fn wall_mb_per_s(&self) -> Vec<f64> {
        self.samples.iter().map(FioSample::wall_mb_per_s).collect()
    }

    fn median_of(&self, f: impl Fn(&FioSample) -> f64) -> f64 {
        median(&self.samples.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    }
}

/// smbcp's, smbclient's and raw TCP's median MB/s for a setup and direction, to compare with.
#[derive(Debug, Clone, Copy)]
struct Yardsticks {
    /// smbcp, default settings, same testbed and file: by its own clock (copy only).
    smbcp_copy: f64,
    /// The same over smbcp's wall time.
    smbcp: f64,
    /// smbclient, same testbed and file (`NAN` when not measured).
    smbclient: f64,
    /// Aggregate raw TCP over the links (`None` when not measured: unshaped, where the CPUs
    /// are the limit).
    raw_tcp: Option<f64>,
}

impl Yardsticks {
    fn from(results: &Results, link: &str, direction: Direction) -> Yardsticks {
        let series = |tool: &str| {
            results
                .series
                .iter()
                .find(|s| s.tool == tool && s.link == link && s.direction == direction)
        };
        let median_of = |tool: &str| series(tool).map_or(f64::NAN, |s| s.mb_per_s());
        Yardsticks {
            smbcp_copy: series("smbcp").map_or(f64::NAN, |s| s.copy_mb_per_s()),
            smbcp: median_of("smbcp"),
            smbclient: median_of("smbclient"),
            raw_tcp: results.raw_for(link, direction).map(|r| r.mb_per_s()),
        }
    }
}

/// The throughput table: per setup and direction, each fio job against smbcp's median and
/// raw TCP's from `results` (same testbed, same run). Each clock is compared with its like:
/// fio's runtime with smbcp's copy time and iperf3's rate, wall time with wall time (smbclient
/// reports none of its own).
pub fn throughput_table(series: &[FioSeries], results: &Results) -> Table {
    let mut t = Table::new(&[
        "links",
        "direction",
        "client",
        ">MB/s (fio)",
        ">min-max",
        ">x smbcp copy",
        ">x raw TCP",
        ">MB/s (wall)",
        ">x smbcp (wall)",
        ">x smbclient (wall)",
        ">1 MiB requests %",
        ">client CPU s/GiB",
        ">smbd CPU s/GiB",
    ]);
    for s in series {
        let y = Yardsticks::from(results, &s.link, s.job.direction);
        let mb = median(&s.mb_per_s()).unwrap_or(f64::NAN);
        let (lo, hi) = min_max(&s.mb_per_s()).unwrap_or((f64::NAN, f64::NAN));
        let wall = median(&s.wall_mb_per_s()).unwrap_or(f64::NAN);
        let requests: u64 = s.samples.iter().map(|x| x.requests).sum();
        let full: u64 = s.samples.iter().map(|x| x.full_requests).sum();
        t.row(vec![
            s.link.clone(),
            s.job.direction.to_string(),
            match &s.options {
                Some(o) => format!("{} ({o})", s.job.label()),
                None => s.job.label(),
            },
            f1(mb),
            format!("{}-{}", f1(lo), f1(hi)),
            ratio(mb, y.smbcp_copy),
            y.raw_tcp.map_or("-".into(), |r| ratio(mb, r)),
            f1(wall),
            ratio(wall, y.smbcp),
            if y.smbclient.is_nan() {
                "-".into()
            } else {
                ratio(wall, y.smbclient)
            },
            if requests == 0 {
                "-".into()
            } else {
                format!("{:.0}", full as f64 * 100.0 / requests as f64)
            },
            f2(s.median_of(|x| x.per_gib(x.client_cpu))),
            f2(s.median_of(|x| x.per_gib(x.server_cpu))),
        ]);
    }
    t
}

/// Entries of the listing directory.
pub const LISTED: usize = 10_000;
/// Its name on the share.
pub const LISTING_DIR: &str = "list10k";

/// Put [`LISTED`] empty files in [`LISTING_DIR`] straight into the share's directory.
pub fn stage_listing(tb: &Testbed) -> Result<(), String> {
    let dir = tb.share_path("plain").join(LISTING_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for n in 0..LISTED {
        let f = dir.join(format!("file-{n:05}"));
        std::fs::write(&f, b"").map_err(|e| format!("{}: {e}", f.display()))?;
    }
    Ok(())
}

/// Timings of the listing part, each a list of repetitions.
#[derive(Debug, Default, Clone)]
pub struct Listing {
    /// `ls -l` of the directory through the mount, attributes not cached.
    pub ls_l: Vec<Duration>,
    /// The library's `Share::read_dir` of the same directory.
    pub read_dir: Vec<Duration>,
    /// `stat` of every entry by path, nothing cached (fresh mount).
    pub stat_uncached: Vec<Duration>,
    /// The same again at once, from the kernel's attribute cache.
    pub stat_cached: Vec<Duration>,
}

/// `ls -l` of the listing directory through `mount`, `reps` times, each after the
/// attribute cache (`actimeo`, 1 s by default) has expired.
pub fn time_ls(mount: &Mount, reps: usize, listing: &mut Listing) -> Result<(), String> {
    for _ in 0..reps {
        std::thread::sleep(Duration::from_millis(1500));
        let mut cmd = Command::new("ls");
        cmd.args(["-l", "--color=never"])
            .arg(mount.dir.join(LISTING_DIR));
        let fin = run_measured(cmd)?;
        let lines = fin.stdout.lines().count();
        if !fin.status.success() || lines != LISTED + 1 {
            return Err(format!(
                "ls -l through the mount: {} with {lines} lines ({})",
                fin.status,
                fin.stderr_tail()
            ));
        }
        listing.ls_l.push(fin.wall);
    }
    Ok(())
}

/// `stat` of every entry through a fresh mount with a long attribute timeout: once with
/// nothing cached, then again from the cache.
pub fn time_stats(mount: &Mount, listing: &mut Listing) -> Result<(), String> {
    let dir = mount.dir.join(LISTING_DIR);
    for pass in [&mut listing.stat_uncached, &mut listing.stat_cached] {
        let started = Instant::now();
        for n in 0..LISTED {
            let f = dir.join(format!("file-{n:05}"));
            std::fs::metadata(&f).map_err(|e| format!("stat {}: {e}", f.display()))?;
        }
        pass.push(started.elapsed());
    }
    Ok(())
}

/// The library's own listing of the directory, `reps` times over one session.
pub fn time_read_dir(tb: &Testbed, reps: usize, listing: &mut Listing) -> Result<(), String> {
    let rt = tb.client_runtime();
    let login = Login::to(tb);
    let times = client_block_on(&rt, async move {
        let (client, share) = login.plain_share(ClientConfig::default()).await?;
        let mut times = Vec::new();
        for _ in 0..reps {
            let started = Instant::now();
            let entries = share
                .read_dir(LISTING_DIR)
                .await
                .map_err(|e| format!("read_dir {LISTING_DIR}: {e}"))?;
            times.push(started.elapsed());
            if entries.len() < LISTED {
                return Err(format!("read_dir gave {} entries", entries.len()));
            }
        }
        let _ = client.logoff().await;
        Ok::<_, String>(times)
    });
    drop(rt);
    listing.read_dir.extend(times?);
    Ok(())
}

/// The listing table: median time of each, per second, and against the library's listing.
pub fn listing_table(link: &str, l: &Listing) -> Table {
    let secs = |d: &[Duration]| median(&d.iter().map(Duration::as_secs_f64).collect::<Vec<_>>());
    let read_dir = secs(&l.read_dir).unwrap_or(f64::NAN);
    let mut t = Table::new(&[
        "link",
        "what",
        ">median s",
        ">entries/s",
        ">x library read_dir time",
    ]);
    for (what, d) in [
        ("library `Share::read_dir`", &l.read_dir),
        ("`ls -l` through the mount (attributes not cached)", &l.ls_l),
        ("`stat` of each entry, nothing cached", &l.stat_uncached),
        ("`stat` of each entry again, cached", &l.stat_cached),
    ] {
        let s = secs(d).unwrap_or(f64::NAN);
        t.row(vec![
            link.into(),
            what.into(),
            format!("{s:.3}"),
            format!("{:.0}", LISTED as f64 / s),
            format!("{:.2}", s / read_dir),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_report_bytes_and_runtime() {
        let json = r#"{"jobs":[{"read":{"io_bytes":1073741824,"runtime":2377},
                                "write":{"io_bytes":0,"runtime":0}}]}"#;
        assert_eq!(
            fio_report(json, Direction::Download),
            Ok((1 << 30, Duration::from_millis(2377)))
        );
        // A direction that did not run has no runtime to divide by.
        assert!(fio_report(json, Direction::Upload).is_err());
        assert!(fio_report("{}", Direction::Upload).is_err());
    }

    #[test]
    fn request_counts_from_status() {
        let v = serde_json::json!({"fuse_io": {"read": {"requests": 10, "full_size": 9}}});
        assert_eq!(request_counts(&v, Direction::Download), (10, 9));
        assert_eq!(request_counts(&v, Direction::Upload), (0, 0));
    }

    #[test]
    fn fio_command_splits_the_size_over_jobs() {
        let job = FioJob {
            direction: Direction::Download,
            jobs: 4,
        };
        let cmd = job.command(Path::new("/m"), "big", 1 << 30);
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into()).collect();
        assert!(args.contains(&format!("--size={}", 1 << 28)));
        assert!(args.contains(&format!("--offset_increment={}", 1 << 28)));
        assert!(args.contains(&"--filename=/m/big".to_string()));
    }
}
