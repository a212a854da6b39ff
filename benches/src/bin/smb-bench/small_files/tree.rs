//! The trees of the small-files mode: their layout (files spread over subdirectories, so
//! creating directories is part of the work), their contents (every file different, from the
//! fixed-seed generator), and the check that a copy is exactly the tree: every file with its
//! size and SHA-256, no directory missing, nothing extra.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use smb3_benches::data::{fingerprint, hex, mix, write_pattern, Fingerprint};
use smb3_benches::Context;

/// Files per subdirectory.
pub(crate) const FILES_PER_DIR: usize = 100;

/// How many files of which size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeSpec {
    pub(crate) files: usize,
    /// Bytes, a multiple of 8.
    pub(crate) file_size: u64,
    /// Each file's content comes from it and the file's number.
    pub(crate) seed: u64,
}

impl TreeSpec {
    /// `10000 x 4 KiB`.
    pub(crate) fn label(&self) -> String {
        let b = self.file_size;
        let unit = [(30, "GiB"), (20, "MiB"), (10, "KiB")]
            .into_iter()
            .find(|(s, _)| b >= 1 << s && b % (1 << s) == 0);
        let size = unit.map_or(format!("{b} B"), |(s, unit)| format!("{} {unit}", b >> s));
        format!("{} x {size}", self.files)
    }

    /// The tree's directory name on both sides, e.g. `tree-10000x4kib`.
    pub(crate) fn name(&self) -> String {
        format!("tree-{}", self.label().replace(' ', "").to_lowercase())
    }

    pub(crate) fn total_bytes(&self) -> u64 {
        self.files as u64 * self.file_size
    }

    pub(crate) fn dirs(&self) -> usize {
        self.files.div_ceil(FILES_PER_DIR)
    }

    /// Writes the tree under `root` (which must not exist yet): file `n` is `dNNN/fNNNNN`, so
    /// sorted names follow the numbers. Each file's seed is the tree's mixed with the file's
    /// number (splitmix64's finalizer), so neighbouring files share no stretch of content.
    pub(crate) fn write(&self, root: &Path) -> Result<Manifest, String> {
        let mut manifest = Manifest::default();
        for d in 0..self.dirs() {
            let dir = PathBuf::from(format!("d{d:03}"));
            std::fs::create_dir_all(root.join(&dir))
                .map_err(|e| format!("{}: {e}", root.join(&dir).display()))?;
            manifest.0.insert(dir, None);
        }
        for n in 0..self.files {
            let z = mix(self.seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let rel = PathBuf::from(format!("d{:03}/f{n:05}", n / FILES_PER_DIR));
            let fp = write_pattern(&root.join(&rel), z, self.file_size)?;
            manifest.0.insert(rel, Some(fp));
        }
        Ok(manifest)
    }
}

/// What a tree holds: every path under its root, a directory's with no fingerprint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Manifest(pub(crate) BTreeMap<PathBuf, Option<Fingerprint>>);

impl Manifest {
    /// Reads the tree under `root`. Anything neither a directory nor a regular file (a
    /// symlink) is recorded with an impossible fingerprint, so it never matches.
    pub(crate) fn read(root: &Path) -> Result<Manifest, String> {
        let (mut manifest, mut pending) = (Manifest::default(), vec![PathBuf::new()]);
        while let Some(rel) = pending.pop() {
            let dir = root.join(&rel);
            for entry in std::fs::read_dir(&dir).ctx(dir.display())? {
                let entry = entry.ctx(dir.display())?;
                let (child, kind) = (
                    rel.join(entry.file_name()),
                    entry.file_type().map_err(|e| e.to_string())?,
                );
                let fp = match kind {
                    k if k.is_dir() => {
                        pending.push(child.clone());
                        None
                    }
                    k if k.is_file() => Some(fingerprint(&entry.path())?),
                    _ => Some(Fingerprint {
                        len: u64::MAX,
                        sha256: "not a regular file".into(),
                    }),
                };
                manifest.0.insert(child, fp);
            }
        }
        Ok(manifest)
    }

    pub(crate) fn files(&self) -> u64 {
        self.0.values().flatten().count() as u64
    }

    pub(crate) fn total_bytes(&self) -> u64 {
        self.0.values().flatten().map(|f| f.len).sum()
    }

    /// One SHA-256 over the sorted directories, then the (path, size, SHA-256) of every file:
    /// equal digests mean equal trees.
    pub(crate) fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        for (d, _) in self.0.iter().filter(|(_, fp)| fp.is_none()) {
            hasher.update(format!("dir\t{}\n", d.display()));
        }
        for (path, fp) in self.0.iter().filter_map(|(p, fp)| Some((p, fp.as_ref()?))) {
            hasher.update(format!(
                "file\t{}\t{}\t{}\n",
                path.display(),
                fp.len,
                fp.sha256
            ));
        }
        hex(&hasher.finalize())
    }

    /// Fails, naming the first differences (missing, wrong size or content, not expected;
    /// directories end with `/`), unless the tree under `root` is exactly this one.
    pub(crate) fn verify(&self, root: &Path) -> Result<(), String> {
        let got = Manifest::read(root)?;
        let shown = |(p, fp): (&PathBuf, &Option<Fingerprint>)| match fp {
            None => p.join(""),
            Some(_) => p.clone(),
        };
        let missing = self
            .0
            .iter()
            .filter(|(p, _)| !got.0.contains_key(*p))
            .map(shown);
        let wrong = self
            .0
            .iter()
            .filter(|(p, fp)| got.0.get(*p).is_some_and(|g| g != *fp))
            .map(shown);
        let extra = got
            .0
            .iter()
            .filter(|(p, _)| !self.0.contains_key(*p))
            .map(shown);
        let mut parts = Vec::new();
        for (what, paths) in [
            ("missing", missing.collect()),
            ("wrong size or content", wrong.collect()),
            ("not expected", extra.collect::<Vec<_>>()),
        ] {
            let first: Vec<String> = paths
                .iter()
                .take(3)
                .map(|p| p.display().to_string())
                .collect();
            let more = if paths.len() > 3 {
                format!(", ... ({} in all)", paths.len())
            } else {
                String::new()
            };
            if !paths.is_empty() {
                parts.push(format!("{what}: {}{more}", first.join(", ")));
            }
        }
        match parts.is_empty() {
            true => Ok(()),
            false => Err(format!(
                "{} does not verify: {}",
                root.display(),
                parts.join("; ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_are_laid_out_deterministic_and_verified_exactly() {
        let spec = TreeSpec {
            files: 250,
            file_size: 4096,
            seed: 0x5eed,
        };
        assert_eq!(
            (spec.dirs(), spec.name(), spec.label()),
            (3, "tree-250x4kib".into(), "250 x 4 KiB".into())
        );
        assert_eq!(
            TreeSpec {
                files: 10,
                file_size: 1 << 20,
                seed: 1
            }
            .label(),
            "10 x 1 MiB"
        );
        let dir = std::env::temp_dir().join(format!("smb-bench-tree-{}", std::process::id()));
        let (a, b) = (dir.join("a"), dir.join("b"));
        let m = spec.write(&a).unwrap();
        assert_eq!(spec.write(&b).unwrap(), m);
        assert_eq!(
            (m.files(), m.0.len(), m.total_bytes()),
            (250, 253, spec.total_bytes())
        );
        let contents: std::collections::BTreeSet<_> =
            m.0.values().flatten().map(|f| &f.sha256).collect();
        assert_eq!(contents.len(), 250);
        m.verify(&b).unwrap();
        assert_eq!(Manifest::read(&b).unwrap().digest(), m.digest());
        std::fs::remove_file(b.join("d001/f00150")).unwrap();
        std::fs::write(b.join("d000/f00007"), b"short").unwrap();
        std::fs::write(b.join("d002/.f00249.smbcp-partial"), b"x").unwrap();
        std::fs::create_dir(b.join("stray")).unwrap();
        let err = m.verify(&b).unwrap_err();
        let want = "missing: d001/f00150; wrong size or content: d000/f00007; not expected: d002/.f00249.smbcp-partial, stray/";
        assert!(err.contains(want), "{err}");
        assert_ne!(Manifest::read(&b).unwrap().digest(), m.digest());
        std::fs::remove_dir_all(b.join("d002")).unwrap();
        assert!(m.verify(&b).unwrap_err().contains("d002/"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
