//! The options `smbcp` and `smbctl` share about how safe the connection must be: dialects,
//! signing, encryption. The defaults are the safe ones; every way to lower them is an
//! explicit flag whose help says what it costs.

use smb3_client::{ClientConfig, Dialect};

/// Dialect, signing and encryption options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SecurityArgs {
    /// Lowest dialect to offer: 3.0 (the default), 3.0.2, 3.1.1, or 2.1 for servers that
    /// speak nothing newer. 2.1 has no downgrade protection: a man in the middle can force
    /// a connection down to it.
    #[arg(long, value_name = "DIALECT", value_parser = parse_dialect, global = true)]
    pub min_dialect: Option<Dialect>,
    /// Highest dialect to offer: 2.1, 3.0, 3.0.2 or 3.1.1 (the default).
    #[arg(long, value_name = "DIALECT", value_parser = parse_dialect, global = true)]
    pub max_dialect: Option<Dialect>,
    /// UNSAFE: accept unsigned replies and guest sessions, for servers that cannot sign.
    /// Anyone on the path can then change what the server sends, names included.
    #[arg(long, global = true)]
    pub no_require_signing: bool,
    /// Encrypt the whole session (SMB 3.x).
    #[arg(long, global = true)]
    pub encrypt: bool,
}

impl SecurityArgs {
    /// Apply the options to `config`; a lowest dialect above the highest is a usage error.
    pub fn apply(&self, config: &mut ClientConfig) -> Result<(), String> {
        if let Some(d) = self.min_dialect {
            config.min_dialect = d;
        }
        if let Some(d) = self.max_dialect {
            config.max_dialect = d;
        }
        if config.min_dialect > config.max_dialect {
            return Err(format!(
                "--min-dialect {} is above --max-dialect {}",
                config.min_dialect, config.max_dialect
            ));
        }
        if self.no_require_signing {
            config.require_signing = false;
            config.allow_guest = true;
        }
        config.encrypt = self.encrypt;
        Ok(())
    }
}

/// A dialect as the command line names it.
pub fn parse_dialect(s: &str) -> Result<Dialect, String> {
    match s {
        "2.1" | "2.10" => Ok(Dialect::Smb210),
        "3.0" | "3" => Ok(Dialect::Smb300),
        "3.0.2" | "3.02" => Ok(Dialect::Smb302),
        "3.1.1" | "3.11" => Ok(Dialect::Smb311),
        _ => Err(format!("unknown dialect {s:?} (2.1, 3.0, 3.0.2, 3.1.1)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        security: SecurityArgs,
    }

    fn config_of(args: &[&str]) -> Result<ClientConfig, String> {
        let cli = Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let mut config = ClientConfig::default();
        cli.security.apply(&mut config)?;
        Ok(config)
    }

    #[test]
    fn safe_by_default() {
        let c = config_of(&[]).unwrap();
        assert!(c.require_signing);
        assert!(!c.allow_guest);
        assert_eq!(c.min_dialect, Dialect::Smb300);
        assert_eq!(c.max_dialect, Dialect::Smb311);
    }

    #[test]
    fn each_relaxation_is_an_explicit_flag() {
        let c = config_of(&["--min-dialect", "2.1", "--no-require-signing"]).unwrap();
        assert_eq!(c.min_dialect, Dialect::Smb210);
        assert!(!c.require_signing);
        assert!(c.allow_guest);
        let c = config_of(&["--max-dialect", "3.0.2", "--encrypt"]).unwrap();
        assert_eq!(
            (c.min_dialect, c.max_dialect),
            (Dialect::Smb300, Dialect::Smb302)
        );
        assert!(c.encrypt);
    }

    #[test]
    fn contradictions_and_unknown_dialects_are_refused() {
        let e = config_of(&["--min-dialect", "3.1.1", "--max-dialect", "3.0"]).unwrap_err();
        assert!(e.contains("above"), "{e}");
        let e = config_of(&["--max-dialect", "2.1"]).unwrap_err();
        assert!(e.contains("above"), "{e}");
        assert!(config_of(&["--min-dialect", "1.0"]).is_err());
    }
}
