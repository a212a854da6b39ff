//! An smbfuse mount of the testbed's `[plain]` share, as the mount benchmark and the mount's
//! soak use it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Context;
use smb3_tests::{reap, Testbed};

/// `smbfuse -f` started in the client namespace, as a user would run it; unmounted, and the
/// daemon gone, when dropped. A FUSE mount is seen from every namespace, so programs on the
/// host use it.
#[derive(Debug)]
pub struct Mount {
    /// The mount point.
    pub dir: PathBuf,
    daemon: Child,
}

impl Mount {
    /// Mounts `[plain]` with `-o` `options` on a fresh directory under `/tmp` named after
    /// `name`, and waits (at most 30 s) until it is mounted.
    pub fn start(
        tb: &Testbed,
        smbfuse: &Path,
        name: &str,
        options: &[&str],
    ) -> Result<Mount, String> {
        let dir = std::env::temp_dir().join(format!("smb-bench-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).ctx(dir.display())?;
        let source = crate::session::share_url(tb, "plain");
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", tb.client_ns()))
            .args([
                "--".as_ref(),
                smbfuse.as_os_str(),
                source.as_ref(),
                dir.as_os_str(),
                "-f".as_ref(),
            ])
            .env("SMB_PASSWORD", tb.password())
            .env_remove("SMB_USER")
            .env_remove("SMB_DOMAIN")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        for o in options {
            cmd.args(["-o", o]);
        }
        let daemon = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", smbfuse.display()))?;
        let mut mount = Mount { dir, daemon };
        let started = Instant::now();
        while !mount.is_mounted() {
            if let Ok(Some(status)) = mount.daemon.try_wait() {
                return Err(format!("smbfuse exited before mounting: {status}"));
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!("smbfuse did not mount {source} within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(mount)
    }

    fn is_mounted(&self) -> bool {
        let want = self.dir.to_string_lossy();
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        info.lines()
            .any(|l| l.split(' ').nth(4) == Some(want.as_ref()))
    }

    /// The daemon's process ID.
    pub fn daemon_pid(&self) -> u32 {
        self.daemon.id()
    }

    /// The mount's status document (`smbctl status --json`).
    pub fn status(&self, smbctl: &Path) -> Result<serde_json::Value, String> {
        let out = Command::new(smbctl)
            .args(["status".as_ref(), "--json".as_ref(), self.dir.as_os_str()])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", smbctl.display()))?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr);
            return Err(format!("smbctl status: {}", why.trim()));
        }
        serde_json::from_slice(&out.stdout).ctx("smbctl status --json")
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg(&self.dir)
            .stderr(Stdio::null())
            .status();
        // The daemon ends once unmounted; one that does not is killed and the mount detached.
        if reap(&mut self.daemon, Duration::from_secs(30)).is_none() {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
