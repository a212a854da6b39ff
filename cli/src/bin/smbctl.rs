//! smbctl: inspect an SMB server, its shares and the client's channels.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use smb3_client::location::{Location, RemotePath};
use smb3_client::ClientConfig;
use smb3_frontend::status_json;
use smb3_frontend::{connect, credentials_for, parse_location};
use smbcp::auth_args::AuthArgs;
use smbcp::channel_args::ChannelArgs;
use smbcp::security_args::SecurityArgs;
use smbcp::{show, show_session};
use smbcp::{EXIT_SOME_FAILED, EXIT_USAGE};

/// What `smbctl --help` teaches before the commands: locations, the password, the exit
/// status and examples, in the first screen.
const GUIDE: &str = "\
Locations:
  smb://[DOMAIN;]USER@HOST[:PORT]/SHARE/PATH, or //HOST/SHARE/PATH (user from --user or
  SMB_USER). A path behind a DFS link leads to the share that holds it (smbctl dfs shows how).
  PORT is 445 by default, UDP 443 with --transport quic (SMB over QUIC).
Password:
  SMB_PASSWORD, or --credentials FILE (mount.cifs format: username=, password=, domain=;
  mode 0600), or asked for on the terminal; never on the command line.
Exit status:
  0 done, 1 the server or the network failed it (one line on stderr), 2 usage error.
Examples:
  smbctl ls smb://alice@nas/data/projects      list a directory
  smbctl channels --explain smb://alice@nas/data   channels per NIC pair, and why
  smbctl status /mnt/data                      the session behind an smbfuse mount";

/// Inspect SMB shares, the client's channels to them, and smbfuse mounts.
#[derive(Parser, Debug)]
#[command(
    name = "smbctl",
    version,
    after_help = GUIDE,
    help_template = "{about-with-newline}\n{usage-heading} {usage}{after-help}\n\n{all-args}"
)]
struct Args {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// Print the man page or a shell's completion script (see scripts/install.sh).
    #[arg(long, value_enum, hide = true, exclusive = true, value_name = "WHAT")]
    generate: Option<smb3_frontend::generate::Generate>,
    /// Write every man page and completion script below this `share` directory.
    #[arg(long, hide = true, exclusive = true, value_name = "DIR")]
    generate_into: Option<std::path::PathBuf>,
    /// User name (also SMB_USER, or the URL).
    #[arg(short, long, global = true)]
    user: Option<String>,
    /// File with username=, password=, domain= lines (mount.cifs format).
    #[arg(long, global = true)]
    credentials: Option<std::path::PathBuf>,
    #[command(flatten)]
    auth: AuthArgs,
    #[command(flatten)]
    security: SecurityArgs,
    #[command(flatten)]
    transport: smb3_frontend::transport::TransportArgs,
    /// Do not follow DFS referrals: a path behind a link of a DFS share fails instead of
    /// leading to the share that holds it (mount.cifs's nodfs).
    #[arg(long, global = true)]
    no_dfs: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List a directory (sorted by name).
    #[command(disable_help_flag = true)]
    Ls {
        /// smb://USER@HOST/SHARE/PATH
        url: String,
        /// Long: attributes (r read-only, h hidden, s system, a archive) and the last-write
        /// time, in local time.
        #[arg(short, long)]
        long: bool,
        /// Sizes in powers of 1024 (1.5M), as ls -h.
        #[arg(short = 'h', long = "human-readable")]
        human: bool,
        /// Print JSON: one object per entry, times in ISO 8601 local time.
        #[arg(long)]
        json: bool,
        /// Print help.
        #[arg(long, action = clap::ArgAction::Help)]
        help: Option<bool>,
    },
    /// Show size, times (ISO 8601, local time) and attributes of a path.
    Stat {
        /// smb://USER@HOST/SHARE/PATH
        url: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the session's channels per interface pair (planned and current), and each channel.
    Channels {
        /// smb://USER@HOST/SHARE
        url: String,
        /// Say in words why multichannel is off or why fewer channels than planned exist.
        #[arg(long)]
        explain: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        channels: ChannelArgs,
    },
    /// Print changes in a directory as they happen, one per line, until interrupted (Ctrl-C).
    Watch {
        /// smb://USER@HOST/SHARE/DIR
        url: String,
        /// Report changes in subdirectories too.
        #[arg(short, long)]
        recursive: bool,
    },
    /// Show the status of a smbfuse mount: session, channels, open files.
    Status {
        /// The mount point.
        mountpoint: std::path::PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the DFS referrals a path follows: each link's targets in the server's order,
    /// which one was used (and why those before it were not), how long each referral is
    /// kept, and the share and path reached.
    Dfs {
        /// smb://USER@HOST/SHARE/PATH (a path in a DFS namespace)
        url: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show who the session is and how it authenticated: the user or Kerberos principal,
    /// the mechanism, where the tickets come from and when they end, signing and sealing.
    Whoami {
        /// smb://USER@HOST/SHARE
        url: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the server's advertised interfaces, the local NICs and the planned pairs.
    Interfaces {
        /// smb://USER@HOST/SHARE
        url: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        channels: ChannelArgs,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(what) = args.generate {
        return ExitCode::from(smb3_frontend::generate::print(Args::command(), what, "1") as u8);
    }
    if let Some(dir) = &args.generate_into {
        return ExitCode::from(smb3_frontend::generate::print_all(Args::command(), "1", dir) as u8);
    }
    smbcp::init_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("smbctl: {e}");
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    ExitCode::from(rt.block_on(run(args)) as u8)
}

/// `smbctl status MOUNTPOINT`: ask the mount's daemon (see `smb3_frontend::status_socket`).
fn mount_status(mountpoint: &std::path::Path, json: bool) -> i32 {
    match smb3_frontend::status_socket::read_status(mountpoint) {
        Ok(v) if json => {
            println!("{v}");
            0
        }
        Ok(v) => {
            smbcp::show_mount::print_status(&v);
            0
        }
        Err(e) => {
            eprintln!("smbctl: {e}");
            EXIT_SOME_FAILED
        }
    }
}

fn remote(url: &str) -> Result<RemotePath, String> {
    match parse_location(url)? {
        Location::Remote(r) => Ok(r),
        Location::Local(_) => Err(format!("{url}: not an smb:// URL or //HOST/SHARE path")),
    }
}

async fn run(mut args: Args) -> i32 {
    let Some(command) = args.command.take() else {
        let _ = Args::command().print_help();
        return EXIT_USAGE;
    };
    if let Cmd::Status { mountpoint, json } = &command {
        return mount_status(mountpoint, *json);
    }
    let url = match &command {
        Cmd::Ls { url, .. }
        | Cmd::Stat { url, .. }
        | Cmd::Channels { url, .. }
        | Cmd::Interfaces { url, .. }
        | Cmd::Dfs { url, .. }
        | Cmd::Whoami { url, .. }
        | Cmd::Watch { url, .. } => url.clone(),
        Cmd::Status { .. } => unreachable!("handled above"),
    };
    let mut config = ClientConfig::default();
    if let Cmd::Channels { channels, .. } | Cmd::Interfaces { channels, .. } = &command {
        channels.apply(&mut config);
    }
    if let Err(e) = args
        .auth
        .apply(&mut config)
        .and_then(|()| args.security.apply(&mut config))
        .and_then(|()| args.transport.apply(&mut config))
    {
        eprintln!("smbctl: {e}");
        return EXIT_USAGE;
    }
    config.follow_dfs = !args.no_dfs;
    let settle = config.bind_timeout + std::time::Duration::from_secs(1);
    let r = match remote(&url) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("smbctl: {e}");
            return EXIT_USAGE;
        }
    };
    let creds = match credentials_for(
        &r,
        args.user.as_deref(),
        args.credentials.as_deref(),
        &config,
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("smbctl: {e}");
            return EXIT_USAGE;
        }
    };
    let client = match connect(&r, &creds, config.clone()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("smbctl: {e}");
            return EXIT_SOME_FAILED;
        }
    };
    if let Cmd::Whoami { json, .. } = &command {
        if *json {
            println!("{}", show_session::identity_json(&client));
        } else {
            show_session::print_identity(&client, &r.host);
        }
        return 0;
    }
    let share = match client.share(&r.share).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("smbctl: {}: {}", r.display(), e.brief());
            return EXIT_SOME_FAILED;
        }
    };
    // The share and path that hold the URL's path, through DFS links if there are any.
    let route = match smb3_frontend::route(&share, &r, &r.path).await {
        Ok(route) => route,
        Err(e) => {
            eprintln!("smbctl: {e}");
            return EXIT_SOME_FAILED;
        }
    };
    let (share, path) = (&route.share, route.path.as_str());
    let result = match command {
        Cmd::Dfs { json, .. } => {
            if json {
                println!("{}", smbcp::show_dfs::route_json(&route));
            } else {
                for line in smbcp::show_dfs::route_lines(&r.display(), &route) {
                    println!("{line}");
                }
            }
            Ok(())
        }
        Cmd::Ls {
            long, human, json, ..
        } => {
            return match list(share, path, &r, long, human, json).await {
                Ok(refused) if refused > 0 => EXIT_SOME_FAILED,
                Ok(_) => 0,
                Err(e) => {
                    eprintln!("smbctl: {}: {}", r.display(), e.brief());
                    EXIT_SOME_FAILED
                }
            }
        }
        Cmd::Stat { json, .. } => share.metadata(path).await.map(|m| {
            if json {
                let mut v = show::metadata_json(&m);
                v["path"] = r.display().into();
                println!("{v}");
            } else {
                for line in show::stat_lines(&r.display(), &m, false) {
                    println!("{line}");
                }
            }
        }),
        Cmd::Channels { json, explain, .. } => {
            client.wait_for_channels(settle).await;
            if json {
                let v = serde_json::json!({
                    "dialect": client.dialect().to_string(),
                    "channels": client.channels().iter().map(status_json::channel_json).collect::<Vec<_>>(),
                    "multichannel": status_json::multichannel_json(&client.multichannel()),
                });
                println!("{v}");
            } else {
                show_session::print_channels(&client, explain);
            }
            Ok(())
        }
        Cmd::Watch { recursive, .. } => watch(share, path, &r, recursive).await,
        Cmd::Status { .. } | Cmd::Whoami { .. } => Ok(()),
        Cmd::Interfaces { json, .. } => {
            client.wait_for_channels(settle).await;
            let s = client.multichannel();
            if json {
                println!("{}", status_json::multichannel_json(&s));
            } else {
                show_session::print_interfaces(&s);
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("smbctl: {}: {}", r.display(), e.brief());
            EXIT_SOME_FAILED
        }
    }
}

/// `smbctl ls`: the directory's entries sorted by name; each entry the library refused for
/// its name (`Error::UnsafeName`) is one line on stderr instead. Returns how many were.
async fn list(
    share: &smb3_client::Share,
    path: &str,
    r: &RemotePath,
    long: bool,
    human: bool,
    json: bool,
) -> smb3_client::Result<usize> {
    let mut listing = share.list(path).await?;
    let (mut entries, mut refused) = (Vec::new(), 0);
    loop {
        match listing.next_page().await {
            Ok(Some(page)) => entries.extend(page),
            Ok(None) => break,
            Err(e @ smb3_client::Error::UnsafeName { .. }) => {
                eprintln!("smbctl: {}: {e}", r.display());
                refused += 1;
            }
            Err(e) => return Err(e),
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    if json {
        let all: Vec<_> = entries
            .iter()
            .map(|e| {
                let mut v = show::metadata_json(&e.metadata);
                v["name"] = e.name.clone().into();
                v
            })
            .collect();
        println!("{}", serde_json::Value::from(all));
    } else {
        for e in &entries {
            println!("{}", show::ls_line(e, long, human));
        }
    }
    Ok(refused)
}

/// Print every change under `path` of `share` (where `r` leads) until the process is
/// interrupted (or the server fails the watch). Interrupting drops the session; the server
/// ends the watch with it.
async fn watch(
    share: &smb3_client::Share,
    path: &str,
    r: &RemotePath,
    recursive: bool,
) -> smb3_client::Result<()> {
    let scope = if recursive {
        smb3_client::WatchScope::Subtree
    } else {
        smb3_client::WatchScope::Directory
    };
    let mut watch = share
        .watch(path, smb3_client::WatchFilter::ALL, scope)
        .await?;
    eprintln!("watching {} (Ctrl-C to stop)", r.display());
    use std::io::Write;
    let mut out = std::io::stdout();
    loop {
        let batch = watch.next().await?;
        let mut printed = batch
            .iter()
            .try_for_each(|change| writeln!(out, "{change}"));
        // Each batch as it comes, also into a pipe (a reader waits for it; stdout need not be
        // line-buffered when it is not a terminal).
        printed = printed.and_then(|()| out.flush());
        if printed.is_err() {
            return Ok(()); // whoever read our output is gone: nothing left to watch for
        }
    }
}
