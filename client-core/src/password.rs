//! The user's secret, kept in memory no longer and in no more copies than the session needs.
//!
//! A session authenticates more than once: every channel bound to it (MS-SMB2 3.2.4.2.3.1)
//! and every re-establishment after all channels were lost (3.2.4.2.3) runs the exchange
//! again as the same user, so something that proves the user must stay in memory for the
//! session's lifetime. What stays is the least that works:
//!
//! - NTLM: the NT hash (MS-NLMP 3.3.1, MD4 of the UTF-16LE password), not the password. It
//!   is all NTLMv2 needs, and unlike the password it is worth nothing to any other system
//!   the user logs on to with the same password (it is still worth a session with this
//!   server: guard it like the password).
//! - Kerberos: the password, because the security package (sspi 0.23) keeps no ticket cache
//!   and asks the KDC for a new ticket, proving the user with a key derived from it.
//!
//! Both are wiped when the last copy is dropped (the session is logged off or dropped), and
//! neither ever shows in a `{:?}`.

use std::fmt;
use std::sync::Arc;

use md4::{Digest, Md4};
use zeroize::Zeroizing;

/// A password, wiped from memory when dropped; `{:?}` prints `<hidden>`. Build one from a
/// `String` or `&str` (`"secret".into()`).
#[derive(Clone, Default)]
pub struct Password(Arc<Zeroizing<String>>);

impl Password {
    /// The password, to hand to a security package.
    pub(crate) fn expose(&self) -> &str {
        self.0.as_str()
    }

    /// The password itself, for what must have it: handing it to another process of the
    /// program's own (smbfuse's daemon). Every copy made of it is one more to wipe.
    pub fn expose_secret(&self) -> &str {
        self.0.as_str()
    }

    /// Whether the password is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The NT hash of this password: MD4 over its UTF-16LE encoding (MS-NLMP 3.3.1,
    /// NTOWFv1, which NTOWFv2 starts from).
    pub(crate) fn nt_hash(&self) -> NtHash {
        let mut utf16 = Zeroizing::new(Vec::with_capacity(self.0.len() * 2));
        for unit in self.0.encode_utf16() {
            utf16.extend_from_slice(&unit.to_le_bytes());
        }
        let mut hash = Zeroizing::new([0u8; 16]);
        hash.copy_from_slice(&Md4::digest(&utf16[..]));
        NtHash(Arc::new(hash))
    }
}

impl From<String> for Password {
    fn from(s: String) -> Self {
        Password(Arc::new(Zeroizing::new(s)))
    }
}

impl From<&str> for Password {
    fn from(s: &str) -> Self {
        Password::from(s.to_string())
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

/// An NT hash, wiped from memory when dropped.
#[derive(Clone)]
pub(crate) struct NtHash(Arc<Zeroizing<[u8; 16]>>);

impl NtHash {
    /// The form sspi takes in a password field for an NT hash (`$NTLM$:` and 32 hex digits,
    /// `sspi::ntlm::NTLM_HASH_PREFIX`). Handing every NTLM exchange the hash this way also
    /// keeps sspi from mistaking a password that happens to start with `$NTLM$:` for a hash.
    pub(crate) fn sspi_password(&self) -> Zeroizing<String> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = Zeroizing::new(String::with_capacity(7 + 32));
        s.push_str("$NTLM$:");
        for b in self.0.iter() {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
        s
    }
}

impl fmt::Debug for NtHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NtHash(<hidden>)")
    }
}

/// What the session keeps to authenticate again (see the module's documentation).
#[derive(Clone, Debug)]
pub(crate) enum KeptSecret {
    /// NTLM sessions keep the NT hash.
    NtHash(NtHash),
    /// Kerberos sessions keep the password.
    Password(Password),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MS-NLMP 4.2.2.1.1: NTOWFv1("Password") = a4f49c406510bdcab6824ee7c30fd852.
    #[test]
    fn nt_hash_matches_the_ms_nlmp_example() {
        let hash = Password::from("Password").nt_hash();
        assert_eq!(
            hash.sspi_password().as_str(),
            "$NTLM$:a4f49c406510bdcab6824ee7c30fd852"
        );
    }

    #[test]
    fn a_password_that_looks_like_a_hash_is_hashed_like_any_other() {
        let odd = Password::from("$NTLM$:a4f49c406510bdcab6824ee7c30fd852");
        assert_ne!(
            odd.nt_hash().sspi_password().as_str(),
            "$NTLM$:a4f49c406510bdcab6824ee7c30fd852"
        );
    }

    #[test]
    fn nothing_secret_in_debug_output() {
        let p = Password::from("hunter2");
        assert_eq!(format!("{p:?}"), "<hidden>");
        let kept = KeptSecret::NtHash(p.nt_hash());
        assert!(!format!("{kept:?}").contains("hunter2"));
        assert!(!format!("{:?}", KeptSecret::Password(p)).contains("hunter2"));
    }
}
