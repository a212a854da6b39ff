//! Credentials files in mount.cifs's format: `username=`, `password=` and `domain=` lines
//! (`user=`, `pass=` and `workgroup=` too), anything else ignored.
//!
//! The file holds a password, so it is read only when it is private: owned by this user (or
//! root) and neither readable nor writable by group or others, the rule ssh applies to
//! private keys. A password anyone on the machine can read is refused rather than used with
//! a warning (mount.cifs only warns): the fix, `chmod 600`, is one command, and a warning in
//! a nightly job's log is read by nobody. Its text and the password are wiped from memory
//! when dropped.

use std::fmt;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::Password;

/// What a credentials file says; a field the file does not set is `None`.
#[derive(Debug, Default)]
pub struct CredentialsFile {
    /// The first `username=` (or `user=`), trimmed.
    pub user: Option<String>,
    /// The last `password=` (or `pass=`), kept as written but for a line end.
    pub password: Option<Password>,
    /// The first `domain=` (or `workgroup=`), trimmed.
    pub domain: Option<String>,
}

impl CredentialsFile {
    /// Read the file at `path`, refusing one that is not private ([`read_private_file`]).
    pub fn read(path: &Path) -> Result<CredentialsFile, CredentialsFileError> {
        Ok(CredentialsFile::parse(&read_private_file(path)?))
    }

    /// The settings in a credentials file's text.
    pub fn parse(text: &str) -> CredentialsFile {
        let mut out = CredentialsFile::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            match k.trim() {
                "username" | "user" => {
                    out.user = out.user.or_else(|| Some(v.trim().to_string()));
                }
                "password" | "pass" => {
                    out.password = Some(v.trim_end_matches(['\r', '\n']).into());
                }
                "domain" | "workgroup" => {
                    out.domain = out.domain.or_else(|| Some(v.trim().to_string()));
                }
                _ => {}
            }
        }
        out
    }
}

/// Why a credentials file was not read.
#[derive(Debug)]
#[non_exhaustive]
pub enum CredentialsFileError {
    /// It could not be opened or read.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It belongs to another user than this one or root.
    NotOwned {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective user.
        me: u32,
    },
    /// Group or others may read or write it.
    NotPrivate {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

impl fmt::Display for CredentialsFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsFileError::Unreadable { path, source } => write!(
                f,
                "{}: cannot read credentials file: {source}",
                path.display()
            ),
            CredentialsFileError::NotOwned { path, owner, me } => write!(
                f,
                "{}: credentials file belongs to uid {owner}, not to this user (uid {me}) or \
                 root: refused",
                path.display()
            ),
            CredentialsFileError::NotPrivate { path, mode } => write!(
                f,
                "{shown}: credentials file is open to group or others (mode {mode:04o}): \
                 refused; make it private with: chmod 600 {shown}",
                shown = path.display()
            ),
        }
    }
}

impl std::error::Error for CredentialsFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CredentialsFileError::Unreadable { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The contents of a file that must be private (see the [module](self)'s rule), wiped from
/// memory when dropped. The checks are made on the open file, so the file read is the one
/// checked.
pub fn read_private_file(path: &Path) -> Result<Zeroizing<String>, CredentialsFileError> {
    use std::io::Read as _;
    let unreadable = |source| CredentialsFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let md = file.metadata().map_err(unreadable)?;
        let me = rustix::process::geteuid().as_raw();
        if md.uid() != me && md.uid() != 0 {
            return Err(CredentialsFileError::NotOwned {
                path: path.to_path_buf(),
                owner: md.uid(),
                me,
            });
        }
        if md.mode() & 0o077 != 0 {
            return Err(CredentialsFileError::NotPrivate {
                path: path.to_path_buf(),
                mode: md.mode() & 0o7777,
            });
        }
    }
    let mut text = Zeroizing::new(String::new());
    file.read_to_string(&mut text).map_err(unreadable)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_name_and_the_last_password_count() {
        let c = CredentialsFile::parse(
            "# comment\nusername = alice \nuser=bob\npass=one\npassword= two \r\n\
             workgroup=CORP\ndomain=OTHER\nnonsense\n",
        );
        assert_eq!(c.user.as_deref(), Some("alice"));
        assert_eq!(c.password.unwrap().expose_secret(), " two ");
        assert_eq!(c.domain.as_deref(), Some("CORP"));
        let c = CredentialsFile::parse("");
        assert!(c.user.is_none() && c.password.is_none() && c.domain.is_none());
    }

    #[test]
    fn a_credentials_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("smb3-creds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("creds");
        std::fs::write(&path, "username=alice\npassword=s3cret\n").unwrap();
        for loose in [0o644, 0o640, 0o604, 0o660, 0o602] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(loose)).unwrap();
            let e = read_private_file(&path).unwrap_err().to_string();
            assert!(
                e.contains("chmod 600") && !e.contains("s3cret"),
                "{loose:o}: {e}"
            );
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_private_file(&path).unwrap().contains("s3cret"));
        let c = CredentialsFile::read(&path).unwrap();
        assert_eq!(c.user.as_deref(), Some("alice"));
        // Another user's file, however private, is not this user's password.
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&path, Some(12345), None).unwrap();
            let e = read_private_file(&path).unwrap_err().to_string();
            assert!(e.contains("belongs to uid 12345"), "{e}");
        }
        let e = read_private_file(&dir.join("missing")).unwrap_err();
        assert!(
            matches!(e, CredentialsFileError::Unreadable { .. })
                && e.to_string().contains("cannot read credentials file"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
