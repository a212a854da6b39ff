//! Signing and sealing for one channel of a session, built from the session's keys.
//!
//! On 3.x each channel signs with its own Channel.SigningKey (the first channel's is the
//! session's), while every channel shares the session's encryption and decryption keys
//! (MS-SMB2 3.2.1.3, 3.2.4.1.8).

use bytes::BytesMut;
use std::sync::Arc;

use smb3_proto::crypto::keys::{derive_channel_signing_key, derive_session_keys, session_key_16};
use smb3_proto::crypto::preauth::PreauthHash;
use smb3_proto::crypto::seal::Sealer;
use smb3_proto::crypto::signing::Signer;
use smb3_proto::crypto::{CryptoBackend, CryptoError, SecretKey};

use crate::channel::ChannelCrypto;
use crate::error::{AuthDetail, AuthFailure, Error, ProtocolError, Result};
use crate::key_log::{KeyLog, SessionKeys};
use crate::negotiated::Negotiated;

/// What one channel needs to sign, verify, seal and open messages of its session.
pub(crate) struct SessionSecurity {
    session_id: u64,
    signer: Signer,
    /// Shared by every channel of the session: one nonce sequence for the session's key.
    encryptor: Option<Arc<Sealer>>,
    decryptor: Option<Arc<Sealer>>,
    replies_must_be_signed: bool,
}

/// What the key log gets for a channel signing with `signing_key` after an authentication
/// that produced `session_key`; the encryption keys and `bound_channel` are the caller's.
fn keys_of(
    negotiated: &Negotiated,
    session_id: u64,
    session_key: &[u8],
    signing_key: &SecretKey,
) -> SessionKeys {
    SessionKeys {
        session_id,
        dialect: negotiated.dialect,
        signing_algorithm: negotiated.signing_algorithm,
        cipher: negotiated.cipher,
        session_key: session_key_16(session_key).to_vec(),
        signing_key: signing_key.as_bytes().to_vec(),
        encryption_key: None,
        decryption_key: None,
        bound_channel: false,
    }
}

fn key_error(e: CryptoError) -> Error {
    Error::Auth {
        kind: AuthFailure::NoSessionKey,
        detail: AuthDetail::KeyDerivation(e),
    }
}

impl SessionSecurity {
    /// Derive the session's keys (MS-SMB2 3.2.5.3.1).
    pub(crate) fn derive(
        negotiated: &Negotiated,
        session_key: &[u8],
        preauth: Option<&PreauthHash>,
        session_id: u64,
        replies_must_be_signed: bool,
        key_log: Option<&KeyLog>,
    ) -> Result<SessionSecurity> {
        let backend = CryptoBackend::default();
        let keys = derive_session_keys(negotiated.dialect, session_key, negotiated.cipher, preauth)
            .map_err(key_error)?;
        if let Some(log) = key_log {
            let mut record = keys_of(negotiated, session_id, session_key, &keys.signing_key);
            record.encryption_key = keys.encryption_key.as_ref().map(|k| k.as_bytes().to_vec());
            record.decryption_key = keys.decryption_key.as_ref().map(|k| k.as_bytes().to_vec());
            log.record(&record);
        }
        let signer = Signer::new(
            negotiated.signing_algorithm,
            keys.signing_key.as_bytes(),
            backend,
        )
        .map_err(key_error)?;
        let (encryptor, decryptor) = match (
            negotiated.cipher,
            &keys.encryption_key,
            &keys.decryption_key,
        ) {
            (Some(cipher), Some(enc), Some(dec)) => (
                Some(Arc::new(
                    Sealer::new(cipher, enc.as_bytes(), backend).map_err(key_error)?,
                )),
                Some(Arc::new(
                    Sealer::new(cipher, dec.as_bytes(), backend).map_err(key_error)?,
                )),
            ),
            _ => (None, None),
        };
        Ok(SessionSecurity {
            session_id,
            signer,
            encryptor,
            decryptor,
            replies_must_be_signed,
        })
    }

    /// The keys of a channel bound to this session: its own signing key, derived from the
    /// binding's session key (and on 3.1.1 the new connection's preauth hash), and the
    /// session's encryption keys (MS-SMB2 3.2.5.3.3).
    pub(crate) fn for_channel(
        &self,
        negotiated: &Negotiated,
        binding_session_key: &[u8],
        channel_preauth: Option<&PreauthHash>,
        key_log: Option<&KeyLog>,
    ) -> Result<SessionSecurity> {
        let key =
            derive_channel_signing_key(negotiated.dialect, binding_session_key, channel_preauth)
                .map_err(key_error)?;
        if let Some(log) = key_log {
            let mut record = keys_of(negotiated, self.session_id, binding_session_key, &key);
            record.bound_channel = true;
            log.record(&record);
        }
        let signer = Signer::new(
            negotiated.signing_algorithm,
            key.as_bytes(),
            CryptoBackend::default(),
        )
        .map_err(key_error)?;
        Ok(SessionSecurity {
            session_id: self.session_id,
            signer,
            encryptor: self.encryptor.clone(),
            decryptor: self.decryptor.clone(),
            replies_must_be_signed: self.replies_must_be_signed,
        })
    }

    /// Whether the session can encrypt (a cipher was negotiated).
    pub(crate) fn can_encrypt(&self) -> bool {
        self.encryptor.is_some()
    }

    /// Verify one message signed with this channel's key.
    pub(crate) fn verify_message(&self, msg: &[u8]) -> bool {
        self.signer.verify(msg)
    }
}

impl ChannelCrypto for SessionSecurity {
    fn sign(&self, head: &mut [u8], payload: &[u8]) {
        // Signing only fails on a malformed key, which `derive` already rejected.
        if let Err(e) = self.signer.sign_in_place(head, &[payload]) {
            tracing::error!(error = %e, "signing failed");
        }
    }

    fn verify(&self, msg: &[u8]) -> bool {
        self.signer.verify(msg)
    }

    fn verify_in_place(&self, msg: &mut [u8]) -> bool {
        self.signer.verify_in_place(msg)
    }

    fn seal(&self, parts: &[&[u8]]) -> Result<BytesMut> {
        let Some(enc) = &self.encryptor else {
            return Err(Error::ApiMisuse(
                "encryption requested but no cipher was negotiated",
            ));
        };
        enc.seal(self.session_id, parts)
            // Sealing cannot fail with valid keys and a frame within the transport's limit.
            .map_err(|_| ProtocolError::Unexpected("encryption failed").into())
    }

    fn open_in_place(&self, frame: &mut [u8]) -> Result<usize> {
        let Some(dec) = &self.decryptor else {
            return Err(ProtocolError::EncryptedWithoutKeys.into());
        };
        dec.open_in_place(frame)
            .map_err(|_| ProtocolError::Decrypt.into())
    }

    fn replies_must_be_signed(&self) -> bool {
        self.replies_must_be_signed
    }
}
