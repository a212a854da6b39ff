//! AES-128-GMAC for SMB 3.1.1 signing (MS-SMB2 3.1.4.1, SigningAlgorithmId 0x0002).
//!
//! GMAC is AES-GCM with an empty plaintext: `tag = GHASH_H(A || pad || [len(A)]64 || [0]64)
//! XOR E_K(J0)` with `H = E_K(0^128)` and `J0 = nonce || 0x00000001` (NIST SP 800-38D).
//!
//! An SMB message to sign is usually in pieces (a copy of the header with the Signature field
//! zeroed, the rest of the first buffer, a WRITE payload), and AEAD APIs, aws-lc-rs's and
//! `aes-gcm`'s alike, take the AAD as one slice. Joining would copy the payload, so
//! [`SoftGmac`] feeds GHASH piece by piece instead. When the message *is* one contiguous slice,
//! the aws-lc-rs backend computes the same tag faster.

use aes::cipher::{BlockCipherEncrypt, KeyInit as _};
use aes::Aes128;
use ghash::universal_hash::UniversalHash;
use ghash::GHash;

use super::{CryptoBackend, CryptoError, TAG_LEN};

/// GHASH block size.
const BLOCK: usize = 16;

/// Streaming AES-128-GMAC on RustCrypto (`aes` + `ghash`).
#[derive(Clone)]
pub(crate) struct SoftGmac {
    aes: Aes128,
    /// GHASH keyed with H = E_K(0); cloned for each message.
    ghash: GHash,
}

impl SoftGmac {
    pub(crate) fn new(key: &[u8]) -> Result<Self, CryptoError> {
        let aes = Aes128::new_from_slice(key).map_err(|_| CryptoError::InvalidKeyLength {
            what: "AES-GMAC signing key",
            len: key.len(),
        })?;
        let mut h = ghash::Block::default();
        aes.encrypt_block(&mut h);
        let ghash = GHash::new(&h);
        Ok(SoftGmac { aes, ghash })
    }

    /// The GMAC of the concatenation of `parts`.
    pub(crate) fn compute<'a>(
        &self,
        nonce: &[u8; 12],
        parts: impl IntoIterator<Item = &'a [u8]>,
    ) -> [u8; TAG_LEN] {
        let mut stream = GhashStream {
            ghash: self.ghash.clone(),
            pending: [0; BLOCK],
            pending_len: 0,
            total: 0,
        };
        for part in parts {
            stream.absorb(part);
        }
        let s = stream.finish();

        let mut j0 = ghash::Block::default();
        j0[..12].copy_from_slice(nonce);
        j0[15] = 1;
        self.aes.encrypt_block(&mut j0);

        let mut tag = [0u8; TAG_LEN];
        for (t, (a, b)) in tag.iter_mut().zip(s.iter().zip(j0.iter())) {
            *t = a ^ b;
        }
        tag
    }
}

/// GHASH over a byte stream cut at arbitrary places: bytes that do not fill a block wait in
/// `pending` for the next piece, so the result is that of the concatenation.
struct GhashStream {
    ghash: GHash,
    pending: [u8; BLOCK],
    pending_len: usize,
    total: u64,
}

impl GhashStream {
    fn absorb(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.pending_len > 0 {
            let take = (BLOCK - self.pending_len).min(data.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&data[..take]);
            self.pending_len += take;
            data = &data[take..];
            if self.pending_len < BLOCK {
                return;
            }
            self.ghash
                .update(std::slice::from_ref(&ghash::Block::from(self.pending)));
            self.pending_len = 0;
        }
        let whole = data.len() - data.len() % BLOCK;
        // A multiple of the block size, so `update_padded` adds no padding: the bulk path.
        self.ghash.update_padded(&data[..whole]);
        let rest = &data[whole..];
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    fn finish(mut self) -> ghash::Block {
        if self.pending_len > 0 {
            self.ghash.update_padded(&self.pending[..self.pending_len]);
        }
        // Length block: bit length of the AAD, then of the (empty) ciphertext, both 64-bit BE.
        let mut lengths = [0u8; BLOCK];
        lengths[..8].copy_from_slice(&(self.total * 8).to_be_bytes());
        self.ghash
            .update(std::slice::from_ref(&ghash::Block::from(lengths)));
        self.ghash.finalize()
    }
}

/// AES-128-GMAC on the chosen backend. Pieces always go through [`SoftGmac`]; a contiguous
/// message goes through aws-lc-rs when that backend was chosen.
#[derive(Clone)]
pub(crate) struct Gmac {
    soft: SoftGmac,
    #[cfg(feature = "aws-lc")]
    aws: Option<std::sync::Arc<super::awslc::AwsLcGcm>>,
}

impl Gmac {
    pub(crate) fn new(key: &[u8], backend: CryptoBackend) -> Result<Self, CryptoError> {
        if !backend.is_available() {
            return Err(CryptoError::BackendUnavailable(backend));
        }
        Ok(Gmac {
            soft: SoftGmac::new(key)?,
            #[cfg(feature = "aws-lc")]
            aws: match backend {
                CryptoBackend::AwsLc => Some(std::sync::Arc::new(super::awslc::AwsLcGcm::new(
                    crate::dialect::Cipher::Aes128Gcm,
                    key,
                )?)),
                CryptoBackend::RustCrypto => None,
            },
        })
    }

    /// The backend used for contiguous messages.
    pub(crate) fn backend(&self) -> CryptoBackend {
        #[cfg(feature = "aws-lc")]
        if self.aws.is_some() {
            return CryptoBackend::AwsLc;
        }
        CryptoBackend::RustCrypto
    }

    /// GMAC of a message held in pieces.
    pub(crate) fn compute_parts<'a>(
        &self,
        nonce: &[u8; 12],
        parts: impl IntoIterator<Item = &'a [u8]>,
    ) -> [u8; TAG_LEN] {
        self.soft.compute(nonce, parts)
    }

    /// GMAC of one contiguous message.
    pub(crate) fn compute_contiguous(&self, nonce: &[u8; 12], message: &[u8]) -> [u8; TAG_LEN] {
        #[cfg(feature = "aws-lc")]
        if let Some(aws) = &self.aws {
            // Sealing an empty buffer only fails for an AAD past 2^61 bytes; fall back anyway.
            if let Ok(tag) = aws.gmac(nonce, message) {
                return tag;
            }
        }
        self.soft.compute(nonce, [message])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::vectors::{gcm, hx};
    use aes_gcm::aead::{AeadInOut, KeyInit};

    /// The reference: `aes-gcm`'s own tag for an empty plaintext.
    fn reference(key: &[u8], nonce: &[u8; 12], aad: &[u8]) -> [u8; 16] {
        let k = aes_gcm::Aes128Gcm::new_from_slice(key).unwrap();
        let tag = k
            .encrypt_inout_detached(&(*nonce).into(), aad, (&mut [][..]).into())
            .unwrap();
        tag.into()
    }

    /// NIST CAVP gcmEncryptExtIV128 PTlen=0 AADlen=128 Count=0, and McGrew/Viega test case 1.
    #[test]
    fn nist_gmac_vectors() {
        for &backend in CryptoBackend::available() {
            for case in [gcm::CASES[0], gcm::CASES[5]] {
                let (key, iv, _, aad, _, tag) = case;
                let g = Gmac::new(&hx(key), backend).unwrap();
                let nonce: [u8; 12] = hx(iv).try_into().unwrap();
                assert_eq!(hex::encode(g.compute_contiguous(&nonce, &hx(aad))), tag);
                assert_eq!(hex::encode(g.compute_parts(&nonce, [&hx(aad)[..]])), tag);
            }
        }
    }

    /// Streaming over arbitrary cuts equals the one-shot tag of every implementation.
    #[test]
    fn pieces_equal_contiguous_on_all_implementations() {
        let key = hx("00112233445566778899aabbccddeeff");
        let nonce = [7u8; 12];
        for len in [0usize, 1, 15, 16, 17, 63, 64, 65, 100, 1000, 4096 + 3] {
            let msg: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
            let expected = reference(&key, &nonce, &msg);
            for &backend in CryptoBackend::available() {
                let g = Gmac::new(&key, backend).unwrap();
                assert_eq!(g.backend(), backend);
                assert_eq!(g.compute_contiguous(&nonce, &msg), expected, "len {len}");
                for cuts in [(0, 0), (1, 1), (64, 64), (3, 50), (17, 33), (len, len)] {
                    let a = cuts.0.min(len);
                    let b = cuts.1.clamp(a, len);
                    let pieces = [&msg[..a], &msg[a..b], &[][..], &msg[b..]];
                    assert_eq!(
                        g.compute_parts(&nonce, pieces),
                        expected,
                        "len {len} cuts {cuts:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn rejects_bad_key_length() {
        assert!(Gmac::new(&[0; 32], CryptoBackend::RustCrypto).is_err());
        assert!(Gmac::new(&[0; 15], CryptoBackend::default()).is_err());
    }
}
