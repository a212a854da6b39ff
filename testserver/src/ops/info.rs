//! QUERY_INFO and SET_INFO (MS-SMB2 3.3.5.20, 3.3.5.21) for the classes of MS-FSCC 2.4 and
//! 2.5 that clients use day to day, and security descriptors (MS-DTYP 2.4.6, the parts
//! AdditionalInformation names); others are refused with STATUS_INVALID_INFO_CLASS or
//! STATUS_NOT_SUPPORTED.

use bytes::{BufMut, BytesMut};
use smb3_proto::msg::security_descriptor::{control as sd_control, SecurityDescriptor};
use smb3_proto::NtStatus;

use super::Ctx;
use crate::files::{
    components, filetime_now, Content, Files, Node, ATTR_DIRECTORY, ATTR_NORMAL, ATTR_READONLY,
    MAX_FILE_SIZE,
};
use crate::state::access;
use crate::watches::{action, kind, Change};
use crate::wire::{body_offset, put_utf16, slice_at, utf16, utf16_len, Fields, Handled, Reply};

const INFO_FILE: u8 = 1;
const INFO_FILESYSTEM: u8 = 2;
const INFO_SECURITY: u8 = 3;

/// The share's pretend capacity: 1 TiB in 4 KiB clusters of eight 512-byte sectors.
const TOTAL_CLUSTERS: u64 = 1 << 28;
const CLUSTER: u64 = 4096;

pub(crate) fn query(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(41)?;
    let info_type = f.u8()?;
    let class = f.u8()?;
    let output_len = f.u32()? as usize;
    // InputBufferOffset, Reserved, InputBufferLength, then AdditionalInformation (MS-SMB2
    // 2.2.37): the parts of a security descriptor asked for.
    f.skip(8)?;
    let parts = f.u32()?;
    let id = ctx.open_at(24)?;
    let open = ctx.open(id)?;
    let files = ctx.files(&open.share)?;
    let node = files.get(open.node).ok_or(NtStatus::FILE_CLOSED)?;
    let (data, variable) = match info_type {
        INFO_FILE => file_info(files, node, class)?,
        INFO_FILESYSTEM => fs_info(files, class)?,
        INFO_SECURITY => (security_info(node, parts), true),
        _ => return Err(NtStatus::NOT_SUPPORTED),
    };
    let (status, data) = if data.len() <= output_len {
        (NtStatus::SUCCESS, &data[..])
    } else if variable {
        (NtStatus::BUFFER_OVERFLOW, &data[..output_len])
    } else {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    };
    let mut body = BytesMut::with_capacity(8 + data.len());
    body.put_u16_le(9);
    body.put_u16_le(body_offset(8));
    body.put_u32_le(data.len() as u32);
    body.put_slice(data);
    if data.is_empty() {
        body.put_u8(0);
    }
    Ok(Reply::with_status(status, body))
}

/// AdditionalInformation bits (MS-SMB2 2.2.37): owner, group, DACL, SACL.
const SECURITY_OWNER: u32 = 1;
const SECURITY_GROUP: u32 = 2;
const SECURITY_DACL: u32 = 4;
const SECURITY_SACL: u32 = 8;

/// The `parts` of `node`'s security descriptor: of the one a SET_INFO stored, or the empty
/// one (no owner, group or ACLs). Bytes a test planted that do not decode are sent as they
/// are, as a broken or hostile server would.
fn security_info(node: &Node, parts: u32) -> BytesMut {
    let empty = || {
        let mut d = BytesMut::new();
        d.put_u8(1);
        d.put_u8(0);
        d.put_u16_le(0x8000);
        d.put_slice(&[0; 16]);
        d
    };
    let Some(raw) = &node.security else {
        return empty();
    };
    let Ok(mut sd) = SecurityDescriptor::decode(raw) else {
        return BytesMut::from(&raw[..]);
    };
    if parts & SECURITY_OWNER == 0 {
        sd.owner = None;
    }
    if parts & SECURITY_GROUP == 0 {
        sd.group = None;
    }
    if parts & SECURITY_DACL == 0 {
        sd.dacl = None;
        sd.control &= !sd_control::DACL_PRESENT;
    }
    if parts & SECURITY_SACL == 0 {
        sd.sacl = None;
        sd.control &= !sd_control::SACL_PRESENT;
    }
    sd.encode()
        .map_or_else(|_| empty(), |b| BytesMut::from(&b[..]))
}

/// SET_INFO of a security descriptor: the `parts` of `raw` replace those of the stored one,
/// as Windows keeps an NTFS file's descriptor (no access check, no mapping of any SID).
fn set_security(node: &mut Node, parts: u32, raw: &[u8]) -> Result<(), NtStatus> {
    let new = SecurityDescriptor::decode(raw).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let mut sd = node
        .security
        .as_deref()
        .and_then(|old| SecurityDescriptor::decode(old).ok())
        .unwrap_or(SecurityDescriptor {
            control: sd_control::SELF_RELATIVE,
            rm_control: 0,
            owner: None,
            group: None,
            sacl: None,
            dacl: None,
        });
    if parts & SECURITY_OWNER != 0 {
        sd.owner = new.owner;
    }
    if parts & SECURITY_GROUP != 0 {
        sd.group = new.group;
    }
    let dacl_bits =
        sd_control::DACL_PRESENT | sd_control::DACL_AUTO_INHERITED | sd_control::DACL_PROTECTED;
    if parts & SECURITY_DACL != 0 {
        sd.dacl = new.dacl;
        sd.control = (sd.control & !dacl_bits) | (new.control & dacl_bits);
    }
    if parts & SECURITY_SACL != 0 {
        sd.sacl = new.sacl;
    }
    let encoded = sd.encode().map_err(|_| NtStatus::INVALID_PARAMETER)?;
    node.security = Some(encoded.to_vec());
    Ok(())
}

fn put_basic(d: &mut BytesMut, node: &Node) {
    d.put_u64_le(node.created);
    d.put_u64_le(node.accessed);
    d.put_u64_le(node.written);
    d.put_u64_le(node.changed);
    d.put_u32_le(node.wire_attributes());
    d.put_u32_le(0);
}

fn put_standard(d: &mut BytesMut, node: &Node) {
    d.put_u64_le(node.allocation());
    d.put_u64_le(node.size());
    d.put_u32_le(1);
    d.put_u8(node.delete_pending as u8);
    d.put_u8(node.is_dir() as u8);
    d.put_u16_le(0);
}

/// A file information class's bytes, and whether it has a variable length (so that a short
/// buffer gets what fits and STATUS_BUFFER_OVERFLOW, MS-SMB2 3.3.5.20.1).
fn file_info(files: &Files, node: &Node, class: u8) -> Result<(BytesMut, bool), NtStatus> {
    let mut d = BytesMut::new();
    let variable = match class {
        4 => {
            put_basic(&mut d, node);
            false
        }
        5 => {
            put_standard(&mut d, node);
            false
        }
        6 => {
            d.put_u64_le(node.id);
            false
        }
        7 | 8 | 16 | 17 => {
            d.put_u32_le(0);
            false
        }
        14 => {
            d.put_u64_le(0);
            false
        }
        // FileAllInformation: basic, standard, internal, EA, access, position, mode,
        // alignment, then the name.
        18 => {
            put_basic(&mut d, node);
            put_standard(&mut d, node);
            d.put_u64_le(node.id);
            d.put_u32_le(0);
            d.put_u32_le(0x001F_01FF);
            d.put_u64_le(0);
            d.put_u32_le(0);
            d.put_u32_le(0);
            let name = format!("\\{}", files.path_of(node.id));
            d.put_u32_le(utf16_len(&name) as u32);
            put_utf16(&mut d, &name);
            true
        }
        22 => {
            if !node.is_dir() {
                let name = "::$DATA";
                d.put_u32_le(0);
                d.put_u32_le(utf16_len(name) as u32);
                d.put_u64_le(node.size());
                d.put_u64_le(node.allocation());
                put_utf16(&mut d, name);
            }
            true
        }
        34 => {
            crate::ops::create::put_times_and_sizes(&mut d, node);
            d.put_u32_le(node.wire_attributes());
            d.put_u32_le(0);
            false
        }
        35 => {
            d.put_u32_le(node.wire_attributes());
            d.put_u32_le(0);
            false
        }
        _ => return Err(NtStatus::INVALID_INFO_CLASS),
    };
    Ok((d, variable))
}

fn fs_info(files: &Files, class: u8) -> Result<(BytesMut, bool), NtStatus> {
    let used = files.used_bytes() / CLUSTER;
    let free = TOTAL_CLUSTERS.saturating_sub(used);
    let mut d = BytesMut::new();
    let variable = match class {
        // FileFsVolumeInformation
        1 => {
            let label = "memory";
            d.put_u64_le(0);
            d.put_u32_le(0x5e57_5e57);
            d.put_u32_le(utf16_len(label) as u32);
            d.put_u8(0);
            d.put_u8(0);
            put_utf16(&mut d, label);
            true
        }
        // FileFsSizeInformation
        3 => {
            d.put_u64_le(TOTAL_CLUSTERS);
            d.put_u64_le(free);
            d.put_u32_le(8);
            d.put_u32_le(512);
            false
        }
        // FileFsDeviceInformation: FILE_DEVICE_DISK
        4 => {
            d.put_u32_le(7);
            d.put_u32_le(0);
            false
        }
        // FileFsAttributeInformation: case-preserving, Unicode names, 255-character names.
        5 => {
            let name = "NTFS";
            d.put_u32_le(0x0000_0003);
            d.put_u32_le(255);
            d.put_u32_le(utf16_len(name) as u32);
            put_utf16(&mut d, name);
            true
        }
        // FileFsFullSizeInformation
        7 => {
            d.put_u64_le(TOTAL_CLUSTERS);
            d.put_u64_le(free);
            d.put_u64_le(free);
            d.put_u32_le(8);
            d.put_u32_le(512);
            false
        }
        _ => return Err(NtStatus::INVALID_INFO_CLASS),
    };
    Ok((d, variable))
}

pub(crate) fn set(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(33)?;
    let info_type = f.u8()?;
    let class = f.u8()?;
    let len = f.u32()? as usize;
    let offset = f.u16()? as usize;
    f.skip(2)?;
    let parts = f.u32()?;
    let id = ctx.open_at(16)?;
    let buffer = slice_at(ctx.msg, offset, len)?.to_vec();
    if info_type == INFO_SECURITY {
        let (share, node_id, _) = target(ctx, id)?;
        let node = ctx
            .files_mut(&share)?
            .get_mut(node_id)
            .ok_or(NtStatus::FILE_CLOSED)?;
        set_security(node, parts, &buffer)?;
        let mut body = BytesMut::new();
        body.put_u16_le(2);
        return Ok(Reply::ok(body));
    }
    if info_type != INFO_FILE {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    match class {
        4 => set_basic(ctx, id, &buffer)?,
        10 => rename(ctx, id, &buffer)?,
        13 => set_delete(ctx, id, buffer.first().is_some_and(|b| *b != 0))?,
        // FileDispositionInformationEx: FILE_DISPOSITION_DELETE is bit 0.
        64 => set_delete(ctx, id, buffer.first().is_some_and(|b| b & 1 != 0))?,
        14 => {}
        19 | 20 => {
            let size = u64::from_le_bytes(
                buffer
                    .get(..8)
                    .ok_or(NtStatus::INFO_LENGTH_MISMATCH)?
                    .try_into()
                    .unwrap_or_default(),
            );
            set_size(ctx, id, size, class == 20)?
        }
        11 => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_INFO_CLASS),
    }
    let mut body = BytesMut::new();
    body.put_u16_le(2);
    Ok(Reply::ok(body))
}

/// Whether a SET_INFO request renames its file or marks it for deletion.
pub(crate) fn renames_or_deletes(msg: &[u8]) -> bool {
    let body = &msg[msg.len().min(smb3_proto::header::HEADER_LEN)..];
    let (Some(&info_type), Some(&class)) = (body.get(2), body.get(3)) else {
        return false;
    };
    let first_byte = set_buffer(msg)
        .and_then(|b| b.first().copied())
        .unwrap_or(0);
    info_type == INFO_FILE && (class == 10 || (matches!(class, 13 | 64) && first_byte & 1 != 0))
}

/// A SET_INFO request's buffer.
fn set_buffer(msg: &[u8]) -> Option<&[u8]> {
    let mut f = Fields::body(msg);
    f.skip(4).ok()?;
    let len = f.u32().ok()? as usize;
    let offset = f.u16().ok()? as usize;
    slice_at(msg, offset, len).ok()
}

/// The existing file a rename request would replace, if any.
pub(crate) fn rename_target(state: &crate::state::State, share: &str, msg: &[u8]) -> Option<u64> {
    let b = set_buffer(msg)?;
    let len = u32::from_le_bytes(b.get(16..20)?.try_into().ok()?) as usize;
    let name = utf16(slice_at(b, 20, len).ok()?).ok()?;
    let parts = components(&name).ok()?;
    state.shares.get(share)?.lookup(&parts).ok()
}

/// The share and node of open `id`.
fn target(ctx: &Ctx<'_>, id: u64) -> Result<(String, u64, u32), NtStatus> {
    let open = ctx.open(id)?;
    Ok((open.share.clone(), open.node, open.rights))
}

fn set_basic(ctx: &mut Ctx<'_>, id: u64, b: &[u8]) -> Result<(), NtStatus> {
    if b.len() < 36 {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let attributes = u32::from_le_bytes(b[32..36].try_into().unwrap_or_default());
    let (share, node_id, _) = target(ctx, id)?;
    let node = ctx
        .files_mut(&share)?
        .get_mut(node_id)
        .ok_or(NtStatus::FILE_CLOSED)?;
    if attributes & ATTR_DIRECTORY != 0 && !node.is_dir() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // 0 leaves a time as it is; -1 and -2 (stop and resume automatic updates) too, since
    // this server only updates times on writes it sees anyway (MS-FSCC 2.4.7).
    let keep = |t: u64| t == 0 || t >= u64::MAX - 1;
    // What a watch hears: each time that was set, as smbd reports it (ChangeTime has no
    // FILE_NOTIFY_CHANGE_* bit of its own), and the attributes when they changed.
    let mut kinds = 0;
    for (at, time, kind) in [
        (0, &mut node.created, kind::CREATION),
        (8, &mut node.accessed, kind::LAST_ACCESS),
        (16, &mut node.written, kind::LAST_WRITE),
        (24, &mut node.changed, 0),
    ] {
        let t = u64_at(at);
        if !keep(t) {
            *time = t;
            kinds |= kind;
        }
    }
    if attributes != 0 {
        let before = node.attributes;
        node.attributes = attributes & !ATTR_DIRECTORY & !ATTR_NORMAL;
        if node.attributes != before {
            kinds |= kind::ATTRIBUTES;
        }
    }
    let modified = Change::modified(ctx.files(&share)?, node_id, kinds);
    ctx.state.report_changes(&share, &[modified]);
    Ok(())
}

fn set_delete(ctx: &mut Ctx<'_>, id: u64, delete: bool) -> Result<(), NtStatus> {
    let (share, node_id, rights) = target(ctx, id)?;
    if rights & access::DELETE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let node = ctx
        .files_mut(&share)?
        .get_mut(node_id)
        .ok_or(NtStatus::FILE_CLOSED)?;
    if delete {
        if node.attributes & ATTR_READONLY != 0 {
            return Err(NtStatus::CANNOT_DELETE);
        }
        if node.children().is_some_and(|c| !c.is_empty()) {
            return Err(NtStatus::DIRECTORY_NOT_EMPTY);
        }
        if node.id == crate::files::ROOT {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    node.delete_pending = delete;
    Ok(())
}

fn set_size(ctx: &mut Ctx<'_>, id: u64, size: u64, end_of_file: bool) -> Result<(), NtStatus> {
    let (share, node_id, rights) = target(ctx, id)?;
    if rights & access::WRITE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if size > MAX_FILE_SIZE {
        return Err(NtStatus::DISK_FULL);
    }
    let node = ctx
        .files_mut(&share)?
        .get_mut(node_id)
        .ok_or(NtStatus::FILE_CLOSED)?;
    let Content::File(data) = &mut node.content else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    // An allocation size below the end of file cuts the file there (MS-FSA 2.1.5.15.1);
    // above it, the server has nothing to reserve.
    if end_of_file || (size as usize) < data.len() {
        let resized = data.len() as u64 != size;
        data.resize(size as usize, 0);
        node.touch_data();
        let kinds = if resized {
            kind::SIZE | kind::LAST_WRITE
        } else {
            kind::LAST_WRITE
        };
        let modified = Change::modified(ctx.files(&share)?, node_id, kinds);
        ctx.state.report_changes(&share, &[modified]);
    }
    Ok(())
}

/// FILE_RENAME_INFORMATION_TYPE_2 (MS-FSCC 2.4.37.2): ReplaceIfExists, 7 reserved bytes,
/// RootDirectory (zero for SMB2), FileNameLength, FileName relative to the share root.
fn rename(ctx: &mut Ctx<'_>, id: u64, b: &[u8]) -> Result<(), NtStatus> {
    if b.len() < 20 {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    let replace = b[0] != 0;
    let name_len = u32::from_le_bytes(b[16..20].try_into().unwrap_or_default()) as usize;
    let name = utf16(slice_at(b, 20, name_len)?)?;
    let (share, node_id, rights) = target(ctx, id)?;
    if rights & access::DELETE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if node_id == crate::files::ROOT {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let parts = components(&name)?;
    let Some(new_name) = parts.last().map(|s| s.to_string()) else {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    };
    let files = ctx.files(&share)?;
    let dir = files.parent_of(&parts)?;
    if files.is_within(dir, node_id) {
        // Into itself or below itself.
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // A directory with something open below it stays where it is, as Samba and Windows
    // keep it (the opens' paths would change under them).
    let open_below = ctx.state.opens.iter().any(|(other, o)| {
        *other != id && o.share == share && o.node != node_id && files.is_within(o.node, node_id)
    });
    if open_below {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // What watches hear (smbd's notify_rename): within one directory the old and the new
    // name; from one directory to another a removal and an addition.
    let (from, to) = match files.get(node_id) {
        Some(n) if n.parent == dir => (action::RENAMED_OLD_NAME, action::RENAMED_NEW_NAME),
        _ => (action::REMOVED, action::ADDED),
    };
    let old_name = Change::named(files, node_id, from);
    let is_file = files.get(node_id).is_some_and(|n| !n.is_dir());
    let mut replaced = None;
    let existing = files.child(dir, &new_name);
    if let Some(existing) = existing.filter(|e| *e != node_id) {
        if !replace {
            return Err(NtStatus::OBJECT_NAME_COLLISION);
        }
        let node = files.get(existing).ok_or(NtStatus::OBJECT_NAME_COLLISION)?;
        let target_open = ctx
            .state
            .other_opens(&share, existing, None)
            .next()
            .is_some();
        if node.is_dir() || target_open || node.attributes & ATTR_READONLY != 0 {
            return Err(NtStatus::ACCESS_DENIED);
        }
        replaced = Change::named(files, existing, action::REMOVED);
        ctx.files_mut(&share)?.remove(existing);
    }
    let files = ctx.files_mut(&share)?;
    files.rename(node_id, dir, &new_name);
    if let Some(parent) = files.get_mut(dir) {
        let now = filetime_now();
        parent.written = now;
        parent.changed = now;
    }
    let new_name = Change::named(files, node_id, to);
    // smbd adds this for a renamed file (not a directory), after Windows Server 2003.
    let w2k3_extra = is_file
        .then(|| Change::modified(files, node_id, kind::ATTRIBUTES | kind::CREATION))
        .flatten();
    ctx.state
        .report_changes(&share, &[replaced, old_name, new_name, w2k3_extra]);
    Ok(())
}
