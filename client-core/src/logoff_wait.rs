//! What a LOGOFF waits for.
//!
//! The server ends every open of the session at LOGOFF, but a request still on its way then
//! finds no session: a CLOSE sent in the background for a dropped handle, the final reply to
//! a cancelled CHANGE_NOTIFY, anything on another channel, which the server may take after
//! the LOGOFF. Samba answers it unsigned (STATUS_USER_SESSION_DELETED), a signed session
//! must take an unsigned reply for a forgery (MS-SMB2 3.2.5.1.3), and the channel drops with
//! everything else on it. So [`Client::logoff`](crate::Client::logoff) first lets such
//! requests finish, for a bounded time ([`LOGOFF_SETTLE`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::multichannel::channel_set::ChannelSet;

/// Longest a LOGOFF waits for the session's last requests.
pub(crate) const LOGOFF_SETTLE: Duration = Duration::from_secs(2);

/// How often the wait looks again.
const LOOK_EVERY: Duration = Duration::from_millis(2);

/// Work started in the background (a CLOSE for a dropped handle) and not finished yet,
/// counted from before its task is spawned, so a LOGOFF right after sees it.
#[derive(Debug, Default)]
pub(crate) struct BackgroundWork(Arc<AtomicUsize>);

impl BackgroundWork {
    /// One more piece of work, until the returned guard is dropped (with the task that
    /// holds it, run to its end or not).
    pub(crate) fn start(&self) -> Busy {
        self.0.fetch_add(1, Ordering::AcqRel);
        Busy(self.0.clone())
    }

    /// How many now.
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// A piece of [`BackgroundWork`] under way.
pub(crate) struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Wait until no background work is left and no live channel has a request whose reply is
/// due (see `Channel::settling`), or `limit`. Returns whether it settled.
pub(crate) async fn settle(
    background: &BackgroundWork,
    channels: &ChannelSet,
    limit: Duration,
) -> bool {
    let settled = || {
        background.count() == 0
            && channels
                .active()
                .iter()
                .chain(channels.draining().iter())
                .all(|m| m.channel.is_dead() || m.channel.settling() == 0)
    };
    let deadline = tokio::time::Instant::now() + limit;
    while !settled() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_counts_until_its_guard_is_dropped() {
        let work = BackgroundWork::default();
        let a = work.start();
        let b = work.start();
        assert_eq!(work.count(), 2);
        drop(a);
        assert_eq!(work.count(), 1);
        drop(b);
        assert_eq!(work.count(), 0);
    }
}
