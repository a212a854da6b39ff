//! The trees of the small-files benchmark: their layout (files spread over subdirectories, so
//! creating directories is part of the work), their deterministic contents (every file
//! different, from the fixed-seed generator), and the check that a copy is exactly the tree:
//! every file present with its size and SHA-256, no directory missing, nothing extra.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::data::{write_pattern, Fingerprint};

/// Files per subdirectory in every tree.
pub const FILES_PER_DIR: usize = 100;

/// The shape of one tree: how many files of which size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeSpec {
    /// Number of files.
    pub files: usize,
    /// Size of every file, bytes (a multiple of 8, as the generator writes 8-byte words).
    pub file_size: u64,
    /// Seed of the tree; each file's content comes from it and the file's number.
    pub seed: u64,
}

impl TreeSpec {
    /// The directory name of the tree on both sides, e.g. `tree-10000x4k`.
    pub fn name(&self) -> String {
        format!(
            "tree-{}x{}",
            self.files,
            size_label(self.file_size).to_lowercase()
        )
    }

    /// `10000 x 4 KiB`, for tables.
    pub fn label(&self) -> String {
        format!("{} x {}", self.files, spaced(&size_label(self.file_size)))
    }

    /// Bytes of all files together.
    pub fn total_bytes(&self) -> u64 {
        self.files as u64 * self.file_size
    }

    /// Number of subdirectories: [`FILES_PER_DIR`] files each, the last one possibly fewer.
    pub fn dirs(&self) -> usize {
        self.files.div_ceil(FILES_PER_DIR)
    }

    /// The relative path of file `n` (0-based): `dNNN/fNNNNN`, numbered so that sorted names
    /// follow the file numbers.
    pub fn file_path(&self, n: usize) -> PathBuf {
        PathBuf::from(format!("d{:03}", n / FILES_PER_DIR)).join(format!("f{n:05}"))
    }

    /// The content seed of file `n`: the tree's seed mixed with the file number
    /// (splitmix64's finalizer), so neighbouring files share no stretch of content.
    fn file_seed(&self, n: usize) -> u64 {
        let mut z = self.seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Writes the tree under `root` (which must not exist yet) and returns what it holds.
    pub fn write(&self, root: &Path) -> Result<Manifest, String> {
        let mut manifest = Manifest::default();
        for d in 0..self.dirs() {
            let dir = PathBuf::from(format!("d{d:03}"));
            let path = root.join(&dir);
            std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            manifest.dirs.insert(dir);
        }
        for n in 0..self.files {
            let rel = self.file_path(n);
            let fp = write_pattern(&root.join(&rel), self.file_seed(n), self.file_size)?;
            manifest.files.insert(rel, fp);
        }
        Ok(manifest)
    }
}

/// `4 KiB`, `1 MiB`, `100 B`: the largest binary unit that divides `bytes` (without the space,
/// which callers add or not).
fn size_label(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// `4KiB` -> `4 KiB`.
fn spaced(label: &str) -> String {
    let digits = label.chars().take_while(char::is_ascii_digit).count();
    format!("{} {}", &label[..digits], &label[digits..])
}

/// What a tree holds: its directories and its files (relative paths) with their fingerprints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Every directory below the root.
    pub dirs: BTreeSet<PathBuf>,
    /// Every regular file below the root.
    pub files: BTreeMap<PathBuf, Fingerprint>,
}

impl Manifest {
    /// Reads the tree under `root`. Anything that is neither a directory nor a regular file
    /// (a symlink, say) is recorded as a file with an impossible fingerprint, so it can never
    /// match.
    pub fn read(root: &Path) -> Result<Manifest, String> {
        let mut manifest = Manifest::default();
        let mut buf = vec![0u8; 1 << 20];
        let mut pending = vec![PathBuf::new()];
        while let Some(rel) = pending.pop() {
            let dir = root.join(&rel);
            let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
                let child = rel.join(entry.file_name());
                let kind = entry
                    .file_type()
                    .map_err(|e| format!("{}: {e}", entry.path().display()))?;
                if kind.is_dir() {
                    manifest.dirs.insert(child.clone());
                    pending.push(child);
                } else if kind.is_file() {
                    let fp = hash_file(&entry.path(), &mut buf)?;
                    manifest.files.insert(child, fp);
                } else {
                    let odd = Fingerprint {
                        len: u64::MAX,
                        sha256: "not a regular file".into(),
                    };
                    manifest.files.insert(child, odd);
                }
            }
        }
        Ok(manifest)
    }

    /// Bytes of all files together.
    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|f| f.len).sum()
    }

    /// One SHA-256 over the sorted list of directories and of (path, size, SHA-256) of every
    /// file: equal digests mean equal trees, and the header of the results shows it.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        for d in &self.dirs {
            hasher.update(format!("dir\t{}\n", d.display()));
        }
        for (path, fp) in &self.files {
            hasher.update(format!(
                "file\t{}\t{}\t{}\n",
                path.display(),
                fp.len,
                fp.sha256
            ));
        }
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// How `got` differs from this manifest (the expected one); empty when it is the same.
    pub fn differences(&self, got: &Manifest) -> Differences {
        let mut d = Differences::default();
        for (path, want) in &self.files {
            match got.files.get(path) {
                None => d.missing.push(path.clone()),
                Some(fp) if fp != want => d.wrong.push(path.clone()),
                Some(_) => {}
            }
        }
        d.missing
            .extend(self.dirs.difference(&got.dirs).map(|p| p.join("")));
        d.extra.extend(
            got.files
                .keys()
                .filter(|p| !self.files.contains_key(*p))
                .cloned(),
        );
        d.extra
            .extend(got.dirs.difference(&self.dirs).map(|p| p.join("")));
        d
    }

    /// Fails, naming the first differences, unless the tree under `root` is exactly this one.
    pub fn verify(&self, root: &Path) -> Result<(), String> {
        let got = Manifest::read(root)?;
        let diff = self.differences(&got);
        if diff.is_empty() {
            Ok(())
        } else {
            Err(format!("{} does not verify: {diff}", root.display()))
        }
    }
}

/// Size and SHA-256 of one file, read through `buf`.
fn hash_file(path: &Path, buf: &mut [u8]) -> Result<Fingerprint, String> {
    let mut file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    loop {
        let n = file
            .read(buf)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    let sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Fingerprint { len, sha256 })
}

/// What a copied tree got wrong. Directories end with `/`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Differences {
    /// Expected but absent.
    pub missing: Vec<PathBuf>,
    /// Present with another size or content.
    pub wrong: Vec<PathBuf>,
    /// Present but not expected.
    pub extra: Vec<PathBuf>,
}

impl Differences {
    /// True when the trees are the same.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.wrong.is_empty() && self.extra.is_empty()
    }
}

impl fmt::Display for Differences {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (what, paths) in [
            ("missing", &self.missing),
            ("wrong size or content", &self.wrong),
            ("not expected", &self.extra),
        ] {
            if paths.is_empty() {
                continue;
            }
            let first: Vec<String> = paths
                .iter()
                .take(3)
                .map(|p| p.display().to_string())
                .collect();
            let more = match paths.len() {
                n if n > 3 => format!(", ... ({n} in all)"),
                _ => String::new(),
            };
            parts.push(format!("{what}: {}{more}", first.join(", ")));
        }
        f.write_str(&parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("smb-bench-tree-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    const SPEC: TreeSpec = TreeSpec {
        files: 250,
        file_size: 4096,
        seed: 0x5eed,
    };

    #[test]
    fn layout_spreads_files_over_directories() {
        assert_eq!(SPEC.dirs(), 3);
        assert_eq!(SPEC.file_path(0), PathBuf::from("d000/f00000"));
        assert_eq!(SPEC.file_path(99), PathBuf::from("d000/f00099"));
        assert_eq!(SPEC.file_path(100), PathBuf::from("d001/f00100"));
        assert_eq!(SPEC.file_path(249), PathBuf::from("d002/f00249"));
        assert_eq!(SPEC.total_bytes(), 250 * 4096);
        assert_eq!(SPEC.name(), "tree-250x4kib");
        assert_eq!(SPEC.label(), "250 x 4 KiB");
        let big = TreeSpec {
            files: 1000,
            file_size: 1 << 20,
            seed: 1,
        };
        assert_eq!(big.dirs(), 10);
        assert_eq!(big.label(), "1000 x 1 MiB");
        assert_eq!(size_label(100), "100B");
        assert_eq!(size_label(3 << 10), "3KiB");
    }

    #[test]
    fn every_file_differs_and_writing_is_deterministic() {
        let (a, b) = (scratch("a"), scratch("b"));
        let ma = SPEC.write(&a).unwrap();
        let mb = SPEC.write(&b).unwrap();
        assert_eq!(ma, mb);
        assert_eq!(ma.files.len(), 250);
        assert_eq!(ma.dirs.len(), 3);
        assert_eq!(ma.total_bytes(), SPEC.total_bytes());
        let distinct: BTreeSet<&String> = ma.files.values().map(|f| &f.sha256).collect();
        assert_eq!(distinct.len(), 250);
        // What is on disk reads back as what was written.
        assert_eq!(Manifest::read(&a).unwrap(), ma);
        ma.verify(&b).unwrap();
        let other = TreeSpec {
            seed: 0x5eee,
            ..SPEC
        };
        let c = scratch("c");
        assert_ne!(other.write(&c).unwrap().digest(), ma.digest());
        for d in [a, b, c] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn verify_names_missing_wrong_and_extra() {
        let root = scratch("v");
        let m = SPEC.write(&root).unwrap();
        std::fs::remove_file(root.join("d001/f00150")).unwrap();
        std::fs::write(root.join("d000/f00007"), b"short").unwrap();
        std::fs::write(root.join("d002/.f00249.smbcp-partial"), b"x").unwrap();
        std::fs::create_dir(root.join("stray")).unwrap();
        let got = Manifest::read(&root).unwrap();
        let diff = m.differences(&got);
        assert_eq!(diff.missing, vec![PathBuf::from("d001/f00150")]);
        assert_eq!(diff.wrong, vec![PathBuf::from("d000/f00007")]);
        assert_eq!(
            diff.extra,
            vec![
                PathBuf::from("d002/.f00249.smbcp-partial"),
                PathBuf::from("stray/")
            ]
        );
        let err = m.verify(&root).unwrap_err();
        assert!(err.contains("missing: d001/f00150"), "{err}");
        assert!(
            err.contains("not expected: d002/.f00249.smbcp-partial, stray/"),
            "{err}"
        );
        assert_ne!(got.digest(), m.digest());
        // A missing directory is reported as such, not only its files.
        std::fs::remove_dir_all(root.join("d002")).unwrap();
        let diff = m.differences(&Manifest::read(&root).unwrap());
        assert!(diff.missing.contains(&PathBuf::from("d002/")));
        std::fs::remove_dir_all(root).unwrap();
    }
}
