//! DFS namespaces (MS-DFSC) as a user names them: from a path to the share that holds it,
//! with every referral followed on the way.
//!
//! Every path operation of a [`Share`] in a DFS namespace already crosses links by itself
//! (the share learns each link on first use, `share::links`), so a walk, a listing or a mount
//! of a namespace's root reaches the files behind its links. What this module adds is the
//! route itself: [`follow`] and [`connect`] go from a path to the share that holds it and
//! say which referrals led there and which targets failed on the way (`smbctl dfs`), and a
//! program that opens many files below one link can work on that share directly.
//!
//! Referrals themselves, their checks and their cache are [`crate::referral`]'s.

pub use crate::referral::{DfsReferral, DfsTarget, MAX_HOPS};

use crate::client::Client;
use crate::config::ClientConfig;
use crate::error::Result;
use crate::referral::{bad, not_covered, unc_form};
use crate::share::Share;
use crate::UserCredentials;

/// One referral followed on the way to a path: what was asked, and the target that worked.
#[derive(Clone, Debug)]
pub struct DfsHop {
    /// The referral.
    pub referral: DfsReferral,
    /// The index in `referral.targets` of the target used.
    pub used: usize,
    /// The targets tried before it, each with why it failed.
    pub failed: Vec<(usize, String)>,
}

/// A share reached through zero or more DFS referrals, and the path there.
#[derive(Clone)]
pub struct DfsRoute {
    /// The share that holds the path.
    pub share: Share,
    /// The path in it, `/`-separated.
    pub path: String,
    /// The referrals followed, first to last (none when the path was not behind a link).
    pub hops: Vec<DfsHop>,
}

impl std::fmt::Debug for DfsRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DfsRoute")
            .field("server", &self.share.client().server_addr())
            .field("share", &self.share.name())
            .field("path", &self.path)
            .field("hops", &self.hops)
            .finish()
    }
}

/// Connect to `server`, open `share`, and follow DFS referrals until `path` (`/`-separated,
/// in that share) is reached: the share that holds it and the path there. A path outside
/// any link comes back on `share` itself with no hop.
///
/// Each link's targets are tried in the server's order (the one that worked last first); a
/// target on the server already connected reuses its session, another server gets a session
/// of its own as the same user with the same configuration (its Kerberos service name then
/// comes from the target's host name). A chain longer than [`MAX_HOPS`], or one that comes back to a path it has
/// already asked about, ends with [`ProtocolError::BadReferral`](crate::ProtocolError::BadReferral); when no target of a link
/// can be reached, the last target's error is returned.
pub async fn connect(
    server: &str,
    creds: &UserCredentials,
    config: ClientConfig,
    share: &str,
    path: &str,
) -> Result<DfsRoute> {
    let client = Client::connect(server, creds, config).await?;
    let share = client.share(share).await?;
    follow(share, path).await
}

/// [`connect`] from a share already connected: the share that holds `path` of `share`,
/// and the path there. On a share outside any DFS namespace, or with
/// [`ClientConfig::follow_dfs`] off, that is `share` and `path` themselves, at no cost.
pub async fn follow(share: Share, path: &str) -> Result<DfsRoute> {
    let mut here = share;
    let mut path = path.trim_matches('/').to_string();
    let mut hops: Vec<DfsHop> = Vec::new();
    loop {
        if !here.follows_links() {
            break;
        }
        match here.metadata_here(&path).await {
            Err(e) if not_covered(&e) => {}
            // Anything else, found or not, is the share's to say.
            _ => break,
        }
        if hops.len() == MAX_HOPS {
            return Err(bad(&path, "more DFS referrals than MAX_HOPS"));
        }
        let asked = unc_form(&format!(
            "{}/{}/{}",
            here.client().core.server_name,
            here.name(),
            path
        ));
        if hops
            .iter()
            .any(|h| h.referral.asked.eq_ignore_ascii_case(&asked))
        {
            return Err(bad(&asked, "DFS referrals lead in a circle"));
        }
        let learned = here.learn_link(&path).await?;
        hops.push(DfsHop {
            failed: learned
                .failed
                .into_iter()
                .map(|(i, e)| (i, e.brief().to_string()))
                .collect(),
            referral: learned.referral,
            used: learned.used,
        });
        here = learned.share;
        path = learned.path;
    }
    Ok(DfsRoute {
        share: here,
        path,
        hops,
    })
}
