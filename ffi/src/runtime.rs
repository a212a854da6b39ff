//! The tokio runtime inside the library: one per client, shared by every handle made from
//! it (share, file, listing), alive until the last of them is freed. Each blocking call runs
//! its future as a task there and waits on the calling thread, which does no I/O itself and
//! never runs inside the runtime: so a progress callback (always called on the caller's
//! thread, outside the runtime) may call back into the library.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use smb3_client::Error;

use crate::error::{FfiError, FfiResult};

/// How long freeing the last handle of a client waits for its tasks (the closing of
/// connections) before leaving them.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// A client's runtime.
pub(crate) struct Ctx {
    rt: Option<tokio::runtime::Runtime>,
}

impl Ctx {
    /// A multi-thread runtime with one worker per CPU (at least two, at most eight): the
    /// channels' reader and writer tasks, signing and sealing run there.
    pub(crate) fn new() -> FfiResult<Arc<Ctx>> {
        let workers = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("smb3-ffi")
            .enable_all()
            .build()
            .map_err(|e| FfiError::Local("the runtime's threads".into(), e))?;
        Ok(Arc::new(Ctx { rt: Some(rt) }))
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        self.rt
            .as_ref()
            .expect("the runtime lives until drop")
            .handle()
    }

    /// Run `fut` on the runtime and wait for it on this thread. Refused inside a tokio
    /// runtime (a Rust caller's async code), where blocking would stall a worker.
    pub(crate) fn run<F>(&self, fut: F) -> FfiResult<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::ApiMisuse(
                "libsmb3 was called from inside a tokio runtime; call it from a plain thread",
            )
            .into());
        }
        let handle = self.handle();
        match handle.block_on(handle.spawn(fut)) {
            Ok(v) => Ok(v),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(Error::ApiMisuse("the client's runtime shut down").into()),
        }
    }

    /// Like [`Ctx::run`] for a future that returns the library's `Result`.
    pub(crate) fn call<T, F>(&self, fut: F) -> FfiResult<T>
    where
        F: Future<Output = smb3_client::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        Ok(self.run(fut)??)
    }

    /// Drop `value` inside the runtime's context, so what it does on drop (the async file's
    /// background CLOSE, a walk stopping its task) can reach the runtime.
    pub(crate) fn drop_inside<T>(&self, value: T) {
        let _entered = self.handle().enter();
        drop(value);
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").finish_non_exhaustive()
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            // Dropping a runtime blocks, which tokio forbids inside another runtime.
            if tokio::runtime::Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(SHUTDOWN_WAIT);
            }
        }
    }
}
