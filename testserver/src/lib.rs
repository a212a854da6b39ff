//! An SMB 3 server that runs inside a test process, over an in-memory file tree.
//!
//! It exists so that what sits above the client's channel (the library's `Share` and `File`,
//! smbcp's copy engine, smbfuse's file system) can be tested in milliseconds, without root,
//! network namespaces or smbd. The client under test is the real one, unchanged: it connects
//! over loopback TCP (so the channel's socket handling is the one it uses against any server),
//! negotiates SMB 3.1.1 (or 3.0.x, 2.1), authenticates with NTLMv2 over SPNEGO, and signs or
//! seals every message with keys derived as for a real server.
//!
//! What it serves: NEGOTIATE with the 3.1.1 contexts, SESSION_SETUP (reauthentication of an
//! expired session too, and, with `multichannel`, binding and
//! FSCTL_QUERY_NETWORK_INTERFACE_INFO), LOGOFF, TREE_CONNECT and
//! DISCONNECT, CREATE (dispositions, directory options, share modes, delete-on-close, leases
//! on files with their breaks, durable v2 handles), CLOSE, READ, WRITE, FLUSH, QUERY_INFO and
//! SET_INFO for the common classes (rename, delete, truncate, times) and for security
//! descriptors (kept whole, any SID, as NTFS keeps them; `put_security` plants bytes that
//! need not decode), QUERY_DIRECTORY, LOCK,
//! ECHO, CHANGE_NOTIFY (answered async with an interim STATUS_PENDING; FILE_NOTIFY_INFORMATION
//! for names added, removed and renamed and files modified, by CompletionFilter and
//! SMB2_WATCH_TREE; changes buffered between requests; STATUS_NOTIFY_ENUM_DIR on overflow;
//! STATUS_NOTIFY_CLEANUP on close), CANCEL of a waiting CHANGE_NOTIFY, compounded requests,
//! and FSCTL_VALIDATE_NEGOTIATE_INFO. What it does not (directory leases, oplocks, durable v1
//! handles, other FSCTLs, other information classes) is refused, with STATUS_NOT_SUPPORTED or
//! the status a server without it gives, or not offered, so a client that depends on it sees
//! the difference.
//!
//! Tests steer it with [`TestServer::fail`] (a status, a cut connection or a lost reply for
//! chosen requests), [`TestServer::cut_connections`] and [`TestServer::expire_sessions`], and look at the result through
//! [`TestServer::read_file`], [`TestServer::list`] and the counters ([`TestServer::requests`],
//! [`TestServer::open_handles`], [`TestServer::pending_notifies`]).
//!
//! These tests prove the client's logic; the e2e tests against smbd stay, to prove it against
//! a real server.

mod auth;
mod conn;
mod connection;
mod files;
mod ops;
mod protection;
mod reply;
mod state;
mod watches;
mod wire;

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use smb3_proto::{Command, Dialect, NtStatus};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::files::{components, Content};
use crate::state::State;
use crate::watches::{action, kind, Change};

/// How the server is set up.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The one account it accepts.
    pub user: String,
    /// Its domain (empty: the server's own).
    pub domain: String,
    /// Its password.
    pub password: String,
    /// Shares, each with an empty file tree.
    pub shares: Vec<String>,
    /// The highest dialect it speaks (it speaks every one from 2.1 up to this).
    pub max_dialect: Dialect,
    /// Whether it requires signing (SMB2_NEGOTIATE_SIGNING_REQUIRED).
    pub require_signing: bool,
    /// Whether it offers encryption (picks the client's first cipher when it does).
    pub encryption: bool,
    /// MaxReadSize, MaxWriteSize and MaxTransactSize.
    pub max_io: u32,
    /// Loopback addresses it listens on, all on the same port; the first is
    /// [`TestServer::addr`]. With `multichannel`, each is reported as an interface.
    pub addresses: Vec<Ipv4Addr>,
    /// Whether it offers multichannel: SMB2_GLOBAL_CAP_MULTI_CHANNEL, its `addresses` in
    /// FSCTL_QUERY_NETWORK_INTERFACE_INFO, and session binding (MS-SMB2 3.3.5.5.2).
    pub multichannel: bool,
    /// In a related compound, fail the requests after any failed one that used a FileId
    /// (a READ at the end of a file, say), as MS-SMB2 3.3.5.2.7.2 allows; by default only a
    /// failed CREATE fails the rest, as Windows and Samba do.
    pub fail_whole_chain: bool,
    /// How long an operation that broke another client's lease waits for its
    /// acknowledgment before the break takes effect anyway (Windows: 35 s).
    pub lease_break_timeout: Duration,
    /// How long a durable open outlives its connection (the client asks for a timeout;
    /// 0 asks for this).
    pub durable_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            user: "tester".to_string(),
            domain: String::new(),
            password: "in-memory secret".to_string(),
            shares: vec!["data".to_string()],
            max_dialect: Dialect::Smb311,
            require_signing: true,
            encryption: true,
            max_io: 1 << 20,
            addresses: vec![Ipv4Addr::LOCALHOST],
            multichannel: false,
            fail_whole_chain: false,
            lease_break_timeout: Duration::from_secs(2),
            durable_timeout: Duration::from_secs(60),
        }
    }
}

/// What a planned fault does to the request it catches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this status instead of doing the request.
    Fail(NtStatus),
    /// Close the connection (with a reset) instead of answering; the request is not done.
    Cut,
    /// Do the request and then close the connection without sending the reply: the client
    /// cannot know whether it was done.
    CutAfter,
    /// Do nothing and never answer; the connection stays up.
    Ignore,
}

/// A fault planned for the next `times` requests of `command` (whose path contains
/// `path_contains`, when set: the CREATE's name, or the path of the open the request is on).
#[derive(Clone, Debug)]
pub struct Fault {
    /// The command it applies to.
    pub command: Command,
    /// Only requests about a path containing this (case-insensitive).
    pub path_contains: Option<String>,
    /// What it does.
    pub action: FaultAction,
    /// How many requests it catches.
    pub times: usize,
}

impl Fault {
    /// The next request of `command` fails with `status`.
    pub fn fail(command: Command, status: NtStatus) -> Fault {
        Fault {
            command,
            path_contains: None,
            action: FaultAction::Fail(status),
            times: 1,
        }
    }

    /// The next request of `command` gets `action`.
    pub fn on(command: Command, action: FaultAction) -> Fault {
        Fault {
            command,
            path_contains: None,
            action,
            times: 1,
        }
    }

    /// Only for requests about a path containing `part`.
    pub fn at_path(mut self, part: &str) -> Fault {
        self.path_contains = Some(part.to_lowercase());
        self
    }

    /// For the next `n` matching requests instead of one.
    pub fn times(mut self, n: usize) -> Fault {
        self.times = n.max(1);
        self
    }

    fn matches(&self, command: Command, path: Option<&str>) -> bool {
        self.command == command
            && match &self.path_contains {
                None => true,
                Some(part) => path.is_some_and(|p| p.to_lowercase().contains(part)),
            }
    }
}

/// Which connections a cut closes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CutOrder {
    /// Only those made to this server address; all when None.
    only: Option<IpAddr>,
}

impl CutOrder {
    pub(crate) fn applies_to(&self, local: Option<IpAddr>) -> bool {
        self.only.is_none() || self.only == local
    }
}

pub(crate) struct Shared {
    pub(crate) config: ServerConfig,
    pub(crate) server_guid: [u8; 16],
    pub(crate) state: Mutex<State>,
    /// The last order to close connections.
    pub(crate) cut: watch::Sender<CutOrder>,
    /// Woken whenever a lease break is acknowledged.
    pub(crate) acked: tokio::sync::Notify,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A handler that panicked leaves the state as it was at the panic; the test that
        // caused it has failed already, and later tests should still see the server.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running server. Dropping it stops accepting and closes every connection.
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    tasks: Arc<Mutex<JoinSet<()>>>,
}

impl TestServer {
    /// Start serving on a fresh loopback port of each of `config.addresses` (the same port
    /// on all), on the current tokio runtime.
    pub async fn start(config: ServerConfig) -> io::Result<TestServer> {
        let (first, others) = config
            .addresses
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to serve"))?;
        let listener = TcpListener::bind((*first, 0)).await?;
        let addr = listener.local_addr()?;
        let mut listeners = vec![listener];
        for ip in others {
            listeners.push(TcpListener::bind((*ip, addr.port())).await?);
        }
        let mut server_guid = [0u8; 16];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut server_guid);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(&config.shares)),
            config,
            server_guid,
            cut: watch::channel(CutOrder::default()).0,
            acked: tokio::sync::Notify::new(),
        });
        let tasks = Arc::new(Mutex::new(JoinSet::new()));
        for listener in listeners {
            let accept = accept(listener, shared.clone(), Arc::downgrade(&tasks));
            tasks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .spawn(accept);
        }
        Ok(TestServer {
            addr,
            shared,
            tasks,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:port`, as the client's `connect` takes it.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// Plan a fault (see [`Fault`]). Faults apply in the order planned.
    pub fn fail(&self, fault: Fault) {
        self.shared.lock().faults.push(fault);
    }

    /// Faults planned and not yet used up.
    pub fn faults_pending(&self) -> usize {
        self.shared.lock().faults.len()
    }

    /// Close every connection now, with a reset, as a lost link or a restarted server would.
    pub fn cut_connections(&self) {
        self.shared.cut.send_replace(CutOrder { only: None });
    }

    /// Close, with a reset, the connections made to the server's address `ip` only: one
    /// channel of a multichannel session lost, the others kept.
    pub fn cut_connections_to(&self, ip: IpAddr) {
        self.shared.cut.send_replace(CutOrder { only: Some(ip) });
    }

    /// End the authentication of every session, as a server does when a Kerberos ticket
    /// ends: most requests are answered STATUS_NETWORK_SESSION_EXPIRED until the client
    /// authenticates the session again (MS-SMB2 3.3.5.2.9).
    pub fn expire_sessions(&self) {
        for s in self.shared.lock().sessions.values_mut() {
            s.expired = true;
        }
    }

    /// Sessions alive.
    pub fn sessions(&self) -> usize {
        self.shared.lock().sessions.len()
    }

    /// Opens (handles) held by clients.
    pub fn open_handles(&self) -> usize {
        self.shared.lock().opens.len()
    }

    /// The path of each open held by clients (share-relative, `\\`-separated), sorted.
    pub fn open_paths(&self) -> Vec<String> {
        let state = self.shared.lock();
        let mut paths: Vec<String> = state
            .opens
            .values()
            .filter_map(|o| Some(state.shares.get(&o.share)?.path_of(o.node)))
            .collect();
        paths.sort();
        paths
    }

    /// How many requests of `command` arrived.
    pub fn requests(&self, command: Command) -> u64 {
        self.shared
            .lock()
            .requests
            .get(&command)
            .copied()
            .unwrap_or(0)
    }

    /// The contents of file `path` (`a/b` or `a\b`) of `share`, if it is a file.
    pub fn read_file(&self, share: &str, path: &str) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        let files = state.shares.get(&share.to_lowercase())?;
        let path = path.replace('/', "\\");
        let id = files.lookup(&components(&path).ok()?).ok()?;
        files.get(id)?.data().cloned()
    }

    /// The names in directory `path` of `share`, sorted, or None when it is not a directory.
    pub fn list(&self, share: &str, path: &str) -> Option<Vec<String>> {
        let state = self.shared.lock();
        let files = state.shares.get(&share.to_lowercase())?;
        let path = path.replace('/', "\\");
        let id = files.lookup(&components(&path).ok()?).ok()?;
        let children = files.get(id)?.children()?;
        let mut names: Vec<String> = children
            .values()
            .filter_map(|c| files.get(*c).map(|n| n.name.clone()))
            .collect();
        names.sort();
        Some(names)
    }

    /// Put a file with `data` at `path` of `share`, making the directories on the way.
    /// Watches see it as they would a client's change: each name added, the file modified.
    pub fn put_file(&self, share: &str, path: &str, data: &[u8]) {
        let mut state = self.shared.lock();
        let share = share.to_lowercase();
        let files = state
            .shares
            .get_mut(&share)
            .expect("put_file: no such share");
        let path = path.replace('/', "\\");
        let parts = components(&path).expect("put_file: a valid path");
        let (name, dirs) = parts.split_last().expect("put_file: a file name");
        let mut changes = Vec::new();
        let mut dir = files::ROOT;
        for d in dirs {
            dir = match files.child(dir, d) {
                Some(id) => id,
                None => {
                    let id = files.create(dir, d, true, 0);
                    changes.push(Change::named(files, id, action::ADDED));
                    id
                }
            };
        }
        let id = match files.child(dir, name) {
            Some(id) => id,
            None => {
                let id = files.create(dir, name, false, 0);
                changes.push(Change::named(files, id, action::ADDED));
                id
            }
        };
        if let Some(node) = files.get_mut(id) {
            node.content = Content::File(data.to_vec());
            node.touch_data();
            let kinds = kind::LAST_WRITE | kind::SIZE;
            changes.push(Change::modified(files, id, kinds));
        }
        state.report_changes(&share, &changes);
    }

    /// Keep `raw` as the security descriptor of `path` of `share`, bytes as they are (they
    /// need not decode: what a broken or hostile server would send). Panics if there is no
    /// such file or directory.
    pub fn put_security(&self, share: &str, path: &str, raw: &[u8]) {
        let mut state = self.shared.lock();
        let files = state
            .shares
            .get_mut(&share.to_lowercase())
            .expect("put_security: no such share");
        let path = path.replace('/', "\\");
        let id = files
            .lookup(&components(&path).expect("put_security: a valid path"))
            .expect("put_security: no such file");
        files.get_mut(id).expect("a node looked up").security = Some(raw.to_vec());
    }

    /// The security descriptor of `path` of `share` as stored (none before any was set).
    pub fn security(&self, share: &str, path: &str) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        let files = state.shares.get(&share.to_lowercase())?;
        let path = path.replace('/', "\\");
        let id = files.lookup(&components(&path).ok()?).ok()?;
        files.get(id)?.security.clone()
    }

    /// CHANGE_NOTIFY requests the server holds: answered STATUS_PENDING and not yet completed,
    /// cancelled, cleaned up by a CLOSE, or dropped with their connection.
    pub fn pending_notifies(&self) -> usize {
        self.shared.lock().watches.waiting_requests()
    }
}

/// Take connections on `listener` until the server is dropped.
async fn accept(listener: TcpListener, shared: Arc<Shared>, tasks: Weak<Mutex<JoinSet<()>>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let Some(tasks) = tasks.upgrade() else {
            return;
        };
        let mut tasks = tasks.lock().unwrap_or_else(|e| e.into_inner());
        // Reap finished connections so a long test does not accumulate them.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(conn::serve(stream, shared.clone()));
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.cut_connections();
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort_all();
    }
}
