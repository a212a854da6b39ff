//! One connection to the server (TCP, or a QUIC stream: see [`quic`]): framing, MessageIds, credits, signing/sealing, and the
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
//! The caller's side is [`send`] (one step per function), the tasks are [`reader`] and
//! [`writer`], and what a caller hands over and gets back is in [`request`]. This module holds
//! the handle ([`Channel`]) and the state the handles and the tasks share: the credit window
//! and the pending table of requests sent and not yet answered.
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
mod reader;
mod request;
// SMB over QUIC: the same channel over one QUIC stream instead of a TCP connection.
pub(crate) mod quic;
mod send;
mod socket;
mod writer;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

// Progress is timed on tokio's clock, so the loss detector's tests can pause and advance it
// (the same clock as std's when not paused).
use tokio::time::Instant;

use bytes::{Bytes, BytesMut};
use smb3_proto::Command;
use tokio::net::TcpSocket;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::error::{ConnectionLossCause, Error, Result};
use crate::tasks::{self, TaskKind};
use cancel::{CancelAddress, CancelState, CancelTarget};
use credits::CreditWindow;
use frame::FrameReader;
pub(crate) use frame_buffers::BufferPool;
use reader::read_loop;
pub(crate) use request::{OnAbandoned, Request, Response};
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

/// Tuning of one channel.
#[derive(Clone, Debug)]
pub(crate) struct ChannelOptions {
    pub(crate) connect_timeout: Duration,
    /// Credits the channel tries to hold; 512 × 64 KiB = 32 MiB in flight.
    pub(crate) credit_target: u32,
    /// Where large replies are read into: the client's pool, shared by its channels.
    pub(crate) frame_buffers: BufferPool,
    /// Connect over QUIC with these settings instead of TCP (`ClientConfig::transport`).
    pub(crate) quic: Option<quic::QuicConfig>,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        ChannelOptions {
            connect_timeout: Duration::from_secs(10),
            credit_target: 512,
            frame_buffers: BufferPool::new(64 << 20),
            quic: None,
        }
    }
}

/// An entry of the pending table: a request sent whose final reply has not arrived.
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

/// What the handles and the reader task change under the channel's lock.
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
    /// The stream is TLS 1.3 to a server whose certificate was verified (SMB over QUIC):
    /// the one kind of channel that may offer to leave sealing to the transport.
    verified_tls: bool,
    /// The server accepted transport-level security in NEGOTIATE (MS-SMB2 2.2.4.1.5,
    /// Connection.AcceptTransportSecurity): nothing is sealed on this channel, and every
    /// message is signed instead. Only ever set on a `verified_tls` channel.
    sealing_left_to_tls: AtomicBool,
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
        if let Some(quic) = &opts.quic {
            return quic::connect(peer, local, quic, opts).await;
        }
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
        Self::start_with(rd, wr, peer, local, opts, false)
    }

    /// [`Channel::start`] on a stream that is TLS 1.3 to a verified server (`quic`).
    pub(crate) fn start_verified_tls<R, W>(
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
        Self::start_with(rd, wr, peer, local, opts, true)
    }

    fn start_with<R, W>(
        rd: R,
        wr: W,
        peer: SocketAddr,
        local: SocketAddr,
        opts: &ChannelOptions,
        verified_tls: bool,
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
            verified_tls,
            sealing_left_to_tls: AtomicBool::new(false),
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

    /// Whether `msg` carries a valid signature under this channel's own key (false when the
    /// channel has no keys): for the replies the reader leaves to the session layer.
    pub(crate) fn verify_with_own_key(&self, msg: &[u8]) -> bool {
        self.inner.shared.crypto().is_some_and(|c| c.verify(msg))
    }

    /// Whether the stream is TLS 1.3 to a server whose certificate was verified (SMB over
    /// QUIC): whether NEGOTIATE may offer SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY.
    pub(crate) fn verified_tls(&self) -> bool {
        self.inner.shared.verified_tls
    }

    /// The server accepted transport-level security: from now on nothing is sealed on this
    /// channel (requests that ask for it are signed instead, and their replies must be
    /// signed). Refused, returning false, on a channel that is not TLS to a verified server:
    /// sealing is never skipped on TCP, whatever a server says.
    pub(crate) fn leave_sealing_to_tls(&self) -> bool {
        let shared = &self.inner.shared;
        if shared.verified_tls {
            shared.sealing_left_to_tls.store(true, Ordering::SeqCst);
        }
        shared.verified_tls
    }

    /// Whether the server accepted QUIC's TLS in place of sealing on this channel.
    pub(crate) fn sealing_left_to_tls(&self) -> bool {
        self.inner.shared.sealing_left_to_tls()
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
}
impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State inconsistent in a way that
        // matters more than losing the channel, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the server agreed that QUIC's TLS replaces sealing on this channel.
    fn sealing_left_to_tls(&self) -> bool {
        self.sealing_left_to_tls.load(Ordering::SeqCst)
    }

    fn crypto(&self) -> Option<Arc<dyn ChannelCrypto>> {
        self.crypto
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
