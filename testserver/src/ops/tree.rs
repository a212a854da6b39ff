//! TREE_CONNECT, TREE_DISCONNECT and LOGOFF (MS-SMB2 3.3.5.7, 3.3.5.8, 3.3.5.6).

use bytes::{BufMut, BytesMut};
use smb3_proto::NtStatus;

use super::{name_at, Ctx};
use crate::state::TreeConnect;
use crate::wire::{Fields, Handled, Reply};

const IPC: &str = "ipc$";
const SHARE_TYPE_DISK: u8 = 0x01;
const SHARE_TYPE_PIPE: u8 = 0x02;

/// Every right on every object: the share gives the test account full control.
const FULL_ACCESS: u32 = 0x001F_01FF;

pub(crate) fn connect(ctx: &mut Ctx<'_>) -> Result<(Reply, u32), NtStatus> {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(9)?;
    f.skip(2)?;
    let offset = f.u16()? as usize;
    let len = f.u16()? as usize;
    let path = name_at(ctx.msg, offset, len)?;
    // \\server\share: the server part is whatever name the client used for us.
    let share = path
        .strip_prefix("\\\\")
        .and_then(|rest| rest.split_once('\\'))
        .map(|(_, share)| share.to_lowercase())
        .ok_or(NtStatus::BAD_NETWORK_NAME)?;
    // IPC$ is where clients send the IOCTLs that are about the server rather than a share
    // (the interface list); it has no files.
    let ipc = share == IPC;
    if !ipc && !ctx.state.shares.contains_key(&share) {
        return Err(NtStatus::BAD_NETWORK_NAME);
    }
    let id = ctx.state.new_tree_id();
    ctx.state.trees.insert(
        id,
        TreeConnect {
            session: ctx.header.session_id,
            share,
        },
    );
    let mut body = BytesMut::new();
    body.put_u16_le(16);
    body.put_u8(if ipc {
        SHARE_TYPE_PIPE
    } else {
        SHARE_TYPE_DISK
    });
    body.put_u8(0);
    body.put_u32_le(0); // ShareFlags: no caching policy, no ENCRYPT_DATA
    body.put_u32_le(0); // Capabilities
    body.put_u32_le(FULL_ACCESS);
    Ok((Reply::ok(body), id))
}

pub(crate) fn disconnect(ctx: &mut Ctx<'_>) -> Handled {
    ctx.share()?;
    ctx.state.disconnect_tree(ctx.header.tree_id);
    Ok(Reply::empty(4))
}

pub(crate) fn logoff(ctx: &mut Ctx<'_>) -> Handled {
    // A LOGOFF closes every open, durable ones too (MS-SMB2 3.3.5.6).
    ctx.state.end_session(ctx.header.session_id, false);
    Ok(Reply::empty(4))
}
