//! Names a destination would take for one file. Copying `foo` and `FOO` onto a
//! case-insensitive file system (macOS's default, an SMB share), or `é` spelled precomposed
//! and decomposed onto one that normalizes (APFS), would write both into the same file, the
//! second silently replacing the first; and a server may list one name twice. Each such name
//! after the first is reported and not copied, nor, for a directory, anything below it.

use std::collections::HashMap;

use crate::local_dest::NameFolding;

/// The names admitted so far, per destination directory.
pub(crate) struct NameClashes {
    folding: NameFolding,
    /// (directory below the copy's root, the name's key) → the name first admitted.
    seen: HashMap<(String, String), String>,
}

impl NameClashes {
    /// For a destination that compares names as `folding` says.
    pub(crate) fn new(folding: NameFolding) -> Self {
        NameClashes {
            folding,
            seen: HashMap::new(),
        }
    }

    /// Admit `name` into the destination directory `dir` (its path below the root, any
    /// consistent spelling); `Err` with the name admitted earlier that the destination would
    /// take for the same file.
    pub(crate) fn admit(&mut self, dir: &str, name: &str) -> Result<(), String> {
        let key = (dir.to_string(), self.folding.key(name));
        match self.seen.get(&key) {
            Some(first) => Err(first.clone()),
            None => {
                self.seen.insert(key, name.to_string());
                Ok(())
            }
        }
    }

    /// The words for a clash of `name` with `first`, in a destination described by `where_`.
    pub(crate) fn explain(&self, name: &str, first: &str) -> String {
        let how = if name == first {
            "the same name was listed twice"
        } else if self.folding.case_insensitive && name.to_lowercase() == first.to_lowercase() {
            "the names differ only in case"
        } else {
            "the names differ only in case or Unicode form"
        };
        format!(
            "not copied: {how} ({first:?} and {name:?}), and the destination would store \
             both as one file"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_destinations_clash_only_on_repeated_names() {
        let mut c = NameClashes::new(NameFolding::EXACT);
        assert!(c.admit("", "foo").is_ok());
        assert!(c.admit("", "FOO").is_ok());
        assert_eq!(c.admit("", "foo"), Err("foo".into()));
        assert!(c.admit("sub", "foo").is_ok(), "another directory");
        assert!(c.explain("foo", "foo").contains("listed twice"));
    }

    #[test]
    fn case_insensitive_destinations_clash_on_case() {
        let mut c = NameClashes::new(NameFolding {
            case_insensitive: true,
            normalization_insensitive: false,
        });
        assert!(c.admit("d", "Readme.md").is_ok());
        assert_eq!(c.admit("d", "README.md"), Err("Readme.md".into()));
        assert!(c.explain("README.md", "Readme.md").contains("only in case"));
        assert!(c.admit("d", "cafe\u{301}").is_ok());
        assert!(c.admit("d", "caf\u{e9}").is_ok(), "no normalization here");
    }

    #[test]
    fn normalizing_destinations_clash_on_unicode_form() {
        let mut c = NameClashes::new(NameFolding {
            case_insensitive: true,
            normalization_insensitive: true,
        });
        assert!(c.admit("", "caf\u{e9}").is_ok());
        let first = c.admit("", "CAFE\u{301}").unwrap_err();
        assert!(c.explain("CAFE\u{301}", &first).contains("Unicode form"));
    }
}
