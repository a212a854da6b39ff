//! MS-SMB2 2.2.41 SMB2 TRANSFORM_HEADER: the 52-byte header in front of an encrypted message
//! (SMB 3.x only). The AEAD work is in [`crate::crypto::seal`]; this file is only the wire format.
//!
//! ```text
//! offset  size  field
//!      0     4  ProtocolId = 0xFD 'S' 'M' 'B'
//!      4    16  Signature (the AEAD tag)
//!     20    16  Nonce (11 bytes for CCM, 12 for GCM, then reserved bytes)
//!     36     4  OriginalMessageSize
//!     40     2  Reserved
//!     42     2  Flags (3.1.1) / EncryptionAlgorithm (3.0.x): 0x0001
//!     44     8  SessionId
//! ```
//!
//! The AAD of the AEAD is the 32 bytes from Nonce to the end of the header, exactly as they are
//! on the wire (MS-SMB2 3.1.4.3: "excluding the ProtocolId and Signature fields").

use bytes::{BufMut, BytesMut};

use crate::codec::{DecodeError, Reader};

/// Length of the TRANSFORM_HEADER.
pub const TRANSFORM_HEADER_LEN: usize = 52;
/// `0xFD 'S' 'M' 'B'`.
pub const TRANSFORM_PROTOCOL_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];
/// Offset of the Signature field.
pub const TRANSFORM_SIGNATURE_OFFSET: usize = 4;
/// Offset of the Nonce field, where the AAD starts.
pub const TRANSFORM_NONCE_OFFSET: usize = 20;
/// Length of the AAD: Nonce through SessionId.
pub const TRANSFORM_AAD_LEN: usize = TRANSFORM_HEADER_LEN - TRANSFORM_NONCE_OFFSET;

/// Flags/EncryptionAlgorithm (MS-SMB2 2.2.41). A newtype so unknown values survive decoding;
/// [`crate::crypto::Sealer::open`] rejects anything but [`TransformFlags::ENCRYPTED`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct TransformFlags(pub u16);

impl TransformFlags {
    /// 0x0001: the message is encrypted with the negotiated cipher (3.1.1 "Encrypted"; the 3.0.x
    /// value SMB2_ENCRYPTION_AES128_CCM has the same code).
    pub const ENCRYPTED: TransformFlags = TransformFlags(0x0001);
}

/// MS-SMB2 2.2.41 SMB2 TRANSFORM_HEADER.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TransformHeader {
    /// The AEAD tag over the AAD and the encrypted message.
    pub signature: [u8; 16],
    /// The nonce field: AES_CCM_Nonce (11 bytes) or AES_GCM_Nonce (12 bytes), then reserved
    /// bytes that senders should zero (some fill them; they are part of the AAD either way).
    pub nonce: [u8; 16],
    /// Size of the SMB2 message once decrypted.
    pub original_message_size: u32,
    /// Flags/EncryptionAlgorithm.
    pub flags: TransformFlags,
    /// The session whose keys encrypted the message.
    pub session_id: u64,
}

impl TransformHeader {
    /// Whether `frame` starts with the TRANSFORM_HEADER ProtocolId (as opposed to 0xFE 'S' 'M' 'B'
    /// for a plain message).
    pub fn is_transform(frame: &[u8]) -> bool {
        frame.starts_with(&TRANSFORM_PROTOCOL_ID)
    }

    /// The 52 header bytes (Reserved written as zero).
    pub fn to_bytes(&self) -> [u8; TRANSFORM_HEADER_LEN] {
        let mut out = [0u8; TRANSFORM_HEADER_LEN];
        out[..4].copy_from_slice(&TRANSFORM_PROTOCOL_ID);
        out[4..20].copy_from_slice(&self.signature);
        out[20..36].copy_from_slice(&self.nonce);
        out[36..40].copy_from_slice(&self.original_message_size.to_le_bytes());
        // 40..42 Reserved = 0
        out[42..44].copy_from_slice(&self.flags.0.to_le_bytes());
        out[44..52].copy_from_slice(&self.session_id.to_le_bytes());
        out
    }

    /// Append the 52-byte header to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_slice(&self.to_bytes());
    }

    /// Decode the header at the start of `frame` (bytes after it are not looked at). Checks the
    /// ProtocolId; the Flags value is kept as is and Reserved is ignored.
    pub fn decode(frame: &[u8]) -> Result<TransformHeader, DecodeError> {
        let mut r = Reader::new(frame);
        let magic = r.array::<4>("TRANSFORM_HEADER ProtocolId")?;
        if magic != TRANSFORM_PROTOCOL_ID {
            return Err(DecodeError::InvalidValue {
                what: "TRANSFORM_HEADER ProtocolId",
                value: u32::from_le_bytes(magic).into(),
            });
        }
        let signature = r.array::<16>("TRANSFORM_HEADER Signature")?;
        let nonce = r.array::<16>("TRANSFORM_HEADER Nonce")?;
        let original_message_size = r.u32("TRANSFORM_HEADER OriginalMessageSize")?;
        r.skip(2, "TRANSFORM_HEADER Reserved")?;
        let flags = TransformFlags(r.u16("TRANSFORM_HEADER Flags")?);
        let session_id = r.u64("TRANSFORM_HEADER SessionId")?;
        Ok(TransformHeader {
            signature,
            nonce,
            original_message_size,
            flags,
            session_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transform header of the encrypted WRITE request in Microsoft's "SMB 3.1.1 Encryption
    /// in Windows 10" blog, appendix A.1 (AES-128-GCM).
    const GCM_WRITE_HEADER: &str = concat!(
        "FD534D42BD73D97D2BC9001BCAFAC0FDFF5FEEBCC7D6822D269CAF48904C664C0000000087000000",
        "000001002500000000100000"
    );

    fn gcm_write_header() -> TransformHeader {
        let mut nonce = [0u8; 16];
        nonce[..12].copy_from_slice(&hex::decode("C7D6822D269CAF48904C664C").unwrap());
        TransformHeader {
            signature: hex::decode("BD73D97D2BC9001BCAFAC0FDFF5FEEBC")
                .unwrap()
                .try_into()
                .unwrap(),
            nonce,
            original_message_size: 0x87,
            flags: TransformFlags::ENCRYPTED,
            session_id: 0x1000_0000_0025,
        }
    }

    #[test]
    fn encodes_published_header() {
        let mut out = BytesMut::new();
        gcm_write_header().encode(&mut out);
        assert_eq!(hex::encode_upper(&out), GCM_WRITE_HEADER);
        assert_eq!(gcm_write_header().to_bytes()[..], out[..]);
    }

    #[test]
    fn decodes_published_header_field_by_field() {
        let mut frame = hex::decode(GCM_WRITE_HEADER).unwrap();
        frame.extend_from_slice(&[0xAB; 7]); // ciphertext that follows is not looked at
        assert!(TransformHeader::is_transform(&frame));
        let h = TransformHeader::decode(&frame).unwrap();
        assert_eq!(h, gcm_write_header());
        assert_eq!(h.session_id, 0x1000_0000_0025);
        assert_eq!(h.original_message_size, 135);
        assert_eq!(h.flags, TransformFlags(1));
        assert_eq!(&h.nonce[12..], &[0, 0, 0, 0]);
    }

    /// "Encryption in SMB 3.0: A protocol perspective": EncryptionAlgorithm 0x0001 and a
    /// Nonce field filled on all 16 bytes, kept as is.
    #[test]
    fn decodes_smb30_header_with_full_nonce() {
        let frame = hex::decode(concat!(
            "FD534D4281A286535415445DAE393921E44FA42E66E69A111892584FB5ED524A",
            "744DA3EE87000000000001001100001400E40800"
        ))
        .unwrap();
        let h = TransformHeader::decode(&frame).unwrap();
        assert_eq!(
            hex::encode_upper(h.nonce),
            "66E69A111892584FB5ED524A744DA3EE"
        );
        assert_eq!(h.original_message_size, 0x87);
        assert_eq!(h.flags, TransformFlags::ENCRYPTED);
        assert_eq!(h.session_id, 0x0008_e400_1400_0011);
        assert_eq!(h.to_bytes()[..], frame[..]);
    }

    #[test]
    fn keeps_unknown_flags_and_ignores_reserved() {
        let mut frame = hex::decode(GCM_WRITE_HEADER).unwrap();
        frame[40] = 0x55; // Reserved
        frame[42] = 0x02; // Flags
        let h = TransformHeader::decode(&frame).unwrap();
        assert_eq!(h.flags, TransformFlags(2));
        assert_eq!(h.session_id, 0x1000_0000_0025);
    }

    #[test]
    fn rejects_short_and_wrong_magic() {
        let frame = hex::decode(GCM_WRITE_HEADER).unwrap();
        for len in [0, 3, 4, 20, 36, 51] {
            assert!(matches!(
                TransformHeader::decode(&frame[..len]),
                Err(DecodeError::Truncated { .. })
            ));
        }
        for magic in [
            [0xFE, b'S', b'M', b'B'],
            [0xFC, b'S', b'M', b'B'],
            [0xFD, b'S', b'M', b'C'],
        ] {
            let mut bad = frame.clone();
            bad[..4].copy_from_slice(&magic);
            assert!(!TransformHeader::is_transform(&bad));
            assert!(matches!(
                TransformHeader::decode(&bad),
                Err(DecodeError::InvalidValue { .. })
            ));
        }
        assert!(!TransformHeader::is_transform(&[0xFD, b'S']));
    }
}
