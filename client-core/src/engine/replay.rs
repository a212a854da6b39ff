//! Sending a request so that losing its channel does not lose it (MS-SMB2 3.2.7.1).
//!
//! The caller's future keeps the request, unstamped, until the final reply: that is the
//! session's table of outstanding requests. When the channel carrying it fails (a TCP error,
//! a reset, or the watchdog giving up on a silent channel), a request that is safe to send
//! twice ([`smb3_proto::replay`]) is sent again on another usable channel with
//! SMB2_FLAGS_REPLAY_OPERATION, a new MessageId from that channel, its own signature, and the
//! session's ChannelSequence moved past the one the lost copy carried, so the server can
//! refuse the stale copy should it still arrive (3.3.5.2.10). A request the server refuses as
//! stale (STATUS_FILE_NOT_AVAILABLE: that check took it for a copy a replay overtook) is
//! replayed the same way, as the rules for receiving WRITE, IOCTL and SET_INFO replies say a
//! client SHOULD (3.2.5.12, 3.2.5.14).

use std::time::Duration;

use smb3_proto::header::HeaderFlags;
use smb3_proto::replay::Replay;
use smb3_proto::{Command, NtStatus};
use tokio::sync::watch;
// Tokio's clock, so that tests can pause and advance it; the same as std's otherwise.
use tokio::time::Instant;

use crate::addressing::{Addressing, Target};
use crate::channel::{Channel, Request, Response};
use crate::error::{ConnectionLossCause, Error, Result};
use crate::failover::stats::FailoverState;
use crate::multichannel::channel_set::ChannelSet;
use crate::multichannel::state::Multichannel;

#[cfg(test)]
pub(crate) mod tests;

/// Most times one request is sent again before its error is returned.
const MAX_RESENDS: u32 = 16;
/// Pause before resending a request the server refused as stale, or one lost again right
/// after its replay; doubles up to the cap. Losses in quick succession (channels dying one
/// after another as a server goes down) then cannot use up `MAX_RESENDS` in a moment, before
/// the session has had the time to come back.
const PAUSE_MIN: Duration = Duration::from_millis(5);
const PAUSE_MAX: Duration = Duration::from_millis(500);
/// Longest a waiting request holds back, once a channel is usable, for the others to be
/// bound after the session was re-established.
const SPREAD_WAIT: Duration = Duration::from_secs(1);

/// What the replay loop borrows of a session: its channels, the ids of now, its failover
/// state, and whether and how long a request may wait for a channel to come back. Not the
/// session itself (that is `SessionCore`): a request made from a session's own machinery is
/// sent with a context that differs from the session's (see `SessionCore::send`).
pub(crate) struct ReplayContext<'a> {
    pub(crate) channels: &'a ChannelSet,
    /// Current SessionId, TreeIds and FileIds (they change when the session is re-established).
    pub(crate) addressing: &'a Addressing,
    pub(crate) failover: &'a FailoverState,
    /// SMB 3.x: ChannelSequence and the REPLAY flag exist.
    pub(crate) smb3: bool,
    /// Lost channels come back (the manager rebinds them, or the session is re-established
    /// when every one is gone): worth waiting for one.
    pub(crate) channels_return: bool,
    pub(crate) failover_wait: Duration,
    /// A request of the session's own machinery (the manager's interface queries), not a
    /// caller's.
    pub(crate) internal: bool,
    /// The manager, when it runs: says whether it is still binding the channels of a
    /// session that was just re-established.
    pub(crate) manager: Option<&'a Multichannel>,
}

/// Send `template` (about `target`) on a channel of the session and return its final reply,
/// replaying it on another channel when its own is lost and `replay` allows.
#[cfg(test)]
pub(crate) async fn call(
    ctx: &ReplayContext<'_>,
    template: Request,
    target: &Target,
    command: Command,
    replay: Replay,
) -> Result<Response> {
    let mut replies = call_chain(ctx, &[template], target, command, replay).await?;
    // One reply per request: the channel answers every member of a frame.
    replies
        .pop()
        .unwrap_or(Err(crate::error::ProtocolError::Unexpected(
            "compound reply count",
        )
        .into()))
}

/// [`call`] for a chain of related requests sent as one compound frame (MS-SMB2 3.2.4.1.4):
/// the chain is sent, and replayed, as a whole; one reply per request comes back. `replay`
/// is the chain's: safe only if every request in it is. The caller keeps `templates`: each
/// send stamps a copy, and the caller may send them again (see `engine`'s session renewal).
pub(crate) async fn call_chain(
    ctx: &ReplayContext<'_>,
    templates: &[Request],
    target: &Target,
    command: Command,
    replay: Replay,
) -> Result<Vec<Result<Response>>> {
    let failover = ctx.failover;
    let smb3 = ctx.smb3;
    let related = templates.len() > 1;
    let mut resends = 0u32;
    let mut pause = PAUSE_MIN;
    // Set at the first loss: the request gives up when no channel is usable by then.
    let mut give_up_at: Option<Instant> = None;
    // How the channel of the request's last send was lost, for the error should it give up.
    let mut last_loss: Option<ConnectionLossCause> = None;
    let charge = templates.iter().map(|r| r.charge().max(1)).sum::<u16>();
    loop {
        let channel = match ctx.channels.pick(charge, command) {
            Ok(channel) => channel,
            Err(_) => {
                // No usable channel now (one just failed and the session is coming back):
                // the request was not sent, so whatever it is it may wait for one.
                let give_up =
                    *give_up_at.get_or_insert_with(|| outage_deadline(failover, ctx.failover_wait));
                if wait_for_usable_channel(ctx, give_up).await {
                    continue;
                }
                return Err(Error::ConnectionLost {
                    command,
                    cause: ConnectionLossCause::NoChannel {
                        loss: last_loss.map(Box::new),
                    },
                });
            }
        };
        // A request that may not be sent twice returns at its first loss (below), so this
        // copy is its only one.
        let mut reqs = templates.to_vec();
        // After a reconnect the session, tree and open have new ids. No await between here
        // and the send, so the ids cannot change under the request.
        let sequence = failover.sequence();
        for req in &mut reqs {
            ctx.addressing.address(req, target)?;
            if smb3 {
                req.channel_sequence = sequence;
                if resends > 0 {
                    req.flags |= HeaderFlags::REPLAY_OPERATION;
                }
            }
        }
        let timeout = reqs.iter().map(|r| r.timeout).min().unwrap_or_default();
        let sent = channel.call_compound(reqs, related).await;
        if timed_out(&sent) {
            close_if_silent(&channel, timeout);
        }
        // The channel's loss shows as the frame's error or as its replies'; a chain is sent
        // again as a whole.
        let Some(loss) = channel_loss(&sent) else {
            failover.outage_over();
            let mut replies = sent?;
            if resends > 0 {
                failover.replay_answered(Instant::now().into_std());
                for resp in replies.iter_mut().flatten() {
                    resp.resent = true;
                }
            }
            let stale = smb3
                && matches!(replies.first(), Some(Ok(r)) if r.header.status == NtStatus::FILE_NOT_AVAILABLE);
            if stale && replay.is_safe() && resends < MAX_RESENDS {
                // An older request of ours on this open carried a newer ChannelSequence
                // or is still outstanding at the server: wait for it, then replay.
                failover.replaying();
                resends += 1;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(PAUSE_MAX);
                continue;
            }
            return Ok(replies);
        };
        let now = Instant::now();
        failover.loss_noticed(now.into_std());
        let give_up =
            *give_up_at.get_or_insert_with(|| outage_deadline(failover, ctx.failover_wait));
        if let Replay::Unsafe(hazard) = replay {
            failover.not_replayed();
            tracing::warn!(%command, %hazard, %loss, "request lost with its channel; not replayed");
            return Err(not_replayed(command, replay, Some(loss)));
        }
        if resends > 0 {
            // Lost again after a replay: give the session a moment before the next try.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(PAUSE_MAX);
        }
        let gave_up = if resends >= MAX_RESENDS {
            Some(ConnectionLossCause::TooManyResends {
                resends,
                loss: Box::new(loss.clone()),
            })
        } else if !wait_for_usable_channel(ctx, give_up).await {
            Some(ConnectionLossCause::NoChannel {
                loss: Some(Box::new(loss.clone())),
            })
        } else {
            None
        };
        last_loss = Some(loss);
        if let Some(cause) = gave_up {
            // The manager asks its own requests again at its next round; only
            // callers' requests count as not replayed.
            if !ctx.internal {
                failover.not_replayed();
                tracing::warn!(
                    %command,
                    resends,
                    %cause,
                    waited_ms = now.elapsed().as_millis() as u64,
                    any_usable = ctx.channels.any_usable(),
                    "request lost with its channel; giving up"
                );
            }
            return Err(Error::ConnectionLost { command, cause });
        }
        if smb3 {
            failover.advance_past(sequence);
        }
        failover.replaying();
        resends += 1;
        tracing::debug!(%command, resends, "replaying on another channel");
    }
}

/// When a request that finds no usable channel now gives up (see
/// [`FailoverState::outage_deadline`]), on tokio's clock.
fn outage_deadline(failover: &FailoverState, wait: Duration) -> Instant {
    Instant::from_std(failover.outage_deadline(Instant::now().into_std(), wait))
}

/// How the channel of a frame was lost, when its error or a reply's says it was.
fn channel_loss(sent: &Result<Vec<Result<Response>>>) -> Option<ConnectionLossCause> {
    match sent {
        Err(Error::ConnectionLost { cause, .. }) => Some(cause.clone()),
        Ok(replies) => replies.iter().find_map(|r| match r {
            Err(Error::ConnectionLost { cause, .. }) => Some(cause.clone()),
            _ => None,
        }),
        Err(_) => None,
    }
}

/// The error of a request lost with its channel (`loss`) that `replay` forbids sending
/// again.
fn not_replayed(command: Command, replay: Replay, loss: Option<ConnectionLossCause>) -> Error {
    let loss = loss.unwrap_or(ConnectionLossCause::ClosedByClient);
    let cause = match replay {
        Replay::Unsafe(hazard) => ConnectionLossCause::NotReplayable {
            hazard,
            loss: Box::new(loss),
        },
        Replay::Safe => loss,
    };
    Error::ConnectionLost { command, cause }
}

/// Whether a request of the frame timed out.
fn timed_out(sent: &Result<Vec<Result<Response>>>) -> bool {
    match sent {
        Err(Error::Timeout { .. }) => true,
        Ok(replies) => replies
            .iter()
            .any(|r| matches!(r, Err(Error::Timeout { .. }))),
        Err(_) => false,
    }
}

/// A request timed out after `timeout` on `channel`: if nothing at all came back on the
/// channel for that long (no reply, not even an interim one), the server was not slow, the
/// path or the server is gone. Close the channel, so its other requests are replayed and the
/// session is set up again, instead of each later request waiting out its own timeout on a
/// connection that is dead. (The watchdog blames no channel when every one stalls at once,
/// as a lone channel's stall always does: only time tells a slow server from a gone one.)
fn close_if_silent(channel: &Channel, timeout: Duration) {
    let silent = Instant::now().saturating_duration_since(channel.progress().last_reply);
    if silent >= timeout && !channel.is_dead() {
        tracing::warn!(
            peer = %channel.peer(),
            silent_s = silent.as_secs(),
            "no reply on this channel for the whole request timeout; closing it"
        );
        channel.close(ConnectionLossCause::Silent { silent });
    }
}

/// Wait until some channel is usable or `give_up` passes. A session without the manager (one
/// channel only) has nobody to bring a channel back, so it does not wait.
///
/// Woken by the events that make a channel usable (see [`UsableSignal`]), not by polling:
/// every one of them raises the set's signal, and none is derived from time, so the only
/// timers are the deadlines. The receivers are taken before the first look, so an event
/// between a look and the wait is not lost.
///
/// [`UsableSignal`]: crate::multichannel::channel_set::UsableSignal
async fn wait_for_usable_channel(ctx: &ReplayContext<'_>, give_up: Instant) -> bool {
    let mut usable_changes = ctx.channels.usable_signal().subscribe();
    let mut rebinding_changes = ctx.manager.map(Multichannel::settled_changes);
    let mut usable_since: Option<Instant> = None;
    loop {
        if ctx.channels.any_usable() {
            // The session has a channel again, however it came back (a rebind, a first bind
            // of a new slot, a re-established session): this outage is over, and the next
            // one gets a whole wait of its own.
            ctx.failover.outage_over();
            // A session re-established on one channel: every request that waited would
            // queue on it (all of a reader's window on one link) while the manager binds the
            // rest. Hold back until that binding round ends, at most `SPREAD_WAIT`, so they
            // spread.
            let since = *usable_since.get_or_insert_with(Instant::now);
            let rebinding = ctx.manager.is_some_and(Multichannel::rebinding);
            if !rebinding || since.elapsed() >= SPREAD_WAIT {
                return true;
            }
            changed_or_deadline(rebinding_changes.as_mut(), since + SPREAD_WAIT).await;
            continue;
        }
        usable_since = None;
        if !ctx.channels_return || Instant::now() >= give_up {
            return false;
        }
        changed_or_deadline(Some(&mut usable_changes), give_up).await;
    }
}

/// Until `signal` changes or `deadline` passes, whichever comes first.
async fn changed_or_deadline<T>(signal: Option<&mut watch::Receiver<T>>, deadline: Instant) {
    if let Some(signal) = signal {
        tokio::select! {
            changed = signal.changed() => {
                if changed.is_ok() {
                    return;
                }
                // The sender is gone (the session with it): only the deadline is left.
            }
            () = tokio::time::sleep_until(deadline) => return,
        }
    }
    tokio::time::sleep_until(deadline).await;
}
