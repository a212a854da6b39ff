//! The mount's status socket: `smbctl status MOUNTPOINT` connects and reads one JSON
//! document (session, channels, multichannel explanation, open files). The socket's place
//! is `smbcp::mount_status::socket_path`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use crate::fs::SmbFs;

/// The status as JSON.
pub fn status_json(fs: &SmbFs, mountpoint: &Path, source: &str) -> serde_json::Value {
    use smbcp::status::{channel_json, multichannel_json};
    let client = fs.share().client();
    let cfg = fs.config();
    serde_json::json!({
        "mountpoint": mountpoint.display().to_string(),
        "source": source,
        "share": fs.share().name(),
        "dialect": client.dialect().to_string(),
        "signing": client.signing().map_or("-".to_string(), |s| format!("{s:?}")),
        "cipher": client.cipher().map_or("-".to_string(), |c| format!("{c:?}")),
        "encrypts_everything": client.encrypts_everything(),
        "open_files": fs.open_files(),
        "parked_handles": fs.parked_handles(),
        "nodes": fs.known_nodes(),
        "actimeo_seconds": cfg.ttl.as_secs_f64(),
        "hard": cfg.hard,
        "read_only": cfg.read_only,
        "write_behind_bytes": cfg.write_behind,
        "watched_dirs": fs.watched_dirs(),
        "watch_dirs_max": cfg.watch_dirs,
        "fuse_io": fs.io_stats().json(),
        "prefetch": fs.prefetch_stats().json(),
        "channels": client.channels().iter().map(channel_json).collect::<Vec<_>>(),
        "multichannel": multichannel_json(&client.multichannel()),
    })
}

/// The status socket of a mount, removed at unmount.
#[derive(Debug)]
pub struct StatusSocket {
    path: PathBuf,
    /// Its inode: only this socket is removed, not one a later mount on the same mount point
    /// made meanwhile.
    ino: u64,
}

impl StatusSocket {
    /// Remove the socket, if it is still this mount's.
    pub fn remove(self) {
        use std::os::unix::fs::MetadataExt;
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Listen on the mount's status socket, or `None` when it cannot be created (the mount
/// works without it).
pub fn serve(
    rt: &tokio::runtime::Handle,
    fs: Arc<SmbFs>,
    mountpoint: &Path,
    source: String,
) -> Option<StatusSocket> {
    let path = smbcp::mount_status::socket_path(mountpoint);
    if let Some(dir) = path.parent() {
        if let Err(e) = std::fs::create_dir_all(dir) {
            tracing::info!(dir = %dir.display(), error = %e, "no status socket");
            return None;
        }
    }
    // A socket left by a daemon that died: nobody answers on it.
    let _ = std::fs::remove_file(&path);
    let _guard = rt.enter();
    let listener = match tokio::net::UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            tracing::info!(path = %path.display(), error = %e, "no status socket");
            return None;
        }
    };
    let ino = {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(&path).map_or(0, |m| m.ino())
    };
    let mp = mountpoint.to_path_buf();
    rt.spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                // Out of descriptors, say: try again a little later.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let text = status_json(&fs, &mp, &source).to_string();
            tokio::spawn(async move {
                let _ = conn.write_all(text.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    Some(StatusSocket { path, ino })
}
