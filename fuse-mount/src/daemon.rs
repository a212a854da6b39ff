//! Running in the background: the command the user ran starts a copy of itself (with
//! `--daemon-child`) and waits until that copy says the mount is ready, or has failed; a
//! fresh process rather than fork(2), so no thread or runtime is ever forked.
//!
//! The child reports readiness by writing `ready` on its stdout (a pipe to the parent), after
//! pointing stderr at /dev/null so nobody waiting on the parent's output waits on the daemon.
//! Errors before that go to the user's stderr as they happen, and its exit status becomes the
//! parent's.
//!
//! The password never reaches the daemon through its environment: a process's initial
//! environment stays readable in /proc/PID/environ for its whole life, and the daemon lives
//! as long as the mount. The parent starts it without `SMB_PASSWORD` and writes the
//! credentials on its stdin (a pipe, read to its end before anything else), see [`Handoff`].

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use zeroize::Zeroizing;

/// The flag that makes a process the daemon child.
pub const CHILD_FLAG: &str = "--daemon-child";

/// The environment variable a password may come from (`smb3_frontend::credentials` reads it).
pub const PASSWORD_ENV: &str = "SMB_PASSWORD";

/// What the parent hands the daemon on its stdin: the user, domain and password as the
/// parent resolved them (from [`PASSWORD_ENV`], a credentials file, or the terminal, which
/// the daemon no longer has). A credentials file is read again by the daemon and wins, as
/// it does for every smbcp tool.
pub struct Handoff {
    /// The user name, as `smb3_frontend::credentials` resolved it.
    pub user: String,
    /// The domain, as `smb3_frontend::credentials` resolved it.
    pub domain: String,
    /// The password.
    pub password: Zeroizing<String>,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("password", &"<hidden>")
            .finish()
    }
}

/// First line of a handoff on the pipe; the three fields follow, each a 32-bit little-endian
/// length and its bytes.
const HANDOFF_MAGIC: &[u8] = b"smbfuse credentials 1\n";

/// The most the daemon reads from the pipe. Its buffer is allocated at this size once, so it
/// is never grown (growing would leave a copy of the password behind in freed memory).
const HANDOFF_MAX: usize = 64 << 10;

/// A handoff as bytes for the pipe, wiped when dropped.
pub fn encode_handoff(h: &Handoff) -> Zeroizing<Vec<u8>> {
    let fields = [
        h.user.as_bytes(),
        h.domain.as_bytes(),
        h.password.as_bytes(),
    ];
    let len = HANDOFF_MAGIC.len() + fields.iter().map(|f| 4 + f.len()).sum::<usize>();
    let mut out = Zeroizing::new(Vec::with_capacity(len));
    out.extend_from_slice(HANDOFF_MAGIC);
    for f in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// The handoff in `bytes`, or `None` when there is none (empty) or it is malformed.
pub fn decode_handoff(bytes: &[u8]) -> Option<Handoff> {
    fn field<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return None;
        }
        let (f, tail) = tail.split_at(len);
        *rest = tail;
        Some(f)
    }
    let mut rest = bytes.strip_prefix(HANDOFF_MAGIC)?;
    let user = String::from_utf8(field(&mut rest)?.to_vec()).ok()?;
    let domain = String::from_utf8(field(&mut rest)?.to_vec()).ok()?;
    let password = Zeroizing::new(std::str::from_utf8(field(&mut rest)?).ok()?.to_string());
    rest.is_empty().then_some(Handoff {
        user,
        domain,
        password,
    })
}

/// In the daemon child, first thing: read what the parent handed over on stdin (to its end:
/// the parent closes the pipe once it has written). Read from the descriptor itself, past
/// std's buffered stdin, whose buffer would keep a copy nobody wipes.
pub fn receive_handoff() -> Option<Handoff> {
    use std::os::fd::AsFd;
    let mut buf = Zeroizing::new(vec![0u8; HANDOFF_MAX]);
    let stdin = std::io::stdin();
    let mut len = 0;
    while len < buf.len() {
        match rustix::io::read(stdin.as_fd(), &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                eprintln!("smbfuse: reading the credentials from the parent: {e}");
                return None;
            }
        }
    }
    decode_handoff(&buf[..len])
}

/// Forbid core dumps and ptrace by other processes of the same user, which also makes
/// /proc/PID/environ, /proc/PID/mem and the like readable by root only: this process holds
/// the password (or, once logged on, the NT hash and session keys) for as long as the mount
/// lives. Linux only (prctl PR_SET_DUMPABLE); macOS has no equivalent a process can set on
/// itself. The setting does not survive execve, so the daemon child sets it again.
pub fn forbid_inspection() {
    #[cfg(target_os = "linux")]
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        eprintln!("smbfuse: warning: cannot make the process non-dumpable: {e}");
    }
}

/// Start the daemon and wait for it to be mounted (exit 0) or to fail (its exit status).
/// `handoff` goes to it on its stdin; [`PASSWORD_ENV`] is left out of its environment.
pub fn spawn_and_wait(handoff: Option<&Handoff>) -> i32 {
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
        .env_remove(PASSWORD_ENV)
        .stdin(Stdio::piped())
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
    if let Some(mut pipe) = child.stdin.take() {
        if let Some(h) = handoff {
            // A daemon that failed already says why on stderr; its status follows.
            let _ = pipe.write_all(&encode_handoff(h));
        }
        // Closed here: the daemon reads to the end before anything else.
        drop(pipe);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_goes_through_the_pipe_whole() {
        let h = Handoff {
            user: "alice".into(),
            domain: "CORP".into(),
            password: Zeroizing::new("hunter2, p\u{e4}ss\n=".into()),
        };
        let bytes = encode_handoff(&h);
        let back = decode_handoff(&bytes).unwrap();
        assert_eq!(
            (back.user.as_str(), back.domain.as_str()),
            ("alice", "CORP")
        );
        assert_eq!(back.password.as_str(), "hunter2, p\u{e4}ss\n=");
        assert!(!format!("{back:?}").contains("hunter2"));
        // Nothing written (no password in the environment), cut short, or trailing bytes:
        // no handoff.
        assert!(decode_handoff(b"").is_none());
        assert!(decode_handoff(&bytes[..bytes.len() - 1]).is_none());
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(decode_handoff(&longer).is_none());
        assert!(decode_handoff(b"SMB_PASSWORD=x").is_none());
        let empty = Handoff {
            user: "u".into(),
            domain: String::new(),
            password: Zeroizing::new(String::new()),
        };
        let back = decode_handoff(&encode_handoff(&empty)).unwrap();
        assert!(back.domain.is_empty() && back.password.is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_becomes_non_dumpable() {
        // This test process stays so: nothing in the tests reads another's /proc files.
        forbid_inspection();
        assert_eq!(
            rustix::process::dumpable_behavior().unwrap(),
            rustix::process::DumpableBehavior::NotDumpable
        );
    }
}
