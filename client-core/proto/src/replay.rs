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
    /// It may already have run and running it again would differ; the reason, in words.
    Unsafe(&'static str),
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
            Command::CREATE => Replay::Unsafe("a CREATE without a CreateGuid may already have run"),
            Command::QUERY_DIRECTORY => {
                Replay::Unsafe("the server's enumeration cursor may already have moved")
            }
            Command::LOCK => Replay::Unsafe("a lock request may already have been granted"),
            Command::NEGOTIATE | Command::SESSION_SETUP => {
                Replay::Unsafe("connection setup belongs to its own connection")
            }
            Command::LOGOFF => Replay::Unsafe("the session may already be gone"),
            Command::CANCEL => Replay::Unsafe("a cancel belongs to its own connection"),
            _ => Replay::Unsafe("not known to be safe to send twice"),
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
            Replay::Unsafe("creating a new file may already have succeeded")
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
        assert!(!doc.replay().is_safe());
    }

    #[test]
    fn directory_query_is_safe_only_when_it_restarts() {
        let mut q = QueryDirectoryRequest::new(FileId::default(), "*", 65536);
        q.flags = 0;
        assert!(!q.replay().is_safe());
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
        assert!(!io.replay().is_safe());
    }
}
