//! Paths of a DFS namespace that lie behind its links, for every path operation of a share.
//!
//! On a share in a DFS namespace (SMB2_SHARE_CAP_DFS, with `ClientConfig::follow_dfs`), a
//! path below a link is refused by the root with STATUS_PATH_NOT_COVERED. Windows' redirector
//! then asks for the link's referral and sends the operation to the link's target instead, so
//! that a walk, a listing or a mount crosses links without knowing they are there; every path
//! operation of [`Share`] does the same through [`Share::across_links`]:
//!
//! 1. the path is first taken through the links this share already knows (no request);
//! 2. the operation runs on the share and path that gives;
//! 3. on PATH_NOT_COVERED the link is learned ([`Share::learn_link`]: its referral, from the
//!    process's referral cache or the server, and the first of its targets that can be
//!    reached, MS-DFSC 3.1.4.2) and the operation runs again there, at most
//!    [`MAX_HOPS`] times.
//!
//! A known link is used until its referral's time to live ends (MS-DFSC 3.1.1); after that the
//! root's PATH_NOT_COVERED makes it learned again, so targets changed on the server are seen.
//! The connections to targets are kept with the share and reused: every link to one server
//! shares one session, every link to one share one tree.
//!
//! Errors of an operation that crossed a link name the caller's path, not the target's.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::referral::{self, bad, not_covered, DfsReferral, DfsTarget, MAX_HOPS};

use super::Share;

/// The most links one share keeps; in a namespace with more, the link whose referral ends
/// first is forgotten to make room, and learned again when a path below it is used.
const MAX_KNOWN: usize = 4096;

/// The links of one DFS share that paths in it have crossed.
#[derive(Default)]
pub(crate) struct Links {
    known: Mutex<Vec<KnownLink>>,
}

struct KnownLink {
    /// The link's path in the share, one lower-case entry per component (DFS paths are
    /// compared without case, MS-DFSC 3.1.4.2).
    prefix: Vec<String>,
    /// The share the link leads to.
    target: Share,
    /// The directory in `target` that stands for the link, `/`-separated; empty for its root.
    dir: String,
    /// When the referral ends (its time to live).
    until: Instant,
}

/// One link learned: the referral and the target that worked.
pub(crate) struct Learned {
    pub(crate) referral: DfsReferral,
    /// The index of the target used in `referral.targets`.
    pub(crate) used: usize,
    /// The targets tried before it, with why each failed.
    pub(crate) failed: Vec<(usize, Error)>,
    /// The share behind the link, and the path there of the path asked.
    pub(crate) share: Share,
    pub(crate) path: String,
}

fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split(['/', '\\']).filter(|p| !p.is_empty())
}

fn join(dir: &str, rest: &str) -> String {
    match (dir.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (_, true) => dir.to_string(),
        _ => format!("{dir}/{rest}"),
    }
}

/// Whether two server names (a host, with or without a port: `h`, `h:445`, `[v6]:445`) are
/// one host.
fn same_server(a: &str, b: &str) -> bool {
    host_part(a).eq_ignore_ascii_case(host_part(b))
}

fn host_part(server: &str) -> &str {
    if let Some(v6) = server.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    match server.split_once(':') {
        Some((host, port)) if !port.contains(':') => host,
        _ => server,
    }
}

impl Links {
    /// The live known link that covers the most of `path` (its components in lower case).
    fn covering<'k>(
        known: &'k [KnownLink],
        parts: &[String],
        now: Instant,
    ) -> Option<&'k KnownLink> {
        known
            .iter()
            .filter(|k| k.until > now && k.prefix.len() <= parts.len())
            .filter(|k| k.prefix.iter().zip(parts).all(|(p, part)| p == part))
            .max_by_key(|k| k.prefix.len())
    }

    /// The target share and the path there for `path`, when a live known link covers it.
    fn lookup(&self, path: &str, now: Instant) -> Option<(Share, String)> {
        let parts: Vec<&str> = components(path).collect();
        let lower: Vec<String> = parts.iter().map(|p| p.to_lowercase()).collect();
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        let link = Self::covering(&known, &lower, now)?;
        let rest = parts[link.prefix.len()..].join("/");
        Some((link.target.clone(), join(&link.dir, &rest)))
    }

    /// The path (in lower case) of the live known link that covers `path`.
    fn link_of(&self, path: &str, now: Instant) -> Option<String> {
        let lower: Vec<String> = components(path).map(str::to_lowercase).collect();
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        Self::covering(&known, &lower, now).map(|k| k.prefix.join("/"))
    }

    /// Remember that `prefix` of the share leads to `dir` of `target` until `until`.
    fn remember(&self, prefix: &str, target: Share, dir: String, until: Instant) {
        let prefix: Vec<String> = components(prefix).map(str::to_lowercase).collect();
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        known.retain(|k| k.prefix != prefix);
        if known.len() >= MAX_KNOWN {
            let now = Instant::now();
            known.retain(|k| k.until > now);
        }
        if known.len() >= MAX_KNOWN {
            // Full of live links: the one that would end first makes room.
            if let Some(first) = (0..known.len()).min_by_key(|&i| known[i].until) {
                known.swap_remove(first);
            }
        }
        known.push(KnownLink {
            prefix,
            target,
            dir,
            until,
        });
    }

    /// A connected share named `share` on `server`, among the targets already known (their
    /// links expired or not), and failing that a session already open with `server`.
    fn connected(&self, server: &str, share: &str) -> (Option<Share>, Option<Client>) {
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        let on_server = |k: &&KnownLink| same_server(&k.target.client.core.server_name, server);
        let share_there = known
            .iter()
            .filter(on_server)
            .find(|k| k.target.name().eq_ignore_ascii_case(share))
            .map(|k| k.target.clone());
        let client = known
            .iter()
            .find(on_server)
            .map(|k| k.target.client.clone());
        (share_there, client)
    }
}

impl Share {
    /// Whether paths of this share may lie behind DFS links that it follows.
    pub(crate) fn follows_links(&self) -> bool {
        self.links.is_some()
    }

    /// Whether `path` lies behind a DFS link this share has already crossed (a link is
    /// learned by the first operation below it). The file ids ([`Metadata::file_id`]) of
    /// such paths number another share's files, perhaps on another server: a program that
    /// keys files by id across a namespace must not mix them with this share's.
    ///
    /// [`Metadata::file_id`]: crate::Metadata::file_id
    pub fn is_behind_link(&self, path: &str) -> bool {
        self.links.is_some()
            && self
                .through_known_links(path)
                .is_ok_and(|(share, _)| !share.same_tree(self))
    }

    /// The link of this share (its path, in lower case) that `path` lies behind, once
    /// learned. Two paths behind different links are different places of the namespace even
    /// when they lead to one directory: a walk goes into both.
    pub(crate) fn link_of(&self, path: &str) -> Option<String> {
        self.links.as_ref()?.link_of(path, Instant::now())
    }

    /// Run `op` on the share and path that `path` of this share stands for: itself, or the
    /// target of the DFS links on the way (see the module's documentation).
    pub(crate) async fn across_links<T, Op, Fut>(&self, path: &str, op: Op) -> Result<T>
    where
        Op: Fn(Share, String) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if self.links.is_none() {
            return op(self.clone(), path.to_string()).await;
        }
        let mut learned = 0;
        loop {
            let (share, at) = self.through_known_links(path)?;
            let crossed = !Arc::ptr_eq(&share.tree, &self.tree);
            match op(share.clone(), at.clone()).await {
                Err(e) if not_covered(&e) && share.follows_links() && learned < MAX_HOPS => {
                    learned += 1;
                    share.learn_link(&at).await.map_err(|e| e.shown_at(path))?;
                }
                Err(e) if crossed => return Err(e.shown_at(path)),
                other => return other,
            }
        }
    }

    /// Run `op` with the share and path `from` leads to and the path `to` leads to there, for
    /// an operation that names two paths of one share (rename, hard link). `to` need not exist:
    /// its parent directory is taken through the links. When the two lead to different shares
    /// no server can do it: [`Error::DifferentShares`].
    pub(crate) async fn across_links_to<T, Op, Fut>(
        &self,
        from: &str,
        to: &str,
        op: Op,
    ) -> Result<T>
    where
        Op: Fn(Share, String, String) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if self.links.is_none() {
            return op(self.clone(), from.to_string(), to.to_string()).await;
        }
        let (dest, to_there) = self.where_new_name_goes(to).await?;
        let (dest, to_there, op) = (&dest, &to_there, &op);
        self.across_links(from, |s: Share, p: String| async move {
            if !s.same_tree(dest) {
                return Err(Error::DifferentShares {
                    from: from.to_string(),
                    to: to.to_string(),
                });
            }
            op(s, p, to_there.clone()).await
        })
        .await
    }

    /// `path` taken through the links known to this share and to the shares they lead to.
    /// No request is sent.
    pub(crate) fn through_known_links(&self, path: &str) -> Result<(Share, String)> {
        let now = Instant::now();
        let mut here = self.clone();
        let mut at = path.trim_matches('/').to_string();
        for _ in 0..=MAX_HOPS {
            let next = here.links.as_ref().and_then(|l| l.lookup(&at, now));
            let Some((target, there)) = next else {
                return Ok((here, at));
            };
            // A snapshot view of the root reads the same snapshot behind its links.
            here = target.with_snapshot(self.snapshot);
            at = there;
        }
        Err(bad(path, "DFS links lead in a circle"))
    }

    /// Ask for the referral of `path` (which this share refused as PATH_NOT_COVERED), reach
    /// the first of its targets that answers (the one that worked last first), and remember
    /// the link for the referral's time to live.
    pub(crate) async fn learn_link(&self, path: &str) -> Result<Learned> {
        let Some(links) = &self.links else {
            return Err(bad(path, "a DFS link on a share that follows none"));
        };
        let asked = referral::unc_form(&format!(
            "{}/{}/{}",
            self.client.core.server_name,
            self.name(),
            path
        ));
        let (referral, hint) = referral::referral_for(&self.client, &asked).await?;
        if referral.root {
            // The path lies in the root itself, yet the server said it does not: nothing to
            // follow.
            return Err(bad(&asked, "PATH_NOT_COVERED, then a root referral"));
        }
        let mut failed = Vec::new();
        for i in referral::try_order(referral.targets.len(), hint) {
            let target = &referral.targets[i];
            match self.target_share(links, target).await {
                Ok(share) => {
                    let prefix = referral::rest_after(
                        &referral.covered,
                        &format!("\\{}\\{}", self.client.core.server_name, self.name()),
                    );
                    links.remember(
                        &prefix,
                        share.clone(),
                        target.path.clone(),
                        Instant::now() + referral.ttl,
                    );
                    referral::referrals().insert(referral.clone(), i, Instant::now());
                    let path = join(&target.path, &referral.rest);
                    return Ok(Learned {
                        referral,
                        used: i,
                        failed,
                        share,
                        path,
                    });
                }
                Err(e) => {
                    tracing::info!(target = %target.unc(), error = %e, "DFS target unreachable; trying the next");
                    failed.push((i, e));
                }
            }
        }
        referral::referrals().remove(&referral.covered);
        // Every target failed: the last one's error says the most recent why.
        Err(failed
            .pop()
            .map(|(_, e)| e)
            .unwrap_or_else(|| bad(&asked, "a referral without targets")))
    }

    /// The share `target` names: a tree on this session when it is this server, else on a
    /// session with the target's server as the same user; connections already made for
    /// other links are reused.
    async fn target_share(&self, links: &Links, target: &DfsTarget) -> Result<Share> {
        let here = same_server(&target.server, &self.client.core.server_name);
        if here && target.share.eq_ignore_ascii_case(self.name()) {
            // A link to a folder of its own root: no tree to connect.
            return Ok(self.with_snapshot(None));
        }
        let (share, client) = links.connected(&target.server, &target.share);
        if let Some(share) = share {
            return Ok(share);
        }
        let client = if here {
            self.client.clone()
        } else if let Some(client) = client {
            client
        } else {
            let port = self.client.server_addr().port();
            let server = if port == 445 {
                target.server.clone()
            } else {
                format!("{}:{port}", target.server)
            };
            self.client.connect_as_same_user(&server).await?
        };
        client.share(&target.share).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_match_with_or_without_their_port() {
        assert!(same_server("10.0.0.1:445", "10.0.0.1"));
        assert!(same_server("NAS", "nas:445"));
        assert!(same_server("[fe80::1]:445", "fe80::1"));
        assert!(!same_server("nas1", "nas2"));
        assert!(!same_server("10.0.0.1", "10.0.0.10"));
    }

    #[test]
    fn paths_join_without_empty_components() {
        assert_eq!(join("", "a/b"), "a/b");
        assert_eq!(join("dir", ""), "dir");
        assert_eq!(join("dir", "a"), "dir/a");
        assert_eq!(join("", ""), "");
    }
}
