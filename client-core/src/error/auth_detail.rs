//! What exactly went wrong in a local authentication failure (the detail carried by
//! [`Error::Auth`](super::Error::Auth)).

use std::error::Error as StdError;
use std::fmt;

use smb3_proto::crypto::CryptoError;

/// An error of a library below this one (the security package, the runtime), kept whole as
/// the [`source`](std::error::Error::source) of an [`AuthDetail`]: downcast it to the
/// library's type (e.g. `sspi::Error`) for everything it knows.
pub type AuthSource = Box<dyn StdError + Send + Sync + 'static>;

/// What exactly went wrong when authentication could not be completed locally.
#[derive(Debug)]
#[non_exhaustive]
pub enum AuthDetail {
    /// The security package (sspi) refused to go on.
    SecurityPackage(AuthSource),
    /// The Kerberos exchange failed: who asked which KDC, and what the security package
    /// reported.
    Kerberos {
        /// The client principal (`user@REALM`).
        principal: String,
        /// The KDC asked, when one was configured (otherwise the realm's KDC).
        kdc: Option<String>,
        /// The likely cause, when the error says it.
        hint: Option<KerberosHint>,
        /// The security package's error.
        source: AuthSource,
    },
    /// The user name cannot be given to the security package.
    InvalidUserName(AuthSource),
    /// The task running the Kerberos exchange stopped before it answered.
    ExchangeStopped(AuthSource),
    /// The server asked for more rounds than any mechanism needs.
    Rounds {
        /// Rounds asked for so far.
        rounds: u32,
    },
    /// The session's keys could not be derived.
    KeyDerivation(CryptoError),
    /// The server mapped the user to guest (or anonymous).
    MappedToGuest {
        /// The user name the client logged on with.
        user: String,
    },
    /// The server bound a new channel as guest: not the same user (MS-SMB2 3.2.5.3.3).
    BoundAsGuest,
    /// The server made the session a guest (or anonymous) one, which has no key to sign
    /// with, while signing is required ([`ClientConfig::require_signing`](crate::ClientConfig)).
    GuestCannotSign {
        /// The user name the client logged on with.
        user: String,
    },
    /// Kerberos through the system's GSS-API (tickets from a cache or a keytab) failed.
    KerberosCache {
        /// Where the tickets were to come from: a cache (`FILE:/tmp/krb5cc_0`), `keytab
        /// /etc/backup.keytab`, or the default cache.
        from: String,
        /// The client principal, when known (from the option, or the cache).
        principal: Option<String>,
        /// The likely cause and what to do.
        hint: Option<KerberosHint>,
        /// The GSS-API error (`smb3_gss::Error`: the call, major and minor status, and the
        /// library's own words).
        source: AuthSource,
    },
    /// Kerberos mutual authentication did not complete: the server accepted the session
    /// without the AP-REP that proves it holds the service key (RFC 4120 3.2.4), or with one
    /// the security package could not verify. Without it any server could have answered.
    NoMutualAuthentication,
}

/// The likely cause of a Kerberos failure, read from the KDC's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KerberosHint {
    /// KDC_ERR_PREAUTH_FAILED: the encrypted timestamp did not decrypt with the user's key.
    WrongPassword,
    /// No KDC answered.
    KdcUnreachable,
    /// The client's and the KDC's clocks differ by more than Kerberos allows (5 minutes).
    ClockSkew,
    /// The cache holds no ticket (or does not exist): the user has to run kinit.
    NoTicket,
    /// The cache's ticket has expired: the user has to run kinit again.
    TicketExpired,
    /// The KDC knows no service `cifs/<host>`: the host name is not the server's name in
    /// the realm.
    UnknownService,
    /// The keytab has no key for the principal asked for.
    NotInKeytab,
}

impl fmt::Display for KerberosHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KerberosHint::WrongPassword => "wrong password?",
            KerberosHint::KdcUnreachable => "KDC unreachable",
            KerberosHint::ClockSkew => "client and KDC clocks differ by more than 5 minutes",
            KerberosHint::NoTicket => "run kinit",
            KerberosHint::TicketExpired => "the ticket has expired: run kinit",
            KerberosHint::UnknownService => {
                "the KDC knows no cifs/ service of that name: use the server's name in the realm"
            }
            KerberosHint::NotInKeytab => "the keytab holds no key for that principal",
        })
    }
}

impl fmt::Display for AuthDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthDetail::SecurityPackage(e) => write!(f, "{e}"),
            AuthDetail::Kerberos {
                principal,
                kdc,
                hint,
                source,
            } => {
                let kdc = kdc.as_deref().unwrap_or("the realm's KDC");
                // sspi appends the KDC's raw e-data ("Additional error data: OctetString(…)"):
                // bytes for debugging (the source has them), not for the user's one line.
                let what = source.to_string();
                let what = what
                    .split_once(". Additional error data")
                    .map_or(what.as_str(), |(head, _)| head);
                write!(f, "Kerberos as {principal} via {kdc}: {what}")?;
                match hint {
                    Some(hint) => write!(f, " ({hint})"),
                    None => Ok(()),
                }
            }
            AuthDetail::KerberosCache {
                from,
                principal,
                hint,
                source,
            } => {
                // The one line a user reads: what is missing and what to do first, then the
                // library's own words.
                let who = principal
                    .as_deref()
                    .map_or(String::new(), |p| format!(" for {p}"));
                match hint {
                    Some(KerberosHint::NoTicket) => {
                        write!(f, "no Kerberos ticket{who} in {from} (run kinit): {source}")
                    }
                    Some(KerberosHint::TicketExpired) => write!(
                        f,
                        "the Kerberos ticket{who} in {from} has expired (run kinit): {source}"
                    ),
                    Some(hint) => write!(f, "Kerberos{who} with {from}: {source} ({hint})"),
                    None => write!(f, "Kerberos{who} with {from}: {source}"),
                }
            }
            AuthDetail::InvalidUserName(e) => write!(f, "invalid user name: {e}"),
            AuthDetail::ExchangeStopped(e) => write!(f, "the Kerberos exchange stopped: {e}"),
            AuthDetail::Rounds { rounds } => write!(f, "{rounds} rounds"),
            AuthDetail::KeyDerivation(e) => write!(f, "{e}"),
            AuthDetail::MappedToGuest { user } => write!(f, "user {user:?} was mapped to guest"),
            AuthDetail::BoundAsGuest => f.write_str("the server bound the channel as guest"),
            AuthDetail::GuestCannotSign { user } => write!(
                f,
                "user {user:?} was mapped to guest, and a guest session cannot be signed \
                 (signing is required; only an unsafe opt-out allows unsigned sessions)"
            ),
            AuthDetail::NoMutualAuthentication => f.write_str(
                "the server accepted the Kerberos session without a verified AP-REP \
                 (mutual authentication failed: it may not be the server it claims to be)",
            ),
        }
    }
}

impl StdError for AuthDetail {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            AuthDetail::SecurityPackage(e)
            | AuthDetail::Kerberos { source: e, .. }
            | AuthDetail::KerberosCache { source: e, .. }
            | AuthDetail::InvalidUserName(e)
            | AuthDetail::ExchangeStopped(e) => Some(e.as_ref()),
            AuthDetail::KeyDerivation(e) => Some(e),
            AuthDetail::Rounds { .. }
            | AuthDetail::MappedToGuest { .. }
            | AuthDetail::BoundAsGuest
            | AuthDetail::GuestCannotSign { .. }
            | AuthDetail::NoMutualAuthentication => None,
        }
    }
}
