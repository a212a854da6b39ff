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

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use smb3_benches::data::{remove_if_present, write_pattern, SMALL_SEED};
use smb3_benches::fuse_mount::Mount;
use smb3_benches::session::connect_plain;
use smb3_benches::stats::{median, min_max};
use smb3_benches::table::{num, range, ratio, Table};
use smb3_benches::Context;
use smb3_client::ClientConfig;
use smb3_tests::{client_block_on, Testbed};

use crate::bench::{Bench, LinkSetup, REMOTE_BIG};
use crate::child::run_measured;
use crate::machine::{process_cpu, ServerMeter};
use crate::results::{Results, Series, SHAPED};
use crate::transfer::{Direction, Tool};
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

    /// `read` or `write`, as fio and the mount's status name them.
    fn kind(&self) -> &'static str {
        if self.direction == Direction::Download {
            "read"
        } else {
            "write"
        }
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
        ])
        .arg(format!("--rw={}", self.kind()));
        match self.direction {
            Direction::Download => cmd
                .arg(format!("--filename={}", dir.join(file).display()))
                .arg(format!("--offset_increment={per_job}")),
            Direction::Upload => cmd
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

/// The fio runs of one testbed, job and mount (its `-o` options when not the defaults).
type FioSeries = ((String, FioJob, Option<String>), Vec<FioSample>);

pub(crate) fn run(common: &Common, compare: &[String]) -> Result<(), String> {
    let mut bench = Bench::new(common, common.size(1024, 256), common.reps(3))?;
    let sibling = |name| smb3_benches::beside(Some(&bench.smbcp), name);
    let (smbfuse, smbctl) = (sibling("smbfuse")?, sibling("smbctl")?);
    let setups = [
        LinkSetup::shaped(1, 1000),
        LinkSetup::shaped(4, 1000),
        LinkSetup::UNSHAPED,
    ];
    let jobs = Direction::BOTH
        .map(|direction| [1, 4].map(|jobs| FioJob { direction, jobs }))
        .concat();
    // fio's own start-up, to read the wall-time columns by: on a quiet machine, no testbed.
    common.quiet();
    let reads = jobs.iter().filter(|j| j.direction == Direction::Download);
    let startup: Result<Vec<String>, String> = reads
        .map(|j| {
            Ok(format!(
                "{:.2} s with {}",
                fio_startup(j, bench.reps)?.as_secs_f64(),
                j.label()
            ))
        })
        .collect();
    let startup = startup?.join(", ");
    eprintln!("smb-bench: fio's own start-up: {startup}");
    let tools = [Tool::smbcp(&bench.smbcp, &[]), Tool::Smbclient];
    // The default mount first, then each compared one; the compared options are read-side.
    let mounts: Vec<Option<&str>> = std::iter::once(None)
        .chain(compare.iter().map(|o| Some(o.as_str())))
        .collect();
    let (mut fio, mut listing) = (Vec::<FioSeries>::new(), Vec::new());
    for (n, setup) in setups.iter().enumerate() {
        let label = &setup.label();
        let tb = bench.testbed(setup, &["plain"], "")?;
        match setup.rate_mbit {
            Some(_) => bench.raw_tcp(&tb, setup, label)?,
            None => _ = common.quiet(),
        }
        bench.both_directions(&tb, label, "plain", &tools)?;
        let first = fio.len();
        for options in &mounts {
            let jobs = jobs
                .iter()
                .filter(|j| options.is_none() || j.direction == Direction::Download);
            fio.extend(
                jobs.map(|&job| ((label.clone(), job, options.map(String::from)), Vec::new())),
            );
        }
        for rep in 1..=bench.reps {
            // One mount at a time: another mount of the share would watch the directory fio
            // writes into and answer every batch of changes, costing the server CPU the
            // measured mount needs.
            for (k, options) in mounts.iter().enumerate() {
                let mount = Mount::start(&tb, &smbfuse, &format!("fio{k}"), options.as_slice())?;
                for ((_, job, _), samples) in fio[first..]
                    .iter_mut()
                    .filter(|s| s.0 .2.as_deref() == *options)
                {
                    let s = run_fio(&tb, &mount, &smbctl, *job, bench.size)?;
                    let with = options.map_or(String::new(), |o| format!(" ({o})"));
                    eprintln!(
                        "  {label} {} {}{with} #{rep}: {:.1} MB/s, client CPU {:.2} s, smbd CPU {:.2} s, {} of {} \
                         requests 1 MiB",
                        job.direction,
                        job.label(),
                        s.bytes as f64 / s.fio_runtime.as_secs_f64() / 1e6,
                        s.client_cpu.as_secs_f64(),
                        s.server_cpu.as_secs_f64(),
                        s.requests.1,
                        s.requests.0,
                    );
                    samples.push(s);
                }
            }
        }
        if n == 0 {
            listing = list(&tb, &smbfuse, bench.reps)?;
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
    body.push_str(&format!(
        "\nsmbcp and raw TCP on the same testbeds:\n\n{}",
        bench.results.table(SHAPED, |_| true).markdown()
    ));
    let label = setups[0].label();
    body.push_str(&format!(
        "\nA directory of {LISTED} empty files ({label}), median of {} repetition(s):\n\n{}",
        bench.reps,
        listing_table(&listing, &label).markdown()
    ));
    common.publish(
        "mount",
        Some("## smbfuse: fio through the mount against smbcp"),
        &body,
    )
}

/// fio's start-up: the wall time of `job` reading 64 MiB from local memory (`/dev/shm`),
/// less its runtime, median of `reps`. It separates the wall-time columns from fio's clock
/// whatever the file system.
fn fio_startup(job: &FioJob, reps: usize) -> Result<Duration, String> {
    const SIZE: u64 = 64 << 20;
    let name = format!("smb-bench-fio-startup-{}", std::process::id());
    let dir = Path::new("/dev/shm");
    write_pattern(&dir.join(&name), SMALL_SEED, SIZE)?;
    let startups: Result<Vec<f64>, String> = (0..reps)
        .map(|_| {
            let fin = run_measured(job.command(dir, &name, SIZE))?;
            fin.success("fio in /dev/shm")?;
            Ok(fin
                .wall
                .saturating_sub(fio_report(&fin.stdout, job)?.1)
                .as_secs_f64())
        })
        .collect();
    remove_if_present(&dir.join(&name))?;
    Ok(Duration::from_secs_f64(median(startups?)))
}

/// The bytes fio's JSON report says `job` moved and in how long (with `group_reporting` the
/// longest job's runtime, with `end_fsync` the final fsync included).
fn fio_report(json: &str, job: &FioJob) -> Result<(u64, Duration), String> {
    let v: serde_json::Value = serde_json::from_str(json).ctx("fio's JSON report")?;
    let kind = job.kind();
    let field = |name: &str| {
        let value = v["jobs"][0][kind][name].as_u64();
        value.ok_or_else(|| format!("fio's JSON report has no jobs[0].{kind}.{name}"))
    };
    match field("runtime")? {
        0 => Err(format!("fio's JSON report gives jobs[0].{kind}.runtime 0")),
        ms => Ok((field("io_bytes")?, Duration::from_millis(ms))),
    }
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
    // The mount's READ (or WRITE) requests so far, and those that were 1 MiB.
    let requests = || -> Result<(u64, u64), String> {
        let c = &mount.status(smbctl)?["fuse_io"][job.kind()];
        Ok((
            c["requests"].as_u64().unwrap_or(0),
            c["full_size"].as_u64().unwrap_or(0),
        ))
    };
    // Reads start cold: nothing of the file in this machine's page cache.
    std::fs::write("/proc/sys/vm/drop_caches", b"3").ctx("dropping the page cache")?;
    let before = requests()?;
    let meter = ServerMeter::start(tb.smbd_pid())?;
    let daemon_cpu = || process_cpu(mount.daemon_pid()).unwrap_or_default();
    let daemon_before = daemon_cpu();
    let fin = run_measured(job.command(&mount.dir, REMOTE_BIG, size))?;
    let daemon = daemon_cpu().saturating_sub(daemon_before);
    let server_cpu = meter.stop()?;
    let after = requests()?;
    fin.success(&job.label())?;
    let (bytes, fio_runtime) = fio_report(&fin.stdout, &job)?;
    if bytes != size {
        return Err(format!(
            "fio {} moved {bytes} bytes, not {size}",
            job.label()
        ));
    }
    for n in (0..job.jobs).filter(|_| job.direction == Direction::Upload) {
        let name = format!("fio-write.{n}");
        let on_server = tb.share_path("plain").join(&name);
        let len = std::fs::metadata(&on_server)
            .ctx(on_server.display())?
            .len();
        if len != size / job.jobs as u64 {
            return Err(format!(
                "{name} is {len} bytes on the server, not {}",
                size / job.jobs as u64
            ));
        }
        std::fs::remove_file(mount.dir.join(&name))
            .ctx(format!("removing {name} through the mount"))?;
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
    fn rate(s: &FioSeries, clock: fn(&FioSample) -> Duration) -> impl Iterator<Item = f64> + '_ {
        s.1.iter()
            .map(move |x| x.bytes as f64 / clock(x).as_secs_f64() / 1e6)
    }
    let (fio, wall) = (
        |s: &FioSeries| median(rate(s, |x| x.fio_runtime)),
        |s: &FioSeries| median(rate(s, |x| x.wall)),
    );
    let of = |s: &FioSeries, tool| results.find(&s.0 .0, tool, s.0 .1.direction);
    let raw = |s: &FioSeries| results.raw(&s.0 .0, s.0 .1.direction);
    let vs = |v: f64, o: Option<&Series>, f: fn(&Series) -> f64| ratio(v, o.map_or(f64::NAN, f));
    let cpu = |s: &FioSeries, f: fn(&FioSample) -> Duration| {
        num(
            median(
                s.1.iter()
                    .map(|x| f(x).as_secs_f64() / (x.bytes as f64 / (1u64 << 30) as f64)),
            ),
            2,
        )
    };
    Table::of(
        series,
        &[
            ("links", &|s| s.0 .0.clone()),
            ("direction", &|s| s.0 .1.direction.to_string()),
            ("client", &|s| {
                s.0 .2
                    .as_ref()
                    .map_or(s.0 .1.label(), |o| format!("{} ({o})", s.0 .1.label()))
            }),
            (">MB/s (fio)", &|s| num(fio(s), 1)),
            (">min-max", &|s| {
                range(min_max(rate(s, |x| x.fio_runtime)), 1)
            }),
            (">x smbcp copy", &|s| {
                vs(fio(s), of(s, "smbcp"), |c| c.copy_mb_per_s())
            }),
            (">x raw TCP", &|s| ratio(fio(s), raw(s))),
            (">MB/s (wall)", &|s| num(wall(s), 1)),
            (">x smbcp (wall)", &|s| {
                vs(wall(s), of(s, "smbcp"), |c| c.mb_per_s())
            }),
            (">x smbclient (wall)", &|s| {
                vs(wall(s), of(s, "smbclient"), |c| c.mb_per_s())
            }),
            (">1 MiB requests %", &|s| {
                let (all, full) =
                    s.1.iter()
                        .fold((0, 0), |a, x| (a.0 + x.requests.0, a.1 + x.requests.1));
                if all == 0 {
                    "-".into()
                } else {
                    format!("{:.0}", full as f64 * 100.0 / all as f64)
                }
            }),
            (">client CPU s/GiB", &|s| cpu(s, |x| x.client_cpu)),
            (">smbd CPU s/GiB", &|s| cpu(s, |x| x.server_cpu)),
        ],
    )
}

/// What the listing timed, and each repetition's time.
type Listing = Vec<(&'static str, Vec<Duration>)>;

/// Median time of each way of listing, entries a second, and against the library's listing
/// (the first).
fn listing_table(listing: &Listing, link: &str) -> Table {
    let secs = |d: &[Duration]| median(d.iter().map(Duration::as_secs_f64));
    let library = listing.first().map_or(f64::NAN, |l| secs(&l.1));
    Table::of(
        listing,
        &[
            ("link", &|_| link.into()),
            ("what", &|l| l.0.into()),
            (">median s", &|l| format!("{:.3}", secs(&l.1))),
            (">entries/s", &|l| {
                format!("{:.0}", LISTED as f64 / secs(&l.1))
            }),
            (">x library read_dir time", &|l| {
                format!("{:.2}", secs(&l.1) / library)
            }),
        ],
    )
}

/// [`LISTED`] empty files put straight into the share, then listed `reps` times each way:
/// the library's `Share::read_dir`, `ls -l` through the mount (after the attribute cache
/// expired), `stat` of every entry by path on a fresh mount and again from the cache.
fn list(tb: &Testbed, smbfuse: &Path, reps: usize) -> Result<Listing, String> {
    let dir = tb.share_path("plain").join(LISTING_DIR);
    std::fs::create_dir_all(&dir).ctx(dir.display())?;
    let names: Vec<String> = (0..LISTED).map(|n| format!("file-{n:05}")).collect();
    for name in &names {
        std::fs::write(dir.join(name), b"")
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))?;
    }
    let (mut ls_l, mut uncached, mut cached) = (Vec::new(), Vec::new(), Vec::new());
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
            let why = fin.stderr_tail();
            return Err(format!(
                "ls -l through the mount: {} with {lines} lines ({why})",
                fin.status
            ));
        }
        ls_l.push(fin.wall);
    }
    drop(mount);
    for _ in 0..reps {
        // A fresh mount each time, so nothing is cached; a long attribute timeout, so the
        // second pass comes from the cache.
        let mount = Mount::start(tb, smbfuse, "stat", &["actimeo=600"])?;
        for pass in [&mut uncached, &mut cached] {
            let started = Instant::now();
            for p in names.iter().map(|n| mount.dir.join(LISTING_DIR).join(n)) {
                std::fs::metadata(&p).map_err(|e| format!("stat {}: {e}", p.display()))?;
            }
            pass.push(started.elapsed());
        }
    }
    let rt = tb.client_runtime();
    let connect = connect_plain(tb, ClientConfig::default());
    let read_dir = client_block_on(&rt, async move {
        let (client, share) = connect.await?;
        let mut times = Vec::new();
        for _ in 0..reps {
            let started = Instant::now();
            let entries = share
                .read_dir(LISTING_DIR)
                .await
                .ctx(format!("read_dir {LISTING_DIR}"))?;
            times.push(started.elapsed());
            if entries.len() < LISTED {
                return Err(format!("read_dir gave {} entries", entries.len()));
            }
        }
        let _ = client.logoff().await;
        Ok::<_, String>(times)
    });
    drop(rt);
    let listing = vec![
        ("library `Share::read_dir`", read_dir?),
        ("`ls -l` through the mount (attributes not cached)", ls_l),
        ("`stat` of each entry, nothing cached", uncached),
        ("`stat` of each entry again, cached", cached),
    ];
    eprintln!("  listing: {listing:?}");
    Ok(listing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_reports_and_commands() {
        let json = r#"{"jobs":[{"read":{"io_bytes":1073741824,"runtime":2377},"write":{"io_bytes":0,"runtime":0}}]}"#;
        let job = FioJob {
            direction: Direction::Download,
            jobs: 4,
        };
        assert_eq!(
            fio_report(json, &job),
            Ok((1 << 30, Duration::from_millis(2377)))
        );
        // A direction that did not run has no runtime to divide by.
        let up = FioJob {
            direction: Direction::Upload,
            ..job
        };
        assert!(fio_report(json, &up).is_err() && fio_report("{}", &up).is_err());
        let args: Vec<String> = job
            .command(Path::new("/m"), "big", 1 << 30)
            .get_args()
            .map(|a| a.to_string_lossy().into())
            .collect();
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
