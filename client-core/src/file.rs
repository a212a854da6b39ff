//! `File`: an open handle, positional I/O split into chunks kept in flight together, and
//! tokio stream adapters with read-ahead and write-behind.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use smb3_proto::msg::flush::FlushRequest;
use smb3_proto::msg::fscc::{FileAllInformation, FileEndOfFileInformation};
use smb3_proto::msg::posix::FilePosixInformation;
use smb3_proto::msg::query_info::QueryInfoRequest;
use smb3_proto::msg::read::{ReadRequest, ReadResponse};
use smb3_proto::msg::set_info::SetInfoRequest;
use smb3_proto::msg::write::{WriteRequest, WriteResponse};
use smb3_proto::{Command, NtStatus};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};
use tokio::task::JoinHandle;

use crate::addressing::OpenState;
use crate::durable::DurableRegistration;
use crate::engine::{Call, SessionCore};
use crate::error::decode;
use crate::error::{Error, ProtocolError, Result};
use crate::lease::{LeaseCaching, LeaseRef, LeaseWatch};
use crate::metadata::{metadata_from_posix_reply, metadata_from_reply, Metadata};
use crate::tasks::{self, TaskKind};
use crate::tree::Tree;

/// Chunks of one large read or write kept in flight for each channel that may carry requests:
/// one on the wire and the next ones queued behind it, so that no channel idles between two
/// chunks of the same file.
pub const CHUNKS_PER_CHANNEL: usize = 4;

/// Chunks one large read or write keeps in flight so that `usable` channels stay busy:
/// [`CHUNKS_PER_CHANNEL`] each, and at least one.
pub(crate) fn busy_depth(usable: usize) -> usize {
    depth_over_channels(CHUNKS_PER_CHANNEL, usable)
}

/// The one rule for how many requests of one operation are kept in flight: `per_channel` for
/// each channel that may carry requests now (`ChannelSet::usable_count`: channels still
/// binding or under suspicion do not count), and at least one.
pub(crate) fn depth_over_channels(per_channel: usize, usable: usize) -> usize {
    per_channel.saturating_mul(usable).max(1)
}

/// An open file. Cheap to clone; the handle is closed by [`File::close`], or in the background
/// when the last clone is dropped.
#[derive(Clone)]
pub struct File {
    inner: Arc<FileInner>,
}

struct FileInner {
    /// The tree the file is open on (kept connected while the file is open).
    tree: Arc<Tree>,
    /// FileId (swappable by a reconnect) and what reopening the file takes.
    state: Arc<OpenState>,
    path: String,
    /// What the CREATE reply said of the file (size, times, attributes).
    at_open: Metadata,
    /// The open's hold on its lease key and its place among the session's durable opens;
    /// released once the handle is closed.
    holds: Option<OpenHolds>,
    closed: AtomicBool,
}

/// Table entries that live exactly as long as the handle does.
#[derive(Debug)]
pub(crate) struct OpenHolds {
    /// The file's lease key, shared with this session's other opens of the file.
    pub(crate) lease: Option<LeaseRef>,
    /// Listed among the session's opens while it is open, for a reconnect to reclaim (held
    /// for its `Drop`).
    #[allow(dead_code)]
    pub(crate) durable: Option<DurableRegistration>,
}

impl Drop for FileInner {
    fn drop(&mut self) {
        let holds = self.holds.take();
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        // Close in the background so the server does not keep the handle until the session
        // ends; without a runtime (process exit) the server cleans up on disconnect. The
        // lease key stays taken until the CLOSE is answered, so an open of the same file
        // meanwhile reuses it instead of breaking our lease.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let tree = self.tree.clone();
            let state = self.state.clone();
            tasks::spawn_on(&rt, TaskKind::BackgroundClose, async move {
                let _ = tree.close_open(&state).await;
                drop(holds);
            });
        }
    }
}

impl File {
    pub(crate) fn new(
        tree: Arc<Tree>,
        path: String,
        state: Arc<OpenState>,
        at_open: Metadata,
        holds: OpenHolds,
    ) -> File {
        File {
            inner: Arc::new(FileInner {
                tree,
                state,
                path,
                at_open,
                holds: Some(holds),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The path this file was opened with.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// Whether this is a POSIX open (on a share with the SMB3 POSIX extensions).
    pub fn is_posix(&self) -> bool {
        self.inner.state.params.posix
    }

    /// Size of the file when it was opened.
    pub fn size_at_open(&self) -> u64 {
        self.inner.at_open.len
    }

    /// The file as the CREATE reply described it: size, times and attributes when it was
    /// opened (MS-SMB2 2.2.14). Compared with [`File::metadata`] after reading it, it tells
    /// whether the file changed meanwhile (its last-write or change time moved).
    pub fn metadata_at_open(&self) -> &Metadata {
        &self.inner.at_open
    }

    /// Whether the server granted a durable handle (one that survives a lost connection for
    /// the server's durable timeout).
    pub fn is_durable(&self) -> bool {
        self.inner.state.handle().durable.is_some()
    }

    /// The caching the file's lease grants now (the lease is shared by all of this session's
    /// opens of the file, and lowered when another client's open breaks it); `None` when no
    /// lease was granted (SMB 2.x, durable handles off, or a server without leases).
    pub fn lease(&self) -> Option<LeaseCaching> {
        let lease = self.inner.holds.as_ref()?.lease.as_ref()?;
        lease.state().map(LeaseCaching::from_state)
    }

    /// Follow this file's lease from now on: each grant or break the server sends (see
    /// [`LeaseWatch`]). `None` when no lease was asked for or granted.
    pub fn lease_changes(&self) -> Option<LeaseWatch> {
        let lease = self.inner.holds.as_ref()?.lease.as_ref()?;
        lease.state()?;
        lease.watch()
    }

    fn chunk_sizes(&self) -> (u32, u32, usize) {
        let core = self.core();
        let io = core.config.io_size.max(4096);
        (
            io.min(core.negotiated.max_read.max(4096)),
            io.min(core.negotiated.max_write.max(4096)),
            core.config
                .io_depth
                .max(busy_depth(core.multichannel.channels.usable_count())),
        )
    }

    pub(crate) fn core(&self) -> &SessionCore {
        &self.inner.tree.core
    }

    /// How a request about this open is sent: its FileId is stamped afresh before each send,
    /// so it follows the open through a reconnect.
    pub(crate) fn on_open<'a>(&self) -> Call<'a> {
        Call::open(&self.inner.state)
    }

    pub(crate) fn err(&self, e: Error) -> Error {
        e.with_path(&self.inner.path)
    }

    /// One READ of at most the negotiated size. Returns fewer bytes only at end of file.
    async fn read_chunk(&self, offset: u64, len: u32) -> Result<Bytes> {
        let req = ReadRequest::new(self.inner.state.file_id(), offset, len);
        let resp = self
            .core()
            .send(&req, self.on_open().allowing(&[NtStatus::END_OF_FILE]))
            .await
            .map_err(|e| self.err(e))?;
        if resp.header.status == NtStatus::END_OF_FILE {
            return Ok(Bytes::new());
        }
        let r = decode(Command::READ, ReadResponse::decode(&resp.msg))?;
        if r.data.len() > len as usize {
            return Err(ProtocolError::TooMuchOutput {
                command: Command::READ,
                got: r.data.len(),
                allowed: len,
            }
            .into());
        }
        Ok(r.data)
    }

    /// Read up to `len` bytes at `offset`. Large reads are split into chunks that are all in
    /// flight together. Returns fewer bytes than asked only at end of file.
    pub async fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        let (chunk, _, depth) = self.chunk_sizes();
        if len <= chunk as usize {
            return self.read_chunk(offset, len as u32).await;
        }
        let pieces: Vec<Bytes> = stream::iter(chunk_ranges(offset, len as u64, chunk))
            .map(|(off, l)| self.read_chunk(off, l))
            .buffered(depth)
            .try_collect()
            .await?;
        let mut out = BytesMut::with_capacity(len);
        for p in pieces {
            let short = p.len() < chunk as usize;
            out.extend_from_slice(&p);
            if short {
                break;
            }
        }
        Ok(out.freeze())
    }

    /// One WRITE of at most the negotiated size; the server must take all of it.
    async fn write_chunk(&self, offset: u64, data: Bytes) -> Result<()> {
        let want = data.len();
        let req = WriteRequest::new(self.inner.state.file_id(), offset, data);
        let resp = self
            .core()
            .send(&req, self.on_open())
            .await
            .map_err(|e| self.err(e).unwritten(offset, want as u64))?;
        written_whole(&resp, want)
    }

    /// Write all of `data` at `offset`. Large writes are split into chunks (slices of `data`,
    /// not copies) that are all in flight together.
    pub async fn write_at(&self, offset: u64, data: Bytes) -> Result<()> {
        let (_, chunk, depth) = self.chunk_sizes();
        if data.len() <= chunk as usize {
            return self.write_chunk(offset, data).await;
        }
        stream::iter(chunk_ranges(offset, data.len() as u64, chunk))
            .map(|(off, l)| {
                let start = (off - offset) as usize;
                self.write_chunk(off, data.slice(start..start + l as usize))
            })
            .buffer_unordered(depth)
            .try_collect::<()>()
            .await
    }

    /// Truncate or extend the file.
    pub async fn set_len(&self, len: u64) -> Result<()> {
        let info = FileEndOfFileInformation { end_of_file: len };
        self.core()
            .send(
                &SetInfoRequest::file_info(self.inner.state.file_id(), &info),
                self.on_open(),
            )
            .await
            .map_err(|e| self.err(e))
            .map(|_| ())
    }

    /// The handle's FileId now (a reconnect may have replaced it).
    pub(crate) fn file_id(&self) -> smb3_proto::msg::FileId {
        self.inner.state.file_id()
    }

    /// Send a request about this open, errors naming its path (for the calls on an open file
    /// kept in modules of their own: byte-range locks, security descriptors).
    pub(crate) async fn request<B: smb3_proto::msg::RequestBody>(
        &self,
        body: &B,
    ) -> Result<crate::channel::Response> {
        self.core()
            .send(body, self.on_open())
            .await
            .map_err(|e| self.err(e))
    }

    /// Send SET_INFO with `info` on this handle (the `set_info` setters use it).
    pub(crate) async fn set_file_info<T: smb3_proto::msg::fscc::SetFileInfo>(
        &self,
        info: &T,
    ) -> Result<()> {
        let req = SetInfoRequest::file_info(self.inner.state.file_id(), info);
        self.core()
            .send(&req, self.on_open())
            .await
            .map_err(|e| self.err(e))
            .map(|_| ())
    }

    /// Ask the server to flush the file to stable storage.
    pub async fn flush(&self) -> Result<()> {
        let req = FlushRequest {
            file_id: self.inner.state.file_id(),
        };
        self.core()
            .send(&req, self.on_open())
            .await
            .map_err(|e| self.err(e))
            .map(|_| ())
    }

    /// Current size, times and attributes (and, on a POSIX open, mode, owner and group).
    pub async fn metadata(&self) -> Result<Metadata> {
        let file_id = self.inner.state.file_id();
        let posix = self.inner.state.params.posix;
        let req = if posix {
            QueryInfoRequest::file_info::<FilePosixInformation>(file_id, 4096)
        } else {
            QueryInfoRequest::file_info::<FileAllInformation>(file_id, 4096)
        };
        let resp = self
            .core()
            .send(&req, self.on_open().allowing(&[NtStatus::BUFFER_OVERFLOW]))
            .await
            .map_err(|e| self.err(e))?;
        if posix {
            metadata_from_posix_reply(&resp.msg)
        } else {
            metadata_from_reply(&resp.msg)
        }
    }

    /// Close the handle now and report the server's answer.
    pub async fn close(self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // The holds go with the last clone, after this reply.
        self.inner
            .tree
            .close_open(&self.inner.state)
            .await
            .map_err(|e| self.err(e))
    }

    /// A reader with `io_depth` chunks of read-ahead, starting at offset 0.
    pub fn reader(&self) -> FileReader {
        let (chunk, _, depth) = self.chunk_sizes();
        FileReader {
            file: self.clone(),
            pos: 0,
            next_issue: 0,
            inflight: VecDeque::new(),
            current: Bytes::new(),
            eof: false,
            chunk,
            depth,
            size_hint: self.inner.at_open.len,
        }
    }

    /// A writer with `io_depth` chunks of write-behind, starting at offset 0. Call
    /// `shutdown()` (or `flush()`) and check its result: that is where write errors surface.
    pub fn writer(&self) -> FileWriter {
        let (_, chunk, depth) = self.chunk_sizes();
        FileWriter {
            file: self.clone(),
            pos: 0,
            buf: BytesMut::new(),
            inflight: VecDeque::new(),
            chunk,
            depth,
        }
    }
}

/// A successful WRITE reply: every one of the `sent` bytes written, or
/// [`ProtocolError::IncompleteWrite`].
pub(crate) fn written_whole(resp: &crate::channel::Response, sent: usize) -> Result<()> {
    let w = decode(Command::WRITE, WriteResponse::decode(&resp.msg))?;
    if w.count as usize != sent {
        return Err(Error::Protocol(ProtocolError::IncompleteWrite {
            command: Command::WRITE,
            sent: sent as u64,
            written: u64::from(w.count),
        }));
    }
    Ok(())
}

/// Split `[offset, offset + len)` into pieces of at most `chunk` bytes.
fn chunk_ranges(offset: u64, len: u64, chunk: u32) -> impl Iterator<Item = (u64, u32)> {
    let chunk = u64::from(chunk.max(1));
    (0..len.div_ceil(chunk)).map(move |i| {
        let start = i * chunk;
        (offset + start, (len - start).min(chunk) as u32)
    })
}

fn io_err(e: Error) -> io::Error {
    io::Error::other(e)
}

/// `AsyncRead + AsyncSeek` over a [`File`], keeping several READs in flight.
pub struct FileReader {
    file: File,
    pos: u64,
    next_issue: u64,
    inflight: VecDeque<JoinHandle<Result<Bytes>>>,
    current: Bytes,
    eof: bool,
    chunk: u32,
    depth: usize,
    size_hint: u64,
}

impl FileReader {
    fn reset(&mut self, pos: u64) {
        for h in self.inflight.drain(..) {
            h.abort();
        }
        self.pos = pos;
        self.next_issue = pos;
        self.current = Bytes::new();
        self.eof = false;
    }

    fn fill_pipeline(&mut self) {
        // Read ahead freely up to the size seen at open; past it, one READ at a time finds the
        // real end (the file may have grown).
        while self.inflight.len() < self.depth
            && (self.next_issue < self.size_hint || self.inflight.is_empty())
        {
            let file = self.file.clone();
            let (off, len) = (self.next_issue, self.chunk);
            self.inflight
                .push_back(tasks::spawn(TaskKind::ReadAhead, async move {
                    file.read_chunk(off, len).await
                }));
            self.next_issue += u64::from(self.chunk);
        }
    }
}

impl Drop for FileReader {
    fn drop(&mut self) {
        for h in self.inflight.drain(..) {
            h.abort();
        }
    }
}

impl AsyncRead for FileReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.current.is_empty() {
                let n = this.current.len().min(buf.remaining());
                buf.put_slice(&this.current.split_to(n));
                this.pos += n as u64;
                return Poll::Ready(Ok(()));
            }
            if this.eof || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            this.fill_pipeline();
            let Some(front) = this.inflight.front_mut() else {
                this.eof = true;
                continue;
            };
            let result = ready!(Pin::new(front).poll(cx));
            this.inflight.pop_front();
            let data = result
                .map_err(|e| io::Error::other(format!("read task failed: {e}")))?
                .map_err(io_err)?;
            if data.len() < this.chunk as usize {
                // End of file: what was read ahead beyond it is moot.
                this.eof = true;
                for h in this.inflight.drain(..) {
                    h.abort();
                }
            }
            this.current = data;
        }
    }
}

impl AsyncSeek for FileReader {
    fn start_seek(mut self: Pin<&mut Self>, position: io::SeekFrom) -> io::Result<()> {
        let new = match position {
            io::SeekFrom::Start(p) => Some(p),
            io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            io::SeekFrom::End(d) => self.size_hint.checked_add_signed(d),
        }
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before start"))?;
        if new != self.pos {
            self.reset(new);
        }
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Poll::Ready(Ok(self.pos))
    }
}

/// `AsyncWrite + AsyncSeek` over a [`File`], keeping several WRITEs in flight.
pub struct FileWriter {
    file: File,
    /// File offset of the first byte in `buf`.
    pos: u64,
    buf: BytesMut,
    inflight: VecDeque<JoinHandle<Result<()>>>,
    chunk: u32,
    depth: usize,
}

impl FileWriter {
    fn launch(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let data = self.buf.split().freeze();
        let off = self.pos;
        self.pos += data.len() as u64;
        let file = self.file.clone();
        self.inflight
            .push_back(tasks::spawn(TaskKind::WriteBehind, async move {
                file.write_chunk(off, data).await
            }));
    }

    /// Wait for the oldest write; `Ready(Ok)` when none is left.
    fn poll_oldest(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(front) = self.inflight.front_mut() else {
            return Poll::Ready(Ok(()));
        };
        let r = ready!(Pin::new(front).poll(cx));
        self.inflight.pop_front();
        r.map_err(|e| io::Error::other(format!("write task failed: {e}")))?
            .map_err(|e| io_err(self.unwritten_from_here(e)))?;
        Poll::Ready(Ok(()))
    }

    /// The oldest write failed: no byte from its offset to the end of what was handed to
    /// this writer is known to be on the server (later writes in flight fail the same way).
    fn unwritten_from_here(&self, e: Error) -> Error {
        let (start, failed_end) = match &e {
            Error::HandleLost {
                unwritten: Some(range),
                ..
            } => (range.start, range.end),
            _ => return e,
        };
        let end = (self.pos + self.buf.len() as u64).max(failed_end);
        e.unwritten(start, end - start)
    }
}

impl AsyncWrite for FileWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        while this.inflight.len() >= this.depth {
            ready!(this.poll_oldest(cx))?;
        }
        let room = this.chunk as usize - this.buf.len();
        let n = room.min(data.len());
        if this.buf.capacity() == 0 {
            this.buf.reserve(this.chunk as usize);
        }
        this.buf.extend_from_slice(&data[..n]);
        if this.buf.len() == this.chunk as usize {
            this.launch();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        this.launch();
        while !this.inflight.is_empty() {
            ready!(this.poll_oldest(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl AsyncSeek for FileWriter {
    fn start_seek(mut self: Pin<&mut Self>, position: io::SeekFrom) -> io::Result<()> {
        // Buffered bytes go out at their own offset first; then writing continues at `new`.
        let end = self.pos + self.buf.len() as u64;
        let new = match position {
            io::SeekFrom::Start(p) => Some(p),
            io::SeekFrom::Current(d) => end.checked_add_signed(d),
            io::SeekFrom::End(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "SeekFrom::End on a writer",
                ))
            }
        }
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before start"))?;
        self.launch();
        self.pos = new;
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Poll::Ready(Ok(self.pos + self.buf.len() as u64))
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        // Unflushed data is lost if the writer is dropped without shutdown(); the WRITEs
        // already in flight still complete.
        if !self.buf.is_empty() {
            tracing::warn!(path = %self.file.inner.path, bytes = self.buf.len(), "FileWriter dropped with unflushed data");
        }
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File")
            .field("path", &self.inner.path)
            .field("durable", &self.is_durable())
            .finish()
    }
}

impl std::fmt::Debug for FileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileReader")
            .field("path", &self.file.inner.path)
            .field("pos", &self.pos)
            .field("in_flight", &self.inflight.len())
            .finish()
    }
}

impl std::fmt::Debug for FileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWriter")
            .field("path", &self.file.inner.path)
            .field("pos", &self.pos)
            .field("in_flight", &self.inflight.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{busy_depth, chunk_ranges, CHUNKS_PER_CHANNEL};

    #[test]
    fn busy_depth_is_per_usable_channel_and_never_zero() {
        assert_eq!(
            busy_depth(0),
            1,
            "no usable channel yet: one chunk still goes out"
        );
        assert_eq!(busy_depth(1), CHUNKS_PER_CHANNEL);
        assert_eq!(busy_depth(16), 16 * CHUNKS_PER_CHANNEL);
        assert_eq!(busy_depth(usize::MAX), usize::MAX);
    }

    #[test]
    fn ranges_cover_exactly() {
        let r: Vec<_> = chunk_ranges(10, 25, 10).collect();
        assert_eq!(r, vec![(10, 10), (20, 10), (30, 5)]);
        assert_eq!(chunk_ranges(0, 0, 10).count(), 0);
        assert_eq!(chunk_ranges(0, 10, 10).collect::<Vec<_>>(), vec![(0, 10)]);
    }
}
