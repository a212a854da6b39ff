//! Encrypting and decrypting whole SMB2 messages (MS-SMB2 3.1.4.3 Encrypting the Message,
//! 3.2.5.1.1 Decrypting the Message).
//!
//! A sealed message is a TRANSFORM_HEADER ([`crate::msg::transform`]) followed by the encrypted
//! SMB2 message (one message or a whole compound). The AEAD input is:
//! - nonce: the first 11 (CCM) or 12 (GCM) bytes of the header's Nonce field;
//! - AAD: the 32 header bytes from Nonce to the end of SessionId;
//! - plaintext: the SMB2 message; the tag goes into the header's Signature field.
//!
//! # Nonces
//!
//! AES-GCM and AES-CCM are broken by a (key, nonce) pair used twice: GCM leaks the XOR of the
//! two plaintexts and lets an observer forge tags. MS-SMB2 only says the Nonce "MUST NOT be
//! reused" within a session, and an encryption key is shared by every channel of a session
//! (MS-SMB2 3.2.5.3.1: bound channels copy the session's keys). So a `Sealer` builds each nonce
//! from:
//! - a 64-bit counter, atomically incremented per message, which makes nonces from one
//!   `Sealer` distinct for 2^63 messages whatever the number of tasks sharing it (a random
//!   nonce would only be safe for about 2^32 messages per key, NIST SP 800-38D 8.3); and
//! - a random base drawn from the OS when the `Sealer` is created, XORed with the counter (the
//!   TLS 1.3 construction). Two `Sealer`s created for the same key (one per channel, or one
//!   re-created after a reconnect) then start from unrelated points of the 88/96-bit nonce
//!   space, so their nonces do not collide either, except with negligible probability.
//!
//! Share one `Sealer` (e.g. in an `Arc`) across the channels of a session where possible.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Buf, BufMut, BytesMut};

use super::cipher::{Aead, AeadKey};
use super::{CryptoBackend, CryptoError, TAG_LEN};
use crate::dialect::Cipher;
use crate::msg::transform::{
    TransformFlags, TransformHeader, TRANSFORM_AAD_LEN, TRANSFORM_HEADER_LEN,
    TRANSFORM_NONCE_OFFSET, TRANSFORM_SIGNATURE_OFFSET,
};

/// Counter values at or above this are refused, far before the counter could wrap around.
const COUNTER_LIMIT: u64 = 1 << 63;

/// Encrypts messages into TRANSFORM_HEADER messages, or decrypts them, with one key.
///
/// The client keeps two per session: one keyed with Session.EncryptionKey to [`Sealer::seal`]
/// requests, one keyed with Session.DecryptionKey to [`Sealer::open`] responses.
pub struct Sealer {
    aead: AeadKey,
    /// Random per-Sealer nonce base; only the cipher's nonce length of it is used.
    nonce_base: [u8; 12],
    /// Messages sealed so far.
    counter: AtomicU64,
}

impl Sealer {
    /// A sealer for `cipher` with `key` (16 or 32 bytes, as the cipher requires).
    pub fn new(cipher: Cipher, key: &[u8], backend: CryptoBackend) -> Result<Self, CryptoError> {
        // OS randomness through getrandom, which aes-gcm's default `getrandom` feature brings.
        use aes_gcm::aead::Generate;
        let nonce_base = <[u8; 12]>::try_generate().map_err(|_| CryptoError::Random)?;
        Self::with_nonce_base(cipher, key, backend, nonce_base)
    }

    fn with_nonce_base(
        cipher: Cipher,
        key: &[u8],
        backend: CryptoBackend,
        nonce_base: [u8; 12],
    ) -> Result<Self, CryptoError> {
        Ok(Sealer {
            aead: AeadKey::new(cipher, key, backend)?,
            nonce_base,
            counter: AtomicU64::new(0),
        })
    }

    /// The cipher.
    pub fn cipher(&self) -> Cipher {
        self.aead.cipher()
    }

    /// The backend that runs the cipher (always RustCrypto for CCM).
    pub fn backend(&self) -> CryptoBackend {
        self.aead.backend()
    }

    /// Encrypt one SMB2 message (or compound) held in `parts` for `session_id`. Returns a new
    /// buffer holding the TRANSFORM_HEADER and the ciphertext, ready to send after the
    /// 4-byte transport length. Copying the parts into that buffer is the only copy: the
    /// encryption then runs in place.
    pub fn seal(&self, session_id: u64, parts: &[&[u8]]) -> Result<BytesMut, CryptoError> {
        let nonce = self.next_nonce()?;
        self.seal_with_nonce(&nonce, session_id, parts)
    }

    fn next_nonce(&self) -> Result<[u8; 16], CryptoError> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        if n >= COUNTER_LIMIT {
            return Err(CryptoError::NonceExhausted);
        }
        let mut nonce = [0u8; 16];
        nonce[..12].copy_from_slice(&self.nonce_base);
        for (b, c) in nonce.iter_mut().zip(n.to_le_bytes()) {
            *b ^= c;
        }
        // MS-SMB2 2.2.41: the bytes after the cipher's nonce are reserved, sent as zero.
        nonce[self.cipher().nonce_len()..].fill(0);
        Ok(nonce)
    }

    fn seal_with_nonce(
        &self,
        nonce: &[u8; 16],
        session_id: u64,
        parts: &[&[u8]],
    ) -> Result<BytesMut, CryptoError> {
        let len = parts.iter().map(|p| p.len()).sum::<usize>();
        let original_message_size =
            u32::try_from(len).map_err(|_| CryptoError::MessageTooLarge(len))?;
        let header = TransformHeader {
            signature: [0; 16],
            nonce: *nonce,
            original_message_size,
            flags: TransformFlags::ENCRYPTED,
            session_id,
        };
        let mut out = BytesMut::with_capacity(TRANSFORM_HEADER_LEN + len);
        header.encode(&mut out);
        for part in parts {
            out.put_slice(part);
        }

        let (head, body) = out.split_at_mut(TRANSFORM_HEADER_LEN);
        let nonce = &nonce[..self.cipher().nonce_len()];
        let tag = self
            .aead
            .seal_in_place(nonce, &head[TRANSFORM_NONCE_OFFSET..], body)?;
        head[TRANSFORM_SIGNATURE_OFFSET..TRANSFORM_SIGNATURE_OFFSET + TAG_LEN]
            .copy_from_slice(&tag);
        Ok(out)
    }

    /// Decrypt a TRANSFORM_HEADER message (without the 4-byte transport length) in place and
    /// return the plaintext SMB2 message, possibly a compound: the same buffer, advanced past
    /// the 52-byte header (no allocation, no copy). Rejects a wrong ProtocolId, Flags other
    /// than Encrypted, an OriginalMessageSize that is not the number of bytes present, and a
    /// bad tag.
    ///
    /// The caller picks the `Sealer` from the header's SessionId first
    /// ([`TransformHeader::decode`]).
    pub fn open(&self, mut frame: BytesMut) -> Result<BytesMut, CryptoError> {
        let start = self.open_in_place(&mut frame)?;
        // `advance` only moves the start of the view: no allocation, no copy.
        frame.advance(start);
        Ok(frame)
    }

    /// Like [`Sealer::open`] for a frame in any buffer: decrypts it where it lies and returns
    /// where the plaintext starts (after the transform header).
    pub fn open_in_place(&self, frame: &mut [u8]) -> Result<usize, CryptoError> {
        let header = TransformHeader::decode(frame)?;
        if header.flags != TransformFlags::ENCRYPTED {
            return Err(CryptoError::UnsupportedTransformFlags(header.flags.0));
        }
        let actual = frame.len() - TRANSFORM_HEADER_LEN;
        if usize::try_from(header.original_message_size).ok() != Some(actual) {
            return Err(CryptoError::SizeMismatch {
                declared: header.original_message_size,
                actual,
            });
        }
        // The plaintext is decrypted where the ciphertext lies.
        let mut aad = [0u8; TRANSFORM_AAD_LEN];
        aad.copy_from_slice(&frame[TRANSFORM_NONCE_OFFSET..TRANSFORM_HEADER_LEN]);
        let nonce = &header.nonce[..self.cipher().nonce_len()];
        self.aead.open_in_place(
            nonce,
            &aad,
            &mut frame[TRANSFORM_HEADER_LEN..],
            &header.signature,
        )?;
        Ok(TRANSFORM_HEADER_LEN)
    }
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("cipher", &self.cipher())
            .field("backend", &self.backend())
            .field("sealed", &self.counter.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::vectors::{enc30, enc311_ccm, enc311_gcm, hx};
    use std::collections::HashSet;

    const ALL: [Cipher; 4] = [
        Cipher::Aes128Ccm,
        Cipher::Aes128Gcm,
        Cipher::Aes256Ccm,
        Cipher::Aes256Gcm,
    ];

    fn nonce16(hex: &str) -> [u8; 16] {
        let mut n = [0u8; 16];
        let v = hx(hex);
        n[..v.len()].copy_from_slice(&v);
        n
    }

    fn frame(hex: &str) -> BytesMut {
        BytesMut::from(&hx(hex)[..])
    }

    /// "SMB 3.1.1 Encryption in Windows 10", A.1 (AES-128-GCM) and A.2 (AES-128-CCM): sealing
    /// the published requests with the published nonces gives the published transformed
    /// messages, byte for byte, on every backend.
    #[test]
    fn seal_reproduces_published_311_messages() {
        let cases = [
            (
                Cipher::Aes128Gcm,
                enc311_gcm::ENCRYPTION_KEY,
                enc311_gcm::SESSION_ID,
                enc311_gcm::WRITE_NONCE,
                enc311_gcm::WRITE_REQUEST,
                enc311_gcm::WRITE_REQUEST_TRANSFORMED,
            ),
            (
                Cipher::Aes128Gcm,
                enc311_gcm::ENCRYPTION_KEY,
                enc311_gcm::SESSION_ID,
                enc311_gcm::READ_NONCE,
                enc311_gcm::READ_REQUEST,
                enc311_gcm::READ_REQUEST_TRANSFORMED,
            ),
            (
                Cipher::Aes128Ccm,
                enc311_ccm::ENCRYPTION_KEY,
                enc311_ccm::SESSION_ID,
                enc311_ccm::WRITE_NONCE,
                enc311_ccm::WRITE_REQUEST,
                enc311_ccm::WRITE_REQUEST_TRANSFORMED,
            ),
        ];
        for &backend in CryptoBackend::available() {
            for (cipher, key, session_id, nonce, plain, sealed) in cases {
                let s = Sealer::new(cipher, &hx(key), backend).unwrap();
                let plain = hx(plain);
                let out = s
                    .seal_with_nonce(&nonce16(nonce), session_id, &[&plain])
                    .unwrap();
                assert_eq!(hex::encode_upper(&out), sealed, "{cipher:?} {backend:?}");
                // Same result with the message in pieces.
                let (a, b) = plain.split_at(70);
                let out2 = s
                    .seal_with_nonce(&nonce16(nonce), session_id, &[a, &[], b])
                    .unwrap();
                assert_eq!(out2, out);
                // The server side (DecryptionKey = our EncryptionKey) opens it.
                assert_eq!(s.open(out).unwrap()[..], plain[..]);
            }
        }
    }

    /// Published encrypted responses decrypt to the published plaintext: 3.1.1 GCM and CCM,
    /// and SMB 3.0 CCM ("Encryption in SMB 3.0: A protocol perspective"), whose sender filled
    /// the reserved Nonce bytes (they are AAD, not nonce).
    #[test]
    fn open_decrypts_published_responses() {
        let cases = [
            (
                Cipher::Aes128Gcm,
                enc311_gcm::DECRYPTION_KEY,
                enc311_gcm::WRITE_RESPONSE_TRANSFORMED,
                enc311_gcm::WRITE_RESPONSE,
            ),
            (
                Cipher::Aes128Gcm,
                enc311_gcm::DECRYPTION_KEY,
                enc311_gcm::READ_RESPONSE_TRANSFORMED,
                enc311_gcm::READ_RESPONSE,
            ),
            (
                Cipher::Aes128Ccm,
                enc311_ccm::DECRYPTION_KEY,
                enc311_ccm::READ_RESPONSE_TRANSFORMED,
                enc311_ccm::READ_RESPONSE,
            ),
            (
                Cipher::Aes128Ccm,
                enc30::DECRYPTION_KEY,
                enc30::READ_RESPONSE_TRANSFORMED,
                enc30::READ_RESPONSE,
            ),
            // The 3.0 WRITE request, opened as the server would with the client's EncryptionKey.
            (
                Cipher::Aes128Ccm,
                enc30::ENCRYPTION_KEY,
                enc30::WRITE_REQUEST_TRANSFORMED,
                enc30::WRITE_REQUEST,
            ),
        ];
        for &backend in CryptoBackend::available() {
            for (cipher, key, sealed, plain) in cases {
                let s = Sealer::new(cipher, &hx(key), backend).unwrap();
                let out = s.open(frame(sealed)).unwrap();
                assert_eq!(hex::encode_upper(&out), plain, "{cipher:?} {backend:?}");
            }
        }
        // The 3.0 WRITE: reproduce it byte for byte with its 16-byte Nonce field.
        let s = Sealer::new(
            Cipher::Aes128Ccm,
            &hx(enc30::ENCRYPTION_KEY),
            CryptoBackend::RustCrypto,
        )
        .unwrap();
        let out = s
            .seal_with_nonce(
                &nonce16("66E69A111892584FB5ED524A744DA3EE"),
                enc30::SESSION_ID,
                &[&hx(enc30::WRITE_REQUEST)],
            )
            .unwrap();
        assert_eq!(hex::encode_upper(&out), enc30::WRITE_REQUEST_TRANSFORMED);
    }

    /// Round trip for all four ciphers on every backend, and the backends interoperate.
    #[test]
    fn round_trip_all_ciphers_and_backends() {
        let plain: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
        for cipher in ALL {
            let key: Vec<u8> = (0..cipher.key_len() as u8).collect();
            for &a in CryptoBackend::available() {
                for &b in CryptoBackend::available() {
                    let sender = Sealer::new(cipher, &key, a).unwrap();
                    let receiver = Sealer::new(cipher, &key, b).unwrap();
                    let sealed = sender.seal(0x77, &[&plain[..64], &plain[64..]]).unwrap();
                    assert_eq!(sealed.len(), TRANSFORM_HEADER_LEN + plain.len());
                    let h = TransformHeader::decode(&sealed).unwrap();
                    assert_eq!(h.session_id, 0x77);
                    assert_eq!(h.original_message_size as usize, plain.len());
                    assert_eq!(h.flags, TransformFlags::ENCRYPTED);
                    assert!(h.nonce[cipher.nonce_len()..].iter().all(|&x| x == 0));
                    assert_ne!(&sealed[TRANSFORM_HEADER_LEN..], &plain[..]);
                    assert_eq!(
                        receiver.open(sealed).unwrap()[..],
                        plain[..],
                        "{cipher:?} {a:?}->{b:?}"
                    );
                }
            }
        }
    }

    /// One flipped bit in any header byte covered by the AAD, in the tag or in the ciphertext
    /// makes `open` fail (with a typed error, no panic).
    #[test]
    fn tamper_fails_open() {
        for cipher in ALL {
            let key = vec![3u8; cipher.key_len()];
            for &backend in CryptoBackend::available() {
                let s = Sealer::new(cipher, &key, backend).unwrap();
                let sealed = s
                    .seal(5, &[b"0123456789abcdef0123456789abcdef0123456789"])
                    .unwrap();
                for i in 0..sealed.len() {
                    let mut bad = sealed.clone();
                    bad[i] ^= 0x10;
                    let err = s.open(bad).unwrap_err();
                    match i {
                        0..=3 => assert!(matches!(err, CryptoError::MalformedTransform(_)), "{i}"),
                        36..=39 => assert!(matches!(err, CryptoError::SizeMismatch { .. }), "{i}"),
                        42..=43 => assert!(
                            matches!(err, CryptoError::UnsupportedTransformFlags(_)),
                            "{i}"
                        ),
                        _ => assert_eq!(err, CryptoError::AuthenticationFailed, "byte {i}"),
                    }
                }
                assert!(s.open(sealed).is_ok());
            }
        }
    }

    #[test]
    fn rejects_malformed_frames() {
        let s = Sealer::new(Cipher::Aes128Gcm, &[1; 16], CryptoBackend::default()).unwrap();
        let good = s.seal(9, &[&[0xAA; 100]]).unwrap();

        for len in [0, 4, 51] {
            assert!(matches!(
                s.open(BytesMut::from(&good[..len])),
                Err(CryptoError::MalformedTransform(_))
            ));
        }
        // Truncated or extended ciphertext: OriginalMessageSize no longer matches.
        assert_eq!(
            s.open(BytesMut::from(&good[..good.len() - 1])),
            Err(CryptoError::SizeMismatch {
                declared: 100,
                actual: 99
            })
        );
        let mut longer = good.clone();
        longer.put_u8(0);
        assert!(matches!(
            s.open(longer),
            Err(CryptoError::SizeMismatch { .. })
        ));
        // A plain SMB2 message is not a transform.
        let mut plain = good.clone();
        plain[0] = 0xFE;
        assert!(matches!(
            s.open(plain),
            Err(CryptoError::MalformedTransform(_))
        ));
        // Flags 0 (or anything but 1).
        let mut flags = good.clone();
        flags[42] = 0;
        assert_eq!(
            s.open(flags),
            Err(CryptoError::UnsupportedTransformFlags(0))
        );
        // Wrong key.
        let other = Sealer::new(Cipher::Aes128Gcm, &[2; 16], CryptoBackend::default()).unwrap();
        assert_eq!(
            other.open(good.clone()),
            Err(CryptoError::AuthenticationFailed)
        );
        // Wrong cipher with the same key bytes.
        let ccm = Sealer::new(Cipher::Aes128Ccm, &[1; 16], CryptoBackend::default()).unwrap();
        assert_eq!(ccm.open(good), Err(CryptoError::AuthenticationFailed));
        // Bad key length at construction.
        assert!(matches!(
            Sealer::new(Cipher::Aes256Gcm, &[1; 16], CryptoBackend::default()),
            Err(CryptoError::InvalidKeyLength { .. })
        ));
    }

    /// `open` decrypts where the ciphertext lies and hands back the same buffer.
    #[test]
    fn open_is_in_place() {
        for &backend in CryptoBackend::available() {
            let s = Sealer::new(Cipher::Aes128Gcm, &[8; 16], backend).unwrap();
            let sealed = s.seal(2, &[&[0x42; 4096]]).unwrap();
            let start = sealed.as_ptr() as usize;
            let plain = s.open(sealed).unwrap();
            assert_eq!(plain.as_ptr() as usize, start + TRANSFORM_HEADER_LEN);
            assert_eq!(&plain[..], &[0x42; 4096][..]);
        }
    }

    #[test]
    fn empty_message_round_trips() {
        let s = Sealer::new(Cipher::Aes256Ccm, &[4; 32], CryptoBackend::default()).unwrap();
        let sealed = s.seal(1, &[]).unwrap();
        assert_eq!(sealed.len(), TRANSFORM_HEADER_LEN);
        assert!(s.open(sealed).unwrap().is_empty());
    }

    /// Nonces of one Sealer never repeat, also across threads; the counter is XORed into a
    /// random base, and two Sealers on the same key start from different bases.
    #[test]
    fn nonces_are_unique() {
        let s = std::sync::Arc::new(
            Sealer::new(Cipher::Aes128Ccm, &[5; 16], CryptoBackend::default()).unwrap(),
        );
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    (0..2000)
                        .map(|_| {
                            let sealed = s.seal(1, &[b"x"]).unwrap();
                            let mut n = [0u8; 16];
                            n.copy_from_slice(&sealed[20..36]);
                            n
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for t in threads {
            for n in t.join().unwrap() {
                assert!(
                    n[11..].iter().all(|&b| b == 0),
                    "CCM reserved bytes must be zero"
                );
                assert!(seen.insert(n), "nonce repeated");
            }
        }
        assert_eq!(seen.len(), 8000);

        let a = Sealer::new(Cipher::Aes128Gcm, &[5; 16], CryptoBackend::default()).unwrap();
        let b = Sealer::new(Cipher::Aes128Gcm, &[5; 16], CryptoBackend::default()).unwrap();
        assert_ne!(a.next_nonce().unwrap(), b.next_nonce().unwrap());

        // Deterministic layout: base XOR little-endian counter.
        let d = Sealer::with_nonce_base(
            Cipher::Aes128Gcm,
            &[5; 16],
            CryptoBackend::default(),
            [0xF0; 12],
        )
        .unwrap();
        let n0 = d.next_nonce().unwrap();
        let n1 = d.next_nonce().unwrap();
        let n258 = {
            d.counter.store(258, Ordering::Relaxed);
            d.next_nonce().unwrap()
        };
        assert_eq!(hex::encode(n0), "f0f0f0f0f0f0f0f0f0f0f0f000000000");
        assert_eq!(hex::encode(n1), "f1f0f0f0f0f0f0f0f0f0f0f000000000");
        assert_eq!(hex::encode(n258), "f2f1f0f0f0f0f0f0f0f0f0f000000000");
    }

    #[test]
    fn refuses_to_wrap_the_counter() {
        let s = Sealer::new(Cipher::Aes128Gcm, &[6; 16], CryptoBackend::default()).unwrap();
        s.counter.store(COUNTER_LIMIT - 1, Ordering::Relaxed);
        assert!(s.seal(1, &[b"last"]).is_ok());
        assert_eq!(s.seal(1, &[b"x"]), Err(CryptoError::NonceExhausted));
        assert_eq!(s.seal(1, &[b"x"]), Err(CryptoError::NonceExhausted));
    }

    #[test]
    fn debug_does_not_show_key() {
        let s = Sealer::new(Cipher::Aes128Gcm, &[0x99; 16], CryptoBackend::RustCrypto).unwrap();
        let d = format!("{s:?}");
        assert!(
            d.contains("Aes128Gcm") && !d.contains("153") && !d.contains("99"),
            "{d}"
        );
    }
}
