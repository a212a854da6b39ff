//! Which requests may be sent again after the connection carrying them was lost.
//!
//! When a channel fails, the client cannot know whether the server executed the requests
//! that were in flight on it. MS-SMB2 3.2.7.1 lets a 3.x client send them again on another
//! channel of the session with SMB2_FLAGS_REPLAY_OPERATION and the session's new
//! ChannelSequence; the server then protects the open against the stale originals
//! (3.3.5.2.10) and recognises a replayed durable CREATE by its CreateGuid (3.3.5.9.10).
//! That makes a resend harmless only where running the request twice has the same effect as
//! running it once; this module says, per command, whether that holds, and the messages whose
//! body decides it (CREATE, QUERY_DIRECTORY, IOCTL) say so in their `RequestBody::replay`.

use crate::header::Command;

/// Whether a request whose channel was lost may be sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// Running it twice has the effect of running it once (or the server recognises the
    /// replay): send it again on another channel.
    Safe,
    /// It may already have run and running it again would differ; the rule that says so.
    Unsafe(ReplayHazard),
}

/// Why a request must not be sent a second time after its channel was lost: what running
/// it twice could do that running it once would not (MS-SMB2 3.2.7.1 leaves the choice to
/// the client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayHazard {
    /// A CREATE without a durable v2 CreateGuid: nothing lets the server recognise the
    /// replay (MS-SMB2 3.3.5.9.10 does only for a CreateGuid).
    #[error("a CREATE without a CreateGuid may already have run")]
    CreateWithoutCreateGuid,
    /// A CREATE with FILE_DELETE_ON_CLOSE: the first may already have opened (and, once
    /// closed, deleted) the file.
    #[error("a delete-on-close open may already have run")]
    DeleteOnClose,
    /// A CREATE with disposition CREATE: the first may have created the file, and the
    /// second would fail with OBJECT_NAME_COLLISION.
    #[error("creating a new file may already have succeeded")]
    CreatesNewFile,
    /// An IOCTL FSCTL_PIPE_TRANSCEIVE: an RPC call delivered twice runs twice.
    #[error("a named-pipe transaction may already have been delivered")]
    PipeTransaction,
    /// A QUERY_DIRECTORY that neither restarts nor reopens the enumeration: the server's
    /// cursor may have moved past the entries the lost reply carried.
    #[error("the server's enumeration cursor may already have moved")]
    DirectoryCursor,
    /// A LOCK: the lock may already be granted, and a second request would conflict with it.
    #[error("a lock request may already have been granted")]
    Lock,
    /// NEGOTIATE or SESSION_SETUP: they belong to the connection they were sent on.
    #[error("connection setup belongs to its own connection")]
    ConnectionSetup,
    /// LOGOFF: the session may already be gone.
    #[error("the session may already be gone")]
    Logoff,
    /// CANCEL: it names a request of its own connection.
    #[error("a cancel belongs to its own connection")]
    Cancel,
    /// A command with no rule of its own.
    #[error("not known to be safe to send twice")]
    UnknownCommand,
}

impl Replay {
    /// Whether the request may be sent again.
    pub fn is_safe(self) -> bool {
        self == Replay::Safe
    }

    /// The rule for a command whose body says nothing more.
    pub fn by_command(command: Command) -> Replay {
        match command {
            // Reads and queries change nothing; WRITE puts the same bytes at the same offset,
            // and SET_INFO sets the same value, under the ChannelSequence check (3.3.5.2.10)
            // that keeps a stale original from landing after a newer request.
            Command::READ
            | Command::WRITE
            | Command::FLUSH
            | Command::QUERY_INFO
            | Command::SET_INFO
            | Command::IOCTL
            | Command::ECHO
            | Command::TREE_CONNECT => Replay::Safe,
            // A second CLOSE or TREE_DISCONNECT of a handle already gone fails with
            // FILE_CLOSED / NETWORK_NAME_DELETED, which the caller treats as done.
            Command::CLOSE | Command::TREE_DISCONNECT => Replay::Safe,
            // A break acknowledgement the server already has is refused harmlessly.
            Command::OPLOCK_BREAK => Replay::Safe,
            // A watch changes nothing on the server: sent again, it only waits again. What a
            // reply lost with the channel would have reported is lost either way.
            Command::CHANGE_NOTIFY => Replay::Safe,
            Command::CREATE => Replay::Unsafe(ReplayHazard::CreateWithoutCreateGuid),
            Command::QUERY_DIRECTORY => Replay::Unsafe(ReplayHazard::DirectoryCursor),
            Command::LOCK => Replay::Unsafe(ReplayHazard::Lock),
            Command::NEGOTIATE | Command::SESSION_SETUP => {
                Replay::Unsafe(ReplayHazard::ConnectionSetup)
            }
            Command::LOGOFF => Replay::Unsafe(ReplayHazard::Logoff),
            Command::CANCEL => Replay::Unsafe(ReplayHazard::Cancel),
            _ => Replay::Unsafe(ReplayHazard::UnknownCommand),
        }
    }
}

/// Whether a request may still reach the server after its caller was told it was lost (and
/// replayed it, or gave up): the rule for a channel kept open after its requests were handed
/// back (the client's loss watchdog). It is [`Replay::by_command`]'s rule, for the same
/// reasons: requests on an open are refused by the server once a replay moved the open's
/// ChannelSequence past theirs (MS-SMB2 3.3.5.2.10), or repeat what the replay did; ECHO,
/// TREE_CONNECT and a second CLOSE change nothing that matters. Not so a CREATE (nothing
/// guards it: a stale OVERWRITE empties a file written since), a LOCK (the lock would be held
/// with nobody knowing), QUERY_DIRECTORY (it moves the enumeration of a handle the caller
/// goes on using), or a session's own setup and logoff.
pub fn harmless_if_late(command: Command) -> bool {
    Replay::by_command(command).is_safe()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::create::AccessMask;
    use crate::msg::create::{
        CreateContextRequest, CreateDisposition, CreateOptions, CreateRequest,
    };
    use crate::msg::ioctl::{IoctlRequest, FSCTL_PIPE_TRANSCEIVE};
    use crate::msg::query_directory::QueryDirectoryRequest;
    use crate::msg::FileId;
    use crate::msg::RequestBody;
    use bytes::Bytes;

    fn create(disposition: CreateDisposition) -> CreateRequest {
        CreateRequest::new("dir\\f.bin", AccessMask::FILE_READ_DATA, disposition)
    }

    #[test]
    fn late_delivery_is_harmless_only_for_requests_guarded_or_without_effect() {
        for c in [
            Command::READ,
            Command::WRITE,
            Command::SET_INFO,
            Command::CLOSE,
            Command::ECHO,
        ] {
            assert!(harmless_if_late(c), "{c}");
        }
        for c in [
            Command::CREATE,
            Command::LOCK,
            Command::QUERY_DIRECTORY,
            Command::SESSION_SETUP,
        ] {
            assert!(!harmless_if_late(c), "{c}");
        }
    }

    #[test]
    fn data_commands_are_safe_and_session_commands_are_not() {
        for c in [
            Command::READ,
            Command::WRITE,
            Command::FLUSH,
            Command::QUERY_INFO,
            Command::SET_INFO,
            Command::ECHO,
            Command::CLOSE,
            Command::CHANGE_NOTIFY,
        ] {
            assert_eq!(Replay::by_command(c), Replay::Safe, "{c}");
        }
        for c in [
            Command::NEGOTIATE,
            Command::SESSION_SETUP,
            Command::LOGOFF,
            Command::LOCK,
            Command::CANCEL,
            Command::CREATE,
            Command::QUERY_DIRECTORY,
        ] {
            assert!(!Replay::by_command(c).is_safe(), "{c}");
        }
    }

    #[test]
    fn create_is_safe_with_a_create_guid_or_when_it_only_opens() {
        let mut new_file = create(CreateDisposition::CREATE);
        assert_eq!(
            new_file.replay(),
            Replay::Unsafe(ReplayHazard::CreatesNewFile)
        );
        new_file
            .contexts
            .push(CreateContextRequest::DurableHandleV2 {
                timeout_ms: 0,
                flags: 0,
                create_guid: [7; 16],
            });
        assert_eq!(new_file.replay(), Replay::Safe);

        assert_eq!(create(CreateDisposition::OPEN).replay(), Replay::Safe);
        assert_eq!(
            create(CreateDisposition::OVERWRITE_IF).replay(),
            Replay::Safe
        );
        let mut doc = create(CreateDisposition::OPEN);
        doc.create_options = CreateOptions(CreateOptions::DELETE_ON_CLOSE);
        assert_eq!(doc.replay(), Replay::Unsafe(ReplayHazard::DeleteOnClose));
    }

    #[test]
    fn directory_query_is_safe_only_when_it_restarts() {
        let mut q = QueryDirectoryRequest::new(FileId::default(), "*", 65536);
        q.flags = 0;
        assert_eq!(q.replay(), Replay::Unsafe(ReplayHazard::DirectoryCursor));
        q.flags = QueryDirectoryRequest::RESTART_SCANS;
        assert!(q.replay().is_safe());
        q.flags = QueryDirectoryRequest::REOPEN | QueryDirectoryRequest::INDEX_SPECIFIED;
        assert!(q.replay().is_safe());
    }

    #[test]
    fn pipe_transactions_are_not_replayed() {
        let mut io = IoctlRequest::fsctl(
            crate::msg::ioctl::FSCTL_QUERY_NETWORK_INTERFACE_INFO,
            FileId::ANY,
            Bytes::new(),
            1024,
        );
        assert!(io.replay().is_safe());
        io.ctl_code = FSCTL_PIPE_TRANSCEIVE;
        assert_eq!(io.replay(), Replay::Unsafe(ReplayHazard::PipeTransaction));
    }
}
