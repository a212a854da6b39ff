//! MS-SMB2 2.2.1 SMB2 Packet Header (sync 2.2.1.2 and async 2.2.1.1 forms).

use bytes::{BufMut, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::nt_status::NtStatus;

/// Length of every SMB2 header.
pub const HEADER_LEN: usize = 64;
/// `0xFE 'S' 'M' 'B'`.
pub const PROTOCOL_ID: [u8; 4] = [0xFE, b'S', b'M', b'B'];
/// Offset of the 16-byte Signature field inside the header.
pub const SIGNATURE_OFFSET: usize = 48;

/// SMB2 command codes (MS-SMB2 2.2.1.2). A newtype so unknown codes survive decoding.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Command(pub u16);

impl Command {
    /// NEGOTIATE
    pub const NEGOTIATE: Command = Command(0x0000);
    /// SESSION_SETUP
    pub const SESSION_SETUP: Command = Command(0x0001);
    /// LOGOFF
    pub const LOGOFF: Command = Command(0x0002);
    /// TREE_CONNECT
    pub const TREE_CONNECT: Command = Command(0x0003);
    /// TREE_DISCONNECT
    pub const TREE_DISCONNECT: Command = Command(0x0004);
    /// CREATE
    pub const CREATE: Command = Command(0x0005);
    /// CLOSE
    pub const CLOSE: Command = Command(0x0006);
    /// FLUSH
    pub const FLUSH: Command = Command(0x0007);
    /// READ
    pub const READ: Command = Command(0x0008);
    /// WRITE
    pub const WRITE: Command = Command(0x0009);
    /// LOCK
    pub const LOCK: Command = Command(0x000A);
    /// IOCTL
    pub const IOCTL: Command = Command(0x000B);
    /// CANCEL
    pub const CANCEL: Command = Command(0x000C);
    /// ECHO
    pub const ECHO: Command = Command(0x000D);
    /// QUERY_DIRECTORY
    pub const QUERY_DIRECTORY: Command = Command(0x000E);
    /// CHANGE_NOTIFY
    pub const CHANGE_NOTIFY: Command = Command(0x000F);
    /// QUERY_INFO
    pub const QUERY_INFO: Command = Command(0x0010);
    /// SET_INFO
    pub const SET_INFO: Command = Command(0x0011);
    /// OPLOCK_BREAK (notification, acknowledgement and response share the code)
    pub const OPLOCK_BREAK: Command = Command(0x0012);

    /// Upper-case name as in the spec, or "UNKNOWN".
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 19] = [
            "NEGOTIATE",
            "SESSION_SETUP",
            "LOGOFF",
            "TREE_CONNECT",
            "TREE_DISCONNECT",
            "CREATE",
            "CLOSE",
            "FLUSH",
            "READ",
            "WRITE",
            "LOCK",
            "IOCTL",
            "CANCEL",
            "ECHO",
            "QUERY_DIRECTORY",
            "CHANGE_NOTIFY",
            "QUERY_INFO",
            "SET_INFO",
            "OPLOCK_BREAK",
        ];
        NAMES.get(self.0 as usize).copied().unwrap_or("UNKNOWN")
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Header flags (MS-SMB2 2.2.1.2).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct HeaderFlags(pub u32);

impl HeaderFlags {
    /// SMB2_FLAGS_SERVER_TO_REDIR: the message is a response.
    pub const SERVER_TO_REDIR: u32 = 0x0000_0001;
    /// SMB2_FLAGS_ASYNC_COMMAND: the header carries an AsyncId.
    pub const ASYNC_COMMAND: u32 = 0x0000_0002;
    /// SMB2_FLAGS_RELATED_OPERATIONS: compound member that uses the previous one's ids.
    pub const RELATED_OPERATIONS: u32 = 0x0000_0004;
    /// SMB2_FLAGS_SIGNED.
    pub const SIGNED: u32 = 0x0000_0008;
    /// SMB2_FLAGS_DFS_OPERATIONS.
    pub const DFS_OPERATIONS: u32 = 0x1000_0000;
    /// SMB2_FLAGS_REPLAY_OPERATION (3.x): the request is a replay after a channel failure.
    pub const REPLAY_OPERATION: u32 = 0x2000_0000;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// An SMB2 header. Requests put `ChannelSequence` in the low 16 bits of the `status` field
/// (MS-SMB2 2.2.1.2: "ChannelSequence/Reserved/Status"); use [`Header::channel_sequence`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Header {
    /// CreditCharge: credits this request consumes (1 per 64 KiB of payload, at least 1).
    pub credit_charge: u16,
    /// Status (responses) or ChannelSequence + Reserved (3.x requests).
    pub status: NtStatus,
    /// The command.
    pub command: Command,
    /// CreditRequest (requests) or CreditResponse (responses).
    pub credits: u16,
    /// Flags.
    pub flags: HeaderFlags,
    /// Offset of the next compounded message from the start of this one, 0 for the last.
    pub next_command: u32,
    /// MessageId.
    pub message_id: u64,
    /// AsyncId, meaningful only with ASYNC_COMMAND set.
    pub async_id: u64,
    /// TreeId, meaningful only without ASYNC_COMMAND.
    pub tree_id: u32,
    /// SessionId.
    pub session_id: u64,
    /// Signature (zero when unsigned).
    pub signature: [u8; 16],
}

impl Default for NtStatus {
    fn default() -> Self {
        NtStatus::SUCCESS
    }
}

impl Default for Command {
    fn default() -> Self {
        Command::NEGOTIATE
    }
}

impl Header {
    /// A request header for `command` with everything else zero.
    pub fn request(command: Command) -> Self {
        Header {
            command,
            ..Header::default()
        }
    }

    /// ChannelSequence as carried by a 3.x request.
    pub fn channel_sequence(&self) -> u16 {
        self.status.0 as u16
    }

    /// Set ChannelSequence (3.x requests; MS-SMB2 3.2.4.1.1).
    pub fn set_channel_sequence(&mut self, seq: u16) {
        self.status = NtStatus(seq as u32);
    }

    /// Whether this header came from the server.
    pub fn is_response(&self) -> bool {
        self.flags.has(HeaderFlags::SERVER_TO_REDIR)
    }

    /// Whether this header uses the async form.
    pub fn is_async(&self) -> bool {
        self.flags.has(HeaderFlags::ASYNC_COMMAND)
    }

    /// Append the 64-byte header to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(HEADER_LEN);
        out.put_slice(&PROTOCOL_ID);
        out.put_u16_le(HEADER_LEN as u16);
        out.put_u16_le(self.credit_charge);
        out.put_u32_le(self.status.0);
        out.put_u16_le(self.command.0);
        out.put_u16_le(self.credits);
        out.put_u32_le(self.flags.0);
        out.put_u32_le(self.next_command);
        out.put_u64_le(self.message_id);
        if self.is_async() {
            out.put_u64_le(self.async_id);
        } else {
            out.put_u32_le(0); // Reserved (ProcessId, not used by SMB2 clients)
            out.put_u32_le(self.tree_id);
        }
        out.put_u64_le(self.session_id);
        out.put_slice(&self.signature);
    }

    /// Decode the header at the start of `msg`.
    pub fn decode(msg: &[u8]) -> Result<Header, DecodeError> {
        let mut r = Reader::new(msg);
        let magic = r.array::<4>("SMB2 header ProtocolId")?;
        if magic != PROTOCOL_ID {
            return Err(DecodeError::InvalidValue {
                what: "SMB2 header ProtocolId",
                value: u32::from_le_bytes(magic).into(),
            });
        }
        r.structure_size(HEADER_LEN as u16, "SMB2 header StructureSize")?;
        let credit_charge = r.u16("CreditCharge")?;
        let status = NtStatus(r.u32("Status")?);
        let command = Command(r.u16("Command")?);
        let credits = r.u16("CreditResponse")?;
        let flags = HeaderFlags(r.u32("Flags")?);
        let next_command = r.u32("NextCommand")?;
        let message_id = r.u64("MessageId")?;
        let (async_id, tree_id) = if flags.has(HeaderFlags::ASYNC_COMMAND) {
            (r.u64("AsyncId")?, 0)
        } else {
            r.skip(4, "Reserved")?;
            (0, r.u32("TreeId")?)
        };
        let session_id = r.u64("SessionId")?;
        let signature = r.array::<16>("Signature")?;
        Ok(Header {
            credit_charge,
            status,
            command,
            credits,
            flags,
            next_command,
            message_id,
            async_id,
            tree_id,
            session_id,
            signature,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_sync_and_async() {
        for flags in [0, HeaderFlags::ASYNC_COMMAND | HeaderFlags::SERVER_TO_REDIR] {
            let h = Header {
                credit_charge: 3,
                status: NtStatus::PENDING,
                command: Command::READ,
                credits: 17,
                flags: HeaderFlags(flags),
                next_command: 0,
                message_id: 0x1122_3344_5566_7788,
                async_id: if flags != 0 { 99 } else { 0 },
                tree_id: if flags != 0 { 0 } else { 7 },
                session_id: 0xAABB,
                signature: [5; 16],
            };
            let mut b = BytesMut::new();
            h.encode(&mut b);
            assert_eq!(b.len(), HEADER_LEN);
            assert_eq!(Header::decode(&b).unwrap(), h);
        }
    }

    #[test]
    fn rejects_bad_magic_and_short() {
        assert!(Header::decode(&[0xFF, b'S', b'M', b'B']).is_err());
        let mut b = BytesMut::new();
        Header::request(Command::ECHO).encode(&mut b);
        assert!(Header::decode(&b[..63]).is_err());
        b[0] = 0xFD;
        assert!(Header::decode(&b).is_err());
    }
}
