//! Why a request's connection was lost (the cause carried by [`Error::ConnectionLost`]):
//! how the channel ended, or why the request was not sent again on another.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use smb3_proto::replay::ReplayHazard;
use smb3_proto::Command;

use super::Error;

/// Why the connection carrying a request was lost, or, when the session could have sent it
/// again on another channel, why it did not.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConnectionLossCause {
    /// The server closed the TCP connection.
    ClosedByServer,
    /// Reading from the socket failed (reset by the peer, host unreachable, ...).
    ReadFailed {
        /// The operating system's error.
        source: Arc<io::Error>,
    },
    /// Writing to the socket failed (reset by the peer, broken pipe, ...).
    WriteFailed {
        /// The operating system's error.
        source: Arc<io::Error>,
    },
    /// The server sent something the client cannot accept (a bad signature, a malformed
    /// frame, a reply to no request): nothing more from the connection was trusted.
    ProtocolViolation {
        /// What the server did ([`Error::Protocol`] mostly).
        source: Arc<Error>,
    },
    /// The client's loss watchdog suspected the channel (`sign`) and gave its requests back
    /// for replay on other channels, while it probes the channel with an ECHO.
    Suspected {
        /// What made the watchdog suspect it.
        sign: LossSign,
    },
    /// The watchdog suspected the channel and closed it at once instead of probing it: it
    /// held a request that must not reach the server late (see
    /// [`ReplayHazard`](smb3_proto::replay::ReplayHazard)).
    SuspectedHoldingUnsafe {
        /// What made the watchdog suspect it.
        sign: LossSign,
        /// The command it held.
        held: Command,
    },
    /// The watchdog declared the channel dead: its ECHO probe got no answer in time.
    Unresponsive {
        /// What made the watchdog suspect it; none when the probe was an idle keepalive.
        sign: Option<LossSign>,
        /// How long the probe waited.
        probe_timeout: Duration,
    },
    /// A request timed out and nothing at all came back on its channel for that long: the
    /// path or the server is gone, so the channel was closed.
    Silent {
        /// How long the channel was silent.
        silent: Duration,
    },
    /// The client closed the connection (the session ended, or the channel was dropped).
    ClosedByClient,
    /// Encrypting a frame failed (it cannot with valid keys), so the client closed the
    /// connection.
    SealingFailed,
    /// A request was larger than a transport frame (16 MiB), so the client closed the
    /// connection, whose byte stream it could no longer frame.
    OversizedRequest,
    /// The request was lost with its channel and was not sent again: running it twice
    /// could differ from running it once.
    NotReplayable {
        /// The rule that forbids a second send.
        hazard: ReplayHazard,
        /// How its channel was lost.
        loss: Box<ConnectionLossCause>,
    },
    /// The request was lost with its channel every time it was sent, up to the limit.
    TooManyResends {
        /// How many times it was sent again.
        resends: u32,
        /// How its last channel was lost.
        loss: Box<ConnectionLossCause>,
    },
    /// No usable channel came back in time (the session could not be re-established, or
    /// the session has no one to bring a channel back).
    NoChannel {
        /// How the request's channel was lost, when the request had been sent.
        loss: Option<Box<ConnectionLossCause>>,
    },
}

/// What makes the loss watchdog suspect a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossSign {
    /// Its local network interface lost carrier.
    LinkDown,
    /// Requests outstanding and no reply for this long while other channels got replies.
    NoProgress(Duration),
}

impl fmt::Display for LossSign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LossSign::LinkDown => f.write_str("its network interface lost carrier"),
            LossSign::NoProgress(d) => write!(
                f,
                "no reply for {} ms while other channels got replies",
                d.as_millis()
            ),
        }
    }
}

impl fmt::Display for ConnectionLossCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectionLossCause::ClosedByServer => f.write_str("the server closed the connection"),
            ConnectionLossCause::ReadFailed { source } => write!(f, "read failed: {source}"),
            ConnectionLossCause::WriteFailed { source } => write!(f, "write failed: {source}"),
            ConnectionLossCause::ProtocolViolation { source } => write!(f, "{source}"),
            ConnectionLossCause::Suspected { sign } => {
                write!(f, "suspected lost ({sign}); handed back for replay")
            }
            ConnectionLossCause::SuspectedHoldingUnsafe { sign, held } => {
                write!(f, "lost: {sign}; closed at once, it held a {held}")
            }
            ConnectionLossCause::Unresponsive {
                sign: Some(sign),
                probe_timeout,
            } => write!(
                f,
                "lost: {sign}, and no answer to ECHO in {} ms",
                probe_timeout.as_millis()
            ),
            ConnectionLossCause::Unresponsive {
                sign: None,
                probe_timeout,
            } => write!(
                f,
                "lost: idle keepalive ECHO unanswered in {} ms",
                probe_timeout.as_millis()
            ),
            ConnectionLossCause::Silent { silent } => write!(
                f,
                "no reply for {} s (the request timeout): taken for dead",
                silent.as_secs()
            ),
            ConnectionLossCause::ClosedByClient => f.write_str("channel closed by the client"),
            ConnectionLossCause::SealingFailed => f.write_str("sealing a frame failed"),
            ConnectionLossCause::OversizedRequest => {
                f.write_str("request larger than a transport frame")
            }
            ConnectionLossCause::NotReplayable { hazard, loss } => {
                write!(f, "{loss}; not sent again: {hazard}")
            }
            ConnectionLossCause::TooManyResends { resends, loss } => {
                write!(
                    f,
                    "{loss}; lost again each of the {resends} times it was sent again"
                )
            }
            ConnectionLossCause::NoChannel { loss: Some(loss) } => {
                write!(f, "{loss}; no channel came back in time")
            }
            ConnectionLossCause::NoChannel { loss: None } => {
                f.write_str("no channel to the server, and none came back in time")
            }
        }
    }
}

impl ConnectionLossCause {
    /// How the channel itself was lost, behind what the replay loop added.
    pub fn channel_loss(&self) -> &ConnectionLossCause {
        match self {
            ConnectionLossCause::NotReplayable { loss, .. }
            | ConnectionLossCause::TooManyResends { loss, .. }
            | ConnectionLossCause::NoChannel { loss: Some(loss) } => loss.channel_loss(),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_not_replayed_says_how_its_channel_was_lost_and_which_rule_held_it() {
        let cause = ConnectionLossCause::NotReplayable {
            hazard: ReplayHazard::CreatesNewFile,
            loss: Box::new(ConnectionLossCause::ClosedByServer),
        };
        let s = cause.to_string();
        assert!(s.starts_with("the server closed the connection"), "{s}");
        assert!(s.contains("creating a new file"), "{s}");
        assert!(matches!(
            cause.channel_loss(),
            ConnectionLossCause::ClosedByServer
        ));
    }
}
