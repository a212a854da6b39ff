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

/// The program `name` in the directory of `anchor` (default: this program), as an absolute
/// path (the client namespace gets it as it is), with what to build when it is not there.
pub fn beside(anchor: Option<&std::path::Path>, name: &str) -> Result<std::path::PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find my own path: {e}"))?;
    let path = anchor.unwrap_or(&me).with_file_name(name);
    std::fs::canonicalize(&path).map_err(|_| {
        format!("{} not found: build it first (cargo build --release -p smbcp -p smbfuse -p smb3-benches)", path.display())
    })
}
