//! MS-SMB2 2.2.28 SMB2 ECHO Request and 2.2.29 SMB2 ECHO Response.
//!
//! A keep-alive / liveness probe; the server answers at once.

four_byte_message!(
    crate::header::Command::ECHO,
    0x0D,
    "ECHO",
    /// MS-SMB2 2.2.28 SMB2 ECHO Request: StructureSize 4 and a reserved field.
    EchoRequest,
    /// MS-SMB2 2.2.29 SMB2 ECHO Response: StructureSize 4 and a reserved field.
    EchoResponse
);
