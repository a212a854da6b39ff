//! Where a `smbfuse` mount publishes its status, and how `smbctl status MOUNTPOINT` shows it.
//!
//! Each mount's daemon listens on a Unix socket named after its mount point (a hash of the
//! canonical path, so the name always fits `sun_path`): `/run/smbfuse/<hash>.sock` for root,
//! `$XDG_RUNTIME_DIR/smbfuse/<hash>.sock` (or `/tmp/smbfuse-<uid>/`) for others. A client
//! connects and reads one JSON document; the daemon then closes the connection.

use std::path::{Path, PathBuf};

/// The directory the sockets live in for the current user.
pub fn socket_dir() -> PathBuf {
    let uid = rustix::process::getuid().as_raw();
    if uid == 0 {
        return PathBuf::from("/run/smbfuse");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("smbfuse"),
        _ => PathBuf::from(format!("/tmp/smbfuse-{uid}")),
    }
}

/// 64-bit FNV-1a of the path's bytes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The socket of the mount on `mountpoint` (which should be canonical).
pub fn socket_path(mountpoint: &Path) -> PathBuf {
    let hash = fnv1a(mountpoint.as_os_str().as_encoded_bytes());
    socket_dir().join(format!("{hash:016x}.sock"))
}

/// Read the status of the mount on `mountpoint`.
pub fn read_status(mountpoint: &Path) -> Result<serde_json::Value, String> {
    use std::io::Read;
    let canonical =
        std::fs::canonicalize(mountpoint).map_err(|e| format!("{}: {e}", mountpoint.display()))?;
    let sock = socket_path(&canonical);
    let mut conn = std::os::unix::net::UnixStream::connect(&sock).map_err(|e| {
        format!(
            "{}: no smbfuse mount answers there ({}: {e})",
            canonical.display(),
            sock.display()
        )
    })?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    conn.read_to_string(&mut text)
        .map_err(|e| format!("{}: reading the status: {e}", sock.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: bad status: {e}", sock.display()))
}

/// The status for people.
pub fn print_status(v: &serde_json::Value) {
    let s = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    println!("{} on {}", s("source"), s("mountpoint"));
    println!(
        "SMB {}, signing {}, encryption {}; {} open file(s), {} parked after close, {} node(s) known",
        s("dialect"),
        s("signing"),
        s("cipher"),
        v["open_files"],
        v["parked_handles"],
        v["nodes"],
    );
    if let Some(max) = v["watch_dirs_max"].as_u64() {
        println!(
            "directories watched for other clients' changes: {} (at most {max})",
            v["watched_dirs"]
        );
    }
    for (kind, name) in [("read", "READ"), ("write", "WRITE")] {
        let r = &v["fuse_io"][kind];
        if let Some(requests) = r["requests"].as_u64().filter(|&n| n > 0) {
            println!(
                "{name}s from the kernel: {requests}, {} of them full size (1 MiB), {} bytes",
                r["full_size"], r["bytes"]
            );
        }
    }
    let p = &v["prefetch"];
    if let Some(fetched) = p["fetched_bytes"].as_u64().filter(|&n| n > 0) {
        println!(
            "read ahead by the daemon: {} streak(s), {fetched} bytes fetched, {} served, {} dropped unread",
            p["streaks"], p["served_bytes"], p["dropped_bytes"]
        );
    }
    let channels = v["channels"].as_array().cloned().unwrap_or_default();
    println!(
        "{:<22} {:<22} {:>8} {:>12} {:>9}  STATE",
        "CLIENT", "SERVER", "IF", "BYTES", "REQUESTS"
    );
    for c in &channels {
        println!(
            "{:<22} {:<22} {:>8} {:>12} {:>9}  {}",
            format!("{}:{}", c["local"].as_str().unwrap_or("?"), c["local_port"]),
            format!(
                "{}:{}",
                c["server"].as_str().unwrap_or("?"),
                c["server_port"]
            ),
            c["local_interface"].as_str().unwrap_or("-"),
            c["bytes"].as_u64().unwrap_or(0),
            c["requests"].as_u64().unwrap_or(0),
            c["state"].as_str().unwrap_or("?"),
        );
    }
    for line in v["multichannel"]["explain"]
        .as_array()
        .into_iter()
        .flatten()
    {
        println!("{}", line.as_str().unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_are_short_and_distinct() {
        let a = socket_path(Path::new("/mnt/data"));
        let b = socket_path(Path::new("/mnt/data2"));
        assert_ne!(a, b);
        assert!(a.file_name().unwrap().len() == 21, "{}", a.display());
        assert_eq!(a, socket_path(Path::new("/mnt/data")));
    }
}
