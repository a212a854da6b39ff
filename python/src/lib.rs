//! The Python package `smb3`: this crate is its native part, the module `smb3._smb3`, built by
//! maturin (`pip install ./python`); the Python part (`python/smb3/`) makes the io objects,
//! the exception classes, `walk` and the fsspec filesystem out of it. See `docs/PYTHON.md`.
//!
//! - **Conversion only** (DESIGN §9): every operation is the library's. Each client owns a
//!   tokio runtime shared by its shares and files (as `smb3-ffi` does); a call runs its future
//!   there as a task and waits with the GIL released, so other Python threads run meanwhile.
//! - **Interruptible**: the waiting thread wakes every 100 ms to let Python handle signals; a
//!   KeyboardInterrupt aborts the task (the library drains late replies, an open file stays
//!   open until closed) and is raised.
//! - **Errors** become the classes of `smb3._errors` (OSError subclasses, with `ntstatus`); a
//!   panic in the library's task becomes an `SMBError`, never an unwind into Python.

#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod client;
mod copy;
mod errors;
mod file;
mod listing;
mod runtime;
mod stat;

use pyo3::prelude::*;

/// The native module `smb3._smb3`.
#[pymodule]
fn _smb3(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<client::Client>()?;
    m.add_class::<client::Share>()?;
    m.add_class::<file::File>()?;
    m.add_class::<listing::ScandirIterator>()?;
    m.add_class::<listing::WalkIterator>()?;
    m.add_class::<listing::DirEntry>()?;
    m.add_class::<stat::StatResult>()?;
    m.add_function(wrap_pyfunction!(client::parse_url, m)?)?;
    Ok(())
}
