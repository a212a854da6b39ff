//! A man in the middle between the client and the testbed's smbd, for tests of a server that
//! misbehaves on purpose.
//!
//! The proxy speaks real Direct TCP framing (MS-SMB2 2.1: a zero byte and a 24-bit length
//! before every message) on both sides, so every frame the client receives was either sent by
//! a real smbd or written by a test's [`Mischief`] on top of one: the rest of the session stays
//! genuine while one thing goes wrong. It listens on 127.0.0.1 of the namespace it runs in (run
//! it on [`crate::Testbed::client_runtime`]) and forwards each connection to `upstream`.
//!
//! Frames are handed to the mischief whole; [`Smb2`] reads and writes the fields of the first
//! SMB2 header in one. A test that changes a signed or encrypted frame breaks its signature or
//! tag, which is the point of some cases; the others use a guest session, which is unsigned,
//! or sign the changed reply again with the session's key ([`SigningKeys`], fed by the
//! client's key log), as a hostile server holding the session would.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use smb3_client::{KeyLog, SessionKeys};
use smb3_proto::crypto::signing::Signer;
use smb3_proto::crypto::CryptoBackend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// Which way a frame travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client to server: a request.
    ToServer,
    /// Server to client: a reply.
    ToClient,
}

/// What the proxy does with one frame.
#[derive(Debug)]
pub enum Action {
    /// Send this frame (length prefix added).
    Frame(Bytes),
    /// Send these bytes as they are (no prefix: a test's own, possibly bogus, framing).
    Raw(Bytes),
    /// From now on, forward nothing more in this direction (the connection stays open).
    Stall,
    /// Close the connection.
    Close,
}

/// A test's rule for one connection: called for every frame in both directions, in order;
/// returns what to send instead (nothing drops the frame).
pub trait Mischief: Send {
    /// Decide about one frame.
    fn on_frame(&mut self, dir: Direction, frame: Bytes) -> Vec<Action>;
}

impl<F: FnMut(Direction, Bytes) -> Vec<Action> + Send> Mischief for F {
    fn on_frame(&mut self, dir: Direction, frame: Bytes) -> Vec<Action> {
        self(dir, frame)
    }
}

/// A mischief as a boxed closure, for tests that build their rules in a helper.
pub type BoxedRule = Box<dyn FnMut(Direction, Bytes) -> Vec<Action> + Send>;

/// A running proxy; it stops (and closes its connections) when dropped.
pub struct Mitm {
    addr: SocketAddr,
    connections: Arc<AtomicU64>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl std::fmt::Debug for Mitm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mitm").field("addr", &self.addr).finish()
    }
}

impl Mitm {
    /// Listen on 127.0.0.1 and forward every connection to `upstream`, through a fresh
    /// mischief from `rules` (`None` forwards the connection's frames unchanged).
    pub async fn start<M, R>(upstream: SocketAddr, mut rules: R) -> Mitm
    where
        M: Mischief + 'static,
        R: FnMut(u64) -> Option<M> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy on loopback");
        let addr = listener.local_addr().expect("proxy address");
        let connections = Arc::new(AtomicU64::new(0));
        let tasks: Arc<Mutex<Vec<_>>> = Arc::default();
        let (count, list) = (connections.clone(), tasks.clone());
        let acceptor = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let n = count.fetch_add(1, Ordering::Relaxed);
                let rules: Box<dyn Mischief> = match rules(n) {
                    Some(m) => Box::new(m),
                    None => Box::new(|_, frame| vec![Action::Frame(frame)]),
                };
                let task = tokio::spawn(relay(client, upstream, rules));
                list.lock().unwrap().push(task);
            }
        });
        tasks.lock().unwrap().push(acceptor);
        Mitm {
            addr,
            connections,
            tasks,
        }
    }

    /// Where the client should connect (`ADDR:PORT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for Mitm {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// Relay one connection through `rules` until either side closes or a rule says so.
async fn relay(client: TcpStream, upstream: SocketAddr, rules: Box<dyn Mischief>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_rx, client_tx) = client.into_split();
    let (server_rx, server_tx) = server.into_split();
    let rules = Arc::new(tokio::sync::Mutex::new(rules));
    let up = pump(client_rx, server_tx, Direction::ToServer, rules.clone());
    let down = pump(server_rx, client_tx, Direction::ToClient, rules);
    // Either side ending ends the connection (a stalled side keeps waiting).
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

/// Forward frames from `rx` to `tx` in one direction.
async fn pump(
    mut rx: OwnedReadHalf,
    mut tx: OwnedWriteHalf,
    dir: Direction,
    rules: Arc<tokio::sync::Mutex<Box<dyn Mischief>>>,
) {
    let mut stalled = false;
    loop {
        let Some(frame) = read_frame(&mut rx).await else {
            return;
        };
        if stalled {
            continue;
        }
        let actions = rules.lock().await.on_frame(dir, frame);
        for action in actions {
            let written = match action {
                Action::Frame(f) => write_frame(&mut tx, &f).await,
                Action::Raw(b) => tx.write_all(&b).await.is_ok(),
                Action::Stall => {
                    stalled = true;
                    true
                }
                Action::Close => return,
            };
            if !written {
                return;
            }
        }
    }
}

async fn read_frame(rx: &mut OwnedReadHalf) -> Option<Bytes> {
    let mut prefix = [0u8; 4];
    rx.read_exact(&mut prefix).await.ok()?;
    let len = u32::from_be_bytes(prefix) as usize;
    let mut frame = BytesMut::zeroed(len);
    rx.read_exact(&mut frame).await.ok()?;
    Some(frame.freeze())
}

async fn write_frame(tx: &mut OwnedWriteHalf, frame: &[u8]) -> bool {
    let len = (frame.len() as u32).to_be_bytes();
    tx.write_all(&len).await.is_ok() && tx.write_all(frame).await.is_ok()
}

/// The fields of the first SMB2 header in a frame (MS-SMB2 2.2.1), to read and change.
/// Offsets are those of the sync and async headers alike, except the last 16 bytes.
#[derive(Debug)]
pub struct Smb2(pub BytesMut);

impl Smb2 {
    /// A copy of `frame` to change. `None` for a frame that is not a plain SMB2 message
    /// (an encrypted or compressed one, or too short).
    pub fn of(frame: &Bytes) -> Option<Smb2> {
        (frame.len() >= 64 && frame[..4] == [0xFE, b'S', b'M', b'B'])
            .then(|| Smb2(BytesMut::from(&frame[..])))
    }

    fn u16_at(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.0[at..at + 2].try_into().unwrap())
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap())
    }

    /// The status (replies).
    pub fn status(&self) -> u32 {
        self.u32_at(8)
    }

    /// Set the status of the first message.
    pub fn set_status(&mut self, status: u32) -> &mut Self {
        self.0[8..12].copy_from_slice(&status.to_le_bytes());
        self
    }

    /// The command code.
    pub fn command(&self) -> u16 {
        self.u16_at(12)
    }

    /// CreditRequest/CreditResponse.
    pub fn credits(&self) -> u16 {
        self.u16_at(14)
    }

    /// Set CreditResponse in every message of the frame (a compound grants in each).
    pub fn set_credits(&mut self, n: u16) -> &mut Self {
        for at in self.message_starts() {
            self.0[at + 14..at + 16].copy_from_slice(&n.to_le_bytes());
        }
        self
    }

    /// Where each message of a compound frame starts (following NextCommand while it stays
    /// inside the frame).
    pub fn message_starts(&self) -> Vec<usize> {
        let mut starts = vec![0];
        let mut at = 0usize;
        loop {
            let next = u32::from_le_bytes(self.0[at + 20..at + 24].try_into().unwrap()) as usize;
            if next == 0 || at + next + 64 > self.0.len() {
                return starts;
            }
            at += next;
            starts.push(at);
        }
    }

    /// Set CreditCharge.
    pub fn set_credit_charge(&mut self, n: u16) -> &mut Self {
        self.0[6..8].copy_from_slice(&n.to_le_bytes());
        self
    }

    /// The header flags.
    pub fn flags(&self) -> u32 {
        self.u32_at(16)
    }

    /// Set the header flags.
    pub fn set_flags(&mut self, flags: u32) -> &mut Self {
        self.0[16..20].copy_from_slice(&flags.to_le_bytes());
        self
    }

    /// NextCommand.
    pub fn next_command(&self) -> u32 {
        self.u32_at(20)
    }

    /// Set NextCommand.
    pub fn set_next_command(&mut self, next: u32) -> &mut Self {
        self.0[20..24].copy_from_slice(&next.to_le_bytes());
        self
    }

    /// MessageId.
    pub fn message_id(&self) -> u64 {
        u64::from_le_bytes(self.0[24..32].try_into().unwrap())
    }

    /// Set MessageId.
    pub fn set_message_id(&mut self, id: u64) -> &mut Self {
        self.0[24..32].copy_from_slice(&id.to_le_bytes());
        self
    }

    /// SessionId.
    pub fn session_id(&self) -> u64 {
        u64::from_le_bytes(self.0[40..48].try_into().unwrap())
    }

    /// Flip one bit of the signature.
    pub fn spoil_signature(&mut self) -> &mut Self {
        self.0[48] ^= 1;
        self
    }

    /// Clear SMB2_FLAGS_SIGNED and the signature: an unsigned reply.
    pub fn unsign(&mut self) -> &mut Self {
        let flags = self.flags() & !0x8;
        self.set_flags(flags);
        self.0[48..64].fill(0);
        self
    }

    /// The message as a frame to send.
    pub fn frame(&self) -> Bytes {
        Bytes::copy_from_slice(&self.0)
    }
}

/// The signing keys of the sessions the client under test sets up, taken from its key log
/// ([`smb3_client::ClientConfig::key_log`]), so that a mischief can change a signed reply and
/// sign it again.
#[derive(Clone, Default)]
pub struct SigningKeys(Arc<Mutex<HashMap<u64, SessionKeys>>>);

impl SigningKeys {
    /// The key log to put in the client's configuration. Only the keys of a session's first
    /// channel are kept: the proxy sits on that one.
    pub fn key_log(&self) -> KeyLog {
        let keys = self.0.clone();
        KeyLog::new(move |k| {
            if !k.bound_channel {
                keys.lock().unwrap().insert(k.session_id, k.clone());
            }
        })
    }

    /// Sign `msg` (one whole message, not a compound) as the server would with the key of
    /// the session its header names. False when that session's key is not known.
    pub fn sign(&self, msg: &mut Smb2) -> bool {
        let Some(keys) = self.0.lock().unwrap().get(&msg.session_id()).cloned() else {
            return false;
        };
        let signer = Signer::new(
            keys.signing_algorithm,
            &keys.signing_key,
            CryptoBackend::default(),
        )
        .expect("the client's own signing key");
        signer
            .sign_in_place(&mut msg.0[..], &[])
            .expect("a whole message");
        true
    }
}

/// SMB2 command codes the hostile tests look for (MS-SMB2 2.2.1.2).
pub mod command {
    /// NEGOTIATE.
    pub const NEGOTIATE: u16 = 0x0000;
    /// SESSION_SETUP.
    pub const SESSION_SETUP: u16 = 0x0001;
    /// TREE_CONNECT.
    pub const TREE_CONNECT: u16 = 0x0003;
    /// CREATE.
    pub const CREATE: u16 = 0x0005;
    /// READ.
    pub const READ: u16 = 0x0008;
    /// WRITE.
    pub const WRITE: u16 = 0x0009;
    /// CANCEL.
    pub const CANCEL: u16 = 0x000C;
    /// ECHO.
    pub const ECHO: u16 = 0x000D;
    /// QUERY_DIRECTORY.
    pub const QUERY_DIRECTORY: u16 = 0x000E;
    /// IOCTL.
    pub const IOCTL: u16 = 0x000B;
    /// QUERY_INFO.
    pub const QUERY_INFO: u16 = 0x0010;
}
