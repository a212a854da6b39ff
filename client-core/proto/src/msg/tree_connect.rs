//! MS-SMB2 2.2.9 SMB2 TREE_CONNECT Request and 2.2.10 SMB2 TREE_CONNECT Response.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{put_utf16le, utf16le_len, DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::RequestBody;

/// Fixed part of the request body; StructureSize 9 counts one byte of the path buffer.
const REQUEST_FIXED_LEN: usize = 8;

/// MS-SMB2 2.2.9 SMB2 TREE_CONNECT Request.
///
/// Flags stay 0: the 3.1.1 extension (SMB2_TREE_CONNECT_FLAG_EXTENSION_PRESENT, 2.2.9.1) is
/// not used by this client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeConnectRequest {
    /// Flags (0; the 3.1.1 CLUSTER_RECONNECT / REDIRECT_TO_OWNER / EXTENSION_PRESENT bits are
    /// not used).
    pub flags: u16,
    /// The share path `\\server\share`, sent as UTF-16LE without terminator.
    pub path: String,
}

impl TreeConnectRequest {
    /// A request for `\\server\share`.
    pub fn new(server: &str, share: &str) -> Self {
        TreeConnectRequest {
            flags: 0,
            path: format!(r"\\{server}\{share}"),
        }
    }
}

impl RequestBody for TreeConnectRequest {
    const COMMAND: Command = Command::TREE_CONNECT;

    fn encode_body(&self, msg: &mut BytesMut) {
        let path_offset = msg.len() + REQUEST_FIXED_LEN;
        let path_len = utf16le_len(&self.path);
        msg.reserve(REQUEST_FIXED_LEN + path_len.max(1));
        msg.put_u16_le(9); // StructureSize
        msg.put_u16_le(self.flags);
        msg.put_u16_le(path_offset as u16);
        msg.put_u16_le(path_len as u16);
        if path_len == 0 {
            // The odd StructureSize promises at least one byte of variable part.
            msg.put_u8(0);
        } else {
            put_utf16le(msg, &self.path);
        }
    }
}

/// ShareType (MS-SMB2 2.2.10). A newtype so unknown values survive.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ShareType(pub u8);

impl ShareType {
    /// SMB2_SHARE_TYPE_DISK.
    pub const DISK: ShareType = ShareType(0x01);
    /// SMB2_SHARE_TYPE_PIPE.
    pub const PIPE: ShareType = ShareType(0x02);
    /// SMB2_SHARE_TYPE_PRINT.
    pub const PRINT: ShareType = ShareType(0x03);
}

/// ShareFlags (MS-SMB2 2.2.10).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct ShareFlags(pub u32);

impl ShareFlags {
    /// SMB2_SHAREFLAG_MANUAL_CACHING (a value of the caching field, see [`Self::CACHING_MASK`]).
    pub const MANUAL_CACHING: u32 = 0x0000_0000;
    /// SMB2_SHAREFLAG_AUTO_CACHING.
    pub const AUTO_CACHING: u32 = 0x0000_0010;
    /// SMB2_SHAREFLAG_VDO_CACHING.
    pub const VDO_CACHING: u32 = 0x0000_0020;
    /// SMB2_SHAREFLAG_NO_CACHING.
    pub const NO_CACHING: u32 = 0x0000_0030;
    /// The two bits holding the offline caching policy (one of the four values above).
    pub const CACHING_MASK: u32 = 0x0000_0030;
    /// SMB2_SHAREFLAG_DFS.
    pub const DFS: u32 = 0x0000_0001;
    /// SMB2_SHAREFLAG_DFS_ROOT.
    pub const DFS_ROOT: u32 = 0x0000_0002;
    /// SMB2_SHAREFLAG_RESTRICT_EXCLUSIVE_OPENS.
    pub const RESTRICT_EXCLUSIVE_OPENS: u32 = 0x0000_0100;
    /// SMB2_SHAREFLAG_FORCE_SHARED_DELETE.
    pub const FORCE_SHARED_DELETE: u32 = 0x0000_0200;
    /// SMB2_SHAREFLAG_ALLOW_NAMESPACE_CACHING.
    pub const ALLOW_NAMESPACE_CACHING: u32 = 0x0000_0400;
    /// SMB2_SHAREFLAG_ACCESS_BASED_DIRECTORY_ENUM.
    pub const ACCESS_BASED_DIRECTORY_ENUM: u32 = 0x0000_0800;
    /// SMB2_SHAREFLAG_FORCE_LEVELII_OPLOCK.
    pub const FORCE_LEVELII_OPLOCK: u32 = 0x0000_1000;
    /// SMB2_SHAREFLAG_ENABLE_HASH_V1.
    pub const ENABLE_HASH_V1: u32 = 0x0000_2000;
    /// SMB2_SHAREFLAG_ENABLE_HASH_V2.
    pub const ENABLE_HASH_V2: u32 = 0x0000_4000;
    /// SMB2_SHAREFLAG_ENCRYPT_DATA (3.x): every message on this tree must be encrypted.
    pub const ENCRYPT_DATA: u32 = 0x0000_8000;
    /// SMB2_SHAREFLAG_IDENTITY_REMOTING.
    pub const IDENTITY_REMOTING: u32 = 0x0004_0000;
    /// SMB2_SHAREFLAG_COMPRESS_DATA.
    pub const COMPRESS_DATA: u32 = 0x0010_0000;
    /// SMB2_SHAREFLAG_ISOLATED_TRANSPORT.
    pub const ISOLATED_TRANSPORT: u32 = 0x0020_0000;

    /// Whether every bit of `flag` is set. Not meaningful for the caching values; use
    /// [`Self::caching`] for those.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }

    /// The caching policy: one of MANUAL_CACHING, AUTO_CACHING, VDO_CACHING, NO_CACHING.
    pub fn caching(self) -> u32 {
        self.0 & Self::CACHING_MASK
    }
}

/// Share Capabilities (MS-SMB2 2.2.10).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct ShareCapabilities(pub u32);

impl ShareCapabilities {
    /// SMB2_SHARE_CAP_DFS.
    pub const DFS: u32 = 0x0000_0008;
    /// SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY.
    pub const CONTINUOUS_AVAILABILITY: u32 = 0x0000_0010;
    /// SMB2_SHARE_CAP_SCALEOUT.
    pub const SCALEOUT: u32 = 0x0000_0020;
    /// SMB2_SHARE_CAP_CLUSTER.
    pub const CLUSTER: u32 = 0x0000_0040;
    /// SMB2_SHARE_CAP_ASYMMETRIC.
    pub const ASYMMETRIC: u32 = 0x0000_0080;
    /// SMB2_SHARE_CAP_REDIRECT_TO_OWNER.
    pub const REDIRECT_TO_OWNER: u32 = 0x0000_0100;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// MS-SMB2 2.2.10 SMB2 TREE_CONNECT Response. The TreeId is in the response header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeConnectResponse {
    /// ShareType.
    pub share_type: ShareType,
    /// ShareFlags.
    pub share_flags: ShareFlags,
    /// Capabilities.
    pub capabilities: ShareCapabilities,
    /// MaximalAccess: the access mask the user has on the share root.
    pub maximal_access: u32,
}

impl TreeConnectResponse {
    /// Decode the response from one whole message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(16, "TREE_CONNECT response StructureSize")?;
        let share_type = ShareType(r.u8("ShareType")?);
        r.skip(1, "TREE_CONNECT response Reserved")?;
        let share_flags = ShareFlags(r.u32("ShareFlags")?);
        let capabilities = ShareCapabilities(r.u32("Capabilities")?);
        let maximal_access = r.u32("MaximalAccess")?;
        Ok(TreeConnectResponse {
            share_type,
            share_flags,
            capabilities,
            maximal_access,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Header, HeaderFlags};
    use crate::msg::test_util::hex;

    fn response(body: &str) -> Bytes {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::TREE_CONNECT);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.tree_id = 1;
        h.encode(&mut msg);
        msg.put_slice(&hex(body));
        msg.freeze()
    }

    #[test]
    fn request_golden_bytes() {
        let req = TreeConnectRequest::new("srv", "sh");
        assert_eq!(req.path, r"\\srv\sh");
        let mut msg = BytesMut::new();
        Header::request(Command::TREE_CONNECT).encode(&mut msg);
        req.encode_body(&mut msg);
        // Path right after the 8-byte fixed part: 0x40 + 8 = 0x48; 8 UTF-16 units = 16 bytes.
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "0900 0000 4800 1000 5c005c00 73007200 76005c00 73006800".replace(' ', "")
        );
    }

    #[test]
    fn request_non_ascii_path() {
        let req = TreeConnectRequest::new("é", "🎉");
        let mut msg = BytesMut::new();
        Header::request(Command::TREE_CONNECT).encode(&mut msg);
        req.encode_body(&mut msg);
        // U+1F389 is the surrogate pair D83C DF89.
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "0900 0000 4800 0c00 5c005c00 e9005c00 3cd889df".replace(' ', "")
        );
    }

    #[test]
    fn decodes_samba_disk_share() {
        // Samba, plain disk share: manual caching, MaximalAccess 0x001F01FF (full control).
        let resp = TreeConnectResponse::decode(&response("1000 01 00 00000000 00000000 ff011f00"))
            .unwrap();
        assert_eq!(resp.share_type, ShareType::DISK);
        assert_eq!(resp.share_flags, ShareFlags(0));
        assert_eq!(resp.share_flags.caching(), ShareFlags::MANUAL_CACHING);
        assert_eq!(resp.capabilities, ShareCapabilities(0));
        assert_eq!(resp.maximal_access, 0x001F_01FF);
    }

    #[test]
    fn decodes_encrypted_ca_share() {
        let resp = TreeConnectResponse::decode(&response(
            "1000 01 00 30800000 f0000000 a9001200 00000000",
        ))
        .unwrap();
        assert!(resp.share_flags.has(ShareFlags::ENCRYPT_DATA));
        assert_eq!(resp.share_flags.caching(), ShareFlags::NO_CACHING);
        assert!(!resp.share_flags.has(ShareFlags::DFS));
        for cap in [
            ShareCapabilities::CONTINUOUS_AVAILABILITY,
            ShareCapabilities::SCALEOUT,
            ShareCapabilities::CLUSTER,
            ShareCapabilities::ASYMMETRIC,
        ] {
            assert!(resp.capabilities.has(cap));
        }
        assert!(!resp.capabilities.has(ShareCapabilities::DFS));
        assert_eq!(resp.maximal_access, 0x0012_00A9);

        let pipe = TreeConnectResponse::decode(&response("1000 02 00 30000000 00000000 ff011f00"))
            .unwrap();
        assert_eq!(pipe.share_type, ShareType::PIPE);
        let odd = TreeConnectResponse::decode(&response("1000 7f 00 00000000 00000000 00000000"))
            .unwrap();
        assert_eq!(odd.share_type, ShareType(0x7f));
    }

    #[test]
    fn rejects_malformed_responses() {
        assert!(
            TreeConnectResponse::decode(&response("1000 01 00 00000000 00000000 ff01")).is_err()
        );
        assert!(matches!(
            TreeConnectResponse::decode(&response("0900 00 00 00000000")),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(TreeConnectResponse::decode(&response("")).is_err());
    }
}
