//! DFS referrals (MS-DFSC): asking a server where a path of its DFS namespace really lives,
//! checking what it answers, and keeping the answer for its time to live.
//!
//! A DFS root is a share whose folders may be links to other shares, on the same server or
//! others. A path below a link cannot be opened on the root: the server answers
//! STATUS_PATH_NOT_COVERED, and the client asks it, with FSCTL_DFS_GET_REFERRALS on IPC$
//! (MS-SMB2 3.2.4.20.3), for a referral: the prefix of the path the link covers and the
//! targets it leads to, in order of preference, with a time to live (MS-DFSC 3.1.4.2, 2.2.4).
//! Everything a referral says comes from the server and decides where the client connects
//! next, so each target is checked here before anything uses it: one host name, one share
//! name, and path components that [`check_name`](crate::check_name) accepts.
//!
//! Following referrals to a share is the share's job (`share::links`, for every path
//! operation) and [`crate::dfs`]'s (for a path a user gives, with the hops shown).

mod cache;

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use smb3_proto::msg::dfs::{self, ReferralTarget, ServerType, FSCTL_DFS_GET_REFERRALS};
use smb3_proto::msg::ioctl::IoctlRequest;
use smb3_proto::msg::FileId;
use smb3_proto::{Command, NtStatus};

use crate::client::Client;
use crate::engine::Call;
use crate::error::{decode, Error, ProtocolError, Result};
use crate::names::check_name;

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
pub(crate) fn rest_after(asked: &str, covered: &str) -> String {
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
pub(crate) fn unc_form(path: &str) -> String {
    let parts: Vec<&str> = path.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
    format!("\\{}", parts.join("\\"))
}

pub(crate) fn bad(asked: &str, why: &'static str) -> Error {
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

pub(crate) fn referrals() -> std::sync::MutexGuard<'static, cache::ReferralCache> {
    REFERRALS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The referral for `asked`: from the cache while it lives (with the rest of the path
/// recomputed for `asked`, and the target that worked last), else from the server.
pub(crate) async fn referral_for(client: &Client, asked: &str) -> Result<(DfsReferral, usize)> {
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
pub(crate) fn try_order(targets: usize, hint: usize) -> impl Iterator<Item = usize> {
    let hint = if hint < targets { hint } else { 0 };
    std::iter::once(hint).chain((0..targets).filter(move |&i| i != hint))
}

/// Whether `e` says the path lies behind a DFS link.
pub(crate) fn not_covered(e: &Error) -> bool {
    matches!(
        e,
        Error::Status {
            status: NtStatus::PATH_NOT_COVERED,
            ..
        }
    )
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
