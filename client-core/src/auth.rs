//! Authentication: SPNEGO with NTLMv2 or Kerberos-with-a-password through the `sspi` crate,
//! or Kerberos from the user's ticket cache or a keytab through the system's GSS-API
//! ([`gss`]). [`mechanism`] chooses.
//!
//! SMB2 SESSION_SETUP just carries opaque GSS tokens; this module turns the server's tokens
//! into the client's next token and, at the end, yields the session key that signing and
//! encryption keys are derived from (MS-SMB2 3.2.5.3.1). For Kerberos that key is the one the
//! AP exchange settled on (the acceptor's subkey from the AP-REP when the server sends one, as
//! Samba and Windows do); it is used exactly like NTLM's: its first 16 bytes for the SMB 3.x
//! KDF, all of it for the AES-256 ciphers (MS-SMB2 3.2.5.3.1, Session.FullSessionKey).

mod gss;
mod kdc;

use std::time::Duration;

use bytes::Bytes;

use sspi::ntlm::NtlmConfig;
use sspi::{
    AuthIdentity, BufferType, ClientRequestFlags, CredentialUse, Credentials, DataRepresentation,
    ErrorKind, KdcResolution, KerberosConfig, Negotiate, NegotiateConfig, SecurityBuffer,
    SecurityStatus, Sspi, SspiImpl, Username,
};

use zeroize::Zeroizing;

use crate::config::{Auth, ClientConfig};
use crate::error::{AuthDetail, AuthFailure, ConfigError, Error, KerberosHint, Result};
use crate::password::{KeptSecret, Password};

pub use self::gss::{kerberos_ticket, KerberosTicket};
use self::gss::{GssAuthenticator, GssCredential};
use self::kdc::KdcTransport;

/// How a session authenticates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mechanism {
    /// NTLMv2 with the password (sspi).
    Ntlm,
    /// Kerberos with the password: sspi asks the KDC for a TGT (the realm is configured).
    KerberosPassword,
    /// Kerberos with the tickets of a cache or a keytab (the system's GSS-API).
    KerberosTickets,
}

/// The mechanism for `config` and credentials with or without a password. Secure by default
/// and never a silent downgrade: a caller who gave no password gets Kerberos (or a clear
/// "no ticket: run kinit"), not an NTLM attempt with an empty password; a guest session
/// (which has no password either) is only tried when the caller allows guests.
pub(crate) fn mechanism(config: &ClientConfig, has_password: bool) -> Mechanism {
    let tickets_named = config.kerberos_ccache.is_some() || config.kerberos_keytab.is_some();
    match config.auth {
        Auth::Ntlm => Mechanism::Ntlm,
        Auth::Kerberos if has_password && config.kerberos_realm.is_some() && !tickets_named => {
            Mechanism::KerberosPassword
        }
        Auth::Kerberos => Mechanism::KerberosTickets,
        Auth::Auto if tickets_named => Mechanism::KerberosTickets,
        Auth::Auto if has_password || config.allow_guest => {
            if config.kerberos_realm.is_some() {
                Mechanism::KerberosPassword
            } else {
                Mechanism::Ntlm
            }
        }
        Auth::Auto => Mechanism::KerberosTickets,
    }
}

/// How a session authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthMechanism {
    /// Kerberos (a ticket from a cache or keytab, or one asked for with the password).
    Kerberos,
    /// NTLMv2.
    Ntlm,
    /// The server mapped the user to its guest account (allowed by `allow_guest` only).
    Guest,
    /// An anonymous (null) session.
    Anonymous,
}

impl std::fmt::Display for AuthMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthMechanism::Kerberos => "Kerberos",
            AuthMechanism::Ntlm => "NTLMv2",
            AuthMechanism::Guest => "guest",
            AuthMechanism::Anonymous => "anonymous",
        })
    }
}

/// User name, domain and password. NTLM uses all three; Kerberos asks the KDC for
/// `user@REALM` with the password, the realm coming from `ClientConfig::kerberos_realm`.
/// The password is wiped from memory once the last copy is dropped; a session keeps only
/// what it needs to authenticate channels and reconnects (for NTLM the NT hash, not the
/// password: see [`Password`]).
#[derive(Clone, Debug)]
pub struct UserCredentials {
    /// Account name.
    pub user: String,
    /// NetBIOS domain or workgroup; empty means the server's own.
    pub domain: String,
    /// Password (`"secret".into()`).
    pub password: Password,
}

/// What a session keeps of the caller's credentials to authenticate again: the user, the
/// domain and, per mechanism, the least secret that works ([`KeptSecret`]).
#[derive(Clone, Debug)]
pub(crate) struct SessionCredentials {
    pub(crate) user: String,
    pub(crate) domain: String,
    secret: KeptSecret,
    /// The Kerberos credentials when the session uses a ticket cache or keytab
    /// ([`Mechanism::KerberosTickets`]); shared by every exchange of the session.
    gss: Option<GssCredential>,
}

impl SessionCredentials {
    /// Keep of `creds` what sessions with `config` need: the NT hash for NTLM, the password
    /// when Kerberos is configured (with or without the NTLM fallback).
    pub(crate) fn keep(creds: &UserCredentials, config: &ClientConfig) -> SessionCredentials {
        let secret = if config.kerberos_realm.is_some() {
            KeptSecret::Password(creds.password.clone())
        } else {
            KeptSecret::NtHash(creds.password.nt_hash())
        };
        SessionCredentials {
            user: creds.user.clone(),
            domain: creds.domain.clone(),
            secret,
            gss: None,
        }
    }

    /// What a new session with `config` keeps: for [`Mechanism::KerberosTickets`] the
    /// acquired Kerberos credentials (failing at once when there is no valid ticket), else
    /// as [`SessionCredentials::keep`].
    pub(crate) async fn for_session(
        creds: &UserCredentials,
        config: &ClientConfig,
    ) -> Result<SessionCredentials> {
        let has_password = !creds.password.expose().is_empty();
        let mut kept = SessionCredentials::keep(creds, config);
        if mechanism(config, has_password) == Mechanism::KerberosTickets {
            let gss = GssCredential::acquire(config).await?;
            // Messages about the session (guest mapping, ...) name the principal.
            if kept.user.is_empty() {
                kept.user = gss.principal.clone();
            }
            kept.gss = Some(gss);
        }
        Ok(kept)
    }

    /// Where the session's Kerberos tickets come from and how long the ticket-granting
    /// ticket has left, when they come from a cache or keytab (see [`GssCredential`]).
    pub(crate) fn tickets(&self) -> Option<(String, Option<std::time::Duration>)> {
        self.gss
            .as_ref()
            .map(|g| (g.from().to_string(), g.remaining()))
    }

    /// The secret as sspi takes it in a password field: for NTLM always the NT hash in
    /// sspi's `$NTLM$:` form, so that no password is ever mistaken for one.
    fn ntlm_password(&self) -> Zeroizing<String> {
        match &self.secret {
            KeptSecret::NtHash(h) => h.sspi_password(),
            KeptSecret::Password(p) => p.nt_hash().sspi_password(),
        }
    }

    fn kerberos_password(&self) -> Result<&str> {
        match &self.secret {
            KeptSecret::Password(p) => Ok(p.expose()),
            KeptSecret::NtHash(_) => Err(Error::ApiMisuse(
                "Kerberos needs the password, but the session kept only an NT hash",
            )),
        }
    }
}

/// What a Kerberos exchange needs, checked and normalised from the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KerberosSettings {
    /// Upper-case realm (Kerberos realms are case-sensitive; AD realms are upper case).
    realm: String,
    /// `tcp://host:port` / `udp://host:port`, or `None` for sspi's own lookup.
    kdc_url: Option<String>,
    /// `cifs/<host>` (MS-SMB2 3.2.4.2.3: the SPN is "cifs/" and the server's name).
    service_principal: String,
    ntlm_fallback: bool,
    /// Bound on each KDC connect, write and read.
    timeout: Duration,
}

impl KerberosSettings {
    /// The Kerberos settings for a session with `server_name`, or `None` when the configuration
    /// asks for NTLM. Errors name the setting that is wrong.
    pub(crate) fn from_config(
        config: &ClientConfig,
        server_name: &str,
    ) -> Result<Option<KerberosSettings>> {
        let Some(realm) = config.kerberos_realm.as_deref() else {
            return Ok(None);
        };
        let bad = |name, reason| Err(Error::Config(ConfigError::Setting { name, reason }));
        let realm = realm.trim();
        if realm.is_empty() || realm.contains(['/', '@', ' ']) {
            return bad("kerberos_realm", "a realm like EXAMPLE.COM");
        }
        let kdc_url = match config.kerberos_kdc.as_deref() {
            None => None,
            Some(kdc) => match kdc::kdc_url(kdc) {
                Some(url) => Some(url),
                None => {
                    return bad(
                        "kerberos_kdc",
                        "host, host:port, tcp://host:port or udp://host:port",
                    )
                }
            },
        };
        let host = service_host(config, server_name)?;
        Ok(Some(KerberosSettings {
            realm: realm.to_ascii_uppercase(),
            kdc_url,
            service_principal: format!("cifs/{}", host.to_ascii_lowercase()),
            ntlm_fallback: config.ntlm_fallback,
            timeout: config.connect_timeout,
        }))
    }
}

/// The host name of the service principal `cifs/<host>`: the configured one, else the name
/// the server was reached by. A ticket is issued for a name the KDC knows, never for a bare
/// address (MIT's `rdns = false`: no reverse lookup is made to guess one), so an address
/// without `kerberos_service_host` is a configuration error that says so.
fn service_host(config: &ClientConfig, server_name: &str) -> Result<String> {
    let host = config
        .kerberos_service_host
        .as_deref()
        .unwrap_or(server_name)
        .trim();
    let unbracketed = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || unbracketed.parse::<std::net::IpAddr>().is_ok() {
        return Err(Error::Config(ConfigError::Setting {
            name: "kerberos_service_host",
            reason: "Kerberos needs the server's host name (cifs/<name>), not an address",
        }));
    }
    Ok(host.to_ascii_lowercase())
}

/// The account as the KDC knows it: `user` in `realm`. A `user@REALM` name keeps its own realm.
fn kerberos_account(user: &str, realm: &str) -> (String, String) {
    match user.rsplit_once('@') {
        Some((account, suffix)) if !account.is_empty() && !suffix.is_empty() => {
            (account.to_string(), suffix.to_ascii_uppercase())
        }
        _ => (user.to_string(), realm.to_string()),
    }
}

/// The principal and KDC of a Kerberos exchange.
struct KerberosWho {
    principal: String,
    kdc_url: Option<String>,
}

/// One authentication exchange in progress.
pub(crate) enum Authenticator {
    /// NTLM or Kerberos with a password, through sspi.
    Sspi(Box<SspiAuthenticator>),
    /// Kerberos with a ticket cache or keytab, through the system's GSS-API.
    Gss(Box<GssAuthenticator>),
}

impl Authenticator {
    /// Start the exchange the configuration and the kept credentials ask for (see
    /// [`mechanism`]).
    pub(crate) fn for_config(
        creds: &SessionCredentials,
        server: &str,
        config: &ClientConfig,
    ) -> Result<Authenticator> {
        match &creds.gss {
            Some(gss) => {
                let host = service_host(config, server)?;
                Ok(Authenticator::Gss(Box::new(GssAuthenticator::new(
                    gss,
                    &host,
                    config.kerberos_ticket_lifetime,
                )?)))
            }
            None => Ok(Authenticator::Sspi(Box::new(
                SspiAuthenticator::for_config(creds, server, config)?,
            ))),
        }
    }

    /// [`SspiAuthenticator::step_off_runtime`], or a GSS-API step on the blocking pool (the
    /// library may ask the KDC for a service ticket, with its own timeouts from krb5.conf).
    pub(crate) async fn step_off_runtime(
        self,
        server_token: Bytes,
    ) -> Result<(Self, Option<Vec<u8>>)> {
        match self {
            Authenticator::Sspi(a) => {
                let (a, token) = a.step_off_runtime(server_token).await?;
                Ok((Authenticator::Sspi(a), token))
            }
            Authenticator::Gss(mut a) => {
                let (a, token) = tokio::task::spawn_blocking(move || {
                    let token = a.step(&server_token);
                    (a, token)
                })
                .await
                .map_err(|e| Error::Auth {
                    kind: AuthFailure::SecurityPackage,
                    detail: AuthDetail::ExchangeStopped(Box::new(e)),
                })?;
                Ok((Authenticator::Gss(a), token?))
            }
        }
    }

    /// Whether the client side is complete.
    pub(crate) fn is_complete(&self) -> bool {
        match self {
            Authenticator::Sspi(a) => a.is_complete(),
            Authenticator::Gss(a) => a.is_complete(),
        }
    }

    /// Whether the exchange is a Kerberos one (which then must end in mutual
    /// authentication).
    pub(crate) fn uses_kerberos(&self) -> bool {
        match self {
            Authenticator::Sspi(a) => a.uses_kerberos(),
            Authenticator::Gss(_) => true,
        }
    }

    /// The session key once complete, wiped on drop.
    pub(crate) fn session_key(&self) -> Result<Zeroizing<Vec<u8>>> {
        match self {
            Authenticator::Sspi(a) => a.session_key(),
            Authenticator::Gss(a) => {
                tracing::trace!(from = a.from(), "Kerberos session key from GSS-API");
                a.session_key()
            }
        }
    }
}

/// One sspi exchange in progress.
pub(crate) struct SspiAuthenticator {
    ctx: Negotiate,
    creds: Option<sspi::CredentialsBuffers>,
    target: String,
    /// Carries KDC requests while a Kerberos exchange is under way.
    kdc: KdcTransport,
    /// Set for Kerberos: who is asking which KDC, for error messages.
    kerberos: Option<KerberosWho>,
    rounds: u32,
    done: bool,
}

fn sspi_err(e: sspi::Error) -> Error {
    Error::Auth {
        kind: AuthFailure::SecurityPackage,
        detail: AuthDetail::SecurityPackage(Box::new(e)),
    }
}

/// sspi's Kerberos errors say what the KDC said; add who asked and the likely cause.
fn kerberos_err(e: sspi::Error, principal: &str, kdc: Option<&str>) -> Error {
    let hint = match e.error_type {
        // KDC_ERR_PREAUTH_FAILED: the encrypted timestamp did not decrypt with the user's key.
        ErrorKind::KdcInvalidRequest if e.description.contains("pre-authentication") => {
            Some(KerberosHint::WrongPassword)
        }
        ErrorKind::NoAuthenticatingAuthority => Some(KerberosHint::KdcUnreachable),
        ErrorKind::TimeSkew => Some(KerberosHint::ClockSkew),
        _ => None,
    };
    Error::Auth {
        kind: AuthFailure::SecurityPackage,
        detail: AuthDetail::Kerberos {
            principal: principal.to_string(),
            kdc: kdc.map(str::to_string),
            hint,
            source: Box::new(e),
        },
    }
}

fn identity(user: &str, domain: Option<&str>, password: &str) -> Result<AuthIdentity> {
    let username = Username::new(user, domain).map_err(|e| Error::Auth {
        kind: AuthFailure::SecurityPackage,
        detail: AuthDetail::InvalidUserName(Box::new(e)),
    })?;
    Ok(AuthIdentity {
        username,
        password: password.to_string().into(),
    })
}

impl SspiAuthenticator {
    /// Start the exchange the configuration asks for: NTLMv2 when [`Auth::Ntlm`] is chosen,
    /// Kerberos when a realm is set (see [`KerberosSettings::from_config`]), NTLMv2
    /// otherwise.
    pub(crate) fn for_config(
        creds: &SessionCredentials,
        server: &str,
        config: &ClientConfig,
    ) -> Result<SspiAuthenticator> {
        if config.auth == Auth::Ntlm {
            return SspiAuthenticator::ntlm(creds, server);
        }
        match KerberosSettings::from_config(config, server)? {
            Some(settings) => SspiAuthenticator::kerberos(creds, &settings),
            None => SspiAuthenticator::ntlm(creds, server),
        }
    }

    /// Start a Kerberos-over-SPNEGO exchange: the mechanism list offers MS-KRB5 and KRB5 (and
    /// NTLM only when `settings` allow the fallback), the first token carries the AP-REQ for
    /// `cifs/<host>`.
    pub(crate) fn kerberos(
        creds: &SessionCredentials,
        settings: &KerberosSettings,
    ) -> Result<SspiAuthenticator> {
        let workstation = local_host_name();
        let kdc_resolution = KdcResolution::KdcUrl(match settings.kdc_url.as_deref() {
            Some(url) => Some(url.parse().map_err(|_| {
                Error::Config(ConfigError::Setting {
                    name: "kerberos_kdc",
                    reason: "not a valid URL",
                })
            })?),
            None => None,
        });
        let kerberos = KerberosConfig {
            kdc_resolution,
            client_computer_name: workstation.clone(),
        };
        let packages = if settings.ntlm_fallback {
            "kerberos,ntlm"
        } else {
            "kerberos"
        };
        let config =
            NegotiateConfig::new(Box::new(kerberos), Some(packages.to_string()), workstation);
        let mut ctx = Negotiate::new_client(config).map_err(sspi_err)?;
        let (account, realm) = kerberos_account(&creds.user, &settings.realm);
        // The realm goes in as the domain: sspi takes the client realm (and the salt of the
        // password key, realm + account name for AD users) from it.
        let identity = identity(&account, Some(&realm), creds.kerberos_password()?)?;
        let principal = format!("{account}@{realm}");
        let acquired = ctx
            .acquire_credentials_handle()
            .with_credential_use(CredentialUse::Outbound)
            .with_auth_data(&Credentials::AuthIdentity(identity))
            .execute(&mut ctx)
            .map_err(|e| kerberos_err(e, &principal, settings.kdc_url.as_deref()))?;
        Ok(SspiAuthenticator {
            ctx,
            creds: acquired.credentials_handle,
            target: settings.service_principal.clone(),
            kdc: KdcTransport {
                timeout: settings.timeout,
            },
            kerberos: Some(KerberosWho {
                principal,
                kdc_url: settings.kdc_url.clone(),
            }),
            rounds: 0,
            done: false,
        })
    }

    /// Start an NTLM-over-SPNEGO exchange for `creds` against `server` (host name or address).
    pub(crate) fn ntlm(creds: &SessionCredentials, server: &str) -> Result<SspiAuthenticator> {
        let workstation = local_host_name();
        let config = NegotiateConfig::new(
            Box::new(NtlmConfig::new(workstation.clone())),
            Some("ntlm".to_string()),
            workstation,
        );
        let mut ctx = Negotiate::new_client(config).map_err(sspi_err)?;
        let domain = (!creds.domain.is_empty()).then_some(creds.domain.as_str());
        let identity = identity(&creds.user, domain, &creds.ntlm_password())?;
        let acquired = ctx
            .acquire_credentials_handle()
            .with_credential_use(CredentialUse::Outbound)
            .with_auth_data(&Credentials::AuthIdentity(identity))
            .execute(&mut ctx)
            .map_err(sspi_err)?;
        Ok(SspiAuthenticator {
            ctx,
            creds: acquired.credentials_handle,
            target: format!("cifs/{server}"),
            kdc: KdcTransport {
                timeout: Duration::from_secs(10),
            },
            kerberos: None,
            rounds: 0,
            done: false,
        })
    }

    /// Feed the server's token (empty for the first call) and get the next token to send.
    /// Returns `None` once the exchange is complete on the client side.
    pub(crate) fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        self.rounds += 1;
        if self.rounds > 8 {
            return Err(Error::Auth {
                kind: AuthFailure::TooManyRounds,
                detail: AuthDetail::Rounds {
                    rounds: self.rounds,
                },
            });
        }
        let mut input = vec![SecurityBuffer::new(
            server_token.to_vec(),
            BufferType::Token,
        )];
        let mut output = vec![SecurityBuffer::new(Vec::new(), BufferType::Token)];
        let flags = ClientRequestFlags::MUTUAL_AUTH
            | ClientRequestFlags::INTEGRITY
            | ClientRequestFlags::CONFIDENTIALITY
            | ClientRequestFlags::ALLOCATE_MEMORY;
        let mut builder = self
            .ctx
            .initialize_security_context()
            .with_credentials_handle(&mut self.creds)
            .with_context_requirements(flags)
            .with_target_data_representation(DataRepresentation::Native)
            .with_target_name(&self.target)
            .with_output(&mut output);
        // sspi's Kerberos client wants an input buffer even on the first call (empty there).
        if !server_token.is_empty() || self.kerberos.is_some() {
            builder = builder.with_input(&mut input);
        }
        // The generator stops at every KDC request (Kerberos only); the transport answers it.
        let result = self
            .ctx
            .initialize_security_context_impl(&mut builder)
            .map_err(sspi_err)?
            .resolve_with_client(&self.kdc);
        let result = result.map_err(|e| match &self.kerberos {
            Some(who) => kerberos_err(e, &who.principal, who.kdc_url.as_deref()),
            None => sspi_err(e),
        })?;
        match result.status {
            SecurityStatus::CompleteNeeded | SecurityStatus::CompleteAndContinue => {
                self.ctx
                    .complete_auth_token(&mut output)
                    .map_err(sspi_err)?;
            }
            _ => {}
        }
        if !matches!(
            result.status,
            SecurityStatus::ContinueNeeded | SecurityStatus::CompleteAndContinue
        ) {
            self.done = true;
        }
        let token = std::mem::take(&mut output[0].buffer);
        Ok(if token.is_empty() { None } else { Some(token) })
    }

    /// [`Authenticator::step`] without holding up the async runtime. A Kerberos step may wait
    /// on the KDC over blocking sockets (up to the connect timeout for each KDC try), so it
    /// runs on tokio's blocking pool, the authenticator moving there and back; an NTLM step is
    /// a few microseconds of hashing and runs in place.
    pub(crate) async fn step_off_runtime(
        mut self: Box<Self>,
        server_token: Bytes,
    ) -> Result<(Box<Self>, Option<Vec<u8>>)> {
        if self.kerberos.is_none() {
            let token = self.step(&server_token)?;
            return Ok((self, token));
        }
        let (this, token) = tokio::task::spawn_blocking(move || {
            let token = self.step(&server_token);
            (self, token)
        })
        .await
        .map_err(|e| Error::Auth {
            kind: AuthFailure::SecurityPackage,
            detail: AuthDetail::ExchangeStopped(Box::new(e)),
        })?;
        Ok((this, token?))
    }

    /// Whether the client side is complete.
    pub(crate) fn is_complete(&self) -> bool {
        self.done
    }

    /// Whether the exchange is a Kerberos one (asked for, and not fallen back to NTLM).
    pub(crate) fn uses_kerberos(&self) -> bool {
        self.kerberos.is_some() && self.ctx.negotiated_protocol().is_kerberos()
    }

    /// The session key once complete (16 bytes for NTLM; Kerberos keys may be longer),
    /// wiped when dropped: the signing and encryption keys are derived from it and it is not
    /// kept.
    pub(crate) fn session_key(&self) -> Result<Zeroizing<Vec<u8>>> {
        let keys = self.ctx.query_context_session_key().map_err(sspi_err)?;
        Ok(Zeroizing::new(keys.session_key.as_ref().clone()))
    }
}

/// The NTLM workstation name (MS-NLMP 2.2.1.3 AUTHENTICATE_MESSAGE Workstation): this host's
/// name from uname(2), on every Unix (Linux, macOS, the BSDs) alike. Only its first DNS label
/// is sent: the field is the machine's NetBIOS-style name, and macOS's node name is often
/// `name.local`. Servers only log it, so an unknown name falls back to a fixed one.
fn local_host_name() -> String {
    #[cfg(unix)]
    let node = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    #[cfg(not(unix))]
    let node = String::new();
    workstation_name(&node)
}

/// The workstation name from a host name: its first label, or `SMB3CLIENT` when empty.
fn workstation_name(host: &str) -> String {
    let label = host.trim().split('.').next().unwrap_or("").trim();
    if label.is_empty() {
        "SMB3CLIENT".to_string()
    } else {
        label.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kerberos_config(realm: &str) -> ClientConfig {
        ClientConfig {
            kerberos_realm: Some(realm.to_string()),
            ..ClientConfig::default()
        }
    }

    #[test]
    fn workstation_name_is_the_first_label_of_the_host_name() {
        assert_eq!(workstation_name("build-box\n"), "build-box");
        assert_eq!(workstation_name("Alices-MacBook.local"), "Alices-MacBook");
        assert_eq!(workstation_name("nas.example.com"), "nas");
        assert_eq!(workstation_name(""), "SMB3CLIENT");
        assert_eq!(workstation_name(".local"), "SMB3CLIENT");
    }

    #[cfg(unix)]
    #[test]
    fn local_host_name_is_uname_s_node_name() {
        let node = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        assert_eq!(local_host_name(), workstation_name(&node));
        assert!(!local_host_name().is_empty());
    }

    #[test]
    fn the_mechanism_follows_password_and_config() {
        let mut c = ClientConfig::default();
        assert_eq!(mechanism(&c, true), Mechanism::Ntlm);
        // No password: the ticket cache, never NTLM with an empty password.
        assert_eq!(mechanism(&c, false), Mechanism::KerberosTickets);
        c.allow_guest = true;
        assert_eq!(
            mechanism(&c, false),
            Mechanism::Ntlm,
            "a guest has no password"
        );
        c.allow_guest = false;
        c.kerberos_realm = Some("TESTBED.LAN".into());
        assert_eq!(mechanism(&c, true), Mechanism::KerberosPassword);
        assert_eq!(mechanism(&c, false), Mechanism::KerberosTickets);
        // A cache or keytab named: the tickets, even with a password.
        c.kerberos_keytab = Some("/k".into());
        assert_eq!(mechanism(&c, true), Mechanism::KerberosTickets);
        c.auth = Auth::Ntlm;
        assert_eq!(mechanism(&c, true), Mechanism::Ntlm);
        assert_eq!(mechanism(&c, false), Mechanism::Ntlm);
        c.auth = Auth::Kerberos;
        assert_eq!(mechanism(&c, true), Mechanism::KerberosTickets);
        c.kerberos_keytab = None;
        assert_eq!(mechanism(&c, true), Mechanism::KerberosPassword);
        c.kerberos_realm = None;
        assert_eq!(mechanism(&c, true), Mechanism::KerberosTickets);
    }

    #[test]
    fn the_service_host_must_be_a_name() {
        let c = ClientConfig::default();
        assert_eq!(
            service_host(&c, "NAS.Corp.Example").unwrap(),
            "nas.corp.example"
        );
        for addr in ["10.1.1.1", "[fe80::1]", "::1", " "] {
            assert!(
                matches!(
                    service_host(&c, addr),
                    Err(Error::Config(ConfigError::Setting {
                        name: "kerberos_service_host",
                        ..
                    }))
                ),
                "{addr}"
            );
        }
        let c = ClientConfig {
            kerberos_service_host: Some("dc.testbed.lan".into()),
            ..ClientConfig::default()
        };
        assert_eq!(service_host(&c, "10.1.1.1").unwrap(), "dc.testbed.lan");
    }

    #[test]
    fn ntlm_unless_a_realm_is_set() {
        assert_eq!(
            KerberosSettings::from_config(&ClientConfig::default(), "nas").unwrap(),
            None
        );
    }

    #[test]
    fn kerberos_settings_from_config() {
        let mut c = kerberos_config("testbed.lan");
        c.kerberos_kdc = Some("10.1.1.1".into());
        c.connect_timeout = Duration::from_secs(3);
        let s = KerberosSettings::from_config(&c, "DC.testbed.lan")
            .unwrap()
            .unwrap();
        assert_eq!(
            s,
            KerberosSettings {
                realm: "TESTBED.LAN".into(),
                kdc_url: Some("tcp://10.1.1.1:88".into()),
                service_principal: "cifs/dc.testbed.lan".into(),
                ntlm_fallback: false,
                timeout: Duration::from_secs(3),
            }
        );
    }

    #[test]
    fn service_host_overrides_the_connect_name() {
        let mut c = kerberos_config("TESTBED.LAN");
        c.kerberos_service_host = Some("dc.testbed.lan".into());
        c.ntlm_fallback = true;
        let s = KerberosSettings::from_config(&c, "10.153.1.1")
            .unwrap()
            .unwrap();
        assert_eq!(s.service_principal, "cifs/dc.testbed.lan");
        assert!(s.ntlm_fallback);
        assert_eq!(s.kdc_url, None);
    }

    fn setting_error(c: &ClientConfig, server: &str) -> &'static str {
        match KerberosSettings::from_config(c, server) {
            Err(Error::Config(ConfigError::Setting { name, .. })) => name,
            other => panic!("expected a setting error, got {other:?}"),
        }
    }

    #[test]
    fn addresses_and_bad_settings_are_refused() {
        let c = kerberos_config("TESTBED.LAN");
        assert_eq!(setting_error(&c, "10.153.1.1"), "kerberos_service_host");
        assert_eq!(setting_error(&c, "[fe80::1]"), "kerberos_service_host");
        assert_eq!(setting_error(&c, "::1"), "kerberos_service_host");
        assert_eq!(setting_error(&kerberos_config(""), "dc"), "kerberos_realm");
        assert_eq!(
            setting_error(&kerberos_config("user@REALM"), "dc"),
            "kerberos_realm"
        );
        let mut c = kerberos_config("TESTBED.LAN");
        c.kerberos_kdc = Some("https://proxy/KdcProxy".into());
        assert_eq!(setting_error(&c, "dc"), "kerberos_kdc");
    }

    #[test]
    fn account_and_realm() {
        assert_eq!(
            kerberos_account("smbtest", "TESTBED.LAN"),
            ("smbtest".into(), "TESTBED.LAN".into())
        );
        assert_eq!(
            kerberos_account("alice@other.lan", "TESTBED.LAN"),
            ("alice".into(), "OTHER.LAN".into())
        );
        assert_eq!(
            kerberos_account("odd@", "TESTBED.LAN"),
            ("odd@".into(), "TESTBED.LAN".into())
        );
    }

    #[test]
    fn wrong_password_message_names_principal_and_cause() {
        let e = sspi::Error::new(
            ErrorKind::KdcInvalidRequest,
            "pre-authentication information was invalid",
        );
        let err = kerberos_err(e, "smbtest@TESTBED.LAN", Some("tcp://10.1.1.1:88"));
        match &err {
            Error::Auth {
                detail: detail @ AuthDetail::Kerberos { hint, .. },
                ..
            } => {
                assert_eq!(*hint, Some(KerberosHint::WrongPassword));
                // sspi's own error stays reachable, whole, as the source.
                let source = std::error::Error::source(detail).expect("a source");
                let sspi = source.downcast_ref::<sspi::Error>().expect("sspi's error");
                assert_eq!(sspi.error_type, ErrorKind::KdcInvalidRequest);
            }
            other => panic!("expected a Kerberos detail, got {other:?}"),
        }
        let msg = err.to_string();
        assert_eq!(
            msg,
            "authentication failed: security package error: Kerberos as smbtest@TESTBED.LAN via \
             tcp://10.1.1.1:88: KdcInvalidRequest: pre-authentication information was invalid \
             (wrong password?)"
        );
    }

    #[test]
    fn kerberos_authenticator_starts_without_network() {
        let mut c = kerberos_config("TESTBED.LAN");
        c.kerberos_kdc = Some("127.0.0.1:1".into());
        let creds = UserCredentials {
            user: "smbtest".into(),
            domain: "IGNORED".into(),
            password: "pw".into(),
        };
        let creds = SessionCredentials::keep(&creds, &c);
        let Authenticator::Sspi(auth) =
            Authenticator::for_config(&creds, "dc.testbed.lan", &c).unwrap()
        else {
            panic!("a password and a realm: Kerberos through sspi");
        };
        assert_eq!(auth.target, "cifs/dc.testbed.lan");
        let who = auth.kerberos.as_ref().unwrap();
        assert_eq!(who.principal, "smbtest@TESTBED.LAN");
        assert_eq!(who.kdc_url.as_deref(), Some("tcp://127.0.0.1:1"));
    }

    /// A KDC that takes the connection and never answers holds up only the authentication,
    /// not the runtime: on a single-threaded runtime a ticking task keeps running while the
    /// Kerberos step waits out its timeout.
    #[test]
    fn a_silent_kdc_does_not_stall_the_runtime() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = kerberos_config("TESTBED.LAN");
        c.kerberos_kdc = Some(silent.local_addr().unwrap().to_string());
        c.connect_timeout = Duration::from_millis(800);
        let creds = UserCredentials {
            user: "smbtest".into(),
            domain: String::new(),
            password: "pw".into(),
        };
        let creds = SessionCredentials::keep(&creds, &c);
        let auth = Authenticator::for_config(&creds, "dc.testbed.lan", &c).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = ticks.clone();
        let (result, waited) = rt.block_on(async move {
            let ticker = tokio::spawn(async move {
                for _ in 0..1000 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
            let started = std::time::Instant::now();
            let result = auth.step_off_runtime(Bytes::new()).await.map(|(_, t)| t);
            let waited = started.elapsed();
            ticker.abort();
            (result, waited)
        });
        drop(silent);
        let err = result.expect_err("a silent KDC cannot authenticate anyone");
        assert!(err.to_string().contains("Kerberos"), "{err}");
        assert!(
            waited >= Duration::from_millis(700),
            "gave up after {waited:?}"
        );
        // A stalled runtime would tick at most once; a free one every ~10 ms of the wait.
        let ticks = ticks.load(std::sync::atomic::Ordering::Relaxed);
        assert!(ticks >= 20, "only {ticks} ticks in {waited:?}");
    }
}
