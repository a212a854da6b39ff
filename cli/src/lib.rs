//! Shared code of the `smbcp` and `smbctl` binaries: the options they have in common, the
//! copy engine, and how entries, sessions and mounts are shown (`show`, `show_session`,
//! `show_mount`). What `smbfuse` uses too is in `smb3-frontend` and the library.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod auth_args;
pub mod channel_args;
mod chunk_read;
pub mod copy;
pub mod file_error;
pub mod glob;
mod hashing;
mod holes;
pub mod in_flight;
mod local_dest;
mod name_clash;
pub mod on_server;
mod plan;
mod preserve;
mod progress;
mod remote_links;
mod resume;
pub mod security_args;
pub mod show;
pub mod show_dfs;
#[cfg(unix)]
pub mod show_mount;
pub mod show_session;
mod small_file;
mod source_change;
mod transfer;
mod window;

/// Exit code: everything worked.
pub const EXIT_OK: i32 = 0;
/// Exit code: some files failed (each listed on stderr).
pub const EXIT_SOME_FAILED: i32 = 1;
/// Exit code: usage or configuration error.
pub const EXIT_USAGE: i32 = 2;

/// Library logs on stderr, only when `RUST_LOG` asks for them (e.g.
/// `RUST_LOG=smb3_client=info`): the channels lost, requests replayed, sessions set up again.
/// Without it the tools print only their own lines. Whatever `RUST_LOG` says, nothing that
/// would write a secret gets through (`smb3_client::log_filter`).
pub fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .with_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_filter(tracing_subscriber::filter::filter_fn(
            smb3_client::log_filter::without_secrets,
        ));
    let _ = tracing_subscriber::registry().with(layer).try_init();
}
