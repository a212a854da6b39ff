//! Why smbcp could not do what it should with one file: the library's error, a local I/O
//! error, or one of smbcp's own rules, kept as it is until it is shown, with the file it
//! concerns. The line a person reads is made by `Display`; `--json` also takes the kind and,
//! when the server answered with one, the NTSTATUS from it ([`FileError::json_fields`]).

use std::fmt;

use smb3_client::NtStatus;

/// What went wrong.
#[derive(Debug)]
pub enum Cause {
    /// A request to the server failed: the server said no, the connection failed, the
    /// server broke the protocol, ...
    Smb(smb3_client::Error),
    /// A local file could not be read or written; `at` names it when the line does not
    /// already.
    Local {
        /// The local file, as shown.
        at: Option<String>,
        /// What the system said.
        error: std::io::Error,
    },
    /// smbcp's own checks found something wrong.
    Refused(Refusal),
}

/// What smbcp's own checks find wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The source changed while it was copied (`source_change.rs`).
    SourceChanged,
    /// Fewer bytes came than the file had when it was planned or opened; the words say where.
    ShortRead(String),
    /// `--verify`: the destination's SHA-256 differs from the source's; the words say how.
    VerifyMismatch(String),
    /// A directory given without `-r`.
    IsDirectory,
    /// The destination would take this name for another one copied or already there (the
    /// names differ only in case, `name_clash.rs`); the words say which.
    NameClash(String),
    /// A download's local file was not kept open for `-p` (an internal slip).
    NotKeptOpen,
    /// A FIFO, socket or device named as a source without -r (or a reparse point of a kind
    /// smbcp does not copy); the words say which kind it is.
    SpecialFile(&'static str),
    /// A symbolic link whose target is not UTF-8: SMB names are Unicode.
    LinkTargetNotUnicode,
    /// `-L` met a link it does not follow (out of the share, a loop); the words say why.
    LinkNotFollowed(String),
}

impl Refusal {
    fn kind(&self) -> &'static str {
        match self {
            Refusal::SourceChanged => "source_changed",
            Refusal::ShortRead(_) => "short_read",
            Refusal::VerifyMismatch(_) => "verify_mismatch",
            Refusal::IsDirectory => "is_directory",
            Refusal::NameClash(_) => "name_clash",
            Refusal::NotKeptOpen => "internal",
            Refusal::SpecialFile(_) => "special_file",
            Refusal::LinkTargetNotUnicode => "link_target",
            Refusal::LinkNotFollowed(_) => "link_not_followed",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::SourceChanged => f.write_str(crate::source_change::CHANGED),
            Refusal::ShortRead(words)
            | Refusal::VerifyMismatch(words)
            | Refusal::NameClash(words)
            | Refusal::LinkNotFollowed(words) => f.write_str(words),
            Refusal::IsDirectory => f.write_str("is a directory (use -r)"),
            Refusal::NotKeptOpen => f.write_str("copied, but the written file was not kept open"),
            Refusal::SpecialFile(kind) => write!(
                f,
                "{kind}: not copied (named alone it would be read as a file; in a tree copied \
                 with -r it is made again)"
            ),
            Refusal::LinkTargetNotUnicode => f.write_str(
                "symbolic link whose target is not UTF-8: not copied (-L copies what it points to)",
            ),
        }
    }
}

impl Cause {
    /// A local error about the file `at`.
    pub(crate) fn local_at(at: impl fmt::Display, error: std::io::Error) -> Cause {
        Cause::Local {
            at: Some(at.to_string()),
            error,
        }
    }

    /// A local error about the file the line already names.
    pub(crate) fn local(error: std::io::Error) -> Cause {
        Cause::Local { at: None, error }
    }

    /// A blocking task that did not finish (the runtime is shutting down, or it panicked).
    pub(crate) fn task(e: tokio::task::JoinError) -> Cause {
        Cause::local(std::io::Error::other(e))
    }

    /// A stable label for `--json`: the library's [`smb3_client::Error::kind`] for a
    /// request that failed (`status`, `io` for the network, `timeout`, `connection_lost`,
    /// `handle_lost`, ...), `local_io` for the local file system, and for smbcp's own
    /// checks `source_changed`, `short_read`, `verify_mismatch`, `is_directory`,
    /// `name_clash` or `internal`.
    pub fn kind(&self) -> &'static str {
        match self {
            Cause::Smb(e) => e.kind(),
            Cause::Local { .. } => "local_io",
            Cause::Refused(r) => r.kind(),
        }
    }

    /// The NTSTATUS the server answered with, when it said no.
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            Cause::Smb(smb3_client::Error::Status { status, .. })
            | Cause::Smb(smb3_client::Error::Unsupported { status, .. }) => Some(*status),
            _ => None,
        }
    }

    /// Whether the server lost the open (`Error::HandleLost`): starting over may succeed.
    pub(crate) fn lost_handle(&self) -> bool {
        matches!(self, Cause::Smb(smb3_client::Error::HandleLost { .. }))
    }

    /// Whether the source changed while it was copied: copying it again may catch a
    /// version that holds still.
    pub(crate) fn changed(&self) -> bool {
        matches!(self, Cause::Refused(Refusal::SourceChanged))
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Smb(e) => write!(f, "{}", e.brief()),
            Cause::Local {
                at: Some(at),
                error,
            } => write!(f, "{at}: {error}"),
            Cause::Local { at: None, error } => write!(f, "{error}"),
            Cause::Refused(r) => write!(f, "{r}"),
        }
    }
}

impl From<smb3_client::Error> for Cause {
    fn from(e: smb3_client::Error) -> Cause {
        Cause::Smb(e)
    }
}

impl From<Refusal> for Cause {
    fn from(r: Refusal) -> Cause {
        Cause::Refused(r)
    }
}

/// A step that failed: what was being done (`setting times`), when it needs saying, and
/// why.
#[derive(Debug)]
pub struct StepFailed {
    /// What was being done.
    pub doing: Option<String>,
    /// Why it failed.
    pub cause: Cause,
}

impl StepFailed {
    /// `doing` failed because of `cause`.
    pub(crate) fn new(doing: impl Into<String>, cause: impl Into<Cause>) -> StepFailed {
        StepFailed {
            doing: Some(doing.into()),
            cause: cause.into(),
        }
    }

    /// A `map_err` that says what was being done.
    pub(crate) fn doing<E: Into<Cause>>(doing: &str) -> impl FnOnce(E) -> StepFailed + '_ {
        move |e| StepFailed::new(doing, e)
    }
}

impl<E: Into<Cause>> From<E> for StepFailed {
    fn from(e: E) -> StepFailed {
        StepFailed {
            doing: None,
            cause: e.into(),
        }
    }
}

impl fmt::Display for StepFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.doing {
            Some(doing) => write!(f, "{doing}: {}", self.cause),
            None => write!(f, "{}", self.cause),
        }
    }
}

/// Why one file failed, shown as `FILE: [DOING: ]CAUSE[OUTCOME]`: `//nas/data/a.bin: access
/// denied (ACCESS_DENIED); ./a.bin was not written`.
#[derive(Debug)]
pub struct FileError {
    /// The file the line is about, as shown to the user.
    pub file: String,
    /// What was being done, when the cause alone would not say (`verify: reading the
    /// source`, `copied, but setting times`).
    pub doing: Option<String>,
    /// What went wrong.
    pub cause: Cause,
    /// What it means for the copy, said after the cause (`; ./a.bin was not written`).
    pub outcome: String,
}

impl FileError {
    /// `cause` about `file`, with nothing more to say.
    pub(crate) fn new(file: impl Into<String>, cause: impl Into<Cause>) -> FileError {
        FileError {
            file: file.into(),
            doing: None,
            cause: cause.into(),
            outcome: String::new(),
        }
    }

    /// A failed step of the work on `file`.
    pub(crate) fn step(file: impl Into<String>, step: StepFailed) -> FileError {
        FileError {
            doing: step.doing,
            ..FileError::new(file, step.cause)
        }
    }

    /// The same, with what it means for the copy said after it.
    pub(crate) fn with_outcome(mut self, outcome: impl Into<String>) -> FileError {
        self.outcome = outcome.into();
        self
    }

    /// The file and what went wrong, without the consequence: the words of a line that
    /// goes on with another one (`...; copying it again from the start`).
    pub fn without_outcome(&self) -> impl fmt::Display + '_ {
        struct Head<'a>(&'a FileError);
        impl fmt::Display for Head<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let e = self.0;
                match &e.doing {
                    Some(doing) => write!(f, "{}: {doing}: {}", e.file, e.cause),
                    None => write!(f, "{}: {}", e.file, e.cause),
                }
            }
        }
        Head(self)
    }

    /// The fields `--json-files` gives a failed file: `error` (the line, as printed),
    /// `error_kind` ([`Cause::kind`]), `ntstatus` (`STATUS_ACCESS_DENIED`, or the code in
    /// hex for a status without a name) and `ntstatus_code` (`0xc0000022`), the last two
    /// `null` unless the server answered with a status.
    pub fn json_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        json_fields(Some(self))
    }
}

/// [`FileError::json_fields`], all `null` for a file that did not fail, so every file has
/// the same fields.
pub fn json_fields(e: Option<&FileError>) -> serde_json::Map<String, serde_json::Value> {
    let status = e.and_then(|e| e.cause.status());
    let mut m = serde_json::Map::new();
    m.insert("error".into(), e.map(|e| e.to_string()).into());
    m.insert("error_kind".into(), e.map(|e| e.cause.kind()).into());
    m.insert(
        "ntstatus".into(),
        status
            .map(|s| match s.name() {
                Some(name) => format!("STATUS_{name}"),
                None => format!("{:#010x}", s.0),
            })
            .into(),
    );
    m.insert(
        "ntstatus_code".into(),
        status.map(|s| format!("{:#010x}", s.0)).into(),
    );
    m
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.without_outcome(), self.outcome)
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            Cause::Smb(e) => Some(e),
            Cause::Local { error, .. } => Some(error),
            Cause::Refused(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb3_client::{Command, Error};

    #[test]
    fn a_server_error_gives_its_ntstatus_in_json() {
        let e = FileError::new(
            "//nas/data/a.bin",
            Error::Status {
                status: NtStatus::ACCESS_DENIED,
                command: Command::CREATE,
                path: Some("a.bin".into()),
            },
        )
        .with_outcome("; ./a.bin was not written");
        let line = e.to_string();
        assert_eq!(
            line,
            format!(
                "//nas/data/a.bin: {}; ./a.bin was not written",
                NtStatus::ACCESS_DENIED
            )
        );
        let json = serde_json::Value::Object(e.json_fields());
        assert_eq!(
            json,
            serde_json::json!({
                "error": line,
                "error_kind": "status",
                "ntstatus": "STATUS_ACCESS_DENIED",
                "ntstatus_code": "0xc0000022",
            })
        );
        let unnamed = FileError::new(
            "x",
            Error::Status {
                status: NtStatus(0xC0DE_0001),
                command: Command::READ,
                path: None,
            },
        );
        let json = serde_json::Value::Object(unnamed.json_fields());
        assert_eq!(json["ntstatus"], "0xc0de0001");
        assert_eq!(json["ntstatus_code"], "0xc0de0001");
    }

    #[test]
    fn a_local_error_has_a_kind_and_no_ntstatus() {
        let e = FileError::new(
            "/src/a.bin",
            Cause::local_at(
                "/dst/.a.bin.smbcp-partial",
                std::io::Error::from_raw_os_error(28),
            ),
        );
        let line = e.to_string();
        assert!(
            line.starts_with("/src/a.bin: /dst/.a.bin.smbcp-partial: No space left on device"),
            "{line}"
        );
        let json = serde_json::Value::Object(e.json_fields());
        assert_eq!(
            json,
            serde_json::json!({
                "error": line,
                "error_kind": "local_io",
                "ntstatus": null,
                "ntstatus_code": null,
            })
        );
        let none = serde_json::Value::Object(json_fields(None));
        assert_eq!(
            none,
            serde_json::json!({"error": null, "error_kind": null, "ntstatus": null, "ntstatus_code": null})
        );
    }

    #[test]
    fn steps_and_outcomes_read_as_one_line() {
        let e = FileError::step(
            "/dst/a.bin",
            StepFailed::new(
                "copied, but setting times",
                Cause::local(std::io::Error::from_raw_os_error(1)),
            ),
        );
        assert_eq!(
            e.to_string(),
            "/dst/a.bin: copied, but setting times: Operation not permitted (os error 1)"
        );
        let changed = FileError::new("//h/s/a", Refusal::SourceChanged).with_outcome("; x");
        assert!(changed.cause.changed() && !changed.cause.lost_handle());
        assert_eq!(
            changed.without_outcome().to_string(),
            "//h/s/a: changed while being copied"
        );
        assert_eq!(changed.cause.kind(), "source_changed");
    }
}
