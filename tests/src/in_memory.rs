//! Sessions with the in-memory SMB server (`smb3-testserver`), for the in-process tests of
//! the crates above the library (smbcp's copy engine, the mount's file system).

use smb3_client::{Client, ClientConfig, Share, UserCredentials};
use smb3_testserver::TestServer;

/// The share `name` of `server`, connected as the server's configured user.
pub async fn share_of(server: &TestServer, name: &str) -> Share {
    let c = server.config();
    let creds = UserCredentials {
        user: c.user.clone(),
        domain: c.domain.clone(),
        password: c.password.as_str().into(),
    };
    let client = Client::connect(&server.host(), &creds, ClientConfig::default())
        .await
        .expect("client connects to the in-memory server");
    client.share(name).await.expect("tree connect")
}
