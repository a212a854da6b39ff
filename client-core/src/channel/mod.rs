//! One TCP connection to the server: framing, MessageIds, credits, signing/sealing, and the
//! reader and writer tasks that drive it.
//!
//! ```text
//!  caller task                          writer task              server
//!  ───────────                          ───────────              ──────
//!  call(req) ── reserve credits+ids ─┐
//!            ── sign / seal ─────────┼─► queue ─► write_vectored ─────►
//!            ── await oneshot ◄──┐   │
//!                                │   reader task  ◄─────────────────── reply frames
//!                                └── decrypt, verify, match MessageId, grant credits
//! ```
//!
//! A caller that drops its future leaves its entry in the pending table; the reader still
//! receives the reply, returns its credits and discards it, so nothing wedges. If the request
//! is one the server works on asynchronously (it answered STATUS_PENDING), the channel also
//! sends an SMB2 CANCEL for it, so the server stops waiting on its behalf (see [`cancel`]).

mod cancel;
// pub(crate) only so that the hidden `crate::microbench` can hand it to the benches.
pub(crate) mod credits;
pub(crate) mod frame;
pub(crate) mod frame_buffers;
mod socket;
mod writer;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

// Progress is timed on tokio's clock, so the loss detector's tests can pause and advance it
// (the same clock as std's when not paused).
use tokio::time::Instant;

use bytes::{Bytes, BytesMut};
use smb3_proto::header::{Header, HeaderFlags, HEADER_LEN};
use smb3_proto::msg::compound::{build_compound, split_compound, CompoundMember};
use smb3_proto::msg::{credit_charge, RequestBody};
use smb3_proto::{Command, NtStatus};
use tokio::net::TcpSocket;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::error::{ConnectionLossCause, Error, ProtocolError, Result};
use crate::tasks::{self, TaskKind};
use cancel::{cancel_frame, CancelAddress, CancelOnDrop, CancelState, CancelTarget};
use credits::CreditWindow;
use frame::{frame_prefix, Frame, FrameError, FrameReader, MAX_FRAME};
pub(crate) use frame_buffers::BufferPool;
use socket::{QuietWriteHalf, SocketClosed, SocketHalf};
use writer::{run_writer, OutFrame};

/// MessageId the server uses for oplock and lease break notifications (MS-SMB2 3.3.4.6).
const UNSOLICITED_MESSAGE_ID: u64 = u64::MAX;

/// Signing and sealing of one channel, installed once its session is authenticated.
pub(crate) trait ChannelCrypto: Send + Sync + 'static {
    /// Sign in place: `head` is header + body (signature field at 48..64), `payload` follows.
    fn sign(&self, head: &mut [u8], payload: &[u8]);
    /// Check the signature of one received message.
    fn verify(&self, msg: &[u8]) -> bool;
    /// Same as `verify` for a message still owned mutably: the faster contiguous path.
    fn verify_in_place(&self, msg: &mut [u8]) -> bool;
    /// Encrypt a message given as parts into a TRANSFORM_HEADER frame.
    fn seal(&self, parts: &[&[u8]]) -> Result<BytesMut>;
    /// Decrypt a TRANSFORM_HEADER frame in place; returns where the plaintext message(s)
    /// start.
    fn open_in_place(&self, frame: &mut [u8]) -> Result<usize>;
    /// Whether replies that are not encrypted must carry a valid signature.
    fn replies_must_be_signed(&self) -> bool;
}

/// A request ready to be stamped and sent. Cloned before sending when it may have to be sent
/// again on another channel (failover replay).
#[derive(Clone)]
pub(crate) struct Request {
    command: Command,
    /// Header placeholder (64 bytes) followed by the encoded body.
    msg: BytesMut,
    payload: Bytes,
    credit_charge: u16,
    /// TreeId, SessionId, extra flags, ChannelSequence, sign/seal choices.
    pub(crate) tree_id: u32,
    pub(crate) session_id: u64,
    pub(crate) flags: u32,
    pub(crate) channel_sequence: u16,
    pub(crate) sign: bool,
    pub(crate) encrypt: bool,
    /// Keep the exact bytes sent (the 3.1.1 preauth hash needs them).
    pub(crate) keep_sent: bool,
    pub(crate) timeout: Duration,
    /// Called with the final reply when it arrives after the caller gave up on it (dropped
    /// its future or timed out), so a CREATE the server carried out anyway can be closed.
    pub(crate) on_abandoned: Option<OnAbandoned>,
    /// Told when the server answers with an interim STATUS_PENDING: it has taken the request
    /// on and will complete it later (how a CHANGE_NOTIFY's caller learns the server is
    /// watching).
    pub(crate) on_interim: Option<Arc<tokio::sync::Notify>>,
}

/// What to do with a reply nobody waits for any more (see [`Request::on_abandoned`]). It runs
/// on the reader task, so it must not block: it spawns whatever it needs to send.
pub(crate) type OnAbandoned = Arc<dyn Fn(Response) + Send + Sync>;

impl Request {
    /// Credits this request is charged.
    pub(crate) fn charge(&self) -> u16 {
        self.credit_charge
    }

    /// The request's command.
    pub(crate) fn command(&self) -> Command {
        self.command
    }

    /// Treat the request as `command` when its reply comes back (the fuzz harness sends one
    /// body and has its replies dispatched as every command's).
    pub(crate) fn pretend_command(&mut self, command: Command) {
        self.command = command;
    }

    /// Overwrite the FileId at `offset` into the body (see [`smb3_proto::msg::file_id_offset`]).
    pub(crate) fn set_file_id(&mut self, offset: usize, id: smb3_proto::msg::FileId) {
        let at = HEADER_LEN + offset;
        if let Some(slot) = self.msg.get_mut(at..at + 16) {
            slot[..8].copy_from_slice(&id.persistent.to_le_bytes());
            slot[8..].copy_from_slice(&id.volatile.to_le_bytes());
        }
    }

    /// Encode `body` behind a header placeholder.
    pub(crate) fn new<B: RequestBody>(body: &B) -> Request {
        let mut msg = BytesMut::with_capacity(HEADER_LEN + 128);
        msg.resize(HEADER_LEN, 0);
        body.encode_body(&mut msg);
        Request {
            command: B::COMMAND,
            msg,
            payload: body.payload(),
            credit_charge: credit_charge(body.credit_payload()),
            tree_id: 0,
            session_id: 0,
            flags: 0,
            channel_sequence: 0,
            sign: false,
            encrypt: false,
            keep_sent: false,
            timeout: Duration::from_secs(60),
            on_abandoned: None,
            on_interim: None,
        }
    }
}

/// A final reply, matched to its request.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) header: Header,
    /// The whole message, header included.
    pub(crate) msg: Bytes,
    /// The request as sent, when `keep_sent` was asked.
    pub(crate) sent: Option<Bytes>,
    /// The request was sent more than once (replayed after a lost channel or a stale
    /// refusal): this reply may answer a repeat of a request the server already carried out.
    pub(crate) resent: bool,
    /// The reply came encrypted (in a TRANSFORM_HEADER frame whose tag verified).
    pub(crate) sealed: bool,
}

impl Response {
    /// `Err(Error::Status)` unless the status is success or one of `also_ok`.
    pub(crate) fn check(self, also_ok: &[NtStatus]) -> Result<Response> {
        let st = self.header.status;
        if st == NtStatus::SUCCESS || also_ok.contains(&st) {
            Ok(self)
        } else {
            Err(Error::Status {
                status: st,
                command: self.header.command,
                path: None,
            })
        }
    }
}

/// Tuning of one channel.
#[derive(Clone, Debug)]
pub(crate) struct ChannelOptions {
    pub(crate) connect_timeout: Duration,
    /// Credits the channel tries to hold; 512 × 64 KiB = 32 MiB in flight.
    pub(crate) credit_target: u32,
    /// Where large replies are read into: the client's pool, shared by its channels.
    pub(crate) frame_buffers: BufferPool,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        ChannelOptions {
            connect_timeout: Duration::from_secs(10),
            credit_target: 512,
            frame_buffers: BufferPool::new(64 << 20),
        }
    }
}

struct Pending {
    reply: oneshot::Sender<Result<Response>>,
    charge: u16,
    command: Command,
    sent: Option<Bytes>,
    /// Set by the interim STATUS_PENDING reply: the server works on it asynchronously.
    async_id: Option<u64>,
    /// How a CANCEL for it is addressed, and whether one is wanted or sent.
    cancel_address: CancelAddress,
    cancel: CancelState,
    /// The request's [`Request::on_abandoned`]; dropped when the request is handed back for
    /// replay, since the replay (not this copy) then decides what the caller gets.
    on_abandoned: Option<OnAbandoned>,
    /// The request's [`Request::on_interim`].
    on_interim: Option<Arc<tokio::sync::Notify>>,
    /// The request went out encrypted: every reply to it, interim ones too, must come
    /// encrypted (MS-SMB2 3.3.4.1.4: the server encrypts any response to an encrypted
    /// request), or a man in the middle could answer an encrypted session in plaintext.
    sealed: bool,
}

impl Pending {
    fn cancel_target(&self, message_id: u64) -> CancelTarget {
        CancelTarget {
            message_id,
            async_id: self.async_id,
            address: self.cancel_address,
        }
    }
}

struct State {
    credits: CreditWindow,
    pending: HashMap<u64, Pending>,
    /// Why the channel is dead, once it is.
    dead: Option<ConnectionLossCause>,
    /// Counters.
    requests: u64,
    bytes_sent: u64,
    bytes_received: u64,
    cancels_sent: u64,
    /// When the last reply (any message) arrived, or the channel started.
    last_reply: Instant,
    /// When the pending table last went from empty to busy.
    busy_since: Instant,
    /// Smoothed time between replies while requests are outstanding: what "no progress for
    /// a while" means on this channel (a slow link with large chunks has long gaps).
    reply_gap: Duration,
}

/// How a channel is moving, for loss detection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Progress {
    /// Requests sent whose final reply has not arrived (abandoned ones included), except those
    /// the server has taken on asynchronously: a CHANGE_NOTIFY may rightly wait for hours, and
    /// its silence says nothing about the link.
    pub(crate) outstanding: usize,
    /// When the channel last showed life while busy: the later of its last reply and the
    /// moment it became busy.
    pub(crate) last_progress: Instant,
    /// When the last reply arrived.
    pub(crate) last_reply: Instant,
    /// Smoothed gap between replies while busy.
    pub(crate) reply_gap: Duration,
}

/// What the reader task and the handles share.
struct Shared {
    state: Mutex<State>,
    credit_granted: Notify,
    /// Woken once, when the channel dies.
    died: Notify,
    crypto: RwLock<Option<Arc<dyn ChannelCrypto>>>,
    /// The writer's queue, for CANCELs queued by the reader and by dropped callers; weak so
    /// that the writer still ends (and the socket closes) when the last `Channel` goes.
    queue: mpsc::WeakUnboundedSender<OutFrame>,
    /// The reader and writer tasks, so that whichever finds the connection over stops both
    /// (and the socket closes). Set right after they are spawned.
    tasks: OnceLock<Tasks>,
    peer: SocketAddr,
    local: SocketAddr,
}

struct Tasks {
    reader: tokio::task::AbortHandle,
    writer: tokio::task::AbortHandle,
}

/// A cheap handle on one connection. Clones share the connection; it closes when the last
/// handle is dropped.
#[derive(Clone)]
pub(crate) struct Channel {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    queue: mpsc::UnboundedSender<OutFrame>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("local", &self.local())
            .field("peer", &self.peer())
            .finish()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Nobody can send on it any more; watchers learn that it is gone. The writer still
        // sends what is queued (a CANCEL of a dropped caller) and ends with the queue.
        if let Some(tasks) = self.shared.tasks.get() {
            tasks.reader.abort();
        }
        self.shared.mark_dead(ConnectionLossCause::ClosedByClient);
    }
}

/// Waits for one channel to die without keeping it open.
pub(crate) struct DeathWatch(Arc<Shared>);

impl DeathWatch {
    /// Resolves once the channel has failed or been closed; returns why.
    pub(crate) async fn wait(&self) -> ConnectionLossCause {
        loop {
            let died = self.0.died.notified();
            tokio::pin!(died);
            died.as_mut().enable();
            if let Some(reason) = self.0.lock().dead.clone() {
                return reason;
            }
            died.await;
        }
    }
}

/// Messages the server sends without a request (oplock and lease breaks).
pub(crate) type Unsolicited = mpsc::UnboundedReceiver<Bytes>;

impl Channel {
    /// Connect to `peer`, from `local` when given (multichannel binds each channel to a NIC).
    pub(crate) async fn connect(
        peer: SocketAddr,
        local: Option<IpAddr>,
        opts: &ChannelOptions,
    ) -> Result<(Channel, Unsolicited)> {
        let socket = match peer {
            SocketAddr::V4(_) => TcpSocket::new_v4(),
            SocketAddr::V6(_) => TcpSocket::new_v6(),
        }
        .map_err(|e| Error::io(Some(peer), e))?;
        if let Some(ip) = local {
            socket
                .bind(SocketAddr::new(ip, 0))
                .map_err(|e| Error::io(Some(peer), e))?;
        }
        socket
            .set_nodelay(true)
            .map_err(|e| Error::io(Some(peer), e))?;
        // Closing a channel aborts it (RST) and discards whatever is still queued: a request
        // the client gave up on, and replayed elsewhere, must never reach the server later,
        // when a link that was down comes back (see `background::watchdog`).
        socket
            .set_zero_linger()
            .map_err(|e| Error::io(Some(peer), e))?;
        let stream = match tokio::time::timeout(opts.connect_timeout, socket.connect(peer)).await {
            Ok(r) => r.map_err(|e| Error::io(Some(peer), e))?,
            Err(_) => {
                return Err(Error::Timeout {
                    what: "TCP connect",
                    after: opts.connect_timeout,
                })
            }
        };
        let local_addr = stream.local_addr().map_err(|e| Error::io(Some(peer), e))?;
        let (rd, wr) = stream.into_split();
        Ok(Self::start(
            rd,
            QuietWriteHalf::new(wr),
            peer,
            local_addr,
            opts,
        ))
    }

    /// Drive an already-connected byte stream (tests use an in-memory duplex).
    pub(crate) fn start<R, W>(
        rd: R,
        wr: W,
        peer: SocketAddr,
        local: SocketAddr,
        opts: &ChannelOptions,
    ) -> (Channel, Unsolicited)
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (queue, queue_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                credits: CreditWindow::new(opts.credit_target),
                pending: HashMap::new(),
                dead: None,
                requests: 0,
                bytes_sent: 0,
                bytes_received: 0,
                cancels_sent: 0,
                last_reply: Instant::now(),
                busy_since: Instant::now(),
                reply_gap: Duration::ZERO,
            }),
            credit_granted: Notify::new(),
            died: Notify::new(),
            crypto: RwLock::new(None),
            queue: queue.downgrade(),
            tasks: OnceLock::new(),
            peer,
            local,
        });
        // The requests outstanding when the connection ends go back to their callers only
        // once both halves, and so the socket, are gone (see `socket`).
        let closed = {
            let shared = shared.clone();
            SocketClosed::new(move || shared.release_outstanding())
        };
        let rd = SocketHalf::new(rd, closed.clone());
        let wr = SocketHalf::new(wr, closed);
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let writer_shared = shared.clone();
        let writer = tasks::spawn(TaskKind::ChannelWriter, async move {
            if let Err(e) = run_writer(wr, queue_rx).await {
                writer_shared.fail(ConnectionLossCause::WriteFailed {
                    source: Arc::new(e),
                });
            }
        })
        .abort_handle();
        let reader_shared = shared.clone();
        let frame_buffers = opts.frame_buffers.clone();
        let reader = tasks::spawn(TaskKind::ChannelReader, async move {
            let reason = read_loop(
                &reader_shared,
                FrameReader::new(rd, frame_buffers),
                events_tx,
            )
            .await;
            reader_shared.fail(reason);
        })
        .abort_handle();
        shared.set_tasks(Tasks { reader, writer });
        (
            Channel {
                inner: Arc::new(Inner { shared, queue }),
            },
            events_rx,
        )
    }

    /// Install signing/sealing for this channel's session.
    pub(crate) fn set_crypto(&self, crypto: Arc<dyn ChannelCrypto>) {
        *self
            .inner
            .shared
            .crypto
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(crypto);
    }

    /// Server address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.inner.shared.peer
    }

    /// Local address the connection uses.
    pub(crate) fn local(&self) -> SocketAddr {
        self.inner.shared.local
    }

    /// Why the channel died, if it has.
    pub(crate) fn dead_reason(&self) -> Option<ConnectionLossCause> {
        self.inner.shared.lock().dead.clone()
    }

    /// A handle that learns when this channel dies, without keeping it alive.
    pub(crate) fn death_watch(&self) -> DeathWatch {
        DeathWatch(self.inner.shared.clone())
    }

    /// Whether the connection has failed.
    pub(crate) fn is_dead(&self) -> bool {
        self.inner.shared.lock().dead.is_some()
    }

    /// (credits available now, credits of requests in flight): the dispatcher's view of how
    /// busy the channel is. A credit covers 64 KiB either way, so in-flight credits measure
    /// bytes in flight for reads and writes alike.
    pub(crate) fn load(&self) -> (u32, u32) {
        let st = self.inner.shared.lock();
        (st.credits.available(), st.credits.in_flight())
    }

    /// Requests sent whose final reply has not arrived.
    pub(crate) fn outstanding(&self) -> usize {
        self.inner.shared.lock().pending.len()
    }

    /// Requests whose final reply is due: every outstanding one but those the server holds
    /// for the caller asynchronously (a CHANGE_NOTIFY, a blocking LOCK) and nobody
    /// cancelled, which may wait for ever. What a LOGOFF lets finish first (see `settle`).
    pub(crate) fn settling(&self) -> usize {
        let st = self.inner.shared.lock();
        st.pending
            .values()
            .filter(|p| p.async_id.is_none() || p.cancel != CancelState::None)
            .count()
    }

    /// Outstanding requests and when the channel last made progress.
    pub(crate) fn progress(&self) -> Progress {
        let st = self.inner.shared.lock();
        Progress {
            outstanding: st.pending.values().filter(|p| p.async_id.is_none()).count(),
            last_progress: st.last_reply.max(st.busy_since),
            last_reply: st.last_reply,
            reply_gap: st.reply_gap,
        }
    }

    /// Give up on every request outstanding here: their callers get `ConnectionLost` now
    /// (and replay them elsewhere) while the entries stay, so late replies are still matched
    /// and return their credits if the channel turns out to be alive. Returns their commands.
    ///
    /// Each handed-back request is also cancelled here, at once if the server has taken it
    /// on asynchronously, or when its interim reply arrives: if the channel is alive after
    /// all, the original must not stay parked at the server beside its replay (a
    /// CHANGE_NOTIFY would swallow the next change; a CREATE waiting on a lease break would
    /// keep its replay answering STATUS_FILE_NOT_AVAILABLE).
    ///
    /// The channel stays open, so what it holds may still reach the server later. When an
    /// outstanding request is one that must not (`harmless_if_late` says no), nothing is
    /// handed back and that request's command is returned: the caller closes the channel
    /// instead, which hands everything back once the socket is gone. The check and the hand
    /// back are one step under the channel's lock, so no request slips between them.
    pub(crate) fn abandon_outstanding(
        &self,
        harmless_if_late: impl Fn(Command) -> bool,
        cause: ConnectionLossCause,
    ) -> std::result::Result<Vec<Command>, Command> {
        let shared = &self.inner.shared;
        let mut abandoned: Vec<(Command, oneshot::Sender<Result<Response>>)> = Vec::new();
        let mut cancels: Vec<CancelTarget> = Vec::new();
        {
            let mut st = shared.lock();
            if let Some(p) = st
                .pending
                .values()
                .find(|p| !p.reply.is_closed() && !harmless_if_late(p.command))
            {
                return Err(p.command);
            }
            for (&message_id, p) in st.pending.iter_mut() {
                if p.reply.is_closed() {
                    continue; // its caller gave up before: already cancelled if need be
                }
                let (closed, _) = oneshot::channel();
                abandoned.push((p.command, std::mem::replace(&mut p.reply, closed)));
                p.on_abandoned = None;
                if p.cancel == CancelState::None {
                    if p.async_id.is_some() {
                        p.cancel = CancelState::Sent;
                        cancels.push(p.cancel_target(message_id));
                    } else {
                        p.cancel = CancelState::Wanted;
                    }
                }
            }
        }
        for target in cancels {
            shared.send_cancel(target);
        }
        let commands = abandoned.iter().map(|(command, _)| *command).collect();
        for (command, reply) in abandoned {
            let _ = reply.send(Err(Error::ConnectionLost {
                command,
                cause: cause.clone(),
            }));
        }
        Ok(commands)
    }

    /// Close the connection now: nothing more is sent on it, and everything outstanding
    /// fails with `ConnectionLost` as soon as the socket is closed (a moment later, when the
    /// reader and writer tasks have stopped), never before (see `socket`).
    pub(crate) fn close(&self, cause: ConnectionLossCause) {
        self.inner.shared.fail(cause);
    }

    /// Credits held (available + in flight).
    pub(crate) fn credits_total(&self) -> u32 {
        self.inner.shared.lock().credits.total()
    }

    /// (requests, bytes sent, bytes received) so far.
    pub(crate) fn counters(&self) -> (u64, u64, u64) {
        let st = self.inner.shared.lock();
        (st.requests, st.bytes_sent, st.bytes_received)
    }

    /// CANCELs sent for requests whose callers gave up.
    pub(crate) fn cancels_sent(&self) -> u64 {
        self.inner.shared.lock().cancels_sent
    }

    /// Send `req` and wait for its final reply (interim STATUS_PENDING replies are absorbed).
    /// Dropping the future, or the request timing out, cancels the request (see [`cancel`]).
    pub(crate) async fn call(&self, req: Request) -> Result<Response> {
        let timeout = req.timeout;
        let command = req.command;
        let sent = self.send(vec![req], false).await?;
        // No await between the send and the guard: a drop from here on cancels.
        let mut guard = self.cancel_guard(&sent);
        let (message_id, rx) = sent.into_iter().next().expect("one receiver per request");
        let deadline = deadline(Instant::now(), timeout);
        let result = await_reply(&self.inner.shared, rx, command, deadline, timeout).await;
        settle(&mut guard, message_id, &result);
        result
    }

    /// Send `reqs` as one compound frame (MS-SMB2 3.2.4.1.4) and wait for every reply. With
    /// `related`, members after the first inherit the previous member's FileId, SessionId and
    /// TreeId (SMB2_FLAGS_RELATED_OPERATIONS).
    pub(crate) async fn call_compound(
        &self,
        reqs: Vec<Request>,
        related: bool,
    ) -> Result<Vec<Result<Response>>> {
        let meta: Vec<(Command, Duration)> = reqs.iter().map(|r| (r.command, r.timeout)).collect();
        let sent = self.send(reqs, related).await?;
        let mut guard = self.cancel_guard(&sent);
        let mut out = Vec::with_capacity(sent.len());
        // Every member's timeout counts from the send: the replies come together, and
        // waiting for each in turn with a fresh timeout would make a silent server's
        // three-member compound take three timeouts to fail.
        let sent_at = Instant::now();
        for ((message_id, rx), (command, timeout)) in sent.into_iter().zip(meta) {
            let result = await_reply(
                &self.inner.shared,
                rx,
                command,
                deadline(sent_at, timeout),
                timeout,
            )
            .await;
            settle(&mut guard, message_id, &result);
            out.push(result);
        }
        Ok(out)
    }

    fn cancel_guard(&self, sent: &[(u64, oneshot::Receiver<Result<Response>>)]) -> CancelOnDrop {
        CancelOnDrop::new(
            self.inner.shared.clone(),
            sent.iter().map(|(id, _)| *id).collect(),
        )
    }

    /// Stamp `reqs` (one frame; several messages make a compound) and queue the frame.
    /// Returns each request's MessageId and the receiver of its reply, in request order.
    async fn send(
        &self,
        mut reqs: Vec<Request>,
        related: bool,
    ) -> Result<Vec<(u64, oneshot::Receiver<Result<Response>>)>> {
        let shared = &self.inner.shared;
        let charges: Vec<u16> = reqs.iter().map(|r| r.credit_charge).collect();
        let total_charge: u32 = charges.iter().map(|&c| u32::from(c.max(1))).sum();
        // A compound is sealed as a whole when any member asks for it (and keys exist).
        let seal_any = reqs.iter().any(|r| r.encrypt);
        let sealing = seal_any && shared.crypto().is_some();
        let mut receivers = Vec::with_capacity(reqs.len());
        let reservations = loop {
            let granted = shared.credit_granted.notified();
            tokio::pin!(granted);
            granted.as_mut().enable();
            {
                let mut st = shared.lock();
                if let Some(cause) = &st.dead {
                    return Err(Error::ConnectionLost {
                        command: reqs[0].command,
                        cause: cause.clone(),
                    });
                }
                if total_charge > st.credits.total() && st.credits.in_flight() == 0 {
                    // Nothing in flight can bring more credits: waiting would hang forever.
                    return Err(ProtocolError::TooFewCredits {
                        needed: total_charge,
                        held: st.credits.total(),
                    }
                    .into());
                }
                if st.credits.available() >= total_charge {
                    if st.pending.is_empty() {
                        st.busy_since = Instant::now();
                    }
                    let mut rs = Vec::with_capacity(reqs.len());
                    for (req, &charge) in reqs.iter().zip(&charges) {
                        let r = st.credits.reserve(charge).expect("availability checked");
                        let (tx, rx) = oneshot::channel();
                        receivers.push((r.message_id, rx));
                        st.pending.insert(
                            r.message_id,
                            Pending {
                                reply: tx,
                                charge: r.charge,
                                command: req.command,
                                sent: None,
                                async_id: None,
                                cancel_address: CancelAddress {
                                    session_id: req.session_id,
                                    tree_id: req.tree_id,
                                    sign: req.sign,
                                    seal: seal_any,
                                },
                                cancel: CancelState::None,
                                on_abandoned: req.on_abandoned.clone(),
                                on_interim: req.on_interim.clone(),
                                sealed: sealing,
                            },
                        );
                        st.requests += 1;
                        st.bytes_sent += (req.msg.len() + req.payload.len()) as u64;
                        rs.push(r);
                    }
                    break rs;
                }
            }
            granted.await;
        };
        // From here to the queue there is no await: every reserved MessageId is sent.
        let crypto = shared.crypto();
        let seal = sealing;
        let count = reqs.len();
        let mut messages: Vec<(BytesMut, Bytes)> = Vec::with_capacity(count);
        let mut signed = Vec::with_capacity(count);
        for (req, r) in reqs.iter_mut().zip(&reservations) {
            let mut header = Header::request(req.command);
            header.credit_charge = r.charge;
            header.credits = r.credit_request;
            header.message_id = r.message_id;
            header.tree_id = req.tree_id;
            header.session_id = req.session_id;
            header.set_channel_sequence(req.channel_sequence);
            header.flags = HeaderFlags(req.flags);
            let sign = req.sign && !seal && crypto.is_some();
            if sign {
                header.flags.0 |= HeaderFlags::SIGNED;
            }
            signed.push(sign);
            let mut msg = std::mem::take(&mut req.msg);
            let mut head = BytesMut::with_capacity(HEADER_LEN);
            header.encode(&mut head);
            msg[..HEADER_LEN].copy_from_slice(&head);
            messages.push((msg, std::mem::take(&mut req.payload)));
        }
        let frame = if count == 1 {
            let (mut msg, payload) = messages.pop().expect("one message");
            match (&crypto, seal, signed[0]) {
                (Some(c), true, _) => sealed_frame(shared, c.as_ref(), &[&msg, &payload])?,
                (Some(c), false, true) => {
                    c.sign(&mut msg, &payload);
                    unsealed_frame(msg.freeze(), payload)
                }
                _ => unsealed_frame(msg.freeze(), payload),
            }
        } else {
            // Compound members are 8-byte aligned and each is signed on its own, padding
            // included (MS-SMB2 3.2.4.1.4); `build_compound` lays them out.
            let members = messages
                .into_iter()
                .map(|(msg, payload)| CompoundMember::from_parts(msg, payload))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(ProtocolError::Frame)?;
            let mut compound = build_compound(members, related);
            if let Some(c) = &crypto {
                for (i, &sign) in signed.iter().enumerate() {
                    if let (true, Some(m)) = (sign, compound.message_mut(i)) {
                        c.sign(m, &[]);
                    }
                }
            }
            match (&crypto, seal) {
                (Some(c), true) => sealed_frame(shared, c.as_ref(), &[&compound.frame])?,
                _ => unsealed_frame(compound.frame.freeze(), Bytes::new()),
            }
        };
        if reqs.iter().any(|r| r.keep_sent) {
            let mut sent = BytesMut::from(&frame.head[..]);
            sent.extend_from_slice(&frame.payload);
            let sent = sent.freeze();
            let mut st = shared.lock();
            for r in &reservations {
                if let Some(p) = st.pending.get_mut(&r.message_id) {
                    p.sent = Some(sent.clone());
                }
            }
        }
        if frame.head.len() + frame.payload.len() > MAX_FRAME {
            shared.fail(ConnectionLossCause::OversizedRequest);
            return Err(Error::ApiMisuse(
                "request exceeds the 16 MiB transport frame",
            ));
        }
        if self.inner.queue.send(frame).is_err() {
            return Err(Error::ConnectionLost {
                command: reqs[0].command,
                cause: shared.death(),
            });
        }
        Ok(receivers)
    }
}

/// The caller has an outcome for `message_id`: no CANCEL for it, unless the outcome is that
/// it gave up waiting (a timeout), which cancels the request like a dropped future does.
fn settle(guard: &mut CancelOnDrop, message_id: u64, result: &Result<Response>) {
    if !matches!(result, Err(Error::Timeout { .. })) {
        guard.disarm(message_id);
    }
}

/// `timeout` after `start`; a timeout too long to add (a CHANGE_NOTIFY waits without end,
/// `Duration::MAX`) is a year, which no request outlives.
fn deadline(start: Instant, timeout: Duration) -> Instant {
    start
        .checked_add(timeout)
        .unwrap_or_else(|| start + Duration::from_secs(365 * 24 * 3600))
}

/// Wait for the reply in `rx` until `deadline`; a timeout is reported as `timeout` (the
/// request's own, counted from its send).
async fn await_reply(
    shared: &Shared,
    rx: oneshot::Receiver<Result<Response>>,
    command: Command,
    deadline: Instant,
    timeout: Duration,
) -> Result<Response> {
    match tokio::time::timeout_at(deadline, rx).await {
        Ok(Ok(result)) => result,
        // The entry went without an answer: only when the channel ended.
        Ok(Err(_)) => Err(Error::ConnectionLost {
            command,
            cause: shared.death(),
        }),
        Err(_) => Err(Error::Timeout {
            what: command.name(),
            after: timeout,
        }),
    }
}

fn sealed_frame(shared: &Shared, crypto: &dyn ChannelCrypto, parts: &[&[u8]]) -> Result<OutFrame> {
    match crypto.seal(parts) {
        Ok(s) => Ok(OutFrame {
            prefix: frame_prefix(s.len()),
            head: s.freeze(),
            payload: Bytes::new(),
        }),
        Err(e) => {
            // Sealing cannot fail with valid keys; the channel is unusable if it does.
            tracing::warn!(peer = %shared.peer, error = %e, "sealing failed; closing the channel");
            shared.fail(ConnectionLossCause::SealingFailed);
            Err(e)
        }
    }
}

fn unsealed_frame(head: Bytes, payload: Bytes) -> OutFrame {
    OutFrame {
        prefix: frame_prefix(head.len() + payload.len()),
        head,
        payload,
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State inconsistent in a way that
        // matters more than losing the channel, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn crypto(&self) -> Option<Arc<dyn ChannelCrypto>> {
        self.crypto
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The caller of `message_id` gave up: cancel the request now if it went async, or
    /// remember to once its interim reply arrives. Nothing to do once the final reply came or
    /// the channel died (the entry is gone), or when a CANCEL is already wanted or sent.
    fn want_cancel(&self, message_id: u64) {
        let target = {
            let mut st = self.lock();
            let Some(p) = st.pending.get_mut(&message_id) else {
                return;
            };
            if p.cancel != CancelState::None {
                return;
            }
            if p.async_id.is_none() {
                p.cancel = CancelState::Wanted;
                return;
            }
            p.cancel = CancelState::Sent;
            p.cancel_target(message_id)
        };
        self.send_cancel(target);
    }

    /// Queue one CANCEL for the writer.
    fn send_cancel(&self, target: CancelTarget) {
        let Some(queue) = self.queue.upgrade() else {
            return; // the channel is closing: the server drops its requests with it
        };
        match cancel_frame(&target, self.crypto().as_deref()) {
            Ok(frame) => {
                if queue.send(frame).is_ok() {
                    self.lock().cancels_sent += 1;
                    tracing::debug!(
                        peer = %self.peer,
                        message_id = target.message_id,
                        async_id = ?target.async_id,
                        "CANCEL sent"
                    );
                }
            }
            Err(e) => tracing::warn!(peer = %self.peer, error = %e, "CANCEL not sent"),
        }
    }

    /// The connection is over: nothing more is sent on it, and the reader and writer stop,
    /// which closes the socket (the writer may be blocked on the full send buffer of a dead
    /// path, so it is stopped too). What was outstanding goes back to its callers once the
    /// socket is closed (`release_outstanding`).
    fn fail(&self, reason: ConnectionLossCause) {
        self.mark_dead(reason);
        if let Some(tasks) = self.tasks.get() {
            tasks.writer.abort();
            tasks.reader.abort();
        }
    }

    /// Remember the tasks; a connection that failed before they were known stops them now.
    fn set_tasks(&self, tasks: Tasks) {
        let tasks = self.tasks.get_or_init(|| tasks);
        if self.lock().dead.is_some() {
            tasks.writer.abort();
            tasks.reader.abort();
        }
    }

    /// Why the channel ended; a channel not yet marked dead is one whose last handle is
    /// going away.
    fn death(&self) -> ConnectionLossCause {
        self.lock()
            .dead
            .clone()
            .unwrap_or(ConnectionLossCause::ClosedByClient)
    }

    /// Mark the channel dead (keeping the first reason) and wake whoever waits on it:
    /// callers waiting for credits give up at once (they sent nothing here), watchers learn
    /// that it died.
    fn mark_dead(&self, reason: ConnectionLossCause) {
        {
            let mut st = self.lock();
            if st.dead.is_none() {
                tracing::debug!(peer = %self.peer, %reason, "channel closed");
                st.dead = Some(reason);
            }
        }
        self.credit_granted.notify_waiters();
        self.died.notify_waiters();
    }

    /// The socket is closed: every request still outstanding fails with `ConnectionLost`,
    /// so its caller may replay it elsewhere.
    fn release_outstanding(&self) {
        let (pending, cause) = {
            let mut st = self.lock();
            // Both halves of the socket are gone, which happens only once the channel
            // failed or its last handle was dropped: the reason is known by now.
            let cause = st
                .dead
                .get_or_insert(ConnectionLossCause::ClosedByClient)
                .clone();
            (std::mem::take(&mut st.pending), cause)
        };
        for (_, p) in pending {
            let _ = p.reply.send(Err(Error::ConnectionLost {
                command: p.command,
                cause: cause.clone(),
            }));
        }
        self.credit_granted.notify_waiters();
        self.died.notify_waiters();
    }
}

/// The reader task: runs until the connection fails; returns why.
async fn read_loop<R: tokio::io::AsyncRead + Unpin>(
    shared: &Shared,
    mut frames: FrameReader<R>,
    events: mpsc::UnboundedSender<Bytes>,
) -> ConnectionLossCause {
    loop {
        let frame = match frames.next().await {
            Ok(f) => f,
            Err(FrameError::Eof) => return ConnectionLossCause::ClosedByServer,
            Err(FrameError::Io(e)) => {
                return ConnectionLossCause::ReadFailed {
                    source: Arc::new(e),
                }
            }
            Err(FrameError::BadPrefix(b)) => {
                return ConnectionLossCause::ProtocolViolation {
                    source: Arc::new(ProtocolError::BadTransportHeader(b).into()),
                }
            }
        };
        if let Err(e) = handle_frame(shared, frame, &events) {
            return ConnectionLossCause::ProtocolViolation {
                source: Arc::new(e),
            };
        }
    }
}

fn handle_frame(
    shared: &Shared,
    mut plain: Frame,
    events: &mpsc::UnboundedSender<Bytes>,
) -> Result<()> {
    let crypto = shared.crypto();
    let encrypted = plain.starts_with(&[0xFD, b'S', b'M', b'B']);
    if encrypted {
        let Some(c) = &crypto else {
            return Err(ProtocolError::EncryptedWithoutKeys.into());
        };
        let start = c.open_in_place(plain.as_mut_slice())?;
        plain.advance(start);
    }
    // Most frames hold one message: verify it while the buffer is still ours to mutate, which
    // lets the signer MAC it in one contiguous pass (several times faster for AES-GMAC).
    let single = plain.get(20..24) == Some(&[0u8; 4][..]);
    let mut verified_in_place = false;
    if single {
        let header = Header::decode(&plain).map_err(ProtocolError::Frame)?;
        match (verdict(crypto.as_deref(), &header, encrypted), &crypto) {
            (Verdict::Verify, Some(c)) => {
                if !c.verify_in_place(plain.as_mut_slice()) {
                    return Err(reject(shared, &header, bad_signature(&header)));
                }
                verified_in_place = true;
            }
            (Verdict::Reject, _) => return Err(reject(shared, &header, unsigned(&header))),
            _ => {}
        }
    }
    let plain = plain.freeze();
    let frame_len = plain.len() as u64;
    let messages = split_compound(&plain).map_err(ProtocolError::Frame)?;
    for (i, msg) in messages.into_iter().enumerate() {
        let header = Header::decode(&msg).map_err(ProtocolError::Frame)?;
        if !header.is_response() {
            return Err(ProtocolError::RequestFromServer.into());
        }
        if header.message_id == UNSOLICITED_MESSAGE_ID {
            if header.command == Command::OPLOCK_BREAK {
                let _ = events.send(msg);
                continue;
            }
            return Err(ProtocolError::UnknownMessageId(header.message_id).into());
        }
        if !verified_in_place {
            match (verdict(crypto.as_deref(), &header, encrypted), &crypto) {
                (Verdict::Verify, Some(c)) if !c.verify(&msg) => {
                    return Err(reject(shared, &header, bad_signature(&header)))
                }
                (Verdict::Reject, _) => return Err(reject(shared, &header, unsigned(&header))),
                _ => {}
            }
        }
        deliver(
            shared,
            header,
            msg,
            if i == 0 { frame_len } else { 0 },
            encrypted,
        )?;
    }
    Ok(())
}

/// What to do about a reply's signature.
enum Verdict {
    /// Nothing to check (no session keys yet, encrypted, or exempt).
    Accept,
    /// Signed: verify it.
    Verify,
    /// Unsigned where a signature is required.
    Reject,
}

/// MS-SMB2 3.2.5.1.3: a reply in a signed session is verified; an unsigned one is accepted
/// only where the server may not sign (interim replies, SESSION_SETUP which the session layer
/// verifies itself with the freshly derived key). Encrypted replies are authenticated by the
/// AEAD tag instead.
fn verdict(crypto: Option<&dyn ChannelCrypto>, header: &Header, encrypted: bool) -> Verdict {
    let Some(c) = crypto else {
        return Verdict::Accept;
    };
    if encrypted
        || header.command == Command::SESSION_SETUP
        || header.command == Command::NEGOTIATE
        || header.message_id == UNSOLICITED_MESSAGE_ID
    {
        return Verdict::Accept;
    }
    let interim = header.status == NtStatus::PENDING && header.is_async();
    if header.flags.has(HeaderFlags::SIGNED) {
        Verdict::Verify
    } else if c.replies_must_be_signed() && !interim {
        Verdict::Reject
    } else {
        Verdict::Accept
    }
}

/// A reply failed its signature check (`why`): the request it claims to answer learns exactly
/// why; the others see the connection drop, since nothing more from it is trusted.
fn reject(shared: &Shared, header: &Header, why: Error) -> Error {
    let pending = shared.lock().pending.remove(&header.message_id);
    if let Some(p) = pending {
        let _ = p.reply.send(Err(same_error(&why, header)));
    }
    why
}

/// A second copy of a signature verdict (errors are not `Clone`).
fn same_error(why: &Error, header: &Header) -> Error {
    match why {
        Error::Protocol(ProtocolError::UnsignedReply { .. }) => unsigned(header),
        _ => bad_signature(header),
    }
}

fn unsigned(header: &Header) -> Error {
    ProtocolError::UnsignedReply {
        command: header.command,
        message_id: header.message_id,
    }
    .into()
}

fn unsealed(header: &Header) -> Error {
    ProtocolError::UnsealedReply {
        command: header.command,
        message_id: header.message_id,
    }
    .into()
}

fn bad_signature(header: &Header) -> Error {
    ProtocolError::BadSignature {
        command: header.command,
        message_id: header.message_id,
    }
    .into()
}

/// Track the pace of replies: the gap since the last sign of life, smoothed (1/8 weight).
fn note_reply(st: &mut State, now: Instant) {
    if !st.pending.is_empty() {
        let gap = now.saturating_duration_since(st.last_reply.max(st.busy_since));
        st.reply_gap = (st.reply_gap * 7 + gap) / 8;
    }
    st.last_reply = now;
}

fn deliver(
    shared: &Shared,
    header: Header,
    msg: Bytes,
    wire_len: u64,
    encrypted: bool,
) -> Result<()> {
    let interim = header.status == NtStatus::PENDING && header.is_async();
    let mut st = shared.lock();
    st.bytes_received += wire_len;
    note_reply(&mut st, Instant::now());
    let Some(p) = st.pending.get_mut(&header.message_id) else {
        return Err(ProtocolError::UnknownMessageId(header.message_id).into());
    };
    if p.command != header.command {
        return Err(ProtocolError::CommandMismatch {
            sent: p.command,
            got: header.command,
        }
        .into());
    }
    if p.sealed && !encrypted {
        let p = st
            .pending
            .remove(&header.message_id)
            .expect("checked above");
        drop(st);
        let _ = p.reply.send(Err(unsealed(&header)));
        return Err(unsealed(&header));
    }
    let charge = p.charge;
    if interim {
        p.async_id = Some(header.async_id);
        if let Some(told) = &p.on_interim {
            // `notify_one` keeps a permit: a caller that looks only later still learns it.
            told.notify_one();
        }
        // The caller gave up before this interim reply: now the request can be named.
        let cancel = (p.cancel == CancelState::Wanted).then(|| {
            p.cancel = CancelState::Sent;
            p.cancel_target(header.message_id)
        });
        let r = st.credits.on_response(charge, header.credits, false);
        drop(st);
        shared.credit_granted.notify_waiters();
        if let Some(target) = cancel {
            shared.send_cancel(target);
        }
        return r.map_err(|_| ProtocolError::NoCredits.into());
    }
    let p = st
        .pending
        .remove(&header.message_id)
        .expect("checked above");
    let r = st.credits.on_response(charge, header.credits, true);
    drop(st);
    shared.credit_granted.notify_waiters();
    let reply = Response {
        header,
        msg,
        sent: p.sent,
        resent: false,
        sealed: encrypted,
    };
    // The caller may have given up (dropped its future, or timed out): the reply goes to the
    // request's `on_abandoned`, if it has one, or is discarded.
    if let Err(Ok(unwanted)) = p.reply.send(Ok(reply)) {
        if let Some(on_abandoned) = p.on_abandoned {
            on_abandoned(unwanted);
        }
    }
    r.map_err(|_| ProtocolError::NoCredits.into())
}
