//! smbctl: inspect an SMB server, its shares and the client's channels.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use smb3_client::ClientConfig;
use smbcp::{connect, credentials, describe, Location, RemotePath, EXIT_SOME_FAILED, EXIT_USAGE};

/// Inspect SMB shares and sessions.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    command: Cmd,
    /// User name (also SMB_USER, or the URL).
    #[arg(short, long, global = true)]
    user: Option<String>,
    /// File with username=, password=, domain= lines (mount.cifs format).
    #[arg(long, global = true)]
    credentials: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List a directory.
    Ls {
        /// smb://USER@HOST/SHARE/PATH
        url: String,
    },
    /// Show size, times and attributes of a path.
    Stat {
        /// smb://USER@HOST/SHARE/PATH
        url: String,
    },
    /// Show the session's channels.
    Channels {
        /// smb://USER@HOST/SHARE
        url: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
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

fn remote(url: &str) -> Result<RemotePath, String> {
    match Location::parse(url)? {
        Location::Remote(r) => Ok(r),
        Location::Local(_) => Err(format!("{url}: not an smb:// URL or //HOST/SHARE path")),
    }
}

async fn run(args: Args) -> i32 {
    let url = match &args.command {
        Cmd::Ls { url } | Cmd::Stat { url } | Cmd::Channels { url, .. } => url.clone(),
    };
    let r = match remote(&url) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("smbctl: {e}");
            return EXIT_USAGE;
        }
    };
    let creds = match credentials(&r, args.user.as_deref(), args.credentials.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("smbctl: {e}");
            return EXIT_USAGE;
        }
    };
    let client = match connect(&r, &creds, ClientConfig::default()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("smbctl: {e}");
            return EXIT_SOME_FAILED;
        }
    };
    let share = match client.share(&r.share).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("smbctl: {}: {}", r.display(), describe(&e));
            return EXIT_SOME_FAILED;
        }
    };
    let result = match args.command {
        Cmd::Ls { .. } => share.read_dir(&r.path).await.map(|mut entries| {
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for e in entries {
                let kind = if e.metadata.is_dir() { 'd' } else { '-' };
                println!("{kind} {:>14} {}", e.metadata.len, e.name);
            }
        }),
        Cmd::Stat { .. } => share.metadata(&r.path).await.map(|m| {
            println!("path: {}", r.display());
            println!("type: {}", if m.is_dir() { "directory" } else { "file" });
            println!("size: {}", m.len);
            println!("allocated: {}", m.allocation_size);
            println!("attributes: {:#x}", m.attributes);
            if let Some(t) = m.modified {
                println!("modified: {:?}", t);
            }
        }),
        Cmd::Channels { json, .. } => {
            let chans = client.channels();
            if json {
                let v: Vec<_> = chans
                    .iter()
                    .map(|c| {
                        serde_json::json!({
                            "local": c.local.to_string(), "server": c.server.to_string(),
                            "requests": c.requests, "bytes_sent": c.bytes_sent,
                            "bytes_received": c.bytes_received, "credits": c.credits,
                            "failure": c.failure,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(v));
            } else {
                println!(
                    "dialect {}  signing {:?}  cipher {:?}",
                    client.dialect(),
                    client.signing(),
                    client.cipher()
                );
                println!(
                    "{:<24} {:<24} {:>8} {:>8}",
                    "LOCAL", "SERVER", "REQUESTS", "CREDITS"
                );
                for c in chans {
                    println!(
                        "{:<24} {:<24} {:>8} {:>8}",
                        c.local, c.server, c.requests, c.credits
                    );
                }
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("smbctl: {}: {}", r.display(), describe(&e));
            EXIT_SOME_FAILED
        }
    }
}
