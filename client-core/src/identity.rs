//! Who a session is, and how the server was told: the answer `smbctl whoami` prints.

use std::time::Duration;

use crate::auth::AuthMechanism;
use crate::client::{Client, Reauthentications};

/// Who the session is ([`Client::identity`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionIdentity {
    /// How it authenticated.
    pub mechanism: AuthMechanism,
    /// As whom: the Kerberos principal of a cache or keytab (`alice@CORP.EXAMPLE`), else
    /// `DOMAIN\user` (or `user`) as given.
    pub user: String,
    /// Where the Kerberos tickets come from (`FILE:/tmp/krb5cc_1000`, `keytab
    /// /etc/backup.keytab`), when from a cache or keytab.
    pub tickets_from: Option<String>,
    /// How long the cache's ticket-granting ticket has left, read now (it may have been
    /// renewed since the session began); `None` for a keytab (renewed at will) and NTLM.
    pub ticket_expires_in: Option<Duration>,
    /// Renewals of the session's authentication after its ticket ended.
    pub reauthentications: Reauthentications,
}

impl Client {
    /// Who the session is and how it authenticated. Reads the Kerberos cache for the
    /// ticket's time left: quick, but it blocks (a file, a keyring, or a `KCM:` socket).
    pub fn identity(&self) -> SessionIdentity {
        let core = &self.core;
        let tickets = core.creds.tickets();
        let user = match (&tickets, core.creds.domain.as_str()) {
            (Some(_), _) | (None, "") => core.creds.user.clone(),
            (None, domain) => format!("{domain}\\{}", core.creds.user),
        };
        let (tickets_from, ticket_expires_in) = match tickets {
            Some((from, left)) => (Some(from), left),
            None => (None, None),
        };
        SessionIdentity {
            mechanism: core.mechanism,
            user,
            tickets_from,
            ticket_expires_in,
            reauthentications: self.reauthentications(),
        }
    }
}
