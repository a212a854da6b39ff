//! Shared code of the `smbcp` and `smbctl` binaries: URLs, credentials, connecting, and
//! turning errors into one clear line.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod auth_args;
pub mod channel_args;
mod chunk_read;
pub mod copy;
pub mod glob;
mod hashing;
pub mod in_flight;
pub mod location;
#[cfg(unix)]
pub mod mount_status;
pub mod on_server;
mod plan;
mod preserve;
mod progress;
mod resume;
mod small_file;
pub mod status;
mod transfer;
mod window;

use smb3_client::{Client, ClientConfig, Error, KeyLog, NtStatus, UserCredentials};

pub use location::{Location, RemotePath};

/// Exit code: everything worked.
pub const EXIT_OK: i32 = 0;
/// Exit code: some files failed (each listed on stderr).
pub const EXIT_SOME_FAILED: i32 = 1;
/// Exit code: usage or configuration error.
pub const EXIT_USAGE: i32 = 2;

/// Library logs on stderr, only when `RUST_LOG` asks for them (e.g.
/// `RUST_LOG=smb3_client=info`): the channels lost, requests replayed, sessions set up again.
/// Without it the tools print only their own lines.
pub fn init_logging() {
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    let filter = tracing_subscriber::EnvFilter::from_default_env();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
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
    let mut password = None;
    if let Some(path) = credentials_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read credentials file: {e}", path.display()))?;
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            match k.trim() {
                "username" | "user" => user = user.or_else(|| Some(v.trim().to_string())),
                "password" | "pass" => {
                    password = Some(v.trim_end_matches(['\r', '\n']).to_string())
                }
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
    let password = password
        .or_else(|| std::env::var("SMB_PASSWORD").ok())
        .ok_or("no password: set SMB_PASSWORD or use --credentials FILE")?;
    Ok(UserCredentials {
        user,
        domain,
        password,
    })
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
