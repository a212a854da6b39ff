//! Names a Linux program may make that a Windows-style share cannot hold, mapped to
//! characters it can: the "SFM" (Services for Mac) mapping, as the Linux kernel's SMB
//! client does it with `mapposix` and macOS's SMB client always.
//!
//! Windows (and Samba without the SMB3 POSIX extensions) refuses the seven characters
//! `" * : < > ? |` in a name, and a name ending in `.` or ` ` is either refused or kept under
//! an 8.3 mangled name (`TF53O1~B`, Samba's `mangled names = illegal`). Each such character is
//! sent as a character of Unicode's private-use area instead, which every server keeps as it
//! is, and the listing maps it back. The code points are the kernel's, so a share written
//! through this mount and through `mount -t cifs -o mapposix` (or from a Mac) shows the same
//! names on both: `fs/smb/client/cifs_unicode.h` (torvalds/linux):
//!
//! ```text
//! #define SFM_DOUBLEQUOTE ((__u16) 0xF020)
//! #define SFM_ASTERISK    ((__u16) 0xF021)
//! #define SFM_QUESTION    ((__u16) 0xF025)
//! #define SFM_COLON       ((__u16) 0xF022)
//! #define SFM_GRTRTHAN    ((__u16) 0xF024)
//! #define SFM_LESSTHAN    ((__u16) 0xF023)
//! #define SFM_PIPE        ((__u16) 0xF027)
//! #define SFM_SLASH       ((__u16) 0xF026)
//! #define SFM_SPACE       ((__u16) 0xF028)
//! #define SFM_PERIOD      ((__u16) 0xF029)
//! ```
//!
//! As in the kernel's `convert_to_sfm_char` (`fs/smb/client/cifs_unicode.c`): the control
//! characters 0x01-0x1F become U+F001-U+F01F, a space or period is mapped only as the last
//! character of a name (and `.`/`..` never), and on the way back (`convert_sfm_char`) every
//! one of these code points becomes its character again wherever it stands. The kernel
//! cannot map `\` (its paths use it as the separator: "FIXME: We can not handle remapping
//! backslash (UNI_SLASH)"), so a `\` in a name makes it send a path of two components. Here
//! paths are built from the components, so `\` gets the code point the kernel reserves for it,
//! `SFM_SLASH` (U+F026, which Samba's `vfs_fruit`/`vfs_catia` SFM table also gives `\`).
//!
//! The price, shared with the kernel: a name that really contains one of these private-use
//! characters lists as the character it stands for.

use std::borrow::Cow;

/// The private-use code point of each reserved character (cifs_unicode.h above).
const RESERVED: [(char, char); 8] = [
    ('"', '\u{F020}'),
    ('*', '\u{F021}'),
    (':', '\u{F022}'),
    ('<', '\u{F023}'),
    ('>', '\u{F024}'),
    ('?', '\u{F025}'),
    ('\\', '\u{F026}'),
    ('|', '\u{F027}'),
];
const SPACE: char = '\u{F028}';
const PERIOD: char = '\u{F029}';
/// U+F001-U+F01F stand for the control characters 0x01-0x1F.
const CONTROL_BASE: u32 = 0xF000;

/// How names are sent to the server and shown from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameMap {
    /// The SFM mapping is on (`mapposix`, and the share has no POSIX extensions).
    pub sfm: bool,
}

impl NameMap {
    /// The mapping on or off.
    pub fn new(sfm: bool) -> NameMap {
        NameMap { sfm }
    }

    /// The name to send for the local name `name` (one component).
    pub fn to_server<'a>(&self, name: &'a str) -> Cow<'a, str> {
        if !self.sfm || !name.chars().any(needs_mapping) && !ends_badly(name) {
            return Cow::Borrowed(name);
        }
        let last = name.chars().count().saturating_sub(1);
        let dots = name == "." || name == "..";
        let mapped = name
            .chars()
            .enumerate()
            .map(|(i, c)| match c {
                ' ' if i == last => SPACE,
                '.' if i == last && !dots => PERIOD,
                c if (c as u32) >= 1 && (c as u32) < 0x20 => {
                    char::from_u32(CONTROL_BASE + c as u32).unwrap_or(c)
                }
                c => RESERVED
                    .iter()
                    .find(|(plain, _)| *plain == c)
                    .map_or(c, |(_, pua)| *pua),
            })
            .collect();
        Cow::Owned(mapped)
    }

    /// The local name to show for the name `name` the server gave.
    pub fn to_local<'a>(&self, name: &'a str) -> Cow<'a, str> {
        if !self.sfm || !name.chars().any(is_mapped) {
            return Cow::Borrowed(name);
        }
        Cow::Owned(
            name.chars()
                .map(|c| match c {
                    SPACE => ' ',
                    PERIOD => '.',
                    c if (c as u32) > CONTROL_BASE && (c as u32) < CONTROL_BASE + 0x20 => {
                        char::from_u32(c as u32 - CONTROL_BASE).unwrap_or(c)
                    }
                    c => RESERVED
                        .iter()
                        .find(|(_, pua)| *pua == c)
                        .map_or(c, |(plain, _)| *plain),
                })
                .collect(),
        )
    }

    /// Whether the local name `name` can be sent as it is: without the mapping, a `\` would
    /// split it into two components on the server, and a trailing space or period makes a
    /// name Samba shows only as an 8.3 mangled one.
    pub fn sendable(&self, name: &str) -> bool {
        self.sfm || !(name.contains('\\') || ends_badly(name))
    }
}

fn needs_mapping(c: char) -> bool {
    ((c as u32) >= 1 && (c as u32) < 0x20) || RESERVED.iter().any(|(plain, _)| *plain == c)
}

fn is_mapped(c: char) -> bool {
    (CONTROL_BASE + 1..=0xF029).contains(&(c as u32))
}

fn ends_badly(name: &str) -> bool {
    name != "." && name != ".." && (name.ends_with(' ') || name.ends_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reserved_character_and_a_trailing_dot_or_space_round_trip() {
        let m = NameMap::new(true);
        let cases = [
            ("a:b", "a\u{F022}b"),
            ("q?", "q\u{F025}"),
            ("*", "\u{F021}"),
            ("<>", "\u{F023}\u{F024}"),
            ("p|q", "p\u{F027}q"),
            ("say \"hi\"", "say \u{F020}hi\u{F020}"),
            ("back\\slash", "back\u{F026}slash"),
            ("dot.", "dot\u{F029}"),
            ("space ", "space\u{F028}"),
            ("two..", "two.\u{F029}"),
            ("a. b", "a. b"),
            (" lead", " lead"),
            ("bell\u{7}", "bell\u{F007}"),
            ("plain.txt", "plain.txt"),
            ("déjà vu", "déjà vu"),
        ];
        for (local, wire) in cases {
            assert_eq!(m.to_server(local), wire, "{local:?}");
            assert_eq!(m.to_local(wire), local, "{wire:?}");
        }
        assert_eq!(m.to_server("."), ".");
        assert_eq!(m.to_server(".."), "..");
        assert_eq!(m.to_server("..."), "..\u{F029}");
    }

    #[test]
    fn off_sends_names_as_they_are_and_refuses_what_would_break() {
        let m = NameMap::new(false);
        assert_eq!(m.to_server("a:b"), "a:b");
        assert_eq!(m.to_local("a\u{F022}b"), "a\u{F022}b");
        assert!(m.sendable("a:b"), "the server says whether it takes it");
        assert!(!m.sendable("a\\b"));
        assert!(!m.sendable("dot."));
        assert!(!m.sendable("space "));
        assert!(NameMap::new(true).sendable("a\\b."));
    }
}
