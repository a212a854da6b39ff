//! Running in the background: the command the user ran starts a copy of itself (with
//! `--daemon-child`) and waits until that copy says the mount is ready, or has failed; a
//! fresh process rather than fork(2), so no thread or runtime is ever forked.
//!
//! The child reports readiness by writing `ready` on its stdout (a pipe to the parent), after
//! pointing stderr at /dev/null so nobody waiting on the parent's output waits on the daemon.
//! Errors before that go to the user's stderr as they happen, and its exit status becomes the
//! parent's.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

/// The flag that makes a process the daemon child.
pub const CHILD_FLAG: &str = "--daemon-child";

/// Start the daemon and wait for it to be mounted (exit 0) or to fail (its exit status).
pub fn spawn_and_wait() -> i32 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("smbfuse: cannot find my own executable: {e}");
            return 1;
        }
    };
    let mut child = match Command::new(exe)
        .args(std::env::args_os().skip(1))
        .arg(CHILD_FLAG)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("smbfuse: cannot start the daemon: {e}");
            return 1;
        }
    };
    let mut said = String::new();
    if let Some(mut out) = child.stdout.take() {
        // Ends when the child points its stdout elsewhere (ready) or exits (failed).
        let _ = out.read_to_string(&mut said);
    }
    if said.starts_with("ready") {
        return 0;
    }
    match child.wait() {
        Ok(status) => status.code().filter(|c| *c != 0).unwrap_or(1),
        Err(e) => {
            eprintln!("smbfuse: lost the daemon: {e}");
            1
        }
    }
}

/// In the daemon child, before anything else: leave the terminal's session.
pub fn detach() {
    if let Err(e) = rustix::process::setsid() {
        tracing::debug!(error = %e, "setsid");
    }
}

/// In the daemon child, once mounted: tell the parent, and let go of its stdio.
pub fn ready() {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null");
    if let Ok(null) = &null {
        let _ = rustix::stdio::dup2_stderr(null);
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(b"ready\n");
    let _ = out.flush();
    drop(out);
    if let Ok(null) = &null {
        let _ = rustix::stdio::dup2_stdout(null);
        let _ = rustix::stdio::dup2_stdin(null);
    }
}
