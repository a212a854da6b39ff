//! Back up a share from its newest snapshot ("previous version") with the blocking API: a
//! consistent copy even while users keep changing the live files. Without snapshots on the
//! server it copies the live share, opening each file with read-only sharing so nobody
//! writes it mid-copy.
//!
//! ```sh
//! SMB_PASSWORD=... cargo run --release -p smb3-examples --example backup_snapshot -- \
//!     SERVER[:PORT] SHARE LOCAL_DIR USER [DOMAIN]
//! ```

use std::io::BufWriter;
use std::path::Path;

use smb3_client::{blocking, ClientConfig, OpenOptions, ShareMode, UserCredentials};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 || args[0] == "--help" {
        eprintln!("usage: backup_snapshot SERVER[:PORT] SHARE LOCAL_DIR USER [DOMAIN]  (password in SMB_PASSWORD)");
        std::process::exit(2);
    }
    let creds = UserCredentials {
        user: args[3].clone(),
        domain: args.get(4).cloned().unwrap_or_default(),
        password: std::env::var("SMB_PASSWORD")
            .map_err(|_| "set SMB_PASSWORD")?
            .into(),
    };
    let client = blocking::Client::connect(&args[0], &creds, ClientConfig::default())?;
    let live = client.share(&args[1])?;
    let snapshots = live.snapshots("")?;
    let share = match snapshots.first() {
        Some(newest) => {
            println!("backing up snapshot {newest} ({} in all)", snapshots.len());
            live.at_snapshot(newest)
        }
        None => {
            println!("no snapshots on the server: backing up the live share");
            live.clone()
        }
    };
    let opts = OpenOptions::new()
        .read(true)
        .backup_intent()
        .share_mode(ShareMode::READ);
    let (files, bytes) = copy_tree(&share, "", Path::new(&args[2]), &opts)?;
    println!("{files} files, {bytes} bytes");
    client.logoff()?;
    Ok(())
}

/// Copy the directory `remote` (share-relative) into `local`, recursively; returns the
/// number of files and bytes copied.
fn copy_tree(
    share: &blocking::Share,
    remote: &str,
    local: &Path,
    opts: &OpenOptions,
) -> Result<(u64, u64), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(local)?;
    let (mut files, mut bytes) = (0, 0);
    for entry in share.read_dir(remote)? {
        // shadow_copy2 keeps the snapshots themselves in the share: not part of the backup.
        if remote.is_empty() && entry.name == ".snapshots" {
            continue;
        }
        let path = if remote.is_empty() {
            entry.name.clone()
        } else {
            format!("{remote}/{}", entry.name)
        };
        // One component: `read_dir` refuses names that are not (`..`, `a/b`, ...).
        let target = local.join(&entry.name);
        if entry.metadata.is_dir() {
            let (f, b) = copy_tree(share, &path, &target, opts)?;
            files += f;
            bytes += b;
        } else {
            let mut src = share.open(&path, opts)?;
            let mut dst = BufWriter::new(std::fs::File::create(&target)?);
            bytes += std::io::copy(&mut src, &mut dst)?;
            files += 1;
            src.close()?;
        }
    }
    Ok((files, bytes))
}
