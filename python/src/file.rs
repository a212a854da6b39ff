//! The raw file: what `smb3._io.SMBRawIO` (an `io.RawIOBase`) calls. A cursor over the
//! library's `File`, whose reads and writes at an offset are split into chunks in flight on
//! every channel at once.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

use crate::errors;
use crate::runtime::Ctx;
use crate::stat::StatResult;

/// What a `mode` string (as `open` takes it) asks for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OpenMode {
    pub(crate) read: bool,
    pub(crate) write: bool,
    pub(crate) create: bool,
    pub(crate) create_new: bool,
    pub(crate) truncate: bool,
    pub(crate) append: bool,
}

impl OpenMode {
    /// Parse `r`, `w`, `x`, `a`, each with an optional `+`, and `b` or `t`, as `open` does.
    pub(crate) fn parse(mode: &str) -> Result<OpenMode, String> {
        let bad = || Err(format!("invalid mode: {mode:?}"));
        let mut m = OpenMode::default();
        let (mut base, mut plus, mut b, mut t) = (None, false, false, false);
        for c in mode.chars() {
            match c {
                'r' | 'w' | 'x' | 'a' if base.is_none() => base = Some(c),
                '+' if !plus => plus = true,
                'b' if !b => b = true,
                't' if !t => t = true,
                _ => return bad(),
            }
        }
        if b && t {
            return bad();
        }
        match base {
            Some('r') => m.read = true,
            Some('w') => {
                m.write = true;
                m.create = true;
                m.truncate = true;
            }
            Some('x') => {
                m.write = true;
                m.create_new = true;
            }
            Some('a') => {
                m.write = true;
                m.create = true;
                m.append = true;
            }
            _ => return bad(),
        }
        if plus {
            m.read = true;
            m.write = true;
        }
        Ok(m)
    }
}

/// A copy of a bytes-like object's contents (bytes, bytearray, memoryview, array, ...).
pub(crate) fn bytes_of(data: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = data.downcast::<PyBytes>() {
        return Ok(Bytes::copy_from_slice(b.as_bytes()));
    }
    if let Ok(b) = data.downcast::<PyByteArray>() {
        return Ok(Bytes::from(b.to_vec()));
    }
    // Anything else with the buffer protocol: bytes(data) copies it (no buffer API in the
    // stable ABI of Python 3.9).
    let copied = data
        .py()
        .get_type::<PyBytes>()
        .call1((data,))?
        .downcast_into::<PyBytes>()?;
    Ok(Bytes::copy_from_slice(copied.as_bytes()))
}

/// The cursor and the handle (`None` once closed).
#[derive(Debug)]
struct State {
    file: Option<smb3_client::File>,
    pos: u64,
    /// The file's size as far as this handle knows (at open, then its own writes): where
    /// read-ahead stops.
    size_hint: u64,
    ahead: ReadAhead,
    /// Writes sent and not yet answered, in the order they were made: (bytes, task).
    behind: VecDeque<(usize, tokio::task::JoinHandle<smb3_client::Result<()>>)>,
    behind_bytes: usize,
}

/// Chunks read ahead of a reader that goes through the file in order (each cursor read
/// starting where the one before ended), so the server is busy while Python handles the
/// data: `io_size` chunks in flight on every channel, as many as a copy keeps. A seek
/// elsewhere, a write or a truncate drops them. Data written by other clients meanwhile is
/// not seen by what was already read ahead (as with any read-ahead cache).
#[derive(Debug, Default)]
struct ReadAhead {
    /// Data fetched and not yet handed out, starting at file offset `buf_at`.
    buf: Bytes,
    buf_at: u64,
    /// Chunks in flight, in file order: (offset, length, task).
    queue: VecDeque<(
        u64,
        usize,
        tokio::task::JoinHandle<smb3_client::Result<Bytes>>,
    )>,
    /// Where the last cursor read ended (`u64::MAX` before the first).
    last_end: u64,
}

impl ReadAhead {
    fn clear(&mut self) {
        for (_, _, task) in self.queue.drain(..) {
            task.abort();
        }
        self.buf = Bytes::new();
    }

    fn covers(&self, pos: u64) -> bool {
        pos >= self.buf_at && pos < self.buf_at + self.buf.len() as u64
    }
}

/// An open file on a share, unbuffered; `Share.open` wraps it in `io` classes. Reads and
/// writes at the cursor, or at an offset (`read_at`/`write_at`, thread-safe). Closed by
/// `close()`; a file dropped without it is closed in the background.
#[pyclass(module = "smb3._smb3", frozen)]
#[derive(Debug)]
pub(crate) struct File {
    state: Mutex<State>,
    ctx: Arc<Ctx>,
    mode: OpenMode,
    name: String,
    io_size: u32,
    /// The session, for how many chunks keep its channels busy.
    client: smb3_client::Client,
}

/// A cursor read at most this many chunks long goes through the read-ahead; a longer one
/// is one pipelined `read_at`.
const AHEAD_MAX_CHUNKS: u64 = 8;

impl File {
    pub(crate) fn new(
        file: smb3_client::File,
        ctx: Arc<Ctx>,
        mode: OpenMode,
        name: String,
        io_size: u32,
        client: smb3_client::Client,
    ) -> File {
        let size = file.size_at_open();
        let pos = if mode.append { size } else { 0 };
        File {
            state: Mutex::new(State {
                file: Some(file),
                pos,
                size_hint: size,
                ahead: ReadAhead {
                    last_end: u64::MAX,
                    ..ReadAhead::default()
                },
                behind: VecDeque::new(),
                behind_bytes: 0,
            }),
            ctx,
            mode,
            name,
            io_size: io_size.max(4096),
            client,
        }
    }

    /// Chunks that keep every channel busy: the copies' rule.
    fn depth(&self) -> usize {
        if self.client.binding_channels() {
            self.client.busy_depth().max(1)
        } else {
            self.client.busy_depth().max(16)
        }
    }

    /// Wait for every write sent behind; the first error, if any, is raised (the others are
    /// dropped: a file with a failed write is damaged whatever came after).
    fn settle(&self, py: Python<'_>) -> PyResult<()> {
        let pending: Vec<_> = {
            let mut s = self.lock();
            s.behind_bytes = 0;
            s.behind.drain(..).map(|(_, task)| task).collect()
        };
        if pending.is_empty() {
            return Ok(());
        }
        let first = self.ctx.run(py, async move {
            let mut first = None;
            for task in pending {
                match task.await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        first.get_or_insert(Some(e));
                    }
                    Err(_) => {
                        first.get_or_insert(None);
                    }
                }
            }
            first
        })?;
        match first {
            None => Ok(()),
            Some(Some(e)) => Err(errors::from_client(py, &e)),
            Some(None) => Err(errors::internal(py, "a write's task stopped")),
        }
    }

    /// Send a write at `offset` behind: it returns at once while fewer than the channels'
    /// depth of chunks are in flight, else waits for the oldest.
    fn write_behind(&self, py: Python<'_>, offset: u64, data: Bytes) -> PyResult<()> {
        let (f, _) = self.current()?;
        let n = data.len();
        let limit = self.depth() * self.io_size as usize;
        let task = self
            .ctx
            .handle()
            .spawn(async move { f.write_at(offset, data).await });
        {
            let mut s = self.lock();
            s.behind.push_back((n, task));
            s.behind_bytes += n;
        }
        loop {
            let oldest = {
                let mut s = self.lock();
                if s.behind_bytes <= limit || s.behind.len() <= 1 {
                    break;
                }
                let (len, task) = s.behind.pop_front().expect("not empty");
                s.behind_bytes -= len;
                task
            };
            match self.ctx.run(py, oldest)? {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(errors::from_client(py, &e)),
                Err(_) => return Err(errors::internal(py, "a write's task stopped")),
            }
        }
        Ok(())
    }

    /// Start reads of the chunks after what is fetched or in flight, up to the depth that
    /// keeps every channel busy.
    fn top_up(&self, s: &mut State) {
        let Some(f) = s.file.clone() else { return };
        let depth = self.depth();
        let mut next = match s.ahead.queue.back() {
            Some((off, len, _)) => off + *len as u64,
            None => (s.ahead.buf_at + s.ahead.buf.len() as u64).max(s.pos),
        };
        while s.ahead.queue.len() < depth && next < s.size_hint {
            let len = u64::from(self.io_size).min(s.size_hint - next) as usize;
            let (f, off) = (f.clone(), next);
            let task = self
                .ctx
                .handle()
                .spawn(async move { f.read_at(off, len).await });
            s.ahead.queue.push_back((off, len, task));
            next += len as u64;
        }
    }

    /// A read at the cursor `pos` of up to `want` bytes, through the read-ahead when the
    /// reads go through the file in order. May return fewer bytes than asked (the rest of a
    /// chunk), as a raw read may; empty only at the end of the file.
    fn read_cursor(&self, py: Python<'_>, pos: u64, want: usize) -> PyResult<Bytes> {
        let direct = want as u64 > AHEAD_MAX_CHUNKS * u64::from(self.io_size);
        loop {
            let popped = {
                let mut s = self.lock();
                if s.file.is_none() {
                    drop(s);
                    return self.current().map(|_| Bytes::new());
                }
                let sequential = pos == s.ahead.last_end;
                if !direct && s.ahead.covers(pos) {
                    let start = (pos - s.ahead.buf_at) as usize;
                    let n = want.min(s.ahead.buf.len() - start);
                    let out = s.ahead.buf.slice(start..start + n);
                    s.ahead.last_end = pos + n as u64;
                    if sequential {
                        self.top_up(&mut s);
                    }
                    return Ok(out);
                }
                match s.ahead.queue.front() {
                    Some((off, _, _)) if *off == pos && !direct => s.ahead.queue.pop_front(),
                    _ => {
                        s.ahead.clear();
                        None
                    }
                }
            };
            let Some((off, len, task)) = popped else {
                let sequential = pos == self.lock().ahead.last_end;
                let data = self.read_bytes(py, pos, want)?;
                let mut s = self.lock();
                s.ahead.last_end = pos + data.len() as u64;
                if sequential && data.len() == want && !direct {
                    s.ahead.buf = Bytes::new();
                    s.ahead.buf_at = pos + want as u64;
                    self.top_up(&mut s);
                }
                return Ok(data);
            };
            let fetched = self.ctx.run(py, task)?;
            let mut s = self.lock();
            match fetched {
                Ok(Ok(data)) => {
                    let short = data.len() < len;
                    if data.is_empty() {
                        s.ahead.clear();
                        s.ahead.last_end = pos;
                        return Ok(data);
                    }
                    if short {
                        // The file is shorter than this handle thought: nothing beyond.
                        for (_, _, t) in s.ahead.queue.drain(..) {
                            t.abort();
                        }
                        s.size_hint = off + data.len() as u64;
                    }
                    s.ahead.buf = data;
                    s.ahead.buf_at = off;
                }
                Ok(Err(e)) => {
                    s.ahead.clear();
                    return Err(errors::from_client(py, &e));
                }
                // Aborted by another thread's seek or write: read it directly.
                Err(_) => s.ahead.clear(),
            }
        }
    }

    /// Forget what was read ahead (a write, a truncate), and note the new size.
    fn written(&self, end: Option<u64>, truncated_to: Option<u64>) {
        let mut s = self.lock();
        s.ahead.clear();
        s.ahead.last_end = u64::MAX;
        if let Some(end) = end {
            s.size_hint = s.size_hint.max(end);
        }
        if let Some(len) = truncated_to {
            s.size_hint = len;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while the lock was held cannot leave the cursor half-updated.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The handle and the cursor, or ValueError when closed (as io objects do).
    fn current(&self) -> PyResult<(smb3_client::File, u64)> {
        let s = self.lock();
        match &s.file {
            Some(f) => Ok((f.clone(), s.pos)),
            None => Err(pyo3::exceptions::PyValueError::new_err(
                "I/O operation on closed file",
            )),
        }
    }

    fn set_pos(&self, pos: u64) {
        self.lock().pos = pos;
    }

    /// `io.UnsupportedOperation` unless `ok`, as a file opened without that access raises.
    fn check(&self, py: Python<'_>, ok: bool, what: &str) -> PyResult<()> {
        if ok {
            return Ok(());
        }
        let cls = PyModule::import(py, "io")?.getattr("UnsupportedOperation")?;
        Err(PyErr::from_value(
            cls.call1((format!("File not open for {what}"),))?,
        ))
    }

    fn read_bytes(&self, py: Python<'_>, offset: u64, len: usize) -> PyResult<Bytes> {
        let (f, _) = self.current()?;
        self.ctx
            .call(py, async move { f.read_at(offset, len).await })
    }

    fn write_bytes(&self, py: Python<'_>, offset: u64, data: Bytes) -> PyResult<()> {
        let (f, _) = self.current()?;
        self.ctx
            .call(py, async move { f.write_at(offset, data).await })
    }

    fn size(&self, py: Python<'_>) -> PyResult<u64> {
        self.settle(py)?;
        let (f, _) = self.current()?;
        Ok(self.ctx.call(py, async move { f.metadata().await })?.len)
    }
}

#[pymethods]
impl File {
    /// Read `size` bytes at the cursor (all to the end when negative or None).
    #[pyo3(signature = (size=-1))]
    fn read<'py>(&self, py: Python<'py>, size: Option<i64>) -> PyResult<Bound<'py, PyBytes>> {
        self.check(py, self.mode.read, "reading")?;
        self.settle(py)?;
        let (_, pos) = self.current()?;
        let want = match size {
            Some(n) if n >= 0 => n as usize,
            _ => self.size(py)?.saturating_sub(pos) as usize,
        };
        let data = if want == 0 {
            Bytes::new()
        } else {
            self.read_cursor(py, pos, want)?
        };
        self.set_pos(pos + data.len() as u64);
        Ok(PyBytes::new(py, &data))
    }

    /// Everything from the cursor to the end of the file.
    fn readall<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.read(py, None)
    }

    /// Write all of `data` (a bytes-like object) at the cursor; returns `len(data)`. The
    /// write is sent behind: it returns while the channels' depth of chunks is not yet in
    /// flight, and an error surfaces at a later call (write, read, seek, truncate, flush,
    /// fsync, stat, close), which all wait for what was sent first.
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.check(py, self.mode.write, "writing")?;
        let bytes = bytes_of(data)?;
        let n = bytes.len();
        let (_, pos) = self.current()?;
        if n > 0 {
            self.written(Some(pos + n as u64), None);
            self.write_behind(py, pos, bytes)?;
        }
        self.set_pos(pos + n as u64);
        Ok(n)
    }

    /// Read up to `size` bytes at `offset`; the cursor stays. Thread-safe.
    fn read_at<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        size: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.check(py, self.mode.read, "reading")?;
        self.settle(py)?;
        let data = self.read_bytes(py, offset, size)?;
        Ok(PyBytes::new(py, &data))
    }

    /// Write all of `data` at `offset`; the cursor stays. Thread-safe.
    fn write_at(&self, py: Python<'_>, offset: u64, data: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check(py, self.mode.write, "writing")?;
        let bytes = bytes_of(data)?;
        let end = offset + bytes.len() as u64;
        self.settle(py)?;
        self.written(None, None);
        self.write_bytes(py, offset, bytes)?;
        self.written(Some(end), None);
        Ok(())
    }

    /// Move the cursor: `whence` 0 from the start, 1 from the cursor, 2 from the end (which
    /// asks the server for the size). Returns the new position.
    #[pyo3(signature = (offset, whence=0))]
    fn seek(&self, py: Python<'_>, offset: i64, whence: i32) -> PyResult<u64> {
        // Writes sent behind never overlap a later one: a seek waits for them.
        self.settle(py)?;
        let (_, pos) = self.current()?;
        let base = match whence {
            0 => 0,
            1 => pos,
            2 => self.size(py)?,
            _ => {
                return Err(errors::invalid(
                    py,
                    format!("invalid whence ({whence}, should be 0, 1 or 2)"),
                ))
            }
        };
        let new = base
            .checked_add_signed(offset)
            .ok_or_else(|| errors::invalid(py, format!("negative seek position {offset}")))?;
        self.set_pos(new);
        Ok(new)
    }

    /// The cursor.
    fn tell(&self) -> PyResult<u64> {
        Ok(self.current()?.1)
    }

    /// Truncate or extend the file to `size` bytes (the cursor when None); the cursor stays.
    #[pyo3(signature = (size=None))]
    fn truncate(&self, py: Python<'_>, size: Option<u64>) -> PyResult<u64> {
        self.check(py, self.mode.write, "writing")?;
        self.settle(py)?;
        let (f, pos) = self.current()?;
        let len = size.unwrap_or(pos);
        self.written(None, None);
        self.ctx.call(py, async move { f.set_len(len).await })?;
        self.written(None, Some(len));
        Ok(len)
    }

    /// Ask the server to flush the file to stable storage (SMB2 FLUSH).
    fn fsync(&self, py: Python<'_>) -> PyResult<()> {
        self.settle(py)?;
        let (f, _) = self.current()?;
        self.ctx.call(py, async move { f.flush().await })
    }

    /// Size, times and attributes of the open file.
    fn stat(&self, py: Python<'_>) -> PyResult<StatResult> {
        self.settle(py)?;
        let (f, _) = self.current()?;
        let m = self.ctx.call(py, async move { f.metadata().await })?;
        Ok(StatResult::from(&m))
    }

    /// Close the handle and report the server's answer; closing again does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let settled = self.settle(py);
        let file = {
            let mut s = self.lock();
            s.ahead.clear();
            s.file.take()
        };
        match file {
            Some(f) => {
                let closed = self.ctx.call(py, {
                    let f = f.clone();
                    async move { f.close().await }
                });
                self.ctx.drop_inside(f);
                settled.and(closed)
            }
            None => settled,
        }
    }

    /// Wait for the writes sent behind (an error of one is raised here).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        if self.lock().file.is_none() {
            return Ok(());
        }
        self.settle(py)
    }

    /// Whether the file is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.lock().file.is_none()
    }

    /// Whether the file was opened for reading.
    fn readable(&self) -> bool {
        self.mode.read
    }

    /// Whether the file was opened for writing.
    fn writable(&self) -> bool {
        self.mode.write
    }

    /// Always True: SMB files are seekable.
    fn seekable(&self) -> bool {
        true
    }

    /// The path the file was opened with.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether writes go to the end (mode `a`).
    #[getter]
    fn append(&self) -> bool {
        self.mode.append
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // The library closes a dropped handle in the background; that needs the runtime.
        let file = {
            let mut s = self.lock();
            s.ahead.clear();
            s.file.take()
        };
        self.ctx.drop_inside(file);
    }
}
