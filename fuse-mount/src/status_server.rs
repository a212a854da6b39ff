//! The mount's status socket: `smbctl status MOUNTPOINT` connects and reads one JSON
//! document (session, channels, multichannel explanation, open files). The socket's place
//! is `smb3_frontend::status_socket::socket_path`.
//!
//! The status names the server, the share, the user's open files and connections: it is the
//! mounting user's alone. The socket's directory is made (mode 0700) or checked to be this
//! user's, never through a symbolic link, and the socket is made 0600 (there is no option
//! naming a group that should read it). A socket takes its first mode from the umask at
//! bind(2), but the umask is the whole process's and the runtime's threads are running, so
//! the private directory is what keeps it out of reach until it is chmod-ed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use crate::fs::SmbFs;

/// The status as JSON.
pub fn status_json(fs: &SmbFs, mountpoint: &Path, source: &str) -> serde_json::Value {
    use smb3_frontend::status_json::{channel_json, multichannel_json};
    let client = fs.share().client();
    let cfg = fs.config();
    serde_json::json!({
        "mountpoint": mountpoint.display().to_string(),
        "source": source,
        "share": fs.share().name(),
        "dialect": client.dialect().to_string(),
        "signing": client.signing().map_or("-".to_string(), |s| format!("{s:?}")),
        "cipher": client.cipher().map_or("-".to_string(), |c| format!("{c:?}")),
        // Whether messages are actually sealed, not only whether a cipher was agreed: the
        // whole session (the server's SESSION_SETUP flag or `seal`), or this share's tree.
        "encrypts_everything": client.encrypts_everything(),
        "share_encrypted": fs.share().is_encrypted(),
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
        "library_tasks": smb3_frontend::status_json::tasks_json(),
        "heap_in_use_bytes": crate::idle_memory::heap_in_use(),
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

/// Make `dir` this user's private directory: created with mode 0700 if missing; then,
/// opened without following a symbolic link, it must be a directory owned by this user
/// (its predictable name in /tmp can be taken by anyone first: such a directory is refused,
/// not used). One of this user's own that group or others may enter (0755 from the
/// default umask, say) is made 0700.
pub fn make_private_dir(dir: &Path) -> Result<(), String> {
    use rustix::fs::{Mode, OFlags};
    use std::os::unix::fs::DirBuilderExt;
    let shown = dir.display();
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {shown}: {e}")),
    }
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        // Linux says ENOTDIR for a symbolic link opened with O_DIRECTORY | O_NOFOLLOW.
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
            if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
                format!("{shown} is a symbolic link: refused")
            } else {
                format!("{shown} is not a directory: refused")
            }
        }
        e => format!("{shown}: {e}"),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("{shown}: {e}"))?;
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me {
        return Err(format!(
            "{shown} belongs to uid {}, not to this user (uid {me}): refused (someone else \
             made it; remove it, or set XDG_RUNTIME_DIR to a private directory)",
            st.st_uid
        ));
    }
    if st.st_mode & 0o077 != 0 {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))
            .map_err(|e| format!("{shown}: cannot make it private (mode 0700): {e}"))?;
    }
    Ok(())
}

/// Bind the socket at `path` in a private directory (see [`make_private_dir`]) and make it
/// 0600. Returns the listener and the socket's inode.
pub fn bind_private(path: &Path) -> Result<(std::os::unix::net::UnixListener, u64), String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = path
        .parent()
        .ok_or_else(|| format!("{}: no directory", path.display()))?;
    make_private_dir(dir)?;
    // A socket left by a daemon that died: nobody answers on it.
    let _ = std::fs::remove_file(path);
    let listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // In the private directory nobody else can have replaced it since bind.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let ino = std::fs::symlink_metadata(path).map_or(0, |m| m.ino());
    Ok((listener, ino))
}

/// Listen on the mount's status socket, or say why it cannot be created (the mount works
/// without it).
pub fn serve(
    rt: &tokio::runtime::Handle,
    fs: Arc<SmbFs>,
    mountpoint: &Path,
    source: String,
) -> Result<StatusSocket, String> {
    let path = smb3_frontend::status_socket::socket_path(mountpoint);
    let (listener, ino) = bind_private(&path)?;
    let listener = {
        let _guard = rt.enter();
        listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::UnixListener::from_std(listener))
            .map_err(|e| format!("{}: {e}", path.display()))?
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
    Ok(StatusSocket { path, ino })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn scratch(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("smbfuse-status-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn the_socket_directory_is_private_and_this_users() {
        let base = scratch("dir");
        // Made 0700 whatever the umask.
        let fresh = base.join("fresh");
        make_private_dir(&fresh).unwrap();
        assert_eq!(mode(&fresh), 0o700);
        make_private_dir(&fresh).unwrap();
        // One's own, open to others: closed.
        let loose = base.join("loose");
        std::fs::create_dir(&loose).unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o777)).unwrap();
        make_private_dir(&loose).unwrap();
        assert_eq!(mode(&loose), 0o700);
        // Never through a symbolic link, never something else.
        let link = base.join("link");
        std::os::unix::fs::symlink(&fresh, &link).unwrap();
        let e = make_private_dir(&link).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let dangling = base.join("dangling");
        std::os::unix::fs::symlink(base.join("nowhere"), &dangling).unwrap();
        let e = make_private_dir(&dangling).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(!base.join("nowhere").exists(), "created through the link");
        std::fs::write(base.join("file"), b"").unwrap();
        let e = make_private_dir(&base.join("file")).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        // Someone else's (made before the daemon, in /tmp): refused, left as it is.
        if rustix::process::geteuid().is_root() {
            let theirs = base.join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
            std::os::unix::fs::lchown(&theirs, Some(12345), Some(12345)).unwrap();
            let e = make_private_dir(&theirs).unwrap_err();
            assert!(e.contains("belongs to uid 12345"), "{e}");
            assert_eq!(mode(&theirs), 0o777);
        } else {
            eprintln!("not root: the other-owner case is skipped");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_socket_is_0600_and_smbctl_trusts_it() {
        let base = scratch("sock");
        let sock = base.join("run").join("m.sock");
        // A stale file in its place is replaced.
        std::fs::create_dir(base.join("run")).unwrap();
        std::fs::write(&sock, b"stale").unwrap();
        let (listener, ino) = bind_private(&sock).unwrap();
        assert_eq!(mode(&base.join("run")), 0o700);
        assert_eq!(mode(&sock), 0o600);
        assert_eq!(std::fs::symlink_metadata(&sock).unwrap().ino(), ino);
        smb3_frontend::status_socket::check_socket(&sock).unwrap();
        drop(listener);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
