//! AES-128-GMAC for SMB 3.1.1 signing (MS-SMB2 3.1.4.1, SigningAlgorithmId 0x0002).
//!
//! GMAC is AES-GCM with an empty plaintext: `tag = GHASH_H(A || pad || [len(A)]64 || [0]64)
//! XOR E_K(J0)` with `H = E_K(0^128)` and `J0 = nonce || 0x00000001` (NIST SP 800-38D).
//!
//! An SMB message to sign is usually in pieces (a copy of the header with the Signature field
//! zeroed, the rest of the first buffer, a WRITE payload), and AEAD APIs, aws-lc-rs's and
//! `aes-gcm`'s alike, take the AAD as one slice. Joining would copy the payload, so
//! [`SoftGmac`] feeds GHASH piece by piece instead. When the message *is* one contiguous slice,
//! the aws-lc-rs backend computes the same tag faster (about 5× here).
//!
//! A message in pieces can still use the fast backend for its large pieces, because GHASH is a
//! polynomial in H and so splits over concatenation. Write `M(X) = GHASH_H(X) · H`, with
//! `GHASH_H(X)` the hash of X's blocks (zero-padded) without the length block. Then for X of `q` whole blocks
//! followed by Y, `M(X‖Y) = M(X) · H^|Y| ⊕ M(Y)`, and the tag is `M(all) ⊕ L·H ⊕ E_K(J0)` with L
//! the length block. aws-lc-rs hands out `M(Y) ⊕ L_Y·H ⊕ E_K(J0)` for any piece Y (its GMAC under
//! the same nonce), and we know E_K(J0) and can compute L_Y·H, so M(Y) comes out of it. A WRITE
//! signed in place is header + body (112 bytes, 7 whole blocks) then the payload: the payload
//! goes through aws-lc-rs and the rest costs a few field multiplications ([`PieceGmac`]).

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
        let mut stream = self.stream();
        for part in parts {
            stream.absorb(part);
        }
        let s = stream.finish();
        xor(&s, &self.encrypted_j0(nonce)).into()
    }

    /// A GHASH stream under this key, empty.
    fn stream(&self) -> GhashStream {
        GhashStream {
            ghash: self.ghash.clone(),
            pending: [0; BLOCK],
            pending_len: 0,
            total: 0,
        }
    }

    /// E_K(J0) with `J0 = nonce || 0x00000001`: the mask XORed onto the GHASH result.
    fn encrypted_j0(&self, nonce: &[u8; 12]) -> ghash::Block {
        let mut j0 = ghash::Block::default();
        j0[..12].copy_from_slice(nonce);
        j0[15] = 1;
        self.aes.encrypt_block(&mut j0);
        j0
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
        self.flush_pending();
        let lengths = length_block(self.total);
        self.ghash.update(std::slice::from_ref(&lengths));
        self.ghash.finalize()
    }

    /// `M(X) = GHASH_H(X) · H` of what was absorbed (see the module comment): hashing one more
    /// all-zero block multiplies the state by H.
    fn finish_segment(mut self) -> ghash::Block {
        self.flush_pending();
        self.ghash
            .update(std::slice::from_ref(&ghash::Block::default()));
        self.ghash.finalize()
    }

    fn flush_pending(&mut self) {
        if self.pending_len > 0 {
            self.ghash.update_padded(&self.pending[..self.pending_len]);
            self.pending_len = 0;
        }
    }
}

/// GCM's length block for a GMAC: bit length of the AAD, then of the (empty) ciphertext, both
/// 64-bit big-endian.
fn length_block(aad_len: u64) -> ghash::Block {
    let mut lengths = [0u8; BLOCK];
    lengths[..8].copy_from_slice(&(aad_len * 8).to_be_bytes());
    lengths.into()
}

/// Blocks that `len` bytes take once zero-padded.
fn blocks(len: u64) -> u64 {
    len.div_ceil(BLOCK as u64)
}

fn xor(a: &ghash::Block, b: &ghash::Block) -> ghash::Block {
    let mut out = ghash::Block::default();
    for (o, (x, y)) in out.iter_mut().zip(a.iter().zip(b.iter())) {
        *o = x ^ y;
    }
    out
}

/// `a · b` in GF(2^128) as GCM represents it, computed by the `ghash` crate itself: GHASH of
/// the single block `a` under the key `b` is `(0 ⊕ a) · b`.
fn gf_mul(a: &ghash::Block, b: &ghash::Block) -> ghash::Block {
    let mut g = GHash::new(b);
    g.update(std::slice::from_ref(a));
    g.finalize()
}

/// `h^n` by square-and-multiply (at most 2·64 multiplications; a 1 MiB payload needs ~34).
fn gf_pow(h: &ghash::Block, mut n: u64) -> ghash::Block {
    // The field's 1: GCM puts the coefficient of x^0 in the most significant bit of byte 0.
    let mut result = ghash::Block::default();
    result[0] = 0x80;
    let mut base = *h;
    while n > 0 {
        if n & 1 == 1 {
            result = gf_mul(&result, &base);
        }
        n >>= 1;
        if n > 0 {
            base = gf_mul(&base, &base);
        }
    }
    result
}

/// Pieces at least this long (and block-aligned in the message) go through aws-lc-rs; below it
/// the ~40 field multiplications of joining cost more than they save.
#[cfg(feature = "aws-lc")]
const FAST_PIECE_MIN: usize = 4096;

/// The GMAC of a message in pieces, with its large pieces hashed by aws-lc-rs and the segments
/// joined as the module comment explains. Small pieces, and pieces that start mid-block or are
/// not a whole number of blocks (unless last), go through the streaming GHASH.
#[cfg(feature = "aws-lc")]
struct PieceGmac<'a> {
    soft: &'a SoftGmac,
    aws: &'a super::awslc::AwsLcGcm,
    nonce: [u8; 12],
    h: ghash::Block,
    mask: ghash::Block,
    /// `M` of everything joined so far.
    acc: ghash::Block,
    /// The small pieces since the last large one.
    stream: GhashStream,
    total: u64,
}

#[cfg(feature = "aws-lc")]
impl<'a> PieceGmac<'a> {
    fn compute<'p>(
        soft: &'a SoftGmac,
        aws: &'a super::awslc::AwsLcGcm,
        nonce: &[u8; 12],
        parts: impl IntoIterator<Item = &'p [u8]>,
    ) -> Option<[u8; TAG_LEN]> {
        let mut h = ghash::Block::default();
        soft.aes.encrypt_block(&mut h);
        let mut this = PieceGmac {
            soft,
            aws,
            nonce: *nonce,
            h,
            mask: soft.encrypted_j0(nonce),
            acc: ghash::Block::default(),
            stream: soft.stream(),
            total: 0,
        };
        let mut parts = parts.into_iter().filter(|p| !p.is_empty()).peekable();
        while let Some(part) = parts.next() {
            let last = parts.peek().is_none();
            let aligned = this.stream.pending_len == 0 && (last || part.len() % BLOCK == 0);
            if part.len() >= FAST_PIECE_MIN && aligned {
                this.join_stream();
                this.join_fast(part)?;
            } else {
                this.stream.absorb(part);
            }
        }
        this.join_stream();
        let lengths = gf_mul(&length_block(this.total), &this.h);
        Some(xor(&xor(&this.acc, &lengths), &this.mask).into())
    }

    /// `acc = acc · H^blocks ⊕ segment`.
    fn join(&mut self, segment: ghash::Block, blocks: u64) {
        self.acc = if self.acc == ghash::Block::default() {
            segment
        } else {
            xor(&gf_mul(&self.acc, &gf_pow(&self.h, blocks)), &segment)
        };
    }

    fn join_stream(&mut self) {
        if self.stream.total == 0 {
            return;
        }
        let stream = std::mem::replace(&mut self.stream, self.soft.stream());
        let len = stream.total;
        self.total += len;
        self.join(stream.finish_segment(), blocks(len));
    }

    /// aws-lc-rs gives `M(piece) ⊕ L_piece·H ⊕ E_K(J0)` under the same nonce.
    fn join_fast(&mut self, piece: &[u8]) -> Option<()> {
        let tag = self.aws.gmac(&self.nonce, piece).ok()?;
        let len = piece.len() as u64;
        let own_lengths = gf_mul(&length_block(len), &self.h);
        let segment = xor(&xor(&tag.into(), &self.mask), &own_lengths);
        self.total += len;
        self.join(segment, blocks(len));
        Some(())
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

    /// GMAC of a message held in pieces; its large pieces go through aws-lc-rs when that
    /// backend was chosen.
    pub(crate) fn compute_parts<'a>(
        &self,
        nonce: &[u8; 12],
        parts: impl IntoIterator<Item = &'a [u8]> + Clone,
    ) -> [u8; TAG_LEN] {
        #[cfg(feature = "aws-lc")]
        if let Some(aws) = &self.aws {
            // `None` only if aws-lc-rs refused a piece (past 2^61 bytes): start over in software.
            if let Some(tag) = PieceGmac::compute(&self.soft, aws, nonce, parts.clone()) {
                return tag;
            }
        }
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

    /// Large pieces joined from aws-lc-rs's GMAC equal the one-shot tag, for every way of
    /// cutting a message: WRITE-like (header + body in 7 whole blocks, then the payload), many
    /// large pieces, pieces starting mid-block, unaligned pieces in the middle, empty pieces.
    #[test]
    fn large_pieces_join_to_the_contiguous_tag() {
        let key = hx("feffe9928665731c6d6a8f9467308308");
        let nonce = *b"\x01\x02\x03\x04\x05\x06\x07\x08\x00\x00\x00\x00";
        let msg: Vec<u8> = (0..(1usize << 20) + 112 + 37)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        let mut state = 0x9e3779b97f4a7c15u64;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut layouts: Vec<Vec<usize>> = vec![
            vec![64, 112, 112 + (1 << 20)],
            vec![64, 112, msg.len()],
            vec![112, 112 + 4096, 112 + 8192 + 16, msg.len()],
            vec![5, 5 + 8192, 5 + 8192 + 4096],
            vec![4096, 4096, 4096 + 4095, 4096 + 4095 + 8192],
            vec![0, 16 * 1000, 16 * 1000 + 1],
        ];
        for _ in 0..40 {
            let mut cuts: Vec<usize> = (0..next(6)).map(|_| next(msg.len())).collect();
            // Align some cuts so the fast path is taken between them.
            for c in cuts.iter_mut() {
                if next(2) == 0 {
                    *c -= *c % 16;
                }
            }
            cuts.sort_unstable();
            layouts.push(cuts);
        }
        for &backend in CryptoBackend::available() {
            let g = Gmac::new(&key, backend).unwrap();
            for len in [msg.len(), 112 + 4096, 112 + 4097, 4096, 20000] {
                let msg = &msg[..len];
                let expected = reference(&key, &nonce, msg);
                assert_eq!(g.compute_contiguous(&nonce, msg), expected);
                for cuts in &layouts {
                    let mut pieces = Vec::new();
                    let mut at = 0;
                    for &c in cuts {
                        let c = c.clamp(at, len);
                        pieces.push(&msg[at..c]);
                        at = c;
                    }
                    pieces.push(&msg[at..]);
                    assert_eq!(
                        g.compute_parts(&nonce, pieces.iter().copied()),
                        expected,
                        "{backend:?} len {len} cuts {cuts:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn field_arithmetic() {
        let mut one = ghash::Block::default();
        one[0] = 0x80;
        let h: ghash::Block = hx("66e94bd4ef8a2c3b884cfa59ca342b2e")
            .as_slice()
            .try_into()
            .unwrap();
        assert_eq!(gf_mul(&h, &one), h);
        assert_eq!(gf_pow(&h, 0), one);
        assert_eq!(gf_pow(&h, 1), h);
        let h2 = gf_mul(&h, &h);
        assert_eq!(gf_pow(&h, 2), h2);
        assert_eq!(gf_pow(&h, 5), gf_mul(&gf_mul(&h2, &h2), &h));
        assert_eq!(gf_pow(&h, 12), gf_mul(&gf_pow(&h, 5), &gf_pow(&h, 7)));
    }

    #[test]
    fn rejects_bad_key_length() {
        assert!(Gmac::new(&[0; 32], CryptoBackend::RustCrypto).is_err());
        assert!(Gmac::new(&[0; 15], CryptoBackend::default()).is_err());
    }
}
