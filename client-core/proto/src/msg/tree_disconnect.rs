//! MS-SMB2 2.2.11 SMB2 TREE_DISCONNECT Request and 2.2.12 SMB2 TREE_DISCONNECT Response.
//!
//! Disconnects the tree named by the header TreeId.

four_byte_message!(
    crate::header::Command::TREE_DISCONNECT,
    0x04,
    "TREE_DISCONNECT",
    /// MS-SMB2 2.2.11 SMB2 TREE_DISCONNECT Request: StructureSize 4 and a reserved field.
    TreeDisconnectRequest,
    /// MS-SMB2 2.2.12 SMB2 TREE_DISCONNECT Response: StructureSize 4 and a reserved field.
    TreeDisconnectResponse
);
