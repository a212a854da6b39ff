//! `smbfuse`: mount an SMB share with FUSE.
//!
//! [`fs::SmbFs`] is the file system in terms of node ids and handles, with no FUSE types (it
//! is tested by driving it directly); [`adapter::FuseAdapter`] is the thin `fuser` layer that
//! runs each kernel request as a tokio task on it; [`mount`] parses the command line, connects,
//! mounts and serves until unmounted.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod adapter;
pub mod daemon;
pub mod deferred_close;
pub(crate) mod dir_stream;
pub mod dir_watch;
pub mod errno;
pub mod fs;
pub(crate) mod hidden_names;
pub mod idle_memory;
pub mod inode;
pub mod io_stats;
#[cfg(target_os = "linux")]
pub mod kernel;
#[cfg(target_os = "linux")]
pub mod kernel_mount;
pub mod mount;
pub mod options;
pub mod prefetch;
pub mod sfm;
#[cfg(unix)]
pub mod status_server;
pub mod write_behind;
