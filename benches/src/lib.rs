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
