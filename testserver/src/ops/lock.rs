//! LOCK (MS-SMB2 3.3.5.14; MS-FSA 2.1.5.7): byte-range locks, shared or exclusive, that
//! conflict with overlapping locks of other opens and with an exclusive one of the same open.

use bytes::{BufMut, BytesMut};
use smb3_proto::NtStatus;

use super::Ctx;
use crate::state::ByteRange;
use crate::wire::{Fields, Handled, Reply};

const SHARED: u32 = 0x01;
const EXCLUSIVE: u32 = 0x02;
const UNLOCK: u32 = 0x04;

/// STATUS_RANGE_NOT_LOCKED: an unlock of a range this open does not hold.
const RANGE_NOT_LOCKED: NtStatus = NtStatus(0xC000_007E);

/// STATUS_INVALID_LOCK_RANGE: a range that runs past the end of the 64-bit file space.
const INVALID_LOCK_RANGE: NtStatus = NtStatus(0xC000_01A1);

pub(crate) fn lock(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(48)?;
    let count = f.u16()? as usize;
    f.skip(4 + 16)?;
    if count == 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut elements = Vec::with_capacity(count);
    for _ in 0..count {
        let offset = f.u64()?;
        let length = f.u64()?;
        let flags = f.u32()?;
        f.skip(4)?;
        elements.push((offset, length, flags));
    }
    let id = ctx.open_at(8)?;
    // Every element is applied or none: a conflict part way undoes what came before.
    let before = ctx.open(id)?.locks.clone();
    for (offset, length, flags) in elements {
        let result = if flags & UNLOCK != 0 {
            unlock(ctx, id, offset, length)
        } else {
            let exclusive = match flags & (SHARED | EXCLUSIVE) {
                SHARED => false,
                EXCLUSIVE => true,
                _ => return Err(NtStatus::INVALID_PARAMETER),
            };
            take(
                ctx,
                id,
                ByteRange {
                    offset,
                    length,
                    exclusive,
                },
            )
        };
        if let Err(status) = result {
            ctx.open_mut(id)?.locks = before;
            return Err(status);
        }
    }
    let mut body = BytesMut::new();
    body.put_u16_le(4);
    body.put_u16_le(0);
    Ok(Reply::ok(body))
}

fn unlock(ctx: &mut Ctx<'_>, id: u64, offset: u64, length: u64) -> Result<(), NtStatus> {
    let locks = &mut ctx.open_mut(id)?.locks;
    let i = locks
        .iter()
        .position(|l| l.offset == offset && l.length == length)
        .ok_or(RANGE_NOT_LOCKED)?;
    locks.remove(i);
    Ok(())
}

fn take(ctx: &mut Ctx<'_>, id: u64, range: ByteRange) -> Result<(), NtStatus> {
    if range.length > 0 && range.offset.checked_add(range.length - 1).is_none() {
        return Err(INVALID_LOCK_RANGE);
    }
    let open = ctx.open(id)?;
    let overlapping = |l: &&ByteRange| l.overlaps(range.offset, range.length);
    // MS-FSA 2.1.5.7: an exclusive lock conflicts with any overlapping lock, this open's
    // included; a shared one only with another open's exclusive lock.
    let conflict = if range.exclusive {
        ctx.state
            .other_opens(&open.share, open.node, None)
            .flat_map(|(_, o)| o.locks.iter())
            .any(|l| overlapping(&l))
    } else {
        ctx.state
            .other_opens(&open.share, open.node, Some(id))
            .flat_map(|(_, o)| o.locks.iter())
            .any(|l| l.exclusive && overlapping(&l))
    };
    // A request that cannot be granted now fails at once; the server does not hold it until
    // the range is released.
    if conflict {
        return Err(NtStatus::LOCK_NOT_GRANTED);
    }
    ctx.open_mut(id)?.locks.push(range);
    Ok(())
}
