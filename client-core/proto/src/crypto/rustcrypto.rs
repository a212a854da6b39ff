//! RustCrypto backend for the four SMB ciphers (`ccm` and `aes-gcm` crates, `AeadInOut` API).

use aes::{Aes128, Aes256};
use aes_gcm::aead::consts::{U11, U16};
use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use ccm::Ccm;

use super::{CryptoError, TAG_LEN};
use crate::dialect::Cipher;

/// AES-128-CCM with SMB's parameters: 16-byte tag (M = 16), 11-byte nonce (L = 4, so messages
/// up to 4 GiB; MS-SMB2 2.2.41).
type Aes128Ccm = Ccm<Aes128, U16, U11>;
/// AES-256-CCM, same parameters.
type Aes256Ccm = Ccm<Aes256, U16, U11>;

/// One keyed RustCrypto cipher.
pub(crate) enum RustCryptoAead {
    Aes128Ccm(Aes128Ccm),
    Aes128Gcm(Aes128Gcm),
    Aes256Ccm(Aes256Ccm),
    Aes256Gcm(Aes256Gcm),
}

impl RustCryptoAead {
    /// `key` must already have the cipher's length (checked by the caller, re-checked here).
    pub(crate) fn new(cipher: Cipher, key: &[u8]) -> Result<Self, CryptoError> {
        let bad_key = |_| CryptoError::InvalidKeyLength {
            what: "cipher key",
            len: key.len(),
        };
        Ok(match cipher {
            Cipher::Aes128Ccm => Self::Aes128Ccm(Aes128Ccm::new_from_slice(key).map_err(bad_key)?),
            Cipher::Aes128Gcm => Self::Aes128Gcm(Aes128Gcm::new_from_slice(key).map_err(bad_key)?),
            Cipher::Aes256Ccm => Self::Aes256Ccm(Aes256Ccm::new_from_slice(key).map_err(bad_key)?),
            Cipher::Aes256Gcm => Self::Aes256Gcm(Aes256Gcm::new_from_slice(key).map_err(bad_key)?),
        })
    }

    pub(crate) fn cipher(&self) -> Cipher {
        match self {
            Self::Aes128Ccm(_) => Cipher::Aes128Ccm,
            Self::Aes128Gcm(_) => Cipher::Aes128Gcm,
            Self::Aes256Ccm(_) => Cipher::Aes256Ccm,
            Self::Aes256Gcm(_) => Cipher::Aes256Gcm,
        }
    }

    pub(crate) fn seal_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        let cipher = self.cipher();
        match self {
            Self::Aes128Ccm(k) => seal(k, cipher, nonce, aad, buf),
            Self::Aes128Gcm(k) => seal(k, cipher, nonce, aad, buf),
            Self::Aes256Ccm(k) => seal(k, cipher, nonce, aad, buf),
            Self::Aes256Gcm(k) => seal(k, cipher, nonce, aad, buf),
        }
    }

    pub(crate) fn open_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        let cipher = self.cipher();
        match self {
            Self::Aes128Ccm(k) => open(k, cipher, nonce, aad, buf, tag),
            Self::Aes128Gcm(k) => open(k, cipher, nonce, aad, buf, tag),
            Self::Aes256Ccm(k) => open(k, cipher, nonce, aad, buf, tag),
            Self::Aes256Gcm(k) => open(k, cipher, nonce, aad, buf, tag),
        }
    }
}

fn nonce_of<A: AeadInOut>(
    cipher: Cipher,
    nonce: &[u8],
) -> Result<aes_gcm::aead::Nonce<A>, CryptoError> {
    aes_gcm::aead::Nonce::<A>::try_from(nonce).map_err(|_| CryptoError::InvalidNonceLength {
        cipher,
        len: nonce.len(),
    })
}

fn seal<A: AeadInOut>(
    key: &A,
    cipher: Cipher,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
) -> Result<[u8; TAG_LEN], CryptoError> {
    let nonce = nonce_of::<A>(cipher, nonce)?;
    let len = buf.len();
    // The only failure RustCrypto reports here is a message over the mode's length limit.
    let tag = key
        .encrypt_inout_detached(&nonce, aad, buf.into())
        .map_err(|_| CryptoError::MessageTooLarge(len))?;
    tag.as_slice().try_into().map_err(|_| CryptoError::Backend)
}

fn open<A: AeadInOut>(
    key: &A,
    cipher: Cipher,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8; TAG_LEN],
) -> Result<(), CryptoError> {
    let nonce = nonce_of::<A>(cipher, nonce)?;
    let tag = aes_gcm::aead::Tag::<A>::try_from(&tag[..]).map_err(|_| CryptoError::Backend)?;
    key.decrypt_inout_detached(&nonce, aad, buf.into(), &tag)
        .map_err(|_| CryptoError::AuthenticationFailed)
}
