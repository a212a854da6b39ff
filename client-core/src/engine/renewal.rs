//! A session whose authentication expired, authenticated again in place.
//!
//! A server ends a Kerberos-authenticated session's authority when the ticket it was set up
//! with expires, and from then on answers most requests with STATUS_NETWORK_SESSION_EXPIRED
//! without running them (MS-SMB2 3.3.5.2.9; LOGOFF, CLOSE, LOCK, CANCEL and ECHO still run).
//! The client then authenticates the session again on one of its connections and sends the
//! failed request once more (MS-SMB2 3.2.5.1, "Handling Session Expiration"; 3.2.4.2.3.1).
//! Keys, channels, trees, opens and leases stay: the caller sees nothing but a slower request.
//!
//! When the reauthentication fails (most often: the cache holds no valid ticket any more,
//! which fails here before anything is sent), the request fails with that error. The
//! specification would also end the session; it is kept instead, so that the user can run
//! `kinit` and the next request, which meets the expiry again, renews it with the new ticket
//! and goes on with every open file, as a mount or a long backup needs.
//!
//! One reauthentication at a time serves every request that met the expiry: each remembers
//! the [`Renewal::generation`] it was sent under, and one that finds the generation moved on
//! is simply sent again. While a reauthentication runs new requests wait for it, as the
//! specification asks ("the application SHOULD NOT issue new requests until the
//! reauthentication succeeds"), and because a server answers some requests of a session it is
//! reauthenticating with an error of its own choosing (3.3.5.2.9; Samba gives CREATE,
//! QUERY_INFO, SET_INFO and TREE_CONNECT STATUS_INVALID_HANDLE without running them): such a
//! reply to a request that overlapped a reauthentication is sent again too.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use smb3_proto::{Command, NtStatus};
use tokio::sync::{Mutex, Notify};

use crate::channel::Response;
use crate::error::Result;

/// Times one request is sent again for an expired session before its reply is returned as
/// it is: a server that keeps answering "expired" right after a successful reauthentication
/// is not going to change its mind.
pub(crate) const MAX_RENEWALS_PER_REQUEST: u32 = 2;

/// The session's reauthentications: at most one under way, and how many completed.
#[derive(Default)]
pub(crate) struct Renewal {
    /// Held while a reauthentication runs.
    running: Mutex<()>,
    /// Reauthentications completed.
    generation: AtomicU64,
    /// Reauthentications that failed (the caller got the error).
    failures: AtomicU64,
    /// A reauthentication is under way: new requests wait for it.
    under_way: AtomicBool,
    /// Raised when one ends, however it ended.
    ended: Notify,
}

/// What a reply says about the session's authentication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An answer like any other (success or a failure of the request itself).
    Answered,
    /// The server says the session's authentication expired: nothing in the frame ran.
    Expired,
    /// Refused because a reauthentication was under way at the server when it arrived.
    RefusedDuringRenewal,
}

impl Renewal {
    /// Completed reauthentications so far: a request notes it before it is sent.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Completed and failed reauthentications, for the session's counters.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.generation(), self.failures.load(Ordering::Relaxed))
    }

    /// Wait while a reauthentication is under way (returns at once otherwise: one atomic
    /// load on the request path).
    pub(crate) async fn settled(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Listen before looking, so an end between the look and the wait is not missed.
            ended.as_mut().enable();
            if !self.under_way.load(Ordering::Acquire) {
                return;
            }
            ended.await;
        }
    }

    /// What `replies` (to requests sent under generation `sent_under`) say. A request that
    /// the server refuses only while it reauthenticates counts as refused for that reason
    /// when a reauthentication ran, or is running, since it was sent.
    pub(crate) fn judge(&self, replies: &[Result<Response>], sent_under: u64) -> Verdict {
        let statuses = replies
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(|r| (r.header.command, r.header.status));
        let mut verdict = Verdict::Answered;
        for (command, status) in statuses {
            if status == NtStatus::NETWORK_SESSION_EXPIRED {
                return Verdict::Expired;
            }
            if status == NtStatus::INVALID_HANDLE
                && refused_while_reauthenticating(command)
                && self.overlapped(sent_under)
            {
                verdict = Verdict::RefusedDuringRenewal;
            }
        }
        verdict
    }

    /// Whether a reauthentication completed since `generation`, or is running now.
    fn overlapped(&self, generation: u64) -> bool {
        self.under_way.load(Ordering::Acquire) || self.generation() != generation
    }

    /// Reauthenticate (by `reauthenticate`) unless another request already did since
    /// generation `seen`; requests that meet the expiry meanwhile wait for this one.
    pub(crate) async fn renew<F>(&self, seen: u64, reauthenticate: F) -> Result<()>
    where
        F: std::future::Future<Output = Result<()>>,
    {
        let _running = self.running.lock().await;
        if self.generation() != seen {
            return Ok(());
        }
        self.under_way.store(true, Ordering::Release);
        let began = std::time::Instant::now();
        let result = reauthenticate.await;
        match &result {
            Ok(()) => {
                self.generation.fetch_add(1, Ordering::AcqRel);
                tracing::info!(
                    took_ms = began.elapsed().as_millis() as u64,
                    "the session's authentication was renewed"
                );
            }
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "the session's authentication expired and could not be renewed");
            }
        }
        self.under_way.store(false, Ordering::Release);
        self.ended.notify_waiters();
        result
    }
}

/// Requests a server may refuse, unrun, while it reauthenticates their session (Samba: the
/// ones that look a session's user up afresh).
fn refused_while_reauthenticating(command: Command) -> bool {
    matches!(
        command,
        Command::CREATE | Command::QUERY_INFO | Command::SET_INFO | Command::TREE_CONNECT
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn one_reauthentication_serves_every_request_that_met_the_expiry() {
        let renewal = Arc::new(Renewal::default());
        let runs = Arc::new(AtomicU64::new(0));
        let seen = renewal.generation();
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (renewal, runs) = (renewal.clone(), runs.clone());
            tasks.push(tokio::spawn(async move {
                renewal
                    .renew(seen, async {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        Ok(())
                    })
                    .await
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(renewal.generation(), seen + 1);
    }

    #[tokio::test]
    async fn a_failed_reauthentication_is_tried_again_by_the_next_request() {
        let renewal = Renewal::default();
        let failed = renewal
            .renew(0, async {
                Err(crate::error::Error::ApiMisuse("no ticket"))
            })
            .await;
        assert!(failed.is_err());
        assert_eq!(renewal.counts(), (0, 1));
        let mut ran = false;
        renewal
            .renew(0, async {
                ran = true;
                Ok(())
            })
            .await
            .unwrap();
        assert!(ran);
        assert_eq!(renewal.counts(), (1, 1));
    }

    #[tokio::test]
    async fn requests_wait_while_a_reauthentication_runs() {
        let renewal = Arc::new(Renewal::default());
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let running = {
            let renewal = renewal.clone();
            tokio::spawn(async move {
                renewal
                    .renew(0, async {
                        let _ = released.await;
                        Ok(())
                    })
                    .await
            })
        };
        while !renewal.under_way.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
        let waiter = {
            let renewal = renewal.clone();
            tokio::spawn(async move { renewal.settled().await })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !waiter.is_finished(),
            "a request went ahead mid-reauthentication"
        );
        release.send(()).unwrap();
        running.await.unwrap().unwrap();
        waiter.await.unwrap();
    }
}
