//! The referral cache of MS-DFSC 3.1.1: each referral kept for its TimeToLive under the
//! path prefix it covers, with the target that last worked (the target hint), so that every
//! path below a link after the first costs no referral request, a target that failed is not
//! tried first again, and a link whose targets change on the server is seen once its
//! referral has expired (and not before).
//!
//! Pure state: the caller passes the time, so expiry is tested with a clock of its own.

use std::collections::BTreeMap;
use std::time::Instant;

use super::DfsReferral;

/// A cached referral.
#[derive(Clone, Debug)]
pub(crate) struct Cached {
    /// The referral as the server gave it.
    pub(crate) referral: DfsReferral,
    /// The target to try first: the one that worked last.
    pub(crate) hint: usize,
    expires: Instant,
}

/// Referrals by the prefix they cover, compared without case (DFS paths are not
/// case-sensitive, MS-DFSC 3.1.4.2).
#[derive(Debug)]
pub(crate) struct ReferralCache {
    by_prefix: BTreeMap<String, Cached>,
}

/// The most referrals kept: a namespace with more links than this costs a referral request
/// per link visited again, nothing more.
const MAX_ENTRIES: usize = 4096;

fn key(prefix: &str) -> String {
    prefix.to_lowercase()
}

impl ReferralCache {
    /// An empty cache (a `const fn`, for the process-wide one).
    pub(crate) const fn new() -> ReferralCache {
        ReferralCache {
            by_prefix: BTreeMap::new(),
        }
    }

    /// The live referral whose covered prefix is the longest one of `path` (in the form
    /// `\server\share\...`), component by component; expired entries are dropped on the way.
    pub(crate) fn lookup(&mut self, path: &str, now: Instant) -> Option<Cached> {
        self.by_prefix.retain(|_, c| c.expires > now);
        let path = key(path);
        let mut end = path.len();
        loop {
            if let Some(c) = self.by_prefix.get(&path[..end]) {
                return Some(c.clone());
            }
            end = path[..end].rfind('\\').filter(|&i| i > 0)?;
        }
    }

    /// Keep `referral` for its time to live, with `hint` the target that worked. A referral
    /// with no time to live is not kept.
    pub(crate) fn insert(&mut self, referral: DfsReferral, hint: usize, now: Instant) {
        if referral.ttl.is_zero() {
            return;
        }
        if self.by_prefix.len() >= MAX_ENTRIES {
            self.by_prefix.retain(|_, c| c.expires > now);
            if self.by_prefix.len() >= MAX_ENTRIES {
                return;
            }
        }
        let expires = now + referral.ttl;
        self.by_prefix.insert(
            key(&referral.covered),
            Cached {
                referral,
                hint,
                expires,
            },
        );
    }

    /// Forget the referral covering exactly `prefix` (all its targets failed, say).
    pub(crate) fn remove(&mut self, prefix: &str) {
        self.by_prefix.remove(&key(prefix));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfs::DfsTarget;
    use std::time::Duration;

    fn referral(covered: &str, ttl: u64) -> DfsReferral {
        DfsReferral {
            asked: covered.into(),
            covered: covered.into(),
            rest: String::new(),
            root: false,
            targets: vec![DfsTarget {
                server: "s".into(),
                share: "d".into(),
                path: String::new(),
            }],
            ttl: Duration::from_secs(ttl),
        }
    }

    #[test]
    fn the_longest_live_prefix_answers_until_it_expires() {
        let t0 = Instant::now();
        let mut c = ReferralCache::new();
        c.insert(referral("\\h\\dfs\\link", 600), 0, t0);
        c.insert(referral("\\h\\dfs\\link\\deeper", 60), 0, t0);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let found =
            |c: &mut ReferralCache, p: &str, s| c.lookup(p, at(s)).map(|x| x.referral.covered);
        assert_eq!(
            found(&mut c, "\\H\\DFS\\Link\\a\\b", 1).as_deref(),
            Some("\\h\\dfs\\link")
        );
        assert_eq!(
            found(&mut c, "\\h\\dfs\\link\\deeper\\x", 1).as_deref(),
            Some("\\h\\dfs\\link\\deeper")
        );
        // A name that only starts like the link is another name.
        assert_eq!(found(&mut c, "\\h\\dfs\\linked\\x", 1), None);
        assert_eq!(found(&mut c, "\\h\\dfs", 1), None);
        // The deeper one expires first; then the link's own.
        assert_eq!(
            found(&mut c, "\\h\\dfs\\link\\deeper\\x", 61).as_deref(),
            Some("\\h\\dfs\\link")
        );
        assert_eq!(found(&mut c, "\\h\\dfs\\link\\a", 600), None);
    }

    #[test]
    fn hints_are_kept_and_zero_ttls_are_not() {
        let t0 = Instant::now();
        let mut c = ReferralCache::new();
        c.insert(referral("\\h\\r\\l", 600), 1, t0);
        assert_eq!(c.lookup("\\h\\r\\l\\f", t0).unwrap().hint, 1);
        c.remove("\\H\\r\\L");
        assert!(c.lookup("\\h\\r\\l\\f", t0).is_none());
        c.insert(referral("\\h\\r\\z", 0), 0, t0);
        assert!(c.lookup("\\h\\r\\z", t0).is_none());
    }
}
