//! An incremental backup of a share into a local directory, as backup software would embed
//! the library: from the share's newest snapshot (a consistent tree while users keep
//! working), copying only the files whose size or last-write time changed since the last
//! run, keeping their times, named streams and security descriptors, and continuing a file
//! an earlier run left half-copied instead of starting it again.
//!
//! ```sh
//! SMB_PASSWORD=... cargo run --release -p smb3-examples --example backup -- \
//!     SERVER[:PORT] SHARE LOCAL_DIR USER [DOMAIN]
//! ```
//!
//! What LOCAL_DIR holds (a local disk has no streams or NT security descriptors, so they go
//! beside the data):
//! - `data/PATH`: each file, with the server's last-write and last-access times;
//! - `data/PATH.partial`: a file being copied; the next run checks its tail against the
//!   server and goes on from its end;
//! - `meta/PATH.sd`: the owner, group and DACL of each file and directory copied (the root's
//!   is `meta/.sd`), as the self-relative bytes `Share::set_security_descriptor_raw` restores;
//! - `meta/PATH.streams/NAME`: each named stream of a file.
//!
//! It prints one line per file copied or resumed and a summary; a file it could not copy is
//! reported and the others go on; the exit status is 1 if any failed.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use smb3_client::{
    Client, ClientConfig, Metadata, OpenOptions, SecurityParts, Share, ShareMode, UserCredentials,
    WalkOptions,
};

/// Bytes per read: the library splits it into requests over every channel.
const PIECE: usize = 8 << 20;
/// Bytes at the end of a partial file compared with the server before it is continued.
const CHECKED_TAIL: u64 = 1 << 20;

#[derive(Default)]
struct Summary {
    copied: u64,
    resumed: u64,
    unchanged: u64,
    failed: u64,
    bytes: u64,
}

#[tokio::main]
async fn main() {
    match run().await {
        Ok(0) => {}
        Ok(_) => std::process::exit(1),
        Err(e) => {
            eprintln!("backup: {e}");
            std::process::exit(2);
        }
    }
}

async fn run() -> Result<u64, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 || args[0] == "--help" {
        eprintln!(
            "usage: backup SERVER[:PORT] SHARE LOCAL_DIR USER [DOMAIN]  (password in SMB_PASSWORD)"
        );
        std::process::exit(2);
    }
    let creds = UserCredentials {
        user: args[3].clone(),
        domain: args.get(4).cloned().unwrap_or_default(),
        password: std::env::var("SMB_PASSWORD")
            .map_err(|_| "set SMB_PASSWORD")?
            .into(),
    };
    let client = Client::connect(&args[0], &creds, ClientConfig::default()).await?;
    let live = client.share(&args[1]).await?;
    let share = match live.snapshots("").await?.into_iter().next() {
        Some(newest) => {
            println!("backing up snapshot {newest}");
            live.at_snapshot(&newest)
        }
        None => {
            println!("no snapshot on the server: backing up the live share");
            live.clone()
        }
    };
    let local = Path::new(&args[2]);
    let (data, meta) = (local.join("data"), local.join("meta"));
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(&meta)?;
    save_security(&share, "", &meta.join(".sd")).await?;

    let mut summary = Summary::default();
    let mut walk = share.walk("", WalkOptions::default());
    while let Some(item) = walk.next().await {
        let entry = match item {
            Ok(entry) => entry,
            Err(e) => {
                eprintln!("cannot list {e}");
                summary.failed += 1;
                continue;
            }
        };
        // shadow_copy2 keeps the snapshots in the share itself: not part of the backup.
        if entry.path == ".snapshots" || entry.path.starts_with(".snapshots/") {
            continue;
        }
        // The walk's paths are made of names the library checked (`smb3_client::check_name`:
        // no `..`, `/` or NUL from the server), so this stays below `data`. A tool writing
        // into a directory others can write to must also not follow their links: smbcp opens
        // each component with O_NOFOLLOW (cli/src/local_dest.rs).
        let target = data.join(&entry.path);
        let m = &entry.entry.metadata;
        let done = if m.is_dir() {
            match std::fs::create_dir_all(&target) {
                Ok(()) => save_security(&share, &entry.path, &meta_path(&meta, &entry.path, "sd"))
                    .await
                    .map(|()| Copied::Unchanged),
                Err(e) => Err(e.into()),
            }
        } else if unchanged(&target, m) {
            Ok(Copied::Unchanged)
        } else {
            back_up_file(&share, &entry.path, m, &target, &meta).await
        };
        match done {
            Ok(Copied::Unchanged) => summary.unchanged += u64::from(!m.is_dir()),
            Ok(Copied::Whole) => {
                println!("copied  {}", entry.path);
                summary.copied += 1;
                summary.bytes += m.len;
            }
            Ok(Copied::Resumed { from }) => {
                println!("resumed {} from byte {from}", entry.path);
                summary.resumed += 1;
                summary.bytes += m.len - from;
            }
            Err(e) => {
                eprintln!("failed  {}: {e}", entry.path);
                summary.failed += 1;
            }
        }
    }
    println!(
        "{} copied, {} resumed, {} unchanged, {} failed, {} bytes",
        summary.copied, summary.resumed, summary.unchanged, summary.failed, summary.bytes
    );
    client.logoff().await?;
    Ok(summary.failed)
}

enum Copied {
    Unchanged,
    Whole,
    Resumed { from: u64 },
}

/// Whether the last run left this file as the server has it: same size and last-write time
/// (kept to the server's 100 ns by `set_times`).
fn unchanged(target: &Path, m: &Metadata) -> bool {
    match std::fs::metadata(target) {
        Ok(local) => local.len() == m.len && local.modified().ok() == m.modified,
        Err(_) => false,
    }
}

/// `meta/PATH.EXT`.
fn meta_path(meta: &Path, path: &str, ext: &str) -> PathBuf {
    meta.join(format!("{path}.{ext}"))
}

/// Copy one file into `target` through `target.partial`, then its streams and security
/// descriptor, then its times.
async fn back_up_file(
    share: &Share,
    path: &str,
    m: &Metadata,
    target: &Path,
    meta: &Path,
) -> Result<Copied, Box<dyn std::error::Error>> {
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Read with others' reads allowed and their writes refused (a live share), with backup
    // intent (a user with the backup privilege passes the file's own ACL).
    let opts = OpenOptions::new()
        .read(true)
        .share_mode(ShareMode::READ)
        .backup_intent();
    let src = share.open(path, &opts).await?;
    let partial = PathBuf::from(format!("{}.partial", target.display()));
    let from = resume_point(&src, &partial, m.len).await?;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(from == 0)
        .open(&partial)?;
    out.set_len(from)?;
    let mut offset = from;
    while offset < m.len {
        let want = PIECE.min((m.len - offset) as usize);
        let bytes = src.read_at(offset, want).await?;
        if bytes.is_empty() {
            return Err(format!("{path}: ended at byte {offset} of {}", m.len).into());
        }
        std::os::unix::fs::FileExt::write_all_at(&out, &bytes, offset)?;
        offset += bytes.len() as u64;
    }
    out.sync_all()?;
    src.close().await?;

    save_streams(share, path, &meta_path(meta, path, "streams")).await?;
    save_security(share, path, &meta_path(meta, path, "sd")).await?;
    let times = std::fs::FileTimes::new()
        .set_modified(m.modified.unwrap_or(SystemTime::UNIX_EPOCH))
        .set_accessed(m.accessed.unwrap_or(SystemTime::UNIX_EPOCH));
    out.set_times(times)?;
    drop(out);
    std::fs::rename(&partial, target)?;
    Ok(if from > 0 {
        Copied::Resumed { from }
    } else {
        Copied::Whole
    })
}

/// Where to go on with `partial`: its length, if it is no longer than the file and its last
/// [`CHECKED_TAIL`] bytes are the server's; else 0 (copied again from the start).
async fn resume_point(
    src: &smb3_client::File,
    partial: &Path,
    len: u64,
) -> Result<u64, Box<dyn std::error::Error>> {
    let Ok(have) = std::fs::metadata(partial).map(|m| m.len()) else {
        return Ok(0);
    };
    if have == 0 || have > len {
        return Ok(0);
    }
    let start = have.saturating_sub(CHECKED_TAIL);
    let ours = std::fs::read(partial)?;
    let theirs = src.read_at(start, (have - start) as usize).await?;
    if ours[start as usize..] == theirs[..] {
        Ok(have)
    } else {
        println!(
            "partial {} does not match the server: starting it again",
            partial.display()
        );
        Ok(0)
    }
}

/// Each named stream of `path` into `dir/NAME` (nothing when it has none).
async fn save_streams(
    share: &Share,
    path: &str,
    dir: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let _ = std::fs::remove_dir_all(dir);
    for stream in share.streams(path).await? {
        if stream.is_default() {
            continue;
        }
        let name = stream.stream_name();
        let f = share
            .open(&format!("{path}:{name}"), &OpenOptions::new().read(true))
            .await?;
        let bytes = f.read_at(0, stream.size as usize).await?;
        f.close().await?;
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(name), &bytes)?;
    }
    Ok(())
}

/// The owner, group and DACL of `path`, as raw bytes, into `file`.
async fn save_security(
    share: &Share,
    path: &str,
    file: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let sd = share
        .security_descriptor(path, SecurityParts::standard())
        .await?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(file, &sd.raw)?;
    Ok(())
}
