//! Dialects and algorithm identifiers shared by the wire format and the crypto layer.

/// SMB2 dialect revision (MS-SMB2 2.2.3). Only the dialects this client speaks are named.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Dialect {
    /// SMB 2.1 (0x0210)
    Smb210,
    /// SMB 3.0 (0x0300)
    Smb300,
    /// SMB 3.0.2 (0x0302)
    Smb302,
    /// SMB 3.1.1 (0x0311)
    Smb311,
}

impl Dialect {
    /// Every dialect this client offers, oldest first.
    pub const ALL: [Dialect; 4] = [
        Dialect::Smb210,
        Dialect::Smb300,
        Dialect::Smb302,
        Dialect::Smb311,
    ];

    /// The DialectRevision code on the wire.
    pub fn code(self) -> u16 {
        match self {
            Dialect::Smb210 => 0x0210,
            Dialect::Smb300 => 0x0300,
            Dialect::Smb302 => 0x0302,
            Dialect::Smb311 => 0x0311,
        }
    }

    /// The dialect for a wire code, if this client speaks it.
    pub fn from_code(code: u16) -> Option<Dialect> {
        Dialect::ALL.into_iter().find(|d| d.code() == code)
    }

    /// SMB 3.x family (encryption, multichannel, AES signing).
    pub fn is_smb3(self) -> bool {
        self >= Dialect::Smb300
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dialect::Smb210 => "2.1",
            Dialect::Smb300 => "3.0",
            Dialect::Smb302 => "3.0.2",
            Dialect::Smb311 => "3.1.1",
        })
    }
}

/// Signing algorithm (MS-SMB2 2.2.3.1.7 SigningAlgorithms). Before 3.1.1 the dialect decides:
/// 2.x uses HMAC-SHA256, 3.0/3.0.2 AES-CMAC.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SigningAlgorithm {
    /// HMAC-SHA256 (0x0000)
    HmacSha256,
    /// AES-128-CMAC (0x0001)
    AesCmac,
    /// AES-128-GMAC (0x0002)
    AesGmac,
}

impl SigningAlgorithm {
    /// Wire id.
    pub fn id(self) -> u16 {
        match self {
            SigningAlgorithm::HmacSha256 => 0,
            SigningAlgorithm::AesCmac => 1,
            SigningAlgorithm::AesGmac => 2,
        }
    }

    /// From a wire id.
    pub fn from_id(id: u16) -> Option<Self> {
        match id {
            0 => Some(SigningAlgorithm::HmacSha256),
            1 => Some(SigningAlgorithm::AesCmac),
            2 => Some(SigningAlgorithm::AesGmac),
            _ => None,
        }
    }
}

/// Encryption cipher (MS-SMB2 2.2.3.1.2 Ciphers).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Cipher {
    /// AES-128-CCM (0x0001)
    Aes128Ccm,
    /// AES-128-GCM (0x0002)
    Aes128Gcm,
    /// AES-256-CCM (0x0003)
    Aes256Ccm,
    /// AES-256-GCM (0x0004)
    Aes256Gcm,
}

impl Cipher {
    /// Wire id.
    pub fn id(self) -> u16 {
        match self {
            Cipher::Aes128Ccm => 1,
            Cipher::Aes128Gcm => 2,
            Cipher::Aes256Ccm => 3,
            Cipher::Aes256Gcm => 4,
        }
    }

    /// From a wire id.
    pub fn from_id(id: u16) -> Option<Self> {
        match id {
            1 => Some(Cipher::Aes128Ccm),
            2 => Some(Cipher::Aes128Gcm),
            3 => Some(Cipher::Aes256Ccm),
            4 => Some(Cipher::Aes256Gcm),
            _ => None,
        }
    }

    /// Key length in bytes (16 or 32).
    pub fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Ccm | Cipher::Aes128Gcm => 16,
            Cipher::Aes256Ccm | Cipher::Aes256Gcm => 32,
        }
    }

    /// Nonce length used on the wire (11 for CCM, 12 for GCM; MS-SMB2 2.2.41).
    pub fn nonce_len(self) -> usize {
        match self {
            Cipher::Aes128Ccm | Cipher::Aes256Ccm => 11,
            Cipher::Aes128Gcm | Cipher::Aes256Gcm => 12,
        }
    }
}
