//! Bringing a session back after it lost every channel (DESIGN §3 step 7, MS-SMB2 3.2.4.4).
//!
//! With no channel left there is nothing to bind a new channel to, and the server may already
//! have ended the session (Samba does when its last connection goes). So the session is
//! re-established: a new connection, NEGOTIATE with the same ClientGuid, SESSION_SETUP with
//! PreviousSessionId naming the old session (3.2.4.2.3; the server ends that one and keeps its
//! durable opens for us, 3.3.5.5.3), TREE_CONNECT for every tree in use, and a CREATE with
//! DH2C for every durable open (3.2.4.4, 2.2.13.2.12: same path, CreateGuid and lease key).
//! Only then does the channel join the session, under the new SessionId, TreeIds and FileIds
//! (see `addressing`), so the requests that waited for a channel go out already pointing at
//! what replaced their old ids.
//!
//! A server may refuse the reclaim even within its durable timeout: Samba denies it when the
//! file's stat changed after it took its durable cookie at the disconnect, which happens when
//! WRITEs that were in flight at the cut land afterwards (common on a loaded server), and it
//! forgets durable opens when smbd restarts. MS-SMB2 describes only the reclaim (3.2.4.4) and
//! says nothing of what a client does when it fails; we then open the file again by path with
//! the original access, share access, options and lease key, and keep the new handle only if
//! it is provably the same file (on-disk id and creation time, `durable::FileIdentity`). The
//! requests that waited for the session — every WRITE the server had not acknowledged among
//! them — then go to the new handle, so the caller's writes complete with the right bytes.
//! Only when that fails too is the open marked lost: every request on it fails with
//! `Error::HandleLost` naming the file, never silently.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rand::Rng;
use smb3_proto::msg::close::CloseRequest;
use smb3_proto::msg::create::{
    AccessMask, CreateContextRequest, CreateDisposition, CreateOptions, CreateRequest,
    CreateResponse, Lease, LeaseState, LeaseV2, OplockLevel, ShareAccess,
};
use smb3_proto::msg::fscc::FileAttributes;
use smb3_proto::msg::session_setup::SessionFlags;
use smb3_proto::msg::tree_connect::{ShareFlags, TreeConnectRequest, TreeConnectResponse};
use smb3_proto::msg::RequestBody;
use smb3_proto::{Command, Dialect, NtStatus};

use crate::addressing::{DurableGrant, FileIdentity, OpenState, ServerHandle};
use crate::background::binding::check_same_server;
use crate::background::manager;
use crate::channel::{Channel, Request, Response};
use crate::durable::request_durable;
use crate::engine::SessionCore;
use crate::error::decode;
use crate::error::{Error, HandleLossCause, ReclaimRefusal, ReopenFailure, Result};
use crate::lease;
use crate::multichannel::channel_set::PathInfo;
use crate::security::SessionSecurity;
use crate::session;
use crate::session::{check_validate_negotiate, validate_negotiate_request};
use crate::tasks::{self, TaskKind};

/// How often the session's channels are looked at.
const CHECK: Duration = Duration::from_millis(50);
/// First and last pause between attempts to re-establish the session. The cap is short: a
/// server that restarts is back within seconds, and requests wait for the session.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// Reclaim CREATEs in flight at once.
const RECLAIMS_IN_FLIGHT: usize = 16;
/// How long a server keeps a disconnected durable open whose grant named no timeout (Windows
/// keeps one 2 minutes, Samba 1 minute; MS-SMB2 3.3.5.9.10 leaves it to the server).
const SERVER_DEFAULT_DURABLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Added to a durable timeout for the server's scavenger, which runs a little after it.
const LINGER_MARGIN: Duration = Duration::from_secs(5);

/// Start watching a session for the loss of its last channel; the task ends with the session.
pub(crate) fn start(core: &Arc<SessionCore>) {
    tasks::spawn(TaskKind::Reconnector, run(Arc::downgrade(core)));
}

async fn run(weak: Weak<SessionCore>) {
    let mut failures = 0u32;
    // When the last channel was found dead, for the recovery time.
    let mut lost_at: Option<Instant> = None;
    loop {
        tokio::time::sleep(pause_before_look(failures)).await;
        let Some(core) = weak.upgrade() else { return };
        if core.logged_off() {
            return;
        }
        if core.multichannel.channels.any_alive() {
            failures = 0;
            lost_at = None;
            continue;
        }
        let since = *lost_at.get_or_insert_with(Instant::now);
        match reestablish(&core).await {
            Ok(outcome) => {
                let took = since.elapsed();
                core.multichannel.failover.reestablished(
                    took,
                    outcome.reclaimed,
                    outcome.reopened,
                    outcome.lost,
                );
                tracing::info!(
                    took_ms = took.as_millis() as u64,
                    reclaimed = outcome.reclaimed,
                    reopened = outcome.reopened,
                    lost = outcome.lost,
                    "session re-established after losing every channel"
                );
                failures = 0;
                lost_at = None;
            }
            Err(e) => {
                failures += 1;
                tracing::info!(error = %e, failures, "re-establishing the session failed; trying again");
            }
        }
    }
}

/// The pause before the next look at the session's channels after `failures` attempts in a
/// row to re-establish it failed: the check interval while none has, then jittered backoff
/// from 100 ms (the first retry) doubling to 2 s.
fn pause_before_look(failures: u32) -> Duration {
    if failures == 0 {
        return CHECK;
    }
    let base = RETRY_MIN
        .saturating_mul(1 << (failures - 1).min(8))
        .min(RETRY_MAX);
    base.mul_f64(rand::rng().random_range(0.5..1.0))
}

/// What a re-establishment achieved.
struct Outcome {
    reclaimed: u64,
    reopened: u64,
    lost: u64,
}

/// How one open came back.
enum Restored {
    /// The server gave the durable open back (DH2C).
    Reclaimed,
    /// The server would not; the same file was opened again by path.
    Reopened,
}

/// Why a reclaim did not give the open back.
enum NotReclaimed {
    /// The server did not keep the open for us: it was not durable, or the server refused
    /// the DH2C. Opening the file again by path may still save it.
    Refused(ReclaimRefusal),
    /// The request itself failed (connection, malformed reply).
    Failed(Error),
    /// The server is not ready yet (see [`server_not_ready`]).
    NotReady(String),
}

/// Why an open did not come back.
enum Unrestored {
    /// For good: the open is lost.
    Lost(HandleLossCause),
    /// The server answered as one still starting does: the whole re-establishment is tried
    /// again, as after a lost connection.
    NotReady(String),
}

/// Why opening a file again by path did not save its open.
enum Reopen {
    /// For good.
    Failed(ReopenFailure),
    /// The server answered as one still starting does (see [`Unrestored::NotReady`]).
    NotReady(String),
}

/// Whether a refusal says the server is not ready yet rather than no. Right after it starts,
/// Samba answers TREE_CONNECT with STATUS_NO_MEMORY for a moment (its notify daemon is not up
/// yet); a server short of resources or connections says so with the other two. Taken at its
/// word, such an answer would lose every open of the share for a moment's delay.
fn server_not_ready(status: NtStatus) -> bool {
    matches!(
        status,
        NtStatus::NO_MEMORY | NtStatus::INSUFFICIENT_RESOURCES | NtStatus::REQUEST_NOT_ACCEPTED
    )
}

/// Connect, set the session up again, reconnect trees, reclaim opens, and put the new
/// channel into service.
async fn reestablish(core: &Arc<SessionCore>) -> Result<Outcome, String> {
    let mut last_error = String::from("no server address to try");
    for addr in candidate_addresses(core) {
        match session_on(core, addr).await {
            Ok((channel, new_id, security)) => {
                let outcome = restore(core, &channel, new_id).await?;
                core.addressing.session.replace(new_id, security);
                install(core, channel);
                return Ok(outcome);
            }
            Err(e) => last_error = format!("{addr}: {e}"),
        }
    }
    Err(last_error)
}

/// The address the session was set up on first, then the server's other interfaces.
fn candidate_addresses(core: &SessionCore) -> Vec<SocketAddr> {
    let port = core.server_addr.port();
    let mut out = vec![core.server_addr];
    for ip in core.multichannel.server_addresses() {
        let addr = SocketAddr::new(ip, port);
        if !out.contains(&addr) {
            out.push(addr);
        }
    }
    out
}

/// A new connection to `addr` with a new session that replaces the old one.
async fn session_on(
    core: &SessionCore,
    addr: SocketAddr,
) -> Result<(Channel, u64, Option<Arc<SessionSecurity>>), String> {
    let opts = core.channel_options();
    let (channel, unsolicited) = Channel::connect(addr, None, &opts)
        .await
        .map_err(|e| e.to_string())?;
    lease::forward_unsolicited(unsolicited, core.breaks.clone());
    let negotiated =
        session::negotiate(&channel, &core.config, core.client_guid, &core.server_name)
            .await
            .map_err(|e| e.to_string())?;
    // Sizes, signing and sealing were fixed for the session's life when it was first set up.
    check_same_server(&core.negotiated, &negotiated).map_err(|e| e.to_string())?;
    if negotiated.max_read < core.negotiated.max_read
        || negotiated.max_write < core.negotiated.max_write
        || negotiated.max_transact < core.negotiated.max_transact
    {
        return Err("the server now offers smaller reads or writes than before".into());
    }
    let previous = core.addressing.session.id();
    let established = session::session_setup(
        &channel,
        &negotiated,
        &core.creds,
        &core.server_name,
        &core.config,
        previous,
    )
    .await
    .map_err(|e| e.to_string())?;
    // Requests are signed and sealed as decided when the session was first set up.
    let encrypts = established.flags.has(SessionFlags::ENCRYPT_DATA);
    if established.security.is_some() != core.signing || (encrypts && !core.encrypt_all) {
        return Err("the new session's security differs from the old one's".into());
    }
    if let Some(sec) = &established.security {
        channel.set_crypto(sec.clone());
    }
    Ok((channel, established.session_id, established.security))
}

/// Connect every tree again and reclaim every open, on `channel` under `session_id`.
async fn restore(
    core: &SessionCore,
    channel: &Channel,
    session_id: u64,
) -> Result<Outcome, String> {
    let direct = Direct {
        core,
        channel,
        session_id,
    };
    let mut failed_trees = Vec::new();
    let mut validated = !matches!(core.negotiated.dialect, Dialect::Smb300 | Dialect::Smb302);
    for (handle, share) in core.addressing.trees.all() {
        match direct.tree_connect(&share).await {
            Ok((tree_id, encrypt)) => {
                core.addressing.trees.reconnected(handle, tree_id);
                // 3.0 / 3.0.2: check the new connection's NEGOTIATE was not tampered with
                // (MS-SMB2 3.2.5.5), as on the first tree of the session.
                if !validated && core.signing && share != "IPC$" {
                    direct
                        .validate_negotiate(tree_id, encrypt)
                        .await
                        .map_err(|e| format!("validating the new connection: {e}"))?;
                    validated = true;
                }
            }
            // The server answered, so the connection is good; the share is not. Its opens
            // are lost; other trees may still come back.
            Err(Error::Status { status, .. }) if !server_not_ready(status) => {
                failed_trees.push((handle, status))
            }
            Err(e) => return Err(format!("reconnecting share {share}: {e}")),
        }
    }
    let opens = core.durable.live();
    let results: Vec<(Arc<OpenState>, std::result::Result<Restored, Unrestored>)> =
        futures_util::stream::iter(opens)
            .map(|open| {
                let failed_trees = &failed_trees;
                let direct = &direct;
                async move {
                    let result = match failed_trees.iter().find(|(h, _)| *h == open.tree.handle) {
                        Some((_, status)) => {
                            Err(Unrestored::Lost(HandleLossCause::ShareNotReconnected {
                                status: *status,
                            }))
                        }
                        None => direct.restore_open(&open).await,
                    };
                    (open, result)
                }
            })
            .buffer_unordered(RECLAIMS_IN_FLIGHT)
            .collect()
            .await;
    // The connection itself failed, or the server is not ready: try the whole
    // re-establishment again, before any open is marked lost.
    for (open, result) in &results {
        match result {
            Err(Unrestored::NotReady(reason)) => {
                return Err(format!("{}: {reason}", open.params.display_path()))
            }
            Err(Unrestored::Lost(cause)) if channel.is_dead() => return Err(cause.to_string()),
            _ => {}
        }
    }
    let mut outcome = Outcome {
        reclaimed: 0,
        reopened: 0,
        lost: 0,
    };
    for (open, result) in results {
        match result {
            Ok(Restored::Reclaimed) => outcome.reclaimed += 1,
            Ok(Restored::Reopened) => {
                tracing::info!(path = %open.params.display_path(), "open reclaim refused; the same file was opened again");
                outcome.reopened += 1;
            }
            Err(Unrestored::NotReady(reason)) => {
                // Returned above: the whole re-establishment is tried again.
                tracing::debug!(path = %open.params.display_path(), %reason, "server not ready");
            }
            Err(Unrestored::Lost(cause)) => {
                tracing::warn!(path = %open.params.display_path(), %cause, "open not reclaimed");
                open.mark_lost(cause);
                // The server may still tie the lost open's lease key to the file it had (or
                // to a file since deleted) and refuses that key for any other file: the next
                // open of the path takes a fresh key, even while the lost File lives on.
                if let Some(key) = open.lease_key {
                    core.leases.retire(&key);
                }
                outcome.lost += 1;
            }
        }
    }
    Ok(outcome)
}

/// The new channel joins the session; the manager binds the other channels from there.
fn install(core: &SessionCore, channel: Channel) {
    core.multichannel.rebinding_begins();
    let member = core
        .multichannel
        .channels
        .add(channel, None, PathInfo::default(), true);
    manager::watch_for_death(&core.multichannel, &member);
    core.multichannel.drop_dead_if_unmanaged();
    core.multichannel.after_reestablish();
}

/// Requests sent straight on the new channel, before it joins the session.
struct Direct<'a> {
    core: &'a SessionCore,
    channel: &'a Channel,
    session_id: u64,
}

impl Direct<'_> {
    /// The session's usual request (signing, sealing, timeout), under the new SessionId
    /// and a TreeId of the new session.
    fn request<B: RequestBody>(&self, body: &B, tree_id: u32, encrypt_tree: bool) -> Request {
        let mut req = self.core.request(body, None);
        req.session_id = self.session_id;
        req.tree_id = tree_id;
        req.encrypt |= encrypt_tree;
        req
    }

    async fn send<B: RequestBody>(
        &self,
        body: &B,
        tree_id: u32,
        encrypt_tree: bool,
    ) -> Result<Response> {
        let req = self.request(body, tree_id, encrypt_tree);
        self.channel.call(req).await?.check(&[])
    }

    /// TREE_CONNECT; returns the new TreeId and whether the share wants encryption.
    async fn tree_connect(&self, share: &str) -> Result<(u32, bool)> {
        let body = TreeConnectRequest::new(&self.core.server_name, share);
        let resp = self.send(&body, 0, false).await?;
        let tc = decode(
            Command::TREE_CONNECT,
            TreeConnectResponse::decode(&resp.msg),
        )?;
        Ok((
            resp.header.tree_id,
            tc.share_flags.has(ShareFlags::ENCRYPT_DATA),
        ))
    }

    async fn validate_negotiate(&self, tree_id: u32, encrypt: bool) -> Result<()> {
        let body = validate_negotiate_request(&self.core.config, self.core.client_guid);
        let resp = self.send(&body, tree_id, encrypt).await?;
        check_validate_negotiate(&self.core.negotiated, &body, &resp)
    }

    /// Get `open` back: reclaim it, or, when the server did not keep it, open the same file
    /// again by path.
    async fn restore_open(&self, open: &OpenState) -> std::result::Result<Restored, Unrestored> {
        let refused = match self.reclaim(open).await {
            Ok(()) => return Ok(Restored::Reclaimed),
            Err(NotReclaimed::Failed(e)) => {
                return Err(Unrestored::Lost(HandleLossCause::ReclaimFailed {
                    source: Arc::new(e),
                }))
            }
            Err(NotReclaimed::NotReady(why)) => return Err(Unrestored::NotReady(why)),
            Err(NotReclaimed::Refused(why)) => why,
        };
        let old_open_lingers = lingers(open);
        self.reopen(open)
            .await
            .map(|()| {
                self.keep_lease_key_for(open, old_open_lingers);
                Restored::Reopened
            })
            .map_err(|e| match e {
                Reopen::Failed(reopen) => Unrestored::Lost(HandleLossCause::NotReclaimed {
                    refusal: refused,
                    reopen,
                }),
                Reopen::NotReady(why) => Unrestored::NotReady(why),
            })
    }

    /// A refused reclaim does not end the old open on the server: Samba keeps it, disconnected
    /// and with its lease, until its durable timeout (`lingers`), and defers any other open of
    /// the file that would break that lease until then (it cannot deliver the break). Our own
    /// opens of the file under the same lease key share that lease and are not held up, so
    /// once `open` is reopened on the same file its key stays tied to the file until the old
    /// open is gone, even after our last open of it is closed. (Not when the file at the path
    /// is another one: the server refuses a key already in use for another file.)
    fn keep_lease_key_for(&self, open: &OpenState, lingers: Duration) {
        let Some(hold) = open.lease_key.and_then(|key| self.core.leases.hold(&key)) else {
            return;
        };
        tasks::spawn(TaskKind::LeaseKeyHold, async move {
            tokio::time::sleep(lingers + LINGER_MARGIN).await;
            drop(hold);
        });
    }

    /// The server's TreeId now for the tree `open` belongs to.
    fn tree_id(&self, open: &OpenState) -> u32 {
        self.core
            .addressing
            .trees
            .server_id(open.tree.handle)
            .unwrap_or(0)
    }

    /// CREATE with DH2C for `open` (MS-SMB2 3.2.4.4); on success its FileId is replaced.
    async fn reclaim(&self, open: &OpenState) -> std::result::Result<(), NotReclaimed> {
        let handle = open.handle();
        let (Some(grant), Some(create_guid)) = (handle.durable, handle.create_guid) else {
            return Err(NotReclaimed::Refused(ReclaimRefusal::NotDurable));
        };
        let body = reclaim_request(open, grant.flags, create_guid);
        let resp = self
            .send(&body, self.tree_id(open), open.tree.encrypt)
            .await
            .map_err(|e| match e {
                Error::Status { status, .. } if server_not_ready(status) => {
                    NotReclaimed::NotReady(format!("reclaiming it: {status}"))
                }
                Error::Status { status, .. } => {
                    NotReclaimed::Refused(ReclaimRefusal::from_status(status))
                }
                other => NotReclaimed::Failed(other),
            })?;
        let created = decode(Command::CREATE, CreateResponse::decode(&resp.msg))
            .map_err(NotReclaimed::Failed)?;
        // The server finds the open to reconnect by its persistent FileId and answers with
        // that open: only the volatile part may be new (MS-SMB2 3.3.5.9.12, 2.2.14.1). Another
        // persistent FileId is not our open, and writing through it could reach another file:
        // give back what the server handed us and take the refused-reclaim path, which opens
        // the file by path and keeps it only if it is provably the same file.
        let ours = handle.file_id.persistent;
        if created.file_id.persistent != ours {
            let close = CloseRequest::new(created.file_id);
            if let Err(e) = self
                .send(&close, self.tree_id(open), open.tree.encrypt)
                .await
            {
                tracing::debug!(error = %e, "closing the handle a reclaim answered with failed");
            }
            return Err(NotReclaimed::Refused(ReclaimRefusal::AnotherOpen {
                ours,
                theirs: created.file_id.persistent,
            }));
        }
        self.record_lease(open, &created);
        open.replace_file_id(created.file_id);
        Ok(())
    }

    /// Open `open`'s file again by path, as the original open asked for it (access, share
    /// access, options, lease key and caching) and with a new durable handle, and take the
    /// new handle only if it is the same file. The disposition is OPEN whatever the original
    /// was: the file must not be truncated or created again.
    async fn reopen(&self, open: &OpenState) -> std::result::Result<(), Reopen> {
        let tree_id = self.tree_id(open);
        let (mut body, create_guid) = reopen_request(open);
        let resp = match self.send(&body, tree_id, open.tree.encrypt).await {
            // The server still ties our lease key to the file it had open (MS-SMB2 3.3.5.9.8
            // refuses a key already in use for another file): a sign the file at the path
            // is another one, but only the identity check below can say so for certain.
            // Ask again without a lease.
            Err(Error::Status { status, .. })
                if status == NtStatus::INVALID_PARAMETER && open.lease_key.is_some() =>
            {
                without_lease(&mut body);
                self.send(&body, tree_id, open.tree.encrypt).await
            }
            sent => sent,
        }
        .map_err(|e| match e {
            Error::Status { status, .. } if server_not_ready(status) => {
                Reopen::NotReady(format!("opening it again by path: {status}"))
            }
            other => Reopen::Failed(ReopenFailure::Failed {
                source: Arc::new(other),
            }),
        })?;
        let created = decode(Command::CREATE, CreateResponse::decode(&resp.msg)).map_err(|e| {
            Reopen::Failed(ReopenFailure::Failed {
                source: Arc::new(e),
            })
        })?;
        let found = FileIdentity {
            creation_time: created.creation_time,
            disk_id: created.on_disk_id(),
        };
        if let Err(why) = open.identity.same_file(&found) {
            // Not ours to keep open.
            let close = CloseRequest::new(created.file_id);
            if let Err(e) = self.send(&close, tree_id, open.tree.encrypt).await {
                tracing::debug!(error = %e, "closing the handle of another file failed");
            }
            return Err(Reopen::Failed(ReopenFailure::AnotherFile(why)));
        }
        self.record_lease(open, &created);
        open.replace_handle(ServerHandle {
            file_id: created.file_id,
            create_guid,
            durable: created
                .durable_v2()
                .map(|(timeout_ms, flags)| DurableGrant { timeout_ms, flags }),
        });
        Ok(())
    }

    /// Take the lease state the server granted to a reclaim or reopen under `open`'s key;
    /// none when it granted no lease.
    fn record_lease(&self, open: &OpenState, created: &CreateResponse) {
        let Some(key) = open.lease_key else { return };
        match created.lease() {
            Some(granted) if granted.key == key => {
                self.core
                    .leases
                    .record_state(&key, granted.state, granted.v2.map(|v| v.epoch))
            }
            Some(_) => {}
            None => self.core.leases.record_state(&key, LeaseState(0), None),
        }
    }
}

/// How long the server keeps `open` after a disconnect: its durable grant's timeout, or the
/// usual default when the grant named none.
fn lingers(open: &OpenState) -> Duration {
    open.handle()
        .durable
        .map(|grant| grant.timeout_ms)
        .filter(|&ms| ms > 0)
        .map_or(SERVER_DEFAULT_DURABLE_TIMEOUT, |ms| {
            Duration::from_millis(u64::from(ms))
        })
}

/// The reclaim CREATE: [`create_again`] with DH2C naming the old FileId and the CreateGuid
/// (MS-SMB2 2.2.13.2.12); a DH2C request carries no DH2Q.
fn reclaim_request(open: &OpenState, durable_flags: u32, create_guid: [u8; 16]) -> CreateRequest {
    let mut req = create_again(open);
    req.contexts
        .push(CreateContextRequest::DurableHandleReconnectV2 {
            file_id: open.file_id(),
            create_guid,
            flags: durable_flags,
        });
    req
}

/// The CREATE that opens the file again after a refused reclaim: [`create_again`] with a
/// new DH2Q when the original open asked for a durable handle (its new CreateGuid is
/// returned), and QFid to recognise the file.
fn reopen_request(open: &OpenState) -> (CreateRequest, Option<[u8; 16]>) {
    let mut req = create_again(open);
    let create_guid = open.handle().create_guid.map(|_| request_durable(&mut req));
    req.contexts.push(CreateContextRequest::QueryOnDiskId);
    (req, create_guid)
}

/// Take the lease request out of a CREATE.
fn without_lease(req: &mut CreateRequest) {
    req.oplock_level = OplockLevel::NONE;
    req.contexts
        .retain(|c| !matches!(c, CreateContextRequest::Lease(_)));
}

/// A CREATE that opens `open`'s file again as the original open asked for it: the same path,
/// access, share access, options and attributes, disposition OPEN, and the lease context under
/// the same key (MS-SMB2 3.2.4.4). The caller adds the durable context: DH2C for a reclaim (a
/// DH2C request carries no DH2Q), DH2Q for a reopen.
fn create_again(open: &OpenState) -> CreateRequest {
    let p = &open.params;
    let mut req = CreateRequest::new(
        p.wire_path.clone(),
        p.desired_access,
        CreateDisposition::OPEN,
    );
    // Sharing, backup intent and the rest of the options, the file id an open by id named,
    // and the snapshot a snapshot's file was read from: all as first asked.
    req.share_access = ShareAccess(p.share_access);
    req.create_options = CreateOptions(p.create_options);
    req.file_attributes = FileAttributes(p.file_attributes);
    req.file_id_name = p.file_id_name;
    crate::timewarp::add_timewarp(&mut req, p.timewarp);
    if p.posix {
        // A POSIX open, with `/` for separators as the first one was sent (`Tree::posix_open`).
        crate::posix::add_posix_context(&mut req, 0);
        req.name = req.name.replace('\\', "/");
    }
    if let Some(key) = open.lease_key {
        let mut state = LeaseState::READ_CACHING | LeaseState::HANDLE_CACHING;
        if p.desired_access & AccessMask::FILE_WRITE_DATA != 0 {
            state |= LeaseState::WRITE_CACHING;
        }
        req.oplock_level = OplockLevel::LEASE;
        req.contexts.push(CreateContextRequest::Lease(Lease {
            key,
            state: LeaseState(state),
            flags: 0,
            v2: Some(LeaseV2 {
                parent_key: [0; 16],
                epoch: 0,
            }),
        }));
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addressing::OpenParams;
    use crate::addressing::TreeContext;
    use smb3_proto::msg::FileId;

    const OLD: FileId = FileId {
        persistent: 0x11,
        volatile: 0x22,
    };

    #[test]
    fn failed_reestablishments_back_off_from_100_ms_doubling_to_2_s_with_jitter() {
        assert_eq!(
            pause_before_look(0),
            CHECK,
            "no failure: the plain check interval"
        );
        for failures in 1..=12u32 {
            let base = Duration::from_millis(100 << (failures - 1).min(8)).min(RETRY_MAX);
            for _ in 0..16 {
                let pause = pause_before_look(failures);
                assert!(
                    base / 2 <= pause && pause <= base,
                    "failure {failures}: {pause:?} not within {base:?} jittered down by half"
                );
            }
        }
        assert_eq!(RETRY_MAX, Duration::from_secs(2));
    }

    /// A durable open for writing under lease key [5; 16] and CreateGuid [6; 16].
    fn writer_open() -> OpenState {
        OpenState::new(
            ServerHandle {
                file_id: OLD,
                create_guid: Some([6; 16]),
                durable: Some(DurableGrant {
                    timeout_ms: 60_000,
                    flags: 0,
                }),
            },
            TreeContext {
                handle: 1,
                encrypt: false,
            },
            OpenParams {
                wire_path: "dir\\f.bin".into(),
                desired_access: AccessMask::FILE_WRITE_DATA | AccessMask::FILE_READ_ATTRIBUTES,
                share_access: ShareAccess::ALL,
                create_options: CreateOptions::NON_DIRECTORY_FILE,
                file_attributes: FileAttributes::NORMAL,
                timewarp: None,
                file_id_name: None,
                posix: false,
            },
            Some([5; 16]),
            FileIdentity {
                creation_time: 7,
                disk_id: Some([1; 32]),
            },
        )
    }

    fn has_lease(req: &CreateRequest, key: [u8; 16], write: bool) -> bool {
        req.oplock_level == OplockLevel::LEASE
            && req.contexts.iter().any(|c| {
                matches!(
                    c,
                    CreateContextRequest::Lease(l)
                        if l.key == key && l.state.has(LeaseState::WRITE_CACHING) == write
                )
            })
    }

    #[test]
    fn a_reopen_asks_for_the_same_file_as_before_without_truncating_it() {
        let open = writer_open();
        let (req, create_guid) = reopen_request(&open);
        assert_eq!(req.name, "dir\\f.bin");
        assert_eq!(req.create_disposition, CreateDisposition::OPEN);
        assert_eq!(req.desired_access.0, open.params.desired_access);
        assert_eq!(req.share_access.0, ShareAccess::ALL);
        assert!(has_lease(&req, [5; 16], true));
        // A new durable handle under a new CreateGuid, and the on-disk id to compare.
        let new_guid = create_guid.expect("asks for a durable handle");
        assert_ne!(new_guid, [6; 16]);
        assert!(req.contexts.iter().any(|c| matches!(
            c,
            CreateContextRequest::DurableHandleV2 { create_guid, .. } if *create_guid == new_guid
        )));
        assert!(req
            .contexts
            .iter()
            .any(|c| matches!(c, CreateContextRequest::QueryOnDiskId)));
        assert!(!req
            .contexts
            .iter()
            .any(|c| matches!(c, CreateContextRequest::DurableHandleReconnectV2 { .. })));
    }

    #[test]
    fn reclaim_and_reopen_keep_sharing_options_and_the_snapshot() {
        // A backup's open: read sharing only, backup intent, in a snapshot.
        let mut open = writer_open();
        open.params.share_access = ShareAccess::READ;
        open.params.create_options =
            CreateOptions::NON_DIRECTORY_FILE | CreateOptions::OPEN_FOR_BACKUP_INTENT;
        open.params.timewarp = Some(0x01dd_0000_0000_0000);
        let (reopen, _) = reopen_request(&open);
        let reclaim = reclaim_request(&open, 0, [6; 16]);
        for req in [reopen, reclaim] {
            assert_eq!(req.share_access.0, ShareAccess::READ);
            assert_eq!(req.create_options.0, open.params.create_options);
            assert_eq!(req.file_id_name, None);
            assert!(req.contexts.iter().any(|c| matches!(
                c,
                CreateContextRequest::TimewarpToken { timestamp } if *timestamp == 0x01dd_0000_0000_0000
            )));
        }
    }

    #[test]
    fn a_reopen_can_do_without_its_lease() {
        let (mut req, _) = reopen_request(&writer_open());
        without_lease(&mut req);
        assert_eq!(req.oplock_level, OplockLevel::NONE);
        assert!(!req
            .contexts
            .iter()
            .any(|c| matches!(c, CreateContextRequest::Lease(_))));
        // The rest of the request stays as it was.
        assert!(req
            .contexts
            .iter()
            .any(|c| matches!(c, CreateContextRequest::QueryOnDiskId)));
    }

    #[test]
    fn the_reclaim_names_the_old_open_its_guid_and_lease_key() {
        let old = OLD;
        let open = writer_open();
        let req = reclaim_request(&open, 0, [6; 16]);
        assert_eq!(req.name, "dir\\f.bin");
        assert_eq!(req.create_disposition, CreateDisposition::OPEN);
        assert_eq!(req.oplock_level, OplockLevel::LEASE);
        assert!(req.contexts.iter().any(|c| matches!(
            c,
            CreateContextRequest::DurableHandleReconnectV2 { file_id, create_guid, .. }
                if *file_id == old && *create_guid == [6; 16]
        )));
        assert!(has_lease(&req, [5; 16], true));
        assert!(
            !req.contexts
                .iter()
                .any(|c| matches!(c, CreateContextRequest::DurableHandleV2 { .. })),
            "a reclaim carries no DH2Q"
        );
    }
}
