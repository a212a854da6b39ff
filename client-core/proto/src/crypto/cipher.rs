//! The AEAD ciphers SMB3 encrypts with (MS-SMB2 2.2.3.1.2, 3.1.4.3): AES-128/256 in CCM mode
//! (11-byte nonce, 16-byte tag) and GCM mode (12-byte nonce, 16-byte tag).
//!
//! [`Aead`] is the one operation pair the transform layer needs: encrypt or decrypt a buffer in
//! place with a detached tag. [`AeadKey`] is a keyed cipher on the chosen [`CryptoBackend`].

use super::{CryptoBackend, CryptoError, TAG_LEN};
use crate::dialect::Cipher;

/// An AEAD cipher bound to a key.
pub trait Aead: Send + Sync {
    /// The cipher this key is for.
    fn cipher(&self) -> Cipher;

    /// Encrypt `buf` in place and return the 16-byte tag, which authenticates `buf` and `aad`.
    /// `nonce` must be [`Cipher::nonce_len`] bytes and never repeat for this key.
    fn seal_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError>;

    /// Check `tag` against `buf` (ciphertext) and `aad`, then decrypt `buf` in place. On
    /// [`CryptoError::AuthenticationFailed`] the content of `buf` is unspecified and must be
    /// discarded.
    fn open_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError>;
}

/// A cipher key on a concrete backend. CCM always runs on RustCrypto (aws-lc-rs has no CCM);
/// GCM runs on the backend asked for.
pub struct AeadKey {
    inner: Inner,
}

enum Inner {
    // Boxed: the RustCrypto key schedules are several hundred bytes; built once per key.
    RustCrypto(Box<super::rustcrypto::RustCryptoAead>),
    #[cfg(feature = "aws-lc")]
    AwsLc(super::awslc::AwsLcGcm),
}

impl AeadKey {
    /// Key `cipher` with `key` (16 bytes for AES-128, 32 for AES-256).
    pub fn new(cipher: Cipher, key: &[u8], backend: CryptoBackend) -> Result<Self, CryptoError> {
        if key.len() != cipher.key_len() {
            return Err(CryptoError::InvalidKeyLength {
                what: "cipher key",
                len: key.len(),
            });
        }
        if !backend.is_available() {
            return Err(CryptoError::BackendUnavailable(backend));
        }
        let is_gcm = matches!(cipher, Cipher::Aes128Gcm | Cipher::Aes256Gcm);
        let inner = match backend {
            #[cfg(feature = "aws-lc")]
            CryptoBackend::AwsLc if is_gcm => {
                Inner::AwsLc(super::awslc::AwsLcGcm::new(cipher, key)?)
            }
            _ => {
                let _ = is_gcm;
                Inner::RustCrypto(Box::new(super::rustcrypto::RustCryptoAead::new(
                    cipher, key,
                )?))
            }
        };
        Ok(AeadKey { inner })
    }

    /// The backend that actually runs this cipher (RustCrypto for CCM whatever was asked).
    pub fn backend(&self) -> CryptoBackend {
        match self.inner {
            Inner::RustCrypto(_) => CryptoBackend::RustCrypto,
            #[cfg(feature = "aws-lc")]
            Inner::AwsLc(_) => CryptoBackend::AwsLc,
        }
    }
}

impl std::fmt::Debug for AeadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AeadKey")
            .field("cipher", &self.cipher())
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Aead for AeadKey {
    fn cipher(&self) -> Cipher {
        match &self.inner {
            Inner::RustCrypto(k) => k.cipher(),
            #[cfg(feature = "aws-lc")]
            Inner::AwsLc(k) => k.cipher(),
        }
    }

    fn seal_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        match &self.inner {
            Inner::RustCrypto(k) => k.seal_in_place(nonce, aad, buf),
            #[cfg(feature = "aws-lc")]
            Inner::AwsLc(k) => k.seal_in_place(nonce, aad, buf),
        }
    }

    fn open_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        match &self.inner {
            Inner::RustCrypto(k) => k.open_in_place(nonce, aad, buf, tag),
            #[cfg(feature = "aws-lc")]
            Inner::AwsLc(k) => k.open_in_place(nonce, aad, buf, tag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::vectors::{gcm, hx};

    const ALL: [Cipher; 4] = [
        Cipher::Aes128Ccm,
        Cipher::Aes128Gcm,
        Cipher::Aes256Ccm,
        Cipher::Aes256Gcm,
    ];

    fn key_for(cipher: Cipher) -> Vec<u8> {
        (0..cipher.key_len() as u8)
            .map(|b| b.wrapping_mul(7))
            .collect()
    }

    /// McGrew/Viega GCM test cases and a NIST CAVP GMAC case, on every backend.
    #[test]
    fn gcm_vectors_on_every_backend() {
        for &backend in CryptoBackend::available() {
            for (i, (key, iv, pt, aad, ct, tag)) in gcm::CASES.iter().enumerate() {
                let key = hx(key);
                let cipher = if key.len() == 16 {
                    Cipher::Aes128Gcm
                } else {
                    Cipher::Aes256Gcm
                };
                let k = AeadKey::new(cipher, &key, backend).unwrap();
                assert_eq!(k.backend(), backend);
                let mut buf = hx(pt);
                let got = k.seal_in_place(&hx(iv), &hx(aad), &mut buf).unwrap();
                assert_eq!(hex::encode(&buf), *ct, "case {i} on {backend:?}");
                assert_eq!(hex::encode(got), *tag, "case {i} on {backend:?}");
                k.open_in_place(&hx(iv), &hx(aad), &mut buf, &got).unwrap();
                assert_eq!(hex::encode(&buf), *pt);
            }
        }
    }

    /// Every cipher on every backend: round trip, cross-backend agreement, and one flipped bit
    /// anywhere (ciphertext, tag, AAD, nonce) fails to open.
    #[test]
    fn round_trip_cross_backend_and_tamper() {
        let msg: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 251) as u8).collect();
        let aad = [0x5Au8; 32];
        for cipher in ALL {
            let nonce = vec![0x11u8; cipher.nonce_len()];
            let mut reference: Option<(Vec<u8>, [u8; 16])> = None;
            for &backend in CryptoBackend::available() {
                let k = AeadKey::new(cipher, &key_for(cipher), backend).unwrap();
                assert_eq!(k.cipher(), cipher);
                let mut buf = msg.clone();
                let tag = k.seal_in_place(&nonce, &aad, &mut buf).unwrap();
                assert_ne!(buf, msg);
                match &reference {
                    None => reference = Some((buf.clone(), tag)),
                    Some((ct, t)) => {
                        assert_eq!(&buf, ct, "{cipher:?}: backends disagree");
                        assert_eq!(&tag, t, "{cipher:?}: backends disagree on the tag");
                    }
                }

                let mut ok = buf.clone();
                k.open_in_place(&nonce, &aad, &mut ok, &tag).unwrap();
                assert_eq!(ok, msg);

                let mut bad = buf.clone();
                bad[500] ^= 0x01;
                assert_eq!(
                    k.open_in_place(&nonce, &aad, &mut bad, &tag),
                    Err(CryptoError::AuthenticationFailed)
                );
                let mut bad_tag = tag;
                bad_tag[15] ^= 0x80;
                assert!(k
                    .open_in_place(&nonce, &aad, &mut buf.clone(), &bad_tag)
                    .is_err());
                let mut bad_aad = aad;
                bad_aad[0] ^= 0x01;
                assert!(k
                    .open_in_place(&nonce, &bad_aad, &mut buf.clone(), &tag)
                    .is_err());
                let mut bad_nonce = nonce.clone();
                bad_nonce[0] ^= 0x01;
                assert!(k
                    .open_in_place(&bad_nonce, &aad, &mut buf.clone(), &tag)
                    .is_err());
            }
        }
    }

    #[test]
    fn ccm_always_runs_on_rustcrypto() {
        for cipher in [Cipher::Aes128Ccm, Cipher::Aes256Ccm] {
            for &backend in CryptoBackend::available() {
                let k = AeadKey::new(cipher, &key_for(cipher), backend).unwrap();
                assert_eq!(k.backend(), CryptoBackend::RustCrypto);
            }
        }
    }

    #[test]
    fn rejects_bad_key_and_nonce_lengths() {
        for cipher in ALL {
            for &backend in CryptoBackend::available() {
                let wrong = vec![0u8; if cipher.key_len() == 16 { 32 } else { 16 }];
                assert!(matches!(
                    AeadKey::new(cipher, &wrong, backend),
                    Err(CryptoError::InvalidKeyLength { .. })
                ));
                let k = AeadKey::new(cipher, &key_for(cipher), backend).unwrap();
                let mut buf = [0u8; 8];
                for len in [0, cipher.nonce_len() - 1, cipher.nonce_len() + 1, 16] {
                    assert!(matches!(
                        k.seal_in_place(&vec![0; len], b"", &mut buf),
                        Err(CryptoError::InvalidNonceLength { .. })
                    ));
                    assert!(matches!(
                        k.open_in_place(&vec![0; len], b"", &mut buf, &[0; 16]),
                        Err(CryptoError::InvalidNonceLength { .. })
                    ));
                }
            }
        }
    }

    #[cfg(not(feature = "aws-lc"))]
    #[test]
    fn aws_lc_unavailable_without_feature() {
        assert_eq!(
            AeadKey::new(Cipher::Aes128Gcm, &[0; 16], CryptoBackend::AwsLc).unwrap_err(),
            CryptoError::BackendUnavailable(CryptoBackend::AwsLc)
        );
    }
}
