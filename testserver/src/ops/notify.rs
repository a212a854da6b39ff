//! CHANGE_NOTIFY (MS-SMB2 3.3.5.19) and CANCEL (3.3.5.16): the requests that arm a watch on an
//! open directory and wait on it, and the cancelling of one that waits. The watches
//! themselves, and the changes reported to them, are in [`crate::watches`].

use smb3_proto::{Header, HeaderFlags, NtStatus};

use super::Ctx;
use crate::files::Node;
use crate::reply::{frame_replies, AsyncRequest, Built, Outcome};
use crate::state::{access, State};
use crate::watches::{kind, Arming, Waiting};
use crate::wire::{Fields, Handled, Reply};

/// SMB2_WATCH_TREE (MS-SMB2 2.2.35 Flags): subdirectories are watched too.
const WATCH_TREE: u16 = 0x0001;

/// CHANGE_NOTIFY: answered at once when the watch holds changes, otherwise held, async.
pub(crate) fn change_notify(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(32)?;
    let flags = f.u16()?;
    let output_len = f.u32()?;
    f.skip(16)?; // FileId, read by `open_at`
    let filter = f.u32()?;
    let id = ctx.open_at(8)?;
    if output_len > ctx.config.max_io {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let output_len = output_len as usize;
    if filter == 0 || filter & !kind::VALID != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let open = ctx.open(id)?;
    let (share, dir, rights) = (open.share.clone(), open.node, open.rights);
    if !ctx.files(&share)?.get(dir).is_some_and(Node::is_dir) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // FILE_LIST_DIRECTORY is FILE_READ_DATA's bit, folded into the READ right.
    if rights & access::READ == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let arming = Arming {
        share,
        dir,
        filter,
        subtree: flags & WATCH_TREE != 0,
        capacity: output_len,
    };
    let watch = ctx.state.watches.arm(id, arming);
    if watch.has_news() {
        let (status, body) = watch.take_answer(output_len);
        return Ok(Reply::with_status(status, body));
    }
    // Going async (MS-SMB2 3.3.4.2). The interim response is queued on the connection here,
    // under the state lock, rather than sent with the frame's replies: a change another
    // connection makes as soon as the lock is released queues the final response behind it,
    // so the client never sees the final response first.
    let request = AsyncRequest::of(ctx.header, ctx.state.watches.new_async_id());
    let outbox = ctx
        .state
        .outboxes
        .get(&ctx.conn)
        .ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;
    let interim = Built::new(request.interim(), ctx.protection.sign_with());
    let frame = frame_replies(vec![interim], ctx.protection.sealing.as_deref())
        .ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;
    let _ = outbox.send(Outcome::Send(frame));
    if let Some(watch) = ctx.state.watches.get_mut(id) {
        watch.wait(Waiting {
            request,
            conn: ctx.conn,
            output_len,
            protection: ctx.protection.clone(),
        });
    }
    Ok(Reply::sent_apart())
}

/// CANCEL of a request that came on connection `conn`: in the async form it names the request
/// by AsyncId, otherwise by MessageId (MS-SMB2 3.3.5.16). Only a waiting CHANGE_NOTIFY can be
/// cancelled here; every other request is answered before the next is read.
pub(crate) fn cancel(state: &mut State, conn: u64, cancel: &Header) {
    let by_async_id = cancel.flags.has(HeaderFlags::ASYNC_COMMAND);
    let names = |r: &AsyncRequest| {
        if by_async_id {
            r.async_id == cancel.async_id
        } else {
            r.message_id == cancel.message_id
        }
    };
    state.watches.cancel(conn, names, &state.outboxes);
}
