//! Run a child process and take its wall time and CPU time.
//!
//! The CPU time comes from `wait4(2)`, which reports the resource usage of exactly the child
//! that was reaped (plus descendants it waited for). `ip netns exec` execs the program in place
//! (it does not fork), so the child is the measured tool itself.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a finished child did.
#[derive(Debug)]
pub struct Finished {
    /// From spawn to exit.
    pub wall: Duration,
    /// User CPU time of the child.
    pub user: Duration,
    /// System CPU time of the child.
    pub sys: Duration,
    /// Its peak resident set, bytes (`ru_maxrss`).
    pub max_rss: u64,
    /// Exit status.
    pub status: ExitStatus,
    /// Everything it wrote on stdout.
    pub stdout: String,
    /// Everything it wrote on stderr.
    pub stderr: String,
}

impl Finished {
    /// User plus system CPU time.
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }

    /// The last lines of stderr, for error messages.
    pub fn stderr_tail(&self) -> String {
        let lines: Vec<&str> = self.stderr.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

/// Reset this process's peak resident set to its current one (Linux: `5` into
/// `/proc/self/clear_refs`). A child starts as this process's image (`vfork`) and the kernel
/// carries that image's peak into the child's `ru_maxrss` when it execs, so without the reset
/// every child would report at least the largest this benchmark ever was.
fn forget_own_peak_rss() {
    #[cfg(target_os = "linux")]
    let _ = std::fs::write("/proc/self/clear_refs", b"5");
}

/// Runs `cmd` to completion with stdin empty and stdout/stderr captured.
pub fn run_measured(mut cmd: Command) -> Result<Finished, String> {
    crate::interrupt::check()?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    forget_own_peak_rss();
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let marked = crate::interrupt::running(child.id());
    // Drain both pipes on threads so a chatty child can never block on a full pipe.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let (status, usage) = wait4(child.id()).map_err(|e| format!("wait4: {e}"))?;
    let wall = started.elapsed();
    // The child is reaped; `Child` must not wait for it again (dropping it does not).
    drop(marked);
    drop(child);
    // A child the signal ended did not measure anything.
    crate::interrupt::check()?;
    Ok(Finished {
        wall,
        user: timeval(usage.ru_utime),
        sys: timeval(usage.ru_stime),
        // Linux counts ru_maxrss in KiB.
        max_rss: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// A child that runs while the caller does other things (injects a fault, watches a clock):
/// its output drained on threads, marked for the signal handler like a measured child, and
/// killed by its PID and reaped when dropped before it ended, so an early return leaves
/// nothing running.
pub struct Background {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    _marked: crate::interrupt::Running,
    ended: bool,
}

impl Background {
    /// Starts `cmd` with stdin empty and stdout/stderr captured.
    pub fn spawn(mut cmd: Command) -> Result<Background, String> {
        crate::interrupt::check()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        Ok(Background {
            stdout: Some(drain(child.stdout.take())),
            stderr: Some(drain(child.stderr.take())),
            _marked: crate::interrupt::running(child.id()),
            child,
            ended: false,
        })
    }

    /// Its exit status once it has ended, `None` while it runs.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, String> {
        let status = self
            .child
            .try_wait()
            .map_err(|e| format!("waiting for pid {}: {e}", self.child.id()))?;
        self.ended |= status.is_some();
        Ok(status)
    }

    /// Kills it (SIGKILL, by its PID) and reaps it.
    pub fn kill(&mut self) -> Result<ExitStatus, String> {
        let status = self
            .child
            .kill()
            .and_then(|()| self.child.wait())
            .map_err(|e| format!("cannot end pid {}: {e}", self.child.id()))?;
        self.ended = true;
        Ok(status)
    }

    /// Everything it wrote on stdout and stderr (killed first if it still runs, since its
    /// pipes close only when it ends).
    pub fn output(mut self) -> (String, String) {
        if !self.ended {
            let _ = self.kill();
        }
        let text =
            |pipe: Option<JoinHandle<String>>| pipe.and_then(|p| p.join().ok()).unwrap_or_default();
        (text(self.stdout.take()), text(self.stderr.take()))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A thread that reads `pipe` to its end and returns what came, as text.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    })
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec.max(0) as u64) + Duration::from_micros(tv.tv_usec.max(0) as u64)
}

/// wait4(2) for one child: its exit status and resource usage.
#[allow(unsafe_code)]
fn wait4(pid: u32) -> std::io::Result<(ExitStatus, libc::rusage)> {
    let pid = pid as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is a plain C struct of integers, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers refer to live locals of the right types for the whole call;
        // wait4 only writes through them.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            return Ok((ExitStatus::from_raw(status), usage));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}
