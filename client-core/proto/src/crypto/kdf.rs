//! MS-SMB2 3.1.4.2 Generating Cryptographic Keys: the key derivation function of
//! [SP800-108] section 5.1 (KDF in counter mode) with HMAC-SHA256 as the PRF, r = 32.
//!
//! Each 32-byte block i (starting at 1) is
//! `HMAC-SHA256(Ki, [i]_32be || Label || 0x00 || Context || [L]_32be)` where L is the output
//! length in bits. SMB labels already end in a NUL (e.g. "SMB2AESCMAC\0"), so the input holds that
//! NUL followed by the SP800-108 separator byte: two zero bytes in a row.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::CryptoError;

type HmacSha256 = Hmac<Sha256>;

/// Bytes one PRF invocation yields.
const BLOCK: usize = 32;

/// Fill `out` with `out.len()` bytes derived from `key` (SP800-108 counter mode, HMAC-SHA256).
/// SMB asks for 16 bytes (L = 128) or, for AES-256 cipher keys, 32 bytes (L = 256).
pub fn kdf(key: &[u8], label: &[u8], context: &[u8], out: &mut [u8]) -> Result<(), CryptoError> {
    let bits = u32::try_from(out.len())
        .ok()
        .and_then(|n| n.checked_mul(8))
        .filter(|&bits| bits > 0)
        .ok_or(CryptoError::InvalidParameters(
            "KDF output length must be 1..2^29 bytes",
        ))?;
    let keyed = <HmacSha256 as KeyInit>::new_from_slice(key).map_err(|_| {
        CryptoError::InvalidKeyLength {
            what: "KDF key",
            len: key.len(),
        }
    })?;
    for (i, chunk) in out.chunks_mut(BLOCK).enumerate() {
        // i counts from 1; the output length bound above keeps it well inside u32.
        let counter = (i as u32) + 1;
        let mut prf = keyed.clone();
        prf.update(&counter.to_be_bytes());
        prf.update(label);
        prf.update(&[0]);
        prf.update(context);
        prf.update(&bits.to_be_bytes());
        let block = prf.finalize().into_bytes();
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Source: Microsoft, "SMB 2 and SMB 3 security in Windows 10: the anatomy of signing and
    /// cryptographic keys", Appendix "Key derivation example for SMB 3.0 multichannel":
    /// SessionKey 7CD451825D0450D235424E44BA6E78CC -> SigningKey 0B7E9C5CAC36C0F6EA9AB275298CEDCE
    /// with Label "SMB2AESCMAC\0", Context "SmbSign\0".
    #[test]
    fn smb30_signing_key_vector() {
        let key = hex::decode("7CD451825D0450D235424E44BA6E78CC").unwrap();
        let mut out = [0u8; 16];
        kdf(&key, b"SMB2AESCMAC\0", b"SmbSign\0", &mut out).unwrap();
        assert_eq!(hex::encode_upper(out), "0B7E9C5CAC36C0F6EA9AB275298CEDCE");
    }

    /// The L field is part of the PRF input, so a 256-bit output is not the 128-bit output
    /// extended; and the second 32-byte block uses counter 2.
    #[test]
    fn length_is_bound_into_the_output() {
        let mut short = [0u8; 16];
        let mut long = [0u8; 32];
        let mut longer = [0u8; 48];
        kdf(b"k", b"L\0", b"C\0", &mut short).unwrap();
        kdf(b"k", b"L\0", b"C\0", &mut long).unwrap();
        kdf(b"k", b"L\0", b"C\0", &mut longer).unwrap();
        assert_ne!(short[..], long[..16]);
        assert_ne!(long[..], longer[..32]);

        // Recompute block 2 of the 48-byte output by hand.
        let mut prf = <HmacSha256 as KeyInit>::new_from_slice(b"k").unwrap();
        prf.update(&2u32.to_be_bytes());
        prf.update(b"L\0\0C\0");
        prf.update(&384u32.to_be_bytes());
        let block2 = prf.finalize().into_bytes();
        assert_eq!(longer[32..], block2[..16]);
    }

    #[test]
    fn rejects_empty_output() {
        assert!(kdf(b"k", b"L", b"C", &mut []).is_err());
    }
}
