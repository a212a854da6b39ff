//! Why an open did not come back after the session lost every connection (the cause
//! carried by [`Error::HandleLost`]).

use std::fmt;
use std::sync::Arc;

use smb3_proto::NtStatus;

use super::Error;

/// Why an open could not be brought back when the session was re-established: every
/// request on it fails with [`Error::HandleLost`] carrying this.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum HandleLossCause {
    /// The server refused to connect the open's share again, so none of its opens came
    /// back.
    ShareNotReconnected {
        /// The server's answer to TREE_CONNECT.
        status: NtStatus,
    },
    /// The reclaim request failed without the server answering about the open (a malformed
    /// or badly signed reply, a timeout).
    ReclaimFailed {
        /// What went wrong.
        source: Arc<Error>,
    },
    /// The server did not give the open back, and opening the file again by path did not
    /// give back the same file either.
    NotReclaimed {
        /// Why the reclaim was refused.
        refusal: ReclaimRefusal,
        /// Why opening the file again failed.
        reopen: ReopenFailure,
    },
}

/// Why the server did not give a durable open back (MS-SMB2 3.2.4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReclaimRefusal {
    /// The server had not made the open durable: it kept nothing to reclaim.
    NotDurable,
    /// STATUS_OBJECT_NAME_NOT_FOUND: the server no longer has the open (its durable
    /// timeout passed, or the server restarted and forgot it).
    Expired,
    /// The server refused the reclaim with another status.
    Refused {
        /// Its answer.
        status: NtStatus,
    },
    /// The server answered the reclaim with another open than ours: only the volatile half
    /// of the FileId may change on a reconnect (MS-SMB2 3.3.5.9.12, 2.2.14.1).
    AnotherOpen {
        /// The persistent FileId of our open.
        ours: u64,
        /// The persistent FileId the server answered with.
        theirs: u64,
    },
}

/// Why opening the file again by path, after a refused reclaim, did not save the open.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ReopenFailure {
    /// The CREATE failed (the server refused it, or its reply was unusable).
    Failed {
        /// The error.
        source: Arc<Error>,
    },
    /// A file stands at the path, but it is not the one that was open.
    AnotherFile(FileChange),
}

/// What shows that the file now at a path is not the one opened there before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileChange {
    /// Its on-disk id (MS-SMB2 2.2.14.2.9 QFid) changed.
    OnDiskId,
    /// Its creation time changed.
    CreationTime,
    /// The server gave neither fact, so nothing proves it is the same file.
    Unprovable,
}

impl fmt::Display for HandleLossCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandleLossCause::ShareNotReconnected { status } => {
                write!(f, "its share could not be reconnected: {status}")
            }
            HandleLossCause::ReclaimFailed { source } => {
                write!(f, "reclaiming it failed: {source}")
            }
            HandleLossCause::NotReclaimed { refusal, reopen } => {
                write!(f, "{refusal}; opening it again by path: {reopen}")
            }
        }
    }
}

impl fmt::Display for ReclaimRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReclaimRefusal::NotDurable => f.write_str("the server had not made the open durable"),
            ReclaimRefusal::Expired => write!(
                f,
                "the server no longer has it (its durable timeout passed, or the server restarted) ({})",
                NtStatus::OBJECT_NAME_NOT_FOUND
            ),
            ReclaimRefusal::Refused { status } if *status == NtStatus::ACCESS_DENIED => {
                write!(f, "the server refused it to this user ({status})")
            }
            ReclaimRefusal::Refused { status } => {
                write!(f, "the server refused to reclaim it ({status})")
            }
            ReclaimRefusal::AnotherOpen { ours, theirs } => write!(
                f,
                "the server answered the reclaim with another open (persistent FileId {theirs:#x}, ours {ours:#x})"
            ),
        }
    }
}

impl fmt::Display for ReopenFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReopenFailure::Failed { source } => write!(f, "{source}"),
            ReopenFailure::AnotherFile(why) => {
                write!(f, "the file now at its path is another one ({why})")
            }
        }
    }
}

impl fmt::Display for FileChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileChange::OnDiskId => "its on-disk id changed",
            FileChange::CreationTime => "its creation time changed",
            FileChange::Unprovable => "the server gave nothing to prove it is the same file",
        })
    }
}

impl ReclaimRefusal {
    /// The refusal a reclaim answered with `status` means.
    pub(crate) fn from_status(status: NtStatus) -> ReclaimRefusal {
        if status == NtStatus::OBJECT_NAME_NOT_FOUND {
            ReclaimRefusal::Expired
        } else {
            ReclaimRefusal::Refused { status }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_told_in_words() {
        let lost = HandleLossCause::NotReclaimed {
            refusal: ReclaimRefusal::from_status(NtStatus::OBJECT_NAME_NOT_FOUND),
            reopen: ReopenFailure::AnotherFile(FileChange::OnDiskId),
        };
        let s = lost.to_string();
        assert!(s.contains("no longer has it"), "{s}");
        assert!(s.contains("another one (its on-disk id changed)"), "{s}");
        let s = ReclaimRefusal::from_status(NtStatus::ACCESS_DENIED).to_string();
        assert!(s.contains("refused it to this user"), "{s}");
        let s = ReclaimRefusal::AnotherOpen {
            ours: 0x11,
            theirs: 0x99,
        }
        .to_string();
        assert!(s.contains("0x99") && s.contains("ours 0x11"), "{s}");
    }
}
