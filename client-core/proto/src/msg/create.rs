//! MS-SMB2 2.2.13 SMB2 CREATE Request, 2.2.14 SMB2 CREATE Response and the create contexts
//! they carry (2.2.13.2 requests, 2.2.14.2 responses).

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{bytes_at, pad_to, put_utf16le, utf16le_len, DecodeError, Reader};
use crate::header::{Command, HEADER_LEN};
use crate::msg::fscc::FileAttributes;
use crate::msg::posix::{PosixCreateInfo, PosixMode, POSIX_CREATE_CONTEXT_TAG};
use crate::msg::{FileId, RequestBody};
use crate::nt_status::NtStatus;
use crate::replay::{Replay, ReplayHazard};

/// RequestedOplockLevel / OplockLevel (MS-SMB2 2.2.13, 2.2.14).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct OplockLevel(pub u8);

impl OplockLevel {
    /// SMB2_OPLOCK_LEVEL_NONE.
    pub const NONE: Self = Self(0x00);
    /// SMB2_OPLOCK_LEVEL_II (shared read caching).
    pub const II: Self = Self(0x01);
    /// SMB2_OPLOCK_LEVEL_EXCLUSIVE.
    pub const EXCLUSIVE: Self = Self(0x08);
    /// SMB2_OPLOCK_LEVEL_BATCH.
    pub const BATCH: Self = Self(0x09);
    /// SMB2_OPLOCK_LEVEL_LEASE: the lease create context decides (2.1 and 3.x).
    pub const LEASE: Self = Self(0xFF);
}

/// ImpersonationLevel (MS-SMB2 2.2.13).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ImpersonationLevel(pub u32);

impl ImpersonationLevel {
    /// Anonymous.
    pub const ANONYMOUS: Self = Self(0);
    /// Identification.
    pub const IDENTIFICATION: Self = Self(1);
    /// Impersonation: what clients normally send.
    pub const IMPERSONATION: Self = Self(2);
    /// Delegate.
    pub const DELEGATE: Self = Self(3);
}

/// Access mask (MS-SMB2 2.2.13.1: 2.2.13.1.1 for files, 2.2.13.1.2 for directories). Flags:
/// combine the `u32` constants with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct AccessMask(pub u32);

impl AccessMask {
    /// FILE_READ_DATA.
    pub const FILE_READ_DATA: u32 = 0x0000_0001;
    /// FILE_LIST_DIRECTORY (directories; same bit as FILE_READ_DATA).
    pub const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;
    /// FILE_WRITE_DATA.
    pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
    /// FILE_ADD_FILE (directories; same bit as FILE_WRITE_DATA).
    pub const FILE_ADD_FILE: u32 = 0x0000_0002;
    /// FILE_APPEND_DATA.
    pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
    /// FILE_ADD_SUBDIRECTORY (directories; same bit as FILE_APPEND_DATA).
    pub const FILE_ADD_SUBDIRECTORY: u32 = 0x0000_0004;
    /// FILE_READ_EA.
    pub const FILE_READ_EA: u32 = 0x0000_0008;
    /// FILE_WRITE_EA.
    pub const FILE_WRITE_EA: u32 = 0x0000_0010;
    /// FILE_EXECUTE.
    pub const FILE_EXECUTE: u32 = 0x0000_0020;
    /// FILE_TRAVERSE (directories; same bit as FILE_EXECUTE).
    pub const FILE_TRAVERSE: u32 = 0x0000_0020;
    /// FILE_DELETE_CHILD.
    pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
    /// FILE_READ_ATTRIBUTES.
    pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
    /// FILE_WRITE_ATTRIBUTES.
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
    /// DELETE.
    pub const DELETE: u32 = 0x0001_0000;
    /// READ_CONTROL (read the security descriptor).
    pub const READ_CONTROL: u32 = 0x0002_0000;
    /// WRITE_DAC.
    pub const WRITE_DAC: u32 = 0x0004_0000;
    /// WRITE_OWNER.
    pub const WRITE_OWNER: u32 = 0x0008_0000;
    /// SYNCHRONIZE.
    pub const SYNCHRONIZE: u32 = 0x0010_0000;
    /// ACCESS_SYSTEM_SECURITY.
    pub const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
    /// MAXIMUM_ALLOWED.
    pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
    /// GENERIC_ALL.
    pub const GENERIC_ALL: u32 = 0x1000_0000;
    /// GENERIC_EXECUTE.
    pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
    /// GENERIC_WRITE.
    pub const GENERIC_WRITE: u32 = 0x4000_0000;
    /// GENERIC_READ.
    pub const GENERIC_READ: u32 = 0x8000_0000;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// ShareAccess (MS-SMB2 2.2.13). Flags: combine the `u32` constants with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct ShareAccess(pub u32);

impl ShareAccess {
    /// FILE_SHARE_READ.
    pub const READ: u32 = 0x0000_0001;
    /// FILE_SHARE_WRITE.
    pub const WRITE: u32 = 0x0000_0002;
    /// FILE_SHARE_DELETE.
    pub const DELETE: u32 = 0x0000_0004;
    /// Read, write and delete sharing: what a client that does its own locking wants.
    pub const ALL: u32 = Self::READ | Self::WRITE | Self::DELETE;
}

/// CreateDisposition (MS-SMB2 2.2.13): what to do when the file does / does not exist.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CreateDisposition(pub u32);

impl CreateDisposition {
    /// FILE_SUPERSEDE: replace if it exists, create if not.
    pub const SUPERSEDE: Self = Self(0);
    /// FILE_OPEN: open if it exists, fail if not.
    pub const OPEN: Self = Self(1);
    /// FILE_CREATE: fail if it exists, create if not.
    pub const CREATE: Self = Self(2);
    /// FILE_OPEN_IF: open if it exists, create if not.
    pub const OPEN_IF: Self = Self(3);
    /// FILE_OVERWRITE: truncate if it exists, fail if not.
    pub const OVERWRITE: Self = Self(4);
    /// FILE_OVERWRITE_IF: truncate if it exists, create if not.
    pub const OVERWRITE_IF: Self = Self(5);
}

/// CreateOptions (MS-SMB2 2.2.13). Flags: combine the `u32` constants with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct CreateOptions(pub u32);

impl CreateOptions {
    /// FILE_DIRECTORY_FILE: the target must be a directory.
    pub const DIRECTORY_FILE: u32 = 0x0000_0001;
    /// FILE_WRITE_THROUGH.
    pub const WRITE_THROUGH: u32 = 0x0000_0002;
    /// FILE_SEQUENTIAL_ONLY.
    pub const SEQUENTIAL_ONLY: u32 = 0x0000_0004;
    /// FILE_NO_INTERMEDIATE_BUFFERING.
    pub const NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
    /// FILE_SYNCHRONOUS_IO_ALERT (ignored by servers).
    pub const SYNCHRONOUS_IO_ALERT: u32 = 0x0000_0010;
    /// FILE_SYNCHRONOUS_IO_NONALERT (ignored by servers).
    pub const SYNCHRONOUS_IO_NONALERT: u32 = 0x0000_0020;
    /// FILE_NON_DIRECTORY_FILE: the target must not be a directory.
    pub const NON_DIRECTORY_FILE: u32 = 0x0000_0040;
    /// FILE_COMPLETE_IF_OPLOCKED.
    pub const COMPLETE_IF_OPLOCKED: u32 = 0x0000_0100;
    /// FILE_NO_EA_KNOWLEDGE.
    pub const NO_EA_KNOWLEDGE: u32 = 0x0000_0200;
    /// FILE_OPEN_REMOTE_INSTANCE.
    pub const OPEN_REMOTE_INSTANCE: u32 = 0x0000_0400;
    /// FILE_RANDOM_ACCESS.
    pub const RANDOM_ACCESS: u32 = 0x0000_0800;
    /// FILE_DELETE_ON_CLOSE: delete when the last handle closes (needs DELETE access).
    pub const DELETE_ON_CLOSE: u32 = 0x0000_1000;
    /// FILE_OPEN_BY_FILE_ID.
    pub const OPEN_BY_FILE_ID: u32 = 0x0000_2000;
    /// FILE_OPEN_FOR_BACKUP_INTENT.
    pub const OPEN_FOR_BACKUP_INTENT: u32 = 0x0000_4000;
    /// FILE_NO_COMPRESSION.
    pub const NO_COMPRESSION: u32 = 0x0000_8000;
    /// FILE_OPEN_REQUIRING_OPLOCK.
    pub const OPEN_REQUIRING_OPLOCK: u32 = 0x0001_0000;
    /// FILE_DISALLOW_EXCLUSIVE.
    pub const DISALLOW_EXCLUSIVE: u32 = 0x0002_0000;
    /// FILE_RESERVE_OPFILTER.
    pub const RESERVE_OPFILTER: u32 = 0x0010_0000;
    /// FILE_OPEN_REPARSE_POINT: open the link itself, not its target.
    pub const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    /// FILE_OPEN_NO_RECALL.
    pub const OPEN_NO_RECALL: u32 = 0x0040_0000;
    /// FILE_OPEN_FOR_FREE_SPACE_QUERY.
    pub const OPEN_FOR_FREE_SPACE_QUERY: u32 = 0x0080_0000;
}

/// CreateAction in the response (MS-SMB2 2.2.14): what the server did.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CreateAction(pub u32);

impl CreateAction {
    /// FILE_SUPERSEDED.
    pub const SUPERSEDED: Self = Self(0);
    /// FILE_OPENED.
    pub const OPENED: Self = Self(1);
    /// FILE_CREATED.
    pub const CREATED: Self = Self(2);
    /// FILE_OVERWRITTEN.
    pub const OVERWRITTEN: Self = Self(3);
}

/// Lease state (MS-SMB2 2.2.13.2.8). Flags: combine the `u32` constants with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct LeaseState(pub u32);

impl LeaseState {
    /// SMB2_LEASE_NONE.
    pub const NONE: u32 = 0x00;
    /// SMB2_LEASE_READ_CACHING.
    pub const READ_CACHING: u32 = 0x01;
    /// SMB2_LEASE_HANDLE_CACHING.
    pub const HANDLE_CACHING: u32 = 0x02;
    /// SMB2_LEASE_WRITE_CACHING.
    pub const WRITE_CACHING: u32 = 0x04;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// Create context names (MS-SMB2 2.2.13.2, 2.2.14.2): four ASCII bytes on the wire.
pub mod context_name {
    /// SMB2_CREATE_DURABLE_HANDLE_REQUEST / _RESPONSE.
    pub const DURABLE_HANDLE: [u8; 4] = *b"DHnQ";
    /// SMB2_CREATE_DURABLE_HANDLE_RECONNECT.
    pub const DURABLE_HANDLE_RECONNECT: [u8; 4] = *b"DHnC";
    /// SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2 / _RESPONSE_V2.
    pub const DURABLE_HANDLE_V2: [u8; 4] = *b"DH2Q";
    /// SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2.
    pub const DURABLE_HANDLE_RECONNECT_V2: [u8; 4] = *b"DH2C";
    /// SMB2_CREATE_REQUEST_LEASE(_V2) / SMB2_CREATE_RESPONSE_LEASE(_V2).
    pub const LEASE: [u8; 4] = *b"RqLs";
    /// SMB2_CREATE_QUERY_MAXIMAL_ACCESS_REQUEST / _RESPONSE.
    pub const QUERY_MAXIMAL_ACCESS: [u8; 4] = *b"MxAc";
    /// SMB2_CREATE_QUERY_ON_DISK_ID.
    pub const QUERY_ON_DISK_ID: [u8; 4] = *b"QFid";
    /// SMB2_CREATE_TIMEWARP_TOKEN.
    pub const TIMEWARP_TOKEN: [u8; 4] = *b"TWrp";
}

/// SMB2_DHANDLE_FLAG_PERSISTENT in the DH2Q / DH2C Flags (MS-SMB2 2.2.13.2.11).
pub const DHANDLE_FLAG_PERSISTENT: u32 = 0x0000_0002;

/// A lease as carried by the RqLs create context, in either form: v1 (MS-SMB2 2.2.13.2.8 /
/// 2.2.14.2.10, 32 bytes) or v2 (2.2.13.2.10 / 2.2.14.2.11, 52 bytes, 3.x only).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Lease {
    /// LeaseKey: chosen by the client, shared by all opens of one file that may share caching.
    pub key: [u8; 16],
    /// LeaseState requested or granted.
    pub state: LeaseState,
    /// Flags (LeaseFlags in v1): [`Lease::FLAG_BREAK_IN_PROGRESS`],
    /// [`Lease::FLAG_PARENT_LEASE_KEY_SET`].
    pub flags: u32,
    /// The v2 fields; `None` for the v1 form.
    pub v2: Option<LeaseV2>,
}

/// The fields only the v2 lease context has.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct LeaseV2 {
    /// ParentLeaseKey: lease key of the parent directory (valid with
    /// [`Lease::FLAG_PARENT_LEASE_KEY_SET`]).
    pub parent_key: [u8; 16],
    /// Epoch: incremented by the server on every lease state change.
    pub epoch: u16,
}

impl Lease {
    /// SMB2_LEASE_FLAG_BREAK_IN_PROGRESS (responses).
    pub const FLAG_BREAK_IN_PROGRESS: u32 = 0x0000_0002;
    /// SMB2_LEASE_FLAG_PARENT_LEASE_KEY_SET (v2).
    pub const FLAG_PARENT_LEASE_KEY_SET: u32 = 0x0000_0004;
    /// Size of the v1 context data.
    pub const V1_SIZE: usize = 32;
    /// Size of the v2 context data.
    pub const V2_SIZE: usize = 52;

    fn encode(&self, out: &mut BytesMut) {
        out.put_slice(&self.key);
        out.put_u32_le(self.state.0);
        out.put_u32_le(self.flags);
        out.put_u64_le(0); // LeaseDuration: reserved, MUST be 0
        if let Some(v2) = &self.v2 {
            out.put_slice(&v2.parent_key);
            out.put_u16_le(v2.epoch);
            out.put_u16_le(0); // Reserved
        }
    }

    /// Decode the data of an RqLs response: 52 or more bytes is the v2 form, 32 or more v1.
    fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(data);
        let key = r.guid("RqLs LeaseKey")?;
        let state = LeaseState(r.u32("RqLs LeaseState")?);
        let flags = r.u32("RqLs Flags")?;
        r.skip(8, "RqLs LeaseDuration")?;
        let v2 = if data.len() >= Self::V2_SIZE {
            let parent_key = r.guid("RqLs ParentLeaseKey")?;
            let epoch = r.u16("RqLs Epoch")?;
            Some(LeaseV2 { parent_key, epoch })
        } else {
            None
        };
        Ok(Self {
            key,
            state,
            flags,
            v2,
        })
    }
}

/// A create context sent in a CREATE request (MS-SMB2 2.2.13.2).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum CreateContextRequest {
    /// DHnQ, SMB2_CREATE_DURABLE_HANDLE_REQUEST (2.2.13.2.3): durable open, v1.
    DurableHandle,
    /// DHnC, SMB2_CREATE_DURABLE_HANDLE_RECONNECT (2.2.13.2.4): reclaim a v1 durable open.
    DurableHandleReconnect {
        /// FileId of the open being reclaimed.
        file_id: FileId,
    },
    /// DH2Q, SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2 (2.2.13.2.11).
    DurableHandleV2 {
        /// Timeout in milliseconds the server keeps the open after a disconnect (0 = server
        /// default).
        timeout_ms: u32,
        /// Flags: [`DHANDLE_FLAG_PERSISTENT`] for a persistent handle.
        flags: u32,
        /// CreateGuid: identifies this create for replay and reconnect.
        create_guid: [u8; 16],
    },
    /// DH2C, SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2 (2.2.13.2.12).
    DurableHandleReconnectV2 {
        /// FileId of the open being reclaimed.
        file_id: FileId,
        /// CreateGuid of the original create.
        create_guid: [u8; 16],
        /// Flags: [`DHANDLE_FLAG_PERSISTENT`] if the open was persistent.
        flags: u32,
    },
    /// RqLs, SMB2_CREATE_REQUEST_LEASE (2.2.13.2.8) or _V2 (2.2.13.2.10) when `v2` is set.
    /// Needs RequestedOplockLevel = [`OplockLevel::LEASE`].
    Lease(Lease),
    /// MxAc, SMB2_CREATE_QUERY_MAXIMAL_ACCESS_REQUEST (2.2.13.2.5).
    QueryMaximalAccess {
        /// Optional Timestamp: only report if the file changed after it.
        timestamp: Option<u64>,
    },
    /// QFid, SMB2_CREATE_QUERY_ON_DISK_ID (2.2.13.2.9).
    QueryOnDiskId,
    /// TWrp, SMB2_CREATE_TIMEWARP_TOKEN (2.2.13.2.7): open the file as it was in the
    /// snapshot ("previous version") taken at `timestamp`.
    TimewarpToken {
        /// The snapshot's time as a FILETIME; the server matches it against its snapshots'
        /// `@GMT-` tokens (whole seconds, UTC).
        timestamp: u64,
    },
    /// The SMB3 POSIX create context ([POSIX-SMB2] 2.2.13.2.16, see [`super::posix`]): makes
    /// the open a POSIX open; `mode` is the new file's mode when the CREATE makes one.
    Posix {
        /// Permission bits for a newly created file or directory.
        mode: PosixMode,
    },
    /// Any other context, sent as is.
    Other {
        /// Name (4 ASCII bytes or a 16-byte GUID).
        name: Bytes,
        /// Data.
        data: Bytes,
    },
}

impl CreateContextRequest {
    fn name(&self) -> &[u8] {
        match self {
            Self::DurableHandle => &context_name::DURABLE_HANDLE,
            Self::DurableHandleReconnect { .. } => &context_name::DURABLE_HANDLE_RECONNECT,
            Self::DurableHandleV2 { .. } => &context_name::DURABLE_HANDLE_V2,
            Self::DurableHandleReconnectV2 { .. } => &context_name::DURABLE_HANDLE_RECONNECT_V2,
            Self::Lease(_) => &context_name::LEASE,
            Self::QueryMaximalAccess { .. } => &context_name::QUERY_MAXIMAL_ACCESS,
            Self::QueryOnDiskId => &context_name::QUERY_ON_DISK_ID,
            Self::TimewarpToken { .. } => &context_name::TIMEWARP_TOKEN,
            Self::Posix { .. } => &POSIX_CREATE_CONTEXT_TAG,
            Self::Other { name, .. } => name,
        }
    }

    fn encode_data(&self, out: &mut BytesMut) {
        match self {
            // 2.2.13.2.3: 16 reserved bytes.
            Self::DurableHandle => out.put_bytes(0, 16),
            Self::DurableHandleReconnect { file_id } => put_file_id(out, *file_id),
            Self::DurableHandleV2 {
                timeout_ms,
                flags,
                create_guid,
            } => {
                out.put_u32_le(*timeout_ms);
                out.put_u32_le(*flags);
                out.put_u64_le(0); // Reserved
                out.put_slice(create_guid);
            }
            Self::DurableHandleReconnectV2 {
                file_id,
                create_guid,
                flags,
            } => {
                put_file_id(out, *file_id);
                out.put_slice(create_guid);
                out.put_u32_le(*flags);
            }
            Self::Lease(lease) => lease.encode(out),
            Self::QueryMaximalAccess { timestamp } => {
                if let Some(t) = timestamp {
                    out.put_u64_le(*t);
                }
            }
            Self::QueryOnDiskId => {}
            Self::TimewarpToken { timestamp } => out.put_u64_le(*timestamp),
            Self::Posix { mode } => super::posix::encode_create_request(*mode, out),
            Self::Other { data, .. } => out.put_slice(data),
        }
    }
}

fn put_file_id(out: &mut BytesMut, id: FileId) {
    out.put_u64_le(id.persistent);
    out.put_u64_le(id.volatile);
}

/// Size of the SMB2_CREATE_CONTEXT header (Next .. DataLength).
const CONTEXT_HEADER_LEN: usize = 16;

/// Append `contexts` as an SMB2_CREATE_CONTEXT chain (MS-SMB2 2.2.13.2): each context starts
/// 8-byte aligned, Next is the distance to the following one (0 on the last), the name sits
/// right after the 16-byte header and the data at the next 8-byte boundary after the name.
/// `out` must already be 8-byte aligned relative to the message start.
fn encode_create_contexts(out: &mut BytesMut, contexts: &[CreateContextRequest]) {
    let chain_start = out.len();
    let mut previous: Option<usize> = None;
    for ctx in contexts {
        pad_to(out, chain_start, 8);
        let start = out.len();
        if let Some(prev) = previous {
            let next = (start - prev) as u32;
            out[prev..prev + 4].copy_from_slice(&next.to_le_bytes());
        }
        let name = ctx.name();
        let mut data = BytesMut::new();
        ctx.encode_data(&mut data);
        let name_end = CONTEXT_HEADER_LEN + name.len();
        // DataOffset 0 when there is no data, as Windows sends MxAc/QFid.
        let data_offset = if data.is_empty() {
            0
        } else {
            name_end.next_multiple_of(8)
        };
        out.put_u32_le(0); // Next, patched when the following context is written
        out.put_u16_le(CONTEXT_HEADER_LEN as u16); // NameOffset
        out.put_u16_le(name.len() as u16);
        out.put_u16_le(0); // Reserved
        out.put_u16_le(data_offset as u16);
        out.put_u32_le(data.len() as u32);
        out.put_slice(name);
        if !data.is_empty() {
            pad_to(out, start, 8);
            out.put_slice(&data);
        }
        previous = Some(start);
    }
}

/// MS-SMB2 2.2.13 SMB2 CREATE Request: open or create a file, directory or pipe.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CreateRequest {
    /// RequestedOplockLevel ([`OplockLevel::LEASE`] together with a lease context).
    pub oplock_level: OplockLevel,
    /// ImpersonationLevel.
    pub impersonation_level: ImpersonationLevel,
    /// DesiredAccess.
    pub desired_access: AccessMask,
    /// FileAttributes for a newly created file (0 = server default).
    pub file_attributes: FileAttributes,
    /// ShareAccess.
    pub share_access: ShareAccess,
    /// CreateDisposition.
    pub create_disposition: CreateDisposition,
    /// CreateOptions.
    pub create_options: CreateOptions,
    /// Path relative to the share root, backslash-separated, without a leading backslash;
    /// empty for the share root itself. Not sent when `file_id_name` is set.
    pub name: String,
    /// With [`CreateOptions::OPEN_BY_FILE_ID`]: the 8-byte file id the Buffer carries instead
    /// of a UTF-16 name (MS-SMB2 2.2.13, CreateOptions; MS-FSCC 2.1.9 for the id).
    pub file_id_name: Option<u64>,
    /// Create contexts, sent in this order.
    pub contexts: Vec<CreateContextRequest>,
}

impl CreateRequest {
    /// StructureSize of the request.
    pub const STRUCTURE_SIZE: u16 = 57;
    /// Length of the fixed part (StructureSize counts one byte of Buffer as well).
    pub const FIXED_LEN: usize = 56;

    /// A request with no oplock, Impersonation level, share read/write/delete, no attributes,
    /// no options and no contexts.
    pub fn new(
        name: impl Into<String>,
        desired_access: u32,
        create_disposition: CreateDisposition,
    ) -> Self {
        Self {
            oplock_level: OplockLevel::NONE,
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            desired_access: AccessMask(desired_access),
            file_attributes: FileAttributes(0),
            share_access: ShareAccess(ShareAccess::ALL),
            create_disposition,
            create_options: CreateOptions(0),
            name: name.into(),
            file_id_name: None,
            contexts: Vec::new(),
        }
    }
}

impl RequestBody for CreateRequest {
    const COMMAND: Command = Command::CREATE;

    fn encode_body(&self, msg: &mut BytesMut) {
        let body_start = msg.len();
        let name_offset = body_start + Self::FIXED_LEN;
        let name_len = match self.file_id_name {
            Some(_) => 8,
            None => utf16le_len(&self.name),
        };
        // Contexts start at the first 8-byte boundary after the name (2.2.13).
        let contexts_offset = (name_offset + name_len).next_multiple_of(8);

        msg.put_u16_le(Self::STRUCTURE_SIZE);
        msg.put_u8(0); // SecurityFlags
        msg.put_u8(self.oplock_level.0);
        msg.put_u32_le(self.impersonation_level.0);
        msg.put_u64_le(0); // SmbCreateFlags
        msg.put_u64_le(0); // Reserved
        msg.put_u32_le(self.desired_access.0);
        msg.put_u32_le(self.file_attributes.0);
        msg.put_u32_le(self.share_access.0);
        msg.put_u32_le(self.create_disposition.0);
        msg.put_u32_le(self.create_options.0);
        // NameOffset points at the Buffer even for an empty name (the share root), as
        // Windows does; the server only reads NameLength bytes there.
        msg.put_u16_le(name_offset as u16);
        msg.put_u16_le(name_len as u16);
        let contexts_fields_at = msg.len();
        msg.put_u32_le(0); // CreateContextsOffset, patched below
        msg.put_u32_le(0); // CreateContextsLength, patched below

        match self.file_id_name {
            Some(id) => msg.put_u64_le(id),
            None => put_utf16le(msg, &self.name),
        }
        if !self.contexts.is_empty() {
            pad_to(msg, 0, 8);
            debug_assert_eq!(msg.len(), contexts_offset);
            let start = msg.len();
            encode_create_contexts(msg, &self.contexts);
            let length = (msg.len() - start) as u32;
            msg[contexts_fields_at..contexts_fields_at + 4]
                .copy_from_slice(&(start as u32).to_le_bytes());
            msg[contexts_fields_at + 4..contexts_fields_at + 8]
                .copy_from_slice(&length.to_le_bytes());
        }
        // 2.2.13: the Buffer is at least one byte even when the name is empty.
        if msg.len() == name_offset {
            msg.put_u8(0);
        }
    }

    /// CREATE: safe with a durable v2 request (the server answers a replay with the open
    /// the first attempt made, MS-SMB2 3.3.5.9.10), or when opening twice has the effect of
    /// opening once (at worst the server keeps a second handle until the session ends).
    /// Creating a new file or opening with delete-on-close is not.
    fn replay(&self) -> Replay {
        let has_create_guid = self
            .contexts
            .iter()
            .any(|c| matches!(c, CreateContextRequest::DurableHandleV2 { .. }));
        if has_create_guid {
            return Replay::Safe;
        }
        if self.create_options.0 & CreateOptions::DELETE_ON_CLOSE != 0 {
            return Replay::Unsafe(ReplayHazard::DeleteOnClose);
        }
        if self.create_disposition == CreateDisposition::CREATE {
            return Replay::Unsafe(ReplayHazard::CreatesNewFile);
        }
        Replay::Safe
    }
}

/// A create context returned in a CREATE response (MS-SMB2 2.2.14.2).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum CreateContextResponse {
    /// DHnQ, SMB2_CREATE_DURABLE_HANDLE_RESPONSE (2.2.14.2.3): the open is durable (v1).
    DurableHandle,
    /// DH2Q, SMB2_CREATE_DURABLE_HANDLE_RESPONSE_V2 (2.2.14.2.12).
    DurableHandleV2 {
        /// Timeout in milliseconds the server keeps the open after a disconnect.
        timeout_ms: u32,
        /// Flags: [`DHANDLE_FLAG_PERSISTENT`] if the handle is persistent.
        flags: u32,
    },
    /// RqLs, SMB2_CREATE_RESPONSE_LEASE (2.2.14.2.10) or _V2 (2.2.14.2.11).
    Lease(Lease),
    /// MxAc, SMB2_CREATE_QUERY_MAXIMAL_ACCESS_RESPONSE (2.2.14.2.5).
    MaximalAccess {
        /// QueryStatus: whether the maximal access could be computed.
        query_status: NtStatus,
        /// MaximalAccess granted to the user (valid when `query_status` is SUCCESS).
        maximal_access: AccessMask,
    },
    /// QFid, SMB2_CREATE_QUERY_ON_DISK_ID response (2.2.14.2.9): 32 bytes, DiskFileId and
    /// VolumeId in the first 16.
    OnDiskId([u8; 32]),
    /// The SMB3 POSIX create context response ([POSIX-SMB2] 2.2.14.2.16): the server made
    /// this a POSIX open and says what the file is.
    Posix(PosixCreateInfo),
    /// A context this crate does not interpret, kept as received.
    Other {
        /// Name.
        name: Bytes,
        /// Data.
        data: Bytes,
    },
}

impl CreateContextResponse {
    /// Interpret a raw context by its name; known names with too little data are an error.
    fn from_raw(name: Bytes, data: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(&data);
        let ctx = match name.as_ref() {
            n if n == context_name::DURABLE_HANDLE => Self::DurableHandle,
            n if n == context_name::DURABLE_HANDLE_V2 => Self::DurableHandleV2 {
                timeout_ms: r.u32("DH2Q response Timeout")?,
                flags: r.u32("DH2Q response Flags")?,
            },
            n if n == context_name::LEASE => Self::Lease(Lease::decode(&data)?),
            n if n == context_name::QUERY_MAXIMAL_ACCESS => Self::MaximalAccess {
                query_status: NtStatus(r.u32("MxAc response QueryStatus")?),
                maximal_access: AccessMask(r.u32("MxAc response MaximalAccess")?),
            },
            n if n == context_name::QUERY_ON_DISK_ID => {
                Self::OnDiskId(r.array("QFid response DiskFileId/VolumeId")?)
            }
            n if n == POSIX_CREATE_CONTEXT_TAG => Self::Posix(PosixCreateInfo::decode(&data)?),
            _ => Self::Other { name, data },
        };
        Ok(ctx)
    }
}

/// Upper bound on create contexts in one response; real servers send a handful.
const MAX_CREATE_CONTEXTS: usize = 64;

/// Locate a name or data field inside one context: it must start after the context header
/// and end inside the context.
fn field_in_context(
    ctx: &Bytes,
    offset: usize,
    length: usize,
    what: &'static str,
) -> Result<Bytes, DecodeError> {
    if length != 0 && offset < CONTEXT_HEADER_LEN {
        return Err(DecodeError::BadOffset {
            what,
            offset,
            length,
            message_len: ctx.len(),
        });
    }
    bytes_at(ctx, offset, length, what)
}

/// Split an SMB2_CREATE_CONTEXT chain (MS-SMB2 2.2.13.2) into (name, data) pairs without
/// copying. Next must be 0 or a multiple of 8 that covers at least a context header and stays
/// inside `chain`; NameOffset/DataOffset must point inside their own context.
fn split_create_contexts(chain: &Bytes) -> Result<Vec<(Bytes, Bytes)>, DecodeError> {
    let mut out = Vec::new();
    let mut start = 0usize;
    loop {
        if out.len() >= MAX_CREATE_CONTEXTS {
            return Err(DecodeError::Inconsistent {
                what: "create contexts",
                detail: "too many create contexts",
            });
        }
        let rest = chain.slice(start..);
        let mut r = Reader::new(&rest);
        let next = r.u32("create context Next")? as usize;
        let name_offset = r.u16("create context NameOffset")? as usize;
        let name_length = r.u16("create context NameLength")? as usize;
        r.skip(2, "create context Reserved")?;
        let data_offset = r.u16("create context DataOffset")? as usize;
        let data_length = r.u32("create context DataLength")? as usize;
        if next != 0 && (next % 8 != 0 || next < CONTEXT_HEADER_LEN || next > rest.len()) {
            return Err(DecodeError::BadOffset {
                what: "create context Next",
                offset: start,
                length: next,
                message_len: chain.len(),
            });
        }
        let ctx = if next == 0 { rest } else { rest.slice(..next) };
        if name_length == 0 {
            return Err(DecodeError::Inconsistent {
                what: "create context",
                detail: "empty context name",
            });
        }
        let name = field_in_context(&ctx, name_offset, name_length, "create context name")?;
        let data = field_in_context(&ctx, data_offset, data_length, "create context data")?;
        out.push((name, data));
        if next == 0 {
            return Ok(out);
        }
        start += next;
    }
}

/// MS-SMB2 2.2.14 SMB2 CREATE Response.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CreateResponse {
    /// OplockLevel granted ([`OplockLevel::LEASE`] when a lease context is returned).
    pub oplock_level: OplockLevel,
    /// Flags: [`CreateResponse::FLAG_REPARSEPOINT`] (3.x).
    pub flags: u8,
    /// CreateAction.
    pub create_action: CreateAction,
    /// CreationTime (FILETIME).
    pub creation_time: u64,
    /// LastAccessTime (FILETIME).
    pub last_access_time: u64,
    /// LastWriteTime (FILETIME).
    pub last_write_time: u64,
    /// ChangeTime (FILETIME).
    pub change_time: u64,
    /// AllocationSize in bytes.
    pub allocation_size: u64,
    /// EndofFile: the file size in bytes.
    pub end_of_file: u64,
    /// FileAttributes.
    pub file_attributes: FileAttributes,
    /// FileId of the new open.
    pub file_id: FileId,
    /// Create contexts returned by the server, in wire order.
    pub contexts: Vec<CreateContextResponse>,
}

impl CreateResponse {
    /// StructureSize of the response.
    pub const STRUCTURE_SIZE: u16 = 89;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 88;
    /// SMB2_CREATE_FLAG_REPARSEPOINT: the opened file is a reparse point.
    pub const FLAG_REPARSEPOINT: u8 = 0x01;

    /// Decode a whole CREATE response message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(Self::STRUCTURE_SIZE, "CREATE response StructureSize")?;
        let oplock_level = OplockLevel(r.u8("CREATE response OplockLevel")?);
        let flags = r.u8("CREATE response Flags")?;
        let create_action = CreateAction(r.u32("CREATE response CreateAction")?);
        let creation_time = r.u64("CREATE response CreationTime")?;
        let last_access_time = r.u64("CREATE response LastAccessTime")?;
        let last_write_time = r.u64("CREATE response LastWriteTime")?;
        let change_time = r.u64("CREATE response ChangeTime")?;
        let allocation_size = r.u64("CREATE response AllocationSize")?;
        let end_of_file = r.u64("CREATE response EndofFile")?;
        let file_attributes = FileAttributes(r.u32("CREATE response FileAttributes")?);
        r.skip(4, "CREATE response Reserved2")?;
        let file_id = FileId {
            persistent: r.u64("CREATE response FileId.Persistent")?,
            volatile: r.u64("CREATE response FileId.Volatile")?,
        };
        let contexts_offset = r.u32("CREATE response CreateContextsOffset")? as usize;
        let contexts_length = r.u32("CREATE response CreateContextsLength")? as usize;

        let mut contexts = Vec::new();
        if contexts_length != 0 {
            if contexts_offset < HEADER_LEN + Self::FIXED_LEN {
                return Err(DecodeError::BadOffset {
                    what: "CREATE response create contexts",
                    offset: contexts_offset,
                    length: contexts_length,
                    message_len: msg.len(),
                });
            }
            let chain = bytes_at(
                msg,
                contexts_offset,
                contexts_length,
                "CREATE response create contexts",
            )?;
            for (name, data) in split_create_contexts(&chain)? {
                contexts.push(CreateContextResponse::from_raw(name, data)?);
            }
        }
        Ok(Self {
            oplock_level,
            flags,
            create_action,
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            allocation_size,
            end_of_file,
            file_attributes,
            file_id,
            contexts,
        })
    }

    /// The granted lease, if the server returned an RqLs context.
    pub fn lease(&self) -> Option<&Lease> {
        self.contexts.iter().find_map(|c| match c {
            CreateContextResponse::Lease(l) => Some(l),
            _ => None,
        })
    }

    /// The DH2Q response (timeout in ms, flags), if the open was made durable (v2).
    pub fn durable_v2(&self) -> Option<(u32, u32)> {
        self.contexts.iter().find_map(|c| match c {
            CreateContextResponse::DurableHandleV2 { timeout_ms, flags } => {
                Some((*timeout_ms, *flags))
            }
            _ => None,
        })
    }

    /// The maximal access, if the server returned an MxAc context with QueryStatus SUCCESS.
    pub fn maximal_access(&self) -> Option<AccessMask> {
        self.contexts.iter().find_map(|c| match c {
            CreateContextResponse::MaximalAccess {
                query_status,
                maximal_access,
            } if *query_status == NtStatus::SUCCESS => Some(*maximal_access),
            _ => None,
        })
    }

    /// What the POSIX create context response says of the file, if the server made this a
    /// POSIX open.
    pub fn posix(&self) -> Option<&PosixCreateInfo> {
        self.contexts.iter().find_map(|c| match c {
            CreateContextResponse::Posix(p) => Some(p),
            _ => None,
        })
    }

    /// The QFid response's 32 bytes, if returned.
    pub fn on_disk_id(&self) -> Option<[u8; 32]> {
        self.contexts.iter().find_map(|c| match c {
            CreateContextResponse::OnDiskId(id) => Some(*id),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;
    use crate::msg::test_util::hex;

    /// Encode a request behind a default header and return the body as hex.
    fn body_hex<B: RequestBody>(body: &B) -> String {
        let mut msg = BytesMut::new();
        Header::request(B::COMMAND).encode(&mut msg);
        body.encode_body(&mut msg);
        hex::encode(&msg[HEADER_LEN..])
    }

    fn clean(s: &str) -> String {
        s.split_whitespace().collect()
    }

    const GUID: [u8; 16] = [
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e,
        0x1f,
    ];
    const LEASE_KEY: [u8; 16] = [
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae,
        0xaf,
    ];

    #[test]
    fn open_file_no_contexts_golden() {
        let req = CreateRequest::new(
            "dir\\a.txt",
            AccessMask::GENERIC_READ | AccessMask::SYNCHRONIZE,
            CreateDisposition::OPEN,
        );
        let expected = clean(
            "3900 00 00 02000000 0000000000000000 0000000000000000 \
             00001080 00000000 07000000 01000000 00000000 \
             7800 1200 00000000 00000000 \
             6400690072005c0061002e00740078007400",
        );
        assert_eq!(body_hex(&req), expected);
    }

    #[test]
    fn share_root_has_one_byte_buffer() {
        let mut req = CreateRequest::new(
            "",
            AccessMask::FILE_READ_ATTRIBUTES | AccessMask::SYNCHRONIZE,
            CreateDisposition::OPEN,
        );
        req.create_options = CreateOptions(CreateOptions::DIRECTORY_FILE);
        req.share_access = ShareAccess(ShareAccess::READ | ShareAccess::WRITE);
        let expected = clean(
            "3900 00 00 02000000 0000000000000000 0000000000000000 \
             80001000 00000000 03000000 01000000 01000000 \
             7800 0000 00000000 00000000 \
             00",
        );
        assert_eq!(body_hex(&req), expected);
        assert_eq!(expected.len() / 2, 57);
    }

    #[test]
    fn create_with_contexts_golden() {
        let mut req = CreateRequest::new(
            "a.txt",
            AccessMask::GENERIC_READ | AccessMask::GENERIC_WRITE,
            CreateDisposition::OPEN_IF,
        );
        req.oplock_level = OplockLevel::LEASE;
        req.file_attributes = FileAttributes(FileAttributes::NORMAL);
        req.create_options = CreateOptions(CreateOptions::NON_DIRECTORY_FILE);
        req.contexts = vec![
            CreateContextRequest::DurableHandleV2 {
                timeout_ms: 0,
                flags: 0,
                create_guid: GUID,
            },
            CreateContextRequest::Lease(Lease {
                key: LEASE_KEY,
                state: LeaseState(
                    LeaseState::READ_CACHING
                        | LeaseState::HANDLE_CACHING
                        | LeaseState::WRITE_CACHING,
                ),
                flags: 0,
                v2: Some(LeaseV2 {
                    parent_key: [0; 16],
                    epoch: 0,
                }),
            }),
            CreateContextRequest::QueryMaximalAccess { timestamp: None },
            CreateContextRequest::QueryOnDiskId,
        ];
        // Name "a.txt" = 10 bytes at 0x78, so contexts start at 0x88 (136).
        // DH2Q: 16 header + 4 name + 4 pad + 32 data = 56 -> Next 56.
        // RqLs: 16 + 4 + 4 + 52 = 76 -> padded to 80, Next 80.
        // MxAc: 16 + 4 = 20 -> padded to 24, Next 24.
        // QFid: 16 + 4 = 20, last, not padded. Total 56 + 80 + 24 + 20 = 180 (0xb4).
        let expected = clean(
            "3900 00 ff 02000000 0000000000000000 0000000000000000 \
             000000c0 80000000 07000000 03000000 40000000 \
             7800 0a00 88000000 b4000000 \
             61002e00740078007400 000000000000 \
             38000000 1000 0400 0000 1800 20000000 44483251 00000000 \
               00000000 00000000 0000000000000000 101112131415161718191a1b1c1d1e1f \
             50000000 1000 0400 0000 1800 34000000 52714c73 00000000 \
               a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 07000000 00000000 0000000000000000 \
               00000000000000000000000000000000 0000 0000 00000000 \
             18000000 1000 0400 0000 0000 00000000 4d784163 00000000 \
             00000000 1000 0400 0000 0000 00000000 51466964",
        );
        assert_eq!(body_hex(&req), expected);
    }

    #[test]
    fn reconnect_and_v1_contexts_golden() {
        let file_id = FileId {
            persistent: 0x1122_3344_5566_7788,
            volatile: 0x99aa_bbcc_ddee_ff00,
        };
        let mut req = CreateRequest::new("f", AccessMask::GENERIC_READ, CreateDisposition::OPEN);
        req.oplock_level = OplockLevel::BATCH;
        req.contexts = vec![
            CreateContextRequest::DurableHandleReconnectV2 {
                file_id,
                create_guid: GUID,
                flags: DHANDLE_FLAG_PERSISTENT,
            },
            CreateContextRequest::DurableHandle,
            CreateContextRequest::DurableHandleReconnect { file_id },
            CreateContextRequest::Lease(Lease {
                key: LEASE_KEY,
                state: LeaseState(LeaseState::READ_CACHING),
                flags: 0,
                v2: None,
            }),
            CreateContextRequest::QueryMaximalAccess {
                timestamp: Some(0x01d0_0000_0000_0001),
            },
        ];
        // Name "f" at 0x78 (2 bytes), contexts at 0x80.
        // DH2C: 24 + 36 = 60 -> Next 64. DHnQ: 24 + 16 = 40. DHnC: 24 + 16 = 40.
        // RqLs v1: 24 + 32 = 56. MxAc: 24 + 8 = 32 (last). Total 64+40+40+56+32 = 232 (0xe8).
        let expected = clean(
            "3900 00 09 02000000 0000000000000000 0000000000000000 \
             00000080 00000000 07000000 01000000 00000000 \
             7800 0200 80000000 e8000000 \
             6600 000000000000 \
             40000000 1000 0400 0000 1800 24000000 44483243 00000000 \
               8877665544332211 00ffeeddccbbaa99 101112131415161718191a1b1c1d1e1f 02000000 \
               00000000 \
             28000000 1000 0400 0000 1800 10000000 44486e51 00000000 \
               00000000000000000000000000000000 \
             28000000 1000 0400 0000 1800 10000000 44486e43 00000000 \
               8877665544332211 00ffeeddccbbaa99 \
             38000000 1000 0400 0000 1800 20000000 52714c73 00000000 \
               a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 01000000 00000000 0000000000000000 \
             00000000 1000 0400 0000 1800 08000000 4d784163 00000000 \
               010000000000d001",
        );
        assert_eq!(body_hex(&req), expected);
    }

    #[test]
    fn timewarp_token_golden() {
        // 2.2.13.2.7: the data is the snapshot's FILETIME, 8 bytes.
        let mut req = CreateRequest::new("f", AccessMask::GENERIC_READ, CreateDisposition::OPEN);
        req.contexts = vec![CreateContextRequest::TimewarpToken {
            timestamp: 0x01dd_5a0b_2f6c_a000,
        }];
        let expected = clean(
            "3900 00 00 02000000 0000000000000000 0000000000000000 \
             00000080 00000000 07000000 01000000 00000000 \
             7800 0200 80000000 20000000 \
             6600 000000000000 \
             00000000 1000 0400 0000 1800 08000000 54577270 00000000 \
               00a06c2f0b5add01",
        );
        assert_eq!(body_hex(&req), expected);
    }

    #[test]
    fn open_by_file_id_sends_the_id_as_the_name() {
        let mut req = CreateRequest::new(
            "ignored",
            AccessMask::FILE_READ_DATA,
            CreateDisposition::OPEN,
        );
        req.create_options = CreateOptions(CreateOptions::OPEN_BY_FILE_ID);
        req.file_id_name = Some(0x0102_0304_0506_0708);
        let expected = clean(
            "3900 00 00 02000000 0000000000000000 0000000000000000 \
             01000000 00000000 07000000 01000000 00200000 \
             7800 0800 00000000 00000000 \
             0807060504030201",
        );
        assert_eq!(body_hex(&req), expected);
    }

    #[test]
    fn request_length_is_what_the_header_says() {
        for name in ["", "a", "ab", "abc", "abcd", "dir\\sub\\file.bin"] {
            for contexts in [vec![], vec![CreateContextRequest::QueryOnDiskId]] {
                let mut req = CreateRequest::new(name, 1, CreateDisposition::OPEN);
                req.contexts = contexts.clone();
                let mut msg = BytesMut::new();
                Header::request(Command::CREATE).encode(&mut msg);
                req.encode_body(&mut msg);
                let off = u32::from_le_bytes(msg[64 + 48..64 + 52].try_into().unwrap()) as usize;
                let len = u32::from_le_bytes(msg[64 + 52..64 + 56].try_into().unwrap()) as usize;
                assert!(msg.len() >= 64 + 57);
                if contexts.is_empty() {
                    assert_eq!((off, len), (0, 0));
                } else {
                    assert_eq!(off % 8, 0);
                    assert_eq!(off + len, msg.len(), "name {name:?}");
                    assert_eq!(&msg[off + 16..off + 20], b"QFid");
                }
            }
        }
    }

    /// CREATE response header (Samba style): status SUCCESS, 1 credit granted, MessageId 5,
    /// TreeId 1, SessionId 0x0000_1000_0000_0001.
    const HDR: &str = "fe534d42 4000 0000 00000000 0500 0100 01000000 00000000 \
                       0500000000000000 feff0000 01000000 0100000000100000 \
                       00000000000000000000000000000000";

    /// Fixed part of a CREATE response for a 3-byte file, with the given contexts offset and
    /// length.
    fn fixed(oplock: &str, ctx_off: &str, ctx_len: &str) -> String {
        format!(
            "5900 {oplock} 00 01000000 \
             50fc82f9c39bda01 51fc82f9c39bda01 52fc82f9c39bda01 53fc82f9c39bda01 \
             0010000000000000 0300000000000000 20000000 00000000 \
             2a00e00100000000 0300000005000000 {ctx_off} {ctx_len}"
        )
    }

    #[test]
    fn response_without_contexts() {
        let msg = hex(&format!(
            "{HDR} {} 00000000",
            fixed("00", "00000000", "00000000")
        ));
        let resp = CreateResponse::decode(&msg).unwrap();
        assert_eq!(resp.oplock_level, OplockLevel::NONE);
        assert_eq!(resp.flags, 0);
        assert_eq!(resp.create_action, CreateAction::OPENED);
        assert_eq!(resp.creation_time, 0x01da_9bc3_f982_fc50);
        assert_eq!(resp.last_access_time, 0x01da_9bc3_f982_fc51);
        assert_eq!(resp.last_write_time, 0x01da_9bc3_f982_fc52);
        assert_eq!(resp.change_time, 0x01da_9bc3_f982_fc53);
        assert_eq!(resp.allocation_size, 4096);
        assert_eq!(resp.end_of_file, 3);
        assert_eq!(
            resp.file_attributes,
            FileAttributes(FileAttributes::ARCHIVE)
        );
        assert_eq!(
            resp.file_id,
            FileId {
                persistent: 0x01e0_002a,
                volatile: 0x5_0000_0003,
            }
        );
        assert!(resp.contexts.is_empty());
        assert_eq!(resp.lease(), None);
    }

    /// A response carrying MxAc, QFid, RqLs v2, DH2Q and an unknown context, at 0x98.
    fn response_with_contexts() -> String {
        // MxAc: 24 + 8 = 32; QFid: 24 + 32 = 56; RqLs: 24 + 52 = 76 -> 80; DH2Q: 24 + 8 = 32;
        // "ZZZZ": 24 + 3 = 27 (last). Total 32+56+80+32+27 = 227 (0xe3).
        format!(
            "{HDR} {} \
             20000000 1000 0400 0000 1800 08000000 4d784163 00000000 \
               00000000 ff011f00 \
             38000000 1000 0400 0000 1800 20000000 51466964 00000000 \
               2a00e00100000000 0308000000000000 00000000000000000000000000000000 \
             50000000 1000 0400 0000 1800 34000000 52714c73 00000000 \
               a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 07000000 00000000 0000000000000000 \
               00000000000000000000000000000000 0100 0000 00000000 \
             20000000 1000 0400 0000 1800 08000000 44483251 00000000 \
               60ea0000 00000000 \
             00000000 1000 0400 0000 1800 03000000 5a5a5a5a 00000000 \
               010203",
            fixed("ff", "98000000", "e3000000")
        )
    }

    #[test]
    fn response_with_contexts_decodes() {
        let msg = hex(&response_with_contexts());
        let resp = CreateResponse::decode(&msg).unwrap();
        assert_eq!(resp.oplock_level, OplockLevel::LEASE);
        assert_eq!(resp.contexts.len(), 5);
        assert_eq!(
            resp.contexts[0],
            CreateContextResponse::MaximalAccess {
                query_status: NtStatus::SUCCESS,
                maximal_access: AccessMask(0x001f_01ff),
            }
        );
        let CreateContextResponse::OnDiskId(disk_id) = &resp.contexts[1] else {
            panic!("expected QFid, got {:?}", resp.contexts[1]);
        };
        assert_eq!(&disk_id[..8], &0x01e0_002au64.to_le_bytes());
        assert_eq!(&disk_id[8..16], &0x803u64.to_le_bytes());
        let lease = resp.lease().unwrap();
        assert_eq!(lease.key, LEASE_KEY);
        assert_eq!(lease.state, LeaseState(7));
        assert_eq!(lease.flags, 0);
        assert_eq!(
            lease.v2,
            Some(LeaseV2 {
                parent_key: [0; 16],
                epoch: 1,
            })
        );
        assert_eq!(resp.durable_v2(), Some((60_000, 0)));
        assert_eq!(resp.maximal_access(), Some(AccessMask(0x001f_01ff)));
        assert_eq!(
            resp.contexts[4],
            CreateContextResponse::Other {
                name: Bytes::from_static(b"ZZZZ"),
                data: Bytes::from_static(&[1, 2, 3]),
            }
        );
    }

    #[test]
    fn posix_context_request_golden() {
        let mut req = CreateRequest::new(
            "d",
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::CREATE,
        );
        req.contexts.push(CreateContextRequest::Posix {
            mode: PosixMode::permissions_only(0o750),
        });
        let body = body_hex(&req);
        // The context follows the 2-byte name padded to 8: 16-byte header, the 16-byte GUID
        // as its name, then 4 bytes of mode at DataOffset 32.
        let ctx = &body[body.len() - 2 * 36..];
        assert_eq!(
            ctx,
            clean(
                "00000000 1000 1000 0000 2000 04000000
                 93ad25509cb411e7b42383de968bcd7c e8010000"
            )
        );
    }

    #[test]
    fn posix_context_response_decodes() {
        // nlinks 1, no tag, mode 0644 regular, owner S-1-22-1-1000, group S-1-22-2-1000.
        let data = "01000000 00000000 a4010000                     010200000000001601000000e8030000 010200000000001602000000e8030000";
        let msg = hex(&format!(
            "{HDR} {} 00000000 1000 1000 0000 2000 2c000000              93ad25509cb411e7b42383de968bcd7c {data}",
            fixed("00", "98000000", "4c000000")
        ));
        let resp = CreateResponse::decode(&msg).unwrap();
        let posix = resp.posix().expect("POSIX context");
        assert_eq!(posix.nlinks, 1);
        assert_eq!(posix.mode.to_unix(), Some(0o100644));
        assert_eq!(posix.owner.to_string(), "S-1-22-1-1000");
        assert_eq!(posix.group.to_string(), "S-1-22-2-1000");
        // A POSIX context whose data is cut short is a decode error, not a guess.
        let short = hex(&format!(
            "{HDR} {} 00000000 1000 1000 0000 2000 0c000000              93ad25509cb411e7b42383de968bcd7c 01000000 00000000 a4010000",
            fixed("00", "98000000", "2c000000")
        ));
        assert!(CreateResponse::decode(&short).is_err());
    }

    #[test]
    fn response_lease_v1_and_dhnq() {
        // RqLs v1 (32 bytes data) + DHnQ (8 reserved bytes): 56 + 32 = 88 bytes at 0x98.
        let msg = hex(&format!(
            "{HDR} {} \
             38000000 1000 0400 0000 1800 20000000 52714c73 00000000 \
               a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 03000000 02000000 0000000000000000 \
             00000000 1000 0400 0000 1800 08000000 44486e51 00000000 \
               0000000000000000",
            fixed("ff", "98000000", "58000000")
        ));
        let resp = CreateResponse::decode(&msg).unwrap();
        assert_eq!(
            resp.contexts,
            vec![
                CreateContextResponse::Lease(Lease {
                    key: LEASE_KEY,
                    state: LeaseState(LeaseState::READ_CACHING | LeaseState::HANDLE_CACHING),
                    flags: Lease::FLAG_BREAK_IN_PROGRESS,
                    v2: None,
                }),
                CreateContextResponse::DurableHandle,
            ]
        );
    }

    fn set_u32(msg: &mut [u8], at: usize, v: u32) {
        msg[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn response_malformed() {
        let good = hex(&response_with_contexts()).to_vec();
        let decode = |m: &[u8]| CreateResponse::decode(&Bytes::copy_from_slice(m));
        assert!(decode(&good).is_ok());
        // Header only / fixed part cut short.
        assert!(decode(&good[..64]).is_err());
        assert!(decode(&good[..64 + 87]).is_err());
        // Wrong StructureSize.
        let mut bad = good.clone();
        bad[64] = 88;
        assert!(matches!(
            decode(&bad),
            Err(DecodeError::InvalidValue { .. })
        ));
        // Contexts offset into the fixed part, past the end, and overflowing.
        for (off, len) in [(0x40, 0xe3), (0x98, 0xe4), (0xffff_fff0, 0x20)] {
            let mut bad = good.clone();
            set_u32(&mut bad, 64 + 80, off);
            set_u32(&mut bad, 64 + 84, len);
            assert!(decode(&bad).is_err(), "off {off:#x} len {len:#x}");
        }
        // First context's Next: unaligned, too small, past the chain.
        let ctx0 = 0x98;
        for next in [0x21u32, 8, 0x100] {
            let mut bad = good.clone();
            set_u32(&mut bad, ctx0, next);
            assert!(
                matches!(decode(&bad), Err(DecodeError::BadOffset { .. })),
                "next {next:#x}"
            );
        }
        // NameOffset inside the context header; name running past the context.
        let mut bad = good.clone();
        bad[ctx0 + 4] = 8;
        assert!(decode(&bad).is_err());
        let mut bad = good.clone();
        bad[ctx0 + 6] = 0x20; // NameLength 32 with NameOffset 16 in a 32-byte context
        assert!(decode(&bad).is_err());
        // Empty name.
        let mut bad = good.clone();
        bad[ctx0 + 6] = 0;
        assert!(matches!(
            decode(&bad),
            Err(DecodeError::Inconsistent { .. })
        ));
        // DataLength past the context.
        let mut bad = good.clone();
        set_u32(&mut bad, ctx0 + 12, 9);
        assert!(decode(&bad).is_err());
        // Known context with too little data: MxAc with 4 bytes.
        let mut bad = good.clone();
        set_u32(&mut bad, ctx0 + 12, 4);
        assert!(matches!(decode(&bad), Err(DecodeError::Truncated { .. })));
        // Chain cut in the middle of the last context's header.
        let mut bad = good.clone();
        set_u32(&mut bad, 64 + 84, 0xe3 - 27 + 10);
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn context_loop_is_bounded() {
        // 65 minimal contexts (16-byte header + 4-byte name, Next 24).
        let mut chain = BytesMut::new();
        for i in 0..65 {
            let next = if i == 64 { 0 } else { 24 };
            chain.put_u32_le(next);
            chain.put_slice(&hex("1000 0400 0000 0000 00000000"));
            chain.put_slice(b"ABCD");
            if next != 0 {
                chain.put_u32_le(0);
            }
        }
        let chain = chain.freeze();
        assert!(matches!(
            split_create_contexts(&chain),
            Err(DecodeError::Inconsistent { .. })
        ));
        assert_eq!(split_create_contexts(&chain.slice(24..)).unwrap().len(), 64);
    }
}
