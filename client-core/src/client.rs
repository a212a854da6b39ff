//! `Client`: one authenticated SMB session to one server, and the request plumbing every
//! share and file handle goes through.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::RngCore;
use smb3_proto::msg::session_setup::SessionFlags;
use smb3_proto::msg::tree_connect::{ShareFlags, TreeConnectRequest, TreeConnectResponse};
use smb3_proto::msg::RequestBody;
use smb3_proto::{Command, Dialect, NtStatus};

use crate::addressing::{Addressing, Target, TreeContext};
use crate::auth::UserCredentials;
use crate::channel::{BufferPool, Channel, ChannelOptions, OnAbandoned, Request, Response};
use crate::config::ClientConfig;
use crate::durable::DurableOpens;
use crate::error::{decode, Error, ProtocolError, Result};
use crate::lease::{self, BreakSink, LeaseTable};
use crate::multichannel::eligibility;
use crate::multichannel::manager::{self, Multichannel};
use crate::multichannel::status::{ChannelInfo, MultichannelStatus};
use crate::negotiated::Negotiated;
use crate::orphans::OrphanCount;
use crate::session;
use crate::share::Share;

/// A connected, authenticated session. Cheap to clone; clones share the session.
///
/// Every method returns a future that may be dropped at any point to give up on the
/// operation: its reply is then discarded when it arrives (returning its credits), and a
/// request the server was working on asynchronously is cancelled with an SMB2 CANCEL. See
/// the crate documentation, "Cancelling".
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<SessionCore>,
}

/// Everything requests need to know about the session.
pub(crate) struct SessionCore {
    /// The session's channels, their dispatch and the multichannel manager's state.
    pub(crate) mc: Multichannel,
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
    pub(crate) creds: UserCredentials,
    logged_off: AtomicBool,
    /// Every channel forwards its break notifications here (see `lease`).
    pub(crate) breaks: BreakSink,
    /// Lease keys of the files open now, one per file.
    pub(crate) leases: Arc<LeaseTable>,
    /// Durable opens, for a reconnect to reclaim.
    pub(crate) durable: Arc<DurableOpens>,
    /// Buffers for large replies, shared by every channel of the session.
    frame_buffers: BufferPool,
    /// Handles closed because their caller gave up on them (see `orphans`).
    pub(crate) orphans: OrphanCount,
}

impl Drop for SessionCore {
    fn drop(&mut self) {
        self.mc.shutdown();
    }
}

impl Client {
    /// Connect to `server` (`host`, `host:port`, `[v6]:port`), negotiate and authenticate.
    pub async fn connect(
        server: &str,
        creds: &UserCredentials,
        config: ClientConfig,
    ) -> Result<Client> {
        let (host, addr) = resolve(server).await?;
        let frame_buffers = BufferPool::new(config.reply_buffer_pool);
        let opts = channel_options(&config, &frame_buffers);
        let (channel, unsolicited) = Channel::connect(addr, None, &opts).await?;
        let (breaks, break_queue) = lease::break_queue();
        lease::forward_unsolicited(unsolicited, breaks.clone());
        let mut client_guid = [0u8; 16];
        rand::rng().fill_bytes(&mut client_guid);
        let negotiated = session::negotiate(&channel, &config, client_guid, &host).await?;
        let established =
            session::session_setup(&channel, &negotiated, creds, &host, &config, 0).await?;
        let can_encrypt = established
            .security
            .as_ref()
            .is_some_and(|s| s.can_encrypt());
        let session_encrypts = established.flags.has(SessionFlags::ENCRYPT_DATA);
        if (config.encrypt || session_encrypts) && !can_encrypt {
            return Err(Error::Protocol(ProtocolError::Unexpected(
                "encryption required but no cipher could be negotiated",
            )));
        }
        let signing = established.security.is_some();
        if let Some(sec) = &established.security {
            channel.set_crypto(sec.clone());
        }
        let eligibility = eligibility::check(&config, &negotiated, signing);
        if let Err(why) = &eligibility {
            tracing::debug!(reason = %why, "single channel");
        }
        let core = Arc::new(SessionCore {
            mc: Multichannel::new(channel, &config, eligibility),
            addressing: Addressing::new(established.session_id, established.security),
            negotiated,
            signing,
            encrypt_all: config.encrypt || session_encrypts,
            can_encrypt,
            config,
            server_name: host,
            server_addr: addr,
            client_guid,
            creds: creds.clone(),
            logged_off: AtomicBool::new(false),
            breaks,
            leases: Arc::default(),
            durable: Arc::default(),
            frame_buffers,
            orphans: OrphanCount::default(),
        });
        lease::spawn_break_handler(Arc::downgrade(&core), break_queue);
        manager::start(&core);
        Ok(Client { inner: core })
    }

    /// Connect to a share (`TREE_CONNECT`).
    pub async fn share(&self, name: &str) -> Result<Share> {
        let body = TreeConnectRequest::new(&self.inner.server_name, name);
        let resp = self
            .inner
            .call(&body, None)
            .await
            .map_err(|e| e.with_path(&format!("\\\\{}\\{name}", self.inner.server_name)))?;
        let tc = decode(
            Command::TREE_CONNECT,
            TreeConnectResponse::decode(&resp.msg),
        )?;
        let encrypt = tc.share_flags.has(ShareFlags::ENCRYPT_DATA);
        if encrypt && !self.inner.can_encrypt {
            return Err(Error::Protocol(ProtocolError::Unexpected(
                "share requires encryption but no cipher was negotiated",
            )));
        }
        let tree = self
            .inner
            .addressing
            .trees
            .add(name, resp.header.tree_id, encrypt);
        let share = Share::new(self.clone(), name.to_string(), tree, tc.maximal_access);
        if matches!(
            self.inner.negotiated.dialect,
            Dialect::Smb300 | Dialect::Smb302
        ) {
            share.validate_negotiate().await?;
        }
        Ok(share)
    }

    /// The negotiated dialect.
    pub fn dialect(&self) -> Dialect {
        self.inner.negotiated.dialect
    }

    /// The negotiated signing algorithm and whether requests are signed.
    pub fn signing(&self) -> Option<smb3_proto::SigningAlgorithm> {
        self.inner
            .signing
            .then_some(self.inner.negotiated.signing_algorithm)
    }

    /// The negotiated cipher, if any.
    pub fn cipher(&self) -> Option<smb3_proto::Cipher> {
        self.inner.negotiated.cipher
    }

    /// Whether the whole session is encrypted.
    pub fn encrypts_everything(&self) -> bool {
        self.inner.encrypt_all
    }

    /// Largest READ, WRITE and IOCTL/QUERY payload the server accepts.
    pub fn max_io(&self) -> (u32, u32, u32) {
        let n = &self.inner.negotiated;
        (n.max_read, n.max_write, n.max_transact)
    }

    /// The address the session was set up on.
    pub fn server_addr(&self) -> SocketAddr {
        self.inner.server_addr
    }

    /// Requests, bytes sent and bytes received over all channels so far.
    pub fn counters(&self) -> (u64, u64, u64) {
        self.channels().iter().fold((0, 0, 0), |acc, c| {
            (
                acc.0 + c.requests,
                acc.1 + c.bytes_sent,
                acc.2 + c.bytes_received,
            )
        })
    }

    /// The session's channels (active, draining, failed) and their counters.
    pub fn channels(&self) -> Vec<ChannelInfo> {
        self.inner.mc.channel_infos()
    }

    /// Whether multichannel is on, both interface lists, and each interface pair's planned
    /// and current channels with its binding counters.
    pub fn multichannel(&self) -> MultichannelStatus {
        self.inner.mc.status()
    }

    /// Wait (at most `timeout`) until the first round of channel binding has finished, so
    /// that work started next spreads over every channel from the start. Returns whether it
    /// finished; the session is usable either way.
    pub async fn wait_for_channels(&self, timeout: Duration) -> bool {
        self.inner.mc.wait_settled(timeout).await
    }

    /// Ask the server for its interfaces again now, instead of at the next poll.
    pub fn refresh_interfaces(&self) {
        self.inner.mc.refresh();
    }

    /// Number of open files the server made durable in this session (handles that a later
    /// reconnect could reclaim). Zero once they are all closed.
    pub fn durable_opens(&self) -> usize {
        self.inner
            .durable
            .live()
            .iter()
            .filter(|o| o.handle().durable.is_some())
            .count()
    }

    /// Number of files this session holds a lease key for (one per file, however many opens
    /// of it are in use). Zero once every file opened through [`Share::open`](crate::Share::open)
    /// is closed.
    pub fn leased_files(&self) -> usize {
        self.inner.leases.len()
    }

    /// Handles this session closed on its own because their caller gave up: an open whose
    /// future was dropped (or timed out) but which the server carried out anyway, or a
    /// directory listing, delete or rename dropped half-way. Each would otherwise stay open
    /// at the server until the session ends.
    pub fn abandoned_handles_closed(&self) -> u64 {
        self.inner.orphans.get()
    }

    /// End the session (`LOGOFF`). Handles still open become invalid.
    pub async fn logoff(&self) -> Result<()> {
        self.inner.logged_off.store(true, Ordering::Relaxed);
        self.inner.mc.shutdown();
        let body = smb3_proto::msg::logoff::LogoffRequest {};
        self.inner.call(&body, None).await.map(|_| ())
    }
}

/// How every channel of a session with `config` is set up.
fn channel_options(config: &ClientConfig, frame_buffers: &BufferPool) -> ChannelOptions {
    ChannelOptions {
        connect_timeout: config.connect_timeout,
        credit_target: config.credit_target,
        frame_buffers: frame_buffers.clone(),
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
        let mut req = self.unaddressed(body, tree);
        // Without an open there is nothing that can be lost: addressing cannot fail.
        let _ = self.addressing.address(&mut req, &Target::tree(tree));
        req
    }

    /// A request with signing, sealing and timeout chosen but no ids yet: the replay loop
    /// stamps them before every send.
    fn unaddressed<B: RequestBody>(&self, body: &B, tree: Option<TreeContext>) -> Request {
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

    /// Send one request and check its status (success only).
    pub(crate) async fn call<B: RequestBody>(
        &self,
        body: &B,
        tree: Option<TreeContext>,
    ) -> Result<Response> {
        self.call_allowing(body, tree, &[]).await
    }

    /// Send one request; `also_ok` lists non-success statuses the caller handles itself.
    pub(crate) async fn call_allowing<B: RequestBody>(
        &self,
        body: &B,
        tree: Option<TreeContext>,
        also_ok: &[NtStatus],
    ) -> Result<Response> {
        self.call_to(body, &Target::tree(tree), also_ok).await
    }

    /// Send one request about `target` (a tree, an open): its ids are stamped afresh before
    /// every send, so it survives the session being re-established.
    pub(crate) async fn call_to<B: RequestBody>(
        &self,
        body: &B,
        target: &Target,
        also_ok: &[NtStatus],
    ) -> Result<Response> {
        let req = self.unaddressed(body, target.tree);
        self.send_template(req, target, B::COMMAND, body.replay())
            .await?
            .check(also_ok)
    }

    /// Send one request on `tree` (success only) with a hook for its reply should that arrive
    /// after the caller gave up (see [`Request::on_abandoned`] and `orphans`).
    pub(crate) async fn call_with_abandon_hook<B: RequestBody>(
        &self,
        body: &B,
        tree: Option<TreeContext>,
        on_abandoned: OnAbandoned,
    ) -> Result<Response> {
        let mut req = self.unaddressed(body, tree);
        req.on_abandoned = Some(on_abandoned);
        self.send_template(req, &Target::tree(tree), B::COMMAND, body.replay())
            .await?
            .check(&[])
    }

    async fn send_template(
        &self,
        req: Request,
        target: &Target,
        command: Command,
        replay: smb3_proto::replay::Replay,
    ) -> Result<Response> {
        let session = crate::failover::replay::Session::of(self);
        crate::failover::replay::call(&session, req, target, command, replay).await
    }

    /// Whether LOGOFF was sent: the manager stops binding.
    pub(crate) fn logged_off(&self) -> bool {
        self.logged_off.load(Ordering::Relaxed)
    }
}

/// Resolve `host[:port]` to the host name (for SPNs and UNC paths) and one socket address.
async fn resolve(server: &str) -> Result<(String, SocketAddr)> {
    let (host, port) = split_host_port(server)?;
    let addr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| Error::io(None, e))?
        .next()
        .ok_or_else(|| {
            Error::io(
                None,
                std::io::Error::new(std::io::ErrorKind::NotFound, format!("{host}: no address")),
            )
        })?;
    Ok((host, addr))
}

fn split_host_port(server: &str) -> Result<(String, u16)> {
    let bad = |reason| {
        Error::Config(crate::error::ConfigError::Url {
            url: server.to_string(),
            reason,
        })
    };
    if let Some(rest) = server.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("unterminated [IPv6] address"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad("invalid port"))?,
            None if after.is_empty() => 445,
            None => return Err(bad("junk after ]")),
        };
        return Ok((host.to_string(), port));
    }
    match server.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            Ok((h.to_string(), p.parse().map_err(|_| bad("invalid port"))?))
        }
        _ if server.is_empty() => Err(bad("empty host")),
        _ => Ok((server.to_string(), 445)),
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.server_name)
            .field(
                "session_id",
                &format_args!("{:#x}", self.inner.addressing.session.id()),
            )
            .field("dialect", &self.inner.negotiated.dialect)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port() {
        assert_eq!(split_host_port("nas").unwrap(), ("nas".into(), 445));
        assert_eq!(
            split_host_port("10.0.0.1:4455").unwrap(),
            ("10.0.0.1".into(), 4455)
        );
        assert_eq!(
            split_host_port("[fe80::1]:99").unwrap(),
            ("fe80::1".into(), 99)
        );
        assert_eq!(split_host_port("[::1]").unwrap(), ("::1".into(), 445));
        assert_eq!(split_host_port("::1").unwrap(), ("::1".into(), 445));
        assert!(split_host_port("h:x").is_err());
        assert!(split_host_port("").is_err());
    }
}
