//! READ, WRITE and FLUSH (MS-SMB2 3.3.5.12, 3.3.5.13, 3.3.5.11), with byte-range locks held
//! by other opens enforced as Windows does (MS-FSA 2.1.5.2, 2.1.5.3).

use bytes::{BufMut, BytesMut};
use smb3_proto::NtStatus;

use super::Ctx;
use crate::files::{Content, MAX_FILE_SIZE};
use crate::state::access;
use crate::watches::{kind, Change};
use crate::wire::{slice_at, Fields, Handled, Reply};

/// Whether another open of the same file holds a lock over the range that forbids this
/// access: any lock forbids writing, an exclusive one reading too.
fn locked_by_others(ctx: &Ctx<'_>, id: u64, offset: u64, length: u64, write: bool) -> bool {
    let Ok(open) = ctx.open(id) else {
        return false;
    };
    ctx.state
        .other_opens(&open.share, open.node, Some(id))
        .flat_map(|(_, o)| o.locks.iter())
        .any(|l| (write || l.exclusive) && l.overlaps(offset, length))
}

pub(crate) fn read(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(49)?;
    f.skip(2)?;
    let length = f.u32()?;
    let offset = f.u64()?;
    f.skip(16)?;
    let minimum = f.u32()?;
    let id = ctx.open_at(16)?;
    if length > ctx.config.max_io {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let open = ctx.open(id)?;
    if open.rights & access::READ == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if locked_by_others(ctx, id, offset, u64::from(length), false) {
        return Err(NtStatus::FILE_LOCK_CONFLICT);
    }
    let open = ctx.open(id)?;
    let node = ctx
        .files(&open.share)?
        .get(open.node)
        .ok_or(NtStatus::FILE_CLOSED)?;
    let data = node.data().ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let size = data.len() as u64;
    if offset >= size && length > 0 {
        return Err(NtStatus::END_OF_FILE);
    }
    let end = offset.saturating_add(u64::from(length)).min(size);
    let chunk = &data[offset.min(size) as usize..end as usize];
    if (chunk.len() as u64) < u64::from(minimum) {
        return Err(NtStatus::END_OF_FILE);
    }
    let mut body = BytesMut::with_capacity(16 + chunk.len());
    body.put_u16_le(17);
    body.put_u8(0x50); // DataOffset: right after this 16-byte body
    body.put_u8(0);
    body.put_u32_le(chunk.len() as u32);
    body.put_u32_le(0);
    body.put_u32_le(0);
    body.put_slice(chunk);
    Ok(Reply::ok(body))
}

pub(crate) fn write(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(49)?;
    let data_offset = f.u16()? as usize;
    let length = f.u32()? as usize;
    let offset = f.u64()?;
    let id = ctx.open_at(16)?;
    if length > ctx.config.max_io as usize {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let data = slice_at(ctx.msg, data_offset, length)?;
    let open = ctx.open(id)?;
    if open.rights & access::WRITE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let end = offset
        .checked_add(length as u64)
        .filter(|end| *end <= MAX_FILE_SIZE)
        .ok_or(NtStatus::DISK_FULL)?;
    if locked_by_others(ctx, id, offset, length as u64, true) {
        return Err(NtStatus::FILE_LOCK_CONFLICT);
    }
    let share = open.share.clone();
    let node_id = open.node;
    let node = ctx
        .files_mut(&share)?
        .get_mut(node_id)
        .ok_or(NtStatus::FILE_CLOSED)?;
    let Content::File(bytes) = &mut node.content else {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    };
    let grown = bytes.len() < end as usize;
    if grown {
        bytes.resize(end as usize, 0);
    }
    bytes[offset as usize..end as usize].copy_from_slice(data);
    if length > 0 {
        node.touch_data();
        // A write is LAST_WRITE to a watch, and SIZE too when it made the file longer.
        let kinds = if grown {
            kind::LAST_WRITE | kind::SIZE
        } else {
            kind::LAST_WRITE
        };
        let written = Change::modified(ctx.files(&share)?, node_id, kinds);
        ctx.state.report_changes(&share, &[written]);
    }
    let mut body = BytesMut::with_capacity(16);
    body.put_u16_le(17);
    body.put_u16_le(0);
    body.put_u32_le(length as u32);
    body.put_u32_le(0);
    body.put_u16_le(0);
    body.put_u16_le(0);
    Ok(Reply::ok(body))
}

pub(crate) fn flush(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(24)?;
    ctx.open_at(8)?;
    Ok(Reply::empty(4))
}
