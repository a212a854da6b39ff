//! `--exclude` patterns: shell-style globs matched on a file's path relative to the source
//! being copied and on its base name, the way rsync users expect (`*.tmp` anywhere,
//! `build/**` below one directory).

/// One glob: `*` matches any run of characters except `/`, `**` any run including `/`, `?`
/// one character except `/`, `[abc]`, `[a-z]` and `[!x]` one character of (or not of) a set,
/// and `\x` the character `x` itself.
#[derive(Clone, Debug)]
pub struct Glob {
    pattern: Vec<char>,
    text: String,
}

impl Glob {
    /// Parse a pattern; an unclosed `[` is an error (it is almost always a typo).
    pub fn new(pattern: &str) -> Result<Glob, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 2,
                '[' => match class_end(&chars, i) {
                    Some(end) => i = end + 1,
                    None => return Err(format!("unclosed [ in pattern {pattern:?}")),
                },
                _ => i += 1,
            }
        }
        if pattern.is_empty() {
            return Err("empty pattern".into());
        }
        Ok(Glob {
            pattern: chars,
            text: pattern.to_string(),
        })
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        matches_at(&self.pattern, &text)
    }
}

/// Index of the `]` closing the class that opens at `open`. A `]` right after `[` or `[!` is
/// a member, as in the shell.
fn class_end(p: &[char], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if p.get(i) == Some(&'!') {
        i += 1;
    }
    if p.get(i) == Some(&']') {
        i += 1;
    }
    while i < p.len() {
        if p[i] == ']' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Whether `c` is in the class `p[open..=end]`.
fn in_class(p: &[char], open: usize, end: usize, c: char) -> bool {
    let mut i = open + 1;
    let negate = p[i] == '!';
    if negate {
        i += 1;
    }
    let mut found = false;
    let first = i;
    while i < end {
        if i + 2 < end && p[i + 1] == '-' && (i > first || p[i] != ']') {
            if p[i] <= c && c <= p[i + 2] {
                found = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                found = true;
            }
            i += 1;
        }
    }
    found != negate
}

/// Backtracking match; patterns are short, and `*` only retries from its own position, so
/// the cost stays at pattern length times text length per star.
fn matches_at(p: &[char], t: &[char]) -> bool {
    match p.first() {
        None => t.is_empty(),
        Some('*') if p.get(1) == Some(&'*') => {
            // `**/` also matches nothing, so `a/**/b` matches `a/b`.
            let rest = &p[2..];
            if rest.first() == Some(&'/') && matches_at(&rest[1..], t) {
                return true;
            }
            (0..=t.len()).any(|k| matches_at(rest, &t[k..]))
        }
        Some('*') => {
            let rest = &p[1..];
            let mut k = 0;
            loop {
                if matches_at(rest, &t[k..]) {
                    return true;
                }
                if k == t.len() || t[k] == '/' {
                    return false;
                }
                k += 1;
            }
        }
        Some('?') => !t.is_empty() && t[0] != '/' && matches_at(&p[1..], &t[1..]),
        Some('[') => {
            let end = class_end(p, 0).expect("checked in Glob::new");
            !t.is_empty()
                && t[0] != '/'
                && in_class(p, 0, end, t[0])
                && matches_at(&p[end + 1..], &t[1..])
        }
        Some('\\') if p.len() > 1 => t.first() == Some(&p[1]) && matches_at(&p[2..], &t[1..]),
        Some(&c) => t.first() == Some(&c) && matches_at(&p[1..], &t[1..]),
    }
}

/// The `--exclude` patterns of one run.
#[derive(Clone, Debug, Default)]
pub struct Excludes {
    globs: Vec<Glob>,
}

impl Excludes {
    /// Parse every pattern, failing on the first bad one.
    pub fn new(patterns: &[String]) -> Result<Excludes, String> {
        let globs = patterns
            .iter()
            .map(|p| Glob::new(p))
            .collect::<Result<_, _>>()?;
        Ok(Excludes { globs })
    }

    /// Whether a file or directory at `relative` (below the source being copied, `/`
    /// separated) is excluded: a pattern matches the whole relative path or the base name.
    pub fn excludes(&self, relative: &str) -> bool {
        let base = relative.rsplit('/').next().unwrap_or(relative);
        self.globs
            .iter()
            .any(|g| g.matches(relative) || g.matches(base))
    }

    /// Whether there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.globs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Glob::new(p).unwrap().matches(t)
    }

    #[test]
    fn stars_and_questions() {
        assert!(m("*.tmp", "a.tmp"));
        assert!(!m("*.tmp", "d/a.tmp"));
        assert!(m("**/*.tmp", "d/e/a.tmp"));
        assert!(m("d/**/a.tmp", "d/a.tmp"));
        assert!(m("d/**", "d/x/y"));
        assert!(m("?.c", "a.c"));
        assert!(!m("?.c", "ab.c"));
        assert!(m("*", ""));
        assert!(!m("a", "ab"));
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
        assert!(Glob::new("[ab").is_err());
        assert!(Glob::new("").is_err());
    }

    #[test]
    fn excludes_match_path_or_base_name() {
        let e = Excludes::new(&["*.tmp".into(), "sub/deeper".into()]).unwrap();
        assert!(e.excludes("x/y/z.tmp"));
        assert!(e.excludes("sub/deeper"));
        assert!(!e.excludes("other/deeper/f"));
        assert!(!e.excludes("sub/mid.bin"));
    }
}
