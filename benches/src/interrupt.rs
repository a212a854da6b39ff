//! Ctrl-C (SIGINT) or SIGTERM during a benchmark run: the run stops at its next step and
//! unwinds, so its mounts are unmounted and its testbeds taken down by their `Drop`s, where a
//! killed process would leave them behind (a mount on a scratch directory, network
//! namespaces, an smbd).
//!
//! The first signal is passed on, as SIGINT, to the measured tool running at that moment (see
//! [`running`]; Ctrl-C in a terminal reaches it anyway, SIGTERM sent to smb-bench alone would
//! not), so the step under way ends at once and reports [`check`]'s error. Only those
//! children are signalled, never the process group: smb-bench may share one with the script
//! that started it. A second signal exits at once, cleanup or not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Children measured now, by PID.
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Marks a running child: it is sent SIGINT if a signal stops the run. Unmarked when dropped
/// (after the child was reaped).
pub struct Running(u32);

/// Mark child `pid` as running (see [`Running`]).
pub fn running(pid: u32) -> Running {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
    Running(pid)
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&pid| pid != self.0);
    }
}

/// Exit status of a run cut short by a signal (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Catch SIGINT and SIGTERM from now on (once per process).
pub fn install() {
    let spawned = std::thread::Builder::new()
        .name("smb-bench-signals".into())
        .spawn(|| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                use tokio::signal::unix::{signal, SignalKind};
                let (Ok(mut int), Ok(mut term)) = (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                ) else {
                    return;
                };
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                INTERRUPTED.store(true, Ordering::SeqCst);
                eprintln!(
                    "smb-bench: signal received: stopping, unmounting and taking the testbeds down \
                     (again to exit at once)"
                );
                forward_to_children();
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                eprintln!("smb-bench: second signal: exiting without cleaning up");
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            });
        });
    if let Err(e) = spawned {
        eprintln!("smb-bench: no signal thread ({e}): Ctrl-C will leave the testbed behind");
    }
}

/// SIGINT to the children measured now: the step under way ends.
#[allow(unsafe_code)]
fn forward_to_children() {
    let pids = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for pid in pids {
        // SAFETY: kill(2) takes no pointers. The PID is a child of ours that is running or
        // was reaped a moment ago (it leaves the set right after wait4); PIDs are handed out
        // again only after the whole range wrapped, so it does not name another process.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGINT);
        }
    }
}

/// Whether a signal asked the run to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// `Err` once a signal asked the run to stop: called between steps, its `?` unwinds the run.
pub fn check() -> Result<(), String> {
    if interrupted() {
        Err("interrupted by a signal".into())
    } else {
        Ok(())
    }
}
