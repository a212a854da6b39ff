//! The kernel's side of a Linux mount: its FUSE device number, the read-ahead window of its
//! backing device, and aborting its connection.

use std::path::Path;

/// The `major:minor` device of the file system mounted at `mp`, from /proc/self/mountinfo
/// (a stat of the mount point would wait on this very file system). The minor number names
/// the FUSE connection under /sys/fs/fuse/connections. The last entry wins: a mount point
/// can be mounted over.
pub fn device_of(mp: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = mp.to_string_lossy();
    info.lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f.len() > 4 && f[4] == want.as_ref())
        .map(|f| f[2].to_string())
        .next_back()
}

/// The kernel reads ahead at most what its FUSE INIT offered (128 KiB by default), however
/// much the file system asks for; the window is the backing device's `read_ahead_kb`, which
/// root may raise. A sequential reader then has several 1 MiB READs in flight, split by the
/// library over the channels.
pub fn set_readahead(device: &str, bytes: u32) {
    let path = format!("/sys/class/bdi/{device}/read_ahead_kb");
    if let Err(e) = std::fs::write(&path, format!("{}", bytes / 1024)) {
        tracing::info!(path, error = %e, "cannot set the read-ahead window");
    }
}

/// Abort the FUSE connection of `device`: every request waiting on it fails and the
/// daemon's reads of /dev/fuse end, as when the last mount of it goes away.
///
/// Needed after an unmount when a copy of the mount lives on in another mount namespace
/// (one a process unshared while the mount existed, e.g. `ip netns exec` or a container
/// started meanwhile): unmounting here does not reach it, so the kernel keeps the connection
/// and the daemon would wait for requests that never come.
pub fn abort_connection(device: &str) {
    let Some((_, minor)) = device.split_once(':') else {
        return;
    };
    let listed = Path::new("/sys/fs/fuse/connections");
    let result = if listed.join(minor).exists() {
        write_abort(listed, minor)
    } else {
        // A mount namespace with its own /sys (as `ip netns exec` gives) has no fusectl
        // mounted: mount one of our own for the moment.
        with_private_fusectl(|dir| write_abort(dir, minor))
    };
    match result {
        Ok(()) => tracing::info!(connection = minor, "FUSE connection aborted"),
        Err(e) => {
            tracing::info!(connection = minor, error = %e, "cannot abort the FUSE connection")
        }
    }
}

fn write_abort(connections: &Path, minor: &str) -> std::io::Result<()> {
    std::fs::write(connections.join(minor).join("abort"), b"1")
}

/// Run `f` with the fusectl file system (`/sys/fs/fuse/connections`: a directory per FUSE
/// connection, named by its minor number) mounted on a fresh directory, then unmount it.
pub fn with_private_fusectl(f: impl FnOnce(&Path) -> std::io::Result<()>) -> std::io::Result<()> {
    use rustix::mount::{mount, unmount, MountFlags, UnmountFlags};
    let dir = std::env::temp_dir().join(format!("smbfuse-fusectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = mount("fusectl", &dir, "fusectl", MountFlags::empty(), None)
        .map_err(std::io::Error::from)
        .and_then(|()| {
            let r = f(&dir);
            let _ = unmount(&dir, UnmountFlags::DETACH);
            r
        });
    let _ = std::fs::remove_dir(&dir);
    result
}
