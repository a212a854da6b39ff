//! Why a name from the server was refused (the reason carried by
//! [`Error::UnsafeName`](super::Error::UnsafeName); the check itself is `crate::names`).

/// Why a name from the server is not a single path component
/// ([`Error::UnsafeName`](super::Error::UnsafeName)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnsafeNameReason {
    /// The name is empty.
    Empty,
    /// The name is `.`, the directory itself.
    Dot,
    /// The name is `..`, the directory's parent.
    DotDot,
    /// The name holds `/`, the separator of local paths (and of this library's paths).
    Slash,
    /// The name holds `\`, the separator of SMB paths.
    Backslash,
    /// The name holds a NUL character, which ends a name in every C interface.
    Nul,
}

impl std::fmt::Display for UnsafeNameReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UnsafeNameReason::Empty => "it is empty",
            UnsafeNameReason::Dot => "it is \".\"",
            UnsafeNameReason::DotDot => "it is \"..\"",
            UnsafeNameReason::Slash => "it holds \"/\"",
            UnsafeNameReason::Backslash => "it holds \"\\\"",
            UnsafeNameReason::Nul => "it holds a NUL character",
        })
    }
}
