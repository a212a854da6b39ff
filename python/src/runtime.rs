//! The tokio runtime inside the package: one per client, shared by every object made from it
//! (shares, files, listings) and alive until the last of them is gone. A call spawns its
//! future there and waits on the calling thread with the GIL released.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use crate::errors;

/// How long dropping the last object of a client waits for its tasks (closing connections).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// How often a waiting call looks for signals (Ctrl-C) to hand to Python.
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// A client's runtime.
pub(crate) struct Ctx {
    rt: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").finish_non_exhaustive()
    }
}

impl Ctx {
    /// A multi-thread runtime with one worker per CPU (2 to 8): the channels' reader and
    /// writer tasks, signing and sealing run there.
    pub(crate) fn new() -> PyResult<Arc<Ctx>> {
        let workers = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("smb3-python")
            .enable_all()
            .build()
            .map_err(pyo3::exceptions::PyOSError::new_err)?;
        Ok(Arc::new(Ctx { rt: Some(rt) }))
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        self.rt
            .as_ref()
            .expect("the runtime lives until drop")
            .handle()
    }

    /// Run `fut` on the runtime and wait for it with the GIL released: the calling thread
    /// drives it (as smbcp's main thread drives its copy), the runtime's workers run the
    /// channels' tasks. Signals are checked every [`SIGNAL_POLL`]: an exception from a signal
    /// handler (KeyboardInterrupt) drops the future (what it cleans up on drop, such as a
    /// partial copy, is gone when the exception reaches the caller) and is returned. A panic
    /// inside the future becomes an `SMBError`.
    pub(crate) fn run<F>(&self, py: Python<'_>, fut: F) -> PyResult<F::Output>
    where
        F: Future + Send,
        F::Output: Send,
    {
        let handle = self.handle();
        let done = py.allow_threads(|| {
            handle.block_on(async {
                let mut fut = std::pin::pin!(AssertUnwindSafe(fut).catch_unwind());
                loop {
                    match tokio::time::timeout(SIGNAL_POLL, &mut fut).await {
                        Ok(done) => return Ok::<_, PyErr>(done),
                        Err(_) => Python::with_gil(|py| py.check_signals())?,
                    }
                }
            })
        })?;
        done.map_err(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            errors::internal(py, &format!("internal error (panic): {what}"))
        })
    }

    /// Like [`Ctx::run`] for a future that returns the library's `Result`: its error becomes
    /// the matching exception.
    pub(crate) fn call<T, F>(&self, py: Python<'_>, fut: F) -> PyResult<T>
    where
        F: Future<Output = smb3_client::Result<T>> + Send,
        T: Send,
    {
        self.run(py, fut)?.map_err(|e| errors::from_client(py, &e))
    }

    /// Drop `value` inside the runtime's context, so what it does on drop (a file's
    /// background CLOSE) can reach the runtime.
    pub(crate) fn drop_inside<T>(&self, value: T) {
        let _entered = self.handle().enter();
        drop(value);
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(SHUTDOWN_WAIT);
            }
        }
    }
}
