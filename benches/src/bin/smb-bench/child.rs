//! Child processes and signals. A measured child's CPU time comes from `wait4(2)`, which
//! reports the usage of exactly the child it reaped; `ip netns exec` execs the program in
//! place, so that child is the measured tool itself.
//!
//! SIGINT or SIGTERM stops a run at its next step ([`check`] fails), so its mounts and
//! testbeds are taken down by their `Drop`s. The signal is passed on, as SIGINT, to the
//! children running at that moment, so the step under way ends at once; only those are
//! signalled, never the process group, which smb-bench may share with the script that started
//! it. A second signal exits at once.

use smb3_benches::Context;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a finished child did.
#[derive(Debug)]
pub(crate) struct Finished {
    /// From spawn to exit.
    pub(crate) wall: Duration,
    /// User plus system CPU time.
    pub(crate) cpu: Duration,
    /// Peak resident set, bytes.
    pub(crate) max_rss: u64,
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Finished {
    /// The last lines of stderr, for error messages.
    pub(crate) fn stderr_tail(&self) -> String {
        let lines: Vec<&str> = self.stderr.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// `Err` naming `what` and the end of stderr unless the child exited 0.
    pub(crate) fn success(&self, what: &str) -> Result<(), String> {
        match self.status.success() {
            true => Ok(()),
            false => Err(format!(
                "{what} failed ({}): {}",
                self.status,
                self.stderr_tail()
            )),
        }
    }
}

/// A child with stdin empty and its output drained on threads (so a chatty child never
/// blocks on a full pipe), marked for the signal handler; killed and reaped when dropped
/// before it ended, so an early return leaves nothing running.
pub(crate) struct Running {
    child: Child,
    pipes: Option<[JoinHandle<String>; 2]>,
    started: Instant,
    ended: bool,
}

impl Running {
    pub(crate) fn spawn(mut cmd: Command) -> Result<Running, String> {
        check()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
        let pipes = Some([drain(child.stdout.take()), drain(child.stderr.take())]);
        Ok(Running {
            child,
            pipes,
            started,
            ended: false,
        })
    }

    /// Its exit status once it has ended.
    pub(crate) fn try_wait(&mut self) -> Result<Option<ExitStatus>, String> {
        let status = self
            .child
            .try_wait()
            .map_err(|e| format!("waiting for pid {}: {e}", self.child.id()))?;
        self.ended |= status.is_some();
        Ok(status)
    }

    /// Kills it (SIGKILL, by its PID) and reaps it.
    pub(crate) fn kill(&mut self) -> Result<ExitStatus, String> {
        self.ended = true;
        let id = self.child.id();
        (self.child.kill().and_then(|()| self.child.wait())).ctx(format!("cannot end pid {id}"))
    }

    /// What it wrote on stdout and stderr (killed first if it still runs: its pipes close
    /// only when it ends).
    pub(crate) fn output(mut self) -> (String, String) {
        if !self.ended {
            let _ = self.kill();
        }
        let [out, err] = self.pipes.take().expect("output is taken once");
        (
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        )
    }

    /// Waits for it to end: what it did and used.
    pub(crate) fn finish(mut self) -> Result<Finished, String> {
        let (status, usage) = wait4(self.child.id()).ctx("wait4")?;
        let wall = self.started.elapsed();
        self.ended = true;
        // A child the signal ended did not measure anything.
        check()?;
        let time = |tv: libc::timeval| {
            Duration::from_secs(tv.tv_sec.max(0) as u64)
                + Duration::from_micros(tv.tv_usec.max(0) as u64)
        };
        let (stdout, stderr) = self.output();
        Ok(Finished {
            wall,
            cpu: time(usage.ru_utime) + time(usage.ru_stime),
            // Linux counts ru_maxrss in KiB.
            max_rss: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
            status,
            stdout,
            stderr,
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.kill();
        }
        let id = self.child.id();
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&pid| pid != id);
    }
}

/// Runs `cmd` to its end with its output captured, and measures it.
pub(crate) fn run_measured(cmd: Command) -> Result<Finished, String> {
    // A child starts as this process's image, and the kernel carries that image's peak RSS
    // into the child's ru_maxrss when it execs: forget ours first.
    let _ = std::fs::write("/proc/self/clear_refs", b"5");
    Running::spawn(cmd)?.finish()
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    })
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
        if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } == pid {
            return Ok((ExitStatus::from_raw(status), usage));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Children running now, by PID: the first signal is passed on to them.
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Exit status of a run cut short by a signal (128 + SIGINT, as shells report it).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// Catches SIGINT and SIGTERM from now on: the first stops the run and is passed on to the
/// children running, the second exits at once.
pub(crate) fn install_signal_handler() {
    let first = || {
        INTERRUPTED.store(true, Ordering::SeqCst);
        eprintln!(
            "smb-bench: signal received: stopping, unmounting and taking the testbeds down (again to exit at once)"
        );
        for pid in RUNNING.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            // SAFETY: kill(2) takes no pointers. The PID is a child of ours that runs or was
            // reaped a moment ago; PIDs are reused only after the whole range wrapped.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(*pid as libc::pid_t, libc::SIGINT);
            }
        }
    };
    let second = || {
        eprintln!("smb-bench: second signal: exiting without cleaning up");
        std::process::exit(i32::from(EXIT_INTERRUPTED));
    };
    if let Err(e) = smb3_benches::on_signals(first, second) {
        eprintln!("smb-bench: no signal handling ({e}): Ctrl-C will leave the testbed behind");
    }
}

/// Whether a signal asked the run to stop.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// `Err` once a signal asked the run to stop: called between steps, its `?` unwinds the run.
pub(crate) fn check() -> Result<(), String> {
    match interrupted() {
        true => Err("interrupted by a signal".into()),
        false => Ok(()),
    }
}
