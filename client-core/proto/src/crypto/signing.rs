//! Message signing (MS-SMB2 3.1.4.1 Signing An Outgoing Message, 3.1.5.1 Verifying An Incoming
//! Message).
//!
//! The signature is a MAC over the whole message, SMB2 header included, computed with the
//! 16-byte Signature field (header offset 48) set to zero:
//! - 2.0.2 / 2.1: HMAC-SHA256, first 16 bytes of the 32-byte MAC;
//! - 3.0 / 3.0.2, and 3.1.1 by default: AES-128-CMAC (RFC 4493);
//! - 3.1.1 with AES-GMAC negotiated (SMB2_SIGNING_CAPABILITIES): AES-128-GMAC with a 12-byte
//!   nonce made of MessageId (8 bytes LE) and 4 bytes whose bit 0 says "sent by the server"
//!   (SMB2_FLAGS_SERVER_TO_REDIR) and bit 1 "this is a CANCEL request".
//!
//! In a compound each message is signed on its own, from its header to the end of its padding
//! (the caller passes one message at a time).
//!
//! Nothing here joins buffers: a 1 MiB payload is fed to the MAC where it lies. The only copy is
//! of the 64-byte header, whose Signature field must read as zero.

use cmac::Cmac;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::gmac::Gmac;
use super::{ct_eq, CryptoBackend, CryptoError, TAG_LEN};
use crate::dialect::{Dialect, SigningAlgorithm};
use crate::header::{Command, HeaderFlags, HEADER_LEN, SIGNATURE_OFFSET};

/// Offset of Command in the SMB2 header.
const COMMAND_OFFSET: usize = 12;
/// Offset of Flags in the SMB2 header.
const FLAGS_OFFSET: usize = 16;
/// Offset of MessageId in the SMB2 header.
const MESSAGE_ID_OFFSET: usize = 24;
/// The Signature field.
const SIGNATURE: std::ops::Range<usize> = SIGNATURE_OFFSET..SIGNATURE_OFFSET + TAG_LEN;

/// Signs and verifies messages with one signing key (Session.SigningKey or
/// Channel.SigningKey). Cheap to clone; holds no per-message state, so one `Signer` can serve
/// concurrent tasks by shared reference.
#[derive(Clone)]
pub struct Signer {
    mac: MacKey,
}

#[derive(Clone)]
enum MacKey {
    HmacSha256(Hmac<Sha256>),
    AesCmac(AesCmac),
    AesGmac(Gmac),
}

/// AES-128-CMAC: RustCrypto always, aws-lc-rs too when that backend was chosen (it is about
/// 1.6 times faster on large messages and on small ones).
#[derive(Clone)]
struct AesCmac {
    soft: Cmac<aes::Aes128>,
    #[cfg(feature = "aws-lc")]
    aws: Option<super::awslc::AwsLcCmac>,
}

impl AesCmac {
    fn new(key: &[u8], backend: CryptoBackend) -> Result<Self, CryptoError> {
        if !backend.is_available() {
            return Err(CryptoError::BackendUnavailable(backend));
        }
        let soft = <Cmac<aes::Aes128> as KeyInit>::new_from_slice(key).map_err(|_| {
            CryptoError::InvalidKeyLength {
                what: "AES-CMAC signing key",
                len: key.len(),
            }
        })?;
        Ok(AesCmac {
            soft,
            #[cfg(feature = "aws-lc")]
            aws: match backend {
                CryptoBackend::AwsLc => Some(super::awslc::AwsLcCmac::new(key)?),
                CryptoBackend::RustCrypto => None,
            },
        })
    }

    fn backend(&self) -> CryptoBackend {
        #[cfg(feature = "aws-lc")]
        if self.aws.is_some() {
            return CryptoBackend::AwsLc;
        }
        CryptoBackend::RustCrypto
    }

    fn mac<'a, I>(&self, pieces: I) -> [u8; TAG_LEN]
    where
        I: IntoIterator<Item = &'a [u8]> + Clone,
    {
        #[cfg(feature = "aws-lc")]
        if let Some(tag) = self.aws.as_ref().and_then(|aws| aws.mac(pieces.clone())) {
            return tag;
        }
        truncate(mac_over(self.soft.clone(), pieces))
    }
}

impl Signer {
    /// A signer for `algorithm` keyed with `key`: 16 bytes for AES-CMAC and AES-GMAC; HMAC-SHA256
    /// accepts the 2.x session key as is. `backend` applies to AES-CMAC and AES-GMAC.
    pub fn new(
        algorithm: SigningAlgorithm,
        key: &[u8],
        backend: CryptoBackend,
    ) -> Result<Self, CryptoError> {
        let bad_key = |what| CryptoError::InvalidKeyLength {
            what,
            len: key.len(),
        };
        let mac = match algorithm {
            SigningAlgorithm::HmacSha256 => {
                if key.is_empty() {
                    return Err(bad_key("HMAC-SHA256 signing key"));
                }
                MacKey::HmacSha256(
                    <Hmac<Sha256> as KeyInit>::new_from_slice(key)
                        .map_err(|_| bad_key("HMAC-SHA256 signing key"))?,
                )
            }
            SigningAlgorithm::AesCmac => MacKey::AesCmac(AesCmac::new(key, backend)?),
            SigningAlgorithm::AesGmac => MacKey::AesGmac(Gmac::new(key, backend)?),
        };
        Ok(Signer { mac })
    }

    /// The algorithm a dialect signs with: HMAC-SHA256 for 2.x, AES-CMAC for 3.0/3.0.2, and for
    /// 3.1.1 the one negotiated in SMB2_SIGNING_CAPABILITIES, AES-CMAC if none was
    /// (MS-SMB2 3.1.4.1).
    pub fn algorithm_for(
        dialect: Dialect,
        negotiated: Option<SigningAlgorithm>,
    ) -> SigningAlgorithm {
        match dialect {
            Dialect::Smb210 => SigningAlgorithm::HmacSha256,
            Dialect::Smb300 | Dialect::Smb302 => SigningAlgorithm::AesCmac,
            Dialect::Smb311 => negotiated.unwrap_or(SigningAlgorithm::AesCmac),
        }
    }

    /// The algorithm of this signer.
    pub fn algorithm(&self) -> SigningAlgorithm {
        match self.mac {
            MacKey::HmacSha256(_) => SigningAlgorithm::HmacSha256,
            MacKey::AesCmac(_) => SigningAlgorithm::AesCmac,
            MacKey::AesGmac(_) => SigningAlgorithm::AesGmac,
        }
    }

    /// The backend that computes this signer's MACs: HMAC-SHA256 always runs on RustCrypto;
    /// AES-CMAC and AES-GMAC on the backend asked for (AES-GMAC over a message in several
    /// pieces hashes its small pieces with RustCrypto's GHASH and joins them to aws-lc-rs's
    /// GMAC of the large ones, see `gmac.rs`).
    pub fn backend(&self) -> CryptoBackend {
        match &self.mac {
            MacKey::HmacSha256(_) => CryptoBackend::RustCrypto,
            MacKey::AesCmac(c) => c.backend(),
            MacKey::AesGmac(g) => g.backend(),
        }
    }

    /// The signature of one message held in `parts` (concatenated in order). `parts[0]` must
    /// start with the whole 64-byte header; its Signature field is treated as zero whatever it
    /// holds, and nothing is modified. The SMB2_FLAGS_SIGNED flag must already be set by the
    /// caller (it is covered by the signature).
    pub fn sign(&self, parts: &[&[u8]]) -> Result<[u8; TAG_LEN], CryptoError> {
        let (first, rest) = parts.split_first().ok_or(CryptoError::MessageTooShort(0))?;
        let header = zeroed_header(first)?;
        Ok(self.mac_pieces(&header, &first[HEADER_LEN..], rest))
    }

    /// Sign one outgoing message in place: set SMB2_FLAGS_SIGNED in the header at the start of
    /// `first`, compute the signature over `first` followed by `rest`, and write it into the
    /// header's Signature field.
    pub fn sign_in_place(&self, first: &mut [u8], rest: &[&[u8]]) -> Result<(), CryptoError> {
        if first.len() < HEADER_LEN {
            return Err(CryptoError::MessageTooShort(first.len()));
        }
        let mut flags = [0u8; 4];
        flags.copy_from_slice(&first[FLAGS_OFFSET..FLAGS_OFFSET + 4]);
        let flags = u32::from_le_bytes(flags) | HeaderFlags::SIGNED;
        first[FLAGS_OFFSET..FLAGS_OFFSET + 4].copy_from_slice(&flags.to_le_bytes());
        first[SIGNATURE].fill(0);

        let signature = if rest.iter().all(|p| p.is_empty()) {
            self.mac_contiguous(first)
        } else {
            let (header, body) = first.split_at(HEADER_LEN);
            let header: &[u8; HEADER_LEN] = header.try_into().map_err(|_| CryptoError::Backend)?;
            self.mac_pieces(header, body, rest)
        };
        first[SIGNATURE].copy_from_slice(&signature);
        Ok(())
    }

    /// Whether the Signature field of `message` (one whole message) is right. Never panics; a
    /// message shorter than a header is simply not valid. Compared in constant time.
    pub fn verify(&self, message: &[u8]) -> bool {
        let Ok(header) = zeroed_header(message) else {
            return false;
        };
        let expected = self.mac_pieces(&header, &message[HEADER_LEN..], &[]);
        ct_eq(&expected, &message[SIGNATURE])
    }

    /// Same answer as [`Signer::verify`], for a received message the caller still owns
    /// mutably: the Signature field is zeroed while the MAC runs over the contiguous buffer
    /// (no header copy, and the aws-lc-rs fast path for AES-GMAC), then put back.
    pub fn verify_in_place(&self, message: &mut [u8]) -> bool {
        if message.len() < HEADER_LEN {
            return false;
        }
        let mut received = [0u8; TAG_LEN];
        received.copy_from_slice(&message[SIGNATURE]);
        message[SIGNATURE].fill(0);
        let expected = self.mac_contiguous(message);
        message[SIGNATURE].copy_from_slice(&received);
        ct_eq(&expected, &received)
    }

    /// MAC of `header` (already zeroed) || `body` || `rest`.
    fn mac_pieces(&self, header: &[u8; HEADER_LEN], body: &[u8], rest: &[&[u8]]) -> [u8; TAG_LEN] {
        let pieces = || [&header[..], body].into_iter().chain(rest.iter().copied());
        match &self.mac {
            MacKey::HmacSha256(key) => truncate(mac_over(key.clone(), pieces())),
            MacKey::AesCmac(key) => key.mac(pieces()),
            MacKey::AesGmac(key) => key.compute_parts(&gmac_nonce(header), pieces()),
        }
    }

    /// MAC of one contiguous message whose Signature field is already zero. The callers have
    /// checked that it holds at least a header.
    fn mac_contiguous(&self, message: &[u8]) -> [u8; TAG_LEN] {
        match &self.mac {
            MacKey::HmacSha256(key) => truncate(mac_over(key.clone(), [message])),
            MacKey::AesCmac(key) => key.mac([message]),
            MacKey::AesGmac(key) => {
                let mut header = [0u8; HEADER_LEN];
                header.copy_from_slice(&message[..HEADER_LEN]);
                key.compute_contiguous(&gmac_nonce(&header), message)
            }
        }
    }
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("algorithm", &self.algorithm())
            .finish_non_exhaustive()
    }
}

/// A copy of the header at the start of `message` with the Signature field zeroed.
fn zeroed_header(message: &[u8]) -> Result<[u8; HEADER_LEN], CryptoError> {
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(
        message
            .get(..HEADER_LEN)
            .ok_or(CryptoError::MessageTooShort(message.len()))?,
    );
    header[SIGNATURE].fill(0);
    Ok(header)
}

/// The AES-GMAC nonce of a message (MS-SMB2 3.1.4.1), read from its header so that callers
/// cannot get it wrong: MessageId, then a 32-bit LE word with bit 0 = sent by the server and
/// bit 1 = CANCEL request.
fn gmac_nonce(header: &[u8; HEADER_LEN]) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(&header[MESSAGE_ID_OFFSET..MESSAGE_ID_OFFSET + 8]);
    let flags = u32::from_le_bytes([
        header[FLAGS_OFFSET],
        header[FLAGS_OFFSET + 1],
        header[FLAGS_OFFSET + 2],
        header[FLAGS_OFFSET + 3],
    ]);
    let command = u16::from_le_bytes([header[COMMAND_OFFSET], header[COMMAND_OFFSET + 1]]);
    let mut role = 0u32;
    if flags & HeaderFlags::SERVER_TO_REDIR != 0 {
        role |= 1;
    }
    if command == Command::CANCEL.0 {
        role |= 2;
    }
    nonce[8..].copy_from_slice(&role.to_le_bytes());
    nonce
}

fn mac_over<'a, M: Mac>(
    mut mac: M,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> hmac::digest::Output<M> {
    for piece in pieces {
        mac.update(piece);
    }
    mac.finalize().into_bytes()
}

/// The first 16 bytes of a MAC (HMAC-SHA256 gives 32; CMAC exactly 16).
fn truncate(full: impl AsRef<[u8]>) -> [u8; TAG_LEN] {
    let mut out = [0u8; TAG_LEN];
    out.copy_from_slice(&full.as_ref()[..TAG_LEN]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::vectors::{anatomy311, enc311_ccm, enc311_gcm, hx, rfc4493};

    fn signer(alg: SigningAlgorithm, key_hex: &str, backend: CryptoBackend) -> Signer {
        Signer::new(alg, &hx(key_hex), backend).unwrap()
    }

    fn cmac(key_hex: &str) -> Signer {
        signer(
            SigningAlgorithm::AesCmac,
            key_hex,
            CryptoBackend::RustCrypto,
        )
    }

    /// RFC 4493 section 4 AES-CMAC examples, through the signer's CMAC on every backend,
    /// whole and cut in pieces.
    #[test]
    fn rfc4493_vectors() {
        let msg = hx(rfc4493::MESSAGE_64);
        for &backend in CryptoBackend::available() {
            let cmac = AesCmac::new(&hx(rfc4493::KEY), backend).unwrap();
            assert_eq!(cmac.backend(), backend);
            for (len, mac) in rfc4493::CASES {
                assert_eq!(hex::encode(cmac.mac([&msg[..len]])), mac, "Mlen {len}");
                let pieces = [&msg[..len / 3], &[][..], &msg[len / 3..len]];
                assert_eq!(hex::encode(cmac.mac(pieces)), mac, "Mlen {len}, split");
            }
        }
    }

    /// Published AES-CMAC signed messages: the final SESSION_SETUP responses of Microsoft's
    /// "anatomy" (3.1.1, first and bound channel) and "SMB 3.1.1 Encryption in Windows 10"
    /// (A.1 and A.2) examples, plus the signed binding requests and the signed
    /// MORE_PROCESSING_REQUIRED binding response.
    #[test]
    fn published_cmac_signed_messages_verify() {
        let cases = [
            (
                anatomy311::SIGNING_KEY,
                anatomy311::SESSION_SETUP_RESPONSE_FINAL,
            ),
            (
                anatomy311::CH2_SIGNING_KEY,
                anatomy311::CH2_SETUP_RESPONSE_FINAL,
            ),
            // MS-SMB2 3.2.4.1.1: a binding request is signed with the session's SigningKey.
            (anatomy311::SIGNING_KEY, anatomy311::CH2_SETUP_REQUEST_1),
            (anatomy311::SIGNING_KEY, anatomy311::CH2_SETUP_RESPONSE_1),
            (anatomy311::SIGNING_KEY, anatomy311::CH2_SETUP_REQUEST_2),
            (
                enc311_gcm::SIGNING_KEY,
                enc311_gcm::SESSION_SETUP_RESPONSE_FINAL,
            ),
            (
                enc311_ccm::SIGNING_KEY,
                enc311_ccm::SESSION_SETUP_RESPONSE_FINAL,
            ),
        ];
        for ((key, msg), &backend) in cases
            .into_iter()
            .flat_map(|c| CryptoBackend::available().iter().map(move |b| (c, b)))
        {
            let s = signer(SigningAlgorithm::AesCmac, key, backend);
            let mut msg = hx(msg);
            assert!(s.verify(&msg), "{key}");
            assert!(s.verify_in_place(&mut msg));
            // And signing reproduces the published signature.
            let published = msg[SIGNATURE].to_vec();
            assert_eq!(s.sign(&[&msg]).unwrap().to_vec(), published);
            let mut copy = msg.clone();
            copy[SIGNATURE].fill(0xEE);
            s.sign_in_place(&mut copy, &[]).unwrap();
            assert_eq!(copy, msg);
        }
        assert_eq!(
            hex::encode_upper(&hx(anatomy311::SESSION_SETUP_RESPONSE_FINAL)[SIGNATURE]),
            anatomy311::SESSION_SETUP_RESPONSE_FINAL_SIGNATURE
        );
    }

    /// One flipped bit anywhere but in the Signature field itself breaks verification; so
    /// does the wrong key, and a truncated message is rejected without panicking.
    #[test]
    fn tampering_fails_verification() {
        let s = cmac(anatomy311::SIGNING_KEY);
        let msg = hx(anatomy311::SESSION_SETUP_RESPONSE_FINAL);
        for i in 0..msg.len() {
            let mut bad = msg.clone();
            bad[i] ^= 0x04;
            assert!(!s.verify(&bad), "bit flip at {i} accepted");
            assert!(!s.verify_in_place(&mut bad.clone()));
        }
        assert!(!cmac(anatomy311::CH2_SIGNING_KEY).verify(&msg));
        for len in [0, 1, 47, 63] {
            assert!(!s.verify(&msg[..len]));
            assert!(!s.verify_in_place(&mut msg[..len].to_vec()));
        }
        // verify_in_place leaves the message as it was, valid or not.
        let mut m = msg.clone();
        assert!(s.verify_in_place(&mut m));
        assert_eq!(m, msg);
    }

    fn sample_message(flags: u32, command: Command, message_id: u64, body_len: usize) -> Vec<u8> {
        let mut h = crate::header::Header::request(command);
        h.flags = HeaderFlags(flags);
        h.message_id = message_id;
        h.session_id = 0x1000_0000_0025;
        h.signature = [0xAA; 16];
        let mut b = bytes::BytesMut::new();
        h.encode(&mut b);
        b.extend((0..body_len).map(|i| (i * 7 + 1) as u8));
        b.to_vec()
    }

    /// All algorithms on all backends: sign over pieces == sign contiguous == sign_in_place,
    /// and verify accepts exactly that.
    #[test]
    fn pieces_contiguous_and_in_place_agree() {
        let key = hx("8765949DFEAEE105CE9118B45BE988F0");
        let algs = [
            SigningAlgorithm::HmacSha256,
            SigningAlgorithm::AesCmac,
            SigningAlgorithm::AesGmac,
        ];
        for alg in algs {
            let mut reference = None;
            for &backend in CryptoBackend::available() {
                let s = Signer::new(alg, &key, backend).unwrap();
                assert_eq!(s.algorithm(), alg);
                if alg == SigningAlgorithm::HmacSha256 {
                    assert_eq!(s.backend(), CryptoBackend::RustCrypto);
                } else {
                    assert_eq!(s.backend(), backend);
                }
                let msg = sample_message(HeaderFlags::SIGNED, Command::WRITE, 77, 5000);
                let whole = s.sign(&[&msg]).unwrap();
                let (a, b) = msg.split_at(100);
                let (b, c) = b.split_at(1234);
                assert_eq!(s.sign(&[a, b, &[], c]).unwrap(), whole, "{alg:?}");
                // The header may not be split.
                assert_eq!(
                    s.sign(&[&msg[..63], &msg[63..]]),
                    Err(CryptoError::MessageTooShort(63))
                );

                let mut first = a.to_vec();
                s.sign_in_place(&mut first, &[b, c]).unwrap();
                assert_eq!(first[SIGNATURE], whole);
                let mut contiguous = msg.clone();
                s.sign_in_place(&mut contiguous, &[]).unwrap();
                assert_eq!(contiguous[SIGNATURE], whole);
                assert!(s.verify(&contiguous));
                assert!(s.verify_in_place(&mut contiguous));
                match &reference {
                    None => reference = Some(whole),
                    Some(r) => assert_eq!(r, &whole, "{alg:?}: backends disagree"),
                }
            }
        }
    }

    #[test]
    fn sign_in_place_sets_the_signed_flag() {
        let s = cmac(anatomy311::SIGNING_KEY);
        let mut msg = sample_message(0, Command::ECHO, 3, 4);
        s.sign_in_place(&mut msg, &[]).unwrap();
        let h = crate::header::Header::decode(&msg).unwrap();
        assert!(h.flags.has(HeaderFlags::SIGNED));
        assert!(s.verify(&msg));
        assert_eq!(
            s.sign_in_place(&mut [0u8; 10], &[]),
            Err(CryptoError::MessageTooShort(10))
        );
        assert_eq!(s.sign(&[]), Err(CryptoError::MessageTooShort(0)));
    }

    /// HMAC-SHA256 signing is the first 16 bytes of HMAC over the message with a zeroed
    /// Signature field (MS-SMB2 3.1.4.1, dialect 2.x).
    #[test]
    fn hmac_is_truncated_hmac_sha256_of_zeroed_message() {
        let key = [0x42u8; 16];
        let s = Signer::new(
            SigningAlgorithm::HmacSha256,
            &key,
            CryptoBackend::RustCrypto,
        )
        .unwrap();
        let msg = sample_message(HeaderFlags::SIGNED, Command::READ, 9, 40);
        let mut zeroed = msg.clone();
        zeroed[SIGNATURE].fill(0);
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).unwrap();
        mac.update(&zeroed);
        let full = mac.finalize().into_bytes();
        assert_eq!(s.sign(&[&msg]).unwrap()[..], full[..16]);
    }

    /// The GMAC nonce comes from the header: MessageId, bit 0 for responses, bit 1 for CANCEL.
    /// Checked against `aes-gcm` with a hand-built nonce.
    #[test]
    fn gmac_nonce_layout() {
        use aes_gcm::aead::{AeadInOut, KeyInit as _};
        let key = hx("3DCC82C5795AE27F383242761078C59B");
        let cases = [
            (0, Command::READ, [0u8, 0, 0, 0]),
            (HeaderFlags::SERVER_TO_REDIR, Command::READ, [1, 0, 0, 0]),
            (0, Command::CANCEL, [2, 0, 0, 0]),
            (
                HeaderFlags::SERVER_TO_REDIR | HeaderFlags::ASYNC_COMMAND,
                Command::CANCEL,
                [3, 0, 0, 0],
            ),
        ];
        for (flags, command, role) in cases {
            let message_id = 0x0102_0304_0506_0708u64;
            let mut msg = sample_message(flags | HeaderFlags::SIGNED, command, message_id, 24);
            msg[SIGNATURE].fill(0);
            let mut nonce = [0u8; 12];
            nonce[..8].copy_from_slice(&message_id.to_le_bytes());
            nonce[8..].copy_from_slice(&role);
            let gcm = aes_gcm::Aes128Gcm::new_from_slice(&key).unwrap();
            let expected: [u8; 16] = gcm
                .encrypt_inout_detached(&nonce.into(), &msg, (&mut [][..]).into())
                .unwrap()
                .into();
            for &backend in CryptoBackend::available() {
                let s = Signer::new(SigningAlgorithm::AesGmac, &key, backend).unwrap();
                assert_eq!(s.sign(&[&msg]).unwrap(), expected, "{flags:#x} {command}");
            }
        }
        // Request and response with the same MessageId get different signatures.
        let s = Signer::new(SigningAlgorithm::AesGmac, &key, CryptoBackend::default()).unwrap();
        let req = sample_message(0, Command::READ, 5, 8);
        let resp = sample_message(HeaderFlags::SERVER_TO_REDIR, Command::READ, 5, 8);
        assert_ne!(s.sign(&[&req]).unwrap(), s.sign(&[&resp]).unwrap());
    }

    #[test]
    fn gmac_tamper_and_replay_with_other_message_id() {
        for &backend in CryptoBackend::available() {
            let s = Signer::new(SigningAlgorithm::AesGmac, &[9; 16], backend).unwrap();
            let mut msg = sample_message(HeaderFlags::SERVER_TO_REDIR, Command::READ, 41, 300);
            s.sign_in_place(&mut msg, &[]).unwrap();
            assert!(s.verify(&msg) && s.verify_in_place(&mut msg));
            let mut other_mid = msg.clone();
            other_mid[MESSAGE_ID_OFFSET] ^= 1;
            assert!(!s.verify(&other_mid));
            let mut flipped = msg.clone();
            flipped[200] ^= 0x80;
            assert!(!s.verify(&flipped) && !s.verify_in_place(&mut flipped));
        }
    }

    #[test]
    fn key_length_checks_and_algorithm_choice() {
        assert!(Signer::new(
            SigningAlgorithm::AesCmac,
            &[0; 32],
            CryptoBackend::RustCrypto
        )
        .is_err());
        assert!(Signer::new(
            SigningAlgorithm::AesGmac,
            &[0; 8],
            CryptoBackend::RustCrypto
        )
        .is_err());
        assert!(Signer::new(SigningAlgorithm::HmacSha256, &[], CryptoBackend::RustCrypto).is_err());
        assert_eq!(
            Signer::algorithm_for(Dialect::Smb210, None),
            SigningAlgorithm::HmacSha256
        );
        assert_eq!(
            Signer::algorithm_for(Dialect::Smb302, None),
            SigningAlgorithm::AesCmac
        );
        assert_eq!(
            Signer::algorithm_for(Dialect::Smb311, None),
            SigningAlgorithm::AesCmac
        );
        assert_eq!(
            Signer::algorithm_for(Dialect::Smb311, Some(SigningAlgorithm::AesGmac)),
            SigningAlgorithm::AesGmac
        );
        let s = Signer::new(
            SigningAlgorithm::AesCmac,
            &[0; 16],
            CryptoBackend::RustCrypto,
        )
        .unwrap();
        assert_eq!(format!("{s:?}"), "Signer { algorithm: AesCmac, .. }");
    }
}
