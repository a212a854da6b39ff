//! SMB3 cryptography: SP800-108 key derivation, the 3.1.1 preauth integrity hash, message
//! signing (HMAC-SHA256, AES-CMAC, AES-GMAC) and sealing (AES-128/256-CCM/GCM).
//!
//! Layout:
//! - [`kdf`]: the SP800-108 counter-mode KDF (MS-SMB2 3.1.4.2).
//! - [`preauth`]: the SHA-512 preauth integrity hash chain (MS-SMB2 3.2.5.2).
//! - [`keys`]: Session.SigningKey / EncryptionKey / DecryptionKey / ApplicationKey and
//!   Channel.SigningKey per dialect (MS-SMB2 3.2.5.3.1).
//! - [`signing`]: [`Signer`] computes and checks the 16-byte header signature (MS-SMB2 3.1.4.1,
//!   3.1.5.1), over a message held in several buffers without joining them.
//! - [`cipher`]: the small [`Aead`] trait and [`AeadKey`], which picks a backend.
//! - [`seal`]: [`Sealer`] turns SMB2 messages into TRANSFORM_HEADER messages and back
//!   (MS-SMB2 3.1.4.3, 3.2.5.1.1).
//!
//! Two implementations of AES-GCM, AES-GMAC and AES-CMAC exist: RustCrypto (always built) and
//! aws-lc-rs (feature `aws-lc`, the default, and faster). AES-CCM and HMAC-SHA256 always use
//! RustCrypto. [`CryptoBackend`] selects one explicitly, for tests and benchmarks.

use crate::codec::DecodeError;

#[cfg(feature = "aws-lc")]
mod awslc;
pub mod cipher;
mod gmac;
pub mod kdf;
pub mod keys;
pub mod preauth;
mod rustcrypto;
pub mod seal;
pub mod signing;
#[cfg(test)]
mod vectors;

pub use cipher::{Aead, AeadKey};
pub use keys::{
    derive_channel_signing_key, derive_session_keys, derive_signing_key, session_key_16,
    SessionKeys,
};
pub use preauth::PreauthHash;
pub use seal::Sealer;
pub use signing::Signer;

/// Length of every AEAD tag and message signature SMB uses.
pub const TAG_LEN: usize = 16;

/// Why a cryptographic operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// The AEAD tag did not match: the message was altered, or the wrong key or nonce was used.
    #[error("authentication tag mismatch: message altered or wrong key")]
    AuthenticationFailed,
    /// A key had a length the algorithm does not accept.
    #[error("{what}: invalid key length {len}")]
    InvalidKeyLength {
        /// Which key.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A nonce had the wrong length for the cipher (11 bytes for CCM, 12 for GCM).
    #[error("invalid nonce length {len} for {cipher:?}")]
    InvalidNonceLength {
        /// The cipher.
        cipher: crate::dialect::Cipher,
        /// The length given.
        len: usize,
    },
    /// The transform header could not be decoded (too short, wrong ProtocolId).
    #[error("malformed SMB2 TRANSFORM_HEADER: {0}")]
    MalformedTransform(#[from] DecodeError),
    /// Flags/EncryptionAlgorithm was not 0x0001 (Encrypted).
    #[error("unsupported TRANSFORM_HEADER Flags/EncryptionAlgorithm {0:#06x}")]
    UnsupportedTransformFlags(u16),
    /// OriginalMessageSize does not match the bytes that follow the transform header.
    #[error("OriginalMessageSize {declared} does not match the {actual} encrypted bytes present")]
    SizeMismatch {
        /// OriginalMessageSize from the header.
        declared: u32,
        /// Bytes actually present after the header.
        actual: usize,
    },
    /// A message is too large for the field that must describe it (OriginalMessageSize is 32-bit).
    #[error("message of {0} bytes is too large to encrypt")]
    MessageTooLarge(usize),
    /// A message to sign or verify is shorter than the 64-byte SMB2 header, or its first buffer
    /// does not hold the whole header.
    #[error("message shorter than the 64-byte SMB2 header ({0} bytes)")]
    MessageTooShort(usize),
    /// The requested backend was not compiled in (feature `aws-lc` off).
    #[error("crypto backend {0:?} is not available in this build")]
    BackendUnavailable(CryptoBackend),
    /// A Sealer has used up its nonce space (2^63 messages; unreachable in practice).
    #[error("nonce space exhausted for this key")]
    NonceExhausted,
    /// The operating system's random number generator failed.
    #[error("system random number generator failed")]
    Random,
    /// The arguments do not fit the dialect (e.g. 3.1.1 without a preauth hash, a cipher with
    /// SMB 2.1).
    #[error("{0}")]
    InvalidParameters(&'static str),
    /// The underlying library rejected the operation for a reason it does not name.
    #[error("cryptographic backend failure")]
    Backend,
}

/// Which implementation performs AES-GCM, AES-GMAC and AES-CMAC. AES-CCM and HMAC-SHA256 always
/// use RustCrypto whatever is chosen here (aws-lc-rs has no CCM; HMAC is for SMB 2.1 only).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum CryptoBackend {
    /// Pure-Rust RustCrypto crates (`aes-gcm`, `ccm`, `ghash`). Always available.
    RustCrypto,
    /// aws-lc-rs (feature `aws-lc`): hand-tuned assembly for AES-GCM, GHASH and AES.
    AwsLc,
}

impl CryptoBackend {
    /// Every backend compiled into this build.
    pub fn available() -> &'static [CryptoBackend] {
        #[cfg(feature = "aws-lc")]
        {
            &[CryptoBackend::RustCrypto, CryptoBackend::AwsLc]
        }
        #[cfg(not(feature = "aws-lc"))]
        {
            &[CryptoBackend::RustCrypto]
        }
    }

    /// Whether this backend was compiled in.
    pub fn is_available(self) -> bool {
        Self::available().contains(&self)
    }
}

impl Default for CryptoBackend {
    /// The fastest backend compiled in: aws-lc-rs when the `aws-lc` feature is on.
    fn default() -> Self {
        if cfg!(feature = "aws-lc") {
            CryptoBackend::AwsLc
        } else {
            CryptoBackend::RustCrypto
        }
    }
}

/// Key material of 1 to 32 bytes (SMB keys are 16 or 32). `Debug` does not print it, equality
/// is constant-time, and the bytes are overwritten when it is dropped.
#[derive(Clone)]
pub struct SecretKey {
    bytes: [u8; 32],
    len: u8,
}

impl SecretKey {
    /// Largest key this type holds.
    pub const MAX_LEN: usize = 32;

    /// Copy `bytes` (1 to 32 bytes) into a key.
    pub fn new(bytes: &[u8]) -> Result<Self, CryptoError> {
        if bytes.is_empty() || bytes.len() > Self::MAX_LEN {
            return Err(CryptoError::InvalidKeyLength {
                what: "secret key",
                len: bytes.len(),
            });
        }
        let mut out = SecretKey {
            bytes: [0; 32],
            len: bytes.len() as u8,
        };
        out.bytes[..bytes.len()].copy_from_slice(bytes);
        Ok(out)
    }

    /// The key bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Always false: a key has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl PartialEq for SecretKey {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && ct_eq(self.as_bytes(), other.as_bytes())
    }
}

impl Eq for SecretKey {}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey({} bytes)", self.len)
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.bytes = [0; 32];
        // Keep the compiler from treating the store as dead (best effort without `unsafe`).
        std::hint::black_box(&self.bytes);
    }
}

/// Constant-time equality of two byte strings (the length is not secret).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_key_lengths_and_redacted_debug() {
        assert!(SecretKey::new(&[]).is_err());
        assert!(SecretKey::new(&[1; 33]).is_err());
        let k = SecretKey::new(&[7; 16]).unwrap();
        assert_eq!(k.len(), 16);
        assert_eq!(k.as_bytes(), &[7; 16]);
        assert_eq!(format!("{k:?}"), "SecretKey(16 bytes)");
        assert_eq!(k, SecretKey::new(&[7; 16]).unwrap());
        assert_ne!(k, SecretKey::new(&[7; 32]).unwrap());
        assert_ne!(k, SecretKey::new(&[8; 16]).unwrap());
    }

    #[test]
    fn ct_eq_compares_content_and_length() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
        assert!(ct_eq(b"", b""));
    }

    /// Keys are shared between the tasks of a session (channels, readers, writers).
    #[test]
    fn shared_types_are_send_and_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<Signer>();
        check::<Sealer>();
        check::<AeadKey>();
        check::<PreauthHash>();
        check::<SessionKeys>();
    }

    #[test]
    fn default_backend_is_available() {
        assert!(CryptoBackend::default().is_available());
        assert!(CryptoBackend::RustCrypto.is_available());
        assert_eq!(
            CryptoBackend::AwsLc.is_available(),
            cfg!(feature = "aws-lc")
        );
    }
}
