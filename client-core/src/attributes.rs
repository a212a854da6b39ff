//! DOS attributes as a typed set (MS-FSCC 2.6 File Attributes), so callers never handle the
//! raw FILE_ATTRIBUTE_* word.

use std::fmt;

use smb3_proto::msg::fscc::FileAttributes;

/// A set of DOS file attributes (MS-FSCC 2.6), as the server reports them in
/// [`crate::Metadata::attributes`] and as [`crate::Share::set_attributes`] sets them.
///
/// Bits this type has no name for are kept, so a value read from the server and written back
/// loses nothing.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DosAttributes(u32);

impl DosAttributes {
    /// FILE_ATTRIBUTE_READONLY: writes and deletion are refused.
    pub const READONLY: DosAttributes = DosAttributes(FileAttributes::READONLY);
    /// FILE_ATTRIBUTE_HIDDEN: not listed by default in Windows' shell.
    pub const HIDDEN: DosAttributes = DosAttributes(FileAttributes::HIDDEN);
    /// FILE_ATTRIBUTE_SYSTEM: used by the operating system.
    pub const SYSTEM: DosAttributes = DosAttributes(FileAttributes::SYSTEM);
    /// FILE_ATTRIBUTE_DIRECTORY: reported by the server, never set by a client.
    pub const DIRECTORY: DosAttributes = DosAttributes(FileAttributes::DIRECTORY);
    /// FILE_ATTRIBUTE_ARCHIVE: changed since the last backup cleared it.
    pub const ARCHIVE: DosAttributes = DosAttributes(FileAttributes::ARCHIVE);
    /// FILE_ATTRIBUTE_TEMPORARY: short-lived, may be kept in memory.
    pub const TEMPORARY: DosAttributes = DosAttributes(FileAttributes::TEMPORARY);
    /// FILE_ATTRIBUTE_SPARSE_FILE: reported by the server (set with FSCTL_SET_SPARSE).
    pub const SPARSE_FILE: DosAttributes = DosAttributes(FileAttributes::SPARSE_FILE);
    /// FILE_ATTRIBUTE_REPARSE_POINT: reported by the server.
    pub const REPARSE_POINT: DosAttributes = DosAttributes(FileAttributes::REPARSE_POINT);
    /// FILE_ATTRIBUTE_COMPRESSED: reported by the server.
    pub const COMPRESSED: DosAttributes = DosAttributes(FileAttributes::COMPRESSED);
    /// FILE_ATTRIBUTE_OFFLINE: the data is not immediately available.
    pub const OFFLINE: DosAttributes = DosAttributes(FileAttributes::OFFLINE);
    /// FILE_ATTRIBUTE_NOT_CONTENT_INDEXED: excluded from content indexing.
    pub const NOT_CONTENT_INDEXED: DosAttributes =
        DosAttributes(FileAttributes::NOT_CONTENT_INDEXED);
    /// FILE_ATTRIBUTE_ENCRYPTED: reported by the server.
    pub const ENCRYPTED: DosAttributes = DosAttributes(FileAttributes::ENCRYPTED);

    /// The attributes a client may change with FileBasicInformation. The others (directory,
    /// sparse, reparse point, compressed, encrypted) are set by other operations or not at
    /// all, and servers reject or ignore them in a SET_INFO (MS-FSCC 2.4.7).
    pub const SETTABLE: DosAttributes = DosAttributes(
        FileAttributes::READONLY
            | FileAttributes::HIDDEN
            | FileAttributes::SYSTEM
            | FileAttributes::ARCHIVE
            | FileAttributes::TEMPORARY
            | FileAttributes::OFFLINE
            | FileAttributes::NOT_CONTENT_INDEXED,
    );

    const NAMES: [(DosAttributes, &'static str); 12] = [
        (Self::READONLY, "readonly"),
        (Self::HIDDEN, "hidden"),
        (Self::SYSTEM, "system"),
        (Self::DIRECTORY, "directory"),
        (Self::ARCHIVE, "archive"),
        (Self::TEMPORARY, "temporary"),
        (Self::SPARSE_FILE, "sparse"),
        (Self::REPARSE_POINT, "reparse-point"),
        (Self::COMPRESSED, "compressed"),
        (Self::OFFLINE, "offline"),
        (Self::NOT_CONTENT_INDEXED, "not-content-indexed"),
        (Self::ENCRYPTED, "encrypted"),
    ];

    /// No attributes.
    pub const fn empty() -> Self {
        DosAttributes(0)
    }

    /// From the raw FILE_ATTRIBUTE_* word; FILE_ATTRIBUTE_NORMAL (which means "none of the
    /// others") becomes the empty set.
    pub const fn from_bits(bits: u32) -> Self {
        DosAttributes(bits & !FileAttributes::NORMAL)
    }

    /// The raw FILE_ATTRIBUTE_* word (0 for the empty set, never FILE_ATTRIBUTE_NORMAL).
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every attribute of `other` is set here.
    pub const fn contains(self, other: DosAttributes) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no attribute is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// These attributes with `other`'s added.
    pub const fn union(self, other: DosAttributes) -> Self {
        DosAttributes(self.0 | other.0)
    }

    /// These attributes without `other`'s.
    pub const fn difference(self, other: DosAttributes) -> Self {
        DosAttributes(self.0 & !other.0)
    }

    /// Only the attributes also in `other`.
    pub const fn intersection(self, other: DosAttributes) -> Self {
        DosAttributes(self.0 & other.0)
    }

    /// Add or remove `other`.
    pub fn set(&mut self, other: DosAttributes, on: bool) {
        *self = if on {
            self.union(other)
        } else {
            self.difference(other)
        };
    }

    /// The value FileBasicInformation carries to set exactly the settable attributes of this
    /// set: 0 there means "unchanged", so an empty set is sent as FILE_ATTRIBUTE_NORMAL
    /// (MS-FSCC 2.4.7, 2.6).
    pub(crate) fn to_wire_for_set(self) -> u32 {
        match self.intersection(Self::SETTABLE).0 {
            0 => FileAttributes::NORMAL,
            bits => bits,
        }
    }
}

impl std::ops::BitOr for DosAttributes {
    type Output = DosAttributes;
    fn bitor(self, rhs: DosAttributes) -> DosAttributes {
        self.union(rhs)
    }
}

impl fmt::Debug for DosAttributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DosAttributes({self})")
    }
}

/// Names joined by `|` (`readonly|archive`), `-` for none, unknown bits in hex.
impl fmt::Display for DosAttributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("-");
        }
        let mut rest = self.0;
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            let s = if first { "" } else { "|" };
            first = false;
            f.write_str(s)
        };
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                sep(f)?;
                f.write_str(name)?;
                rest &= !flag.0;
            }
        }
        if rest != 0 {
            sep(f)?;
            write!(f, "{rest:#x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_is_the_empty_set_both_ways() {
        assert!(DosAttributes::from_bits(FileAttributes::NORMAL).is_empty());
        assert_eq!(
            DosAttributes::empty().to_wire_for_set(),
            FileAttributes::NORMAL
        );
        // Only settable bits go out: the directory bit is the server's to report.
        let dir = DosAttributes::DIRECTORY | DosAttributes::HIDDEN;
        assert_eq!(dir.to_wire_for_set(), FileAttributes::HIDDEN);
    }

    #[test]
    fn display_names_and_unknown_bits() {
        let a = DosAttributes::READONLY | DosAttributes::ARCHIVE;
        assert_eq!(a.to_string(), "readonly|archive");
        assert_eq!(
            DosAttributes::from_bits(0x8_0000 | 2).to_string(),
            "hidden|0x80000"
        );
        assert_eq!(DosAttributes::empty().to_string(), "-");
        let mut b = a;
        b.set(DosAttributes::READONLY, false);
        assert_eq!(b, DosAttributes::ARCHIVE);
        assert!(a.contains(DosAttributes::ARCHIVE));
    }
}
