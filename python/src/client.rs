//! `Client` (a session with a server) and `Share` (a connected tree): connecting, path
//! operations, listings and copies.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use smb3_client::location::Location;
use smb3_client::{Auth, ClientConfig, Dispatch, IfExists, OpenOptions, UserCredentials};

use crate::copy::{self, Direction};
use crate::errors;
use crate::file::{File, OpenMode};
use crate::listing::{ScandirIterator, WalkIterator};
use crate::runtime::Ctx;
use crate::stat::StatResult;

/// The most `Share.read_bytes` and `write_bytes` move in one round trip: one chunk, the
/// library's default READ/WRITE size.
const ONE_ROUND_TRIP: u32 = 1 << 20;

/// A share-relative path as the library takes it: `/` separated, no leading or trailing `/`.
pub(crate) fn rpath(path: &str) -> String {
    path.replace('\\', "/").trim_matches('/').to_string()
}

/// A session with an SMB server. Extra channels bind in the background (multichannel); the
/// client is usable at once. Thread-safe; cheap to share between threads.
#[pyclass(module = "smb3._smb3", frozen)]
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) inner: smb3_client::Client,
    pub(crate) io_size: u32,
    pub(crate) ctx: Arc<Ctx>,
    server: String,
}

/// Settings from keyword arguments, checked.
#[allow(clippy::too_many_arguments)]
fn config_from(
    py: Python<'_>,
    multichannel: bool,
    max_channels: Option<usize>,
    channels_per_rss_nic: Option<usize>,
    channels_per_nic: Option<usize>,
    io_size: Option<u32>,
    dispatch: Option<&str>,
    encrypt: bool,
    require_signing: bool,
    connect_timeout: Option<f64>,
    auth: &str,
    kerberos_realm: Option<String>,
    kerberos_kdc: Option<String>,
    kerberos_service_host: Option<String>,
    ntlm_fallback: bool,
    kerberos_ccache: Option<String>,
    kerberos_keytab: Option<PathBuf>,
    kerberos_principal: Option<String>,
    follow_dfs: bool,
) -> PyResult<ClientConfig> {
    let mut c = ClientConfig::default();
    c.multichannel = multichannel;
    if let Some(n) = max_channels {
        if n == 0 {
            return Err(errors::invalid(py, "max_channels must be at least 1"));
        }
        c.max_channels = n;
    }
    if let Some(n) = channels_per_rss_nic {
        c.channels_per_rss_nic = n.max(1);
    }
    if let Some(n) = channels_per_nic {
        c.channels_per_nic = n.max(1);
    }
    if let Some(n) = io_size {
        if !(4096..=8 << 20).contains(&n) {
            return Err(errors::invalid(
                py,
                format!("io_size {n} is not between 4096 and 8388608"),
            ));
        }
        c.io_size = n;
    }
    // As smbcp: a copy starts on the first channel while the others bind, so the channels
    // join at different times; each chunk to the channel with the fewest bytes in flight
    // evens that out (round-robin left a 1 GiB download 1.3-1.5x slower over one link).
    c.dispatch = match dispatch {
        None => Dispatch::LeastLoaded,
        Some("round_robin") | Some("round-robin") => Dispatch::RoundRobin,
        Some("least_loaded") | Some("least-loaded") => Dispatch::LeastLoaded,
        Some(other) => {
            return Err(errors::invalid(
                py,
                format!("dispatch {other:?} is not 'round_robin' or 'least_loaded'"),
            ))
        }
    };
    c.encrypt = encrypt;
    c.require_signing = require_signing;
    if let Some(t) = connect_timeout {
        if !(t > 0.0 && t.is_finite()) {
            return Err(errors::invalid(
                py,
                "connect_timeout must be a positive number of seconds",
            ));
        }
        c.connect_timeout = Duration::from_secs_f64(t);
    }
    c.auth = match auth {
        "auto" => Auth::Auto,
        "kerberos" | "krb5" => Auth::Kerberos,
        "ntlm" | "ntlmssp" => Auth::Ntlm,
        other => {
            return Err(errors::invalid(
                py,
                format!("auth {other:?} is not 'auto', 'kerberos' or 'ntlm'"),
            ))
        }
    };
    c.kerberos_realm = kerberos_realm;
    c.kerberos_kdc = kerberos_kdc;
    c.kerberos_service_host = kerberos_service_host;
    c.ntlm_fallback = ntlm_fallback;
    c.kerberos_ccache = kerberos_ccache;
    c.kerberos_keytab = kerberos_keytab;
    c.kerberos_principal = kerberos_principal;
    c.follow_dfs = follow_dfs;
    Ok(c)
}

#[pymethods]
impl Client {
    /// Connect to `host` (a name or address; `port` 445 by default) and set up the session:
    /// NTLMv2 with `username`/`password`/`domain`, or Kerberos (from the ticket cache or a
    /// keytab when no password is given, or with `kerberos_realm`).
    #[new]
    #[pyo3(signature = (
        host, username=None, password=None, domain=None, port=445, *,
        multichannel=true, max_channels=None, channels_per_rss_nic=None, channels_per_nic=None,
        io_size=None, dispatch=None, encrypt=false, require_signing=true, connect_timeout=None,
        auth="auto", kerberos_realm=None, kerberos_kdc=None, kerberos_service_host=None,
        ntlm_fallback=false, kerberos_ccache=None, kerberos_keytab=None,
        kerberos_principal=None, follow_dfs=true
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        host: &str,
        username: Option<String>,
        password: Option<String>,
        domain: Option<String>,
        port: u16,
        multichannel: bool,
        max_channels: Option<usize>,
        channels_per_rss_nic: Option<usize>,
        channels_per_nic: Option<usize>,
        io_size: Option<u32>,
        dispatch: Option<&str>,
        encrypt: bool,
        require_signing: bool,
        connect_timeout: Option<f64>,
        auth: &str,
        kerberos_realm: Option<String>,
        kerberos_kdc: Option<String>,
        kerberos_service_host: Option<String>,
        ntlm_fallback: bool,
        kerberos_ccache: Option<String>,
        kerberos_keytab: Option<PathBuf>,
        kerberos_principal: Option<String>,
        follow_dfs: bool,
    ) -> PyResult<Client> {
        let config = config_from(
            py,
            multichannel,
            max_channels,
            channels_per_rss_nic,
            channels_per_nic,
            io_size,
            dispatch,
            encrypt,
            require_signing,
            connect_timeout,
            auth,
            kerberos_realm,
            kerberos_kdc,
            kerberos_service_host,
            ntlm_fallback,
            kerberos_ccache,
            kerberos_keytab,
            kerberos_principal,
            follow_dfs,
        )?;
        let user = username.unwrap_or_default();
        if password.is_some() && user.is_empty() {
            return Err(errors::invalid(
                py,
                "a password was given without a username",
            ));
        }
        let server = server_of(host, port);
        let creds = UserCredentials {
            user,
            domain: domain.unwrap_or_default(),
            password: password.unwrap_or_default().into(),
        };
        let io_size = config.io_size;
        let ctx = Ctx::new()?;
        let s = server.clone();
        let inner = ctx.call(py, async move {
            smb3_client::Client::connect(&s, &creds, config).await
        })?;
        Ok(Client {
            inner,
            io_size,
            ctx,
            server,
        })
    }

    /// Connect the share `name` (TREE_CONNECT).
    fn share(slf: &Bound<'_, Self>, name: &str) -> PyResult<Share> {
        let py = slf.py();
        let me = slf.get();
        let (c, name) = (me.inner.clone(), name.to_string());
        let inner = me.ctx.call(py, async move { c.share(&name).await })?;
        Ok(Share {
            inner,
            client: slf.clone().unbind(),
            io_size: me.io_size,
            ctx: me.ctx.clone(),
        })
    }

    /// How many channels carry the session's requests now (1 until extra channels bind).
    #[getter]
    fn channels(&self) -> usize {
        self.inner.usable_channels()
    }

    /// `host:port` this client connected to.
    #[getter]
    fn server(&self) -> &str {
        &self.server
    }

    /// Wait up to `timeout` seconds for every channel multichannel planned to be bound;
    /// True if they are (the session works either way).
    #[pyo3(signature = (timeout=5.0))]
    fn wait_for_channels(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let c = self.inner.clone();
        let wait = Duration::from_secs_f64(timeout.max(0.0));
        self.ctx
            .run(py, async move { c.wait_for_channels(wait).await })
    }

    /// End the session (LOGOFF). Objects made from the client fail afterwards.
    fn logoff(&self, py: Python<'_>) -> PyResult<()> {
        let c = self.inner.clone();
        self.ctx.call(py, async move { c.logoff().await })
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.logoff(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "<smb3.Client {} channels={}>",
            self.server,
            self.inner.usable_channels()
        )
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // The client's own drop may start background work (its connections' shutdown).
        let inner = self.inner.clone();
        self.ctx.drop_inside(inner);
    }
}

/// A connected share. Paths are share-relative, `/` separated (`\` accepted). Thread-safe.
#[pyclass(module = "smb3._smb3", frozen)]
#[derive(Debug)]
pub(crate) struct Share {
    pub(crate) inner: smb3_client::Share,
    client: Py<Client>,
    pub(crate) io_size: u32,
    pub(crate) ctx: Arc<Ctx>,
}

impl Share {
    /// This share as a copy's end (see `copy`).
    fn endpoint(&self) -> copy::Endpoint<'_> {
        copy::Endpoint {
            ctx: &self.ctx,
            share: &self.inner,
            io_size: self.io_size,
        }
    }

    fn call<T, F>(&self, py: Python<'_>, fut: F) -> PyResult<T>
    where
        F: std::future::Future<Output = smb3_client::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.ctx.call(py, fut)
    }
}

#[pymethods]
impl Share {
    /// The share's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The client this share belongs to.
    #[getter]
    fn client(&self, py: Python<'_>) -> Py<Client> {
        self.client.clone_ref(py)
    }

    /// Whether the share's traffic is encrypted.
    #[getter]
    fn encrypted(&self) -> bool {
        self.inner.is_encrypted()
    }

    /// Open `path` as Python's `open` does (`mode` of r, w, x, a, +, b, t): a buffered
    /// binary file (`io.BufferedReader`/`BufferedWriter`/`BufferedRandom`) over the raw
    /// `io.RawIOBase` file, or a text file (`io.TextIOWrapper`) in text mode. `buffering`
    /// is the buffer's size in bytes (0: the raw file, binary only; -1: 1 MiB).
    #[pyo3(signature = (path, mode="r", buffering=-1, encoding=None, errors=None, newline=None, *, backup_intent=false))]
    #[allow(clippy::too_many_arguments)]
    fn open<'py>(
        slf: &Bound<'py, Self>,
        path: &str,
        mode: &str,
        buffering: i64,
        encoding: Option<&str>,
        errors: Option<&str>,
        newline: Option<&str>,
        backup_intent: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let raw = Bound::new(py, Share::open_raw(slf, path, mode, backup_intent)?)?;
        let wrap = PyModule::import(py, "smb3._io")?.getattr("_wrap")?;
        wrap.call1((raw, mode, buffering, encoding, errors, newline))
    }

    /// Open `path` as the native raw file (`smb3._smb3.File`); `open` wraps it in the io
    /// classes. `mode` as for `open` (text or binary alike).
    #[pyo3(signature = (path, mode="rb", backup_intent=false))]
    fn open_raw(
        slf: &Bound<'_, Self>,
        path: &str,
        mode: &str,
        backup_intent: bool,
    ) -> PyResult<File> {
        let py = slf.py();
        let me = slf.get();
        let parsed = OpenMode::parse(mode).map_err(|m| errors::invalid(py, m))?;
        let mut opts = OpenOptions::new()
            .read(parsed.read)
            .write(parsed.write)
            .create(parsed.create)
            .create_new(parsed.create_new)
            .truncate(parsed.truncate);
        if backup_intent {
            opts = opts.backup_intent();
        }
        let (s, p) = (me.inner.clone(), rpath(path));
        let file = me.call(py, async move { s.open(&p, &opts).await })?;
        Ok(File::new(
            file,
            me.ctx.clone(),
            parsed,
            path.to_string(),
            me.io_size,
            me.inner.client().clone(),
        ))
    }

    /// Size, times and attributes of `path` (an `os.stat_result`-like object).
    fn stat(&self, py: Python<'_>, path: &str) -> PyResult<StatResult> {
        let (s, p) = (self.inner.clone(), rpath(path));
        let m = self.call(py, async move { s.metadata(&p).await })?;
        Ok(StatResult::from(&m))
    }

    /// Whether `path` exists.
    fn exists(&self, py: Python<'_>, path: &str) -> PyResult<bool> {
        let (s, p) = (self.inner.clone(), rpath(path));
        self.call(py, async move { s.exists(&p).await })
    }

    /// Whether `path` is a directory (False when it does not exist).
    fn isdir(&self, py: Python<'_>, path: &str) -> PyResult<bool> {
        self.is_kind(py, path, true)
    }

    /// Whether `path` is a regular file (False when it does not exist).
    fn isfile(&self, py: Python<'_>, path: &str) -> PyResult<bool> {
        self.is_kind(py, path, false)
    }

    /// The names in the directory `path` ("" or "/" for the share's root), without `.`
    /// and `..`, in the server's order.
    #[pyo3(signature = (path=""))]
    fn listdir(&self, py: Python<'_>, path: &str) -> PyResult<Vec<String>> {
        let (s, p) = (self.inner.clone(), rpath(path));
        let entries = self.call(py, async move { s.read_dir(&p).await })?;
        Ok(entries.into_iter().map(|e| e.name).collect())
    }

    /// An iterator of `DirEntry` for the directory `path`, read from the server a page at a
    /// time (memory stays bounded for huge directories); a context manager that closes the
    /// directory, as `os.scandir`.
    #[pyo3(signature = (path=""))]
    fn scandir(&self, py: Python<'_>, path: &str) -> PyResult<ScandirIterator> {
        let (s, p) = (self.inner.clone(), rpath(path));
        let listing = self.call(py, async move { s.list(&p).await })?;
        Ok(ScandirIterator::new(listing, rpath(path), self.ctx.clone()))
    }

    /// Every entry of the tree under `top`, breadth-first, several directories listed at
    /// once (the library's walk): an iterator of `DirEntry` whose `path` is share-relative.
    /// A directory that cannot be listed is reported through `onerror(exception)` when given,
    /// else skipped. `max_depth` 1 lists only `top`.
    #[pyo3(signature = (top="", max_depth=None, concurrency=4, onerror=None))]
    fn walk_entries(
        &self,
        py: Python<'_>,
        top: &str,
        max_depth: Option<usize>,
        concurrency: usize,
        onerror: Option<PyObject>,
    ) -> PyResult<WalkIterator> {
        let (s, p) = (self.inner.clone(), rpath(top));
        let options = smb3_client::WalkOptions {
            concurrency: concurrency.max(1),
            max_depth,
        };
        let walk = self.ctx.run(py, async move { s.walk(&p, options) })?;
        Ok(WalkIterator::new(walk, self.ctx.clone(), onerror))
    }

    /// `(dirpath, dirnames, filenames)` for each directory of the tree under `top`, as
    /// `os.walk` (top-down by default: prune `dirnames` in place to skip directories).
    #[pyo3(signature = (top="", topdown=true, onerror=None))]
    fn walk<'py>(
        slf: &Bound<'py, Self>,
        top: &str,
        topdown: bool,
        onerror: Option<PyObject>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let walk = PyModule::import(slf.py(), "smb3._walk")?.getattr("walk")?;
        walk.call1((slf, top, topdown, onerror))
    }

    /// Create the directory `path`; FileExists if it exists.
    fn mkdir(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        let (s, p) = (self.inner.clone(), rpath(path));
        self.call(py, async move { s.create_dir(&p).await })
    }

    /// Create the directory `path` and its missing parents; an existing directory is an
    /// error only when `exist_ok` is False.
    #[pyo3(signature = (path, exist_ok=true))]
    fn makedirs(&self, py: Python<'_>, path: &str, exist_ok: bool) -> PyResult<()> {
        let p = rpath(path);
        if !exist_ok && self.exists(py, &p)? {
            let s = self.inner.clone();
            let p2 = p.clone();
            // The server's own answer (OBJECT_NAME_COLLISION), as mkdir gives it.
            return self.call(py, async move { s.create_dir(&p2).await });
        }
        let s = self.inner.clone();
        self.call(py, async move { s.create_dir_all(&p).await })
    }

    /// The whole content of the file `path`, as `pathlib.Path.read_bytes`: a file of up to
    /// one chunk (1 MiB) in one round trip (CREATE, READ and CLOSE compounded), a larger one
    /// through an open and reads all in flight together.
    fn read_bytes<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyBytes>> {
        let (s, p) = (self.inner.clone(), rpath(path));
        let data = self.call(py, async move {
            if let Some(data) = s.read_small_file(&p, ONE_ROUND_TRIP).await? {
                return Ok(data);
            }
            let f = s.open(&p, &OpenOptions::new().read(true)).await?;
            let len = f.metadata().await?.len;
            let len = usize::try_from(len).map_err(|_| {
                smb3_client::Error::ApiMisuse("file larger than this address space")
            })?;
            let data = f.read_at(0, len).await?;
            f.close().await?;
            Ok(data)
        })?;
        Ok(PyBytes::new(py, &data))
    }

    /// Make the file `path` hold `data` (a bytes-like object), creating or replacing it, as
    /// `pathlib.Path.write_bytes`; returns `len(data)`. A new file of up to one chunk goes in
    /// one round trip (CREATE, WRITE and CLOSE compounded); an existing one is truncated and
    /// written through an open.
    fn write_bytes(&self, py: Python<'_>, path: &str, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let data = crate::file::bytes_of(data)?;
        let n = data.len();
        let (s, p) = (self.inner.clone(), rpath(path));
        self.call(py, async move {
            if data.len() <= ONE_ROUND_TRIP as usize {
                match s.write_new_file(&p, data.clone()).await {
                    Err(e) if e.status() == Some(smb3_client::NtStatus::OBJECT_NAME_COLLISION) => {}
                    other => return other,
                }
            }
            let options = OpenOptions::new().write(true).create(true).truncate(true);
            let f = s.open(&p, &options).await?;
            if !data.is_empty() {
                f.write_at(0, data).await?;
            }
            f.close().await
        })?;
        Ok(n)
    }

    /// Delete the file `path`.
    fn remove(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        let (s, p) = (self.inner.clone(), rpath(path));
        self.call(py, async move { s.remove_file(&p).await })
    }

    /// Delete the empty directory `path`.
    fn rmdir(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        let (s, p) = (self.inner.clone(), rpath(path));
        self.call(py, async move { s.remove_dir(&p).await })
    }

    /// Rename or move `src` to `dst` within the share; an existing file at `dst` is replaced
    /// only when `replace` is True (a directory never is).
    #[pyo3(signature = (src, dst, replace=false))]
    fn rename(&self, py: Python<'_>, src: &str, dst: &str, replace: bool) -> PyResult<()> {
        let (s, from, to) = (self.inner.clone(), rpath(src), rpath(dst));
        let if_exists = if replace {
            IfExists::Replace
        } else {
            IfExists::Fail
        };
        self.call(py, async move { s.rename(&from, &to, if_exists).await })
    }

    /// `rename` that replaces an existing file at `dst`, as `os.replace`.
    fn replace(&self, py: Python<'_>, src: &str, dst: &str) -> PyResult<()> {
        self.rename(py, src, dst, true)
    }

    /// Copy the file `src` to `dst` within the share on the server (server-side copy: the
    /// bytes do not cross the network); `dst` is created or replaced. Returns the bytes
    /// copied.
    fn copy(&self, py: Python<'_>, src: &str, dst: &str) -> PyResult<u64> {
        let (s, from, to) = (self.inner.clone(), rpath(src), rpath(dst));
        self.call(
            py,
            async move { s.copy_file_on_server(&from, &s, &to).await },
        )
    }

    /// Download the file `remote` into the local file `local` with the library's pipelined
    /// chunks in flight on every channel. Returns the bytes copied. A local file that was not
    /// copied whole is removed.
    #[pyo3(signature = (remote, local, overwrite=true))]
    fn download(
        &self,
        py: Python<'_>,
        remote: &str,
        local: PathBuf,
        overwrite: bool,
    ) -> PyResult<u64> {
        copy::run_file(
            py,
            self.endpoint(),
            Direction::Download,
            rpath(remote),
            local,
            overwrite,
        )
    }

    /// Upload the local file `local` into the share's `remote`, as `download` the other way.
    #[pyo3(signature = (local, remote, overwrite=true))]
    fn upload(
        &self,
        py: Python<'_>,
        local: PathBuf,
        remote: &str,
        overwrite: bool,
    ) -> PyResult<u64> {
        copy::run_file(
            py,
            self.endpoint(),
            Direction::Upload,
            rpath(remote),
            local,
            overwrite,
        )
    }

    /// Download the tree under `remote` into the local directory `local` (made if missing),
    /// four files at a time. Returns (files, bytes).
    #[pyo3(signature = (remote, local, overwrite=true))]
    fn download_tree(
        &self,
        py: Python<'_>,
        remote: &str,
        local: PathBuf,
        overwrite: bool,
    ) -> PyResult<(u64, u64)> {
        copy::run_tree(
            py,
            self.endpoint(),
            Direction::Download,
            rpath(remote),
            local,
            overwrite,
        )
    }

    /// Upload the local directory tree `local` into the share's directory `remote` (made if
    /// missing). Regular files and directories; links and special files are skipped.
    /// Returns (files, bytes).
    #[pyo3(signature = (local, remote, overwrite=true))]
    fn upload_tree(
        &self,
        py: Python<'_>,
        local: PathBuf,
        remote: &str,
        overwrite: bool,
    ) -> PyResult<(u64, u64)> {
        copy::run_tree(
            py,
            self.endpoint(),
            Direction::Upload,
            rpath(remote),
            local,
            overwrite,
        )
    }

    /// Size and free space of the share: (total, used, free) in bytes, as
    /// `shutil.disk_usage`.
    fn disk_usage(&self, py: Python<'_>) -> PyResult<(u64, u64, u64)> {
        let s = self.inner.clone();
        let i = self.call(py, async move { s.fs_info().await })?;
        Ok((
            i.total_bytes,
            i.total_bytes.saturating_sub(i.free_bytes),
            i.available_bytes,
        ))
    }

    fn __repr__(&self) -> String {
        format!("<smb3.Share {:?}>", self.inner.name())
    }
}

impl Share {
    fn is_kind(&self, py: Python<'_>, path: &str, dir: bool) -> PyResult<bool> {
        let (s, p) = (self.inner.clone(), rpath(path));
        let found = self.ctx.run(py, async move { s.metadata(&p).await })?;
        match found {
            Ok(m) => Ok(if dir { m.is_dir() } else { m.is_file() }),
            Err(e) if e.to_errno() == 2 || e.to_errno() == 20 => Ok(false),
            Err(e) => Err(errors::from_client(py, &e)),
        }
    }
}

/// `host:port` for `Client::connect`: a host that already names its port is kept; an IPv6
/// address gets brackets.
fn server_of(host: &str, port: u16) -> String {
    if host.starts_with('[') {
        if host.contains("]:") {
            host.to_string()
        } else {
            format!("{host}:{port}")
        }
    } else if host.matches(':').count() > 1 {
        format!("[{host}]:{port}")
    } else if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

/// Split an `smb://[DOMAIN;]USER@HOST[:PORT]/SHARE/PATH` URL (or `//HOST/SHARE/PATH`) into a
/// dict: host, port, username, domain, share, path.
#[pyfunction]
pub(crate) fn parse_url<'py>(py: Python<'py>, url: &str) -> PyResult<Bound<'py, PyDict>> {
    let remote = match Location::parse(url) {
        Ok(Location::Remote(r)) => r,
        Ok(Location::Local(_)) => {
            return Err(errors::invalid(
                py,
                format!("{url}: not an smb:// URL or //HOST/SHARE path"),
            ))
        }
        Err(e) => return Err(errors::invalid(py, e.to_string())),
    };
    let d = PyDict::new(py);
    d.set_item("host", remote.host)?;
    // Python callers pass the port on to a TCP connection: the TCP default when none is named.
    d.set_item(
        "port",
        remote
            .port
            .unwrap_or(smb3_client::Transport::Tcp.default_port()),
    )?;
    d.set_item("username", remote.user)?;
    d.set_item("domain", remote.domain)?;
    d.set_item("share", remote.share)?;
    d.set_item("path", remote.path)?;
    Ok(d)
}
