//! `Share`: a connected tree, and the path operations on it.

mod links;

use std::sync::Arc;

use smb3_proto::msg::close::CloseRequest;
use smb3_proto::msg::create::{
    AccessMask, CreateContextRequest, CreateContextResponse, CreateDisposition, CreateOptions,
    CreateRequest, CreateResponse, Lease, LeaseState, LeaseV2, OplockLevel, ShareAccess,
};
use smb3_proto::msg::fscc::{
    FileAllInformation, FileAttributes, FileDispositionInformation, FileFsAttributeInformation,
    FileFsFullSizeInformation, FileRenameInformation, QueryFsInfo,
};
use smb3_proto::msg::posix::FilePosixInformation;
use smb3_proto::msg::query_info::{QueryInfoRequest, QueryInfoResponse};
use smb3_proto::msg::set_info::SetInfoRequest;
use smb3_proto::msg::tree_connect::{
    ShareCapabilities, ShareFlags, TreeConnectRequest, TreeConnectResponse,
};
use smb3_proto::msg::tree_disconnect::TreeDisconnectRequest;
use smb3_proto::msg::FileId;
use smb3_proto::msg::RequestBody;
use smb3_proto::{Command, Dialect, NtStatus};

use crate::addressing::{DurableGrant, FileIdentity, OpenParams, OpenState, ServerHandle};
use crate::channel::Response;
use crate::client::Client;
use crate::durable;
use crate::engine::Call;
use crate::error::{
    decode, ConnectionLossCause, EncryptionRequiredBy, Error, ProtocolError, Result,
};
use crate::file::{File, OpenHolds};
use crate::lease::LeaseRef;
use crate::metadata::{
    metadata_from_posix_reply, metadata_from_reply, DirEntry, FsAttributes, FsInfo, Metadata,
};
use crate::names::wire_path;
use crate::open_options::{IfExists, OpenOptions};
use crate::session::{check_validate_negotiate, validate_negotiate_request};
use crate::timewarp;
use crate::tree::{ScopedHandle, Tree};
use crate::watch::{DirWatch, WatchFilter, WatchScope};

/// A connected share. Cheap to clone.
///
/// Dropping the future of any operation cancels it: see [`Client`] and the crate
/// documentation, "Cancelling". [`Share::watch`] waits for changes in a directory.
#[derive(Clone)]
pub struct Share {
    client: Client,
    pub(crate) tree: Arc<Tree>,
    /// The snapshot this view reads, as the TWrp FILETIME; `None` for the live share.
    snapshot: Option<u64>,
    /// The DFS links paths of this share have crossed, when it is in a DFS namespace and
    /// follows them ([`ClientConfig::follow_dfs`](crate::ClientConfig::follow_dfs)).
    links: Option<Arc<links::Links>>,
}

/// What it means when an open-act-close operation ([`Share::with_opened_or`]) opens its path
/// a second time, after its first handle went with a re-established session, and finds
/// nothing there.
#[derive(Clone, Copy, Debug)]
pub(crate) enum IfGoneOnRetry<'a> {
    /// An error, as the server says it.
    Fail,
    /// The work is done: a delete.
    Done,
    /// The work is done if this path now holds the file first opened (same on-disk id): a
    /// rename.
    DoneIfRenamedTo(&'a str),
}

/// Whether `e` says the handle a request was sent on no longer exists at the server.
pub(crate) fn handle_gone(e: &Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::FILE_CLOSED | NtStatus::INVALID_HANDLE)
    ) || matches!(e, Error::HandleLost { .. })
}

impl Client {
    /// Connect to a share (`TREE_CONNECT`).
    pub async fn share(&self, name: &str) -> Result<Share> {
        let body = TreeConnectRequest::new(&self.core.server_name, name);
        let resp = self
            .core
            .send(&body, Call::session())
            .await
            .map_err(|e| e.with_path(&format!("\\\\{}\\{name}", self.core.server_name)))?;
        let tc = decode(
            Command::TREE_CONNECT,
            TreeConnectResponse::decode(&resp.msg),
        )?;
        let encrypt = tc.share_flags.has(ShareFlags::ENCRYPT_DATA);
        if encrypt && !self.core.can_encrypt {
            return Err(Error::Protocol(ProtocolError::NoCipher(
                EncryptionRequiredBy::Share,
            )));
        }
        let tree = self
            .core
            .addressing
            .trees
            .add(name, resp.header.tree_id, encrypt);
        let dfs = tc.capabilities.has(ShareCapabilities::DFS);
        let share = Share {
            client: self.clone(),
            tree: Arc::new(Tree {
                core: self.core.clone(),
                name: name.to_string(),
                context: tree,
                posix: false.into(),
                dfs,
            }),
            snapshot: None,
            links: (dfs && self.core.config.follow_dfs).then(Arc::default),
        };
        if matches!(
            self.core.negotiated.dialect,
            Dialect::Smb300 | Dialect::Smb302
        ) {
            share.validate_negotiate().await?;
        }
        if self.core.negotiated.posix_extensions {
            let posix = share.speaks_posix().await;
            share
                .tree
                .posix
                .store(posix, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(share)
    }
}

/// Output buffer per QUERY_DIRECTORY: 64 KiB holds several hundred entries per round trip.
pub(crate) const DIR_BUFFER: u32 = 64 * 1024;

impl Share {
    /// The share's name.
    pub fn name(&self) -> &str {
        &self.tree.name
    }

    /// Whether the share speaks the SMB3 POSIX extensions (the server offered them, the share
    /// did not turn them off, and [`ClientConfig::posix_extensions`](crate::ClientConfig) is
    /// on): then names are case-sensitive, [`Metadata::posix`] carries modes and owners,
    /// symlinks are not followed by the server, and unlink/rename follow POSIX rules.
    pub fn is_posix(&self) -> bool {
        self.tree.is_posix()
    }

    /// Whether the server answers a POSIX open of the share's root with a POSIX context of
    /// its own: Samba ignores the context on a share with the extensions off. A root that
    /// cannot be opened at all is treated as not POSIX; the error shows on first real use.
    async fn speaks_posix(&self) -> bool {
        let mut req = CreateRequest::new(
            String::new(),
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::OPEN,
        );
        req.create_options = CreateOptions(CreateOptions::DIRECTORY_FILE);
        crate::posix::add_posix_context(&mut req, 0);
        match self.tree.create(&req, self.name()).await {
            Ok(created) => {
                let posix = created.posix().is_some();
                if let Err(e) = self.tree.close(created.file_id).await {
                    tracing::debug!(share = %self.name(), error = %e, "closing the POSIX probe");
                }
                posix
            }
            Err(e) => {
                tracing::debug!(share = %self.name(), error = %e, "POSIX probe failed");
                false
            }
        }
    }

    /// Whether the share is in a DFS namespace (SMB2_SHARE_CAP_DFS): a path in it may lie
    /// behind a link, which [`crate::dfs::follow`] follows.
    pub fn is_dfs(&self) -> bool {
        self.tree.dfs
    }

    /// The session this share belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Whether the server requires encryption on this share.
    pub fn is_encrypted(&self) -> bool {
        self.tree.context.encrypt || self.tree.core.encrypt_all
    }

    /// Open (or create) a file.
    pub async fn open(&self, path: &str, opts: &OpenOptions) -> Result<File> {
        self.across_links(path, |s: Share, p: String| async move {
            s.open_here(&p, opts).await
        })
        .await
    }

    /// [`Share::open`] on this share, with no DFS link on the way.
    async fn open_here(&self, path: &str, opts: &OpenOptions) -> Result<File> {
        self.open_target(path, None, opts).await
    }

    /// Open the file whose 64-bit file id (MS-FSCC 2.1.9, [`Metadata::file_id`]) is
    /// `file_id`, with FILE_OPEN_BY_FILE_ID (MS-SMB2 2.2.13). Servers need not offer it:
    /// one that does not answers with [`Error::Unsupported`]. Such an open is not durable.
    pub async fn open_by_file_id(&self, file_id: u64, opts: &OpenOptions) -> Result<File> {
        let shown = format!("file id {file_id:#x}");
        match self.open_target(&shown, Some(file_id), opts).await {
            Err(Error::Status { status, .. }) if by_id_unsupported(status) => {
                Err(Error::Unsupported {
                    feature: "opening a file by its file id",
                    status,
                    path: Some(shown),
                })
            }
            other => other,
        }
    }

    /// Open `path`, or the file `by_id` names (then `path` is only for messages).
    async fn open_target(
        &self,
        path: &str,
        by_id: Option<u64>,
        opts: &OpenOptions,
    ) -> Result<File> {
        let snapshot = opts.snapshot.or(self.snapshot);
        if snapshot.is_some() && opts.changes_anything() {
            return Err(Error::ApiMisuse(
                "a snapshot is read-only: open files in it for reading only",
            ));
        }
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
        if opts.read_security {
            access |= AccessMask::READ_CONTROL;
        }
        if opts.write_security {
            access |= AccessMask::WRITE_DAC | AccessMask::WRITE_OWNER;
        }
        let mut options = CreateOptions::NON_DIRECTORY_FILE;
        if opts.delete_on_close {
            // MS-SMB2 2.2.13: FILE_DELETE_ON_CLOSE needs DELETE in DesiredAccess.
            access |= AccessMask::DELETE;
            options |= CreateOptions::DELETE_ON_CLOSE;
        }
        if opts.backup_intent {
            options |= CreateOptions::OPEN_FOR_BACKUP_INTENT;
        }
        if by_id.is_some() {
            options |= CreateOptions::OPEN_BY_FILE_ID;
        }
        // Truncation is not asked of the CREATE (OVERWRITE, OVERWRITE_IF) but done on the new
        // handle afterwards (`truncate_after_open`). A CREATE lost with its channel is
        // replayed elsewhere; should the original still run at the server after the replay,
        // the file written and closed meanwhile (a copy the server took in before the link
        // dropped and ran late), a truncating disposition would empty it, and nothing guards
        // a CREATE against a stale copy (MS-SMB2 3.3.5.2.10 guards the requests on an open:
        // a SET_INFO that arrives late is refused by its ChannelSequence, and on a closed
        // handle it finds none). Opened without truncation, a late copy changes no byte.
        let truncate_after_open = opts.truncate && !opts.create_new;
        if truncate_after_open {
            access |= AccessMask::FILE_WRITE_DATA;
        }
        let disposition = match (opts.create_new, opts.create) {
            (true, _) => CreateDisposition::CREATE,
            (false, true) => CreateDisposition::OPEN_IF,
            (false, false) => CreateDisposition::OPEN,
        };
        let wire = match by_id {
            Some(_) => String::new(),
            None => wire_path(path)?,
        };
        let mut req = CreateRequest::new(wire.clone(), access, disposition);
        req.file_id_name = by_id;
        req.create_options = CreateOptions(options);
        req.file_attributes = FileAttributes(FileAttributes::NORMAL);
        if let Some(mode) = opts.share_mode {
            req.share_access = ShareAccess(mode.0);
        }
        timewarp::add_timewarp(&mut req, snapshot);
        self.tree.posix_open(
            &mut req,
            opts.mode.unwrap_or(crate::posix::DEFAULT_FILE_MODE),
        );
        let core = &self.tree.core;
        // Not durable: a delete-on-close open (were it reclaimed after its durable timeout,
        // the file would be gone, and opening it again would need FILE_CREATE semantics we
        // cannot replay safely), nor an open by file id (no path to reopen it by).
        let durable = self.wants_durable() && !opts.delete_on_close && by_id.is_none();
        let (create_guid, lease) = if durable {
            // A snapshot's file is another file than the live one at the same path: it gets
            // a lease key of its own (the server refuses one key for two files, 3.3.5.9.8).
            let lease_name = match snapshot {
                Some(ft) => format!("{}\\{wire}", timewarp::token_of(ft)),
                None => wire.clone(),
            };
            (
                Some(durable::request_durable(&mut req)),
                Some(self.request_lease(&mut req, &lease_name, opts.write)),
            )
        } else {
            (None, None)
        };
        // The on-disk id lets a reconnect whose reclaim is refused recognise the file when
        // it opens it again by path (see `background::reconnect`).
        req.contexts.push(CreateContextRequest::QueryOnDiskId);
        let created = match self.tree.create(&req, path).await {
            Ok(c) => c,
            Err(e) => return Err(self.explain_snapshot_miss(e, path, snapshot).await),
        };
        let lease = lease.and_then(|l| keep_granted_lease(l, &created, path));
        let mut created = created;
        if let Some(wanted) = opts.mode {
            self.insist_on_mode(path, &mut created, wanted).await?;
        }
        // An empty file (a new one, most often) needs no truncation: no round trip.
        let truncate_now = truncate_after_open && created.end_of_file > 0;
        if truncate_now {
            created.end_of_file = 0;
            created.allocation_size = 0;
        }
        let handle = ServerHandle {
            file_id: created.file_id,
            create_guid,
            durable: created
                .durable_v2()
                .map(|(timeout_ms, flags)| DurableGrant { timeout_ms, flags }),
        };
        let state = Arc::new(OpenState::new(
            handle,
            self.tree.context,
            OpenParams {
                wire_path: wire,
                desired_access: req.desired_access.0,
                share_access: req.share_access.0,
                create_options: req.create_options.0,
                file_attributes: req.file_attributes.0,
                timewarp: snapshot,
                file_id_name: by_id,
                posix: self.tree.is_posix(),
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
        let file = File::new(
            self.tree.clone(),
            path.to_string(),
            state,
            Metadata::of_create(&created),
            holds,
        );
        if truncate_now {
            // On failure the handle is closed as the File drops.
            file.set_len(0).await?;
        }
        Ok(file)
    }

    /// Give a file a POSIX create just made the mode `wanted`, when the server gave it
    /// another: Samba applies the share's `create mask` (0744 by default) and `directory
    /// mask` to a POSIX create's mode, so a 0755 script would lose its group and other
    /// execute bits, while a chmod is applied as asked (what `open(2)` and `mkdir(2)` give
    /// locally). One more round trip, only when the server changed the mode.
    async fn insist_on_mode(
        &self,
        path: &str,
        created: &mut smb3_proto::msg::create::CreateResponse,
        wanted: u32,
    ) -> Result<()> {
        let wanted = wanted & 0o7777;
        if created.create_action != smb3_proto::msg::create::CreateAction::CREATED {
            return Ok(());
        }
        let Some(posix) = created.contexts.iter_mut().find_map(|c| match c {
            CreateContextResponse::Posix(p) => Some(p),
            _ => None,
        }) else {
            return Ok(());
        };
        // Samba's chmod sets the rwx bits only (see `posix_modes`): setuid, setgid and
        // sticky are not worth a round trip that cannot give them.
        if posix.mode.permissions() & 0o777 == wanted & 0o777 {
            return Ok(());
        }
        self.set_mode(path, wanted).await?;
        posix.mode = smb3_proto::msg::posix::PosixMode(
            posix.mode.0 & !0o7777 | (posix.mode.permissions() & !0o777) | (wanted & 0o777),
        );
        Ok(())
    }

    /// This share reading the snapshot at `filetime` (`None`: the live share).
    pub(crate) fn with_snapshot(&self, filetime: Option<u64>) -> Share {
        Share {
            client: self.client.clone(),
            tree: self.tree.clone(),
            snapshot: filetime,
            links: self.links.clone(),
        }
    }

    /// The TWrp FILETIME of the snapshot this share reads.
    pub(crate) fn snapshot_filetime(&self) -> Option<u64> {
        self.snapshot
    }

    /// Whether opens ask for a durable handle: configured, and SMB 3.x (DH2Q needs 3.0).
    fn wants_durable(&self) -> bool {
        let core = &self.tree.core;
        core.config.durable_handles && core.negotiated.dialect.is_smb3()
    }

    /// Add a v2 lease request (MS-SMB2 2.2.13.2.10) under the file's session-wide lease key:
    /// Read and Handle caching, plus Write caching for a writer. Handle caching is what makes
    /// the server grant the durable handle (3.3.5.9.10); nothing is cached on our side, so
    /// the only cost is acknowledging breaks, which the break handler does at once.
    fn request_lease(&self, req: &mut CreateRequest, name: &str, write: bool) -> LeaseRef {
        let core = &self.tree.core;
        let lease = core
            .leases
            .acquire_named(self.tree.context, name, self.tree.names());
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

    /// Open `path` with `access` and `options` for a handle kept over several round trips
    /// (a directory listed page by page). The CREATE carries a CreateGuid (DH2Q, no lease): should its reply be
    /// lost with its channel, the replay is answered with the open the first attempt made
    /// (MS-SMB2 3.3.5.9.10; Samba keeps the CreateGuid for this whether or not it grants
    /// durability), where a plain OPEN sent again makes a second handle and the first stays
    /// at the server, unknown to us, until the session ends.
    pub(crate) async fn open_kept(&self, path: &str, access: u32, options: u32) -> Result<FileId> {
        let mut req = self.metadata_open_request(path, access, options)?;
        durable::request_durable(&mut req);
        self.create_for(&req, path).await.map(|(id, _)| id)
    }

    /// The CREATE that opens `path`, which must exist, for a metadata operation.
    fn metadata_open_request(
        &self,
        path: &str,
        access: u32,
        options: u32,
    ) -> Result<CreateRequest> {
        let mut req = CreateRequest::new(wire_path(path)?, access, CreateDisposition::OPEN);
        req.create_options = CreateOptions(options | self.tree.metadata_open_options());
        timewarp::add_timewarp(&mut req, self.snapshot);
        self.tree.posix_open(&mut req, 0);
        Ok(req)
    }

    async fn create_for(
        &self,
        req: &CreateRequest,
        path: &str,
    ) -> Result<(FileId, FileAttributes)> {
        match self.tree.create(req, path).await {
            Ok(created) => Ok((created.file_id, created.file_attributes)),
            Err(e) => Err(self.explain_snapshot_miss(e, path, self.snapshot).await),
        }
    }

    /// Run `f` on an open handle, closing it whatever `f` returns.
    pub(crate) async fn with_handle<T, F, Fut>(
        &self,
        path: &str,
        access: u32,
        options: u32,
        f: F,
    ) -> Result<T>
    where
        F: Fn(FileId) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.with_opened(path, access, options, |id, _| f(id)).await
    }

    /// [`Share::with_handle`], `f` also getting the file's attributes from the CREATE reply.
    pub(crate) async fn with_opened<T, F, Fut>(
        &self,
        path: &str,
        access: u32,
        options: u32,
        f: F,
    ) -> Result<T>
    where
        F: Fn(FileId, FileAttributes) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let done = self
            .with_opened_or(path, access, options, IfGoneOnRetry::Fail, f)
            .await?;
        // `Fail` never reports the work as done by an earlier attempt.
        done.ok_or(Error::Protocol(ProtocolError::Unexpected(
            "an open-act-close reported done without running",
        )))
    }

    /// Open `path`, run `f` on the handle and close it. A handle opened in a session that is
    /// re-established before `f`'s request runs is gone with it (only durable opens are
    /// reclaimed, and this one is not): the path is opened again once and `f` run again. Yet
    /// `f`'s request may have run at the server before its reply was lost with the session,
    /// and then the path may be gone (deleted, renamed): `if_gone` says when that second open
    /// finding nothing means the work is done, `Ok(None)`, rather than an error.
    pub(crate) async fn with_opened_or<T, F, Fut>(
        &self,
        path: &str,
        access: u32,
        options: u32,
        if_gone: IfGoneOnRetry<'_>,
        f: F,
    ) -> Result<Option<T>>
    where
        F: Fn(FileId, FileAttributes) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let failover = &self.tree.core.multichannel.failover;
        // After a first attempt whose handle went with its session: that open's on-disk id.
        let mut lost_attempt: Option<Option<[u8; 32]>> = None;
        loop {
            let sessions_before = failover.reestablishments();
            let mut req = self.metadata_open_request(path, access, options)?;
            if matches!(if_gone, IfGoneOnRetry::DoneIfRenamedTo(_)) {
                req.contexts.push(CreateContextRequest::QueryOnDiskId);
            }
            let created = match self.tree.create_name_op(&req, path).await {
                Ok(created) => created,
                Err(e) => {
                    let gone = matches!(
                        e.status(),
                        Some(NtStatus::OBJECT_NAME_NOT_FOUND | NtStatus::OBJECT_PATH_NOT_FOUND)
                    );
                    if let Some(first) = lost_attempt.filter(|_| gone) {
                        if self.ran_before(if_gone, first).await {
                            tracing::info!(
                                path,
                                "the request lost with its session had run: nothing left to do"
                            );
                            return Ok(None);
                        }
                    }
                    return Err(self.explain_snapshot_miss(e, path, self.snapshot).await);
                }
            };
            let handle = ScopedHandle::new(&self.tree, created.file_id);
            let result = f(handle.id(), created.file_attributes).await;
            let outlived = failover.reestablishments() != sessions_before;
            if outlived && lost_attempt.is_none() && result.as_ref().is_err_and(handle_gone) {
                tracing::info!(
                    path,
                    "handle lost with a re-established session before its request ran; \
                     opening the file again"
                );
                lost_attempt = Some(created.on_disk_id());
                handle.forget();
                continue;
            }
            let closed = handle.close().await;
            let value = result.map_err(|e| e.with_path(path))?;
            match closed {
                // The request ran; its handle then went with the session.
                Err(e) if outlived && handle_gone(&e) => {}
                other => other.map_err(|e| e.with_path(path))?,
            }
            return Ok(Some(value));
        }
    }

    /// Whether the work of an attempt lost with its session had run, now that the path it
    /// opened is gone: see [`IfGoneOnRetry`].
    async fn ran_before(&self, if_gone: IfGoneOnRetry<'_>, first: Option<[u8; 32]>) -> bool {
        match if_gone {
            IfGoneOnRetry::Fail => false,
            IfGoneOnRetry::Done => true,
            IfGoneOnRetry::DoneIfRenamedTo(to) => match (first, self.on_disk_id(to).await) {
                // DiskFileId and VolumeId (MS-SMB2 2.2.14.2.9); the rest is reserved.
                (Some(first), Some(now)) => first[..16] == now[..16],
                _ => false,
            },
        }
    }

    /// The on-disk id (QFid) of `path`, when it exists and the server gives one.
    async fn on_disk_id(&self, path: &str) -> Option<[u8; 32]> {
        let mut req = self
            .metadata_open_request(path, AccessMask::FILE_READ_ATTRIBUTES, 0)
            .ok()?;
        req.contexts.push(CreateContextRequest::QueryOnDiskId);
        let created = self.tree.create(&req, path).await.ok()?;
        let _ = self.tree.close(created.file_id).await;
        created.on_disk_id()
    }

    /// Size, times and attributes of `path`, in one round trip (CREATE + QUERY_INFO + CLOSE
    /// compounded, MS-SMB2 3.2.4.1.4).
    ///
    /// On a POSIX share ([`Share::is_posix`]) this is `lstat`: a symlink is reported as
    /// itself ([`Metadata::posix`] says what it is), never followed.
    pub async fn metadata(&self, path: &str) -> Result<Metadata> {
        Ok(self.metadata_and_name(path).await?.0)
    }

    /// [`Share::metadata`], with the name the server keeps the file under as its
    /// FileAllInformation gives it (MS-FSCC 2.4.2: FileNameInformation, the path from the
    /// share's root, `\`-separated). On a case-insensitive share `FOO` finds the file stored
    /// as `foo`, and only this name says so; the same round trip. `None` on a POSIX share
    /// (its information class has no name) or when the name did not fit the reply.
    pub async fn metadata_and_name(&self, path: &str) -> Result<(Metadata, Option<String>)> {
        self.across_links(path, |s: Share, p: String| async move {
            s.metadata_and_name_here(&p).await
        })
        .await
    }

    /// [`Share::metadata_and_name`] on this share, with no DFS link on the way.
    ///
    /// A symbolic link the server leaves to the client (see
    /// [`crate::tree::leaves_reparse_point_to_client`]) is asked about again as itself, on any
    /// share: `lstat`, the link's own attributes with FILE_ATTRIBUTE_REPARSE_POINT. A reparse
    /// point the server follows (a junction on Windows, a symlink on Samba's disk) is not
    /// asked about as itself on a share without the POSIX extensions.
    async fn metadata_and_name_here(&self, path: &str) -> Result<(Metadata, Option<String>)> {
        let itself = self.tree.is_posix();
        match self.metadata_and_name_opened(path, itself).await {
            Err(e) if !itself && crate::tree::leaves_reparse_point_to_client(&e) => {
                self.metadata_and_name_opened(path, true).await
            }
            other => other,
        }
    }

    /// [`Share::metadata_and_name_here`], the file opened as itself (FILE_OPEN_REPARSE_POINT)
    /// when `itself`.
    async fn metadata_and_name_opened(
        &self,
        path: &str,
        itself: bool,
    ) -> Result<(Metadata, Option<String>)> {
        let posix = self.tree.is_posix();
        let mut create = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::OPEN,
        );
        create.create_options = CreateOptions(if itself {
            CreateOptions::OPEN_REPARSE_POINT
        } else {
            0
        });
        timewarp::add_timewarp(&mut create, self.snapshot);
        self.tree.posix_open(&mut create, 0);
        let query = if posix {
            QueryInfoRequest::file_info::<FilePosixInformation>(FileId::ANY, 4096)
        } else {
            QueryInfoRequest::file_info::<FileAllInformation>(FileId::ANY, 4096)
        };
        let q = self
            .open_ask_close(&create, &query, path)
            .await??
            .check(&[NtStatus::BUFFER_OVERFLOW])
            .map_err(|e| e.with_path(path))?;
        if posix {
            Ok((metadata_from_posix_reply(&q.msg)?, None))
        } else {
            let name = QueryInfoResponse::decode(&q.msg)
                .and_then(|r| r.file_info::<FileAllInformation>())
                .ok()
                .filter(|all| !all.name_truncated)
                .map(|all| all.name);
            Ok((metadata_from_reply(&q.msg)?, name))
        }
    }

    /// Open `create`, send `ask` on the handle it opens and close it, in one compound: one
    /// round trip, every part of which may be sent twice after a lost channel (opening for
    /// attributes, asking and closing change nothing). A failed open is the error, named at
    /// `path` (a snapshot that is not there said so); otherwise the reply to `ask`, as it came.
    pub(crate) async fn open_ask_close<B: RequestBody>(
        &self,
        create: &CreateRequest,
        ask: &B,
        path: &str,
    ) -> Result<Result<Response>> {
        let core = &self.tree.core;
        let tree = Some(self.tree.context);
        let reqs = vec![
            core.prepare(create, tree),
            core.prepare(ask, tree),
            core.prepare(&CloseRequest::new(FileId::ANY), tree),
        ];
        let replies = core
            .send_related(reqs, create.replay(), self.tree.call())
            .await?;
        self.close_left_open(&replies).await;
        let mut replies = replies.into_iter();
        let (Some(c), Some(a), Some(_)) = (replies.next(), replies.next(), replies.next()) else {
            // The channel answers a compound with one reply per request.
            return Err(ProtocolError::Unexpected("compound reply count").into());
        };
        if let Err(e) = c?.check(&[]) {
            let e = e.with_path(path);
            return Err(self.explain_snapshot_miss(e, path, self.snapshot).await);
        }
        Ok(a)
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

    /// List a directory completely (all QUERY_DIRECTORY pages), without `.` and `..`. For
    /// a directory too large to hold, [`Share::list`] hands the entries over page by page.
    pub async fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        let mut listing = self.list(path).await?;
        let mut out = Vec::new();
        while let Some(page) = listing.next_page().await? {
            out.extend(page);
        }
        Ok(out)
    }

    /// Watch the directory `path` for changes of the kinds in `filter` (in its
    /// subdirectories too with [`WatchScope::Subtree`]). The directory is opened and the server is
    /// watching when this returns: every change made afterwards is reported. Each
    /// [`DirWatch::next`] waits for the next batch of changes. Dropping a `next()` future
    /// cancels the wait on the server; dropping the watch closes the directory.
    pub async fn watch(
        &self,
        path: &str,
        filter: WatchFilter,
        scope: WatchScope,
    ) -> Result<DirWatch> {
        self.across_links(path, |s: Share, p: String| async move {
            s.watch_here(&p, filter, scope).await
        })
        .await
    }

    /// [`Share::watch`] on this share, with no DFS link on the way.
    async fn watch_here(
        &self,
        path: &str,
        filter: WatchFilter,
        scope: WatchScope,
    ) -> Result<DirWatch> {
        let recursive = scope == WatchScope::Subtree;
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
        timewarp::add_timewarp(&mut req, self.snapshot);
        self.tree.posix_open(&mut req, 0);
        let created = self.tree.create(&req, path).await?;
        DirWatch::start(
            self.tree.clone(),
            path.to_string(),
            created.file_id,
            filter,
            recursive,
        )
        .await
    }

    /// Create a directory. Fails if it exists. On a POSIX share it gets
    /// [`DEFAULT_DIR_MODE`](crate::DEFAULT_DIR_MODE).
    pub async fn create_dir(&self, path: &str) -> Result<()> {
        self.create_dir_with_mode(path, crate::posix::DEFAULT_DIR_MODE)
            .await
    }

    /// Create a directory with the permission bits `permissions` on a POSIX share (the caller
    /// applies its umask, as `mkdir(2)` would); elsewhere the same as [`Share::create_dir`].
    pub async fn create_dir_with_mode(&self, path: &str, permissions: u32) -> Result<()> {
        self.across_links(path, |s: Share, p: String| async move {
            s.create_dir_with_mode_here(&p, permissions).await
        })
        .await
    }

    /// [`Share::create_dir_with_mode`] on this share, with no DFS link on the way.
    async fn create_dir_with_mode_here(&self, path: &str, permissions: u32) -> Result<()> {
        self.check_writable()?;
        let mut req = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::CREATE,
        );
        req.create_options = CreateOptions(CreateOptions::DIRECTORY_FILE);
        req.file_attributes = FileAttributes(FileAttributes::DIRECTORY);
        self.tree.posix_open(&mut req, permissions & 0o7777);
        // CREATE + CLOSE in one round trip.
        let mut replies = self
            .send_chain(&req, None::<smb3_proto::msg::read::ReadRequest>)
            .await?
            .into_iter();
        let (Some(created), Some(closed)) = (replies.next(), replies.next()) else {
            return Err(ProtocolError::Unexpected("compound reply count").into());
        };
        let created = created?.check(&[]).map_err(|e| e.with_path(path))?;
        closed?
            .check(&[NtStatus::FILE_CLOSED])
            .map_err(|e| e.with_path(path))?;
        if self.tree.is_posix() {
            let mut created = decode(Command::CREATE, CreateResponse::decode(&created.msg))?;
            self.insist_on_mode(path, &mut created, permissions).await?;
        }
        Ok(())
    }

    /// Create a directory and its missing parents (like `mkdir -p`). An existing directory
    /// is fine; an existing file in the way is the server's OBJECT_NAME_COLLISION.
    pub async fn create_dir_all(&self, path: &str) -> Result<()> {
        let wire = wire_path(path)?;
        let parts: Vec<&str> = wire.split('\\').filter(|p| !p.is_empty()).collect();
        let prefix = |n: usize| parts[..n].join("\\");
        // Usually only the last level is missing: try it first, and go up only while the
        // server says a parent is missing; then come back down.
        let mut made = parts.len();
        while made > 0 {
            match self.create_dir_or_find_one(&prefix(made)).await {
                Err(e) if e.status() == Some(NtStatus::OBJECT_PATH_NOT_FOUND) && made > 1 => {
                    made -= 1;
                }
                other => {
                    other?;
                    break;
                }
            }
        }
        for n in made + 1..=parts.len() {
            self.create_dir_or_find_one(&prefix(n)).await?;
        }
        Ok(())
    }

    /// `create_dir`, accepting a directory already there.
    async fn create_dir_or_find_one(&self, path: &str) -> Result<()> {
        match self.create_dir(path).await {
            Err(e) if e.status() == Some(NtStatus::OBJECT_NAME_COLLISION) => {
                if self.metadata(path).await?.is_dir() {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            other => other,
        }
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
        self.across_links(path, |s: Share, p: String| async move {
            s.delete_here(&p, options).await
        })
        .await
    }

    async fn delete_here(&self, path: &str, options: u32) -> Result<()> {
        self.check_writable()?;
        // Setting the delete disposition (rather than DELETE_ON_CLOSE) makes the server report
        // DIRECTORY_NOT_EMPTY and similar refusals on this request, where they can be shown.
        // A delete that ran before its reply was lost with the session leaves the name gone,
        // which is all a second attempt would do.
        self.with_opened_or(
            path,
            AccessMask::DELETE,
            options,
            IfGoneOnRetry::Done,
            |id, _| async move {
                let info = FileDispositionInformation {
                    delete_pending: true,
                };
                self.tree
                    .core
                    .send(&SetInfoRequest::file_info(id, &info), self.tree.call())
                    .await
                    .map(|_| ())
            },
        )
        .await?;
        // A file made at this name later is another file: it must not get the lease key our
        // opens of the deleted one may still hold (MS-SMB2 3.3.5.9.8).
        self.tree
            .core
            .leases
            .deleted(self.tree.context, &wire_path(path)?, self.tree.names());
        Ok(())
    }

    /// Rename or move `from` to `to` (both share-relative); `if_exists` says whether an
    /// existing target file is overwritten.
    ///
    /// On a DFS root, both paths may lie behind links; when they lead to different shares
    /// the rename is refused with [`Error::DifferentShares`] (a local `mv` then copies).
    pub async fn rename(&self, from: &str, to: &str, if_exists: IfExists) -> Result<()> {
        self.across_links_to(from, to, |s: Share, from: String, to: String| async move {
            s.rename_here(&from, &to, if_exists).await
        })
        .await
    }

    /// The share and path a name that does not exist yet would be made at: its parent
    /// directory taken through the DFS links on the way (probed, so that a link not yet known
    /// is learned), and the name in it.
    pub(crate) async fn where_new_name_goes(&self, path: &str) -> Result<(Share, String)> {
        let path = path.trim_matches('/');
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        self.across_links(parent, |s: Share, p: String| async move {
            s.metadata_and_name_here(&p).await?;
            let there = if p.is_empty() {
                name.to_string()
            } else {
                format!("{p}/{name}")
            };
            Ok((s, there))
        })
        .await
    }

    /// Whether `other` is a view of the same tree connection (a snapshot view included).
    pub(crate) fn same_tree(&self, other: &Share) -> bool {
        Arc::ptr_eq(&self.tree, &other.tree)
    }

    /// [`Share::metadata`] on this share, with no DFS link on the way: a path behind a link
    /// fails with PATH_NOT_COVERED ([`crate::dfs::follow`] probes with it).
    pub(crate) async fn metadata_here(&self, path: &str) -> Result<Metadata> {
        Ok(self.metadata_and_name_here(path).await?.0)
    }

    /// [`Share::rename`] on this share, with no DFS link on the way.
    async fn rename_here(&self, from: &str, to: &str, if_exists: IfExists) -> Result<()> {
        self.check_writable()?;
        let replace = if_exists == IfExists::Replace;
        let target = wire_path(to)?;
        let posix = self.tree.is_posix();
        // To see whether the file is a reparse point (a symlink) in the CREATE reply, and read
        // it before the rename (see `Share::put_back_reparse_point`).
        let access =
            AccessMask::DELETE | AccessMask::SYNCHRONIZE | AccessMask::FILE_READ_ATTRIBUTES;
        // A rename that ran before its reply was lost with the session shows as `from` gone
        // and the same file at `to`.
        let reparse_point = self
            .with_opened_or(
                from,
                access,
                0,
                IfGoneOnRetry::DoneIfRenamedTo(to),
                |id, attributes| {
                    let target = target.clone();
                    async move {
                        let reparse_point = if attributes.0 & FileAttributes::REPARSE_POINT != 0 {
                            match self.raw_reparse_point(id).await {
                                Ok(raw) => Some(raw),
                                // Not one this client made (see above): renamed as it is.
                                Err(_) if !posix => None,
                                Err(e) => return Err(e),
                            }
                        } else {
                            None
                        };
                        let info = FileRenameInformation {
                            replace_if_exists: replace,
                            file_name: self.tree.wire_name(target),
                        };
                        self.tree
                            .core
                            .send(&SetInfoRequest::file_info(id, &info), self.tree.call())
                            .await?;
                        Ok(reparse_point)
                    }
                },
            )
            .await?;
        if let Some(Some(raw)) = reparse_point {
            match self.put_back_reparse_point(to, raw).await {
                Ok(()) => {}
                // Without the POSIX extensions the reparse point may be one the server
                // keeps through a rename (Windows) and refuses to have set again by this
                // user (a symlink needs a privilege there): the rename is done either way.
                Err(e) if !posix => {
                    tracing::debug!(to, error = %e, "setting a renamed reparse point again");
                }
                Err(e) => return Err(e),
            }
        }
        // The renamed file keeps its lease key under its new name; the old name is free for
        // a new file, which must get a key of its own (a server refuses one key for two
        // files, MS-SMB2 3.3.5.9.8).
        let source = wire_path(from)?;
        self.tree
            .core
            .leases
            .renamed_named(self.tree.context, &source, &target, self.tree.names());
        Ok(())
    }

    /// Size and free space of the share.
    pub async fn fs_info(&self) -> Result<FsInfo> {
        let fs: FileFsFullSizeInformation = self.file_system_info(64).await?;
        let unit = u64::from(fs.sectors_per_allocation_unit) * u64::from(fs.bytes_per_sector);
        Ok(FsInfo {
            total_bytes: fs.total_allocation_units.saturating_mul(unit),
            available_bytes: fs.caller_available_allocation_units.saturating_mul(unit),
            free_bytes: fs.actual_available_allocation_units.saturating_mul(unit),
            block_size: unit,
        })
    }

    /// The file system information class `T` of the share, asked on its root directory with
    /// an output buffer of `len` bytes.
    async fn file_system_info<T: QueryFsInfo>(&self, len: u32) -> Result<T> {
        self.with_handle(
            "",
            AccessMask::FILE_READ_ATTRIBUTES,
            CreateOptions::DIRECTORY_FILE,
            |id| async move {
                let req = QueryInfoRequest::fs_info::<T>(id, len);
                let resp = self.tree.core.send(&req, self.tree.call()).await?;
                decode(
                    Command::QUERY_INFO,
                    QueryInfoResponse::decode(&resp.msg).and_then(|r| r.fs_info()),
                )
            },
        )
        .await
    }

    /// How the share's file system treats names and what it supports (QUERY_INFO
    /// FileFsAttributeInformation, MS-FSCC 2.5.1): whether `foo` and `FOO` are one file,
    /// the longest name, sparse files, named streams.
    pub async fn fs_attributes(&self) -> Result<FsAttributes> {
        let fs: FileFsAttributeInformation = self.file_system_info(1024).await?;
        let has = |flag: u32| fs.file_system_attributes & flag != 0;
        Ok(FsAttributes {
            case_sensitive: has(FileFsAttributeInformation::CASE_SENSITIVE_SEARCH),
            case_preserving: has(FileFsAttributeInformation::CASE_PRESERVED_NAMES),
            sparse_files: has(FileFsAttributeInformation::SUPPORTS_SPARSE_FILES),
            named_streams: has(FileFsAttributeInformation::NAMED_STREAMS),
            max_name_length: fs.maximum_component_name_length,
            file_system_name: fs.file_system_name,
        })
    }

    /// Disconnect the tree. Open handles on it become invalid.
    pub async fn disconnect(&self) -> Result<()> {
        self.tree
            .core
            .send(&TreeDisconnectRequest {}, self.tree.call())
            .await
            .map(|_| ())
    }

    /// FSCTL_VALIDATE_NEGOTIATE_INFO (MS-SMB2 3.2.5.5, 3.0 and 3.0.2 only): the server echoes
    /// what it negotiated, signed, so a man in the middle that downgraded NEGOTIATE is caught.
    pub(crate) async fn validate_negotiate(&self) -> Result<()> {
        let core = &self.tree.core;
        if !core.signing {
            return Ok(());
        }
        let request = validate_negotiate_request(&core.config, core.client_guid);
        let resp = self.tree.core.send(&request, self.tree.call()).await?;
        let checked = check_validate_negotiate(&core.negotiated, &request, &resp);
        if let Err(Error::Protocol(why)) = &checked {
            // The negotiation was tampered with, or cannot be shown not to have been: the
            // connection goes (MS-SMB2 3.2.5.14.12), and the tree with it.
            core.addressing.trees.remove(self.tree.context.handle);
            let copy = match why {
                ProtocolError::UnprotectedNegotiateValidation => {
                    ProtocolError::UnprotectedNegotiateValidation
                }
                _ => ProtocolError::NegotiateValidation,
            };
            core.terminate(&ConnectionLossCause::ProtocolViolation {
                source: Arc::new(copy.into()),
            });
        }
        checked
    }
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("name", &self.tree.name)
            .field("tree", &self.tree.context.handle)
            .field("encrypted", &self.is_encrypted())
            .field("snapshot", &self.snapshot().map(|s| s.token))
            .finish()
    }
}

/// Keep the lease hold if the server granted a lease on our key, recording the state it
/// granted (which may be less than asked: RH when another client has the file open, say).
/// Without a lease in the reply (leasing off on the server) the hold is released.
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

/// Statuses with which a server turns down FILE_OPEN_BY_FILE_ID itself (rather than the id).
/// Samba (4.17, seen in the testbed) ignores the option and parses the 8-byte id as a file
/// name, which it finds invalid: OBJECT_NAME_INVALID. Other servers may say NOT_SUPPORTED,
/// NOT_IMPLEMENTED, INVALID_DEVICE_REQUEST or INVALID_PARAMETER. A stale id on a server that
/// does open by id is OBJECT_NAME_NOT_FOUND, which stays a plain status error.
fn by_id_unsupported(status: NtStatus) -> bool {
    matches!(
        status,
        NtStatus::OBJECT_NAME_INVALID
            | NtStatus::NOT_SUPPORTED
            | NtStatus::NOT_IMPLEMENTED
            | NtStatus::INVALID_PARAMETER
            | NtStatus::INVALID_DEVICE_REQUEST
    )
}
