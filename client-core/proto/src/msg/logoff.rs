//! MS-SMB2 2.2.7 SMB2 LOGOFF Request and 2.2.8 SMB2 LOGOFF Response.
//!
//! Ends the session named by the header SessionId.

four_byte_message!(
    crate::header::Command::LOGOFF,
    0x02,
    "LOGOFF",
    /// MS-SMB2 2.2.7 SMB2 LOGOFF Request: StructureSize 4 and a reserved field.
    LogoffRequest,
    /// MS-SMB2 2.2.8 SMB2 LOGOFF Response: StructureSize 4 and a reserved field.
    LogoffResponse
);
