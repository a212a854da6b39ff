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
//! SMB2 header in one, and the bodies the security tests rewrite: a NEGOTIATE's dialects,
//! SecurityMode and negotiate contexts, a SESSION_SETUP reply's SessionFlags and security
//! buffer, a QUERY_DIRECTORY reply's entry names (in place, same length). A test that changes
//! a signed or encrypted frame breaks its signature or tag, which is the point of some cases
//! (a man in the middle without the keys); the others use a guest session, which is unsigned,
//! or play a hostile server holding the session's keys ([`SigningKeys`], fed by the in-process
//! client's key log or by an smbcp subprocess's `SMB_KEYLOGFILE`): sign the changed reply
//! again, or open a sealed reply and send it on signed, or sealed again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use smb3_client::{KeyLog, SessionKeys};
use smb3_proto::crypto::seal::Sealer;
use smb3_proto::crypto::signing::Signer;
use smb3_proto::crypto::CryptoBackend;
use smb3_proto::{Cipher, Dialect, SigningAlgorithm};
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

    fn put_u16(&mut self, at: usize, v: u16) {
        self.0[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }

    /// Whether this is a reply (SMB2_FLAGS_SERVER_TO_REDIR).
    pub fn is_reply(&self) -> bool {
        self.flags() & 1 != 0
    }

    /// Whether the header says SMB2_FLAGS_SIGNED.
    pub fn is_signed(&self) -> bool {
        self.flags() & 0x8 != 0
    }

    // ------------------------------------------------------------ NEGOTIATE (MS-SMB2 2.2.3, 2.2.4)

    /// The Dialects of a NEGOTIATE request (DialectCount at body offset 2, the list at 36).
    pub fn request_dialects(&self) -> Vec<u16> {
        let count = self.u16_at(64 + 2) as usize;
        (0..count).map(|i| self.u16_at(64 + 36 + 2 * i)).collect()
    }

    /// Rewrite every dialect of a NEGOTIATE request in place (the count stays).
    pub fn map_request_dialects(&mut self, f: impl Fn(u16) -> u16) -> &mut Self {
        for (i, d) in self.request_dialects().into_iter().enumerate() {
            self.put_u16(64 + 36 + 2 * i, f(d));
        }
        self
    }

    /// SecurityMode of a NEGOTIATE request (body offset 4) or response (body offset 2).
    pub fn negotiate_security_mode(&self) -> u16 {
        self.u16_at(if self.is_reply() { 66 } else { 68 })
    }

    /// Set SecurityMode of a NEGOTIATE request or response.
    pub fn set_negotiate_security_mode(&mut self, mode: u16) -> &mut Self {
        let at = if self.is_reply() { 66 } else { 68 };
        self.put_u16(at, mode);
        self
    }

    /// DialectRevision of a NEGOTIATE response (body offset 4).
    pub fn negotiate_dialect(&self) -> u16 {
        self.u16_at(68)
    }

    /// The negotiate contexts (MS-SMB2 2.2.3.1 / 2.2.4.1) of a 3.1.1 NEGOTIATE request or
    /// response: each context's type and where its data lies in the message. The offset is
    /// from the start of the header (request: NegotiateContextOffset at body offset 28, count
    /// at 32; response: offset at 60, count at 6); contexts are 8-byte aligned.
    pub fn negotiate_contexts(&self) -> Vec<(u16, std::ops::Range<usize>)> {
        let (offset, count) = if self.is_reply() {
            (self.u32_at(64 + 60) as usize, self.u16_at(64 + 6))
        } else {
            (self.u32_at(64 + 28) as usize, self.u16_at(64 + 32))
        };
        let mut out = Vec::new();
        let mut at = offset;
        for _ in 0..count {
            if at + 8 > self.0.len() {
                break;
            }
            let kind = self.u16_at(at);
            let len = self.u16_at(at + 2) as usize;
            let data = at + 8..(at + 8 + len).min(self.0.len());
            at = (data.end).next_multiple_of(8);
            out.push((kind, data));
        }
        out
    }

    /// The algorithm ids of the first negotiate context of `kind` (2 = ENCRYPTION_CAPABILITIES,
    /// 8 = SIGNING_CAPABILITIES: a count, then the ids), or `None` without one.
    pub fn context_algorithms(&self, kind: u16) -> Option<Vec<u16>> {
        let (_, data) = self
            .negotiate_contexts()
            .into_iter()
            .find(|(k, _)| *k == kind)?;
        let count = self.u16_at(data.start) as usize;
        Some(
            (0..count)
                .map(|i| self.u16_at(data.start + 2 + 2 * i))
                .collect(),
        )
    }

    /// Replace every algorithm id in the first negotiate context of `kind` by `id`; false
    /// when there is no such context.
    pub fn set_context_algorithms(&mut self, kind: u16, id: u16) -> bool {
        let Some((_, data)) = self
            .negotiate_contexts()
            .into_iter()
            .find(|(k, _)| *k == kind)
        else {
            return false;
        };
        let count = self.u16_at(data.start) as usize;
        for i in 0..count {
            self.put_u16(data.start + 2 + 2 * i, id);
        }
        true
    }

    // ------------------------------------------------------------ SESSION_SETUP (MS-SMB2 2.2.6)

    /// SessionFlags of a SESSION_SETUP response (body offset 2): IS_GUEST 0x1, IS_NULL 0x2,
    /// ENCRYPT_DATA 0x4.
    pub fn session_flags(&self) -> u16 {
        self.u16_at(66)
    }

    /// Set SessionFlags of a SESSION_SETUP response.
    pub fn set_session_flags(&mut self, flags: u16) -> &mut Self {
        self.put_u16(66, flags);
        self
    }

    /// The security buffer of a SESSION_SETUP response (offset at body offset 4, length at 6).
    pub fn session_security_buffer(&self) -> &[u8] {
        let offset = self.u16_at(68) as usize;
        let len = self.u16_at(70) as usize;
        self.0.get(offset..offset + len).unwrap_or(&[])
    }

    /// Empty the security buffer of a SESSION_SETUP response: length 0, offset at the end of
    /// the fixed part, where the message now ends.
    pub fn empty_session_security_buffer(&mut self) -> &mut Self {
        self.put_u16(70, 0);
        self.put_u16(68, 64 + 8);
        self.0.truncate(64 + 8);
        self
    }

    // ------------------------------------------------------------ QUERY_DIRECTORY (MS-SMB2 2.2.34)

    /// Where each entry of a QUERY_DIRECTORY response in FileIdBothDirectoryInformation
    /// (MS-FSCC 2.4.17) keeps its name: (offset of FileName, FileNameLength in bytes). The
    /// output buffer's offset is at body offset 2, its length at 4; each entry's
    /// NextEntryOffset at 0, FileNameLength at 60, FileName at 104.
    fn directory_name_slots(&self) -> Vec<(usize, usize)> {
        if self.0.len() < 64 + 8 {
            return Vec::new();
        }
        let start = self.u16_at(66) as usize;
        let end = (start + self.u32_at(68) as usize).min(self.0.len());
        let mut out = Vec::new();
        let mut at = start;
        while at + 104 <= end {
            let len = self.u32_at(at + 60) as usize;
            if at + 104 + len > end {
                break;
            }
            out.push((at + 104, len));
            let next = self.u32_at(at) as usize;
            if next == 0 {
                break;
            }
            at += next;
        }
        out
    }

    /// The names in a QUERY_DIRECTORY response (FileIdBothDirectoryInformation), in order.
    pub fn directory_names(&self) -> Vec<String> {
        self.directory_name_slots()
            .into_iter()
            .map(|(at, len)| utf16_name(&self.0[at..at + len]))
            .collect()
    }

    /// Rename entries of a QUERY_DIRECTORY response in place: every name for which `rename`
    /// gives a new one of the same UTF-16 length (so that no offset moves) is overwritten.
    /// Returns how many were renamed; panics on a replacement of another length.
    pub fn rename_directory_entries(&mut self, rename: impl Fn(&str) -> Option<String>) -> usize {
        let mut renamed = 0;
        for (at, len) in self.directory_name_slots() {
            let old = utf16_name(&self.0[at..at + len]);
            let Some(new) = rename(&old) else {
                continue;
            };
            let bytes: Vec<u8> = new.encode_utf16().flat_map(u16::to_le_bytes).collect();
            assert_eq!(
                bytes.len(),
                len,
                "{new:?} must be as long in UTF-16 as {old:?}"
            );
            self.0[at..at + len].copy_from_slice(&bytes);
            renamed += 1;
        }
        renamed
    }
}

fn utf16_name(bytes: &[u8]) -> String {
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16_lossy(&units)
}

/// The keys of the sessions the client under test sets up, so that a mischief can play a
/// hostile server (or a man in the middle who somehow holds the keys): change a signed reply
/// and sign it again, or open a sealed reply and send it on in another form. Fed either by the
/// in-process client's key log ([`SigningKeys::key_log`]) or, for a client in another process
/// (smbcp with `SMB_KEYLOGFILE`), by that file, read again whenever a session it names is not
/// known yet ([`SigningKeys::from_key_log_file`]).
#[derive(Clone, Default)]
pub struct SigningKeys {
    keys: Arc<Mutex<HashMap<u64, SessionKeys>>>,
    file: Option<Arc<PathBuf>>,
}

impl SigningKeys {
    /// The key log to put in the client's configuration. Only the keys of a session's first
    /// channel are kept: the proxy sits on that one.
    pub fn key_log(&self) -> KeyLog {
        let keys = self.keys.clone();
        KeyLog::new(move |k| {
            if !k.bound_channel {
                keys.lock().unwrap().insert(k.session_id, k.clone());
            }
        })
    }

    /// Keys read from the key-log file at `path` (`SMB_KEYLOGFILE`, one
    /// [`SessionKeys::to_line`] line per session and bound channel), which need not exist yet:
    /// it is read again each time a session it should name is asked for.
    pub fn from_key_log_file(path: impl Into<PathBuf>) -> SigningKeys {
        SigningKeys {
            keys: Arc::default(),
            file: Some(Arc::new(path.into())),
        }
    }

    /// Sessions whose keys are known (reading the key-log file again first, if there is one).
    pub fn sessions(&self) -> usize {
        self.reload();
        self.keys.lock().unwrap().len()
    }

    /// The keys of `session_id`, reading the key-log file again when they are not known yet.
    pub fn get(&self, session_id: u64) -> Option<SessionKeys> {
        if let Some(k) = self.keys.lock().unwrap().get(&session_id) {
            return Some(k.clone());
        }
        self.reload();
        self.keys.lock().unwrap().get(&session_id).cloned()
    }

    fn reload(&self) {
        let Some(path) = &self.file else {
            return;
        };
        let Ok(text) = std::fs::read_to_string(path.as_path()) else {
            return;
        };
        let mut keys = self.keys.lock().unwrap();
        for k in text.lines().filter_map(parse_key_log_line) {
            if !k.bound_channel {
                // Keep a cipher found by opening a sealed frame (the line does not name it).
                let cipher = keys.get(&k.session_id).and_then(|old| old.cipher);
                let entry = keys.entry(k.session_id).or_insert(k);
                entry.cipher = entry.cipher.or(cipher);
            }
        }
    }

    /// Sign `msg` (one whole message, not a compound) as the server would with the key of
    /// the session its header names. False when that session's key is not known.
    pub fn sign(&self, msg: &mut Smb2) -> bool {
        let Some(keys) = self.get(msg.session_id()) else {
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

    /// Whether `msg` (one whole message) carries the right signature for its session.
    pub fn verifies(&self, msg: &Smb2) -> bool {
        let Some(keys) = self.get(msg.session_id()) else {
            return false;
        };
        Signer::new(
            keys.signing_algorithm,
            &keys.signing_key,
            CryptoBackend::default(),
        )
        .is_ok_and(|s| s.verify(&msg.0))
    }

    /// Decrypt a sealed reply (a TRANSFORM_HEADER frame, MS-SMB2 2.2.41) with the session's
    /// server-to-client key, as the server that sealed it could: the SMB2 message (or
    /// compound) inside. `None` when the frame is not sealed, the session or its keys are
    /// unknown, or it does not open. A key log line does not name the cipher: each cipher
    /// of the key's length is tried, and the one that opens is remembered.
    pub fn unseal(&self, frame: &[u8]) -> Option<Smb2> {
        if !is_sealed(frame) {
            return None;
        }
        let session_id = u64::from_le_bytes(frame[44..52].try_into().unwrap());
        let keys = self.get(session_id)?;
        let key = keys.decryption_key.as_ref()?;
        let candidates = match (keys.cipher, key.len()) {
            (Some(c), _) => vec![c],
            (None, 16) => vec![Cipher::Aes128Gcm, Cipher::Aes128Ccm],
            (None, 32) => vec![Cipher::Aes256Gcm, Cipher::Aes256Ccm],
            _ => return None,
        };
        for cipher in candidates {
            let Ok(sealer) = Sealer::new(cipher, key, CryptoBackend::default()) else {
                continue;
            };
            if let Ok(plain) = sealer.open(BytesMut::from(frame)) {
                if let Some(k) = self.keys.lock().unwrap().get_mut(&session_id) {
                    k.cipher = Some(cipher);
                }
                return Some(Smb2(plain));
            }
        }
        None
    }

    /// Encrypt `msg` (a message or compound) for the client as the server would: a
    /// TRANSFORM_HEADER frame under the session's server-to-client key, with a fresh nonce.
    /// `None` when the session's keys or cipher are not known.
    pub fn seal(&self, msg: &Smb2) -> Option<Bytes> {
        let keys = self.get(msg.session_id())?;
        let sealer = Sealer::new(
            keys.cipher?,
            keys.decryption_key.as_ref()?,
            CryptoBackend::default(),
        )
        .ok()?;
        sealer
            .seal(msg.session_id(), &[&msg.0[..]])
            .ok()
            .map(BytesMut::freeze)
    }
}

/// One line of a key-log file (`SMB3 session_id=<8 bytes LE hex> dialect=3.1.1
/// signing=AesGmac bound_channel=false session_key=<hex> signing_key=<hex> [c2s=<hex>
/// s2c=<hex>]`, see [`SessionKeys::to_line`]) back as keys. The line does not name the cipher,
/// so `cipher` is `None`. `None` for a line of another form.
pub fn parse_key_log_line(line: &str) -> Option<SessionKeys> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "SMB3" {
        return None;
    }
    let fields: HashMap<&str, &str> = fields.filter_map(|f| f.split_once('=')).collect();
    let id: [u8; 8] = unhex(fields.get("session_id")?)?.try_into().ok()?;
    let dialect = match *fields.get("dialect")? {
        "2.1" => Dialect::Smb210,
        "3.0" => Dialect::Smb300,
        "3.0.2" => Dialect::Smb302,
        "3.1.1" => Dialect::Smb311,
        _ => return None,
    };
    let signing_algorithm = match *fields.get("signing")? {
        "HmacSha256" => SigningAlgorithm::HmacSha256,
        "AesCmac" => SigningAlgorithm::AesCmac,
        "AesGmac" => SigningAlgorithm::AesGmac,
        _ => return None,
    };
    let optional = |name: &str| fields.get(name).and_then(|v| unhex(v));
    Some(SessionKeys {
        session_id: u64::from_le_bytes(id),
        dialect,
        signing_algorithm,
        cipher: None,
        session_key: unhex(fields.get("session_key")?)?,
        signing_key: unhex(fields.get("signing_key")?)?,
        encryption_key: optional("c2s"),
        decryption_key: optional("s2c"),
        bound_channel: *fields.get("bound_channel")? == "true",
    })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether `frame` is an encrypted message: a TRANSFORM_HEADER (MS-SMB2 2.2.41) and more.
pub fn is_sealed(frame: &[u8]) -> bool {
    frame.len() > 52 && frame[..4] == [0xFD, b'S', b'M', b'B']
}

/// What a [`renaming_entries`] rule has done so far.
#[derive(Clone, Debug, Default)]
pub struct RenameCounts {
    /// Entries renamed.
    pub renamed: Arc<AtomicU64>,
    /// Changed replies that could not be signed again because their session's key was not
    /// known (sent on with their old signature, which then fails).
    pub unsigned: Arc<AtomicU64>,
}

/// A rule for every connection that renames entries of QUERY_DIRECTORY replies
/// (FileIdBothDirectoryInformation, MS-SMB2 2.2.34, MS-FSCC 2.4.17) in place while `on`
/// holds: each entry whose name is a key of `renames` gets the value, which must be as long in
/// UTF-16. With `keys`, the changed reply is signed again with the session's key, as a hostile
/// server holding the session would; without, its signature is left as it was, as a man in
/// the middle without the keys must.
pub fn renaming_entries(
    renames: HashMap<String, String>,
    keys: Option<SigningKeys>,
    on: Arc<std::sync::atomic::AtomicBool>,
    counts: RenameCounts,
) -> impl FnMut(u64) -> Option<BoxedRule> {
    let renames = Arc::new(renames);
    move |_| {
        let (renames, keys, on, counts) =
            (renames.clone(), keys.clone(), on.clone(), counts.clone());
        Some(Box::new(move |dir, frame: Bytes| {
            let Some(mut m) = Smb2::of(&frame) else {
                return vec![Action::Frame(frame)];
            };
            if !on.load(Ordering::SeqCst)
                || dir != Direction::ToClient
                || m.command() != command::QUERY_DIRECTORY
                || m.status() != 0
                || m.next_command() != 0
            {
                return vec![Action::Frame(frame)];
            }
            let n = m.rename_directory_entries(|name| renames.get(name).cloned());
            if n == 0 {
                return vec![Action::Frame(frame)];
            }
            counts.renamed.fetch_add(n as u64, Ordering::SeqCst);
            if let Some(keys) = &keys {
                if !keys.sign(&mut m) {
                    counts.unsigned.fetch_add(1, Ordering::SeqCst);
                }
            }
            vec![Action::Frame(m.frame())]
        }) as BoxedRule)
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

/// Constants of the wire the security tests rewrite (MS-SMB2 2.2.3, 2.2.4, 2.2.6, 2.2.31).
pub mod wire {
    /// SMB2_NEGOTIATE_SIGNING_REQUIRED in a NEGOTIATE's SecurityMode.
    pub const SIGNING_REQUIRED: u16 = 0x0002;
    /// SMB2_ENCRYPTION_CAPABILITIES negotiate context.
    pub const ENCRYPTION_CAPABILITIES: u16 = 0x0002;
    /// SMB2_SIGNING_CAPABILITIES negotiate context.
    pub const SIGNING_CAPABILITIES: u16 = 0x0008;
    /// SMB2_SESSION_FLAG_ENCRYPT_DATA in a SESSION_SETUP response.
    pub const SESSION_FLAG_ENCRYPT_DATA: u16 = 0x0004;
    /// FSCTL_VALIDATE_NEGOTIATE_INFO.
    pub const FSCTL_VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;
    /// STATUS_PENDING: an interim reply (MS-SMB2 3.3.4.2).
    pub const STATUS_PENDING: u32 = 0x0000_0103;
    /// STATUS_MORE_PROCESSING_REQUIRED: a SESSION_SETUP round that is not the last.
    pub const STATUS_MORE_PROCESSING_REQUIRED: u32 = 0xC000_0016;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_log_line_reads_back_as_the_keys_it_was_written_from() {
        let keys = SessionKeys {
            session_id: 0x0000_0400_0000_0019,
            dialect: Dialect::Smb311,
            signing_algorithm: SigningAlgorithm::AesGmac,
            cipher: Some(Cipher::Aes128Gcm),
            session_key: vec![0x42; 16],
            signing_key: vec![0x01, 0xab],
            encryption_key: Some(vec![0x02]),
            decryption_key: Some(vec![0x03]),
            bound_channel: false,
        };
        let back = parse_key_log_line(&keys.to_line()).expect("a key log line");
        // The line does not name the cipher.
        assert_eq!(
            back,
            SessionKeys {
                cipher: None,
                ..keys.clone()
            }
        );
        let plain = SessionKeys {
            encryption_key: None,
            decryption_key: None,
            bound_channel: true,
            dialect: Dialect::Smb302,
            signing_algorithm: SigningAlgorithm::AesCmac,
            ..keys
        };
        let back = parse_key_log_line(&plain.to_line()).expect("a line without c2s/s2c");
        assert_eq!(back.decryption_key, None);
        assert!(back.bound_channel);
        assert_eq!(back.dialect, Dialect::Smb302);
        assert!(parse_key_log_line("CLIENT_RANDOM 00 11").is_none());
        assert!(parse_key_log_line("SMB3 session_id=zz").is_none());
    }
}
