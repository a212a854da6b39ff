//! Names a destination would take for one file. Copying `foo` and `FOO` onto a
//! case-insensitive file system (macOS's default, an SMB share), or `é` spelled precomposed
//! and decomposed onto one that normalizes (APFS), would write both into the same file, the
//! second silently replacing the first; and a server may list one name twice. Each such name
//! after the first is reported and not copied, nor, for a directory, anything below it. The
//! same holds against what is at the destination already: copying `foo` where `FOO` exists
//! (from an earlier run) would overwrite `FOO`.

use std::collections::HashMap;

use crate::local_dest::NameFolding;

/// The names admitted so far, per destination directory.
pub(crate) struct NameClashes {
    folding: NameFolding,
    /// (directory below the copy's root, the name's key) → the name first admitted.
    seen: HashMap<(String, String), String>,
    /// The same for the names already at the destination.
    existing: HashMap<(String, String), String>,
}

/// What a name clashes with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Clash {
    /// Another name of this copy, admitted first.
    Planned(String),
    /// A name already at the destination (the same name is no clash: it is replaced).
    Existing(String),
}

impl NameClashes {
    /// For a destination that compares names as `folding` says.
    pub(crate) fn new(folding: NameFolding) -> Self {
        NameClashes {
            folding,
            seen: HashMap::new(),
            existing: HashMap::new(),
        }
    }

    /// Whether names are compared other than exactly (only then can existing names clash).
    pub(crate) fn folds(&self) -> bool {
        self.folding != NameFolding::EXACT
    }

    /// Note `name` as already in the destination directory `dir`.
    pub(crate) fn existing(&mut self, dir: &str, name: &str) {
        let key = (dir.to_string(), self.folding.key(name));
        self.existing.insert(key, name.to_string());
    }

    /// Admit `name` into the destination directory `dir` (its path below the root, any
    /// consistent spelling); `Err` with the name admitted earlier that the destination would
    /// take for the same file.
    pub(crate) fn admit(&mut self, dir: &str, name: &str) -> Result<(), Clash> {
        let key = (dir.to_string(), self.folding.key(name));
        if let Some(first) = self.seen.get(&key) {
            return Err(Clash::Planned(first.clone()));
        }
        if let Some(there) = self.existing.get(&key).filter(|there| *there != name) {
            return Err(Clash::Existing(there.clone()));
        }
        self.seen.insert(key, name.to_string());
        Ok(())
    }

    /// The words for `name`'s clash.
    pub(crate) fn explain(&self, name: &str, clash: &Clash) -> String {
        let first = match clash {
            Clash::Planned(first) => first.as_str(),
            Clash::Existing(there) => {
                return format!(
                    "not copied: the destination holds {there:?}, which it takes for the same \
                     file as {name:?} (the names differ only in case); copying would overwrite it"
                )
            }
        };
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
        assert_eq!(c.admit("", "foo"), Err(Clash::Planned("foo".into())));
        assert!(c.admit("sub", "foo").is_ok(), "another directory");
        assert!(c
            .explain("foo", &Clash::Planned("foo".into()))
            .contains("listed twice"));
    }

    #[test]
    fn case_insensitive_destinations_clash_on_case() {
        let mut c = NameClashes::new(NameFolding {
            case_insensitive: true,
            normalization_insensitive: false,
        });
        assert!(c.admit("d", "Readme.md").is_ok());
        let clash = c.admit("d", "README.md").unwrap_err();
        assert_eq!(clash, Clash::Planned("Readme.md".into()));
        assert!(c.explain("README.md", &clash).contains("only in case"));
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

    #[test]
    fn a_name_already_there_in_another_case_clashes_the_same_name_does_not() {
        let mut c = NameClashes::new(NameFolding {
            case_insensitive: true,
            normalization_insensitive: false,
        });
        c.existing("dir", "FOO");
        assert!(c.admit("dir", "FOO").is_ok(), "the same file, replaced");
        let mut c = NameClashes::new(NameFolding {
            case_insensitive: true,
            normalization_insensitive: false,
        });
        c.existing("dir", "FOO");
        let clash = c.admit("dir", "foo").unwrap_err();
        assert_eq!(clash, Clash::Existing("FOO".into()));
        assert!(c.explain("foo", &clash).contains("would overwrite"));
        assert!(c.admit("other", "foo").is_ok());
        assert!(!NameClashes::new(NameFolding::EXACT).folds());
    }
}
