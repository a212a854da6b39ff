//! From a location a person gave to the share that holds it: the share named, or, when the
//! path lies behind DFS links, the share the referrals lead to (`smb3_client::dfs`), with
//! an error line that names what failed.

use smb3_client::dfs::{self, DfsRoute};
use smb3_client::location::RemotePath;
use smb3_client::Share;

/// The share and path `path` of `share` (connected from `remote`) leads to: `share` and
/// `path` themselves unless the share is in a DFS namespace and the path lies behind a link
/// (and the session's `follow_dfs` is on), then the target the referrals lead to, reached as
/// the same user.
pub async fn route(share: &Share, remote: &RemotePath, path: &str) -> Result<DfsRoute, String> {
    dfs::follow(share.clone(), path).await.map_err(|e| {
        let at = if path.is_empty() {
            format!("//{}/{}", remote.host, remote.share)
        } else {
            format!("//{}/{}/{path}", remote.host, remote.share)
        };
        format!("{at}: {}", e.brief())
    })
}
