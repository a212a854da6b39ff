//! Whether a session may have more than one channel (DESIGN §3 step 1), and if not, why.

use smb3_proto::msg::negotiate::Capabilities;
use smb3_proto::Dialect;

use crate::config::ClientConfig;
use crate::negotiated::Negotiated;

/// Why a session stays on one channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ineligible {
    /// `ClientConfig::multichannel` is off (or `max_channels` is 1).
    Disabled,
    /// Channels can be bound only on SMB 3.x (MS-SMB2 3.2.4.2.3.1).
    Dialect(Dialect),
    /// The server did not set SMB2_GLOBAL_CAP_MULTI_CHANNEL in its NEGOTIATE reply.
    ServerLacksCapability,
    /// A guest or anonymous session has no key to sign the binding with.
    Unsigned,
}

impl std::fmt::Display for Ineligible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ineligible::Disabled => write!(f, "multichannel is turned off in the client settings"),
            Ineligible::Dialect(d) => write!(
                f,
                "the session uses SMB {d}; channels can be added only on SMB 3.0 and later"
            ),
            Ineligible::ServerLacksCapability => write!(
                f,
                "the server does not offer multichannel (no MULTI_CHANNEL capability in NEGOTIATE; \
                 on Samba: `server multi channel support = yes`)"
            ),
            Ineligible::Unsigned => write!(
                f,
                "the session is guest or anonymous: without a signing key no channel can be bound"
            ),
        }
    }
}

/// Check the rules in order of what the user can most easily change.
pub(crate) fn check(
    config: &ClientConfig,
    negotiated: &Negotiated,
    signed: bool,
) -> Result<(), Ineligible> {
    if !config.multichannel || config.max_channels <= 1 {
        return Err(Ineligible::Disabled);
    }
    if !negotiated.dialect.is_smb3() {
        return Err(Ineligible::Dialect(negotiated.dialect));
    }
    if !negotiated
        .server_capabilities
        .has(Capabilities::MULTI_CHANNEL)
    {
        return Err(Ineligible::ServerLacksCapability);
    }
    if !signed {
        return Err(Ineligible::Unsigned);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use smb3_proto::msg::negotiate::SecurityMode;
    use smb3_proto::{Cipher, SigningAlgorithm};

    /// A NEGOTIATE outcome as Samba 4.17 gives it on 3.1.1 with multichannel on.
    pub(crate) fn negotiated(dialect: Dialect, caps: u32) -> Negotiated {
        Negotiated {
            dialect,
            server_guid: [7; 16],
            server_capabilities: Capabilities(caps),
            server_security_mode: SecurityMode(SecurityMode::SIGNING_ENABLED),
            max_read: 8 << 20,
            max_write: 8 << 20,
            max_transact: 8 << 20,
            cipher: Some(Cipher::Aes128Gcm),
            signing_algorithm: SigningAlgorithm::AesGmac,
            preauth: None,
            gss_token: bytes::Bytes::new(),
            posix_extensions: false,
        }
    }

    #[test]
    fn every_rule_has_its_reason() {
        let mc = Capabilities::MULTI_CHANNEL;
        let on = ClientConfig::default();
        assert_eq!(check(&on, &negotiated(Dialect::Smb311, mc), true), Ok(()));
        assert_eq!(check(&on, &negotiated(Dialect::Smb300, mc), true), Ok(()));
        assert_eq!(
            check(&on, &negotiated(Dialect::Smb210, mc), true),
            Err(Ineligible::Dialect(Dialect::Smb210))
        );
        assert_eq!(
            check(&on, &negotiated(Dialect::Smb311, 0), true),
            Err(Ineligible::ServerLacksCapability)
        );
        assert_eq!(
            check(&on, &negotiated(Dialect::Smb311, mc), false),
            Err(Ineligible::Unsigned)
        );
        let off = ClientConfig {
            multichannel: false,
            ..ClientConfig::default()
        };
        assert_eq!(
            check(&off, &negotiated(Dialect::Smb311, mc), true),
            Err(Ineligible::Disabled)
        );
        let one = ClientConfig {
            max_channels: 1,
            ..ClientConfig::default()
        };
        assert_eq!(
            check(&one, &negotiated(Dialect::Smb311, mc), true),
            Err(Ineligible::Disabled)
        );
        let words = Ineligible::Dialect(Dialect::Smb210).to_string();
        assert!(words.contains("2.1") && words.contains("3.0"), "{words}");
        assert!(Ineligible::ServerLacksCapability
            .to_string()
            .contains("server multi channel support"));
    }
}
