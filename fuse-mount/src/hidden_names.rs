//! The hidden names the mount moves files to when they are unlinked or replaced while open
//! (see `fs::silly`): made there, and left out of every listing and lookup (`dir_stream`).

const PREFIX: &str = ".smbfuse";

/// Whether `name` is one of the hidden names files unlinked while open are moved to.
pub(crate) fn is_hidden_name(name: &str) -> bool {
    name.strip_prefix(PREFIX).is_some_and(|tag| {
        tag.len() == 16
            && tag
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A fresh hidden name (random: two mounts of the share must not pick the same).
pub(crate) fn hidden_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    format!("{PREFIX}{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names_are_recognised_and_nothing_else() {
        let n = hidden_name();
        assert!(is_hidden_name(&n), "{n}");
        assert_eq!(n.len(), PREFIX.len() + 16);
        assert!(!is_hidden_name(".smbfuse"));
        assert!(!is_hidden_name(".smbfuse-0123456789abcdef"));
        assert!(!is_hidden_name(".smbfuse0123456789ABCDEF"));
        assert!(!is_hidden_name("x.smbfuse0123456789abcdef"));
    }
}
