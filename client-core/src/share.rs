//! `Share`: a connected tree, and the path operations on it.

use std::sync::Arc;

use rand::RngCore;
use smb3_proto::msg::close::{CloseRequest, CloseResponse};
use smb3_proto::msg::create::{
    AccessMask, CreateContextRequest, CreateDisposition, CreateOptions, CreateRequest,
    CreateResponse, Lease, LeaseState, LeaseV2, OplockLevel,
};
use smb3_proto::msg::fscc::{
    FileAllInformation, FileAttributes, FileDispositionInformation, FileFsFullSizeInformation,
    FileRenameInformation,
};
use smb3_proto::msg::ioctl::{
    IoctlRequest, IoctlResponse, ValidateNegotiateInfoRequest, ValidateNegotiateInfoResponse,
    FSCTL_VALIDATE_NEGOTIATE_INFO,
};
use smb3_proto::msg::query_directory::{QueryDirectoryRequest, QueryDirectoryResponse};
use smb3_proto::msg::query_info::{QueryInfoRequest, QueryInfoResponse};
use smb3_proto::msg::set_info::SetInfoRequest;
use smb3_proto::msg::tree_disconnect::TreeDisconnectRequest;
use smb3_proto::msg::FileId;
use smb3_proto::{Command, NtStatus};

use crate::addressing::Target;
use crate::channel::{Request, Response};
use crate::client::{decode, Client, SessionCore, TreeContext};
use crate::durable::{DurableGrant, FileIdentity, OpenParams, OpenState, ServerHandle};
use crate::error::{Error, ProtocolError, Result};
use crate::file::{File, OpenHolds};
use crate::lease::LeaseRef;
use crate::orphans::{self, ScopedHandle};
use crate::types::{wire_path, DirEntry, FsInfo, Metadata, OpenOptions};
use crate::watch::{DirWatch, WatchFilter};

/// A connected share. Cheap to clone.
///
/// Dropping the future of any operation cancels it: see [`Client`] and the crate
/// documentation, "Cancelling". [`Share::watch`] waits for changes in a directory.
#[derive(Clone)]
pub struct Share {
    pub(crate) inner: Arc<ShareInner>,
}

pub(crate) struct ShareInner {
    pub(crate) client: Client,
    pub(crate) name: String,
    pub(crate) tree: TreeContext,
    #[allow(dead_code)]
    pub(crate) maximal_access: u32,
}

impl Drop for ShareInner {
    fn drop(&mut self) {
        // No share or open uses the tree any more; a reconnect need not connect it again.
        self.client.inner.addressing.trees.remove(self.tree.handle);
    }
}

/// Output buffer per QUERY_DIRECTORY: 64 KiB holds several hundred entries per round trip.
const DIR_BUFFER: u32 = 64 * 1024;

impl Share {
    pub(crate) fn new(
        client: Client,
        name: String,
        tree: TreeContext,
        maximal_access: u32,
    ) -> Share {
        Share {
            inner: Arc::new(ShareInner {
                client,
                name,
                tree,
                maximal_access,
            }),
        }
    }

    /// The share's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The session this share belongs to.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Whether the server requires encryption on this share.
    pub fn is_encrypted(&self) -> bool {
        self.inner.tree.encrypt || self.inner.client.inner.encrypt_all
    }

    /// Open (or create) a file.
    pub async fn open(&self, path: &str, opts: &OpenOptions) -> Result<File> {
        let mut access = 0;
        if opts.read || !opts.write {
            access |= AccessMask::FILE_READ_DATA | AccessMask::FILE_READ_ATTRIBUTES;
        }
        if opts.write {
            access |= AccessMask::FILE_WRITE_DATA
                | AccessMask::FILE_APPEND_DATA
                | AccessMask::FILE_WRITE_ATTRIBUTES
                | AccessMask::FILE_READ_ATTRIBUTES;
        }
        let disposition = match (opts.create_new, opts.create, opts.truncate) {
            (true, _, _) => CreateDisposition::CREATE,
            (false, true, true) => CreateDisposition::OVERWRITE_IF,
            (false, true, false) => CreateDisposition::OPEN_IF,
            (false, false, true) => CreateDisposition::OVERWRITE,
            (false, false, false) => CreateDisposition::OPEN,
        };
        let wire = wire_path(path)?;
        let mut req = CreateRequest::new(wire.clone(), access, disposition);
        req.create_options = CreateOptions(CreateOptions::NON_DIRECTORY_FILE);
        req.file_attributes = FileAttributes(FileAttributes::NORMAL);
        let core = &self.inner.client.inner;
        let (create_guid, lease) = if self.wants_durable() {
            (
                Some(request_durable(&mut req)),
                Some(self.request_lease(&mut req, opts.write)),
            )
        } else {
            (None, None)
        };
        // The on-disk id lets a reconnect whose reclaim is refused recognise the file when
        // it opens it again by path (see `failover::reconnect`).
        req.contexts.push(CreateContextRequest::QueryOnDiskId);
        let created = self.create(&req, path).await?;
        let lease = lease.and_then(|l| keep_granted_lease(l, &created, path));
        let handle = ServerHandle {
            file_id: created.file_id,
            create_guid,
            durable: created
                .durable_v2()
                .map(|(timeout_ms, flags)| DurableGrant { timeout_ms, flags }),
        };
        let state = Arc::new(OpenState::new(
            handle,
            self.inner.tree,
            OpenParams {
                wire_path: wire,
                desired_access: req.desired_access.0,
                share_access: req.share_access.0,
                create_options: req.create_options.0,
                file_attributes: req.file_attributes.0,
            },
            lease.as_ref().map(LeaseRef::key),
            FileIdentity {
                creation_time: created.creation_time,
                disk_id: created.on_disk_id(),
            },
        ));
        let holds = OpenHolds {
            durable: Some(core.durable.register(&state)),
            lease,
        };
        Ok(File::new(
            self.clone(),
            path.to_string(),
            state,
            created.end_of_file,
            holds,
        ))
    }

    /// Whether opens ask for a durable handle: configured, and SMB 3.x (DH2Q needs 3.0).
    fn wants_durable(&self) -> bool {
        let core = &self.inner.client.inner;
        core.config.durable_handles && core.negotiated.dialect.is_smb3()
    }

    /// Add a v2 lease request (MS-SMB2 2.2.13.2.10) under the file's session-wide lease key:
    /// Read and Handle caching, plus Write caching for a writer. Handle caching is what makes
    /// the server grant the durable handle (3.3.5.9.10); nothing is cached on our side, so
    /// the only cost is acknowledging breaks, which the break handler does at once.
    fn request_lease(&self, req: &mut CreateRequest, write: bool) -> LeaseRef {
        let core = &self.inner.client.inner;
        let lease = core.leases.acquire(self.inner.tree, &req.name);
        let mut state = LeaseState::READ_CACHING | LeaseState::HANDLE_CACHING;
        if write {
            state |= LeaseState::WRITE_CACHING;
        }
        req.oplock_level = OplockLevel::LEASE;
        req.contexts.push(CreateContextRequest::Lease(Lease {
            key: lease.key(),
            state: LeaseState(state),
            flags: 0,
            v2: Some(LeaseV2 {
                parent_key: [0; 16],
                epoch: 0,
            }),
        }));
        lease
    }

    /// Send a CREATE and decode its reply. The caller owns the handle from then on; should it
    /// give up before the reply, a handle the server opened anyway is closed (see `orphans`).
    pub(crate) async fn create(&self, req: &CreateRequest, path: &str) -> Result<CreateResponse> {
        let closer = orphans::close_abandoned_open(Arc::downgrade(&self.inner));
        let resp = self
            .inner
            .client
            .inner
            .call_with_abandon_hook(req, Some(self.inner.tree), closer)
            .await
            .map_err(|e| e.with_path(path))?;
        decode(Command::CREATE, CreateResponse::decode(&resp.msg))
    }

    /// Close a handle.
    pub(crate) async fn close(&self, file_id: FileId) -> Result<()> {
        let resp = self
            .call(&CloseRequest::new(file_id), &[NtStatus::FILE_CLOSED])
            .await?;
        if resp.header.status == NtStatus::FILE_CLOSED {
            // As in `close_open`: a replayed CLOSE finding the handle closed means the first
            // copy closed it and only its reply was lost with the channel.
            return if resp.resent {
                Ok(())
            } else {
                resp.check(&[]).map(drop)
            };
        }
        decode(Command::CLOSE, CloseResponse::decode(&resp.msg)).map(|_| ())
    }

    /// Close a handle in the background, for owners that cannot wait (a `Drop`). Without a
    /// runtime (process exit) nothing is sent: the server drops the handle with the
    /// connection. Returns whether the CLOSE was scheduled.
    pub(crate) fn close_later(&self, file_id: FileId) -> bool {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let share = self.clone();
        rt.spawn(async move {
            if let Err(e) = share.close(file_id).await {
                // The server drops the handle with the session anyway.
                tracing::debug!(error = %e, ?file_id, "closing a handle in the background failed");
            }
        });
        true
    }

    /// Close an open made by [`Share::open`], at its FileId of now.
    pub(crate) async fn close_open(&self, open: &Arc<OpenState>) -> Result<()> {
        let body = CloseRequest::new(open.file_id());
        let resp = self.call_on(open, &body, &[NtStatus::FILE_CLOSED]).await?;
        if resp.header.status == NtStatus::FILE_CLOSED {
            // A replayed CLOSE finding the handle closed: the first copy closed it before
            // its channel was lost. Anything else is the caller's double close.
            return if resp.resent {
                Ok(())
            } else {
                resp.check(&[]).map(drop)
            };
        }
        decode(Command::CLOSE, CloseResponse::decode(&resp.msg)).map(|_| ())
    }

    /// Send a request about `open`, a handle of this tree.
    pub(crate) async fn call_on<B: smb3_proto::msg::RequestBody>(
        &self,
        open: &Arc<OpenState>,
        body: &B,
        also_ok: &[NtStatus],
    ) -> Result<crate::channel::Response> {
        let target = Target {
            tree: Some(self.inner.tree),
            open: Some(open.clone()),
        };
        self.inner
            .client
            .inner
            .call_to(body, &target, also_ok)
            .await
    }

    /// Send a request on this tree.
    pub(crate) async fn call<B: smb3_proto::msg::RequestBody>(
        &self,
        body: &B,
        also_ok: &[NtStatus],
    ) -> Result<crate::channel::Response> {
        self.inner
            .client
            .inner
            .call_allowing(body, Some(self.inner.tree), also_ok)
            .await
    }

    /// Build a request on this tree (for callers that send it themselves).
    pub(crate) fn request<B: smb3_proto::msg::RequestBody>(&self, body: &B) -> Request {
        self.inner.client.inner.request(body, Some(self.inner.tree))
    }

    /// Open `path` with `access` and `options` for a metadata operation.
    async fn open_for(&self, path: &str, access: u32, options: u32) -> Result<FileId> {
        let mut req = CreateRequest::new(wire_path(path)?, access, CreateDisposition::OPEN);
        req.create_options = CreateOptions(options);
        Ok(self.create(&req, path).await?.file_id)
    }

    /// Run `f` on an open handle, closing it whatever `f` returns.
    async fn with_handle<T, F, Fut>(&self, path: &str, access: u32, options: u32, f: F) -> Result<T>
    where
        F: FnOnce(FileId) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let handle = ScopedHandle::new(self, self.open_for(path, access, options).await?);
        let result = f(handle.id()).await;
        let closed = handle.close().await;
        let value = result.map_err(|e| e.with_path(path))?;
        closed.map_err(|e| e.with_path(path))?;
        Ok(value)
    }

    /// Size, times and attributes of `path`, in one round trip (CREATE + QUERY_INFO + CLOSE
    /// compounded, MS-SMB2 3.2.4.1.4).
    pub async fn metadata(&self, path: &str) -> Result<Metadata> {
        let mut create = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::OPEN,
        );
        create.create_options = CreateOptions(0);
        let query = QueryInfoRequest::file_info::<FileAllInformation>(FileId::ANY, 4096);
        let close = CloseRequest::new(FileId::ANY);
        let core = &self.inner.client.inner;
        // The compound goes straight to a channel, outside the replay loop. It is safe to send
        // again (an OPEN of an existing name, a query, and the CLOSE of that open, run
        // together), so a lost channel, or none usable while the session comes back, costs a
        // resend within `failover_wait`, as for any replayable request, not the caller's error.
        let give_up = std::time::Instant::now() + core.config.failover_wait;
        let replies = loop {
            // Built afresh each time: the session and tree ids change when the session is
            // re-established.
            let reqs = vec![
                self.request(&create),
                self.request(&query),
                self.request(&close),
            ];
            let charge = reqs.iter().map(|r| r.charge().max(1)).sum();
            let (sent, result) = match core.mc.set.pick(charge, Command::CREATE) {
                Ok(channel) => (true, channel.call_compound(reqs, true).await),
                Err(e) => (false, Err(e)),
            };
            // The channel's loss shows as the frame's error or as every member's.
            let is_lost = |r: &Result<Response>| matches!(r, Err(Error::ConnectionLost { .. }));
            let lost = match &result {
                Ok(members) => members.iter().any(is_lost),
                Err(e) => matches!(e, Error::ConnectionLost { .. }),
            };
            if !lost || std::time::Instant::now() >= give_up {
                break result?;
            }
            if sent {
                core.mc.failover.replaying();
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        let mut replies = replies.into_iter();
        let (Some(c), Some(q), Some(_)) = (replies.next(), replies.next(), replies.next()) else {
            return Err(ProtocolError::Unexpected("compound reply count").into());
        };
        c?.check(&[]).map_err(|e| e.with_path(path))?;
        let q = q?
            .check(&[NtStatus::BUFFER_OVERFLOW])
            .map_err(|e| e.with_path(path))?;
        metadata_from_reply(&q.msg)
    }

    /// Whether `path` exists.
    pub async fn exists(&self, path: &str) -> Result<bool> {
        match self.metadata(path).await {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.status(),
                    Some(NtStatus::OBJECT_NAME_NOT_FOUND | NtStatus::OBJECT_PATH_NOT_FOUND)
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// List a directory completely (all QUERY_DIRECTORY pages), without `.` and `..`.
    pub async fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        self.with_handle(
            path,
            AccessMask::FILE_LIST_DIRECTORY
                | AccessMask::FILE_READ_ATTRIBUTES
                | AccessMask::SYNCHRONIZE,
            CreateOptions::DIRECTORY_FILE,
            |id| async move {
                let mut out = Vec::new();
                loop {
                    let req = QueryDirectoryRequest::new(id, "*", DIR_BUFFER);
                    let resp = self.call(&req, &[NtStatus::NO_MORE_FILES]).await?;
                    if resp.header.status == NtStatus::NO_MORE_FILES {
                        break;
                    }
                    let page = decode(
                        Command::QUERY_DIRECTORY,
                        QueryDirectoryResponse::decode(&resp.msg).and_then(|r| r.id_both_entries()),
                    )?;
                    if page.is_empty() {
                        break;
                    }
                    out.extend(
                        page.into_iter()
                            .filter(|e| e.file_name != "." && e.file_name != "..")
                            .map(DirEntry::from),
                    );
                }
                Ok(out)
            },
        )
        .await
    }

    /// Watch the directory `path` for changes of the kinds in `filter` (in its
    /// subdirectories too when `recursive`). The directory is opened now; each
    /// [`DirWatch::next`] waits for the next batch of changes. Dropping a `next()` future
    /// cancels the wait on the server; dropping the watch closes the directory.
    pub async fn watch(
        &self,
        path: &str,
        filter: WatchFilter,
        recursive: bool,
    ) -> Result<DirWatch> {
        let mut req = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_LIST_DIRECTORY
                | AccessMask::FILE_READ_ATTRIBUTES
                | AccessMask::SYNCHRONIZE,
            CreateDisposition::OPEN,
        );
        // `CreateRequest::new` shares read, write and delete: watching a directory must not
        // stop anyone renaming or deleting in it.
        req.create_options = CreateOptions(CreateOptions::DIRECTORY_FILE);
        let created = self.create(&req, path).await?;
        Ok(DirWatch::new(
            self.clone(),
            path.to_string(),
            created.file_id,
            filter,
            recursive,
        ))
    }

    /// Create a directory. Fails if it exists.
    pub async fn create_dir(&self, path: &str) -> Result<()> {
        let mut req = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::CREATE,
        );
        req.create_options = CreateOptions(CreateOptions::DIRECTORY_FILE);
        req.file_attributes = FileAttributes(FileAttributes::DIRECTORY);
        let created = self.create(&req, path).await?;
        ScopedHandle::new(self, created.file_id)
            .close()
            .await
            .map_err(|e| e.with_path(path))
    }

    /// Create a directory and its missing parents (like `mkdir -p`).
    pub async fn create_dir_all(&self, path: &str) -> Result<()> {
        let wire = wire_path(path)?;
        let mut prefix = String::new();
        for part in wire.split('\\').filter(|p| !p.is_empty()) {
            if !prefix.is_empty() {
                prefix.push('\\');
            }
            prefix.push_str(part);
            match self.create_dir(&prefix).await {
                Ok(()) => {}
                Err(e) if e.status() == Some(NtStatus::OBJECT_NAME_COLLISION) => {
                    if !self.metadata(&prefix).await?.is_dir() {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Delete a file.
    pub async fn remove_file(&self, path: &str) -> Result<()> {
        self.delete(path, CreateOptions::NON_DIRECTORY_FILE).await
    }

    /// Delete an empty directory.
    pub async fn remove_dir(&self, path: &str) -> Result<()> {
        self.delete(path, CreateOptions::DIRECTORY_FILE).await
    }

    async fn delete(&self, path: &str, options: u32) -> Result<()> {
        // Setting the delete disposition (rather than DELETE_ON_CLOSE) makes the server report
        // DIRECTORY_NOT_EMPTY and similar refusals on this request, where they can be shown.
        self.with_handle(path, AccessMask::DELETE, options, |id| async move {
            let info = FileDispositionInformation {
                delete_pending: true,
            };
            self.call(&SetInfoRequest::file_info(id, &info), &[])
                .await
                .map(|_| ())
        })
        .await
    }

    /// Rename or move `from` to `to` (both share-relative). With `replace`, an existing
    /// target file is overwritten.
    pub async fn rename(&self, from: &str, to: &str, replace: bool) -> Result<()> {
        let target = wire_path(to)?;
        self.with_handle(
            from,
            AccessMask::DELETE | AccessMask::SYNCHRONIZE,
            0,
            |id| async move {
                let info = FileRenameInformation {
                    replace_if_exists: replace,
                    file_name: target,
                };
                self.call(&SetInfoRequest::file_info(id, &info), &[])
                    .await
                    .map(|_| ())
            },
        )
        .await
    }

    /// Size and free space of the share.
    pub async fn fs_info(&self) -> Result<FsInfo> {
        self.with_handle(
            "",
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateOptions::DIRECTORY_FILE,
            |id| async move {
                let req = QueryInfoRequest::fs_info::<FileFsFullSizeInformation>(id, 64);
                let resp = self.call(&req, &[]).await?;
                let fs: FileFsFullSizeInformation = decode(
                    Command::QUERY_INFO,
                    QueryInfoResponse::decode(&resp.msg).and_then(|r| r.fs_info()),
                )?;
                let unit =
                    u64::from(fs.sectors_per_allocation_unit) * u64::from(fs.bytes_per_sector);
                Ok(FsInfo {
                    total_bytes: fs.total_allocation_units.saturating_mul(unit),
                    available_bytes: fs.caller_available_allocation_units.saturating_mul(unit),
                    free_bytes: fs.actual_available_allocation_units.saturating_mul(unit),
                    block_size: unit,
                })
            },
        )
        .await
    }

    /// Disconnect the tree. Open handles on it become invalid.
    pub async fn disconnect(&self) -> Result<()> {
        self.call(&TreeDisconnectRequest {}, &[]).await.map(|_| ())
    }

    /// FSCTL_VALIDATE_NEGOTIATE_INFO (MS-SMB2 3.2.5.5, 3.0 and 3.0.2 only): the server echoes
    /// what it negotiated, signed, so a man in the middle that downgraded NEGOTIATE is caught.
    pub(crate) async fn validate_negotiate(&self) -> Result<()> {
        let core = &self.inner.client.inner;
        if !core.signing {
            return Ok(());
        }
        let resp = self.call(&validate_negotiate_request(core), &[]).await?;
        check_validate_negotiate(core, &resp)
    }
}

/// FSCTL_VALIDATE_NEGOTIATE_INFO carrying exactly what NEGOTIATE sent (MS-SMB2 3.2.5.5).
pub(crate) fn validate_negotiate_request(core: &SessionCore) -> IoctlRequest {
    let config = &core.config;
    let input = ValidateNegotiateInfoRequest {
        capabilities: crate::session::client_capabilities(config),
        guid: core.client_guid,
        security_mode: crate::session::security_mode(config),
        dialects: config.dialects(),
    }
    .encode();
    IoctlRequest::fsctl(FSCTL_VALIDATE_NEGOTIATE_INFO, FileId::ANY, input, 24)
}

/// The server's answer must match what it said in NEGOTIATE.
pub(crate) fn check_validate_negotiate(
    core: &SessionCore,
    resp: &crate::channel::Response,
) -> Result<()> {
    let out = decode(Command::IOCTL, IoctlResponse::decode(&resp.msg))?;
    let v = decode(
        Command::IOCTL,
        ValidateNegotiateInfoResponse::decode(&out.output),
    )?;
    let n = &core.negotiated;
    if v.dialect != n.dialect.code()
        || v.guid != n.server_guid
        || v.security_mode.0 != n.server_security_mode.0
        || v.capabilities.0 != n.server_capabilities.0
    {
        return Err(Error::Protocol(ProtocolError::Unexpected(
            "VALIDATE_NEGOTIATE_INFO does not match NEGOTIATE (possible downgrade attack)",
        )));
    }
    Ok(())
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("name", &self.inner.name)
            .field("tree", &self.inner.tree.handle)
            .field("encrypted", &self.is_encrypted())
            .finish()
    }
}

/// Keep the lease hold if the server granted a lease on our key, recording the state it
/// granted (which may be less than asked: RH when another client has the file open, say).
/// Without a lease in the reply (leasing off on the server) the hold is released.
/// Add DH2Q (MS-SMB2 2.2.13.2.11) with a fresh CreateGuid, which is returned. Timeout 0
/// lets the server choose (Samba: 60 s).
pub(crate) fn request_durable(req: &mut CreateRequest) -> [u8; 16] {
    let mut create_guid = [0u8; 16];
    rand::rng().fill_bytes(&mut create_guid);
    req.contexts.push(CreateContextRequest::DurableHandleV2 {
        timeout_ms: 0,
        flags: 0,
        create_guid,
    });
    create_guid
}

fn keep_granted_lease(lease: LeaseRef, created: &CreateResponse, path: &str) -> Option<LeaseRef> {
    let granted = match (created.oplock_level, created.lease()) {
        (OplockLevel::LEASE, Some(granted)) => granted,
        _ => {
            tracing::debug!(path, "no lease granted");
            return None;
        }
    };
    if granted.key != lease.key() {
        // MS-SMB2 3.2.5.7.5 has the client look the lease up by the key in the reply; a key
        // we did not send is not ours to track.
        tracing::warn!(
            path,
            "server granted a lease on a key we did not send; ignored"
        );
        return None;
    }
    lease.record_grant(granted.state, granted.v2.map(|v| v.epoch));
    Some(lease)
}

/// Metadata from a QUERY_INFO reply carrying FileAllInformation (MS-FSCC 2.4.2). A reply with
/// BUFFER_OVERFLOW still holds the fixed part; only the name is cut short.
pub(crate) fn metadata_from_reply(msg: &bytes::Bytes) -> Result<Metadata> {
    let info: FileAllInformation = decode(
        Command::QUERY_INFO,
        QueryInfoResponse::decode(msg).and_then(|r| r.file_info()),
    )?;
    let mut metadata = Metadata::from_parts(
        info.basic.file_attributes,
        info.standard.end_of_file,
        info.standard.allocation_size,
        info.basic.creation_time,
        info.basic.last_access_time,
        info.basic.last_write_time,
        info.basic.change_time,
    );
    metadata.file_id = info.index_number;
    metadata.links = info.standard.number_of_links.max(1);
    Ok(metadata)
}
