//! SMB3 cryptography: SP800-108 key derivation, the 3.1.1 preauth integrity hash, message
//! signing (HMAC-SHA256, AES-CMAC, AES-GMAC) and sealing (AES-128/256-CCM/GCM).
