//! All client settings in one struct, with defaults that match Windows (DESIGN §2).

use std::time::Duration;

use smb3_proto::{Cipher, Dialect, SigningAlgorithm};

pub use crate::channel::quic::QuicConfig;
use crate::key_log::KeyLog;

/// Client settings. `ClientConfig::default()` is what a Windows client would do, and safe:
/// signing required, SMB 3.0 or newer.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Lowest dialect offered. 3.0 by default: 2.1 has no protection against a man in the
    /// middle who rewrites NEGOTIATE to downgrade the connection (3.0 and 3.0.2 check it
    /// afterwards with VALIDATE_NEGOTIATE_INFO, 3.1.1 with its preauth integrity hash), so
    /// only a caller who must reach an SMB 2.1 server should lower it.
    pub min_dialect: Dialect,
    /// Highest dialect offered.
    pub max_dialect: Dialect,
    /// Require every reply after SESSION_SETUP to be signed or encrypted, whatever the
    /// server asks (on by default, as Windows 11 24H2 does): an unsigned reply, which a man
    /// in the middle may have changed, drops the connection with
    /// [`ProtocolError::UnsignedReply`](crate::ProtocolError::UnsignedReply), and a guest
    /// session, which cannot sign, is refused. Turning it off is unsafe: then a 2.1, 3.0 or
    /// 3.0.2 session signs only when the server requires it, and replies can be forged.
    /// Interim replies and oplock/lease break notifications are unsigned by rule (MS-SMB2
    /// 3.2.5.1.3); what they can change is limited (a break only ever lowers a lease).
    pub require_signing: bool,
    /// Encrypt the whole session (SMB 3.x), even on shares that do not require it.
    pub encrypt: bool,
    /// Ciphers offered on 3.1.1, most preferred first.
    pub ciphers: Vec<Cipher>,
    /// Signing algorithms offered on 3.1.1, most preferred first. AES-GMAC comes first: AES-CMAC
    /// caps a channel near 1 GB/s per core (DESIGN §6).
    pub signing_algorithms: Vec<SigningAlgorithm>,
    /// Accept a guest session when the server maps the user to guest.
    pub allow_guest: bool,
    /// Ask for the SMB3 POSIX extensions (3.1.1 only; mount.cifs's `posix`/`noposix`). A share
    /// of a server that offers them is then opened with POSIX semantics: real modes, owners,
    /// file types, case-sensitive names (see [`crate::PosixMetadata`]).
    pub posix_extensions: bool,
    /// Follow DFS referrals ([`crate::dfs::follow`]): a path behind a link of a DFS share
    /// leads to the share that holds it. Off (mount.cifs's `nodfs`), such a path fails with
    /// STATUS_PATH_NOT_COVERED.
    pub follow_dfs: bool,
    /// Bytes per READ/WRITE request; clamped to what the server negotiates (8 MiB on Samba).
    pub io_size: u32,
    /// Requests one file stream keeps in flight.
    pub io_depth: usize,
    /// Credits each channel tries to hold (× 64 KiB = bytes in flight).
    pub credit_target: u32,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Base time a request may take; large I/O gets more (see `timeout_for`).
    pub request_timeout: Duration,
    /// Request durable handles (v2) on opens, so they survive a lost connection.
    pub durable_handles: bool,
    /// Open extra channels over every usable NIC pair when the server supports multichannel.
    pub multichannel: bool,
    /// Most channels per session, the first one included (Windows: 32).
    pub max_channels: usize,
    /// Channels per interface pair where both ends are RSS-capable (Windows: 4).
    pub channels_per_rss_nic: usize,
    /// Channels per interface pair otherwise (Windows: 1).
    pub channels_per_nic: usize,
    /// How often to ask the server for its interfaces again (Windows: 15 minutes).
    pub interface_poll: Duration,
    /// Time one extra channel may take to connect, negotiate and bind before it is given up
    /// (and retried later); never holds up the session.
    pub bind_timeout: Duration,
    /// How requests are spread over the channels.
    pub dispatch: Dispatch,
    /// Local NIC facts to use instead of what the OS reports (speed, RSS), by name or address.
    pub nic_overrides: Vec<NicOverride>,
    /// A channel with requests outstanding and no reply for this long, while other channels
    /// of the session get replies, is suspected lost: its requests are replayed elsewhere and
    /// it is probed with ECHO. Stretched on channels whose replies normally come slower
    /// (large chunks on a slow link): eight of its usual gaps between replies at least.
    pub silent_loss_after: Duration,
    /// How long a probing ECHO may take before the channel is closed as lost (at least twice
    /// the channel's usual gap between replies).
    pub probe_timeout: Duration,
    /// An idle channel is sent an ECHO after this long without traffic, so a dead path is
    /// found before a request needs it.
    pub keepalive_interval: Duration,
    /// How long a request whose channel was lost waits for a usable channel to replay on
    /// before it fails.
    pub failover_wait: Duration,
    /// Bytes of buffers for large replies (READs over 256 KiB) kept for reuse once the data
    /// handed out in them is dropped; 0 frees each at once. Reuse spares the kernel's page
    /// faults and zeroing for every fresh buffer (about 45 % more CPU per GiB downloaded
    /// without it, docs/PERFORMANCE.md).
    pub reply_buffer_pool: usize,
    /// Kerberos realm (`TESTBED.LAN`). Set, the session authenticates with Kerberos through
    /// SPNEGO: a ticket for `cifs/<host>` from [`kerberos_kdc`](Self::kerberos_kdc), the
    /// credentials' user as `user@REALM`. `None` (the default): NTLMv2.
    pub kerberos_realm: Option<String>,
    /// The realm's KDC: `host`, `host:port` or `tcp://host:port` (port 88 when left out);
    /// `udp://host:port` sends over UDP. `None`: what sspi finds on its own (`SSPI_KDC_URL`,
    /// `/etc/krb5.conf`). The KDC exchange runs while the session is set up, each request
    /// bounded by [`connect_timeout`](Self::connect_timeout).
    pub kerberos_kdc: Option<String>,
    /// Host name in the service principal `cifs/<host>` when it differs from the name given to
    /// `Client::connect` (e.g. connecting by address to a server the KDC knows by name).
    pub kerberos_service_host: Option<String>,
    /// With Kerberos configured, fall back to NTLMv2 when Kerberos cannot be used (KDC
    /// unreachable, unknown service principal, clock skew) or the server picks NTLM. Off by
    /// default: a Kerberos session never silently becomes an NTLM one.
    pub ntlm_fallback: bool,
    /// How the session authenticates: [`Auth::Auto`] (the default) uses Kerberos from the
    /// ticket cache or a keytab when no password is given, the password otherwise.
    pub auth: Auth,
    /// The Kerberos credential cache to take tickets from (`FILE:/tmp/krb5cc_1000`,
    /// `DIR:/run/user/1000/krb5cc`, `KEYRING:persistent:1000`, `KCM:1000`), through the
    /// system's GSS-API. `None`: `KRB5CCNAME`, else krb5.conf's default cache.
    pub kerberos_ccache: Option<String>,
    /// A client keytab to get tickets from, as a service or backup job does; the tickets are
    /// kept in this process's memory (a private `MEMORY:` cache), never written out. `None`:
    /// the cache alone, or `KRB5_CLIENT_KTNAME` when the cache holds no ticket (MIT).
    pub kerberos_keytab: Option<std::path::PathBuf>,
    /// The client principal (`alice@CORP.EXAMPLE`) to take from the cache or keytab. `None`:
    /// the cache's default principal, or the keytab's first entry.
    pub kerberos_principal: Option<String>,
    /// Ask the KDC for service tickets that last at most this long (the GSS-API's
    /// `time_req`; for tickets from a cache or keytab). `None` (the default): as long as the
    /// ticket-granting ticket. The server ends a session's authority when its service ticket
    /// ends, and the library then authenticates the session again in place with the cache's
    /// current ticket, unseen by the caller: a site that wants sessions vouched for afresh
    /// more often can shorten it (the tests do, to see expiry in seconds).
    pub kerberos_ticket_lifetime: Option<Duration>,
    /// Hand the keys of every session and bound channel to this log, to read a packet
    /// capture of the traffic ([`KeyLog`]). `None` (the default): keys never leave the client.
    pub key_log: Option<KeyLog>,
    /// What carries the SMB2 messages: TCP (the default) or QUIC (SMB over QUIC, TLS 1.3 on
    /// UDP, [`QuicConfig`]). Everything above the byte stream is the same for both.
    pub transport: Transport,
    /// Settings of the QUIC transport, used when `transport` is [`Transport::Quic`].
    pub quic: QuicConfig,
}

/// The transport under a session's channels (MS-SMB2 2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// Direct TCP, port 445.
    #[default]
    Tcp,
    /// SMB over QUIC (dialect 3.1.1, ALPN `smb`): one bidirectional stream carries the same
    /// framed messages as a TCP connection. A server given without a port is reached on UDP
    /// 443, where Windows Server listens; the server's certificate is checked as
    /// [`QuicConfig`] says.
    Quic,
}

impl Transport {
    /// The port a server given without one is reached on: 445 over TCP (MS-SMB2 2.1), UDP
    /// 443 over QUIC (where Windows Server's SMB over QUIC listens by default).
    pub fn default_port(self) -> u16 {
        match self {
            Transport::Tcp => 445,
            Transport::Quic => 443,
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Quic => "quic",
        })
    }
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "tcp" => Ok(Transport::Tcp),
            "quic" => Ok(Transport::Quic),
            other => Err(format!("unknown transport {other:?} (tcp or quic)")),
        }
    }
}

impl ClientConfig {
    /// This configuration with [`QuicConfig::server_name`] set to `host` unless the caller
    /// set one: the name every QUIC channel of the session checks the certificate against.
    /// Over QUIC the session keeps to one channel for now: the interfaces a server
    /// advertises are TCP ones (binding QUIC channels to them is not done yet).
    pub(crate) fn with_server_host(mut self, host: &str) -> Self {
        if self.transport == Transport::Quic {
            if self.quic.server_name.is_none() {
                self.quic.server_name = Some(host.to_string());
            }
            self.multichannel = false;
        }
        self
    }
}

/// How requests are spread over a session's channels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dispatch {
    /// Each request to the next healthy channel with credits, in turn (what Windows does).
    #[default]
    RoundRobin,
    /// Each request to the channel with the fewest bytes in flight.
    LeastLoaded,
}

impl std::fmt::Display for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dispatch::RoundRobin => "round-robin",
            Dispatch::LeastLoaded => "least-loaded",
        })
    }
}

impl std::str::FromStr for Dispatch {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "round-robin" => Ok(Dispatch::RoundRobin),
            "least-loaded" => Ok(Dispatch::LeastLoaded),
            other => Err(format!(
                "unknown dispatch policy {other:?} (round-robin or least-loaded)"
            )),
        }
    }
}

/// What to believe about one local NIC instead of what the OS says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NicOverride {
    /// Interface name (`eth0`) or one of its addresses (`10.0.0.2`).
    pub nic: String,
    /// Link speed in bits per second.
    pub link_speed: Option<u64>,
    /// Whether the NIC spreads receive work over several CPUs (RSS).
    pub rss: Option<bool>,
}

impl NicOverride {
    /// An override for the NIC named `nic` (or holding that address); set fields after.
    pub fn new(nic: impl Into<String>) -> Self {
        NicOverride {
            nic: nic.into(),
            ..NicOverride::default()
        }
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            min_dialect: Dialect::Smb300,
            max_dialect: Dialect::Smb311,
            require_signing: true,
            encrypt: false,
            ciphers: vec![
                Cipher::Aes128Gcm,
                Cipher::Aes256Gcm,
                Cipher::Aes128Ccm,
                Cipher::Aes256Ccm,
            ],
            signing_algorithms: vec![
                SigningAlgorithm::AesGmac,
                SigningAlgorithm::AesCmac,
                SigningAlgorithm::HmacSha256,
            ],
            allow_guest: false,
            posix_extensions: true,
            follow_dfs: true,
            io_size: 1024 * 1024,
            io_depth: 16,
            credit_target: 512,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            durable_handles: true,
            multichannel: true,
            max_channels: 32,
            channels_per_rss_nic: 4,
            channels_per_nic: 1,
            interface_poll: Duration::from_secs(15 * 60),
            bind_timeout: Duration::from_secs(10),
            silent_loss_after: Duration::from_millis(1500),
            probe_timeout: Duration::from_secs(1),
            keepalive_interval: Duration::from_secs(30),
            failover_wait: Duration::from_secs(30),
            reply_buffer_pool: 64 << 20,
            dispatch: Dispatch::RoundRobin,
            nic_overrides: Vec::new(),
            kerberos_realm: None,
            kerberos_kdc: None,
            kerberos_service_host: None,
            ntlm_fallback: false,
            auth: Auth::Auto,
            kerberos_ccache: None,
            kerberos_keytab: None,
            kerberos_principal: None,
            kerberos_ticket_lifetime: None,
            key_log: None,
            transport: Transport::Tcp,
            quic: QuicConfig::default(),
        }
    }
}

/// Which mechanism authenticates the session (mount.cifs's `sec=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Auth {
    /// Kerberos from the system's ticket cache or a keytab when the credentials carry no
    /// password (or [`kerberos_ccache`](ClientConfig::kerberos_ccache) or
    /// [`kerberos_keytab`](ClientConfig::kerberos_keytab) is set); with a password, Kerberos
    /// when [`kerberos_realm`](ClientConfig::kerberos_realm) is set, NTLMv2 otherwise.
    #[default]
    Auto,
    /// Kerberos only (`sec=krb5`): with the password when a realm is set and no cache or
    /// keytab is, from the ticket cache or keytab otherwise. Never NTLM.
    Kerberos,
    /// NTLMv2 only (`sec=ntlmssp`), with the password.
    Ntlm,
}

impl ClientConfig {
    /// Dialects offered, oldest first: over QUIC 3.1.1 alone, the one dialect MS-SMB2 2.1
    /// gives the QUIC transport (empty when `max_dialect` is below it).
    pub fn dialects(&self) -> Vec<Dialect> {
        let lowest = match self.transport {
            Transport::Quic => self.min_dialect.max(Dialect::Smb311),
            Transport::Tcp => self.min_dialect,
        };
        Dialect::ALL
            .into_iter()
            .filter(|d| *d >= lowest && *d <= self.max_dialect)
            .collect()
    }

    /// Timeout for a request moving `bytes`: the base plus one second per MiB, so an 8 MiB
    /// read on a slow link is not mistaken for a dead server.
    pub(crate) fn timeout_for(&self, bytes: u32) -> Duration {
        self.request_timeout + Duration::from_secs(u64::from(bytes) / (1024 * 1024))
    }
}
