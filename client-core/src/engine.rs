//! The engine every request goes through: the session's state (`SessionCore`) and the one
//! request path (address, pick a channel, send, await, replay). The public API (`Client`,
//! `Share`, `File`, `DirWatch`) and the background tasks (multichannel manager, binding,
//! watchdog, reconnect, lease breaks) sit on top of it; it imports none of them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smb3_proto::msg::RequestBody;
use smb3_proto::replay::Replay;
use smb3_proto::{Command, NtStatus};

use crate::addressing::{Addressing, OpenState, Target, TreeContext};
use crate::auth::SessionCredentials;
use crate::channel::{BufferPool, ChannelOptions, OnAbandoned, Request, Response};
use crate::config::ClientConfig;
use crate::durable::DurableOpens;
use crate::error::{ConnectionLossCause, ProtocolError, Result};
use crate::lease::{BreakSink, LeaseTable};
use crate::logoff_wait::BackgroundWork;
use crate::multichannel::state::Multichannel;
use crate::negotiated::Negotiated;
use crate::orphans::OrphanCount;

pub(crate) mod renewal;
pub(crate) mod replay;

/// How one request is sent, beyond its body: what it is about, which non-success statuses
/// its caller handles itself, and what becomes of a reply that arrives after the caller
/// gave up (see [`Request::on_abandoned`]).
#[derive(Default)]
pub(crate) struct Call<'a> {
    pub(crate) target: Target,
    pub(crate) also_ok: &'a [NtStatus],
    pub(crate) on_abandoned: Option<OnAbandoned>,
    /// A request of the session's own machinery (the manager's interface queries): replayed
    /// on a surviving channel like any other, but it never waits for a lost channel to come
    /// back (bringing channels back is that machinery's job, so waiting would stall the very
    /// thing it waits for), and its loss is not counted as a caller's.
    pub(crate) internal: bool,
    /// Told when the server answers with an interim STATUS_PENDING (see
    /// [`Request::on_interim`]).
    pub(crate) on_interim: Option<Arc<tokio::sync::Notify>>,
}

impl<'a> Call<'a> {
    /// About the session only (TREE_CONNECT, LOGOFF, ECHO).
    pub(crate) fn session() -> Call<'a> {
        Call::default()
    }

    /// About a tree: a path operation, or a handle that no reconnect reclaims.
    pub(crate) fn tree(tree: TreeContext) -> Call<'a> {
        Call {
            target: Target::tree(Some(tree)),
            ..Call::default()
        }
    }

    /// About an open made by `Share::open`, whose FileId a reconnect may replace.
    pub(crate) fn open(open: &Arc<OpenState>) -> Call<'a> {
        Call {
            target: Target {
                tree: Some(open.tree),
                open: Some(open.clone()),
            },
            ..Call::default()
        }
    }

    /// Also return a reply with one of these statuses instead of an error.
    pub(crate) fn allowing(mut self, also_ok: &'a [NtStatus]) -> Call<'a> {
        self.also_ok = also_ok;
        self
    }

    /// Sent by the session's own machinery (see `internal`).
    pub(crate) fn internal(mut self) -> Call<'a> {
        self.internal = true;
        self
    }

    /// Hand a reply nobody waits for any more to `hook`.
    pub(crate) fn on_abandoned(mut self, hook: OnAbandoned) -> Call<'a> {
        self.on_abandoned = Some(hook);
        self
    }

    /// Notify `told` when the server answers with an interim STATUS_PENDING.
    pub(crate) fn telling_interim(mut self, told: Arc<tokio::sync::Notify>) -> Call<'a> {
        self.on_interim = Some(told);
        self
    }
}

/// Everything requests need to know about the session.
pub(crate) struct SessionCore {
    /// The session's channels, their dispatch and the multichannel manager's state.
    pub(crate) multichannel: Multichannel,
    /// SessionId, keys and trees: replaced when the session is re-established after every
    /// channel was lost.
    pub(crate) addressing: Addressing,
    pub(crate) negotiated: Negotiated,
    /// Sign requests (authenticated, non-guest session).
    pub(crate) signing: bool,
    /// Encrypt every request (session-wide ENCRYPT_DATA or client choice).
    pub(crate) encrypt_all: bool,
    pub(crate) can_encrypt: bool,
    pub(crate) config: ClientConfig,
    pub(crate) server_name: String,
    /// The address the session was set up on.
    pub(crate) server_addr: SocketAddr,
    pub(crate) client_guid: [u8; 16],
    /// Binding a channel authenticates again as the same user (MS-SMB2 3.2.4.2.3.1).
    pub(crate) creds: SessionCredentials,
    pub(crate) logged_off: AtomicBool,
    /// Every channel forwards its break notifications here (see `lease`).
    pub(crate) breaks: BreakSink,
    /// Lease keys of the files open now, one per file.
    pub(crate) leases: Arc<LeaseTable>,
    /// Durable opens, for a reconnect to reclaim.
    pub(crate) durable: Arc<DurableOpens>,
    /// Buffers for large replies, shared by every channel of the session.
    pub(crate) frame_buffers: BufferPool,
    /// Handles closed because their caller gave up on them (see `orphans`).
    pub(crate) orphans: OrphanCount,
    /// CLOSEs sent in the background and not answered yet (see `settle`).
    pub(crate) background: BackgroundWork,
    /// Reauthentications after the session's authentication expired (see `renewal`).
    pub(crate) renewal: renewal::Renewal,
    /// How the session authenticated (`Client::identity`).
    pub(crate) mechanism: crate::auth::AuthMechanism,
}

impl Drop for SessionCore {
    fn drop(&mut self) {
        self.multichannel.shutdown();
    }
}

/// How every channel of a session with `config` is set up.
pub(crate) fn channel_options(config: &ClientConfig, frame_buffers: &BufferPool) -> ChannelOptions {
    ChannelOptions {
        connect_timeout: config.connect_timeout,
        credit_target: config.credit_target,
        frame_buffers: frame_buffers.clone(),
        quic: (config.transport == crate::config::Transport::Quic).then(|| config.quic.clone()),
    }
}

impl SessionCore {
    /// How a new channel of this session (extra, or replacing a lost one) is set up.
    pub(crate) fn channel_options(&self) -> ChannelOptions {
        channel_options(&self.config, &self.frame_buffers)
    }

    /// Build a request for this session (and tree), choosing signing and sealing.
    /// Ids are the current ones, for callers that send the request on a channel themselves.
    pub(crate) fn request<B: RequestBody>(&self, body: &B, tree: Option<TreeContext>) -> Request {
        let mut req = self.prepare(body, tree);
        // Without an open there is nothing that can be lost: addressing cannot fail.
        let _ = self.addressing.address(&mut req, &Target::tree(tree));
        req
    }

    /// A request with signing, sealing and timeout chosen but no ids yet: the replay loop
    /// stamps them before every send.
    pub(crate) fn prepare<B: RequestBody>(&self, body: &B, tree: Option<TreeContext>) -> Request {
        let mut req = Request::new(body);
        req.encrypt = self.encrypt_all || tree.is_some_and(|t| t.encrypt);
        req.sign = self.signing;
        req.timeout = if B::COMMAND == Command::CHANGE_NOTIFY {
            // Completes only when something changes (MS-SMB2 3.3.5.19): maybe never. The
            // caller ends the wait by dropping the future, which cancels it.
            Duration::MAX
        } else {
            self.config.timeout_for(body.credit_payload())
        };
        req
    }

    /// Send one request and return its final reply once its status is success or one of
    /// `call.also_ok`. The request's ids are stamped afresh before every send, so it survives
    /// the session being re-established; a lost channel replays it where that is safe (see
    /// `engine::replay`).
    pub(crate) async fn send<B: RequestBody>(&self, body: &B, call: Call<'_>) -> Result<Response> {
        let mut req = self.prepare(body, call.target.tree);
        req.on_abandoned = call.on_abandoned;
        req.on_interim = call.on_interim;
        let mut ctx = self.replay_context();
        if call.internal {
            ctx.channels_return = false;
            ctx.internal = true;
        }
        let mut replies = self
            .call_renewing(&ctx, vec![req], &call.target, B::COMMAND, body.replay())
            .await?;
        // One reply per request: the channel answers every member of a frame.
        replies
            .pop()
            .unwrap_or(Err(ProtocolError::Unexpected("reply count").into()))?
            .check(call.also_ok)
    }

    /// Send requests made with [`SessionCore::prepare`] as one related compound (MS-SMB2
    /// 3.2.4.1.4), replayed as a whole when `replay` allows; one reply per request, each
    /// unchecked. Of `call`, only the target counts (a compound that closes its own handle
    /// needs no abandon hook).
    pub(crate) async fn send_related(
        &self,
        reqs: Vec<Request>,
        replay: Replay,
        call: Call<'_>,
    ) -> Result<Vec<Result<Response>>> {
        let command = reqs.first().map_or(Command::CREATE, Request::command);
        let ctx = self.replay_context();
        self.call_renewing(&ctx, reqs, &call.target, command, replay)
            .await
    }

    /// [`replay::call_chain`], and when the server says the session's authentication
    /// expired, the session authenticated again and the frame sent once more (see
    /// `renewal`). Nothing of a frame answered "expired" ran at the server, so sending it
    /// again is safe whatever it is.
    async fn call_renewing(
        &self,
        ctx: &replay::ReplayContext<'_>,
        reqs: Vec<Request>,
        target: &Target,
        command: Command,
        replay: Replay,
    ) -> Result<Vec<Result<Response>>> {
        let mut renewals = 0;
        loop {
            self.renewal.settled().await;
            let generation = self.renewal.generation();
            let last_try = renewals >= renewal::MAX_RENEWALS_PER_REQUEST;
            let replies = replay::call_chain(ctx, &reqs, target, command, replay).await?;
            if last_try {
                return Ok(replies);
            }
            match self.renewal.judge(&replies, generation) {
                renewal::Verdict::Answered => return Ok(replies),
                renewal::Verdict::Expired => {
                    tracing::info!(%command, "the session's authentication expired; renewing it");
                    self.renewal
                        .renew(generation, self.reauthenticate())
                        .await?;
                }
                renewal::Verdict::RefusedDuringRenewal => {}
            }
            renewals += 1;
        }
    }

    /// Authenticate the session again (see `session::reauthenticate`) on its first
    /// connection when that is still usable, as MS-SMB2 3.2.5.3 pictures it, else on
    /// another of its channels (the server's expiry is the session's, whichever carries it).
    async fn reauthenticate(&self) -> Result<()> {
        let channel = self.multichannel.channels.for_session_setup()?;
        let session_id = self.addressing.session.id();
        let Some(security) = self.addressing.session.security() else {
            // A guest session has no authentication to renew.
            return Err(ProtocolError::Unexpected("expiry of a session without keys").into());
        };
        crate::session::reauthenticate(
            &channel,
            &self.negotiated,
            &self.creds,
            &self.server_name,
            &self.config,
            session_id,
            &security,
            self.encrypt_all,
        )
        .await
    }

    /// What the replay loop needs of this session.
    pub(crate) fn replay_context(&self) -> replay::ReplayContext<'_> {
        replay::ReplayContext {
            channels: &self.multichannel.channels,
            addressing: &self.addressing,
            failover: &self.multichannel.failover,
            smb3: self.negotiated.dialect.is_smb3(),
            channels_return: !self.logged_off(),
            failover_wait: self.config.failover_wait,
            internal: false,
            manager: Some(&self.multichannel),
        }
    }

    /// Whether LOGOFF was sent: the manager stops binding.
    pub(crate) fn logged_off(&self) -> bool {
        self.logged_off.load(Ordering::Relaxed)
    }

    /// LOGOFF is being sent: lost channels are not brought back any more.
    pub(crate) fn mark_logged_off(&self) {
        self.logged_off.store(true, Ordering::Relaxed);
    }

    /// Something the session stands on proved false (a NEGOTIATE that VALIDATE_NEGOTIATE_INFO
    /// does not confirm: MS-SMB2 3.2.5.14.12 has the client close its sessions and terminate
    /// the connection). Every channel is closed with `cause` and the session is not set up
    /// again: every later request fails at once.
    pub(crate) fn terminate(&self, cause: &ConnectionLossCause) {
        self.mark_logged_off();
        self.multichannel.shutdown();
        for member in self.multichannel.channels.active() {
            member.channel.close(cause.clone());
        }
    }
}
