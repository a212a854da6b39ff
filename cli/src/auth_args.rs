//! The Kerberos options `smbcp` and `smbctl` share (NTLMv2 is used without them).

use smb3_client::ClientConfig;

/// How to authenticate when not with NTLMv2.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AuthArgs {
    /// Authenticate with Kerberos in this realm (e.g. CORP.EXAMPLE) instead of NTLMv2; the
    /// password is used to get a ticket (also SMB_KRB_REALM).
    #[arg(long, value_name = "REALM", env = "SMB_KRB_REALM", global = true)]
    pub kerberos_realm: Option<String>,
    /// The realm's KDC: HOST, HOST:PORT, tcp://HOST:PORT or udp://HOST:PORT (port 88 by
    /// default; also SMB_KRB_KDC). Needs --kerberos-realm.
    #[arg(long, value_name = "KDC", env = "SMB_KRB_KDC", global = true)]
    pub kdc: Option<String>,
    /// The server's host name for the service principal cifs/NAME, when the URL names the
    /// server by address. Needs --kerberos-realm.
    #[arg(long, value_name = "NAME", global = true)]
    pub spn_host: Option<String>,
    /// With --kerberos-realm: fall back to NTLMv2 when the KDC cannot be reached.
    #[arg(long, global = true)]
    pub ntlm_fallback: bool,
}

impl AuthArgs {
    /// Apply the options to `config`; Kerberos details without a realm are a usage error.
    pub fn apply(&self, config: &mut ClientConfig) -> Result<(), String> {
        let kerberos = smb3_frontend::KerberosOptions {
            realm: self.kerberos_realm.clone(),
            kdc: self.kdc.clone(),
            spn_host: self.spn_host.clone(),
            ntlm_fallback: self.ntlm_fallback,
        };
        kerberos
            .apply(config)
            .map_err(|_| "--kdc, --spn-host and --ntlm-fallback need --kerberos-realm".to_string())
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
    fn kerberos_details_without_a_realm_are_refused() {
        let e = config_of(&["--kdc", "10.0.0.1"]).unwrap_err();
        assert!(e.contains("--kerberos-realm"), "{e}");
    }
}
