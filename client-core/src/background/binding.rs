//! Opening one more channel of an existing session (DESIGN §3 step 5, MS-SMB2 3.2.4.2.3.1):
//! a TCP connection from the slot's local address, NEGOTIATE with the session's ClientGuid,
//! then SESSION_SETUP with the BINDING flag, signed with the session's key.

use std::net::SocketAddr;

use tokio::sync::Semaphore;

use crate::channel::Channel;
use crate::engine::SessionCore;
use crate::error::Error;
use crate::lease::forward_unsolicited;
use crate::multichannel::planner::Slot;
use crate::negotiated::Negotiated;
use crate::session;

/// Why a channel could not be bound. None of these touch the session's other channels.
#[derive(Debug)]
pub(crate) enum BindFailure {
    /// The TCP connection (or NEGOTIATE on it) failed.
    Connect(Error),
    /// The new connection reached a different server (MS-SMB2 3.2.5.2: ServerGuid).
    OtherServer,
    /// The new connection negotiated something the session cannot be bound with.
    Mismatch(String),
    /// The server refused the SESSION_SETUP with BINDING, or its reply did not check out.
    Refused(Error),
    /// It took longer than `bind_timeout`.
    TimedOut,
}

impl BindFailure {
    /// Whether the server said no (as opposed to the path not working).
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(
            self,
            BindFailure::Refused(_) | BindFailure::OtherServer | BindFailure::Mismatch(_)
        )
    }
}

impl std::fmt::Display for BindFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindFailure::Connect(e) => write!(f, "could not connect: {e}"),
            BindFailure::OtherServer => write!(
                f,
                "refused to bind: the address answers with another ServerGuid (a different server)"
            ),
            BindFailure::Mismatch(what) => write!(f, "refused to bind: {what}"),
            BindFailure::Refused(e) => write!(f, "server refused the binding: {e}"),
            BindFailure::TimedOut => write!(f, "binding timed out"),
        }
    }
}

/// Open and bind a channel for `slot`, reaching the server on `port`.
///
/// The TCP connect may run alongside other slots' connects; the handshake (NEGOTIATE and the
/// binding SESSION_SETUP) waits for `handshake`, so binds reach the server one at a time.
/// Measured against Samba 4.17 (which hands each new connection over to the smbd process that
/// owns the session): with 16 binds of one session in flight at once, one to three of them
/// got no answer within the timeout in every run; one at a time, none in any run, and 15
/// binds took under a second. `bind_timeout` covers each phase separately, so a slot stuck
/// behind others is not timed out for their time.
pub(crate) async fn bind_channel(
    core: &SessionCore,
    slot: &Slot,
    port: u16,
    handshake: &Semaphore,
) -> Result<Channel, BindFailure> {
    let limit = core.config.bind_timeout;
    let channel = match tokio::time::timeout(limit, connect(core, slot, port)).await {
        Ok(r) => r?,
        Err(_) => return Err(BindFailure::TimedOut),
    };
    let _turn = handshake.acquire().await;
    match tokio::time::timeout(limit, handshake_on(core, channel)).await {
        Ok(r) => r,
        Err(_) => Err(BindFailure::TimedOut),
    }
}

async fn connect(core: &SessionCore, slot: &Slot, port: u16) -> Result<Channel, BindFailure> {
    let opts = core.channel_options();
    let peer = SocketAddr::new(slot.key.server, port);
    let (channel, unsolicited) = Channel::connect(peer, Some(slot.key.local), &opts)
        .await
        .map_err(BindFailure::Connect)?;
    // Breaks may arrive on any channel (MS-SMB2 3.3.4.6/3.3.4.7): one handler takes them all.
    forward_unsolicited(unsolicited, core.breaks.clone());
    Ok(channel)
}

async fn handshake_on(core: &SessionCore, channel: Channel) -> Result<Channel, BindFailure> {
    let Some(security) = core.addressing.session.security() else {
        return Err(BindFailure::Mismatch(
            "the session has no signing key (guest)".into(),
        ));
    };
    let negotiated =
        session::negotiate(&channel, &core.config, core.client_guid, &core.server_name)
            .await
            .map_err(BindFailure::Connect)?;
    check_same_server(&core.negotiated, &negotiated)?;
    session::bind_session(
        &channel,
        &negotiated,
        &core.creds,
        &core.server_name,
        &core.config,
        core.addressing.session.id(),
        &security,
    )
    .await
    .map_err(BindFailure::Refused)?;
    tracing::debug!(local = %channel.local(), server = %channel.peer(), "channel bound");
    Ok(channel)
}

/// A channel can join the session only on the same server with the same dialect, and on
/// 3.1.1 the same cipher and signing algorithm (MS-SMB2 3.3.5.5: the server fails a binding
/// with another dialect; Samba also insists on the rest).
pub(crate) fn check_same_server(session: &Negotiated, new: &Negotiated) -> Result<(), BindFailure> {
    if session.server_guid != new.server_guid {
        return Err(BindFailure::OtherServer);
    }
    if session.dialect != new.dialect {
        return Err(BindFailure::Mismatch(format!(
            "the new connection negotiated {} instead of the session's {}",
            new.dialect, session.dialect
        )));
    }
    if session.cipher != new.cipher || session.signing_algorithm != new.signing_algorithm {
        return Err(BindFailure::Mismatch(
            "the new connection negotiated another cipher or signing algorithm".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multichannel::eligibility::tests::negotiated;
    use smb3_proto::msg::negotiate::Capabilities;
    use smb3_proto::{Cipher, Dialect, SigningAlgorithm};

    #[test]
    fn only_the_same_server_with_the_same_settings_can_be_bound() {
        let mc = Capabilities::MULTI_CHANNEL;
        let session = negotiated(Dialect::Smb311, mc);
        assert!(check_same_server(&session, &negotiated(Dialect::Smb311, mc)).is_ok());

        let mut other = negotiated(Dialect::Smb311, mc);
        other.server_guid = [8; 16];
        let e = check_same_server(&session, &other).unwrap_err();
        assert!(matches!(e, BindFailure::OtherServer));
        assert!(e.is_refusal());
        assert!(e.to_string().contains("ServerGuid"));

        let e = check_same_server(&session, &negotiated(Dialect::Smb302, mc)).unwrap_err();
        assert!(
            e.to_string().contains("3.0.2") && e.to_string().contains("3.1.1"),
            "{e}"
        );

        let mut cipher = negotiated(Dialect::Smb311, mc);
        cipher.cipher = Some(Cipher::Aes256Gcm);
        assert!(check_same_server(&session, &cipher).is_err());
        let mut signing = negotiated(Dialect::Smb311, mc);
        signing.signing_algorithm = SigningAlgorithm::AesCmac;
        assert!(check_same_server(&session, &signing).is_err());

        assert!(!BindFailure::TimedOut.is_refusal());
    }
}
