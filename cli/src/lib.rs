//! Shared code of the `smbcp` and `smbctl` binaries: URLs, credentials, connecting, and
//! turning errors into one clear line.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod auth_args;
pub mod channel_args;
mod chunk_read;
pub mod copy;
pub mod generate;
pub mod glob;
mod hashing;
pub mod in_flight;
mod local_dest;
pub mod location;
#[cfg(unix)]
pub mod mount_status;
mod name_clash;
pub mod on_server;
mod plan;
mod preserve;
mod progress;
mod resume;
pub mod security_args;
pub mod show;
mod small_file;
mod source_change;
pub mod status;
mod transfer;
mod window;

use smb3_client::{Client, ClientConfig, Error, KeyLog, NtStatus, Password, UserCredentials};
use zeroize::Zeroizing;

pub use location::{Location, RemotePath};

/// Exit code: everything worked.
pub const EXIT_OK: i32 = 0;
/// Exit code: some files failed (each listed on stderr).
pub const EXIT_SOME_FAILED: i32 = 1;
/// Exit code: usage or configuration error.
pub const EXIT_USAGE: i32 = 2;

/// Library logs on stderr, only when `RUST_LOG` asks for them (e.g.
/// `RUST_LOG=smb3_client=info`): the channels lost, requests replayed, sessions set up again.
/// Without it the tools print only their own lines. Whatever `RUST_LOG` says, nothing that
/// would write a secret gets through ([`without_secrets`]).
pub fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .with_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_filter(tracing_subscriber::filter::filter_fn(without_secrets));
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// Crates that log secrets below `info`: at debug and trace the security package (sspi
/// 0.23) writes the NTLM AUTHENTICATE message (crackable offline), Kerberos tickets, the
/// ticket's session key and the SMB session key; the picky crates are its Kerberos codecs.
pub const SECRET_LOGGING_TARGETS: &[&str] = &["sspi", "picky", "picky_krb", "picky_asn1"];

/// Whether a log line or span may be written: nothing below `info` from the targets of
/// [`SECRET_LOGGING_TARGETS`], whatever `RUST_LOG` asks, a more specific directive such as
/// `sspi::ntlm=trace` included. Use it as a filter next to the `RUST_LOG` one.
pub fn without_secrets(meta: &tracing::Metadata<'_>) -> bool {
    let target = meta.target();
    let secret = SECRET_LOGGING_TARGETS.iter().any(|t| {
        target
            .strip_prefix(t)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    });
    !secret || *meta.level() <= tracing::Level::INFO
}

/// Credentials from, in order: the URL's user, `--user`, `SMB_USER`; password from
/// `SMB_PASSWORD` or a `--credentials` file (mount.cifs format). Never from argv.
pub fn credentials(
    remote: &RemotePath,
    user_flag: Option<&str>,
    credentials_file: Option<&std::path::Path>,
) -> Result<UserCredentials, String> {
    let mut user = remote
        .user
        .clone()
        .or_else(|| user_flag.map(str::to_string));
    let mut domain = remote.domain.clone();
    let mut password: Option<Password> = None;
    if let Some(path) = credentials_file {
        let text = read_private_file(path)?;
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            match k.trim() {
                "username" | "user" => user = user.or_else(|| Some(v.trim().to_string())),
                "password" | "pass" => password = Some(v.trim_end_matches(['\r', '\n']).into()),
                "domain" | "workgroup" => domain = domain.or_else(|| Some(v.trim().to_string())),
                _ => {}
            }
        }
    }
    let user = user.or_else(|| std::env::var("SMB_USER").ok()).ok_or(
        "no user name: put it in the URL (smb://USER@HOST/...), or use --user or SMB_USER",
    )?;
    // DOMAIN\user and user@REALM forms are split here so sspi gets them apart.
    let (user, domain) = match (user.split_once(['\\', ';']), domain) {
        (Some((d, u)), None) => (u.to_string(), Some(d.to_string())),
        (_, d) => (user, d),
    };
    let domain = domain
        .or_else(|| std::env::var("SMB_DOMAIN").ok())
        .unwrap_or_default();
    let password = match password.or_else(|| std::env::var("SMB_PASSWORD").ok().map(Password::from))
    {
        Some(p) => p,
        None => {
            let whom = if domain.is_empty() {
                format!("{user}@{}", remote.host)
            } else {
                format!("{domain}\\{user}@{}", remote.host)
            };
            ask_password(&format!("Password for {whom}: "))?.ok_or(
                "no password: set SMB_PASSWORD or use --credentials FILE (or run on a \
                 terminal to be asked)",
            )?
        }
    };
    Ok(UserCredentials {
        user,
        domain,
        password,
    })
}

/// Ask for the password on the terminal, as smbclient and mount.cifs do, without echoing
/// it: only when standard input is a terminal (a job run from cron or a pipe fails at once
/// instead of waiting for an answer that never comes). `Ok(None)` without a terminal. The
/// bytes typed go straight into memory that is wiped.
pub fn ask_password(prompt: &str) -> Result<Option<Password>, String> {
    use rustix::termios::{tcgetattr, tcsetattr, LocalModes, OptionalActions};
    use std::io::{IsTerminal as _, Read as _, Write as _};
    if !std::io::stdin().is_terminal() {
        return Ok(None);
    }
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return Ok(None);
    };
    let shown = |e: std::io::Error| format!("reading the password from the terminal: {e}");
    let saved = tcgetattr(&tty).map_err(|e| shown(e.into()))?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    quiet.local_modes.insert(LocalModes::ECHONL);
    tcsetattr(&tty, OptionalActions::Flush, &quiet).map_err(|e| shown(e.into()))?;
    let asked = (|| {
        tty.write_all(prompt.as_bytes())?;
        tty.flush()?;
        let mut typed = Zeroizing::new(Vec::with_capacity(128));
        let mut byte = [0u8; 1];
        while tty.read(&mut byte)? == 1 && byte[0] != b'\n' {
            typed.push(byte[0]);
        }
        Ok(typed)
    })();
    // Echo back on whatever happened.
    let restored = tcsetattr(&tty, OptionalActions::Now, &saved);
    let typed = asked.map_err(shown)?;
    restored.map_err(|e| shown(e.into()))?;
    let text = std::str::from_utf8(&typed[..])
        .map_err(|_| "the password typed is not UTF-8".to_string())?
        .trim_end_matches('\r');
    Ok(Some(Password::from(text)))
}

/// The contents of a credentials file, which must be private: owned by this user (or root)
/// and neither readable nor writable by group or others, the rule ssh applies to private
/// keys. A password anyone on the machine can read is refused rather than used with a
/// warning (mount.cifs only warns): the fix, `chmod 600`, is one command, and a warning in
/// a nightly job's log is read by nobody. The text is wiped from memory when dropped.
pub fn read_private_file(path: &std::path::Path) -> Result<Zeroizing<String>, String> {
    use std::io::Read as _;
    let shown = path.display();
    let mut file = std::fs::File::open(path)
        .map_err(|e| format!("{shown}: cannot read credentials file: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let md = file
            .metadata()
            .map_err(|e| format!("{shown}: cannot read credentials file: {e}"))?;
        let me = rustix::process::geteuid().as_raw();
        if md.uid() != me && md.uid() != 0 {
            return Err(format!(
                "{shown}: credentials file belongs to uid {}, not to this user (uid {me}) or \
                 root: refused",
                md.uid()
            ));
        }
        if md.mode() & 0o077 != 0 {
            return Err(format!(
                "{shown}: credentials file is open to group or others (mode {:04o}): \
                 refused; make it private with: chmod 600 {shown}",
                md.mode() & 0o7777
            ));
        }
    }
    let mut text = Zeroizing::new(String::new());
    file.read_to_string(&mut text)
        .map_err(|e| format!("{shown}: cannot read credentials file: {e}"))?;
    Ok(text)
}

/// The environment variable naming a file to append session keys to, for reading a packet
/// capture of the session (see `smb3_client::KeyLog`).
pub const KEY_LOG_ENV: &str = "SMB_KEYLOGFILE";

/// Connect and authenticate, with an error line that names the server. With
/// `SMB_KEYLOGFILE` set, the session's keys are appended to that file.
pub async fn connect(
    remote: &RemotePath,
    creds: &UserCredentials,
    mut config: ClientConfig,
) -> Result<Client, String> {
    if let Some(path) = std::env::var_os(KEY_LOG_ENV).filter(|p| !p.is_empty()) {
        let path = std::path::PathBuf::from(path);
        let log = KeyLog::append_to(&path)
            .map_err(|e| format!("{KEY_LOG_ENV}={}: {e}", path.display()))?;
        config.key_log = Some(log);
    }
    Client::connect(&remote.server(), creds, config)
        .await
        .map_err(|e| format!("{}: {}", remote.server(), describe(&e)))
}

/// One clear phrase for an error, NTSTATUS in words.
pub fn describe(e: &Error) -> String {
    match e {
        Error::Status {
            status: NtStatus::LOGON_FAILURE,
            ..
        } => "logon failure: wrong user name or password (LOGON_FAILURE)".into(),
        Error::Status {
            status: NtStatus::BAD_NETWORK_NAME,
            ..
        } => "no such share (BAD_NETWORK_NAME)".into(),
        Error::Status { status, .. } => status.to_string(),
        Error::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                "connection refused (is an SMB server listening on that port?)".into()
            }
            _ => source.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Layer as _;

    /// Whether logging at `level` is on for an sspi target (or another) under
    /// `RUST_LOG=rust_log`, filtered as `init_logging` does.
    fn enabled(rust_log: &str, sspi: bool, level: Level) -> bool {
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(tracing_subscriber::EnvFilter::new(rust_log))
            .with_filter(tracing_subscriber::filter::filter_fn(without_secrets));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || match (sspi, level) {
            (true, Level::TRACE) => tracing::enabled!(target: "sspi::ntlm", Level::TRACE),
            (true, Level::DEBUG) => tracing::enabled!(target: "sspi", Level::DEBUG),
            (true, _) => tracing::enabled!(target: "sspi::negotiate", Level::INFO),
            (false, _) => tracing::enabled!(target: "smb3_client::channel", Level::TRACE),
        })
    }

    #[test]
    fn a_credentials_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("smbcp-creds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("creds");
        std::fs::write(&path, "username=alice\npassword=s3cret\n").unwrap();
        for loose in [0o644, 0o640, 0o604, 0o660, 0o602] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(loose)).unwrap();
            let e = read_private_file(&path).unwrap_err();
            assert!(
                e.contains("chmod 600") && !e.contains("s3cret"),
                "{loose:o}: {e}"
            );
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_private_file(&path).unwrap().contains("s3cret"));
        // Another user's file, however private, is not this user's password.
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&path, Some(12345), None).unwrap();
            let e = read_private_file(&path).unwrap_err();
            assert!(e.contains("belongs to uid 12345"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_log_level_lets_the_security_package_write_secrets() {
        for rust_log in [
            "trace",
            "sspi=trace",
            "trace,sspi=trace",
            "sspi::ntlm=trace",
        ] {
            assert!(!enabled(rust_log, true, Level::TRACE), "{rust_log}");
            assert!(!enabled(rust_log, true, Level::DEBUG), "{rust_log}");
        }
        assert!(enabled("trace", true, Level::INFO));
        assert!(
            enabled("trace", false, Level::TRACE),
            "the rest still traces"
        );
        let sspi_like = tracing::Level::TRACE;
        assert!(
            sspi_like > Level::INFO,
            "levels order from error up to trace"
        );
    }
}
