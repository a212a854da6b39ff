//! A session with the testbed's `[plain]` share, as the in-process measurements open one.

use smb3_client::{Client, ClientConfig, Share};
use smb3_tests::Testbed;

/// Where and as whom to connect: the testbed's first server address and its user.
#[derive(Debug, Clone)]
pub struct Login {
    server: String,
    creds: smb3_client::UserCredentials,
}

impl Login {
    /// The testbed's first address (port 445) and its credentials.
    pub fn to(tb: &Testbed) -> Login {
        Login {
            server: format!("{}:445", tb.server_addr(1)),
            creds: tb.credentials(),
        }
    }

    /// Connect with `cfg` and tree-connect `[plain]`.
    pub async fn plain_share(&self, cfg: ClientConfig) -> Result<(Client, Share), String> {
        let client = Client::connect(&self.server, &self.creds, cfg)
            .await
            .map_err(|e| format!("connect {}: {e}", self.server))?;
        let share = client
            .share("plain")
            .await
            .map_err(|e| format!("tree connect: {e}"))?;
        Ok((client, share))
    }
}
