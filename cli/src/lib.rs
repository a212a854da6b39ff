//! Shared code of the smbcp and smbctl binaries.
