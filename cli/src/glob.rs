//! `--exclude` patterns: shell-style globs matched on a file's path relative to the source
//! being copied and on its base name, the way rsync users expect (`*.tmp` anywhere,
//! `build/**` below one directory). The matching is `globset`'s (ripgrep's) with `*` and `?`
//! kept within one name: `*` matches any run of characters except `/`, `**` as a whole
//! component any run of directories (`a/**/b` matches `a/b` too), `?` one character except
//! `/`, `[abc]`, `[a-z]` and `[!x]` one character of (or not of) a set, `{a,b}` either
//! alternative, and `\x` the character `x` itself. Case counts.

use globset::{ErrorKind, GlobBuilder, GlobSet, GlobSetBuilder};

/// The `--exclude` patterns of one run.
#[derive(Clone, Debug, Default)]
pub struct Excludes {
    set: GlobSet,
    count: usize,
}

impl Excludes {
    /// Parse every pattern, failing on the first bad one; an unclosed `[` is an error (it
    /// is almost always a typo), and so is an empty pattern.
    pub fn new(patterns: &[String]) -> Result<Excludes, String> {
        let mut set = GlobSetBuilder::new();
        for pattern in patterns {
            set.add(glob(pattern)?);
        }
        let set = set.build().map_err(|e| e.to_string())?;
        Ok(Excludes {
            set,
            count: patterns.len(),
        })
    }

    /// Whether a file or directory at `relative` (below the source being copied, `/`
    /// separated) is excluded: a pattern matches the whole relative path or the base name.
    pub fn excludes(&self, relative: &str) -> bool {
        let base = relative.rsplit('/').next().unwrap_or(relative);
        self.set.is_match(relative) || self.set.is_match(base)
    }

    /// Whether there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// One pattern, with `*` and `?` stopping at `/` and `\` escaping on every platform.
fn glob(pattern: &str) -> Result<globset::Glob, String> {
    if pattern.is_empty() {
        return Err("empty pattern".into());
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| match e.kind() {
            ErrorKind::UnclosedClass => format!("unclosed [ in pattern {pattern:?}"),
            _ => e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        glob(p).unwrap().compile_matcher().is_match(t)
    }

    #[test]
    fn stars_and_questions() {
        assert!(m("*.tmp", "a.tmp"));
        assert!(!m("*.tmp", "d/a.tmp"));
        assert!(m("**/*.tmp", "d/e/a.tmp"));
        assert!(m("**/*.tmp", "a.tmp"));
        assert!(m("d/**/a.tmp", "d/a.tmp"));
        assert!(m("d/**/a.tmp", "d/x/y/a.tmp"));
        assert!(m("d/**", "d/x/y"));
        assert!(!m("d/**", "e/x"));
        assert!(m("?.c", "a.c"));
        assert!(!m("?.c", "ab.c"));
        assert!(!m("a?b", "a/b"));
        assert!(m("*", ""));
        assert!(!m("a", "ab"));
        assert!(!m("*.TMP", "a.tmp"), "case counts");
    }

    #[test]
    fn classes_and_escapes() {
        assert!(m("[ab]x", "bx"));
        assert!(!m("[!ab]x", "bx"));
        assert!(m("f[0-9].log", "f7.log"));
        assert!(!m("f[0-9].log", "fa.log"));
        assert!(m("[]]", "]"));
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
        assert!(m("ünï*", "ünïcødé"));
        assert!(m("*.{tmp,bak}", "a.bak"));
        let e = glob("[ab").unwrap_err();
        assert_eq!(e, "unclosed [ in pattern \"[ab\"");
        assert!(glob("").is_err());
    }

    #[test]
    fn excludes_match_path_or_base_name() {
        let e = Excludes::new(&["*.tmp".into(), "sub/deeper".into()]).unwrap();
        assert!(e.excludes("x/y/z.tmp"));
        assert!(e.excludes("sub/deeper"));
        assert!(!e.excludes("other/deeper/f"));
        assert!(!e.excludes("sub/mid.bin"));
        assert!(!e.is_empty());
        assert!(Excludes::new(&[]).unwrap().is_empty());
        assert!(Excludes::new(&["ok".into(), "[".into()]).is_err());
    }
}
