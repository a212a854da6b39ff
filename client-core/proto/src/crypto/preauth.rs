//! The SMB 3.1.1 preauthentication integrity hash (MS-SMB2 3.2.5.2 and 3.2.5.3; the only
//! HashAlgorithm defined is SHA-512, MS-SMB2 2.2.3.1.1).
//!
//! The connection's value starts at 64 zero bytes and absorbs the NEGOTIATE request and response.
//! Each session (and each channel being bound) starts from a copy of the connection's value and
//! absorbs its SESSION_SETUP requests and every response except the final STATUS_SUCCESS one
//! (MS-SMB2 3.2.5.3.1). The final value is the KDF context for the 3.1.1 keys.

use sha2::{Digest, Sha512};

/// Length of a SHA-512 digest.
pub const PREAUTH_HASH_LEN: usize = 64;

/// A preauth integrity hash value: `H(i) = SHA-512(H(i-1) || message(i))`, `H(0)` = zeros.
/// `Clone` is how a session forks its value from the connection's.
#[derive(Clone, PartialEq, Eq)]
pub struct PreauthHash([u8; PREAUTH_HASH_LEN]);

impl PreauthHash {
    /// The initial value: 64 zero bytes (MS-SMB2 3.2.5.2 / 3.3.5.4).
    pub fn new() -> Self {
        PreauthHash([0; PREAUTH_HASH_LEN])
    }

    /// A value taken from elsewhere (e.g. a test vector).
    pub fn from_bytes(bytes: [u8; PREAUTH_HASH_LEN]) -> Self {
        PreauthHash(bytes)
    }

    /// Absorb one whole SMB2 message (header included, as sent or received).
    pub fn update(&mut self, message: &[u8]) {
        self.update_parts(&[message]);
    }

    /// Absorb one message held in several buffers (e.g. header+body and a payload), as if they
    /// were concatenated.
    pub fn update_parts(&mut self, parts: &[&[u8]]) {
        let mut sha = Sha512::new();
        sha.update(self.0);
        for part in parts {
            sha.update(part);
        }
        self.0.copy_from_slice(&sha.finalize());
    }

    /// The current value.
    pub fn as_bytes(&self) -> &[u8; PREAUTH_HASH_LEN] {
        &self.0
    }
}

impl Default for PreauthHash {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for PreauthHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreauthHash(")?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::vectors::anatomy311 as v;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    /// The whole chain of the first channel in Microsoft's "anatomy of signing and cryptographic
    /// keys" SMB 3.1.1 multichannel example: NEGOTIATE request/response on the connection, then
    /// the session forks and absorbs two SESSION_SETUP requests and the MORE_PROCESSING response.
    #[test]
    fn anatomy_311_first_channel_chain() {
        let mut conn = PreauthHash::new();
        conn.update(&h(v::NEGOTIATE_REQUEST));
        assert_eq!(
            hex::encode_upper(conn.as_bytes()),
            v::HASH_AFTER_NEGOTIATE_REQUEST
        );
        conn.update(&h(v::NEGOTIATE_RESPONSE));
        assert_eq!(
            hex::encode_upper(conn.as_bytes()),
            v::HASH_AFTER_NEGOTIATE_RESPONSE
        );

        let mut session = conn.clone();
        session.update(&h(v::SESSION_SETUP_REQUEST_1));
        assert_eq!(
            hex::encode_upper(session.as_bytes()),
            v::HASH_AFTER_SETUP_REQUEST_1
        );
        session.update(&h(v::SESSION_SETUP_RESPONSE_1));
        assert_eq!(
            hex::encode_upper(session.as_bytes()),
            v::HASH_AFTER_SETUP_RESPONSE_1
        );
        session.update(&h(v::SESSION_SETUP_REQUEST_2));
        assert_eq!(
            hex::encode_upper(session.as_bytes()),
            v::SESSION_PREAUTH_HASH
        );

        // The fork did not touch the connection's value.
        assert_eq!(
            hex::encode_upper(conn.as_bytes()),
            v::HASH_AFTER_NEGOTIATE_RESPONSE
        );
    }

    /// Same example, second channel: the binding session setup forks from the new connection's
    /// hash and keeps its own chain (the signed requests are hashed as sent, signature included).
    #[test]
    fn anatomy_311_bound_channel_chain() {
        let conn = PreauthHash::from_bytes(h(v::CH2_CONNECTION_HASH).try_into().unwrap());
        let mut channel = conn.clone();
        channel.update(&h(v::CH2_SETUP_REQUEST_1));
        assert_eq!(
            hex::encode_upper(channel.as_bytes()),
            v::CH2_HASH_AFTER_REQUEST_1
        );
        channel.update(&h(v::CH2_SETUP_RESPONSE_1));
        assert_eq!(
            hex::encode_upper(channel.as_bytes()),
            v::CH2_HASH_AFTER_RESPONSE_1
        );
        let msg = h(v::CH2_SETUP_REQUEST_2);
        let (header, body) = msg.split_at(64);
        channel.update_parts(&[header, body]);
        assert_eq!(hex::encode_upper(channel.as_bytes()), v::CH2_PREAUTH_HASH);
    }

    #[test]
    fn update_parts_equals_update_of_the_concatenation() {
        let msg = h(v::SESSION_SETUP_REQUEST_2);
        let mut whole = PreauthHash::new();
        whole.update(&msg);
        for split in [0, 1, 64, 65, msg.len() - 1, msg.len()] {
            let mut parts = PreauthHash::new();
            let (a, b) = msg.split_at(split);
            parts.update_parts(&[a, &[], b]);
            assert_eq!(parts, whole, "split at {split}");
        }
        assert_ne!(whole, PreauthHash::new());
    }

    #[test]
    fn debug_is_hex() {
        let d = format!("{:?}", PreauthHash::from_bytes([0xab; 64]));
        assert!(d.starts_with("PreauthHash(abab"));
        assert_eq!(d.len(), "PreauthHash()".len() + 128);
    }
}
