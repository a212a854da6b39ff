//! From the command line to a session: the location, the credentials, the connection.

use smb3_client::credentials_file::CredentialsFile;
use smb3_client::location::{Location, LocationProblem, RemotePath};
use smb3_client::{Client, ClientConfig, KeyLog, Password, UserCredentials};
use zeroize::Zeroizing;

/// A location from the command line ([`Location::parse`]), its error as one line; a
/// password in a URL is refused with where the password goes instead.
pub fn parse_location(arg: &str) -> Result<Location, String> {
    Location::parse(arg).map_err(|e| match e.problem() {
        LocationProblem::PasswordInUrl => format!("{e}; use SMB_PASSWORD or --credentials"),
        _ => e.to_string(),
    })
}

/// Credentials from, in order: the URL's user, `--user`, `SMB_USER`; password from
/// `SMB_PASSWORD` or a `--credentials` file (mount.cifs format, see
/// [`smb3_client::credentials_file`]), else asked on the terminal. Never from argv.
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
        let file = CredentialsFile::read(path).map_err(|e| e.to_string())?;
        user = user.or(file.user);
        domain = domain.or(file.domain);
        password = file.password;
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
        .map_err(|e| format!("{}: {}", remote.server(), e.brief()))
}

/// The Kerberos settings the programs take (smbcp's `--kerberos-realm`, smbfuse's
/// `-o krb5_realm=`, ...); without a realm, NTLMv2 is used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KerberosOptions {
    /// The realm: Kerberos is used only with one.
    pub realm: Option<String>,
    /// The realm's KDC.
    pub kdc: Option<String>,
    /// The host name of the service principal `cifs/NAME`.
    pub spn_host: Option<String>,
    /// Fall back to NTLMv2 when the KDC cannot be reached.
    pub ntlm_fallback: bool,
}

impl KerberosOptions {
    /// Put the settings into `config`; details without a realm are refused, for the caller
    /// to word with its own option names.
    pub fn apply(&self, config: &mut ClientConfig) -> Result<(), RealmMissing> {
        let Some(realm) = &self.realm else {
            let details = self.kdc.is_some() || self.spn_host.is_some() || self.ntlm_fallback;
            return if details { Err(RealmMissing) } else { Ok(()) };
        };
        config.kerberos_realm = Some(realm.clone());
        config.kerberos_kdc = self.kdc.clone();
        config.kerberos_service_host = self.spn_host.clone();
        config.ntlm_fallback = self.ntlm_fallback;
        Ok(())
    }
}

/// [`KerberosOptions::apply`]: a KDC, service host or NTLM fallback was given without a
/// realm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealmMissing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_a_url_is_refused_with_where_it_goes() {
        let e = parse_location("smb://u:s3cret@h/s/x").unwrap_err();
        assert_eq!(
            e,
            "smb://u:<hidden>@h/s/x: invalid location: passwords are not accepted in URLs; \
             use SMB_PASSWORD or --credentials"
        );
        assert_eq!(
            parse_location("smb://h").unwrap_err(),
            "smb://h: invalid location: no share name"
        );
    }
}
