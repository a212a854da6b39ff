//! Session and channel keys (MS-SMB2 3.2.5.3.1 Handling a New Authentication, 3.1.4.2).
//!
//! Inputs: the key the authentication protocol (sspi) exports, which MS-SMB2 keeps twice:
//! - Session.SessionKey: its first 16 bytes, right-padded with zeros if shorter (3.2.1.3);
//! - Session.FullSessionKey: all of it (Kerberos with AES-256 gives 32 bytes).
//!
//! Every key is derived from Session.SessionKey except the 3.1.1 AES-256 cipher keys, which
//! MS-SMB2 3.2.5.3.1 derives from Session.FullSessionKey with L = 256.
//!
//! | key            | 3.0 / 3.0.2 label, context       | 3.1.1 label (context: preauth hash) |
//! |----------------|----------------------------------|-------------------------------------|
//! | SigningKey     | "SMB2AESCMAC", "SmbSign"         | "SMBSigningKey"                     |
//! | EncryptionKey  | "SMB2AESCCM", "ServerIn " (space)| "SMBC2SCipherKey"                   |
//! | DecryptionKey  | "SMB2AESCCM", "ServerOut"        | "SMBS2CCipherKey"                   |
//! | ApplicationKey | "SMB2APP", "SmbRpc"              | "SMBAppKey"                         |
//!
//! All labels and constant contexts include their terminating NUL. Before 3.0 the signing key
//! is Session.SessionKey itself (HMAC-SHA256) and the application key is the session key too.

use super::kdf::kdf;
use super::preauth::PreauthHash;
use super::{CryptoError, SecretKey};
use crate::dialect::{Cipher, Dialect};

/// 3.0 / 3.0.2 labels and contexts (MS-SMB2 3.2.5.3.1), NUL included.
mod smb30 {
    pub(super) const SIGNING: (&[u8], &[u8]) = (b"SMB2AESCMAC\0", b"SmbSign\0");
    pub(super) const APPLICATION: (&[u8], &[u8]) = (b"SMB2APP\0", b"SmbRpc\0");
    // "ServerIn " really has a trailing space before the NUL.
    pub(super) const ENCRYPTION: (&[u8], &[u8]) = (b"SMB2AESCCM\0", b"ServerIn \0");
    pub(super) const DECRYPTION: (&[u8], &[u8]) = (b"SMB2AESCCM\0", b"ServerOut\0");
}

/// 3.1.1 labels (MS-SMB2 3.2.5.3.1), NUL included; the context is the preauth hash.
mod smb311 {
    pub(super) const SIGNING: &[u8] = b"SMBSigningKey\0";
    pub(super) const APPLICATION: &[u8] = b"SMBAppKey\0";
    pub(super) const ENCRYPTION: &[u8] = b"SMBC2SCipherKey\0";
    pub(super) const DECRYPTION: &[u8] = b"SMBS2CCipherKey\0";
}

/// The keys of one authenticated session (MS-SMB2 3.2.1.3 Per Session).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionKeys {
    /// Session.SigningKey (16 bytes). Also the first channel's Channel.SigningKey.
    pub signing_key: SecretKey,
    /// Session.EncryptionKey: client-to-server messages (16 bytes, or 32 for AES-256). `None`
    /// before 3.0, and for 3.1.1 when no cipher was negotiated.
    pub encryption_key: Option<SecretKey>,
    /// Session.DecryptionKey: server-to-client messages. `None` exactly when `encryption_key` is.
    pub decryption_key: Option<SecretKey>,
    /// Session.ApplicationKey (16 bytes), handed to higher layers (e.g. DCE/RPC over SMB).
    pub application_key: SecretKey,
}

/// Session.SessionKey: the first 16 bytes of the exported key, right-padded with zeros
/// (MS-SMB2 3.2.1.3).
pub fn session_key_16(full_session_key: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = full_session_key.len().min(16);
    out[..n].copy_from_slice(&full_session_key[..n]);
    out
}

/// Derive all keys of a new session (MS-SMB2 3.2.5.3.1).
///
/// - `full_session_key`: every byte the authentication protocol exported (not truncated).
/// - `cipher`: the negotiated cipher. 3.0/3.0.2 only know AES-128-CCM (pass it or `None`; the
///   cipher keys are derived either way, as Windows does). 3.1.1 derives cipher keys only when a
///   cipher was negotiated. 2.1 has no encryption and takes `None`.
/// - `preauth`: Session.PreauthIntegrityHashValue, required for 3.1.1, ignored otherwise.
pub fn derive_session_keys(
    dialect: Dialect,
    full_session_key: &[u8],
    cipher: Option<Cipher>,
    preauth: Option<&PreauthHash>,
) -> Result<SessionKeys, CryptoError> {
    check_session_key(full_session_key)?;
    let sk = session_key_16(full_session_key);
    match dialect {
        Dialect::Smb210 => {
            if cipher.is_some() {
                return Err(CryptoError::InvalidParameters(
                    "SMB 2.1 has no encryption: cipher must be None",
                ));
            }
            let key = SecretKey::new(&sk)?;
            Ok(SessionKeys {
                signing_key: key.clone(),
                encryption_key: None,
                decryption_key: None,
                application_key: key,
            })
        }
        Dialect::Smb300 | Dialect::Smb302 => {
            if !matches!(cipher, None | Some(Cipher::Aes128Ccm)) {
                return Err(CryptoError::InvalidParameters(
                    "SMB 3.0/3.0.2 only support AES-128-CCM",
                ));
            }
            Ok(SessionKeys {
                signing_key: derive16(&sk, smb30::SIGNING.0, smb30::SIGNING.1)?,
                encryption_key: Some(derive16(&sk, smb30::ENCRYPTION.0, smb30::ENCRYPTION.1)?),
                decryption_key: Some(derive16(&sk, smb30::DECRYPTION.0, smb30::DECRYPTION.1)?),
                application_key: derive16(&sk, smb30::APPLICATION.0, smb30::APPLICATION.1)?,
            })
        }
        Dialect::Smb311 => {
            let hash = require_preauth(preauth)?.as_bytes();
            let (encryption_key, decryption_key) = match cipher {
                None => (None, None),
                Some(cipher) => {
                    // MS-SMB2 3.2.5.3.1: 128-bit ciphers use Session.SessionKey with L = 128;
                    // AES-256-CCM/GCM use Session.FullSessionKey with L = 256.
                    let kdk: &[u8] = match cipher.key_len() {
                        16 => &sk,
                        _ => full_session_key,
                    };
                    let len = cipher.key_len();
                    (
                        Some(derive(kdk, smb311::ENCRYPTION, hash, len)?),
                        Some(derive(kdk, smb311::DECRYPTION, hash, len)?),
                    )
                }
            };
            Ok(SessionKeys {
                signing_key: derive16(&sk, smb311::SIGNING, hash)?,
                encryption_key,
                decryption_key,
                application_key: derive16(&sk, smb311::APPLICATION, hash)?,
            })
        }
    }
}

/// Channel.SigningKey of a channel added by session binding (MS-SMB2 3.2.5.3.1, binding case).
///
/// `binding_session_key` is the key exported by the binding SESSION_SETUP's own authentication
/// (not the session's original key); `channel_preauth` is that channel's
/// PreauthSession.PreauthIntegrityHashValue (3.1.1 only; it started from the new connection's
/// hash after its NEGOTIATE). The derivation is the session signing key's, with those inputs;
/// encryption, decryption and application keys stay the session's.
///
/// Before 3.0 there is no binding; this returns the 16-byte session key, which is what a 2.x
/// channel signs with.
pub fn derive_channel_signing_key(
    dialect: Dialect,
    binding_session_key: &[u8],
    channel_preauth: Option<&PreauthHash>,
) -> Result<SecretKey, CryptoError> {
    derive_signing_key(dialect, binding_session_key, channel_preauth)
}

/// Session.SigningKey alone (see [`derive_session_keys`]).
pub fn derive_signing_key(
    dialect: Dialect,
    full_session_key: &[u8],
    preauth: Option<&PreauthHash>,
) -> Result<SecretKey, CryptoError> {
    check_session_key(full_session_key)?;
    let sk = session_key_16(full_session_key);
    match dialect {
        Dialect::Smb210 => SecretKey::new(&sk),
        Dialect::Smb300 | Dialect::Smb302 => derive16(&sk, smb30::SIGNING.0, smb30::SIGNING.1),
        Dialect::Smb311 => derive16(&sk, smb311::SIGNING, require_preauth(preauth)?.as_bytes()),
    }
}

fn check_session_key(key: &[u8]) -> Result<(), CryptoError> {
    // Anonymous and guest sessions have no key; they cannot sign or encrypt (MS-SMB2 3.2.5.3.1).
    if key.is_empty() {
        return Err(CryptoError::InvalidKeyLength {
            what: "session key",
            len: 0,
        });
    }
    Ok(())
}

fn require_preauth(preauth: Option<&PreauthHash>) -> Result<&PreauthHash, CryptoError> {
    preauth.ok_or(CryptoError::InvalidParameters(
        "SMB 3.1.1 key derivation needs the session's preauth integrity hash",
    ))
}

fn derive16(kdk: &[u8], label: &[u8], context: &[u8]) -> Result<SecretKey, CryptoError> {
    derive(kdk, label, context, 16)
}

fn derive(kdk: &[u8], label: &[u8], context: &[u8], len: usize) -> Result<SecretKey, CryptoError> {
    let mut out = [0u8; SecretKey::MAX_LEN];
    let out = &mut out[..len];
    kdf(kdk, label, context, out)?;
    SecretKey::new(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::vectors::{anatomy30, anatomy311, enc30, enc311_ccm, enc311_gcm, hx};

    fn hash(s: &str) -> PreauthHash {
        PreauthHash::from_bytes(hx(s).try_into().unwrap())
    }

    fn hex_of(k: &SecretKey) -> String {
        hex::encode_upper(k.as_bytes())
    }

    fn assert_keys(keys: &SessionKeys, signing: &str, enc: &str, dec: &str, app: &str) {
        assert_eq!(hex_of(&keys.signing_key), signing);
        assert_eq!(hex_of(keys.encryption_key.as_ref().unwrap()), enc);
        assert_eq!(hex_of(keys.decryption_key.as_ref().unwrap()), dec);
        assert_eq!(hex_of(&keys.application_key), app);
    }

    /// Source: "anatomy of signing and cryptographic keys", SMB 3.0 multichannel example.
    #[test]
    fn smb30_anatomy_vectors() {
        let keys = derive_session_keys(
            Dialect::Smb300,
            &hx(anatomy30::SESSION_KEY),
            Some(Cipher::Aes128Ccm),
            None,
        )
        .unwrap();
        assert_keys(
            &keys,
            anatomy30::SIGNING_KEY,
            anatomy30::ENCRYPTION_KEY,
            anatomy30::DECRYPTION_KEY,
            anatomy30::APPLICATION_KEY,
        );
        // 3.0.2 uses the same labels; the cipher argument may be omitted.
        let keys302 =
            derive_session_keys(Dialect::Smb302, &hx(anatomy30::SESSION_KEY), None, None).unwrap();
        assert_eq!(keys302, keys);

        // Second channel: Channel.SigningKey from the binding authentication's key.
        let ch2 =
            derive_channel_signing_key(Dialect::Smb300, &hx(anatomy30::CHANNEL2_SESSION_KEY), None)
                .unwrap();
        assert_eq!(hex_of(&ch2), anatomy30::CHANNEL2_SIGNING_KEY);
    }

    /// Source: "Encryption in SMB 3.0: A protocol perspective".
    #[test]
    fn smb30_encryption_blog_vectors() {
        let keys =
            derive_session_keys(Dialect::Smb300, &hx(enc30::SESSION_KEY), None, None).unwrap();
        assert_keys(
            &keys,
            enc30::SIGNING_KEY,
            enc30::ENCRYPTION_KEY,
            enc30::DECRYPTION_KEY,
            enc30::APPLICATION_KEY,
        );
    }

    /// Source: "anatomy of signing and cryptographic keys", SMB 3.1.1 multichannel example,
    /// first channel and bound second channel.
    #[test]
    fn smb311_anatomy_vectors() {
        let keys = derive_session_keys(
            Dialect::Smb311,
            &hx(anatomy311::SESSION_KEY),
            Some(Cipher::Aes128Gcm),
            Some(&hash(anatomy311::SESSION_PREAUTH_HASH)),
        )
        .unwrap();
        assert_keys(
            &keys,
            anatomy311::SIGNING_KEY,
            anatomy311::ENCRYPTION_KEY,
            anatomy311::DECRYPTION_KEY,
            anatomy311::APPLICATION_KEY,
        );
        let ch2 = derive_channel_signing_key(
            Dialect::Smb311,
            &hx(anatomy311::CH2_SESSION_KEY),
            Some(&hash(anatomy311::CH2_PREAUTH_HASH)),
        )
        .unwrap();
        assert_eq!(hex_of(&ch2), anatomy311::CH2_SIGNING_KEY);
    }

    /// Source: "SMB 3.1.1 Encryption in Windows 10", appendices A.1 (GCM) and A.2 (CCM).
    #[test]
    fn smb311_encryption_blog_vectors() {
        let gcm = derive_session_keys(
            Dialect::Smb311,
            &hx(enc311_gcm::SESSION_KEY),
            Some(Cipher::Aes128Gcm),
            Some(&hash(enc311_gcm::PREAUTH_HASH)),
        )
        .unwrap();
        assert_keys(
            &gcm,
            enc311_gcm::SIGNING_KEY,
            enc311_gcm::ENCRYPTION_KEY,
            enc311_gcm::DECRYPTION_KEY,
            enc311_gcm::APPLICATION_KEY,
        );
        let ccm = derive_session_keys(
            Dialect::Smb311,
            &hx(enc311_ccm::SESSION_KEY),
            Some(Cipher::Aes128Ccm),
            Some(&hash(enc311_ccm::PREAUTH_HASH)),
        )
        .unwrap();
        assert_keys(
            &ccm,
            enc311_ccm::SIGNING_KEY,
            enc311_ccm::ENCRYPTION_KEY,
            enc311_ccm::DECRYPTION_KEY,
            enc311_ccm::APPLICATION_KEY,
        );
    }

    /// AES-256 cipher keys: 32 bytes, L = 256, from the FULL session key; signing and
    /// application keys still from the first 16 bytes. No published vector exists, so the
    /// expectations are built from the KDF directly.
    #[test]
    fn smb311_aes256_uses_full_session_key() {
        let full: Vec<u8> = (0u8..32).collect();
        let preauth = hash(anatomy311::SESSION_PREAUTH_HASH);
        let keys = derive_session_keys(
            Dialect::Smb311,
            &full,
            Some(Cipher::Aes256Gcm),
            Some(&preauth),
        )
        .unwrap();

        let mut enc = [0u8; 32];
        kdf(&full, b"SMBC2SCipherKey\0", preauth.as_bytes(), &mut enc).unwrap();
        let mut dec = [0u8; 32];
        kdf(&full, b"SMBS2CCipherKey\0", preauth.as_bytes(), &mut dec).unwrap();
        let mut sign = [0u8; 16];
        kdf(
            &full[..16],
            b"SMBSigningKey\0",
            preauth.as_bytes(),
            &mut sign,
        )
        .unwrap();

        assert_eq!(keys.encryption_key.as_ref().unwrap().as_bytes(), enc);
        assert_eq!(keys.decryption_key.as_ref().unwrap().as_bytes(), dec);
        assert_eq!(keys.signing_key.as_bytes(), sign);
        assert_eq!(keys.encryption_key.as_ref().unwrap().len(), 32);

        // Truncating the session key to 16 bytes must give different cipher keys.
        let truncated = derive_session_keys(
            Dialect::Smb311,
            &full[..16],
            Some(Cipher::Aes256Ccm),
            Some(&preauth),
        )
        .unwrap();
        assert_ne!(truncated.encryption_key, keys.encryption_key);
        assert_eq!(truncated.signing_key, keys.signing_key);

        // A 128-bit cipher ignores bytes past 16.
        let k128 = derive_session_keys(
            Dialect::Smb311,
            &full,
            Some(Cipher::Aes128Ccm),
            Some(&preauth),
        )
        .unwrap();
        let k128_short = derive_session_keys(
            Dialect::Smb311,
            &full[..16],
            Some(Cipher::Aes128Ccm),
            Some(&preauth),
        )
        .unwrap();
        assert_eq!(k128, k128_short);
        assert_eq!(k128.encryption_key.as_ref().unwrap().len(), 16);
    }

    #[test]
    fn smb21_signing_key_is_the_session_key() {
        let keys = derive_session_keys(Dialect::Smb210, &[0xAB; 16], None, None).unwrap();
        assert_eq!(keys.signing_key.as_bytes(), &[0xAB; 16]);
        assert_eq!(keys.application_key.as_bytes(), &[0xAB; 16]);
        assert!(keys.encryption_key.is_none() && keys.decryption_key.is_none());
        // A short key is right-padded with zeros; a long one truncated.
        let short = derive_session_keys(Dialect::Smb210, &[1, 2], None, None).unwrap();
        assert_eq!(
            short.signing_key.as_bytes(),
            &[1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        let long = derive_signing_key(Dialect::Smb210, &[9; 32], None).unwrap();
        assert_eq!(long.as_bytes(), &[9; 16]);
    }

    #[test]
    fn smb311_without_cipher_has_no_cipher_keys() {
        let keys = derive_session_keys(
            Dialect::Smb311,
            &hx(anatomy311::SESSION_KEY),
            None,
            Some(&hash(anatomy311::SESSION_PREAUTH_HASH)),
        )
        .unwrap();
        assert!(keys.encryption_key.is_none() && keys.decryption_key.is_none());
        assert_eq!(hex_of(&keys.signing_key), anatomy311::SIGNING_KEY);
    }

    #[test]
    fn rejects_inconsistent_parameters() {
        let sk = hx(anatomy311::SESSION_KEY);
        assert!(matches!(
            derive_session_keys(Dialect::Smb311, &sk, None, None),
            Err(CryptoError::InvalidParameters(_))
        ));
        assert!(derive_session_keys(Dialect::Smb300, &sk, Some(Cipher::Aes128Gcm), None).is_err());
        assert!(derive_session_keys(Dialect::Smb210, &sk, Some(Cipher::Aes128Ccm), None).is_err());
        assert!(matches!(
            derive_session_keys(Dialect::Smb300, &[], None, None),
            Err(CryptoError::InvalidKeyLength { len: 0, .. })
        ));
        assert!(derive_channel_signing_key(Dialect::Smb311, &sk, None).is_err());
    }
}
