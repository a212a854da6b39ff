//! CREATE and CLOSE (MS-SMB2 3.3.5.9, 3.3.5.10; the file system side after MS-FSA 2.1.5.1).

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use smb3_proto::NtStatus;

use super::lease::{self, LeaseRequest};
use super::{name_at, Ctx};
use crate::files::{components, Node, NodeId, ATTR_READONLY};
use crate::state::{access, caching, share_access, Durability, LeaseId, Open, State};
use crate::watches::{kind, Change};
use crate::wire::{body_offset, pad, slice_at, Fields, Handled, Reply};

const FILE_DIRECTORY_FILE: u32 = 0x0000_0001;
const FILE_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;
const FILE_OPEN_BY_FILE_ID: u32 = 0x0000_2000;

const SUPERSEDE: u32 = 0;
const OPEN: u32 = 1;
const CREATE: u32 = 2;
const OPEN_IF: u32 = 3;
const OVERWRITE: u32 = 4;
const OVERWRITE_IF: u32 = 5;

const SUPERSEDED: u32 = 0;
const OPENED: u32 = 1;
const CREATED: u32 = 2;
const OVERWRITTEN: u32 = 3;

/// SMB2_OPLOCK_LEVEL_LEASE: the reply carries a lease context.
const OPLOCK_LEVEL_LEASE: u8 = 0xFF;

/// Every right: what MxAc reports, the account having full control.
const MAXIMAL_ACCESS: u32 = 0x001F_01FF;

/// CLOSE's SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB.
const POSTQUERY_ATTRIB: u16 = 0x0001;

/// A create context: its name (`MxAc`, `RqLs`, ...) and its data.
type CreateContext = (Vec<u8>, Vec<u8>);

struct Request {
    desired_access: u32,
    attributes: u32,
    share_access: u32,
    disposition: u32,
    options: u32,
    name: String,
    contexts: Vec<CreateContext>,
}

fn parse(msg: &[u8]) -> Result<Request, NtStatus> {
    let mut f = Fields::body(msg);
    f.structure_size(57)?;
    f.skip(1 + 1 + 4 + 8 + 8)?;
    let desired_access = f.u32()?;
    let attributes = f.u32()?;
    let share_access = f.u32()?;
    let disposition = f.u32()?;
    let options = f.u32()?;
    let name_offset = f.u16()? as usize;
    let name_len = f.u16()? as usize;
    let contexts_offset = f.u32()? as usize;
    let contexts_len = f.u32()? as usize;
    let name = name_at(msg, name_offset, name_len)?;
    let contexts = parse_contexts(slice_at(msg, contexts_offset, contexts_len)?)?;
    Ok(Request {
        desired_access,
        attributes,
        share_access,
        disposition,
        options,
        name,
        contexts,
    })
}

/// The name a CREATE request carries (for fault matching).
pub(crate) fn request_name(msg: &[u8]) -> Result<String, NtStatus> {
    parse(msg).map(|r| r.name)
}

/// SMB2_CREATE_CONTEXT chain (MS-SMB2 2.2.13.2): (name, data) pairs.
fn parse_contexts(chain: &[u8]) -> Result<Vec<CreateContext>, NtStatus> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < chain.len() {
        let ctx = &chain[at..];
        let head = ctx.get(..16).ok_or(NtStatus::INVALID_PARAMETER)?;
        let next = u32::from_le_bytes(head[0..4].try_into().unwrap_or_default()) as usize;
        let name_offset = u16::from_le_bytes([head[4], head[5]]) as usize;
        let name_len = u16::from_le_bytes([head[6], head[7]]) as usize;
        let data_offset = u16::from_le_bytes([head[10], head[11]]) as usize;
        let data_len = u32::from_le_bytes(head[12..16].try_into().unwrap_or_default()) as usize;
        let name = slice_at(ctx, name_offset, name_len)?.to_vec();
        let data = slice_at(ctx, data_offset, data_len)?.to_vec();
        out.push((name, data));
        if next == 0 {
            break;
        }
        if next % 8 != 0 || next < 16 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        at += next;
    }
    Ok(out)
}

/// Whether an open with `rights` and `share` can coexist with `other` (MS-FSA 2.1.5.1.2,
/// the share mode check).
fn compatible(rights: u32, share: u32, other: &Open) -> bool {
    let conflict =
        |right: u32, share_bit: u32, r: u32, s: u32| r & right != 0 && s & share_bit == 0;
    let pairs = [
        (access::READ, share_access::READ),
        (access::WRITE, share_access::WRITE),
        (access::DELETE, share_access::DELETE),
    ];
    !pairs.iter().any(|(right, bit)| {
        conflict(*right, *bit, rights, other.share_access)
            || conflict(*right, *bit, other.rights, share)
    })
}

/// What the request's create contexts ask for.
#[derive(Default)]
struct Asked {
    maximal_access: bool,
    disk_id: bool,
    lease: Option<LeaseRequest>,
    /// DH2Q: the timeout asked for (ms) and the CreateGuid.
    durable: Option<(u32, [u8; 16])>,
    /// DH2C: the FileId.Persistent and CreateGuid of the open to reclaim.
    reconnect: Option<(u64, [u8; 16])>,
}

fn asked(contexts: &[CreateContext]) -> Result<Asked, NtStatus> {
    let mut a = Asked::default();
    for (name, data) in contexts {
        match name.as_slice() {
            b"MxAc" => a.maximal_access = true,
            b"QFid" => a.disk_id = true,
            b"RqLs" => a.lease = Some(LeaseRequest::parse(data)?),
            // Timeout, Flags, Reserved, CreateGuid (MS-SMB2 2.2.13.2.11).
            b"DH2Q" if data.len() == 32 => {
                let timeout = u32::from_le_bytes(data[..4].try_into().unwrap_or_default());
                let guid = data[16..32].try_into().unwrap_or_default();
                a.durable = Some((timeout, guid));
            }
            // FileId, CreateGuid, Flags (MS-SMB2 2.2.13.2.12).
            b"DH2C" if data.len() == 36 => {
                let persistent = u64::from_le_bytes(data[..8].try_into().unwrap_or_default());
                let guid = data[16..32].try_into().unwrap_or_default();
                a.reconnect = Some((persistent, guid));
            }
            b"DH2Q" | b"DH2C" => return Err(NtStatus::INVALID_PARAMETER),
            // Version 1 durable handles are not offered: nothing to reconnect to.
            b"DHnC" => return Err(NtStatus::OBJECT_NAME_NOT_FOUND),
            // A previous version (snapshot): none exist.
            b"TWrp" => return Err(NtStatus::OBJECT_NAME_NOT_FOUND),
            _ => {}
        }
    }
    Ok(a)
}

pub(crate) fn create(ctx: &mut Ctx<'_>) -> Handled {
    let share = ctx.share()?;
    let req = parse(ctx.msg)?;
    if req.options & FILE_OPEN_BY_FILE_ID != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if req.options & FILE_DIRECTORY_FILE != 0 && req.options & FILE_NON_DIRECTORY_FILE != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if req.disposition > OVERWRITE_IF {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let asked = asked(&req.contexts)?;
    let client = ctx.negotiated.map(|n| n.client_guid).unwrap_or_default();
    ctx.state.expire_durable();
    // A reclaim after a lost connection, or a CREATE sent again after one: the open the
    // first attempt made is answered (MS-SMB2 3.3.5.9.7, 3.3.5.9.10).
    let earlier = match (asked.reconnect, asked.durable) {
        (Some((persistent, guid)), _) => Some(
            durable_open(ctx, client, guid, Some(persistent))
                .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?,
        ),
        (None, Some((_, guid))) => {
            durable_open(ctx, client, guid, None).or_else(|| replayed_open(ctx, guid))
        }
        _ => None,
    };
    if let Some(volatile) = earlier {
        return reclaimed(ctx, volatile, &asked);
    }
    let rights = access::rights(req.desired_access);
    let delete_on_close = req.options & FILE_DELETE_ON_CLOSE != 0;
    if delete_on_close && rights & access::DELETE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let path = req.name.clone();
    let parts = components(&path)?;
    let files = ctx.files(&share)?;
    let (node, action) = match files.lookup(&parts) {
        Ok(id) => {
            let node = files.get(id).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
            let action = open_existing(&req, node, rights, delete_on_close)?;
            let clash = ctx
                .state
                .other_opens(&share, id, None)
                .any(|(_, o)| !compatible(rights, req.share_access, o));
            if clash {
                return Err(NtStatus::SHARING_VIOLATION);
            }
            if matches!(action, SUPERSEDED | OVERWRITTEN) {
                let node = ctx
                    .files_mut(&share)?
                    .get_mut(id)
                    .ok_or(NtStatus::FILE_CLOSED)?;
                let (old_size, old_attributes) = (node.size(), node.attributes);
                node.content = crate::files::Content::File(Vec::new());
                node.touch_data();
                if req.attributes != 0 {
                    node.attributes = req.attributes & !crate::files::ATTR_NORMAL;
                }
                let mut kinds = kind::LAST_WRITE;
                if old_size != 0 {
                    kinds |= kind::SIZE;
                }
                if node.attributes != old_attributes {
                    kinds |= kind::ATTRIBUTES;
                }
                let overwritten = Change::modified(ctx.files(&share)?, id, kinds);
                ctx.state.report_changes(&share, &[overwritten]);
            }
            (id, action)
        }
        Err(NtStatus::OBJECT_NAME_NOT_FOUND) => {
            if matches!(req.disposition, OPEN | OVERWRITE) {
                return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
            }
            let dir = files.parent_of(&parts)?;
            if files.get(dir).is_some_and(|d| d.delete_pending) {
                return Err(NtStatus::DELETE_PENDING);
            }
            let Some(name) = parts.last() else {
                return Err(NtStatus::OBJECT_NAME_COLLISION);
            };
            let is_dir = req.options & FILE_DIRECTORY_FILE != 0;
            let id = ctx
                .files_mut(&share)?
                .create(dir, name, is_dir, req.attributes);
            let added = Change::named(ctx.files(&share)?, id, crate::watches::action::ADDED);
            ctx.state.report_changes(&share, &[added]);
            (id, CREATED)
        }
        Err(status) => return Err(status),
    };
    let is_file = ctx.files(&share)?.get(node).is_some_and(|n| !n.is_dir());
    // Leases on files only: directory leasing is not offered.
    let lease = match asked.lease.filter(|_| is_file) {
        Some(l) => {
            let (state, epoch) =
                lease::grant(ctx.state, (client, l.key), &share, node, &l, ctx.conn)?;
            Some((l, state, epoch))
        }
        None => None,
    };
    // Durable only with Handle caching (MS-SMB2 3.3.5.9.10), and never delete-on-close.
    let durable = match (asked.durable, &lease) {
        (Some((timeout_ms, guid)), Some((_, state, _)))
            if state & caching::HANDLE != 0 && !delete_on_close =>
        {
            let timeout = match timeout_ms {
                0 => ctx.config.durable_timeout,
                ms => Duration::from_millis(u64::from(ms)).min(ctx.config.durable_timeout),
            };
            Some(Durability {
                create_guid: guid,
                client_guid: client,
                timeout,
                orphaned_at: None,
            })
        }
        _ => None,
    };
    let volatile = ctx.state.new_open_id();
    ctx.state.opens.insert(
        volatile,
        Open {
            session: ctx.header.session_id,
            tree: ctx.header.tree_id,
            share: share.clone(),
            node,
            rights,
            share_access: req.share_access,
            delete_on_close,
            enumeration: None,
            locks: Vec::new(),
            lease: lease.map(|(l, _, _)| (client, l.key)),
            durable,
            create_guid: asked.durable.map(|(_, guid)| guid),
        },
    );
    ctx.previous.file = Some(Ok(volatile));
    let mut contexts = Vec::new();
    if let Some((l, state, epoch)) = &lease {
        contexts.push((&b"RqLs"[..], lease::reply_context(l, *state, *epoch)));
    }
    if let Some(d) = &durable {
        let mut data = BytesMut::new();
        data.put_u32_le(d.timeout.as_millis() as u32);
        data.put_u32_le(0);
        contexts.push((&b"DH2Q"[..], data));
    }
    reply(
        ctx,
        &share,
        node,
        action,
        volatile,
        lease.is_some(),
        &asked,
        contexts,
    )
}

/// The durable open `client` made with CreateGuid `guid` (and, for a reclaim, FileId
/// `persistent`), when it waits to be reclaimed or is this session's.
fn durable_open(
    ctx: &Ctx<'_>,
    client: [u8; 16],
    guid: [u8; 16],
    persistent: Option<u64>,
) -> Option<u64> {
    ctx.state.opens.iter().find_map(|(id, o)| {
        let d = o.durable?;
        let ours = o.session == 0 || o.session == ctx.header.session_id;
        (d.create_guid == guid
            && d.client_guid == client
            && ours
            && persistent.is_none_or(|p| p == *id))
        .then_some(*id)
    })
}

/// For a CREATE sent again after a lost connection (SMB2_FLAGS_REPLAY_OPERATION), the open
/// this session's first attempt made with the same CreateGuid and still holds, durable or
/// not.
fn replayed_open(ctx: &Ctx<'_>, guid: [u8; 16]) -> Option<u64> {
    if ctx.header.flags.0 & smb3_proto::HeaderFlags::REPLAY_OPERATION == 0 {
        return None;
    }
    ctx.state.opens.iter().find_map(|(id, o)| {
        (o.create_guid == Some(guid) && o.session == ctx.header.session_id).then_some(*id)
    })
}

/// Answer with an open made earlier (reclaimed or replayed), now this session's.
fn reclaimed(ctx: &mut Ctx<'_>, volatile: u64, asked: &Asked) -> Handled {
    let share = ctx.share()?;
    let (session, tree, conn) = (ctx.header.session_id, ctx.header.tree_id, ctx.conn);
    let open = ctx.open_mut(volatile)?;
    if open.share != share {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    open.session = session;
    open.tree = tree;
    if let Some(d) = open.durable.as_mut() {
        d.orphaned_at = None;
    }
    let (node, lease_id) = (open.node, open.lease);
    ctx.previous.file = Some(Ok(volatile));
    let mut contexts = Vec::new();
    let mut leased = false;
    if let (Some(id), Some(l)) = (lease_id, asked.lease) {
        if let Some(lease) = ctx.state.leases.get_mut(&id) {
            lease.conn = conn;
            contexts.push((
                &b"RqLs"[..],
                lease::reply_context(&l, lease.state, lease.epoch),
            ));
            leased = true;
        }
    }
    reply(ctx, &share, node, OPENED, volatile, leased, asked, contexts)
}

/// The CREATE reply (MS-SMB2 2.2.14) for open `volatile` of `node`.
#[allow(clippy::too_many_arguments)]
fn reply(
    ctx: &Ctx<'_>,
    share: &str,
    node: NodeId,
    action: u32,
    volatile: u64,
    leased: bool,
    asked: &Asked,
    mut contexts: Vec<(&[u8], BytesMut)>,
) -> Handled {
    let node = ctx.files(share)?.get(node).ok_or(NtStatus::FILE_CLOSED)?;
    let mut body = BytesMut::new();
    body.put_u16_le(89);
    body.put_u8(if leased { OPLOCK_LEVEL_LEASE } else { 0 });
    body.put_u8(0);
    body.put_u32_le(action);
    put_times_and_sizes(&mut body, node);
    body.put_u32_le(node.wire_attributes());
    body.put_u32_le(0);
    body.put_u64_le(volatile);
    body.put_u64_le(volatile);
    if asked.maximal_access {
        let mut d = BytesMut::new();
        d.put_u32_le(0);
        d.put_u32_le(MAXIMAL_ACCESS);
        contexts.push((b"MxAc", d));
    }
    if asked.disk_id {
        let mut d = BytesMut::new();
        d.put_u64_le(node.id);
        d.put_u64_le(0x5e57_5e57); // VolumeId: any fixed number
        d.put_slice(&[0; 16]);
        contexts.push((b"QFid", d));
    }
    put_contexts(&mut body, contexts);
    Ok(Reply::ok(body))
}

/// The leases of other clients a CREATE breaks before it runs: Write caching always, Read
/// caching when it overwrites, Handle caching when it conflicts with their opens' share
/// modes (their holder may close cached handles; MS-FSA 2.1.5.1.2). Returns those to wait for.
pub(crate) fn breaks_before(
    state: &mut State,
    tree: u32,
    msg: &[u8],
    client: [u8; 16],
) -> Vec<LeaseId> {
    let Ok(req) = parse(msg) else {
        return Vec::new();
    };
    let Some(share) = state.trees.get(&tree).map(|t| t.share.clone()) else {
        return Vec::new();
    };
    let node = match (state.shares.get(&share), components(&req.name)) {
        (Some(files), Ok(parts)) => match files.lookup(&parts) {
            Ok(node) => node,
            Err(_) => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let mine = asked(&req.contexts)
        .ok()
        .and_then(|a| a.lease)
        .map(|l| (client, l.key));
    let rights = access::rights(req.desired_access);
    let overwrite = matches!(req.disposition, SUPERSEDE | OVERWRITE | OVERWRITE_IF);
    let in_conflict: Vec<LeaseId> = state
        .other_opens(&share, node, None)
        .filter(|(_, o)| !compatible(rights, req.share_access, o))
        .filter_map(|(_, o)| o.lease)
        .collect();
    lease::break_others(state, mine, &share, node, |id, _| {
        let mut drop = caching::WRITE;
        if overwrite {
            drop |= caching::READ;
        }
        if in_conflict.contains(id) {
            drop |= caching::HANDLE;
        }
        drop
    })
}

/// The checks and the action for opening a file or directory that exists.
fn open_existing(
    req: &Request,
    node: &Node,
    rights: u32,
    delete_on_close: bool,
) -> Result<u32, NtStatus> {
    if node.delete_pending {
        return Err(NtStatus::DELETE_PENDING);
    }
    if req.options & FILE_DIRECTORY_FILE != 0 && !node.is_dir() {
        return Err(NtStatus::NOT_A_DIRECTORY);
    }
    if req.options & FILE_NON_DIRECTORY_FILE != 0 && node.is_dir() {
        return Err(NtStatus::FILE_IS_A_DIRECTORY);
    }
    let readonly = node.attributes & ATTR_READONLY != 0;
    if readonly && delete_on_close {
        return Err(NtStatus::CANNOT_DELETE);
    }
    if readonly && rights & access::WRITE != 0 && !node.is_dir() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if delete_on_close && node.children().is_some_and(|c| !c.is_empty()) {
        return Err(NtStatus::DIRECTORY_NOT_EMPTY);
    }
    match req.disposition {
        CREATE => Err(NtStatus::OBJECT_NAME_COLLISION),
        OPEN | OPEN_IF => Ok(OPENED),
        SUPERSEDE | OVERWRITE | OVERWRITE_IF => {
            if node.is_dir() {
                Err(NtStatus::INVALID_PARAMETER)
            } else if readonly {
                Err(NtStatus::ACCESS_DENIED)
            } else if req.disposition == SUPERSEDE {
                Ok(SUPERSEDED)
            } else {
                Ok(OVERWRITTEN)
            }
        }
        _ => Err(NtStatus::INVALID_PARAMETER),
    }
}

/// CreationTime, LastAccessTime, LastWriteTime, ChangeTime, AllocationSize, EndOfFile: the
/// order CREATE and CLOSE replies and FILE_NETWORK_OPEN_INFORMATION share.
pub(crate) fn put_times_and_sizes(body: &mut BytesMut, node: &Node) {
    body.put_u64_le(node.created);
    body.put_u64_le(node.accessed);
    body.put_u64_le(node.written);
    body.put_u64_le(node.changed);
    body.put_u64_le(node.allocation());
    body.put_u64_le(node.size());
}

/// Append create contexts to a CREATE reply body whose fixed part ends with the
/// CreateContextsOffset and CreateContextsLength fields.
fn put_contexts(body: &mut BytesMut, contexts: Vec<(&[u8], BytesMut)>) {
    let fields_at = body.len();
    body.put_u32_le(0);
    body.put_u32_le(0);
    if contexts.is_empty() {
        body.put_u8(0);
        return;
    }
    let start = body.len();
    let count = contexts.len();
    for (i, (name, data)) in contexts.into_iter().enumerate() {
        let ctx_start = body.len();
        body.put_u32_le(0); // Next, set below
        body.put_u16_le(16);
        body.put_u16_le(name.len() as u16);
        body.put_u16_le(0);
        body.put_u16_le(24);
        body.put_u32_le(data.len() as u32);
        body.put_slice(name);
        pad(body, 8);
        body.put_slice(&data);
        if i + 1 < count {
            pad(body, 8);
            let next = (body.len() - ctx_start) as u32;
            body[ctx_start..ctx_start + 4].copy_from_slice(&next.to_le_bytes());
        }
    }
    let offset = u32::from(body_offset(start));
    let length = (body.len() - start) as u32;
    body[fields_at..fields_at + 4].copy_from_slice(&offset.to_le_bytes());
    body[fields_at + 4..fields_at + 8].copy_from_slice(&length.to_le_bytes());
}

pub(crate) fn close(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(24)?;
    let flags = f.u16()?;
    let id = ctx.open_at(8)?;
    let open = ctx.open(id)?;
    let share = open.share.clone();
    let node_id: NodeId = open.node;
    let mut body = BytesMut::new();
    body.put_u16_le(60);
    body.put_u16_le(flags & POSTQUERY_ATTRIB);
    body.put_u32_le(0);
    match ctx.files(&share)?.get(node_id) {
        Some(node) if flags & POSTQUERY_ATTRIB != 0 => {
            put_times_and_sizes(&mut body, node);
            body.put_u32_le(node.wire_attributes());
        }
        _ => body.put_slice(&[0; 52]),
    }
    ctx.state.close_open(id);
    Ok(Reply::ok(body))
}
