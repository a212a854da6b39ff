//! `Client`: one authenticated SMB session to one server, and the request plumbing every
//! share and file handle goes through.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use rand::RngCore;
use smb3_proto::msg::session_setup::SessionFlags;
use smb3_proto::Dialect;

use crate::addressing::Addressing;
use crate::auth::AuthMechanism;
use crate::auth::{SessionCredentials, UserCredentials};
use crate::background::{lease_breaks, manager, reconnect, watchdog};
use crate::channel::{BufferPool, Channel};
use crate::config::ClientConfig;
use crate::engine::{channel_options, Call, SessionCore};
use crate::error::{EncryptionRequiredBy, Error, ProtocolError, Result};
use crate::lease;
use crate::logoff_wait::{settle, BackgroundWork, LOGOFF_SETTLE};
use crate::multichannel::eligibility;
use crate::multichannel::report::{ChannelInfo, MultichannelStatus};
use crate::multichannel::state::Multichannel;
use crate::orphans::OrphanCount;
use crate::session;

/// A connected, authenticated session. Cheap to clone; clones share the session.
///
/// Every method returns a future that may be dropped at any point to give up on the
/// operation: its reply is then discarded when it arrives (returning its credits), and a
/// request the server was working on asynchronously is cancelled with an SMB2 CANCEL. See
/// the crate documentation, "Cancelling".
#[derive(Clone)]
pub struct Client {
    pub(crate) core: Arc<SessionCore>,
}

/// The largest payloads the server accepts, as negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxIo {
    /// Bytes of one READ.
    pub read: u32,
    /// Bytes of one WRITE.
    pub write: u32,
    /// Bytes of one IOCTL or QUERY_INFO/QUERY_DIRECTORY reply.
    pub transact: u32,
}

/// What a session has moved so far, over all its channels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficCounters {
    /// Requests sent.
    pub requests: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
}

/// The session's reauthentications (MS-SMB2 3.2.4.2.3.1): each time the server said its
/// authentication expired, the session was authenticated again with the user's current
/// ticket and the requests that met the expiry were sent again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reauthentications {
    /// Renewals that succeeded.
    pub renewed: u64,
    /// Renewals that failed (their requests failed with the error, typically "no valid
    /// Kerberos ticket"); the next request that meets the expiry tries again.
    pub failed: u64,
}

impl Client {
    /// Connect to `server` (`host`, `host:port`, `[v6]:port`), negotiate and authenticate.
    pub async fn connect(
        server: &str,
        creds: &UserCredentials,
        config: ClientConfig,
    ) -> Result<Client> {
        // From here on the session holds only what re-authenticating needs (the NT hash for
        // NTLM, the acquired Kerberos credentials for a ticket cache or keytab), not the
        // caller's password. Acquired before connecting: "no ticket, run kinit" needs no
        // server.
        let kept = SessionCredentials::for_session(creds, &config).await?;
        Client::connect_kept(server, kept, config).await
    }

    /// A session with `server` as this session's user, with what this session kept of
    /// the credentials and its configuration: for a DFS target on another server. The
    /// target's Kerberos service name and QUIC certificate name are its own.
    pub(crate) async fn connect_as_same_user(&self, server: &str) -> Result<Client> {
        let mut config = self.core.config.clone();
        config.kerberos_service_host = None;
        config.quic.server_name = None;
        Client::connect_kept(server, self.core.creds.clone(), config).await
    }

    async fn connect_kept(
        server: &str,
        creds: SessionCredentials,
        config: ClientConfig,
    ) -> Result<Client> {
        let (host, addr) = resolve(server, config.transport.default_port()).await?;
        // QUIC channels check the server's certificate against this name (new ones too).
        let config = config.with_server_host(&host);
        let frame_buffers = BufferPool::new(config.reply_buffer_pool);
        let opts = channel_options(&config, &frame_buffers);
        let (channel, unsolicited) = Channel::connect(addr, None, &opts).await?;
        let (breaks, break_queue) = lease::break_queue();
        lease::forward_unsolicited(unsolicited, breaks.clone());
        let mut client_guid = [0u8; 16];
        rand::rng().fill_bytes(&mut client_guid);
        let negotiated = session::negotiate(&channel, &config, client_guid, &host).await?;
        let established =
            session::session_setup(&channel, &negotiated, &creds, &host, &config, 0).await?;
        // Whether a demand for encryption (the session's, a share's) can be met: by sealing,
        // or by QUIC's TLS where the server accepted it in place of sealing.
        let can_encrypt = established
            .security
            .as_ref()
            .is_some_and(|s| s.can_encrypt())
            || channel.sealing_left_to_tls();
        let session_encrypts = established.flags.has(SessionFlags::ENCRYPT_DATA);
        if (config.encrypt || session_encrypts) && !can_encrypt {
            return Err(Error::Protocol(ProtocolError::NoCipher(
                EncryptionRequiredBy::Session,
            )));
        }
        let mechanism = if established.flags.has(SessionFlags::IS_NULL) {
            AuthMechanism::Anonymous
        } else if established.flags.has(SessionFlags::IS_GUEST) {
            AuthMechanism::Guest
        } else if established.kerberos {
            AuthMechanism::Kerberos
        } else {
            AuthMechanism::Ntlm
        };
        let signing = established.security.is_some();
        if let Some(sec) = &established.security {
            channel.set_crypto(sec.clone());
        }
        let eligibility = eligibility::check(&config, &negotiated, signing);
        if let Err(why) = &eligibility {
            tracing::debug!(reason = %why, "single channel");
        }
        let core = Arc::new(SessionCore {
            multichannel: Multichannel::new(channel, &config, eligibility),
            addressing: Addressing::new(established.session_id, established.security),
            negotiated,
            signing,
            encrypt_all: config.encrypt || session_encrypts,
            can_encrypt,
            config,
            server_name: host,
            server_addr: addr,
            client_guid,
            creds,
            logged_off: AtomicBool::new(false),
            breaks,
            leases: Arc::default(),
            durable: Arc::default(),
            frame_buffers,
            orphans: OrphanCount::default(),
            background: BackgroundWork::default(),
            renewal: Default::default(),
            mechanism,
        });
        lease_breaks::spawn_break_handler(Arc::downgrade(&core), break_queue);
        watchdog::start(&core);
        reconnect::start(&core);
        manager::start(&core);
        Ok(Client { core })
    }

    /// The negotiated dialect.
    pub fn dialect(&self) -> Dialect {
        self.core.negotiated.dialect
    }

    /// The negotiated signing algorithm and whether requests are signed.
    pub fn signing(&self) -> Option<smb3_proto::SigningAlgorithm> {
        self.core
            .signing
            .then_some(self.core.negotiated.signing_algorithm)
    }

    /// The negotiated cipher, if any.
    pub fn cipher(&self) -> Option<smb3_proto::Cipher> {
        self.core.negotiated.cipher
    }

    /// How often the session's authentication expired (a Kerberos ticket's end) and was
    /// renewed in place, and how often renewing it failed (see [`Reauthentications`]).
    pub fn reauthentications(&self) -> Reauthentications {
        let (renewed, failed) = self.core.renewal.counts();
        Reauthentications { renewed, failed }
    }

    /// Whether the whole session is encrypted.
    pub fn encrypts_everything(&self) -> bool {
        self.core.encrypt_all
    }

    /// Largest READ, WRITE and IOCTL/QUERY payload the server accepts.
    pub fn max_io(&self) -> MaxIo {
        let n = &self.core.negotiated;
        MaxIo {
            read: n.max_read,
            write: n.max_write,
            transact: n.max_transact,
        }
    }

    /// The address the session was set up on.
    pub fn server_addr(&self) -> SocketAddr {
        self.core.server_addr
    }

    /// Requests, bytes sent and bytes received over all channels so far.
    pub fn counters(&self) -> TrafficCounters {
        self.channels()
            .iter()
            .fold(TrafficCounters::default(), |acc, c| TrafficCounters {
                requests: acc.requests + c.requests,
                bytes_sent: acc.bytes_sent + c.bytes_sent,
                bytes_received: acc.bytes_received + c.bytes_received,
            })
    }

    /// The session's channels (active, draining, failed) and their counters.
    pub fn channels(&self) -> Vec<ChannelInfo> {
        self.core.multichannel.channel_infos()
    }

    /// How many channels may carry new requests now: the first one and every bound channel
    /// not under suspicion. Right after [`Client::connect`] this is 1 and it grows while the
    /// other channels bind in the background, so a caller that keeps some requests in flight
    /// per channel can read it as it goes instead of waiting for the binding to finish.
    pub fn usable_channels(&self) -> usize {
        self.core.multichannel.channels.usable_count()
    }

    /// Chunks one large read or write keeps in flight so that every usable channel stays
    /// busy: [`CHUNKS_PER_CHANNEL`](crate::CHUNKS_PER_CHANNEL) for each of
    /// [`Client::usable_channels`], and at least one. A [`File`](crate::File)'s reads, writes,
    /// readers and writers keep the larger of this and `ClientConfig::io_depth`; a caller that
    /// runs its own window of chunks reads it as channels bind.
    pub fn busy_depth(&self) -> usize {
        crate::file::busy_depth(self.usable_channels())
    }

    /// Whether channels are being bound now: from connect until the first round of binding
    /// has finished (what [`Client::wait_for_channels`] waits for), and again after a lost
    /// session was set up anew, until its channels are back. Always false when multichannel
    /// is off or the session cannot have it.
    pub fn binding_channels(&self) -> bool {
        self.core.multichannel.rebinding()
    }

    /// Whether multichannel is on, both interface lists, and each interface pair's planned
    /// and current channels with its binding counters.
    pub fn multichannel(&self) -> MultichannelStatus {
        self.core.multichannel.status()
    }

    /// Wait (at most `timeout`) until the first round of channel binding has finished, so
    /// that work started next spreads over every channel from the start. Returns whether it
    /// finished; the session is usable either way.
    pub async fn wait_for_channels(&self, timeout: Duration) -> bool {
        self.core.multichannel.wait_settled(timeout).await
    }

    /// Ask the server for its interfaces again now, instead of at the next poll.
    pub fn refresh_interfaces(&self) {
        self.core.multichannel.refresh();
    }

    /// Number of open files the server made durable in this session (handles that a later
    /// reconnect could reclaim). Zero once they are all closed.
    pub fn durable_opens(&self) -> usize {
        self.core
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
        self.core.leases.len()
    }

    /// Handles this session closed on its own because their caller gave up: an open whose
    /// future was dropped (or timed out) but which the server carried out anyway, or a
    /// directory listing, delete or rename dropped half-way. Each would otherwise stay open
    /// at the server until the session ends.
    pub fn abandoned_handles_closed(&self) -> u64 {
        self.core.orphans.get()
    }

    /// End the session (`LOGOFF`). Handles still open become invalid. Requests already on
    /// their way (CLOSEs of dropped handles, cancelled watches) are first given up to 2 s to
    /// finish, since the server cannot answer them properly once the session is gone.
    pub async fn logoff(&self) -> Result<()> {
        self.core.mark_logged_off();
        self.core.multichannel.shutdown();
        let channels = &self.core.multichannel.channels;
        if !settle(&self.core.background, channels, LOGOFF_SETTLE).await {
            tracing::debug!("requests still outstanding at LOGOFF");
        }
        let body = smb3_proto::msg::logoff::LogoffRequest {};
        self.core.send(&body, Call::session()).await.map(|_| ())
    }
}

/// Resolve `host[:port]` to the host name (for SPNs and UNC paths) and one socket address;
/// `port` when `server` names none.
async fn resolve(server: &str, port: u16) -> Result<(String, SocketAddr)> {
    let (host, port) = split_host_port(server, port)?;
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

fn split_host_port(server: &str, default_port: u16) -> Result<(String, u16)> {
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
            None if after.is_empty() => default_port,
            None => return Err(bad("junk after ]")),
        };
        return Ok((host.to_string(), port));
    }
    match server.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            Ok((h.to_string(), p.parse().map_err(|_| bad("invalid port"))?))
        }
        _ if server.is_empty() => Err(bad("empty host")),
        _ => Ok((server.to_string(), default_port)),
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.core.server_name)
            .field(
                "session_id",
                &format_args!("{:#x}", self.core.addressing.session.id()),
            )
            .field("dialect", &self.core.negotiated.dialect)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port() {
        assert_eq!(split_host_port("nas", 445).unwrap(), ("nas".into(), 445));
        assert_eq!(split_host_port("nas", 443).unwrap(), ("nas".into(), 443));
        assert_eq!(
            split_host_port("10.0.0.1:4455", 443).unwrap(),
            ("10.0.0.1".into(), 4455)
        );
        assert_eq!(
            split_host_port("[fe80::1]:99", 445).unwrap(),
            ("fe80::1".into(), 99)
        );
        assert_eq!(split_host_port("[::1]", 443).unwrap(), ("::1".into(), 443));
        assert_eq!(split_host_port("::1", 445).unwrap(), ("::1".into(), 445));
        assert!(split_host_port("h:x", 445).is_err());
        assert!(split_host_port("", 445).is_err());
    }
}
