//! What the benchmark binaries share: `smb-bench` (docs/PERFORMANCE.md), `soak`
//! (docs/RELIABILITY.md), `crypto-bench` and `microbench-table`.
//!
//! What drives the testbed is Linux-only, like the testbed itself; elsewhere only the pure
//! parts are built.

pub mod data;
pub mod doc;
#[cfg(target_os = "linux")]
pub mod fuse_mount;
#[cfg(target_os = "linux")]
pub mod session;
#[cfg(target_os = "linux")]
pub mod soak;
pub mod stats;
pub mod table;

use std::fmt::Display;
use std::path::{Path, PathBuf};

/// Errors as the benchmarks report them: text naming what failed.
pub trait Context<T> {
    /// The error, if any, as `"{what}: {error}"`.
    fn ctx(self, what: impl Display) -> Result<T, String>;
}

impl<T, E: Display> Context<T> for Result<T, E> {
    fn ctx(self, what: impl Display) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// Calls `first` on the first SIGINT or SIGTERM and `second` on the next, from a thread of
/// their own: a run stops at its next step and takes its testbed down, and a second signal is
/// the way out when that hangs. `Err` when the thread or its signal handlers cannot be set up.
#[cfg(target_os = "linux")]
pub fn on_signals(
    first: impl FnOnce() + Send + 'static,
    second: impl FnOnce() + Send + 'static,
) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let rt = rt.ctx("signal runtime")?;
    let handlers = rt.block_on(async {
        let int = signal(SignalKind::interrupt()).ctx("SIGINT")?;
        Ok::<_, String>((int, signal(SignalKind::terminate()).ctx("SIGTERM")?))
    });
    let (mut int, mut term) = handlers?;
    let thread = std::thread::Builder::new().name("signals".into());
    let spawned = thread.spawn(move || {
        rt.block_on(async {
            tokio::select! { _ = int.recv() => {} _ = term.recv() => {} }
            first();
            tokio::select! { _ = int.recv() => {} _ = term.recv() => {} }
            second();
        })
    });
    spawned.map(drop).ctx("signal thread")
}

/// The program `name` in the directory of `anchor` (default: this program), as an absolute
/// path (the client namespace gets it as it is), with what to build when it is not there.
pub fn beside(anchor: Option<&Path>, name: &str) -> Result<PathBuf, String> {
    let me = std::env::current_exe().ctx("cannot find my own path")?;
    let path = anchor.unwrap_or(&me).with_file_name(name);
    let build = "build it first (cargo build --release -p smbcp -p smbfuse -p smb3-benches)";
    std::fs::canonicalize(&path).map_err(|_| format!("{} not found: {build}", path.display()))
}
