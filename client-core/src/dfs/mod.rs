//! DFS namespaces (MS-DFSC): asking a server where a path of a DFS share really lives, and
//! following the answer to the share that holds it.
//!
//! A DFS root is a share whose folders may be links to other shares, on the same server or
//! others. A path below a link cannot be opened on the root: the server answers
//! STATUS_PATH_NOT_COVERED, and the client asks it, with FSCTL_DFS_GET_REFERRALS on IPC$
//! (MS-SMB2 3.2.4.20.3), for a referral: the prefix of the path the link covers and the
//! targets it leads to, in order of preference, with a time to live (MS-DFSC 3.1.4.2, 2.2.4).
//! The rest of the path continues on a target, which may itself be another DFS root.
//!
//! [`Client::dfs_referral`] asks for one referral; [`connect`] follows them from a path given
//! by a user to a connected [`Share`] and the path there, trying a link's targets in turn.
//! Everything a referral says comes from the server and decides where the client connects
//! next, so each target is checked before it is used (one host name, one share name, and
//! path components that [`check_name`](crate::check_name) accepts), and a chain of
//! referrals is bounded in length and may not come back to where it has been.

mod cache;

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use smb3_proto::msg::dfs::{self, ReferralTarget, ServerType, FSCTL_DFS_GET_REFERRALS};
use smb3_proto::msg::ioctl::IoctlRequest;
use smb3_proto::msg::FileId;
use smb3_proto::{Command, NtStatus};

use crate::client::Client;
use crate::config::ClientConfig;
use crate::engine::Call;
use crate::error::{decode, Error, ProtocolError, Result};
use crate::names::check_name;
use crate::share::Share;
use crate::UserCredentials;

/// The most referral bytes accepted (MS-SMB2 3.2.4.20.3 leaves MaxOutputResponse to the
/// client; Windows asks for 56 KiB, enough for hundreds of targets).
const MAX_REFERRAL_REPLY: u32 = 56 * 1024;

/// How many referrals one path may take before it is given up: a link may lead to another
/// namespace (Windows follows a few such hops), never around in circles.
pub const MAX_HOPS: usize = 8;

/// One target of a referral: a share on a server, and the directory in it (empty for its
/// root) that stands for the link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DfsTarget {
    /// The server, as the referral names it (a host name or an address).
    pub server: String,
    /// The share.
    pub share: String,
    /// The directory in the share, `/`-separated; empty for the share's root.
    pub path: String,
}

impl DfsTarget {
    /// The target as a UNC path: `\\server\share\dir`.
    pub fn unc(&self) -> String {
        let mut s = format!("\\\\{}\\{}", self.server, self.share);
        if !self.path.is_empty() {
            s.push('\\');
            s.push_str(&self.path.replace('/', "\\"));
        }
        s
    }
}

/// What a server said of a path of its DFS namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DfsReferral {
    /// The path asked about, `\server\share\...`.
    pub asked: String,
    /// How much of it the referral covers (the root, or the root and a link), in the same
    /// form.
    pub covered: String,
    /// What lies after the covered part, `/`-separated (empty when the referral is about the
    /// path itself).
    pub rest: String,
    /// Whether the targets are the namespace's root servers (the path lies in the root
    /// itself) rather than a link's storage.
    pub root: bool,
    /// The targets, in the server's order of preference.
    pub targets: Vec<DfsTarget>,
    /// How long the referral may be kept (MS-DFSC 3.1.1: the TimeToLive of its entries;
    /// the shortest when they differ).
    pub ttl: Duration,
}

impl Client {
    /// Ask the server for the referral of `path`, a path of one of its DFS shares in UNC
    /// form (`\\server\share\link\file` or `\server\share\...`), over its IPC$ share.
    ///
    /// A server without DFS, or a path it has no referral for, answers with an error status
    /// (NOT_FOUND, FS_DRIVER_REQUIRED), returned as [`Error::Status`].
    pub async fn dfs_referral(&self, path: &str) -> Result<DfsReferral> {
        let asked = unc_form(path);
        let core = &self.core;
        let tree = crate::background::manager::ipc_tree(core).await?;
        let req = IoctlRequest::fsctl(
            FSCTL_DFS_GET_REFERRALS,
            FileId::ANY,
            dfs::encode_request(&asked),
            MAX_REFERRAL_REPLY,
        );
        let resp = core
            .send(&req, Call::tree(tree))
            .await
            .map_err(|e| e.with_path(&asked))?;
        let out = crate::error::decode_ioctl(&req, &resp.msg)?;
        let reply = decode(Command::IOCTL, dfs::decode_response(&out.output))?;
        referral_from_reply(&asked, &reply)
    }
}

/// The components of `asked` after those of its prefix `covered`, `/`-separated. Counted
/// in components, not bytes: a cached prefix matches without case, and another case of a
/// name may take another number of bytes.
fn rest_after(asked: &str, covered: &str) -> String {
    let skip = covered.split('\\').filter(|p| !p.is_empty()).count();
    asked
        .split('\\')
        .filter(|p| !p.is_empty())
        .skip(skip)
        .collect::<Vec<_>>()
        .join("/")
}

/// `\server\share\a\b` from what a user or a referral gives: `/` or `\` separators, one or
/// two leading separators, or none.
fn unc_form(path: &str) -> String {
    let parts: Vec<&str> = path.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
    format!("\\{}", parts.join("\\"))
}

fn bad(asked: &str, why: &'static str) -> Error {
    Error::Protocol(ProtocolError::BadReferral {
        path: asked.to_string(),
        why,
    })
}

/// The referral a decoded reply gives for `asked` (in [`unc_form`]), every target checked.
fn referral_from_reply(asked: &str, reply: &dfs::ReferralResponse) -> Result<DfsReferral> {
    let units: Vec<u16> = asked.encode_utf16().collect();
    let consumed = reply.consumed_units();
    // PathConsumed must end where a component does: at the end of the path or before a `\`.
    if consumed > units.len() || (consumed < units.len() && units[consumed] != u16::from(b'\\')) {
        return Err(bad(asked, "PathConsumed does not end at a path component"));
    }
    let covered = String::from_utf16(&units[..consumed])
        .map_err(|_| bad(asked, "PathConsumed splits a character"))?;
    let rest = rest_after(asked, &covered);
    if reply.entries.is_empty() {
        return Err(bad(asked, "a referral without targets"));
    }
    let mut targets = Vec::with_capacity(reply.entries.len());
    let mut ttl = u32::MAX;
    let mut root = false;
    for entry in &reply.entries {
        let ReferralTarget::Path {
            network_address, ..
        } = &entry.target
        else {
            // Domain and DC referrals (name lists) are asked for with other requests.
            return Err(bad(asked, "a name list where targets were expected"));
        };
        targets.push(
            parse_target(network_address)
                .ok_or_else(|| bad(asked, "a target that is not \\server\\share[\\path]"))?,
        );
        ttl = ttl.min(entry.ttl_seconds);
        root |= entry.server_type == ServerType::Root;
    }
    Ok(DfsReferral {
        asked: asked.to_string(),
        covered,
        rest,
        root,
        targets,
        ttl: Duration::from_secs(u64::from(ttl)),
    })
}

/// `\server\share[\dir...]` as a [`DfsTarget`], or `None` when it is not one: a server that is
/// not a plain host name or address, a share or directory name [`check_name`] refuses.
fn parse_target(address: &str) -> Option<DfsTarget> {
    let mut parts = address.split('\\').filter(|p| !p.is_empty());
    let server = parts.next()?;
    let share = parts.next()?;
    let plain_host = server
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'));
    if !plain_host || check_name(share).is_err() {
        return None;
    }
    let mut path = Vec::new();
    for part in parts {
        check_name(part).ok()?;
        path.push(part);
    }
    Some(DfsTarget {
        server: server.to_string(),
        share: share.to_string(),
        path: path.join("/"),
    })
}

/// The process's referral cache (MS-DFSC 3.1.1 keeps one per client machine): every path
/// below a link after the first goes straight to the target that worked.
static REFERRALS: Mutex<cache::ReferralCache> = Mutex::new(cache::ReferralCache::new());

fn referrals() -> std::sync::MutexGuard<'static, cache::ReferralCache> {
    REFERRALS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The referral for `asked`: from the cache while it lives (with the rest of the path
/// recomputed for `asked`, and the target that worked last), else from the server.
async fn referral_for(client: &Client, asked: &str) -> Result<(DfsReferral, usize)> {
    if let Some(c) = referrals().lookup(asked, Instant::now()) {
        let rest = rest_after(asked, &c.referral.covered);
        let referral = DfsReferral {
            asked: asked.to_string(),
            rest,
            ..c.referral
        };
        return Ok((referral, c.hint));
    }
    Ok((client.dfs_referral(asked).await?, 0))
}

/// The order to try a referral's targets in: the hinted one first, then the others in the
/// server's order.
fn try_order(targets: usize, hint: usize) -> impl Iterator<Item = usize> {
    let hint = if hint < targets { hint } else { 0 };
    std::iter::once(hint).chain((0..targets).filter(move |&i| i != hint))
}

/// Whether `e` says the path lies behind a DFS link.
fn not_covered(e: &Error) -> bool {
    matches!(
        e,
        Error::Status {
            status: NtStatus::PATH_NOT_COVERED,
            ..
        }
    )
}

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
/// Each link's targets are tried in the server's order; a target on the server already
/// connected reuses its session, another server gets a session of its own with the same
/// credentials and configuration (its Kerberos service name then comes from the target's
/// host name). A chain longer than [`MAX_HOPS`], or one that comes back to a path it has
/// already asked about, ends with [`ProtocolError::BadReferral`]; when no target of a link
/// can be reached, the last target's error is returned.
pub async fn connect(
    server: &str,
    creds: &UserCredentials,
    config: ClientConfig,
    share: &str,
    path: &str,
) -> Result<DfsRoute> {
    let client = Client::connect(server, creds, config.clone()).await?;
    let share = client.share(share).await?;
    follow(share, creds, &config, path).await
}

/// [`connect`] from a share already connected: the share that holds `path` of `share`,
/// and the path there.
pub async fn follow(
    share: Share,
    creds: &UserCredentials,
    config: &ClientConfig,
    path: &str,
) -> Result<DfsRoute> {
    let mut here = share;
    let mut path = path.trim_matches('/').to_string();
    let mut hops: Vec<DfsHop> = Vec::new();
    loop {
        // Only a share in a DFS namespace can have links: any other costs nothing here.
        if !(here.is_dfs() && config.follow_dfs) {
            return Ok(DfsRoute {
                share: here,
                path,
                hops,
            });
        }
        match here.metadata(&path).await {
            Err(e) if not_covered(&e) => {}
            // Anything else, found or not, is the share's to say.
            _ => {
                return Ok(DfsRoute {
                    share: here,
                    path,
                    hops,
                })
            }
        }
        if hops.len() == MAX_HOPS {
            return Err(bad(&path, "more DFS referrals than MAX_HOPS"));
        }
        let client = here.client().clone();
        let asked = unc_form(&format!(
            "{}/{}/{}",
            client.core.server_name,
            here.name(),
            path
        ));
        if hops
            .iter()
            .any(|h| h.referral.asked.eq_ignore_ascii_case(&asked))
        {
            return Err(bad(&asked, "DFS referrals lead in a circle"));
        }
        let (referral, hint) = referral_for(&client, &asked).await?;
        if referral.root {
            // The path lies in the root itself, yet the server said it does not: nothing to
            // follow.
            return Err(bad(&asked, "PATH_NOT_COVERED, then a root referral"));
        }
        let mut failed = Vec::new();
        let mut reached = None;
        for i in try_order(referral.targets.len(), hint) {
            let target = &referral.targets[i];
            match open_target(&client, creds, config, target).await {
                Ok(share) => {
                    reached = Some((i, share));
                    break;
                }
                Err(e) => {
                    tracing::info!(target = %target.unc(), error = %e, "DFS target unreachable; trying the next");
                    failed.push((i, e));
                }
            }
        }
        let Some((used, share)) = reached else {
            referrals().remove(&referral.covered);
            // Every target failed: the last one's error says the most recent why.
            return Err(failed
                .pop()
                .map(|(_, e)| e)
                .unwrap_or_else(|| bad(&asked, "a referral without targets")));
        };
        let target = &referral.targets[used];
        path = [target.path.as_str(), referral.rest.as_str()]
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("/");
        referrals().insert(referral.clone(), used, Instant::now());
        hops.push(DfsHop {
            failed: failed
                .into_iter()
                .map(|(i, e)| (i, e.brief().to_string()))
                .collect(),
            referral,
            used,
        });
        here = share;
    }
}

/// The share of `target`: on `client`'s session when it is the same server, else on a new
/// session with the same credentials.
async fn open_target(
    client: &Client,
    creds: &UserCredentials,
    config: &ClientConfig,
    target: &DfsTarget,
) -> Result<Share> {
    if target.server.eq_ignore_ascii_case(&client.core.server_name) {
        return client.share(&target.share).await;
    }
    let mut config = config.clone();
    // The service name is the target's own (cifs/<target>), not the first server's.
    config.kerberos_service_host = None;
    let port = client.server_addr().port();
    let server = if port == 445 {
        target.server.clone()
    } else {
        format!("{}:{port}", target.server)
    };
    let other = Client::connect(&server, creds, config).await?;
    other.share(&target.share).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb3_proto::msg::dfs::{ReferralEntry, ReferralResponse, STORAGE_SERVERS};

    fn reply(consumed: &str, targets: &[&str], ttl: u32) -> ReferralResponse {
        ReferralResponse {
            path_consumed: (consumed.encode_utf16().count() * 2) as u16,
            header_flags: STORAGE_SERVERS,
            entries: targets
                .iter()
                .map(|t| ReferralEntry {
                    version: 3,
                    server_type: ServerType::NonRoot,
                    flags: 0,
                    ttl_seconds: ttl,
                    target: ReferralTarget::Path {
                        dfs_path: consumed.into(),
                        dfs_alternate_path: consumed.into(),
                        network_address: (*t).into(),
                    },
                })
                .collect(),
        }
    }

    #[test]
    fn paths_take_the_unc_form() {
        assert_eq!(unc_form("//h/s/a/b/"), "\\h\\s\\a\\b");
        assert_eq!(unc_form("\\\\h\\s"), "\\h\\s");
        assert_eq!(unc_form("h/s"), "\\h\\s");
    }

    #[test]
    fn a_link_referral_splits_the_path_and_checks_its_targets() {
        let asked = "\\h\\dfs\\link\\a\\b.txt";
        let r = referral_from_reply(
            asked,
            &reply("\\h\\dfs\\link", &["\\s1\\data\\dir", "\\s2\\data"], 600),
        )
        .unwrap();
        assert_eq!(r.covered, "\\h\\dfs\\link");
        assert_eq!(r.rest, "a/b.txt");
        assert!(!r.root);
        assert_eq!(r.ttl, Duration::from_secs(600));
        assert_eq!(
            r.targets[0],
            DfsTarget {
                server: "s1".into(),
                share: "data".into(),
                path: "dir".into()
            }
        );
        assert_eq!(r.targets[1].unc(), "\\\\s2\\data");
    }

    #[test]
    fn hostile_referrals_are_refused() {
        let asked = "\\h\\dfs\\link\\a";
        // PathConsumed beyond the path, or in the middle of a component.
        assert!(
            referral_from_reply(asked, &reply("\\h\\dfs\\link\\a\\bbbbbbb", &["\\s\\d"], 1))
                .is_err()
        );
        assert!(referral_from_reply(asked, &reply("\\h\\dfs\\li", &["\\s\\d"], 1)).is_err());
        // Targets that would lead anywhere but a share and a directory in it.
        for target in [
            "\\s",
            "",
            "\\s\\..",
            "\\s\\d\\..\\x",
            "\\s p\\d",
            "\\s\\d\\a\0b",
            "\\s/x\\d",
        ] {
            assert!(
                referral_from_reply(asked, &reply("\\h\\dfs\\link", &[target], 1)).is_err(),
                "{target:?}"
            );
        }
        // No target at all.
        assert!(referral_from_reply(asked, &reply("\\h\\dfs\\link", &[], 1)).is_err());
    }
}
