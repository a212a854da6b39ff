//! smbcp: copy files and trees between the local file system and SMB shares.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use smb3_client::location::Location;
use smb3_client::{ClientConfig, Dispatch};
use smb3_frontend::{connect, credentials_for, parse_location};
use smbcp::auth_args::AuthArgs;
use smbcp::channel_args::ChannelArgs;
use smbcp::copy::{download_named, upload, CopyOptions, CopyReport, FileStatus};
use smbcp::glob::Excludes;
use smbcp::on_server::{copy_on_server, OnServerOptions};
use smbcp::security_args::SecurityArgs;
use smbcp::{EXIT_SOME_FAILED, EXIT_USAGE};

/// What `-p/--preserve` keeps.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Preserve {
    /// Times, modes on a POSIX share (the read-only attribute elsewhere; DOS attributes
    /// between SMB shares).
    Basic,
    /// Also owners and groups on a POSIX share, and alternate data streams and security
    /// descriptors where both ends are SMB.
    All,
}

/// What `smbcp --help` teaches before the options: the locations, the password, the exit
/// status and examples, in the first screen.
const GUIDE: &str = "\
Locations:
  smb://[DOMAIN;]USER@HOST[:PORT]/SHARE/PATH, or //HOST/SHARE/PATH (user from --user or
  SMB_USER). A destination ending in / must be an existing directory, as for cp. A path
  behind a DFS link leads to the share that holds it. PORT is 445 by default, UDP 443 with
  --transport quic (SMB over QUIC).
Password:
  SMB_PASSWORD, or --credentials FILE (mount.cifs format: username=, password=, domain=;
  mode 0600), or asked for on the terminal; never on the command line.
Exit status:
  0 all copied, 1 some files failed (each named on stderr), 2 usage or configuration error.
Examples:
  smbcp big.iso smb://alice@nas/data/isos/             upload into a directory
  smbcp -r 'smb://CORP;alice@nas/data/projects' ./bk/  download a tree
  smbcp -a --update ~/photos smb://alice@nas/backup/   back up: only what changed moves";

/// Copy files and trees to and from SMB shares, over every channel to the server.
#[derive(Parser, Debug)]
#[command(
    name = "smbcp",
    version,
    after_help = GUIDE,
    help_template = "{about-with-newline}\n{usage-heading} {usage}{after-help}\n\n{all-args}"
)]
struct Args {
    /// Sources (all remote, or all local), then the destination. Remote sources with a
    /// remote destination on the same server are copied by the server itself.
    #[arg(required = true, num_args = 2..)]
    paths: Vec<String>,
    /// Copies within one server go through this machine instead of being made by the server
    /// (FSCTL_SRV_COPYCHUNK).
    #[arg(long)]
    no_server_copy: bool,
    /// Do not follow DFS referrals: a path behind a link of a DFS share fails instead of
    /// leading to the share that holds it (mount.cifs's nodfs).
    #[arg(long)]
    no_dfs: bool,
    /// Copy directories recursively.
    #[arg(short, long)]
    recursive: bool,
    /// Archive mode: the same as -r -p.
    #[arg(short, long)]
    archive: bool,
    /// Follow symbolic links: copy what they point to (on a share, only links whose target
    /// lies inside the share). Without it a link is made again at the other end as a link to
    /// the same target, never resolved, as `cp -r` does (on a share where the server keeps
    /// links: the SMB3 POSIX extensions, or reparse points on Samba 4.21 and later and
    /// Windows); FIFOs, sockets and devices are made again too, as `cp -r` does (devices
    /// here only by root).
    #[arg(short = 'L', long)]
    dereference: bool,
    /// Keep last-write, last-access and (uploads) creation times, and the mode: all of its
    /// bits to and from a share with the SMB3 POSIX extensions, elsewhere only "no write bit"
    /// as the read-only attribute. `--preserve=all` also keeps owners and groups on a POSIX
    /// share (numeric ids; only where this user may give files away, as `cp -p`), and
    /// alternate data streams and security descriptors (owner, group, DACL) where both ends
    /// are SMB (copies within a server); `-p` alone is `--preserve=basic`.
    #[arg(
        short,
        long,
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "basic",
        value_name = "WHAT"
    )]
    preserve: Option<Preserve>,
    /// After copying, read each destination back and compare its SHA-256 with the source's;
    /// a difference fails the file. With --resume, also check all of a partial file's kept
    /// bytes, not just its last chunk.
    #[arg(long)]
    verify: bool,
    /// Copy nothing: compare each source with its existing destination by SHA-256.
    #[arg(long, conflicts_with_all = ["verify", "resume", "dry_run"])]
    verify_only: bool,
    /// Skip files whose destination has the same size and last-write time (to the server's
    /// 100 ns resolution, no tolerance); useful with -p, which makes the times equal.
    #[arg(long)]
    update: bool,
    /// Leave out files and directories matching PATTERN (a glob: *, **, ?, [a-z], {a,b}), matched
    /// on the path below the source being copied and on the base name; repeatable.
    #[arg(long = "exclude", value_name = "PATTERN")]
    excludes: Vec<String>,
    /// Say what would be copied (one line per file on stdout), change nothing.
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Continue the partial files of an interrupted copy after checking them, and keep the
    /// partial file of a copy that fails.
    #[arg(long)]
    resume: bool,
    /// Files larger than one chunk (--chunk-size) copied at the same time.
    #[arg(short, long, default_value_t = 4)]
    jobs: usize,
    /// Files of at most one chunk copied at the same time; each goes in one round trip
    /// (CREATE, READ or WRITE and CLOSE compounded).
    #[arg(long, default_value_t = smbcp::copy::DEFAULT_SMALL_JOBS, value_parser = clap::value_parser!(u16).range(1..=1024))]
    small_jobs: u16,
    /// Bytes per READ/WRITE request (suffixes K, M), clamped to the server's maximum.
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    chunk_size: u32,
    /// Requests in flight per file, at least: four per usable channel when that is more.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Chunk bytes in flight for all files together (suffixes K, M, G): what bounds
    /// smbcp's memory with many files at once (-j).
    #[arg(long, default_value = "128M", value_parser = parse_budget)]
    max_in_flight: u64,
    /// Times a file is copied again from the start when the server lost its open (e.g. it
    /// restarted and forgot its durable handles); 0 = fail such a file at once.
    #[arg(long, default_value_t = 2)]
    retries: u32,
    /// User name (also SMB_USER, or the URL).
    #[arg(short, long)]
    user: Option<String>,
    /// File with username=, password=, domain= lines (mount.cifs format).
    #[arg(long)]
    credentials: Option<PathBuf>,
    #[command(flatten)]
    security: SecurityArgs,
    #[command(flatten)]
    channels: ChannelArgs,
    #[command(flatten)]
    auth: AuthArgs,
    #[command(flatten)]
    transport: smb3_frontend::transport::TransportArgs,
    /// Print one JSON object on stdout at the end: bytes, seconds, files copied, skipped,
    /// excluded and failed, and each channel's local and server address, bytes and requests.
    #[arg(long)]
    json: bool,
    /// With --json: add each file's outcome ("per_file").
    #[arg(long, requires = "json")]
    json_files: bool,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
    /// Print the man page or a shell's completion script (see scripts/install.sh).
    #[arg(long, value_enum, hide = true, exclusive = true, value_name = "WHAT")]
    generate: Option<smb3_frontend::generate::Generate>,
    /// Write every man page and completion script below this `share` directory.
    #[arg(long, hide = true, exclusive = true, value_name = "DIR")]
    generate_into: Option<std::path::PathBuf>,
}

/// A byte count with an optional K, M or G suffix (powers of 1024).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1 << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("invalid size {s:?}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} too large"))
}

fn parse_size(s: &str) -> Result<u32, String> {
    let v = parse_bytes(s)?;
    if !(4096..=8 * 1024 * 1024).contains(&v) {
        return Err("chunk size must be between 4K and 8M".into());
    }
    Ok(v as u32)
}

fn parse_budget(s: &str) -> Result<u64, String> {
    let v = parse_bytes(s)?;
    if v < 1 << 20 {
        return Err("--max-in-flight must be at least 1M".into());
    }
    Ok(v)
}

/// Keep freed chunk buffers (1-8 MiB each) in the heap for reuse instead of returning them to
/// the kernel: otherwise every chunk lands on fresh pages, and the page faults and zeroing
/// cost about 0.2 CPU-seconds per GiB copied (measured with smb-bench, docs/PERFORMANCE.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn keep_freed_buffers() {
    // SAFETY: mallopt only adjusts glibc's allocator thresholds; it is called before any other
    // thread exists, and a failure (return 0) just leaves the defaults in place.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_buffers() {}

fn main() -> ExitCode {
    keep_freed_buffers();
    let args = Args::parse();
    if let Some(what) = args.generate {
        return ExitCode::from(smb3_frontend::generate::print(Args::command(), what, "1") as u8);
    }
    if let Some(dir) = &args.generate_into {
        return ExitCode::from(smb3_frontend::generate::print_all(Args::command(), "1", dir) as u8);
    }
    smbcp::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("smbcp: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    let code = runtime.block_on(run(args));
    ExitCode::from(code as u8)
}

async fn run(args: Args) -> i32 {
    let mut locations = Vec::new();
    for p in &args.paths {
        match parse_location(p) {
            Ok(l) => locations.push(l),
            Err(e) => {
                eprintln!("smbcp: {e}");
                return EXIT_USAGE;
            }
        }
    }
    let dest = locations.pop().expect("clap requires two paths");
    let mut config = ClientConfig::default();
    config.io_size = args.chunk_size;
    config.io_depth = args.depth;
    if let Err(e) = args.security.apply(&mut config) {
        eprintln!("smbcp: {e}");
        return EXIT_USAGE;
    }
    // A copy starts on the first channel while the others bind (see below, where it
    // starts), so channels join at different times: each chunk goes to the channel with the
    // fewest bytes in flight, which evens out what each link carries whenever its channels
    // came. Round-robin would give every channel the same number of chunks from the moment
    // it joined, and the link whose channels bound first would finish last.
    config.dispatch = Dispatch::LeastLoaded;
    args.channels.apply(&mut config);
    config.follow_dfs = !args.no_dfs;
    if let Err(e) = args
        .auth
        .apply(&mut config)
        .and_then(|()| args.transport.apply(&mut config))
    {
        eprintln!("smbcp: {e}");
        return EXIT_USAGE;
    }
    let excludes = match Excludes::new(&args.excludes) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("smbcp: --exclude: {e}");
            return EXIT_USAGE;
        }
    };
    let opts = CopyOptions {
        recursive: args.recursive || args.archive,
        jobs: args.jobs,
        small_jobs: usize::from(args.small_jobs),
        chunk: args.chunk_size,
        depth: args.depth,
        max_in_flight: args.max_in_flight,
        progress: !args.quiet && !args.json && std::io::stderr().is_terminal(),
        retries: args.retries,
        preserve: args.preserve.is_some() || args.archive,
        preserve_owners: args.preserve == Some(Preserve::All),
        verify: args.verify,
        verify_only: args.verify_only,
        update: args.update,
        dry_run: args.dry_run,
        follow_links: args.dereference,
        resume: args.resume,
        excludes,
    };
    let (remote, direction) = match (
        &dest,
        locations.iter().all(|l| matches!(l, Location::Local(_))),
        locations.iter().all(|l| matches!(l, Location::Remote(_))),
    ) {
        (Location::Remote(r), true, _) => (r.clone(), Direction::Up),
        (Location::Local(_), _, true) => match &locations[0] {
            Location::Remote(r) => (r.clone(), Direction::Down),
            Location::Local(_) => unreachable!("all remote"),
        },
        (Location::Remote(d), _, true) => match &locations[0] {
            Location::Remote(r) if r.host == d.host && r.port == d.port => {
                (r.clone(), Direction::OnServer)
            }
            _ => {
                eprintln!("smbcp: a copy between shares needs both on the same server");
                return EXIT_USAGE;
            }
        },
        _ => {
            eprintln!("smbcp: copy local files to one share, files of one share to a local destination, or files of one server to a share of it");
            return EXIT_USAGE;
        }
    };
    if matches!(direction, Direction::OnServer)
        && (opts.verify
            || opts.verify_only
            || opts.update
            || opts.dry_run
            || opts.resume
            || !args.excludes.is_empty())
    {
        eprintln!("smbcp: a copy within a server takes none of --verify, --verify-only, --update, --dry-run, --resume, --exclude (not yet)");
        return EXIT_USAGE;
    }
    for l in &locations {
        if let Location::Remote(r) = l {
            if r.host != remote.host || r.share != remote.share || r.port != remote.port {
                eprintln!("smbcp: all remote sources must be on the same share");
                return EXIT_USAGE;
            }
        }
    }
    let creds = match credentials_for(
        &remote,
        args.user.as_deref(),
        args.credentials.as_deref(),
        &config,
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("smbcp: {e}");
            return EXIT_USAGE;
        }
    };
    let client = match connect(&remote, &creds, config.clone()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("smbcp: {e}");
            return EXIT_SOME_FAILED;
        }
    };
    // Channels bind in the background: the copy starts now, on the first channel, and each
    // file keeps more chunks in flight as the others join (`transfer::depth_now`); every
    // chunk picks its channel when it is sent (least-loaded, see above). Waiting for the
    // binding first left every link idle for its duration (0.2 s for 16 channels on a quiet
    // machine, more on a busy one): 5 % of a 1 GiB copy over four 1 Gbit/s links.
    let share = match client.share(&remote.share).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("smbcp: //{}/{}: {}", remote.host, remote.share, e.brief());
            return EXIT_SOME_FAILED;
        }
    };
    // Remote paths behind DFS links lead to the shares that hold them.
    let sources = match routes(&share, &remote, &remote_paths(&locations)).await {
        Ok(found) => found,
        Err((line, code)) => {
            eprintln!("smbcp: {line}");
            return code;
        }
    };
    match (direction, &dest) {
        (Direction::Up, Location::Remote(r)) => {
            let local: Vec<PathBuf> = locations
                .iter()
                .filter_map(|l| match l {
                    Location::Local(p) => Some(p.clone()),
                    Location::Remote(_) => None,
                })
                .collect();
            let to = match smb3_frontend::route(&share, &remote, &r.path).await {
                Ok(route) => route,
                Err(e) => {
                    eprintln!("smbcp: {e}");
                    return EXIT_SOME_FAILED;
                }
            };
            let report = upload(&to.share, &local, &to.path, r.names_dir, &opts).await;
            finish(to.share.client(), &report, &args)
        }
        (Direction::Down, Location::Local(p)) => {
            let (from, paths) = sources.expect("remote sources");
            let report = download_named(&from, &named(paths, &locations), p, &opts).await;
            finish(from.client(), &report, &args)
        }
        (Direction::OnServer, Location::Remote(d)) => {
            let (from, paths) = sources.expect("remote sources");
            let dest_share = if d.share == remote.share {
                share.clone()
            } else {
                match client.share(&d.share).await {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("smbcp: //{}/{}: {}", d.host, d.share, e.brief());
                        return EXIT_SOME_FAILED;
                    }
                }
            };
            let to = match smb3_frontend::route(&dest_share, d, &d.path).await {
                Ok(route) => route,
                Err(e) => {
                    eprintln!("smbcp: {e}");
                    return EXIT_SOME_FAILED;
                }
            };
            if to.share.client().server_addr() != from.client().server_addr() {
                eprintln!(
                    "smbcp: {} and its destination lie on different servers behind DFS links: \
                     copy through a local directory (not yet done in one step)",
                    remote.display()
                );
                return EXIT_USAGE;
            }
            let on_server = OnServerOptions {
                server_copy: !args.no_server_copy,
                recursive: opts.recursive,
                preserve: opts.preserve,
                preserve_all: args.preserve == Some(Preserve::All),
            };
            let report = copy_on_server(
                &d.host,
                &from,
                &named(paths, &locations),
                &to.share,
                &to.path,
                d.names_dir,
                on_server,
            )
            .await;
            finish(from.client(), &report, &args)
        }
        _ => unreachable!("direction matches destination"),
    }
}

/// The share holding every remote source and their paths there, through DFS links
/// (`smb3_frontend::route`); `None` when there is no remote source. Sources that lead to
/// different shares are refused (copy them one at a time), with the exit status to give.
async fn routes(
    share: &smb3_client::Share,
    remote: &smb3_client::location::RemotePath,
    paths: &[String],
) -> Result<Option<(smb3_client::Share, Vec<String>)>, (String, i32)> {
    let mut found: Option<(smb3_client::Share, Vec<String>)> = None;
    for path in paths {
        let route = smb3_frontend::route(share, remote, path)
            .await
            .map_err(|e| (e, EXIT_SOME_FAILED))?;
        match &mut found {
            None => found = Some((route.share, vec![route.path])),
            Some((first, routed)) => {
                let same = first.name().eq_ignore_ascii_case(route.share.name())
                    && first.client().server_addr() == route.share.client().server_addr();
                if !same {
                    let line = format!(
                        "{path} lies behind a DFS link to another share than the first source: \
                         copy them one at a time"
                    );
                    return Err((line, EXIT_USAGE));
                }
                routed.push(route.path);
            }
        }
    }
    Ok(found)
}

/// Each routed source path with the name it goes by in the destination: the last
/// component of the path as given (a DFS link's name, not its target's).
fn named(routed: Vec<String>, locations: &[Location]) -> Vec<(String, String)> {
    routed
        .into_iter()
        .zip(remote_paths(locations))
        .map(|(path, given)| {
            let given = given.trim_end_matches('/');
            let name = given.rsplit('/').next().unwrap_or(given).to_string();
            (path, name)
        })
        .collect()
}

/// The share-relative paths of the remote locations among `locations`.
fn remote_paths(locations: &[Location]) -> Vec<String> {
    locations
        .iter()
        .filter_map(|l| match l {
            Location::Remote(r) => Some(r.path.clone()),
            Location::Local(_) => None,
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Direction {
    Up,
    Down,
    /// Remote to remote on one server.
    OnServer,
}

fn finish(client: &smb3_client::Client, report: &CopyReport, args: &Args) -> i32 {
    if let Some(line) = &report.usage_error {
        eprintln!("smbcp: {line}");
        return EXIT_USAGE;
    }
    for line in &report.notes {
        eprintln!("smbcp: note: {line}");
    }
    for line in &report.retried {
        eprintln!("smbcp: {line}");
    }
    for line in &report.failures {
        eprintln!("smbcp: {line}");
    }
    let mb_s = if report.seconds > 0.0 {
        report.bytes as f64 / report.seconds / 1e6
    } else {
        0.0
    };
    if args.dry_run && !args.json {
        for f in &report.per_file {
            match f.status {
                FileStatus::WouldCopy => {
                    println!("would copy {} -> {} ({} bytes)", f.source, f.dest, f.size)
                }
                FileStatus::Skipped => println!("up to date {}", f.dest),
                _ => {}
            }
        }
    }
    if args.verify_only && !args.json {
        for f in report
            .per_file
            .iter()
            .filter(|f| f.status == FileStatus::Verified)
        {
            println!("ok {} {}", f.sha256.as_deref().unwrap_or_default(), f.dest);
        }
    }
    if args.json {
        let channels: Vec<_> = client
            .channels()
            .iter()
            .map(smb3_frontend::status_json::channel_json)
            .collect();
        let mut summary = serde_json::json!({
            "bytes": report.bytes,
            "seconds": report.seconds,
            "files": report.files,
            "copied": if args.dry_run || args.verify_only { 0 } else { report.files },
            "skipped": report.skipped,
            "excluded": report.excluded,
            "failed": report.failures.len(),
            "retried": report.retried.len(),
            "dry_run": args.dry_run,
            "verify_only": args.verify_only,
            "mb_per_s": mb_s,
            "dialect": client.dialect().to_string(),
            "channels": channels,
            "failover": smb3_frontend::status_json::failover_json(&client.multichannel().failover),
            "multichannel": smb3_frontend::status_json::multichannel_json(&client.multichannel()),
            "peak_rss_bytes": smbcp::in_flight::peak_rss_bytes(),
        });
        if args.json_files {
            summary["per_file"] = report
                .per_file
                .iter()
                .map(smbcp::copy::FileResult::json)
                .collect();
        }
        println!("{summary}");
    } else {
        let what = if args.dry_run {
            "to copy"
        } else if args.verify_only {
            "verified"
        } else {
            "copied"
        };
        eprintln!(
            "smbcp: {} {what}, {} skipped, {} failed{}{}; {} bytes in {:.2} s ({:.1} MB/s)",
            report.files,
            report.skipped,
            report.failures.len(),
            match report.excluded {
                0 => String::new(),
                n => format!(", {n} excluded"),
            },
            match report.retried.len() {
                0 => String::new(),
                r => format!(", {r} copied again from the start"),
            },
            report.bytes,
            report.seconds,
            mb_s,
        );
        if report.files == 0
            && report.skipped == 0
            && report.failures.is_empty()
            && report.excluded > 0
        {
            eprintln!("smbcp: nothing to copy: --exclude left out every file");
        }
    }
    if report.failures.is_empty() {
        0
    } else {
        EXIT_SOME_FAILED
    }
}
