//! MS-SMB2 2.2.23 (break notifications), 2.2.24 (acknowledgements) and 2.2.25 (responses to
//! acknowledgements) for oplocks and leases. All share the OPLOCK_BREAK command code and are
//! told apart by StructureSize: 24 for oplocks, 44 for a lease break notification, 36 for a
//! lease break acknowledgement and its response.
//!
//! Break notifications arrive unsolicited with MessageId 0xFFFFFFFFFFFFFFFF (MS-SMB2 3.3.4.6,
//! 3.3.4.7).

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
pub use crate::msg::create::{LeaseState, OplockLevel};
use crate::msg::{FileId, RequestBody};

/// Flag in [`LeaseBreakNotification::flags`]: SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED.
pub const LEASE_BREAK_FLAG_ACK_REQUIRED: u32 = 0x01;

fn read_file_id(r: &mut Reader<'_>) -> Result<FileId, DecodeError> {
    Ok(FileId {
        persistent: r.u64("FileId.Persistent")?,
        volatile: r.u64("FileId.Volatile")?,
    })
}

/// Shared layout of 2.2.23.1, 2.2.24.1 and 2.2.25.1 (after StructureSize 24).
fn read_oplock_body(r: &mut Reader<'_>) -> Result<(OplockLevel, FileId), DecodeError> {
    let level = OplockLevel(r.u8("OplockLevel")?);
    r.skip(1 + 4, "Reserved/Reserved2")?;
    Ok((level, read_file_id(r)?))
}

fn put_oplock_body(msg: &mut BytesMut, level: OplockLevel, file_id: FileId) {
    msg.put_u16_le(24); // StructureSize
    msg.put_u8(level.0);
    msg.put_u8(0); // Reserved
    msg.put_u32_le(0); // Reserved2
    msg.put_u64_le(file_id.persistent);
    msg.put_u64_le(file_id.volatile);
}

/// MS-SMB2 2.2.23.1 Oplock Break Notification: the server lowers an open's oplock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OplockBreakNotification {
    /// The level the oplock is broken to.
    pub oplock_level: OplockLevel,
    /// The open concerned.
    pub file_id: FileId,
}

impl OplockBreakNotification {
    /// Decode from one whole message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(24, "Oplock Break Notification StructureSize")?;
        let (oplock_level, file_id) = read_oplock_body(&mut r)?;
        Ok(OplockBreakNotification {
            oplock_level,
            file_id,
        })
    }
}

/// MS-SMB2 2.2.23.2 Lease Break Notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseBreakNotification {
    /// NewEpoch (3.x lease V2; 0 otherwise).
    pub new_epoch: u16,
    /// Flags ([`LEASE_BREAK_FLAG_ACK_REQUIRED`]).
    pub flags: u32,
    /// LeaseKey.
    pub lease_key: [u8; 16],
    /// CurrentLeaseState.
    pub current_lease_state: LeaseState,
    /// NewLeaseState: what the client must acknowledge.
    pub new_lease_state: LeaseState,
    /// BreakReason (reserved, 0).
    pub break_reason: u32,
    /// AccessMaskHint (reserved, 0).
    pub access_mask_hint: u32,
    /// ShareMaskHint (reserved, 0).
    pub share_mask_hint: u32,
}

impl LeaseBreakNotification {
    /// Decode from one whole message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(44, "Lease Break Notification StructureSize")?;
        Ok(LeaseBreakNotification {
            new_epoch: r.u16("NewEpoch")?,
            flags: r.u32("Flags")?,
            lease_key: r.guid("LeaseKey")?,
            current_lease_state: LeaseState(r.u32("CurrentLeaseState")?),
            new_lease_state: LeaseState(r.u32("NewLeaseState")?),
            break_reason: r.u32("BreakReason")?,
            access_mask_hint: r.u32("AccessMaskHint")?,
            share_mask_hint: r.u32("ShareMaskHint")?,
        })
    }

    /// Whether the server waits for a Lease Break Acknowledgment.
    pub fn ack_required(&self) -> bool {
        self.flags & LEASE_BREAK_FLAG_ACK_REQUIRED != 0
    }
}

/// Either break notification, as an unsolicited OPLOCK_BREAK message from the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakNotification {
    /// StructureSize 24.
    Oplock(OplockBreakNotification),
    /// StructureSize 44.
    Lease(LeaseBreakNotification),
}

impl BreakNotification {
    /// Decode whichever notification this is, chosen by StructureSize.
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        match peek_structure_size(msg)? {
            24 => OplockBreakNotification::decode(msg).map(BreakNotification::Oplock),
            44 => LeaseBreakNotification::decode(msg).map(BreakNotification::Lease),
            other => Err(DecodeError::InvalidValue {
                what: "break notification StructureSize",
                value: other.into(),
            }),
        }
    }
}

fn peek_structure_size(msg: &[u8]) -> Result<u16, DecodeError> {
    Reader::at(msg, HEADER_LEN)?.u16("OPLOCK_BREAK StructureSize")
}

/// MS-SMB2 2.2.24.1 Oplock Break Acknowledgment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OplockBreakAck {
    /// The level the client accepts (the one from the notification, or lower).
    pub oplock_level: OplockLevel,
    /// The open concerned.
    pub file_id: FileId,
}

impl RequestBody for OplockBreakAck {
    const COMMAND: Command = Command::OPLOCK_BREAK;

    fn encode_body(&self, msg: &mut BytesMut) {
        put_oplock_body(msg, self.oplock_level, self.file_id);
    }
}

/// MS-SMB2 2.2.24.2 Lease Break Acknowledgment. Flags and LeaseDuration are sent as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseBreakAck {
    /// LeaseKey from the notification.
    pub lease_key: [u8; 16],
    /// The lease state the client accepts (the notification's NewLeaseState or less).
    pub lease_state: LeaseState,
}

impl RequestBody for LeaseBreakAck {
    const COMMAND: Command = Command::OPLOCK_BREAK;

    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(36); // StructureSize
        msg.put_u16_le(0); // Reserved
        msg.put_u32_le(0); // Flags
        msg.put_slice(&self.lease_key);
        msg.put_u32_le(self.lease_state.0);
        msg.put_u64_le(0); // LeaseDuration
    }
}

/// MS-SMB2 2.2.25.1 Oplock Break Response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OplockBreakResponse {
    /// The oplock level granted.
    pub oplock_level: OplockLevel,
    /// The open concerned.
    pub file_id: FileId,
}

impl OplockBreakResponse {
    /// Decode from one whole message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(24, "Oplock Break Response StructureSize")?;
        let (oplock_level, file_id) = read_oplock_body(&mut r)?;
        Ok(OplockBreakResponse {
            oplock_level,
            file_id,
        })
    }
}

/// MS-SMB2 2.2.25.2 Lease Break Response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseBreakResponse {
    /// Flags (reserved, 0).
    pub flags: u32,
    /// LeaseKey.
    pub lease_key: [u8; 16],
    /// The lease state granted.
    pub lease_state: LeaseState,
    /// LeaseDuration (reserved, 0).
    pub lease_duration: u64,
}

impl LeaseBreakResponse {
    /// Decode from one whole message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(36, "Lease Break Response StructureSize")?;
        r.skip(2, "Reserved")?;
        Ok(LeaseBreakResponse {
            flags: r.u32("Flags")?,
            lease_key: r.guid("LeaseKey")?,
            lease_state: LeaseState(r.u32("LeaseState")?),
            lease_duration: r.u64("LeaseDuration")?,
        })
    }
}

/// The server's answer to either acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakAckResponse {
    /// StructureSize 24.
    Oplock(OplockBreakResponse),
    /// StructureSize 36.
    Lease(LeaseBreakResponse),
}

impl BreakAckResponse {
    /// Decode whichever response this is, chosen by StructureSize.
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        match peek_structure_size(msg)? {
            24 => OplockBreakResponse::decode(msg).map(BreakAckResponse::Oplock),
            36 => LeaseBreakResponse::decode(msg).map(BreakAckResponse::Lease),
            other => Err(DecodeError::InvalidValue {
                what: "break acknowledgment response StructureSize",
                value: other.into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Header, HeaderFlags};
    use crate::msg::test_util::hex;

    fn message(body: &str) -> Bytes {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::OPLOCK_BREAK);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.message_id = u64::MAX;
        h.encode(&mut msg);
        msg.put_slice(&hex(body));
        msg.freeze()
    }

    fn encode<B: RequestBody>(body: &B) -> String {
        let mut msg = BytesMut::new();
        Header::request(B::COMMAND).encode(&mut msg);
        body.encode_body(&mut msg);
        assert_eq!(msg[12..14], [0x12, 0x00]);
        hex::encode(&msg[HEADER_LEN..])
    }

    const FILE_ID: FileId = FileId {
        persistent: 0x0102_0304_0506_0708,
        volatile: 0x1112_1314_1516_1718,
    };
    const FILE_ID_HEX: &str = "0807060504030201 1817161514131211";
    const LEASE_KEY_HEX: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf";

    fn lease_key() -> [u8; 16] {
        core::array::from_fn(|i| 0xa0 + i as u8)
    }

    #[test]
    fn decodes_oplock_break_notification() {
        let msg = message(&format!("1800 01 00 00000000 {FILE_ID_HEX}"));
        let n = OplockBreakNotification::decode(&msg).unwrap();
        assert_eq!(n.oplock_level, OplockLevel::II);
        assert_eq!(n.file_id, FILE_ID);
        assert_eq!(
            BreakNotification::decode(&msg).unwrap(),
            BreakNotification::Oplock(n)
        );
    }

    #[test]
    fn decodes_lease_break_notification() {
        let msg = message(&format!(
            "2c00 0300 01000000 {LEASE_KEY_HEX} 07000000 01000000 00000000 00000000 00000000"
        ));
        let n = LeaseBreakNotification::decode(&msg).unwrap();
        assert_eq!(n.new_epoch, 3);
        assert_eq!(n.flags, LEASE_BREAK_FLAG_ACK_REQUIRED);
        assert!(n.ack_required());
        assert_eq!(n.lease_key, lease_key());
        assert_eq!(n.current_lease_state, LeaseState(7));
        assert!(n.current_lease_state.has(LeaseState::WRITE_CACHING));
        assert_eq!(n.new_lease_state, LeaseState(LeaseState::READ_CACHING));
        assert_eq!(n.break_reason, 0);
        assert_eq!(n.access_mask_hint, 0);
        assert_eq!(n.share_mask_hint, 0);
        assert_eq!(
            BreakNotification::decode(&msg).unwrap(),
            BreakNotification::Lease(n)
        );

        let no_ack = message(&format!(
            "2c00 0000 00000000 {LEASE_KEY_HEX} 01000000 00000000 00000000 00000000 00000000"
        ));
        assert!(!LeaseBreakNotification::decode(&no_ack)
            .unwrap()
            .ack_required());
    }

    #[test]
    fn rejects_malformed_notifications() {
        // Unknown StructureSize, truncated bodies, nothing after the header.
        assert!(matches!(
            BreakNotification::decode(&message("2400 0000")),
            Err(DecodeError::InvalidValue { .. })
        ));
        assert!(BreakNotification::decode(&message("1800 01 00 00000000 0807")).is_err());
        assert!(BreakNotification::decode(&message(&format!(
            "2c00 0300 01000000 {LEASE_KEY_HEX} 07000000"
        )))
        .is_err());
        assert!(BreakNotification::decode(&message("")).is_err());
        assert!(BreakNotification::decode(&message("18")).is_err());
        assert!(OplockBreakNotification::decode(&message("2c00 0000")).is_err());
        assert!(LeaseBreakNotification::decode(&message("1800 0000")).is_err());
    }

    #[test]
    fn oplock_break_ack_golden_bytes() {
        let ack = OplockBreakAck {
            oplock_level: OplockLevel::NONE,
            file_id: FILE_ID,
        };
        assert_eq!(
            encode(&ack),
            format!("1800 00 00 00000000 {FILE_ID_HEX}").replace(' ', "")
        );
    }

    #[test]
    fn lease_break_ack_golden_bytes() {
        let ack = LeaseBreakAck {
            lease_key: lease_key(),
            lease_state: LeaseState(LeaseState::READ_CACHING | LeaseState::HANDLE_CACHING),
        };
        assert_eq!(
            encode(&ack),
            format!("2400 0000 00000000 {LEASE_KEY_HEX} 03000000 0000000000000000")
                .replace(' ', "")
        );
    }

    #[test]
    fn decodes_ack_responses() {
        let msg = message(&format!("1800 00 00 00000000 {FILE_ID_HEX}"));
        let r = OplockBreakResponse::decode(&msg).unwrap();
        assert_eq!(r.oplock_level, OplockLevel::NONE);
        assert_eq!(r.file_id, FILE_ID);
        assert_eq!(
            BreakAckResponse::decode(&msg).unwrap(),
            BreakAckResponse::Oplock(r)
        );

        let msg = message(&format!(
            "2400 0000 00000000 {LEASE_KEY_HEX} 01000000 0000000000000000"
        ));
        let r = LeaseBreakResponse::decode(&msg).unwrap();
        assert_eq!(r.flags, 0);
        assert_eq!(r.lease_key, lease_key());
        assert_eq!(r.lease_state, LeaseState(LeaseState::READ_CACHING));
        assert_eq!(r.lease_duration, 0);
        assert_eq!(
            BreakAckResponse::decode(&msg).unwrap(),
            BreakAckResponse::Lease(r)
        );

        assert!(BreakAckResponse::decode(&message("2c00")).is_err());
        assert!(BreakAckResponse::decode(&message(&format!(
            "2400 0000 00000000 {LEASE_KEY_HEX} 01000000 0000"
        )))
        .is_err());
    }
}
