//! A blocking facade over the async API, for programs without tokio (backup tools written
//! around `std::io`).
//!
//! ```no_run
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::io::{Read, Seek, SeekFrom};
//! use smb3_client::{blocking, ClientConfig, OpenOptions, UserCredentials};
//! let creds = UserCredentials { user: "alice".into(), domain: String::new(), password: "secret".into() };
//! let client = blocking::Client::connect("nas.example:445", &creds, ClientConfig::default())?;
//! let share = client.share("data")?;
//! let mut file = share.open("reports/q3.csv", &OpenOptions::new().read(true))?;
//! file.seek(SeekFrom::Start(1024))?;
//! let mut rest = Vec::new();
//! file.read_to_end(&mut rest)?;
//! # Ok(()) }
//! ```
//!
//! [`Client`], [`Share`] and [`File`] mirror [`crate::Client`], [`crate::Share`] and
//! [`crate::File`]. They share one tokio runtime (multi-thread, two workers), made by
//! [`Client::connect`] or handed in with [`Client::connect_on`], and kept alive by every
//! handle. Each call runs its future as a task on that runtime and waits for it, so the
//! calling thread does no I/O itself.
//!
//! Calling from inside a tokio runtime (an `async fn`, a tokio worker) would block a worker
//! thread and is refused with [`Error::ApiMisuse`]; use the async API there, or call from
//! `tokio::task::spawn_blocking`.

mod backup;
mod listing;

pub use listing::{ReadDir, Walk, WalkItemError};

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::tasks::{self, TaskKind};
use crate::{DirEntry, FsInfo, IfExists, Metadata, OpenOptions, Snapshot, UserCredentials};

/// Worker threads of the runtime [`Client::connect`] makes: enough to keep the reader and
/// writer tasks of a few channels moving while a caller waits.
const WORKERS: usize = 2;

/// How long dropping a [`File`] waits for its CLOSE before leaving it to the server.
const CLOSE_ON_DROP: Duration = Duration::from_secs(10);

/// Bytes a [`File`] reads at once when the caller's buffer is smaller (a `std::io::copy`
/// asks for 8 KiB at a time): the rest is kept for the following reads.
const READ_AHEAD: usize = 1024 * 1024;

/// The runtime every handle of one client shares.
struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    fn get(&self) -> &tokio::runtime::Runtime {
        // Only `Drop` takes it out.
        self.0.as_ref().expect("runtime present until drop")
    }

    /// Run `fut` as a task on the runtime and wait for it; a panic in it is re-raised here.
    fn run<F>(&self, fut: F) -> Result<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::ApiMisuse(
                "the blocking API was called from inside a tokio runtime; use the async API \
                 there, or call it from tokio::task::spawn_blocking",
            ));
        }
        let rt = self.get();
        match rt.block_on(tasks::spawn_on(rt.handle(), TaskKind::BlockingCall, fut)) {
            Ok(v) => Ok(v),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only a runtime shutting down cancels the task, and ours lives as long as `self`.
            Err(_) => Err(Error::ApiMisuse("the blocking client's runtime shut down")),
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            // Dropping a runtime blocks until its tasks stop, which tokio forbids inside
            // another runtime: there, let them stop in the background.
            if tokio::runtime::Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(5));
            }
        }
    }
}

/// A blocking [`crate::Client`].
#[derive(Clone)]
pub struct Client {
    rt: Arc<Runtime>,
    inner: crate::Client,
}

impl Client {
    /// Connect to `server` as [`crate::Client::connect`] does, on a runtime of its own.
    pub fn connect(
        server: &str,
        creds: &UserCredentials,
        config: crate::ClientConfig,
    ) -> Result<Client> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("smb3-blocking")
            .enable_all()
            .build()
            .map_err(|e| Error::io(None, e))?;
        Client::connect_on(rt, server, creds, config)
    }

    /// Connect on a runtime the caller built (to choose its threads, or have them start in a
    /// network namespace). It must be a multi-thread runtime with I/O and time enabled; the
    /// client owns it from now on.
    pub fn connect_on(
        rt: tokio::runtime::Runtime,
        server: &str,
        creds: &UserCredentials,
        config: crate::ClientConfig,
    ) -> Result<Client> {
        let rt = Arc::new(Runtime(Some(rt)));
        let (server, creds) = (server.to_string(), creds.clone());
        let inner =
            rt.run(async move { crate::Client::connect(&server, &creds, config).await })??;
        Ok(Client { rt, inner })
    }

    /// Connect to a share (`TREE_CONNECT`).
    pub fn share(&self, name: &str) -> Result<Share> {
        let (client, name) = (self.inner.clone(), name.to_string());
        let inner = self.rt.run(async move { client.share(&name).await })??;
        Ok(Share {
            rt: self.rt.clone(),
            inner,
        })
    }

    /// End the session (`LOGOFF`).
    pub fn logoff(&self) -> Result<()> {
        let client = self.inner.clone();
        self.rt.run(async move { client.logoff().await })?
    }

    /// The async client underneath, for what this facade does not offer (to be used from
    /// async code, not from this thread).
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }
}

/// A blocking [`crate::Share`].
#[derive(Clone)]
pub struct Share {
    rt: Arc<Runtime>,
    inner: crate::Share,
}

/// Define blocking `Share` methods that clone the async share, own their arguments and wait.
macro_rules! share_calls {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty => $owned:expr),*) -> $ret:ty; )*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, $($arg: $ty),*) -> Result<$ret> {
                let share = self.inner.clone();
                $(let $arg = $owned;)*
                self.rt.run(async move { share.$name($(&$arg),*).await })?
            }
        )*
    };
}

impl Share {
    /// Open (or create) a file; see [`crate::Share::open`].
    pub fn open(&self, path: &str, opts: &OpenOptions) -> Result<File> {
        let share = self.inner.clone();
        let (path, opts) = (path.to_string(), opts.clone());
        let file = self
            .rt
            .run(async move { share.open(&path, &opts).await })??;
        Ok(File::new(self.rt.clone(), file))
    }

    /// Open a file by its file id; see [`crate::Share::open_by_file_id`].
    pub fn open_by_file_id(&self, file_id: u64, opts: &OpenOptions) -> Result<File> {
        let share = self.inner.clone();
        let opts = opts.clone();
        let file = self
            .rt
            .run(async move { share.open_by_file_id(file_id, &opts).await })??;
        Ok(File::new(self.rt.clone(), file))
    }

    share_calls! {
        /// List a directory; see [`crate::Share::read_dir`].
        fn read_dir(path: &str => path.to_string()) -> Vec<DirEntry>;
        /// Size, times and attributes of `path`.
        fn metadata(path: &str => path.to_string()) -> Metadata;
        /// Whether `path` exists.
        fn exists(path: &str => path.to_string()) -> bool;
        /// Create a directory; fails if it exists.
        fn create_dir(path: &str => path.to_string()) -> ();
        /// Create a directory and its missing parents.
        fn create_dir_all(path: &str => path.to_string()) -> ();
        /// Delete a file.
        fn remove_file(path: &str => path.to_string()) -> ();
        /// Delete an empty directory.
        fn remove_dir(path: &str => path.to_string()) -> ();
        /// The snapshots of `path`, newest first; see [`crate::Share::snapshots`].
        fn snapshots(path: &str => path.to_string()) -> Vec<Snapshot>;
    }

    /// Rename or move `from` to `to`; `if_exists` says whether an existing target file is
    /// overwritten.
    pub fn rename(&self, from: &str, to: &str, if_exists: IfExists) -> Result<()> {
        let share = self.inner.clone();
        let (from, to) = (from.to_string(), to.to_string());
        self.rt
            .run(async move { share.rename(&from, &to, if_exists).await })?
    }

    /// Size and free space of the share.
    pub fn fs_info(&self) -> Result<FsInfo> {
        let share = self.inner.clone();
        self.rt.run(async move { share.fs_info().await })?
    }

    /// This share as it was in `snapshot`; see [`crate::Share::at_snapshot`].
    pub fn at_snapshot(&self, snapshot: &Snapshot) -> Share {
        Share {
            rt: self.rt.clone(),
            inner: self.inner.at_snapshot(snapshot),
        }
    }

    /// The async share underneath.
    pub fn as_async(&self) -> &crate::Share {
        &self.inner
    }
}

/// A blocking [`crate::File`] with a cursor: `std::io::Read`, `Write` and `Seek`.
///
/// Reads fetch at least 1 MiB at a time (split into pipelined chunks by the async layer)
/// and serve small reads from what was fetched. Writes go to the server as they come, one
/// `write_at` per call, so every `write` that returns `Ok` is on the server; wrap the file in
/// a `std::io::BufWriter` (1 MiB or more) to send fewer, larger writes. `flush` asks the
/// server to flush the file to stable storage (SMB2 FLUSH). Dropping the file closes it,
/// waiting up to 10 s for the server's answer; [`File::close`] reports that answer.
pub struct File {
    rt: Arc<Runtime>,
    /// `None` once closed.
    inner: Option<crate::File>,
    pos: u64,
    /// Data read ahead, starting at file offset `ahead_at`.
    ahead: Bytes,
    ahead_at: u64,
}

impl File {
    fn new(rt: Arc<Runtime>, inner: crate::File) -> File {
        File {
            rt,
            inner: Some(inner),
            pos: 0,
            ahead: Bytes::new(),
            ahead_at: 0,
        }
    }

    fn file(&self) -> Result<crate::File> {
        self.inner
            .clone()
            .ok_or(Error::ApiMisuse("the file was closed"))
    }

    /// The path the file was opened with.
    pub fn path(&self) -> &str {
        self.inner.as_ref().map_or("", |f| f.path())
    }

    /// Read up to `len` bytes at `offset`; fewer only at end of file. The cursor stays.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        let file = self.file()?;
        self.rt
            .run(async move { file.read_at(offset, len).await })?
    }

    /// Write all of `data` at `offset`. The cursor stays.
    pub fn write_at(&mut self, offset: u64, data: Bytes) -> Result<()> {
        self.ahead = Bytes::new();
        let file = self.file()?;
        self.rt
            .run(async move { file.write_at(offset, data).await })?
    }

    /// Truncate or extend the file.
    pub fn set_len(&mut self, len: u64) -> Result<()> {
        self.ahead = Bytes::new();
        let file = self.file()?;
        self.rt.run(async move { file.set_len(len).await })?
    }

    /// Current size, times and attributes.
    pub fn metadata(&self) -> Result<Metadata> {
        let file = self.file()?;
        self.rt.run(async move { file.metadata().await })?
    }

    /// Ask the server to flush the file to stable storage.
    pub fn sync_all(&self) -> Result<()> {
        let file = self.file()?;
        self.rt.run(async move { file.flush().await })?
    }

    /// Close the handle now and report the server's answer.
    pub fn close(mut self) -> Result<()> {
        match self.inner.take() {
            Some(file) => self.rt.run(async move { file.close().await })?,
            None => Ok(()),
        }
    }

    /// The async file underneath.
    pub fn as_async(&self) -> Option<&crate::File> {
        self.inner.as_ref()
    }
}

fn io_err(e: Error) -> io::Error {
    match e {
        Error::ApiMisuse(_) => io::Error::new(io::ErrorKind::Unsupported, e),
        e => io::Error::other(e),
    }
}

impl io::Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let in_ahead =
            self.pos >= self.ahead_at && self.pos < self.ahead_at + self.ahead.len() as u64;
        if !in_ahead {
            let want = buf.len().max(READ_AHEAD);
            self.ahead = self.read_at(self.pos, want).map_err(io_err)?;
            self.ahead_at = self.pos;
            if self.ahead.is_empty() {
                // End of file.
                return Ok(0);
            }
        }
        let start = (self.pos - self.ahead_at) as usize;
        let n = buf.len().min(self.ahead.len() - start);
        buf[..n].copy_from_slice(&self.ahead[start..start + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl io::Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.write_at(self.pos, Bytes::copy_from_slice(buf))
            .map_err(io_err)?;
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sync_all().map_err(io_err)
    }
}

impl io::Seek for File {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let new = match pos {
            io::SeekFrom::Start(p) => Some(p),
            io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            io::SeekFrom::End(d) => self.metadata().map_err(io_err)?.len.checked_add_signed(d),
        }
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start of the file",
            )
        })?;
        // What was read ahead stays: a seek within it is served from it.
        self.pos = new;
        Ok(new)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let Some(file) = self.inner.take() else {
            return;
        };
        // Inside a tokio runtime we may not block: the async file's own drop closes it in the
        // background there.
        if tokio::runtime::Handle::try_current().is_ok() {
            return;
        }
        let path = file.path().to_string();
        let closed = self
            .rt
            .run(async move { tokio::time::timeout(CLOSE_ON_DROP, file.close()).await });
        match closed {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::debug!(path, error = %e, "close on drop failed"),
            Ok(Err(_)) => tracing::debug!(
                path,
                "close on drop timed out; the server will drop the handle"
            ),
            Err(e) => tracing::debug!(path, error = %e, "close on drop not sent"),
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::Client")
            .field(&self.inner)
            .finish()
    }
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::Share").field(&self.inner).finish()
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::File")
            .field("path", &self.path())
            .field("pos", &self.pos)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refused_inside_a_tokio_runtime_in_words() {
        let rt = Runtime(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .build()
                .unwrap(),
        ));
        let e = rt.run(async { 1 }).unwrap_err();
        assert!(matches!(e, Error::ApiMisuse(_)));
        assert!(e.to_string().contains("inside a tokio runtime"), "{e}");
        // Dropping the runtime here must not panic either.
        drop(rt);
    }

    #[test]
    fn runs_futures_and_reraises_their_panics() {
        let rt = Runtime(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap(),
        ));
        assert_eq!(rt.run(async { 41 + 1 }).unwrap(), 42);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.run(async { panic!("boom") })
        }));
        assert!(caught.is_err());
    }

    #[test]
    fn connecting_from_inside_a_runtime_is_refused_not_a_panic() {
        let outer = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let creds = UserCredentials {
            user: "u".into(),
            domain: String::new(),
            password: "p".into(),
        };
        let e = outer
            .block_on(async {
                Client::connect("127.0.0.1:1", &creds, crate::ClientConfig::default())
            })
            .unwrap_err();
        assert!(matches!(e, Error::ApiMisuse(_)), "{e:?}");
    }
}
