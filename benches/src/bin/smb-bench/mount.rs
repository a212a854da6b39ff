//! `smb-bench mount`: smbfuse measured with fio against smbcp on the same testbeds (1 link and
//! 4 links at 1 Gbit/s, one unshaped link), and a 10,000-entry directory listed through the
//! mount against the library's `read_dir`. The `mount` section of docs/PERFORMANCE.md.
//!
//! The mount is `smbfuse -f` in the client namespace; fio runs on the host side of it.
//! Throughput is compared two ways, each clock with its like: fio's runtime (open to last
//! read, or to the end of the final fsync of a write) against smbcp's copy time (first open
//! to last close, after connecting) and raw TCP; and the wall time of the whole process,
//! start-up included (fio's own, measured here on a file in local memory, and smbcp's connect
//! and logon). Client CPU is fio's plus the daemon's; the share of the kernel's requests that
//! were 1 MiB comes from the mount's status socket.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use smb3_benches::data::{remove_if_present, write_pattern, SMALL_SEED};
use smb3_benches::fuse_mount::Mount;
use smb3_benches::session::connect_plain;
use smb3_benches::stats::median;
use smb3_benches::table::{num, range, ratio, Table};
use smb3_client::ClientConfig;
use smb3_tests::{client_block_on, Testbed};

use crate::bench::{Bench, LinkSetup, REMOTE_BIG};
use crate::child::run_measured;
use crate::machine::{process_cpu, wait_until_quiet, ServerMeter};
use crate::results::Results;
use crate::transfer::{Direction, ShareKind, Tool};
use crate::Common;

/// Entries of the listed directory, and its name on the share.
const LISTED: usize = 10_000;
const LISTING_DIR: &str = "list10k";

/// One fio job: sequential, 1 MiB blocks, `jobs` processes each moving its own part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FioJob {
    direction: Direction,
    jobs: usize,
}

impl FioJob {
    fn label(&self) -> String {
        format!(
            "fio, {} job{}",
            self.jobs,
            if self.jobs == 1 { "" } else { "s" }
        )
    }

    /// A read of `file` (each job its own range), or a write of one new file per job into
    /// `dir` ending with an fsync, so the time includes the bytes reaching the server.
    fn command(&self, dir: &Path, file: &str, size: u64) -> Command {
        let per_job = size / self.jobs as u64;
        let mut cmd = Command::new("fio");
        cmd.args([
            "--name=seq",
            "--bs=1M",
            "--ioengine=psync",
            "--group_reporting",
            "--output-format=json",
        ])
        .args([
            "--fallocate=none",
            &format!("--numjobs={}", self.jobs),
            &format!("--size={per_job}"),
        ]);
        match self.direction {
            Direction::Download => cmd
                .arg("--rw=read")
                .arg(format!("--filename={}", dir.join(file).display()))
                .arg(format!("--offset_increment={per_job}")),
            Direction::Upload => cmd
                .arg("--rw=write")
                .arg(format!("--directory={}", dir.display()))
                .args(["--filename_format=fio-write.$jobnum", "--end_fsync=1"]),
        };
        cmd
    }
}

/// One fio run.
#[derive(Debug, Clone)]
struct FioSample {
    bytes: u64,
    wall: Duration,
    /// fio's own runtime of the job (the longest job's).
    fio_runtime: Duration,
    /// fio's plus the daemon's.
    client_cpu: Duration,
    server_cpu: Duration,
    /// The kernel's READ or WRITE requests meanwhile, and those that were 1 MiB.
    requests: (u64, u64),
}

impl FioSample {
    fn per_gib(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() / (self.bytes as f64 / (1u64 << 30) as f64)
    }
}

/// The fio runs of one testbed, job and mount.
#[derive(Debug, Clone)]
struct FioSeries {
    link: String,
    job: FioJob,
    /// The mount's `-o` options when not the defaults.
    options: Option<String>,
    samples: Vec<FioSample>,
}

pub(crate) fn run(common: &Common, compare: &[String]) -> Result<(), String> {
    let mut bench = Bench::new(common, common.size(1024, 256), common.reps(3))?;
    let sibling = |name| smb3_benches::beside(Some(&bench.smbcp), name);
    let (smbfuse, smbctl) = (sibling("smbfuse")?, sibling("smbctl")?);
    let setups = [
        LinkSetup::shaped(1, 1000),
        LinkSetup::shaped(4, 1000),
        LinkSetup::UNSHAPED,
    ];
    let jobs: Vec<FioJob> = Direction::BOTH
        .iter()
        .flat_map(|&direction| [1, 4].map(|jobs| FioJob { direction, jobs }))
        .collect();
    // fio's own start-up, to read the wall-time columns by: on a quiet machine, no testbed.
    wait_until_quiet(common.wait_quiet());
    let reads = jobs.iter().filter(|j| j.direction == Direction::Download);
    let startup = reads
        .map(|j| {
            fio_startup(j.jobs, bench.reps)
                .map(|d| format!("{:.2} s with {}", d.as_secs_f64(), j.label()))
        })
        .collect::<Result<Vec<_>, String>>()?
        .join(", ");
    eprintln!("smb-bench: fio's own start-up: {startup}");
    let tools = [Tool::smbcp(&bench.smbcp, &[]), Tool::Smbclient];
    // The default mount first, then each compared one; the compared options are read-side.
    let mounts: Vec<Option<&str>> = std::iter::once(None)
        .chain(compare.iter().map(|o| Some(o.as_str())))
        .collect();
    let (mut fio, mut listing) = (Vec::new(), Listing::default());
    for (n, setup) in setups.iter().enumerate() {
        let label = &setup.label();
        let tb = bench.testbed(setup, &[ShareKind::Plain], "")?;
        match setup.rate_mbit {
            Some(_) => bench.raw_tcp(&tb, setup, label)?,
            None => {
                wait_until_quiet(common.wait_quiet());
            }
        }
        bench.both_directions(&tb, label, ShareKind::Plain, &tools)?;
        let mut series: Vec<FioSeries> = (mounts.iter())
            .flat_map(|&options| {
                let jobs = jobs
                    .iter()
                    .filter(move |j| options.is_none() || j.direction == Direction::Download);
                jobs.map(move |&job| FioSeries {
                    link: label.clone(),
                    job,
                    options: options.map(String::from),
                    samples: Vec::new(),
                })
            })
            .collect();
        for rep in 1..=bench.reps {
            // One mount at a time: another mount of the share would watch the directory fio
            // writes into and answer every batch of changes, costing the server CPU the
            // measured mount needs.
            for (k, options) in mounts.iter().enumerate() {
                let mount = Mount::start(&tb, &smbfuse, &format!("fio{k}"), options.as_slice())?;
                for s in series
                    .iter_mut()
                    .filter(|s| s.options.as_deref() == *options)
                {
                    let sample = run_fio(&tb, &mount, &smbctl, s.job, bench.size)?;
                    let mb = |d: Duration| sample.bytes as f64 / d.as_secs_f64() / 1e6;
                    eprintln!(
                        "  {} {} {}{} #{rep}: {:.1} MB/s, client CPU {:.2} s, smbd CPU {:.2} s, {} of {} requests 1 MiB",
                        s.link,
                        s.job.direction,
                        s.job.label(),
                        options.map_or(String::new(), |o| format!(" ({o})")),
                        mb(sample.fio_runtime),
                        sample.client_cpu.as_secs_f64(),
                        sample.server_cpu.as_secs_f64(),
                        sample.requests.1,
                        sample.requests.0,
                    );
                    s.samples.push(sample);
                }
            }
        }
        fio.extend(series);
        if n == 0 {
            list(&tb, &smbfuse, bench.reps, &mut listing)?;
        }
    }
    let mut body = bench.header();
    body.push_str(&format!(
        "fio through `smbfuse` (default options) against smbcp's and smbclient's medians on the same testbed. Two \
         clocks, each compared with its like: fio's runtime (open to last read, or to the end of the final fsync of a \
         write) against smbcp's copy time (first open to last close, after connecting) and iperf3's rate; and the wall \
         time of the whole process against smbcp's and smbclient's, where fio's start-up counts for the mount \
         (measured in this run on a file in local memory: {startup}) and smbcp's connection and logon for smbcp. \
         Client CPU is fio's plus the daemon's.\n\n"
    ));
    body.push_str(&fio_table(&fio, &bench.results).markdown());
    let links: Vec<(String, usize)> = setups.iter().map(|s| (s.label(), s.links)).collect();
    body.push_str(&format!(
        "\nsmbcp and raw TCP on the same testbeds:\n\n{}",
        bench.results.shaped_table(&links).markdown()
    ));
    body.push_str(&format!(
        "\nA directory of {LISTED} empty files ({}), median of {} repetition(s):\n\n{}",
        links[0].0,
        bench.reps,
        listing.table(&links[0].0).markdown()
    ));
    common.publish(
        "mount",
        Some("## smbfuse: fio through the mount against smbcp"),
        &body,
    )
}

/// fio's start-up: the wall time of fio reading 64 MiB from local memory (`/dev/shm`) with
/// `jobs` jobs, less its runtime, median of `reps`. It separates the wall-time columns from
/// fio's clock whatever the file system.
fn fio_startup(jobs: usize, reps: usize) -> Result<Duration, String> {
    const SIZE: u64 = 64 << 20;
    let name = format!("smb-bench-fio-startup-{}", std::process::id());
    let (dir, path) = (Path::new("/dev/shm"), Path::new("/dev/shm").join(&name));
    write_pattern(&path, SMALL_SEED, SIZE)?;
    let job = FioJob {
        direction: Direction::Download,
        jobs,
    };
    let startups = (0..reps)
        .map(|_| {
            let fin = run_measured(job.command(dir, &name, SIZE))?;
            fin.success("fio in /dev/shm")?;
            Ok(fin
                .wall
                .saturating_sub(fio_report(&fin.stdout, Direction::Download)?.1)
                .as_secs_f64())
        })
        .collect::<Result<Vec<f64>, String>>();
    remove_if_present(&path)?;
    median(&startups?)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| "no fio start-up measured".into())
}

/// The bytes fio's JSON report says it moved and in how long (with `group_reporting` the
/// longest job's runtime, with `end_fsync` the final fsync included).
fn fio_report(json: &str, direction: Direction) -> Result<(u64, Duration), String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("fio's JSON report: {e}"))?;
    let kind = if direction == Direction::Download {
        "read"
    } else {
        "write"
    };
    let field = |name: &str| {
        v["jobs"][0][kind][name]
            .as_u64()
            .ok_or_else(|| format!("fio's JSON report has no jobs[0].{kind}.{name}"))
    };
    match field("runtime")? {
        0 => Err(format!("fio's JSON report gives jobs[0].{kind}.runtime 0")),
        ms => Ok((field("io_bytes")?, Duration::from_millis(ms))),
    }
}

/// The mount's READ (or WRITE) requests so far, and those that were 1 MiB.
fn request_counts(
    mount: &Mount,
    smbctl: &Path,
    direction: Direction,
) -> Result<(u64, u64), String> {
    let status = mount.status(smbctl)?;
    let c = &status["fuse_io"][if direction == Direction::Download {
        "read"
    } else {
        "write"
    }];
    Ok((
        c["requests"].as_u64().unwrap_or(0),
        c["full_size"].as_u64().unwrap_or(0),
    ))
}

/// Runs `job` once through `mount` and measures it. Written files are checked for size on
/// the server and removed; a fio that fails or moves fewer bytes than asked is an error.
fn run_fio(
    tb: &Testbed,
    mount: &Mount,
    smbctl: &Path,
    job: FioJob,
    size: u64,
) -> Result<FioSample, String> {
    // Reads start cold: nothing of the file in this machine's page cache.
    std::fs::write("/proc/sys/vm/drop_caches", b"3")
        .map_err(|e| format!("dropping the page cache: {e}"))?;
    let before = request_counts(mount, smbctl, job.direction)?;
    let meter = ServerMeter::start(tb.smbd_pid())?;
    let daemon_cpu = || process_cpu(mount.daemon_pid()).unwrap_or_default();
    let daemon_before = daemon_cpu();
    let fin = run_measured(job.command(&mount.dir, REMOTE_BIG, size))?;
    let daemon = daemon_cpu().saturating_sub(daemon_before);
    let server_cpu = meter.stop()?;
    let after = request_counts(mount, smbctl, job.direction)?;
    fin.success(&job.label())?;
    let (bytes, fio_runtime) = fio_report(&fin.stdout, job.direction)?;
    if bytes != size {
        return Err(format!(
            "fio {} moved {bytes} bytes, not {size}",
            job.label()
        ));
    }
    if job.direction == Direction::Upload {
        for n in 0..job.jobs {
            let name = format!("fio-write.{n}");
            let on_server = tb.share_path("plain").join(&name);
            let len = std::fs::metadata(&on_server)
                .map_err(|e| format!("{}: {e}", on_server.display()))?
                .len();
            if len != size / job.jobs as u64 {
                return Err(format!(
                    "{name} is {len} bytes on the server, not {}",
                    size / job.jobs as u64
                ));
            }
            std::fs::remove_file(mount.dir.join(&name))
                .map_err(|e| format!("removing {name} through the mount: {e}"))?;
        }
    }
    Ok(FioSample {
        bytes,
        wall: fin.wall,
        fio_runtime,
        client_cpu: fin.cpu + daemon,
        server_cpu,
        requests: (
            after.0.saturating_sub(before.0),
            after.1.saturating_sub(before.1),
        ),
    })
}

/// Per setup and direction, each fio job against smbcp's and raw TCP's medians of the same
/// testbed: fio's clock against smbcp's copy time and iperf3's rate, wall time against wall
/// time (smbclient reports no clock of its own).
fn fio_table(series: &[FioSeries], results: &Results) -> Table {
    let mut t = Table::new(
        "links | direction | client | >MB/s (fio) | >min-max | >x smbcp copy | >x raw TCP |\
        >MB/s (wall) | >x smbcp (wall) | >x smbclient (wall) | >1 MiB requests % |\
        >client CPU s/GiB | >smbd CPU s/GiB",
    );
    for s in series {
        let rates = |clock: fn(&FioSample) -> Duration| -> Vec<f64> {
            s.samples
                .iter()
                .map(|x| x.bytes as f64 / clock(x).as_secs_f64() / 1e6)
                .collect()
        };
        let med = |v: &[f64]| median(v).unwrap_or(f64::NAN);
        let (fio, wall) = (rates(|x| x.fio_runtime), rates(|x| x.wall));
        let (mb, wall_mb) = (med(&fio), med(&wall));
        let tool = |name| results.find(&s.link, name, s.job.direction);
        let smbcp = tool("smbcp");
        let requests: (u64, u64) = s
            .samples
            .iter()
            .fold((0, 0), |a, x| (a.0 + x.requests.0, a.1 + x.requests.1));
        let cpu = |f: fn(&FioSample) -> Duration| {
            num(
                med(&s
                    .samples
                    .iter()
                    .map(|x| x.per_gib(f(x)))
                    .collect::<Vec<_>>()),
                2,
            )
        };
        t.row(vec![
            s.link.clone(),
            s.job.direction.to_string(),
            s.options
                .as_ref()
                .map_or(s.job.label(), |o| format!("{} ({o})", s.job.label())),
            num(mb, 1),
            range(smb3_benches::stats::min_max(&fio).unwrap_or((f64::NAN, f64::NAN))),
            ratio(mb, smbcp.map_or(f64::NAN, |c| c.copy_mb_per_s())),
            ratio(
                mb,
                results
                    .raw_for(&s.link, s.job.direction)
                    .map_or(f64::NAN, |r| r.mb_per_s()),
            ),
            num(wall_mb, 1),
            ratio(wall_mb, smbcp.map_or(f64::NAN, |c| c.mb_per_s())),
            ratio(
                wall_mb,
                tool("smbclient").map_or(f64::NAN, |c| c.mb_per_s()),
            ),
            if requests.0 == 0 {
                "-".into()
            } else {
                format!("{:.0}", requests.1 as f64 * 100.0 / requests.0 as f64)
            },
            cpu(|x| x.client_cpu),
            cpu(|x| x.server_cpu),
        ]);
    }
    t
}

/// Timings of listing the directory, a list of repetitions each.
#[derive(Debug, Default, Clone)]
struct Listing {
    /// The library's `Share::read_dir`.
    read_dir: Vec<Duration>,
    /// `ls -l` through the mount, the attributes not cached.
    ls_l: Vec<Duration>,
    /// `stat` of every entry by path on a fresh mount, then again from the cache.
    stat_uncached: Vec<Duration>,
    stat_cached: Vec<Duration>,
}

impl Listing {
    /// Median time of each, entries a second, and against the library's listing.
    fn table(&self, link: &str) -> Table {
        let secs = |d: &[Duration]| {
            median(&d.iter().map(Duration::as_secs_f64).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let mut t = Table::new("link | what | >median s | >entries/s | >x library read_dir time");
        for (what, d) in [
            ("library `Share::read_dir`", &self.read_dir),
            (
                "`ls -l` through the mount (attributes not cached)",
                &self.ls_l,
            ),
            ("`stat` of each entry, nothing cached", &self.stat_uncached),
            ("`stat` of each entry again, cached", &self.stat_cached),
        ] {
            let s = secs(d);
            let cells = [
                format!("{s:.3}"),
                format!("{:.0}", LISTED as f64 / s),
                format!("{:.2}", s / secs(&self.read_dir)),
            ];
            t.row([vec![link.into(), what.into()], cells.to_vec()].concat());
        }
        t
    }
}

/// [`LISTED`] empty files put straight into the share, then listed `reps` times each way.
fn list(tb: &Testbed, smbfuse: &Path, reps: usize, listing: &mut Listing) -> Result<(), String> {
    let dir = tb.share_path("plain").join(LISTING_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let names: Vec<String> = (0..LISTED).map(|n| format!("file-{n:05}")).collect();
    for name in &names {
        std::fs::write(dir.join(name), b"")
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))?;
    }
    let mount = Mount::start(tb, smbfuse, "ls", &[])?;
    for _ in 0..reps {
        // After the attribute cache (actimeo, 1 s by default) has expired.
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
    drop(mount);
    for _ in 0..reps {
        // A fresh mount each time, so nothing is cached; a long attribute timeout, so the
        // second pass comes from the cache.
        let mount = Mount::start(tb, smbfuse, "stat", &["actimeo=600"])?;
        let paths: Vec<PathBuf> = names
            .iter()
            .map(|n| mount.dir.join(LISTING_DIR).join(n))
            .collect();
        for pass in [&mut listing.stat_uncached, &mut listing.stat_cached] {
            let started = Instant::now();
            for p in &paths {
                std::fs::metadata(p).map_err(|e| format!("stat {}: {e}", p.display()))?;
            }
            pass.push(started.elapsed());
        }
    }
    let rt = tb.client_runtime();
    let connect = connect_plain(tb, ClientConfig::default());
    let times = client_block_on(&rt, async move {
        let (client, share) = connect.await?;
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
    eprintln!("  listing: {listing:?}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_reports_and_commands() {
        let json = r#"{"jobs":[{"read":{"io_bytes":1073741824,"runtime":2377},"write":{"io_bytes":0,"runtime":0}}]}"#;
        assert_eq!(
            fio_report(json, Direction::Download),
            Ok((1 << 30, Duration::from_millis(2377)))
        );
        // A direction that did not run has no runtime to divide by.
        assert!(
            fio_report(json, Direction::Upload).is_err()
                && fio_report("{}", Direction::Upload).is_err()
        );
        let job = FioJob {
            direction: Direction::Download,
            jobs: 4,
        };
        let cmd = job.command(Path::new("/m"), "big", 1 << 30);
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into()).collect();
        for want in [
            format!("--size={}", 1 << 28),
            format!("--offset_increment={}", 1 << 28),
            "--filename=/m/big".into(),
        ] {
            assert!(args.contains(&want), "{want} in {args:?}");
        }
        assert_eq!(job.label(), "fio, 4 jobs");
    }
}
