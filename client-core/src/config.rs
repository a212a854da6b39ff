//! All client settings in one struct, with defaults that match Windows (DESIGN §2).

use std::time::Duration;

use smb3_proto::{Cipher, Dialect, SigningAlgorithm};

/// Client settings. `ClientConfig::default()` is what a Windows client would do.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Lowest dialect offered.
    pub min_dialect: Dialect,
    /// Highest dialect offered.
    pub max_dialect: Dialect,
    /// Require every reply to be signed even when the server does not insist.
    pub require_signing: bool,
    /// Encrypt the whole session (SMB 3.x), even on shares that do not require it.
    pub encrypt: bool,
    /// Ciphers offered on 3.1.1, most preferred first.
    pub ciphers: Vec<Cipher>,
    /// Signing algorithms offered on 3.1.1, most preferred first. AES-GMAC comes first: AES-CMAC
    /// caps a channel near 1 GB/s per core (DESIGN §6).
    pub signing_algorithms: Vec<SigningAlgorithm>,
    /// Accept a guest session when the server maps the user to guest.
    pub allow_guest: bool,
    /// Bytes per READ/WRITE request; clamped to what the server negotiates (8 MiB on Samba).
    pub io_size: u32,
    /// Requests one file stream keeps in flight.
    pub io_depth: usize,
    /// Credits each channel tries to hold (× 64 KiB = bytes in flight).
    pub credit_target: u32,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Base time a request may take; large I/O gets more (see `timeout_for`).
    pub request_timeout: Duration,
    /// Request durable handles (v2) on opens, so they survive a lost connection.
    pub durable_handles: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            min_dialect: Dialect::Smb210,
            max_dialect: Dialect::Smb311,
            require_signing: false,
            encrypt: false,
            ciphers: vec![
                Cipher::Aes128Gcm,
                Cipher::Aes256Gcm,
                Cipher::Aes128Ccm,
                Cipher::Aes256Ccm,
            ],
            signing_algorithms: vec![
                SigningAlgorithm::AesGmac,
                SigningAlgorithm::AesCmac,
                SigningAlgorithm::HmacSha256,
            ],
            allow_guest: false,
            io_size: 1024 * 1024,
            io_depth: 16,
            credit_target: 512,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            durable_handles: true,
        }
    }
}

impl ClientConfig {
    /// Dialects offered, oldest first.
    pub fn dialects(&self) -> Vec<Dialect> {
        Dialect::ALL
            .into_iter()
            .filter(|d| *d >= self.min_dialect && *d <= self.max_dialect)
            .collect()
    }

    /// Timeout for a request moving `bytes`: the base plus one second per MiB, so an 8 MiB
    /// read on a slow link is not mistaken for a dead server.
    pub(crate) fn timeout_for(&self, bytes: u32) -> Duration {
        self.request_timeout + Duration::from_secs(u64::from(bytes) / (1024 * 1024))
    }
}
