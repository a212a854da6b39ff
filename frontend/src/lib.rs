//! What the command-line programs (`smbcp`, `smbctl`, `smbfuse`) share and a library user
//! has no use for: credentials resolved the way the programs document it (the URL, an
//! option, `SMB_USER`, `SMB_PASSWORD`, a credentials file, a question on the terminal),
//! connecting with `SMB_KEYLOGFILE`, the JSON that shows a session's channels, where a
//! mount publishes its status, and man pages and completions made from the `--help`
//! definitions. What a library user would want too (locations, credentials files, errors in
//! a few words, keeping secrets out of logs) is in `smb3-client` itself.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod generate;
mod login;
mod route;
pub mod status_json;
#[cfg(unix)]
pub mod status_socket;
pub mod transport;

pub use login::{
    ask_password, connect, credentials, credentials_for, parse_location, KerberosOptions,
    RealmMissing, KEY_LOG_ENV,
};
pub use route::route;
