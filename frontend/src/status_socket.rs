//! Where a `smbfuse` mount publishes its status, and how `smbctl status MOUNTPOINT` reads it.
//!
//! Each mount's daemon listens on a Unix socket named after its mount point (a hash of the
//! canonical path, so the name always fits `sun_path`): `/run/smbfuse/<hash>.sock` for root,
//! `$XDG_RUNTIME_DIR/smbfuse/<hash>.sock` (or `/tmp/smbfuse-<uid>/`) for others. A client
//! connects and reads one JSON document; the daemon then closes the connection.
//!
//! The socket is the user's alone: the daemon makes its directory 0700 and the socket 0600
//! (`smbfuse`'s `status_server.rs`), and `smbctl status` talks only to a socket that belongs
//! to the user (or root) in a directory nobody else may write to ([`check_socket`]): whoever
//! could write there could put a socket of their own in the mount's place and answer with a
//! status of their making.

use std::ffi::OsStr;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The directory the sockets live in for the current user.
pub fn socket_dir() -> PathBuf {
    socket_dir_for(
        rustix::process::geteuid().as_raw(),
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
    )
}

/// The socket directory of user `euid` with `XDG_RUNTIME_DIR` set to `runtime_dir`. The
/// fallback in /tmp has a name anyone can guess and create first; the daemon checks it
/// before use (and refuses one that is not its own), so it is only the fallback.
fn socket_dir_for(euid: u32, runtime_dir: Option<&OsStr>) -> PathBuf {
    if euid == 0 {
        return PathBuf::from("/run/smbfuse");
    }
    match runtime_dir.filter(|d| !d.is_empty()).map(Path::new) {
        Some(d) if usable_runtime_dir(d, euid) => d.join("smbfuse"),
        _ => PathBuf::from(format!("/tmp/smbfuse-{euid}")),
    }
}

/// Whether `dir` is what `XDG_RUNTIME_DIR` should be: a directory itself (not a symbolic
/// link) that belongs to user `euid` and that neither group nor others may write to.
pub fn usable_runtime_dir(dir: &Path, euid: u32) -> bool {
    std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == euid && m.mode() & 0o022 == 0)
}

/// Whether the socket at `sock` may be trusted, checked without following a symbolic link:
/// its directory is a directory that belongs to this user or root and that group and others
/// cannot write to, and the socket is a socket that belongs to this user or root.
pub fn check_socket(sock: &Path) -> Result<(), String> {
    let me = rustix::process::geteuid().as_raw();
    let dir = sock.parent().unwrap_or(Path::new("/"));
    let lstat = |p: &Path| {
        std::fs::symlink_metadata(p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("no smbfuse mount answers there ({}: {e})", sock.display())
            }
            _ => format!("{}: {e}", p.display()),
        })
    };
    let owner = |p: &Path, uid: u32| {
        if uid == me || uid == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} belongs to uid {uid}, not to this user (uid {me}) or root: refused",
                p.display()
            ))
        }
    };
    let md = lstat(dir)?;
    if !md.is_dir() {
        return Err(format!(
            "{} is not a directory (a symbolic link?): refused",
            dir.display()
        ));
    }
    owner(dir, md.uid())?;
    if md.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is writable by group or others (mode {:04o}, owner uid {}): refused",
            dir.display(),
            md.mode() & 0o7777,
            md.uid()
        ));
    }
    let md = lstat(sock)?;
    if !md.file_type().is_socket() {
        return Err(format!("{} is not a socket: refused", sock.display()));
    }
    owner(sock, md.uid())
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
    let given =
        std::fs::canonicalize(mountpoint).map_err(|e| format!("{}: {e}", mountpoint.display()))?;
    // Any path inside the mount will do: the mount's root is where the device changes going
    // up.
    let root = mount_root(&given);
    let shown = if root == given {
        given.display().to_string()
    } else {
        format!("{} (in {})", given.display(), root.display())
    };
    let sock = socket_path(&root);
    let no_mount = |e: &dyn std::fmt::Display| {
        format!(
            "{shown}: no smbfuse mount answers there ({}: {e})",
            sock.display()
        )
    };
    if std::fs::symlink_metadata(&sock).is_err() {
        return Err(no_mount(&"no status socket"));
    }
    check_socket(&sock).map_err(|e| format!("{shown}: {e}"))?;
    let mut conn = std::os::unix::net::UnixStream::connect(&sock).map_err(|e| no_mount(&e))?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    conn.read_to_string(&mut text)
        .map_err(|e| format!("{}: reading the status: {e}", sock.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: bad status: {e}", sock.display()))
}

/// The root of the mount holding `path` (canonical): the highest directory on the same
/// device, going up until the parent is on another one.
fn mount_root(path: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt as _;
    let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    let mut at = path.to_path_buf();
    let Some(here) = dev(&at) else {
        return at;
    };
    while let Some(parent) = at.parent() {
        if dev(parent) != Some(here) {
            break;
        }
        at = parent.to_path_buf();
    }
    at
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

    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    /// A fresh directory of this test, mode 0700.
    fn scratch(name: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = std::env::temp_dir().join(format!("mount-status-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
        p
    }

    fn chmod(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_runtime_dir_is_used_only_when_private() {
        let me = rustix::process::geteuid().as_raw();
        let base = scratch("xdg");
        let xdg = base.join("run");
        std::fs::create_dir(&xdg).unwrap();
        chmod(&xdg, 0o700);
        // Root's place does not depend on the environment.
        assert_eq!(
            socket_dir_for(0, Some(xdg.as_os_str())),
            Path::new("/run/smbfuse")
        );
        let tmp = PathBuf::from(format!("/tmp/smbfuse-{me}"));
        if me != 0 {
            assert_eq!(
                socket_dir_for(me, Some(xdg.as_os_str())),
                xdg.join("smbfuse")
            );
            assert_eq!(socket_dir_for(me, None), tmp);
            assert_eq!(socket_dir_for(me, Some(OsStr::new(""))), tmp);
        }
        if is_root() {
            // Root's own choice is fixed: try a user's with a directory made theirs.
            std::os::unix::fs::lchown(&xdg, Some(12345), None).unwrap();
            assert_eq!(
                socket_dir_for(12345, Some(xdg.as_os_str())),
                xdg.join("smbfuse")
            );
            assert_eq!(socket_dir_for(12345, None), Path::new("/tmp/smbfuse-12345"));
            std::os::unix::fs::lchown(&xdg, Some(0), None).unwrap();
        }
        assert!(usable_runtime_dir(&xdg, me));
        chmod(&xdg, 0o755);
        assert!(usable_runtime_dir(&xdg, me), "readable by others is fine");
        chmod(&xdg, 0o770);
        assert!(!usable_runtime_dir(&xdg, me), "group-writable");
        chmod(&xdg, 0o1777);
        assert!(!usable_runtime_dir(&xdg, me), "world-writable");
        chmod(&xdg, 0o700);
        assert!(!usable_runtime_dir(&xdg, me + 1), "another user's");
        let link = base.join("link");
        std::os::unix::fs::symlink(&xdg, &link).unwrap();
        assert!(!usable_runtime_dir(&link, me), "a symbolic link");
        assert!(!usable_runtime_dir(&base.join("missing"), me));
        std::fs::write(base.join("file"), b"").unwrap();
        assert!(
            !usable_runtime_dir(&base.join("file"), me),
            "not a directory"
        );
        // Unusable: the fallback, whatever the variable says.
        assert_eq!(
            socket_dir_for(4242, Some(xdg.as_os_str())),
            PathBuf::from("/tmp/smbfuse-4242")
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn only_a_private_socket_of_this_user_or_root_is_trusted() {
        let dir = scratch("sock");
        let sock = dir.join("s.sock");
        let e = check_socket(&sock).unwrap_err();
        assert!(e.starts_with("no smbfuse mount answers there"), "{e}");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        check_socket(&sock).unwrap();
        chmod(&dir, 0o755);
        check_socket(&sock).unwrap();

        for mode in [0o777, 0o775, 0o1777] {
            chmod(&dir, mode);
            let e = check_socket(&sock).unwrap_err();
            assert!(
                e.contains("writable by group or others") && e.contains(&dir.display().to_string()),
                "{mode:o}: {e}"
            );
        }
        chmod(&dir, 0o700);

        // Something else in the socket's place: a symbolic link to it, a file.
        let other = scratch("sock-other");
        let real = other.join("real.sock");
        let _other_listener = std::os::unix::net::UnixListener::bind(&real).unwrap();
        let link = dir.join("link.sock");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = check_socket(&link).unwrap_err();
        assert!(e.contains("is not a socket"), "{e}");
        std::fs::write(dir.join("file.sock"), b"").unwrap();
        let e = check_socket(&dir.join("file.sock")).unwrap_err();
        assert!(e.contains("is not a socket"), "{e}");
        // A directory that is a symbolic link to a private one.
        let dir_link = other.join("dir-link");
        std::os::unix::fs::symlink(&dir, &dir_link).unwrap();
        let e = check_socket(&dir_link.join("s.sock")).unwrap_err();
        assert!(e.contains("is not a directory"), "{e}");

        // Another user's socket, or another user's directory (chown needs root; the rest of
        // the test holds without it).
        if is_root() {
            std::os::unix::fs::lchown(&sock, Some(12345), None).unwrap();
            let e = check_socket(&sock).unwrap_err();
            assert!(
                e.contains("belongs to uid 12345") && e.contains("s.sock"),
                "{e}"
            );
            std::os::unix::fs::lchown(&sock, Some(0), None).unwrap();
            check_socket(&sock).unwrap();
            std::os::unix::fs::lchown(&dir, Some(12345), None).unwrap();
            let e = check_socket(&sock).unwrap_err();
            assert!(
                e.contains("belongs to uid 12345") && e.contains(&dir.display().to_string()),
                "{e}"
            );
        } else {
            eprintln!("not root: the other-owner cases are skipped");
        }
        drop(listener);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&other).unwrap();
    }
}
