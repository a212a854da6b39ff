//! The way in to the testbed's shares: its URL for a program, a session for the library.

use std::future::Future;

use crate::Context;
use smb3_client::{Client, ClientConfig, Share};
use smb3_tests::Testbed;

/// `smb://DOMAIN;user@ADDR/share` for `tb`'s first address and user (the password goes through
/// the environment, never a URL or argv).
pub fn share_url(tb: &Testbed, share: &str) -> String {
    format!(
        "smb://{};{}@{}/{share}",
        tb.domain(),
        tb.user(),
        tb.server_addr(1)
    )
}

/// Connects to `tb`'s first address as its user with `cfg` and tree-connects `[plain]`. The
/// future owns what it needs, so it can run on the testbed's client runtime.
pub fn connect_plain(
    tb: &Testbed,
    cfg: ClientConfig,
) -> impl Future<Output = Result<(Client, Share), String>> + Send + 'static {
    let (server, creds) = (format!("{}:445", tb.server_addr(1)), tb.credentials());
    async move {
        let client = Client::connect(&server, &creds, cfg)
            .await
            .ctx(format!("connect {server}"))?;
        let share = client.share("plain").await.ctx("tree connect")?;
        Ok((client, share))
    }
}
