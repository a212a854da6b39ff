//! The authentication options `smbcp` and `smbctl` share: with no password given, a Kerberos
//! ticket from the cache (kinit) or a keytab is used when there is one; a password means
//! NTLMv2, or Kerberos with `--kerberos-realm`.

use smb3_client::{Auth, ClientConfig};

/// How to authenticate.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AuthArgs {
    /// Authenticate with Kerberos only: the ticket from the credential cache (kinit) or a
    /// keytab, or the password with --kerberos-realm. Without it, a ticket is used when no
    /// password is given and one is there.
    #[arg(long, global = true, conflicts_with = "no_kerberos")]
    pub kerberos: bool,
    /// Never use Kerberos: NTLMv2 with the password (asked when not given).
    #[arg(long, global = true)]
    pub no_kerberos: bool,
    /// Get Kerberos tickets from this keytab (a service or backup job; also
    /// KRB5_CLIENT_KTNAME), for --principal or the keytab's first entry. The tickets stay in
    /// memory.
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        conflicts_with = "no_kerberos"
    )]
    pub keytab: Option<std::path::PathBuf>,
    /// Take Kerberos tickets from this credential cache (FILE:, DIR:, KEYRING:, KCM:)
    /// instead of KRB5CCNAME or the default one.
    #[arg(
        long,
        value_name = "CACHE",
        global = true,
        conflicts_with = "no_kerberos"
    )]
    pub ccache: Option<String>,
    /// The Kerberos client principal (alice@CORP.EXAMPLE) to use from the cache or keytab.
    #[arg(
        long,
        value_name = "NAME",
        global = true,
        conflicts_with = "no_kerberos"
    )]
    pub principal: Option<String>,
    /// Authenticate with Kerberos in this realm (e.g. CORP.EXAMPLE) instead of NTLMv2; the
    /// password is used to get a ticket (also SMB_KRB_REALM).
    #[arg(long, value_name = "REALM", env = "SMB_KRB_REALM", global = true)]
    pub kerberos_realm: Option<String>,
    /// The realm's KDC: HOST, HOST:PORT, tcp://HOST:PORT or udp://HOST:PORT (port 88 by
    /// default; also SMB_KRB_KDC). Needs --kerberos-realm.
    #[arg(long, value_name = "KDC", env = "SMB_KRB_KDC", global = true)]
    pub kdc: Option<String>,
    /// The server's host name for the Kerberos service principal cifs/NAME, when the URL
    /// names the server by address (Kerberos needs a name).
    #[arg(long, value_name = "NAME", global = true)]
    pub spn_host: Option<String>,
    /// With --kerberos-realm: fall back to NTLMv2 when the KDC cannot be reached.
    #[arg(long, global = true)]
    pub ntlm_fallback: bool,
}

impl AuthArgs {
    /// Apply the options to `config`; Kerberos details without a realm are a usage error.
    pub fn apply(&self, config: &mut ClientConfig) -> Result<(), String> {
        let auth = if self.no_kerberos {
            Auth::Ntlm
        } else if self.kerberos {
            Auth::Kerberos
        } else {
            Auth::Auto
        };
        let kerberos = smb3_frontend::KerberosOptions {
            auth,
            ccache: self.ccache.clone(),
            keytab: self.keytab.clone(),
            principal: self.principal.clone(),
            realm: self.kerberos_realm.clone(),
            kdc: self.kdc.clone(),
            spn_host: self.spn_host.clone(),
            ntlm_fallback: self.ntlm_fallback,
        };
        kerberos
            .apply(config)
            .map_err(|_| "--kdc and --ntlm-fallback need --kerberos-realm".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        auth: AuthArgs,
    }

    fn config_of(args: &[&str]) -> Result<ClientConfig, String> {
        let cli = Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let mut config = ClientConfig::default();
        cli.auth.apply(&mut config)?;
        Ok(config)
    }

    #[test]
    fn kerberos_options_reach_the_config() {
        let c = config_of(&[
            "--kerberos-realm",
            "TESTBED.LAN",
            "--kdc",
            "10.0.0.1:88",
            "--spn-host",
            "dc.testbed.lan",
        ])
        .unwrap();
        assert_eq!(c.kerberos_realm.as_deref(), Some("TESTBED.LAN"));
        assert_eq!(c.kerberos_kdc.as_deref(), Some("10.0.0.1:88"));
        assert_eq!(c.kerberos_service_host.as_deref(), Some("dc.testbed.lan"));
        assert!(!c.ntlm_fallback);
    }

    #[test]
    fn ticket_options_reach_the_config() {
        let c = config_of(&[]).unwrap();
        assert_eq!(c.auth, Auth::Auto);
        let c = config_of(&[
            "--kerberos",
            "--keytab",
            "/etc/backup.keytab",
            "--principal",
            "backup@CORP",
            "--ccache",
            "KEYRING:persistent:0",
            "--spn-host",
            "nas.corp",
        ])
        .unwrap();
        assert_eq!(c.auth, Auth::Kerberos);
        assert_eq!(
            c.kerberos_keytab.as_deref(),
            Some(std::path::Path::new("/etc/backup.keytab"))
        );
        assert_eq!(c.kerberos_principal.as_deref(), Some("backup@CORP"));
        assert_eq!(c.kerberos_ccache.as_deref(), Some("KEYRING:persistent:0"));
        assert_eq!(c.kerberos_service_host.as_deref(), Some("nas.corp"));
        assert_eq!(config_of(&["--no-kerberos"]).unwrap().auth, Auth::Ntlm);
        let e = config_of(&["--kerberos", "--no-kerberos"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
    }

    #[test]
    fn kerberos_details_without_a_realm_are_refused() {
        let e = config_of(&["--kdc", "10.0.0.1"]).unwrap_err();
        assert!(e.contains("--kerberos-realm"), "{e}");
    }
}
