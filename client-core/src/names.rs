//! Names that come from the server are untrusted input.
//!
//! A directory listing, a change notification or a stream listing hands the client names it
//! will join to paths: paths it sends back to the server, and paths that front ends create on
//! the local disk (smbcp's downloads, the mount's directory entries). A name that is not a
//! single path component there would let the server pick where things land: `../../x` or
//! `/tmp/owned` walks out of the destination, `a/b` reaches into a subdirectory, `a\b` is two
//! components once sent back to the server (MS-SMB2 2.2.13: `\` separates path components), a
//! NUL cuts the name short in every C interface. No legitimate server sends one: MS-FSCC 2.1.5
//! forbids `\`, `/` and NUL in a file name component, and `.` and `..` are the directory and
//! its parent, not entries of it.
//!
//! This module is the one place that decides. Every listing, walk, snapshot listing, stream
//! listing and change notification passes its names through [`check_name`], and the front ends
//! that write local files call it again before they do.
//!
//! The other way, a caller's path is turned into the share-relative form the wire wants by
//! [`wire_path`], which refuses `..` for the same reason: a path must not leave where it points.

use crate::error::{Error, UnsafeNameReason};

/// Whether `name` can be used as one path component, on the server and on Linux and macOS
/// alike. Front ends that create local files from remote names call this before they do,
/// whatever the library already checked.
pub fn check_name(name: &str) -> Result<(), UnsafeNameReason> {
    match name {
        "" => Err(UnsafeNameReason::Empty),
        "." => Err(UnsafeNameReason::Dot),
        ".." => Err(UnsafeNameReason::DotDot),
        _ if name.contains('/') => Err(UnsafeNameReason::Slash),
        _ if name.contains('\\') => Err(UnsafeNameReason::Backslash),
        _ if name.contains('\0') => Err(UnsafeNameReason::Nul),
        _ => Ok(()),
    }
}

/// [`check_name`] for a name the server gave as an entry of the share-relative directory
/// `dir`, as the typed error that names both.
pub(crate) fn check_entry(dir: &str, name: &str) -> Result<(), Error> {
    check_name(name).map_err(|reason| Error::UnsafeName {
        dir: dir.to_string(),
        name: name.to_string(),
        reason,
    })
}

/// Whether every component of `path` (relative, `/`-separated, as a change notification of a
/// subtree gives it once its `\` are turned into `/`) is a safe name.
pub(crate) fn check_relative_path(path: &str) -> Result<(), UnsafeNameReason> {
    path.split('/').try_for_each(check_name)
}

/// Convert a user path (`/a/b`, `a\b`, `a//b/`) to the share-relative form the wire wants
/// (`a\b`; empty for the share root). `..` is refused rather than resolved: the server would
/// refuse it anyway and resolving it locally could escape the intended directory.
pub(crate) fn wire_path(path: &str) -> Result<String, crate::Error> {
    let mut parts = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return Err(crate::Error::ApiMisuse("paths may not contain '..'")),
            p => parts.push(p),
        }
    }
    Ok(parts.join("\\"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised() {
        assert_eq!(wire_path("/").unwrap(), "");
        assert_eq!(wire_path("").unwrap(), "");
        assert_eq!(wire_path("/a/b/").unwrap(), "a\\b");
        assert_eq!(wire_path("a\\\\b/./c").unwrap(), "a\\b\\c");
        assert_eq!(wire_path("déjà vu/ファイル").unwrap(), "déjà vu\\ファイル");
        assert!(wire_path("a/../b").is_err());
    }

    #[test]
    fn every_name_that_is_not_one_component_is_refused() {
        let cases = [
            ("", UnsafeNameReason::Empty),
            (".", UnsafeNameReason::Dot),
            ("..", UnsafeNameReason::DotDot),
            ("/tmp/owned", UnsafeNameReason::Slash),
            ("../../x", UnsafeNameReason::Slash),
            ("a/b", UnsafeNameReason::Slash),
            ("/", UnsafeNameReason::Slash),
            ("a\\b", UnsafeNameReason::Backslash),
            ("..\\..\\x", UnsafeNameReason::Backslash),
            ("\\", UnsafeNameReason::Backslash),
            ("a\0b", UnsafeNameReason::Nul),
            ("\0", UnsafeNameReason::Nul),
        ];
        for (name, reason) in cases {
            assert_eq!(check_name(name), Err(reason), "{name:?}");
        }
    }

    #[test]
    fn ordinary_and_odd_but_harmless_names_pass() {
        for name in [
            "a.txt",
            "...",
            ".hidden",
            "..x",
            "x..",
            "trailing dot.",
            "trailing space ",
            " leading space",
            "colon:name",
            "ünïcødé ファイル",
            "tab\tand\nnewline",
            &"n".repeat(255),
        ] {
            assert_eq!(check_name(name), Ok(()), "{name:?}");
        }
    }

    #[test]
    fn the_error_names_the_directory_and_the_raw_name() {
        let e = check_entry("dir/sub", "../../x").unwrap_err();
        match &e {
            Error::UnsafeName { dir, name, reason } => {
                assert_eq!(dir, "dir/sub");
                assert_eq!(name, "../../x");
                assert_eq!(*reason, UnsafeNameReason::Slash);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e.to_string(),
            "dir/sub: the server listed an entry named \"../../x\", which is not a single \
             file name (it holds \"/\"); refused"
        );
        let root = check_entry("", "a\\b").unwrap_err().to_string();
        assert!(root.starts_with("(share root): "), "{root}");
    }

    #[test]
    fn relative_paths_are_checked_component_by_component() {
        assert_eq!(check_relative_path("a/b/c.txt"), Ok(()));
        assert_eq!(check_relative_path("a/../b"), Err(UnsafeNameReason::DotDot));
        assert_eq!(check_relative_path("/abs"), Err(UnsafeNameReason::Empty));
        assert_eq!(check_relative_path("a//b"), Err(UnsafeNameReason::Empty));
        assert_eq!(check_relative_path(""), Err(UnsafeNameReason::Empty));
    }
}
