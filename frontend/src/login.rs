//! From the command line to a session: the location, the credentials, the connection.

use smb3_client::credentials_file::CredentialsFile;
use smb3_client::location::{Location, LocationProblem, RemotePath};
use smb3_client::{Auth, Client, ClientConfig, KeyLog, Password, UserCredentials};
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
/// [`smb3_client::credentials_file`]), else asked on the terminal. Never from argv. NTLM's
/// rules: see [`credentials_for`] for Kerberos without a password.
pub fn credentials(
    remote: &RemotePath,
    user_flag: Option<&str>,
    credentials_file: Option<&std::path::Path>,
) -> Result<UserCredentials, String> {
    let mut ntlm = ClientConfig::default();
    ntlm.auth = Auth::Ntlm;
    credentials_for(remote, user_flag, credentials_file, &ntlm)
}

/// [`credentials`] for a session with `config`: when no password is given (no
/// `SMB_PASSWORD`, none in the credentials file), Kerberos from the ticket cache or keytab
/// is used instead of asking for one if `config` asks for Kerberos ([`Auth::Kerberos`], a
/// cache or keytab named) or, with [`Auth::Auto`], if a valid ticket is there
/// ([`smb3_client::kerberos_ticket`]): the credentials then carry no password, and the user
/// name is optional (the ticket says who). Otherwise the terminal is asked, as before.
pub fn credentials_for(
    remote: &RemotePath,
    user_flag: Option<&str>,
    credentials_file: Option<&std::path::Path>,
    config: &ClientConfig,
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
    let user = user.or_else(|| std::env::var("SMB_USER").ok());
    let password = password.or_else(|| std::env::var("SMB_PASSWORD").ok().map(Password::from));
    // No password: a ticket instead of a question, when Kerberos is wanted or one is there.
    let mut no_ticket = None;
    if password.is_none() && config.auth != Auth::Ntlm {
        let named = config.auth == Auth::Kerberos
            || config.kerberos_ccache.is_some()
            || config.kerberos_keytab.is_some();
        let usable = named || {
            match smb3_client::kerberos_ticket(config) {
                Ok(_) => true,
                Err(e) => {
                    no_ticket = Some(e.brief().to_string());
                    false
                }
            }
        };
        if usable {
            let (user, domain) = split_domain(user.unwrap_or_default(), domain);
            return Ok(UserCredentials {
                user,
                domain,
                password: Password::from(""),
            });
        }
    }
    let Some(user) = user else {
        return Err(match no_ticket {
            Some(why) => format!(
                "no user name and no Kerberos ticket: put the user in the URL \
                 (smb://USER@HOST/...) or use --user or SMB_USER, or get a ticket ({why})"
            ),
            None => "no user name: put it in the URL (smb://USER@HOST/...), or use --user or \
                     SMB_USER"
                .to_string(),
        });
    };
    let (user, domain) = split_domain(user, domain);
    let password = match password {
        Some(p) => p,
        None => {
            let whom = if domain.is_empty() {
                format!("{user}@{}", remote.host)
            } else {
                format!("{domain}\\{user}@{}", remote.host)
            };
            match ask_password(&format!("Password for {whom}: "))? {
                Some(p) => p,
                None => {
                    return Err(match no_ticket {
                        Some(why) => format!(
                            "no password: set SMB_PASSWORD or use --credentials FILE, or get a \
                             Kerberos ticket ({why})"
                        ),
                        None => "no password: set SMB_PASSWORD or use --credentials FILE (or \
                                 run on a terminal to be asked)"
                            .to_string(),
                    })
                }
            }
        }
    };
    Ok(UserCredentials {
        user,
        domain,
        password,
    })
}

/// DOMAIN\user and DOMAIN;user forms are split here so sspi gets them apart; the domain
/// from `SMB_DOMAIN` when none is given.
fn split_domain(user: String, domain: Option<String>) -> (String, String) {
    let (user, domain) = match (user.split_once(['\\', ';']), domain) {
        (Some((d, u)), None) => (u.to_string(), Some(d.to_string())),
        (_, d) => (user, d),
    };
    let domain = domain
        .or_else(|| std::env::var("SMB_DOMAIN").ok())
        .unwrap_or_default();
    (user, domain)
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

/// The Kerberos settings the programs take (smbcp's `--kerberos-realm`, `--kerberos`,
/// `--keytab`, smbfuse's `-o krb5_realm=`, `sec=`, `keytab=`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KerberosOptions {
    /// Kerberos, NTLM, or (the default) Kerberos from a ticket when no password is given.
    pub auth: Auth,
    /// The credential cache to take tickets from (else `KRB5CCNAME` or the default).
    pub ccache: Option<String>,
    /// A client keytab to get tickets from.
    pub keytab: Option<std::path::PathBuf>,
    /// The client principal in the cache or keytab.
    pub principal: Option<String>,
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
    /// Put the settings into `config`; a KDC or NTLM fallback without a realm (which only
    /// the password path uses) is refused, for the caller to word with its own option names.
    pub fn apply(&self, config: &mut ClientConfig) -> Result<(), RealmMissing> {
        config.auth = self.auth;
        config.kerberos_ccache = self.ccache.clone();
        config.kerberos_keytab = self.keytab.clone();
        config.kerberos_principal = self.principal.clone();
        // The SPN's host name serves tickets from a cache as much as a password.
        config.kerberos_service_host = self.spn_host.clone();
        let Some(realm) = &self.realm else {
            let details = self.kdc.is_some() || self.ntlm_fallback;
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
