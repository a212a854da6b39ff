//! Handing a session's keys to the application, so that a packet capture of a signed or
//! encrypted session can be read (the SMB counterpart of TLS's `SSLKEYLOGFILE`).
//!
//! Off unless [`ClientConfig::key_log`](crate::ClientConfig::key_log) is set: whoever holds
//! these keys can read and forge the session's traffic. The client calls the log once per
//! session set-up (again after a reconnect, which makes a new session) and once per channel
//! bound to it, since every bound channel signs with its own key (MS-SMB2 3.2.5.3.3).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use smb3_proto::{Cipher, Dialect, SigningAlgorithm};

/// The keys of one session, or of one channel bound to it.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    /// SessionId as the server assigned it.
    pub session_id: u64,
    /// Dialect of the connection the keys were made on.
    pub dialect: Dialect,
    /// How messages on this channel are signed.
    pub signing_algorithm: SigningAlgorithm,
    /// The session's cipher, if one was negotiated.
    pub cipher: Option<Cipher>,
    /// Session.SessionKey (MS-SMB2 3.2.1.3): what authentication produced, first 16 bytes.
    /// For a bound channel, the binding's own.
    pub session_key: Vec<u8>,
    /// The key this channel signs with: Session.SigningKey for the first channel,
    /// Channel.SigningKey for a bound one.
    pub signing_key: Vec<u8>,
    /// Session.EncryptionKey (client to server), when a cipher was negotiated.
    pub encryption_key: Option<Vec<u8>>,
    /// Session.DecryptionKey (server to client), when a cipher was negotiated.
    pub decryption_key: Option<Vec<u8>>,
    /// Whether these are the keys of a channel bound to an existing session.
    pub bound_channel: bool,
}

impl std::fmt::Debug for SessionKeys {
    /// Names the session, never a key: a `{:?}` in a log line must not leak them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeys")
            .field("session_id", &format_args!("{:#018x}", self.session_id))
            .field("dialect", &self.dialect)
            .field("bound_channel", &self.bound_channel)
            .finish_non_exhaustive()
    }
}

impl SessionKeys {
    /// One line of the key-log file: `SMB3 <fields>`, each field `name=value`, keys in hex.
    ///
    /// `session_id` is the 8 bytes as they appear on the wire (little-endian), in hex: the
    /// form a capture tool's table of session keys is searched by. `c2s`/`s2c` are the
    /// encryption and decryption keys, named by direction.
    pub fn to_line(&self) -> String {
        let mut line = format!(
            "SMB3 session_id={} dialect={} signing={:?} bound_channel={} session_key={} signing_key={}",
            hex(&self.session_id.to_le_bytes()),
            self.dialect,
            self.signing_algorithm,
            self.bound_channel,
            hex(&self.session_key),
            hex(&self.signing_key),
        );
        if let (Some(c2s), Some(s2c)) = (&self.encryption_key, &self.decryption_key) {
            let _ = write!(line, " c2s={} s2c={}", hex(c2s), hex(s2c));
        }
        line
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Where the client hands the keys of every session and bound channel it sets up.
#[derive(Clone)]
pub struct KeyLog(Arc<dyn Fn(&SessionKeys) + Send + Sync>);

impl std::fmt::Debug for KeyLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyLog(..)")
    }
}

impl KeyLog {
    /// Call `record` with the keys of every session and bound channel.
    pub fn new(record: impl Fn(&SessionKeys) + Send + Sync + 'static) -> KeyLog {
        KeyLog(Arc::new(record))
    }

    /// Append one line per session and bound channel ([`SessionKeys::to_line`]) to the file at
    /// `path`, created readable by its owner only. A failed write is logged, never fatal.
    pub fn append_to(path: &Path) -> std::io::Result<KeyLog> {
        let file = Mutex::new(open_private_append(path)?);
        let shown = path.display().to_string();
        Ok(KeyLog::new(move |keys| {
            let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = writeln!(file, "{}", keys.to_line()) {
                tracing::warn!(path = %shown, error = %e, "writing the key log failed");
            }
        }))
    }

    pub(crate) fn record(&self, keys: &SessionKeys) {
        (self.0)(keys)
    }
}

/// Open `path` to append keys, private to this user: created 0600; never through a symbolic
/// link (one planted at a predictable path would send the keys elsewhere); refused when it is
/// not a regular file or belongs to another user; an existing file open to group or others
/// is made 0600 first.
fn open_private_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::io::{Error, ErrorKind};
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            return Error::new(
                ErrorKind::InvalidInput,
                "is a symbolic link: refused (a key log must be a file of its own)",
            );
        }
        e
    })?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let me = rustix::process::geteuid().as_raw();
        if md.uid() != me {
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!("belongs to uid {}, not to this user (uid {me})", md.uid()),
            ));
        }
        if md.mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> SessionKeys {
        SessionKeys {
            session_id: 0x0000_0400_0000_0019,
            dialect: Dialect::Smb311,
            signing_algorithm: SigningAlgorithm::AesGmac,
            cipher: Some(Cipher::Aes128Gcm),
            session_key: vec![0x42; 16],
            signing_key: vec![0x01, 0xab],
            encryption_key: Some(vec![0x02]),
            decryption_key: Some(vec![0x03]),
            bound_channel: false,
        }
    }

    #[test]
    fn a_line_names_the_session_as_on_the_wire_and_every_key_in_hex() {
        assert_eq!(
            keys().to_line(),
            "SMB3 session_id=1900000000040000 dialect=3.1.1 signing=AesGmac bound_channel=false \
             session_key=42424242424242424242424242424242 signing_key=01ab c2s=02 s2c=03"
        );
    }

    #[test]
    fn debug_output_shows_no_key() {
        let shown = format!("{:?}", keys());
        assert!(!shown.contains("4242"), "{shown}");
        assert!(shown.contains("0x0000040000000019"), "{shown}");
    }

    #[test]
    fn the_file_gets_one_line_per_record_and_only_its_owner_may_read_it() {
        let dir = std::env::temp_dir().join(format!("smb3-keylog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys.log");
        let _ = std::fs::remove_file(&path);
        let log = KeyLog::append_to(&path).unwrap();
        log.record(&keys());
        log.record(&SessionKeys {
            bound_channel: true,
            ..keys()
        });
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.lines().nth(1).unwrap().contains("bound_channel=true"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_refused_and_a_loose_file_is_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("smb3-keylog-ln-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let elsewhere = dir.join("victim");
        std::fs::write(&elsewhere, b"untouched").unwrap();
        let planted = dir.join("keys.log");
        std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
        let e = KeyLog::append_to(&planted).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"untouched");

        let loose = dir.join("loose.log");
        std::fs::write(&loose, b"").unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        KeyLog::append_to(&loose).unwrap().record(&keys());
        let mode = std::fs::metadata(&loose).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        assert!(
            KeyLog::append_to(&dir).is_err(),
            "a directory is no key log"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
