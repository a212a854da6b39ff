//! Kerberos without a password: tickets from the user's credential cache or a keytab, through
//! the system's GSS-API (`smb3-gss`, which loads MIT krb5 or GSS.framework at run time).
//!
//! The credential is acquired once per session and shared: the first SESSION_SETUP and every
//! channel binding (MS-SMB2 3.2.4.1.7, 3.2.5.3.3) each run a context of their own, so each
//! sends its own AP-REQ with a fresh authenticator (a replayed one would be refused), while a
//! keytab's TGT is fetched only once. The library finds the service ticket for `cifs/<host>`
//! in the cache or asks the KDC that krb5.conf (or DNS) names; nothing of that is configured
//! here.

use std::sync::Arc;

use smb3_gss::{CredStore, Credential, ErrorKind as GssKind};
use zeroize::Zeroizing;

use crate::config::ClientConfig;
use crate::error::{AuthDetail, AuthFailure, Error, KerberosHint, Result};

/// The session's Kerberos credentials, and what messages say about them.
#[derive(Clone, Debug)]
pub(crate) struct GssCredential {
    cred: Arc<Credential>,
    /// Where the tickets come from, in words.
    from: String,
    /// The client principal (`smbtest@TESTBED.LAN`).
    pub(crate) principal: String,
}

/// The credential store a configuration names: a cache, a keytab (tickets kept in memory),
/// a principal; all `None` means the environment's defaults.
pub(crate) fn store_of(config: &ClientConfig) -> CredStore {
    CredStore {
        ccache: config.kerberos_ccache.clone(),
        client_keytab: config
            .kerberos_keytab
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
        principal: config.kerberos_principal.clone(),
    }
}

/// Where the tickets of `store` come from, for messages: the cache or keytab named, else
/// what MIT would use (`KRB5CCNAME`, and `KRB5_CLIENT_KTNAME` when set).
pub(crate) fn describe(store: &CredStore) -> String {
    if let Some(kt) = &store.client_keytab {
        return format!("keytab {kt}");
    }
    if let Some(cc) = &store.ccache {
        return cc.clone();
    }
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let cache = env("KRB5CCNAME").unwrap_or_else(|| "the default credential cache".to_string());
    match env("KRB5_CLIENT_KTNAME") {
        Some(kt) => format!("{cache} or keytab {kt}"),
        None => cache,
    }
}

/// What the user is told to do about a GSS-API error.
fn hint(e: &smb3_gss::Error, store: &CredStore) -> Option<KerberosHint> {
    use smb3_gss::krb5_minor as m;
    match (e.kind, e.krb5_code.unwrap_or(0)) {
        (_, m::KT_NOTFOUND) => Some(KerberosHint::NotInKeytab),
        // With a keytab, "no credentials" means the keytab holds none for the principal.
        (GssKind::NoCredentials, _) if store.client_keytab.is_some() => {
            Some(KerberosHint::NotInKeytab)
        }
        (GssKind::NoCredentials, _) => Some(KerberosHint::NoTicket),
        (GssKind::Expired, _) => Some(KerberosHint::TicketExpired),
        (_, m::S_PRINCIPAL_UNKNOWN) => Some(KerberosHint::UnknownService),
        (_, m::KDC_UNREACH | m::REALM_UNKNOWN) => Some(KerberosHint::KdcUnreachable),
        (_, m::SKEW) => Some(KerberosHint::ClockSkew),
        _ => None,
    }
}

fn gss_err(e: smb3_gss::Error, store: &CredStore, principal: Option<&str>) -> Error {
    let kind = match e.kind {
        GssKind::NoMutualAuthentication => AuthFailure::MutualAuthentication,
        GssKind::NoSessionKey => AuthFailure::NoSessionKey,
        _ => AuthFailure::SecurityPackage,
    };
    Error::Auth {
        kind,
        detail: AuthDetail::KerberosCache {
            from: describe(store),
            principal: principal.map(str::to_string),
            hint: hint(&e, store),
            source: Box::new(e),
        },
    }
}

impl GssCredential {
    /// Where the tickets come from, in words (`FILE:/tmp/krb5cc_0`, `keytab /etc/k.keytab`).
    pub(crate) fn from(&self) -> &str {
        &self.from
    }

    /// How long the credentials remain valid as the cache says now (it may have been renewed
    /// since the session began); `None` when they can always be renewed (a keytab) or the
    /// cache cannot be read.
    pub(crate) fn remaining(&self) -> Option<std::time::Duration> {
        let info = self.cred.info().ok()?;
        info.lifetime
            .map(|s| std::time::Duration::from_secs(u64::from(s)))
    }

    /// Acquire the credentials `config` names, off the runtime (a `KCM:` cache is a socket
    /// away, a `KEYRING:` one a system call, a keytab a file). Fails at once, before any
    /// connection, when there is no valid ticket and no keytab to get one.
    pub(crate) async fn acquire(config: &ClientConfig) -> Result<GssCredential> {
        let store = store_of(config);
        let task = tokio::task::spawn_blocking(move || {
            let cred = Credential::acquire(&store)
                .map_err(|e| gss_err(e, &store, store.principal.as_deref()))?;
            let info = cred
                .info()
                .map_err(|e| gss_err(e, &store, store.principal.as_deref()))?;
            if info.lifetime == Some(0) {
                return Err(expired(&store, &info.principal));
            }
            tracing::debug!(
                principal = %info.principal,
                lifetime = ?info.lifetime,
                from = %describe(&store),
                "Kerberos credentials acquired"
            );
            Ok(GssCredential {
                from: describe(&store),
                principal: info.principal,
                cred: Arc::new(cred),
            })
        });
        task.await.map_err(|e| Error::Auth {
            kind: AuthFailure::SecurityPackage,
            detail: AuthDetail::ExchangeStopped(Box::new(e)),
        })?
    }
}

/// A Kerberos ticket the configuration can use without a password (see
/// [`kerberos_ticket`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KerberosTicket {
    /// The client principal, `alice@CORP.EXAMPLE`.
    pub principal: String,
    /// How long the ticket-granting ticket remains valid; `None` when it can always be
    /// renewed (a keytab).
    pub expires_in: Option<std::time::Duration>,
    /// Where it comes from: the cache or keytab, in words.
    pub from: String,
}

/// Whether Kerberos can authenticate with `config` and no password, and as whom: the
/// credentials of the cache or keytab `config` names, else of `KRB5CCNAME` / the default
/// cache / `KRB5_CLIENT_KTNAME`. Front ends ask this to use a ticket instead of asking for a
/// password. It blocks while it reads the cache (a file, a keyring, or a `KCM:` socket away:
/// quick, but not for a latency-critical task). The error is the one `Client::connect` would
/// give ("no Kerberos ticket in FILE:/tmp/krb5cc_0 (run kinit)").
pub fn kerberos_ticket(config: &ClientConfig) -> Result<KerberosTicket> {
    let store = store_of(config);
    let cred =
        Credential::acquire(&store).map_err(|e| gss_err(e, &store, store.principal.as_deref()))?;
    let info = cred
        .info()
        .map_err(|e| gss_err(e, &store, store.principal.as_deref()))?;
    if info.lifetime == Some(0) {
        return Err(expired(&store, &info.principal));
    }
    Ok(KerberosTicket {
        principal: info.principal,
        expires_in: info
            .lifetime
            .map(|s| std::time::Duration::from_secs(u64::from(s))),
        from: describe(&store),
    })
}

/// A cache whose TGT has run out: MIT reports a lifetime of 0 rather than failing.
fn expired(store: &CredStore, principal: &str) -> Error {
    gss_err(
        smb3_gss::Error {
            call: "gss_inquire_cred",
            kind: GssKind::Expired,
            major: smb3_gss::major::CREDENTIALS_EXPIRED,
            minor: 0,
            krb5_code: None,
            message: "the credentials have expired".to_string(),
        },
        store,
        Some(principal),
    )
}

/// One SPNEGO/Kerberos exchange through the GSS-API.
pub(crate) struct GssAuthenticator {
    ctx: smb3_gss::Context,
    cred: GssCredential,
    started: bool,
}

impl GssAuthenticator {
    /// A context for `cifs@<host>` (MS-SMB2 3.2.4.2.3: the SPN is "cifs/" and the server's
    /// name); `host` is checked to be a name, not an address, by the caller.
    pub(crate) fn new(
        cred: &GssCredential,
        host: &str,
        lifetime: Option<std::time::Duration>,
    ) -> Result<GssAuthenticator> {
        let mut ctx = smb3_gss::Context::new(cred.cred.clone(), "cifs", host)
            .map_err(|e| gss_err(e, cred.cred.store(), Some(&cred.principal)))?;
        if let Some(lifetime) = lifetime {
            // At least a second: 0 would mean the default.
            let secs = lifetime.as_secs().clamp(1, u64::from(u32::MAX));
            ctx = ctx.with_lifetime(secs as u32);
        }
        Ok(GssAuthenticator {
            ctx,
            cred: cred.clone(),
            started: false,
        })
    }

    /// Feed the server's token (ignored on the first call: the server's NEGOTIATE hint is
    /// not needed to start) and return the next token.
    pub(crate) fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>> {
        let input = if self.started {
            Some(server_token)
        } else {
            None
        };
        self.started = true;
        self.ctx.step(input).map_err(|e| self.err(e))
    }

    fn err(&self, e: smb3_gss::Error) -> Error {
        gss_err(e, self.cred.cred.store(), Some(&self.cred.principal))
    }

    /// Complete, with mutual authentication (the library checked the AP-REP).
    pub(crate) fn is_complete(&self) -> bool {
        self.ctx.is_complete()
    }

    /// The session key (the acceptor's subkey when the AP-REP carried one): MS-SMB2
    /// 3.2.5.3.1 derives signing and encryption keys from it exactly as from NTLM's.
    pub(crate) fn session_key(&self) -> Result<Zeroizing<Vec<u8>>> {
        self.ctx.session_key().map_err(|e| self.err(e))
    }

    /// Where the tickets came from, for logs.
    pub(crate) fn from(&self) -> &str {
        &self.cred.from
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_follows_the_config() {
        let mut c = ClientConfig::default();
        assert_eq!(store_of(&c), CredStore::default());
        c.kerberos_ccache = Some("DIR:/run/user/0/krb5cc".into());
        c.kerberos_keytab = Some("/etc/backup.keytab".into());
        c.kerberos_principal = Some("backup@CORP".into());
        let s = store_of(&c);
        assert_eq!(s.ccache.as_deref(), Some("DIR:/run/user/0/krb5cc"));
        assert_eq!(s.client_keytab.as_deref(), Some("/etc/backup.keytab"));
        assert_eq!(s.principal.as_deref(), Some("backup@CORP"));
        assert_eq!(describe(&s), "keytab /etc/backup.keytab");
        let cache_only = CredStore {
            ccache: Some("KEYRING:session:x".into()),
            ..CredStore::default()
        };
        assert_eq!(describe(&cache_only), "KEYRING:session:x");
    }

    fn gss_error(kind: GssKind, minor: u32) -> smb3_gss::Error {
        smb3_gss::Error {
            call: "gss_init_sec_context",
            kind,
            major: smb3_gss::major::FAILURE,
            minor: 100_006,
            krb5_code: Some(minor),
            message: "words".into(),
        }
    }

    #[test]
    fn hints_say_what_to_do() {
        use smb3_gss::krb5_minor as m;
        let cache = CredStore {
            ccache: Some("FILE:/tmp/c".into()),
            ..CredStore::default()
        };
        let keytab = CredStore {
            client_keytab: Some("/k".into()),
            ..CredStore::default()
        };
        let h = |kind, minor, store: &CredStore| hint(&gss_error(kind, minor), store);
        assert_eq!(
            h(GssKind::NoCredentials, 0, &cache),
            Some(KerberosHint::NoTicket)
        );
        assert_eq!(
            h(GssKind::NoCredentials, 0, &keytab),
            Some(KerberosHint::NotInKeytab)
        );
        assert_eq!(
            h(GssKind::Failure, m::KT_NOTFOUND, &keytab),
            Some(KerberosHint::NotInKeytab)
        );
        assert_eq!(
            h(GssKind::Expired, m::TKT_EXPIRED, &cache),
            Some(KerberosHint::TicketExpired)
        );
        assert_eq!(
            h(GssKind::Failure, m::S_PRINCIPAL_UNKNOWN, &cache),
            Some(KerberosHint::UnknownService)
        );
        assert_eq!(
            h(GssKind::Failure, m::KDC_UNREACH, &cache),
            Some(KerberosHint::KdcUnreachable)
        );
        assert_eq!(h(GssKind::Failure, 1, &cache), None);
    }

    #[test]
    fn the_message_leads_with_what_to_do() {
        let cache = CredStore {
            ccache: Some("FILE:/tmp/krb5cc_0".into()),
            ..CredStore::default()
        };
        let e = gss_err(gss_error(GssKind::NoCredentials, 0), &cache, None);
        assert_eq!(
            e.to_string(),
            "authentication failed: security package error: no Kerberos ticket in \
             FILE:/tmp/krb5cc_0 (run kinit): gss_init_sec_context: words"
        );
        let e = gss_err(
            gss_error(GssKind::Failure, smb3_gss::krb5_minor::S_PRINCIPAL_UNKNOWN),
            &cache,
            Some("smbtest@TESTBED.LAN"),
        );
        let text = e.to_string();
        assert!(
            text.contains("Kerberos for smbtest@TESTBED.LAN with FILE:/tmp/krb5cc_0"),
            "{text}"
        );
        assert!(
            text.ends_with("use the server's name in the realm)"),
            "{text}"
        );
    }
}
