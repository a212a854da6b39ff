//! How a program reaches the server: TCP, or SMB over QUIC and what vouches for the server's
//! certificate. One parser for smbcp's and smbctl's `--transport`, `--ca-file` and
//! `--pin-sha256` and smbfuse's `-o transport=`, `cafile=` and `pinsha256=`, so the three
//! take the same values and refuse the same mistakes.

use std::path::PathBuf;

use smb3_client::{ClientConfig, Transport};

/// The transport settings of a session, however the program was given them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransportOptions {
    /// TCP (the default) or QUIC. A server named without a port is reached on TCP 445 or UDP
    /// 443 accordingly (the library's choice); a port in the location wins.
    pub transport: Transport,
    /// QUIC: the CA file the server's certificate must chain to, instead of the system's
    /// roots.
    pub ca_file: Option<PathBuf>,
    /// QUIC: SHA-256 digests of accepted server keys (SubjectPublicKeyInfo); any given, they
    /// alone decide, so a self-signed server can be reached.
    pub pins: Vec<[u8; 32]>,
}

/// [`TransportOptions::apply`]: a CA file or a pinned key was given for a TCP session, which
/// has no certificate to check them against. The caller words it with its own option names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuicOnly;

impl TransportOptions {
    /// Put the settings into `config`. Certificate settings without QUIC are refused rather
    /// than ignored: someone who pinned a key believes the connection is checked.
    pub fn apply(&self, config: &mut ClientConfig) -> Result<(), QuicOnly> {
        if self.transport != Transport::Quic && (self.ca_file.is_some() || !self.pins.is_empty()) {
            return Err(QuicOnly);
        }
        config.transport = self.transport;
        config.quic.ca_file = self.ca_file.clone();
        config.quic.pinned_sha256 = self.pins.clone();
        Ok(())
    }

    /// Take one `-o NAME=VALUE` option if it is a transport one: `Ok(true)` when taken,
    /// `Ok(false)` when `name` is not one of `transport`, `cafile`, `pinsha256` (repeatable,
    /// each adds a pin).
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<bool, String> {
        match name {
            "transport" => {
                self.transport =
                    parse_transport(value).map_err(|e| format!("option transport={value}: {e}"))?
            }
            "cafile" => self.ca_file = Some(PathBuf::from(value)),
            "pinsha256" => self
                .pins
                .push(parse_pin(value).map_err(|e| format!("option pinsha256={value}: {e}"))?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// `tcp` or `quic`.
pub fn parse_transport(s: &str) -> Result<Transport, String> {
    s.parse()
}

/// A pinned key: the base64 of its 32-byte SHA-256, as curl's `--pinnedpubkey` takes it
/// (its `sha256//` prefix may be left on).
pub fn parse_pin(s: &str) -> Result<[u8; 32], String> {
    use base64::Engine as _;
    let text = s.strip_prefix("sha256//").unwrap_or(s);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| "not base64 (the SHA-256 of the server's public key, in base64)")?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
        format!(
            "{} bytes, where a SHA-256 has 32 (44 characters of base64)",
            bytes.len()
        )
    })
}

/// smbcp's and smbctl's transport options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TransportArgs {
    /// What carries the session: tcp (the default; port 445) or quic (SMB over QUIC: TLS 1.3
    /// on UDP, port 443 unless the URL names one; dialect 3.1.1, one channel).
    #[arg(long, value_name = "tcp|quic", value_parser = parse_transport, global = true)]
    pub transport: Option<Transport>,
    /// With --transport quic: PEM file of the CA the server's certificate must chain to,
    /// instead of the system's roots (SSL_CERT_FILE, SSL_CERT_DIR).
    #[arg(long, value_name = "FILE", global = true)]
    pub ca_file: Option<PathBuf>,
    /// With --transport quic: accept the server whose public key has this SHA-256 (base64,
    /// as curl's --pinnedpubkey sha256//...), whoever signed its certificate: for
    /// self-signed servers. Repeatable; any given, only a pinned key is accepted.
    #[arg(long = "pin-sha256", value_name = "BASE64", value_parser = parse_pin, global = true)]
    pub pin_sha256: Vec<[u8; 32]>,
}

impl TransportArgs {
    /// The options given.
    pub fn options(&self) -> TransportOptions {
        TransportOptions {
            transport: self.transport.unwrap_or_default(),
            ca_file: self.ca_file.clone(),
            pins: self.pin_sha256.clone(),
        }
    }

    /// Put the options into `config`, with the error worded for these flags.
    pub fn apply(&self, config: &mut ClientConfig) -> Result<(), String> {
        self.options()
            .apply(config)
            .map_err(|QuicOnly| "--ca-file and --pin-sha256 need --transport quic".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        transport: TransportArgs,
    }

    /// Base64 of 32 bytes 0x01.
    const PIN: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";

    fn config_of(args: &[&str]) -> Result<ClientConfig, String> {
        let cli = Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let mut config = ClientConfig::default();
        cli.transport.apply(&mut config)?;
        Ok(config)
    }

    #[test]
    fn tcp_by_default_and_quic_with_its_certificate_settings() {
        let c = config_of(&[]).unwrap();
        assert_eq!(c.transport, Transport::Tcp);
        let c = config_of(&[
            "--transport",
            "quic",
            "--ca-file",
            "/etc/ca.pem",
            "--pin-sha256",
            PIN,
            "--pin-sha256",
            &format!("sha256//{}", PIN.replace("AQ", "Ag")),
        ])
        .unwrap();
        assert_eq!(c.transport, Transport::Quic);
        assert_eq!(c.quic.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(c.quic.pinned_sha256.len(), 2);
        assert_eq!(c.quic.pinned_sha256[0], [1; 32]);
        assert_eq!(c.quic.pinned_sha256[1][0], 2);
    }

    #[test]
    fn certificate_settings_without_quic_and_bad_values_are_refused() {
        let e = config_of(&["--ca-file", "/etc/ca.pem"]).unwrap_err();
        assert!(e.contains("need --transport quic"), "{e}");
        let e = config_of(&["--transport", "tcp", "--pin-sha256", PIN]).unwrap_err();
        assert!(e.contains("need --transport quic"), "{e}");
        let e = config_of(&["--transport", "udp"]).unwrap_err();
        assert!(e.contains("tcp or quic"), "{e}");
        let e = config_of(&["--transport", "quic", "--pin-sha256", "AQEB"]).unwrap_err();
        assert!(e.contains("3 bytes"), "{e}");
        let e = config_of(&["--transport", "quic", "--pin-sha256", "not base64!"]).unwrap_err();
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn mount_options_take_the_same_values() {
        let mut o = TransportOptions::default();
        assert_eq!(o.set_option("transport", "quic"), Ok(true));
        assert_eq!(o.set_option("cafile", "/etc/ca.pem"), Ok(true));
        assert_eq!(o.set_option("pinsha256", PIN), Ok(true));
        assert_eq!(o.set_option("pinsha256", PIN), Ok(true));
        assert_eq!(o.set_option("vers", "3.1.1"), Ok(false));
        assert_eq!(o.pins, vec![[1; 32], [1; 32]]);
        let mut c = ClientConfig::default();
        o.apply(&mut c).unwrap();
        assert_eq!(c.transport, Transport::Quic);
        assert_eq!(c.transport.default_port(), 443);
        let e = o.set_option("pinsha256", "xyz").unwrap_err();
        assert!(e.starts_with("option pinsha256=xyz: "), "{e}");
        let e = o.set_option("transport", "rdma").unwrap_err();
        assert!(e.starts_with("option transport=rdma: "), "{e}");
        let mut tcp = TransportOptions::default();
        tcp.set_option("cafile", "/etc/ca.pem").unwrap();
        assert_eq!(tcp.apply(&mut ClientConfig::default()), Err(QuicOnly));
    }
}
