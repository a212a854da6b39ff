//! aws-lc-rs backend: AES-128/256-GCM and AES-128-GMAC (GCM with an empty plaintext).

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};

use super::{CryptoError, TAG_LEN};
use crate::dialect::Cipher;

/// A keyed aws-lc-rs AES-GCM cipher. `LessSafeKey` because SMB chooses its own nonces (the
/// Sealer's counter, or the MessageId for GMAC).
pub(crate) struct AwsLcGcm {
    key: LessSafeKey,
    cipher: Cipher,
}

impl AwsLcGcm {
    pub(crate) fn new(cipher: Cipher, key: &[u8]) -> Result<Self, CryptoError> {
        let algorithm = match cipher {
            Cipher::Aes128Gcm => &AES_128_GCM,
            Cipher::Aes256Gcm => &AES_256_GCM,
            Cipher::Aes128Ccm | Cipher::Aes256Ccm => {
                return Err(CryptoError::InvalidParameters(
                    "aws-lc-rs backend has no AES-CCM",
                ))
            }
        };
        let unbound =
            UnboundKey::new(algorithm, key).map_err(|_| CryptoError::InvalidKeyLength {
                what: "cipher key",
                len: key.len(),
            })?;
        Ok(AwsLcGcm {
            key: LessSafeKey::new(unbound),
            cipher,
        })
    }

    pub(crate) fn cipher(&self) -> Cipher {
        self.cipher
    }

    fn nonce(&self, nonce: &[u8]) -> Result<Nonce, CryptoError> {
        Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptoError::InvalidNonceLength {
            cipher: self.cipher,
            len: nonce.len(),
        })
    }

    pub(crate) fn seal_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        let len = buf.len();
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(nonce)?, Aad::from(aad), buf)
            .map_err(|_| CryptoError::MessageTooLarge(len))?;
        tag.as_ref().try_into().map_err(|_| CryptoError::Backend)
    }

    pub(crate) fn open_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        self.key
            .open_in_place_separate_tag(self.nonce(nonce)?, Aad::from(aad), tag, buf)
            .map(|_| ())
            .map_err(|_| CryptoError::AuthenticationFailed)
    }

    /// GMAC: the GCM tag of an empty plaintext with `message` as AAD (MS-SMB2 3.1.4.1).
    pub(crate) fn gmac(
        &self,
        nonce: &[u8; 12],
        message: &[u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        self.seal_in_place(nonce, message, &mut [])
    }
}

/// aws-lc-rs AES-128-CMAC (RFC 4493), fed piece by piece.
#[derive(Clone)]
pub(crate) struct AwsLcCmac {
    key: aws_lc_rs::cmac::Key,
}

impl AwsLcCmac {
    pub(crate) fn new(key: &[u8]) -> Result<Self, CryptoError> {
        let key = aws_lc_rs::cmac::Key::new(aws_lc_rs::cmac::AES_128, key).map_err(|_| {
            CryptoError::InvalidKeyLength {
                what: "AES-CMAC signing key",
                len: key.len(),
            }
        })?;
        Ok(AwsLcCmac { key })
    }

    /// The CMAC of the concatenation of `pieces`; `None` if aws-lc reports a failure (the
    /// caller then falls back to RustCrypto).
    pub(crate) fn mac<'a>(
        &self,
        pieces: impl IntoIterator<Item = &'a [u8]>,
    ) -> Option<[u8; TAG_LEN]> {
        let mut ctx = aws_lc_rs::cmac::Context::with_key(&self.key);
        for piece in pieces {
            ctx.update(piece).ok()?;
        }
        ctx.sign().ok()?.as_ref().try_into().ok()
    }
}
