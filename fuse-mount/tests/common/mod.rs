//! What the in-process tests of the mount's file system share: a session with the in-memory
//! server.

use smb3_client::{Client, ClientConfig, Share, UserCredentials};
use smb3_testserver::TestServer;

/// The share `name` of `server`, as its configured user.
pub(crate) async fn share_of(server: &TestServer, name: &str) -> Share {
    let c = server.config();
    let creds = UserCredentials {
        user: c.user.clone(),
        domain: c.domain.clone(),
        password: c.password.as_str().into(),
    };
    let client = Client::connect(&server.host(), &creds, ClientConfig::default())
        .await
        .expect("client connects");
    client.share(name).await.expect("tree connect")
}
