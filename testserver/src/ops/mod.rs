//! The handlers, one module per group of commands. Each takes a [`Ctx`] (the server state,
//! under its lock, and the request) and returns a reply body or a status.

pub(crate) mod create;
pub(crate) mod dir;
pub(crate) mod info;
pub(crate) mod io;
pub(crate) mod ioctl;
pub(crate) mod lease;
pub(crate) mod lock;
pub(crate) mod negotiate;
pub(crate) mod notify;
pub(crate) mod session;
pub(crate) mod tree;

use smb3_proto::header::HEADER_LEN;
use smb3_proto::{Command, Header, NtStatus};

use crate::connection::Negotiated;
use crate::files::Files;
use crate::protection::Protection;
use crate::state::{bad_tree, caching, LeaseId, Open, State};
use crate::wire::{slice_at, utf16};
use crate::ServerConfig;

/// FileId { Persistent, Volatile } all ones: "the FileId of the previous request" in a
/// related compound (MS-SMB2 3.2.4.1.4).
const ANY_FILE_ID: (u64, u64) = (u64::MAX, u64::MAX);

/// The ids a related compound request takes from the one before it (MS-SMB2 3.3.5.2.7.2).
#[derive(Default)]
pub(crate) struct Previous {
    pub(crate) session_id: u64,
    pub(crate) tree_id: u32,
    /// The FileId the previous request used or made, or the error it failed with.
    pub(crate) file: Option<Result<u64, NtStatus>>,
}

pub(crate) struct Ctx<'a> {
    pub(crate) state: &'a mut State,
    pub(crate) config: &'a ServerConfig,
    pub(crate) server_guid: [u8; 16],
    /// The connection the request came on.
    pub(crate) conn: u64,
    pub(crate) negotiated: Option<&'a Negotiated>,
    pub(crate) header: &'a Header,
    pub(crate) msg: &'a [u8],
    pub(crate) previous: &'a mut Previous,
    /// How the request's replies are signed and sealed, for one answered later.
    pub(crate) protection: &'a Protection,
}

impl Ctx<'_> {
    /// The share key of the request's tree, which must be this session's.
    pub(crate) fn share(&self) -> Result<String, NtStatus> {
        match self.state.trees.get(&self.header.tree_id) {
            Some(t) if t.session == self.header.session_id => Ok(t.share.clone()),
            _ => Err(bad_tree()),
        }
    }

    /// The open named by the FileId at `body_offset` of the request body: one of this
    /// session's on this tree, or the previous compound request's (MS-SMB2 3.3.5.2.7.2).
    pub(crate) fn open_at(&mut self, body_offset: usize) -> Result<u64, NtStatus> {
        let id = file_id_at(self.msg, body_offset)?;
        let volatile = if id == ANY_FILE_ID {
            match self.previous.file {
                Some(Ok(v)) => v,
                Some(Err(status)) => return Err(status),
                None => return Err(NtStatus::INVALID_PARAMETER),
            }
        } else {
            if id.0 != id.1 {
                return Err(NtStatus::FILE_CLOSED);
            }
            id.1
        };
        match self.state.opens.get(&volatile) {
            Some(o) if o.session == self.header.session_id && o.tree == self.header.tree_id => {
                self.previous.file = Some(Ok(volatile));
                Ok(volatile)
            }
            _ => Err(NtStatus::FILE_CLOSED),
        }
    }

    pub(crate) fn open(&self, id: u64) -> Result<&Open, NtStatus> {
        self.state.opens.get(&id).ok_or(NtStatus::FILE_CLOSED)
    }

    pub(crate) fn open_mut(&mut self, id: u64) -> Result<&mut Open, NtStatus> {
        self.state.opens.get_mut(&id).ok_or(NtStatus::FILE_CLOSED)
    }

    pub(crate) fn files(&self, share: &str) -> Result<&Files, NtStatus> {
        self.state.shares.get(share).ok_or_else(bad_tree)
    }

    pub(crate) fn files_mut(&mut self, share: &str) -> Result<&mut Files, NtStatus> {
        self.state.shares.get_mut(share).ok_or_else(bad_tree)
    }
}

/// The FileId at `body_offset` of the body of `msg`.
fn file_id_at(msg: &[u8], body_offset: usize) -> Result<(u64, u64), NtStatus> {
    let at = HEADER_LEN + body_offset;
    let bytes = slice_at(msg, at, 16)?;
    let persistent = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
    let volatile = u64::from_le_bytes(bytes[8..].try_into().unwrap_or_default());
    Ok((persistent, volatile))
}

/// Where each command that works on an open carries its FileId, from the body's start.
fn file_id_offset(command: Command) -> Option<usize> {
    Some(match command {
        Command::CLOSE
        | Command::FLUSH
        | Command::LOCK
        | Command::IOCTL
        | Command::QUERY_DIRECTORY
        | Command::CHANGE_NOTIFY
        | Command::OPLOCK_BREAK => 8,
        Command::READ | Command::WRITE | Command::SET_INFO => 16,
        Command::QUERY_INFO => 24,
        _ => return None,
    })
}

/// The path a request is about, for matching planned faults: a CREATE's name, or the path of
/// the open the request works on.
pub(crate) fn request_path(
    state: &State,
    header: &Header,
    msg: &[u8],
    previous: &Previous,
) -> Option<String> {
    if header.command == Command::CREATE {
        return create::request_name(msg).ok();
    }
    let open = open_of(state, header, msg, previous)?;
    Some(state.shares.get(&open.share)?.path_of(open.node))
}

/// The open a request works on, by the FileId it carries or the previous request's.
fn open_of<'s>(
    state: &'s State,
    header: &Header,
    msg: &[u8],
    previous: &Previous,
) -> Option<&'s Open> {
    let id = file_id_at(msg, file_id_offset(header.command)?).ok()?;
    let volatile = if id == ANY_FILE_ID {
        previous.file.and_then(Result::ok)?
    } else {
        id.1
    };
    state.opens.get(&volatile)
}

/// The open a request works on: its share, node and lease.
fn target_of(
    state: &State,
    header: &Header,
    msg: &[u8],
    previous: &Previous,
) -> Option<(String, crate::files::NodeId, Option<LeaseId>)> {
    let open = open_of(state, header, msg, previous)?;
    Some((open.share.clone(), open.node, open.lease))
}

/// Break the leases of other clients that a request conflicts with, before it runs (see
/// [`lease`]); returns the leases whose acknowledgment it waits for.
pub(crate) fn breaks_before(
    state: &mut State,
    header: &Header,
    msg: &[u8],
    previous: &Previous,
    client: Option<[u8; 16]>,
) -> Vec<LeaseId> {
    if state.leases.is_empty() {
        return Vec::new();
    }
    match header.command {
        Command::CREATE => match client {
            Some(client) => create::breaks_before(state, header.tree_id, msg, client),
            None => Vec::new(),
        },
        // A rename or delete by one client takes Handle caching from the others first.
        Command::SET_INFO if info::renames_or_deletes(msg) => {
            let Some((share, node, mine)) = target_of(state, header, msg, previous) else {
                return Vec::new();
            };
            let mut wait = lease::break_others(state, mine, &share, node, |_, _| caching::HANDLE);
            if let Some(replaced) = info::rename_target(state, &share, msg) {
                wait.extend(lease::break_others(
                    state,
                    mine,
                    &share,
                    replaced,
                    |_, _| caching::HANDLE,
                ));
            }
            wait
        }
        // A write takes Read caching from the others; it does not wait for them.
        Command::WRITE => {
            if let Some((share, node, mine)) = target_of(state, header, msg, previous) {
                lease::break_others(state, mine, &share, node, |_, _| {
                    caching::READ | caching::WRITE
                });
            }
            Vec::new()
        }
        _ => Vec::new(),
    }
}

/// A name from a request's buffer: UTF-16LE at `offset` (from the header), `len` bytes.
pub(crate) fn name_at(msg: &[u8], offset: usize, len: usize) -> Result<String, NtStatus> {
    utf16(slice_at(msg, offset, len)?)
}
