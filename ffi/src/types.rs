//! The plain C structs and constants of the API, and their conversions.

use std::ffi::{c_char, c_int, c_void};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smb3_client::{DirEntry, FileTimes, FileType, Metadata};

/// A point in time as seconds and nanoseconds since 1970-01-01 00:00:00 UTC (SMB keeps 100 ns
/// steps). `is_set` false: the server did not report it (in `smb3_stat`), or leave it as it
/// is (in `smb3_file_times`).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct smb3_time {
    /// Seconds since the Unix epoch (negative before it).
    pub sec: i64,
    /// Nanoseconds, 0 to 999999999.
    pub nsec: u32,
    /// Whether this time is present.
    pub is_set: bool,
}

impl smb3_time {
    pub(crate) fn from_system(t: Option<SystemTime>) -> smb3_time {
        let Some(t) = t else {
            return smb3_time::default();
        };
        let (sec, nsec) = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
            Err(e) => {
                // Before 1970: floor to whole seconds, nanoseconds counted forwards.
                let d = e.duration();
                let (s, n) = (d.as_secs() as i64, d.subsec_nanos());
                if n == 0 {
                    (-s, 0)
                } else {
                    (-s - 1, 1_000_000_000 - n)
                }
            }
        };
        smb3_time {
            sec,
            nsec,
            is_set: true,
        }
    }

    /// `None` when not set; an error for nanoseconds out of range.
    pub(crate) fn to_system(self) -> Result<Option<SystemTime>, String> {
        if !self.is_set {
            return Ok(None);
        }
        if self.nsec >= 1_000_000_000 {
            return Err(format!("nsec {} is not below one second", self.nsec));
        }
        let t = if self.sec >= 0 {
            UNIX_EPOCH.checked_add(Duration::new(self.sec as u64, self.nsec))
        } else {
            UNIX_EPOCH
                .checked_sub(Duration::from_secs(self.sec.unsigned_abs()))
                .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(self.nsec))))
        };
        t.map(Some)
            .ok_or_else(|| format!("time {}s is out of range", self.sec))
    }
}

/// What a path names.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum smb3_file_type {
    /// A regular file (or a named stream).
    SMB3_TYPE_FILE = 0,
    /// A directory.
    SMB3_TYPE_DIRECTORY = 1,
}

/// Size, times and attributes of a file or directory (`smb3_share_stat`, `smb3_file_stat`,
/// listings).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug)]
pub struct smb3_stat {
    /// File or directory.
    pub file_type: smb3_file_type,
    /// DOS attributes (`SMB3_ATTR_*` bits, MS-FSCC 2.6).
    pub attributes: u32,
    /// Size in bytes.
    pub size: u64,
    /// Bytes the server allocated.
    pub allocation_size: u64,
    /// The server's file id (same for every hard link of a file); 0 when not reported.
    pub file_id: u64,
    /// Number of names (hard links); 1 where the server does not say (listings).
    pub links: u32,
    /// Creation time.
    pub created: smb3_time,
    /// Last access time.
    pub accessed: smb3_time,
    /// Last write time.
    pub modified: smb3_time,
    /// Last change time (data or attributes).
    pub changed: smb3_time,
}

impl From<&Metadata> for smb3_stat {
    fn from(m: &Metadata) -> smb3_stat {
        smb3_stat {
            file_type: match m.file_type {
                FileType::Directory => smb3_file_type::SMB3_TYPE_DIRECTORY,
                _ => smb3_file_type::SMB3_TYPE_FILE,
            },
            attributes: m.attributes.bits(),
            size: m.len,
            allocation_size: m.allocation_size,
            file_id: m.file_id,
            links: m.links,
            created: smb3_time::from_system(m.created),
            accessed: smb3_time::from_system(m.accessed),
            modified: smb3_time::from_system(m.modified),
            changed: smb3_time::from_system(m.changed),
        }
    }
}

impl From<&DirEntry> for smb3_stat {
    fn from(e: &DirEntry) -> smb3_stat {
        let mut s = smb3_stat::from(&e.metadata);
        if s.file_id == 0 {
            s.file_id = e.file_id;
        }
        s
    }
}

/// Times to set (`smb3_share_set_times`, `smb3_file_set_times`): the ones with `is_set`
/// false are left as they are.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default)]
pub struct smb3_file_times {
    /// Creation time.
    pub created: smb3_time,
    /// Last access time.
    pub accessed: smb3_time,
    /// Last write time.
    pub modified: smb3_time,
    /// Last change time.
    pub changed: smb3_time,
}

impl smb3_file_times {
    pub(crate) fn to_library(self) -> Result<FileTimes, String> {
        let mut t = FileTimes::new();
        t.created = self.created.to_system()?;
        t.accessed = self.accessed.to_system()?;
        t.modified = self.modified.to_system()?;
        t.changed = self.changed.to_system()?;
        Ok(t)
    }
}

/// FILE_ATTRIBUTE_READONLY.
pub const SMB3_ATTR_READONLY: u32 = 0x1;
/// FILE_ATTRIBUTE_HIDDEN.
pub const SMB3_ATTR_HIDDEN: u32 = 0x2;
/// FILE_ATTRIBUTE_SYSTEM.
pub const SMB3_ATTR_SYSTEM: u32 = 0x4;
/// FILE_ATTRIBUTE_DIRECTORY (reported only).
pub const SMB3_ATTR_DIRECTORY: u32 = 0x10;
/// FILE_ATTRIBUTE_ARCHIVE.
pub const SMB3_ATTR_ARCHIVE: u32 = 0x20;
/// FILE_ATTRIBUTE_TEMPORARY.
pub const SMB3_ATTR_TEMPORARY: u32 = 0x100;
/// FILE_ATTRIBUTE_SPARSE_FILE (reported only).
pub const SMB3_ATTR_SPARSE_FILE: u32 = 0x200;
/// FILE_ATTRIBUTE_REPARSE_POINT (reported only).
pub const SMB3_ATTR_REPARSE_POINT: u32 = 0x400;

/// Open for reading.
pub const SMB3_OPEN_READ: u32 = 1 << 0;
/// Open for writing.
pub const SMB3_OPEN_WRITE: u32 = 1 << 1;
/// Create the file if it does not exist.
pub const SMB3_OPEN_CREATE: u32 = 1 << 2;
/// Create the file; fail with `SMB3_ERR_EXISTS` if it exists.
pub const SMB3_OPEN_CREATE_NEW: u32 = 1 << 3;
/// Truncate an existing file to zero length.
pub const SMB3_OPEN_TRUNCATE: u32 = 1 << 4;
/// FILE_OPEN_FOR_BACKUP_INTENT: a user holding the backup/restore privileges passes the
/// file's access checks (harmless for others).
pub const SMB3_OPEN_BACKUP_INTENT: u32 = 1 << 5;
/// Delete the file when its last handle closes (scratch files; never durable).
pub const SMB3_OPEN_DELETE_ON_CLOSE: u32 = 1 << 6;
/// Also ask for READ_CONTROL, to read the security descriptor through the handle.
pub const SMB3_OPEN_READ_SECURITY: u32 = 1 << 7;
/// Also ask for WRITE_DAC and WRITE_OWNER, to set it through the handle.
pub const SMB3_OPEN_WRITE_SECURITY: u32 = 1 << 8;
/// Others may not read the file while it is open (clears FILE_SHARE_READ; by default every
/// kind of access is shared).
pub const SMB3_OPEN_DENY_READ: u32 = 1 << 9;
/// Others may not write the file while it is open (clears FILE_SHARE_WRITE): a backup that
/// reads with it knows nobody writes meanwhile.
pub const SMB3_OPEN_DENY_WRITE: u32 = 1 << 10;
/// Others may not delete or rename the file while it is open (clears FILE_SHARE_DELETE).
pub const SMB3_OPEN_DENY_DELETE: u32 = 1 << 11;
/// Every `SMB3_OPEN_*` flag.
pub const SMB3_OPEN_ALL_FLAGS: u32 = (1 << 12) - 1;

/// The owner SID of a security descriptor (OWNER_SECURITY_INFORMATION).
pub const SMB3_SECURITY_OWNER: u32 = 0x1;
/// The primary group SID (GROUP_SECURITY_INFORMATION).
pub const SMB3_SECURITY_GROUP: u32 = 0x2;
/// The DACL (DACL_SECURITY_INFORMATION).
pub const SMB3_SECURITY_DACL: u32 = 0x4;
/// The SACL (SACL_SECURITY_INFORMATION); needs SeSecurityPrivilege on the server.
pub const SMB3_SECURITY_SACL: u32 = 0x8;
/// Owner, group and DACL: what an ordinary user may read and a backup restores.
pub const SMB3_SECURITY_STANDARD: u32 = 0x7;

/// `smb3_connect_options.dispatch`: the library's default (round-robin, as Windows does).
pub const SMB3_DISPATCH_DEFAULT: u32 = 0;
/// Each request to the next healthy channel with credits, in turn.
pub const SMB3_DISPATCH_ROUND_ROBIN: u32 = 1;
/// Each request to the channel with the fewest bytes in flight (smbcp's choice for copies:
/// channels that bind later catch up).
pub const SMB3_DISPATCH_LEAST_LOADED: u32 = 2;

/// How to connect. Fill it with `smb3_connect_options_init` first, then change what you
/// need: new fields keep their defaults that way. Strings are borrowed for the duration of
/// the connect call only.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug)]
pub struct smb3_connect_options {
    /// Account name; required with a password. With Kerberos and a password, the
    /// principal's name without the realm. NULL with no password: the ticket's principal.
    pub user: *const c_char,
    /// NetBIOS domain or workgroup; NULL or "" for the server's own.
    pub domain: *const c_char,
    /// Password. The library keeps only what re-authentication needs (the NT hash for
    /// NTLM), wiped on free; the caller may wipe its copy after the call. NULL: Kerberos
    /// from the ticket cache or a keytab (see `auth`), through the system's GSS-API.
    pub password: *const c_char,
    /// Open extra channels over every usable NIC pair when the server offers multichannel
    /// (default true).
    pub multichannel: bool,
    /// Most channels per session, the first included; 0: the default (32).
    pub max_channels: u32,
    /// Channels per interface pair where both ends are RSS-capable; 0: the default (4).
    pub channels_per_rss_nic: u32,
    /// Channels per interface pair otherwise; 0: the default (1).
    pub channels_per_nic: u32,
    /// Bytes per READ/WRITE request (4 KiB to 8 MiB), clamped to the server's maximum; 0:
    /// the default (1 MiB).
    pub io_size: u32,
    /// How requests are spread over channels: `SMB3_DISPATCH_*` (a plain integer, so any
    /// value C passes is checked, not undefined behaviour).
    pub dispatch: u32,
    /// Encrypt the whole session (SMB 3.x), even where shares do not require it.
    pub encrypt: bool,
    /// TCP connect timeout in milliseconds; 0: the default (10 s).
    pub connect_timeout_ms: u32,
    /// Kerberos realm (`CORP.EXAMPLE`); set, the session authenticates with Kerberos,
    /// NULL: NTLMv2.
    pub kerberos_realm: *const c_char,
    /// The realm's KDC: `host`, `host:port`, `tcp://host:port` or `udp://host:port`; NULL:
    /// found from `/etc/krb5.conf`.
    pub kerberos_kdc: *const c_char,
    /// Host name in the service principal `cifs/<host>` when it differs from the server
    /// name connected to (connecting by address); NULL: the server name.
    pub kerberos_service_host: *const c_char,
    /// With Kerberos, fall back to NTLMv2 when Kerberos cannot be used (default false).
    pub ntlm_fallback: bool,
    /// How the session authenticates: `SMB3_AUTH_AUTO` (Kerberos from the ticket cache or
    /// keytab without a password; with one, Kerberos when `kerberos_realm` is set, else
    /// NTLMv2), `SMB3_AUTH_KERBEROS` (never NTLM) or `SMB3_AUTH_NTLM`.
    pub auth: u32,
    /// The Kerberos credential cache (`FILE:/tmp/krb5cc_1000`, `DIR:...`, `KEYRING:...`,
    /// `KCM:...`); NULL: `KRB5CCNAME`, else krb5.conf's default.
    pub kerberos_ccache: *const c_char,
    /// A client keytab to get tickets from (a backup job's); its tickets stay in this
    /// process's memory. NULL: none.
    pub kerberos_keytab: *const c_char,
    /// The client principal (`backup@CORP.EXAMPLE`) to take from the cache or keytab; NULL:
    /// the cache's default principal, or the keytab's first entry.
    pub kerberos_principal: *const c_char,
}

/// `smb3_connect_options.auth`: Kerberos from the ticket cache or keytab without a password;
/// with one, Kerberos when a realm is set, NTLMv2 otherwise (the default).
pub const SMB3_AUTH_AUTO: u32 = 0;
/// Kerberos only (mount.cifs's `sec=krb5`): never NTLM.
pub const SMB3_AUTH_KERBEROS: u32 = 1;
/// NTLMv2 only (`sec=ntlmssp`), with the password.
pub const SMB3_AUTH_NTLM: u32 = 2;

/// Give each copy its source's times: a download sets the local file's (and directory's)
/// access and modification times, an upload the remote file's last-write and access times.
pub const SMB3_COPY_PRESERVE_TIMES: u32 = 1 << 0;
/// Open the share's files with backup intent (FILE_OPEN_FOR_BACKUP_INTENT).
pub const SMB3_COPY_BACKUP_INTENT: u32 = 1 << 1;
/// Replace an existing destination file (without it the copy fails with `SMB3_ERR_EXISTS`).
pub const SMB3_COPY_OVERWRITE: u32 = 1 << 2;
/// Every `SMB3_COPY_*` flag.
pub const SMB3_COPY_ALL_FLAGS: u32 = (1 << 3) - 1;

/// Where a copy is, handed to its progress callback.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct smb3_progress {
    /// The file being copied (share-relative for the share's side); borrowed, valid during
    /// the callback only.
    pub path: *const c_char,
    /// Bytes of this file copied so far.
    pub file_bytes_done: u64,
    /// This file's size.
    pub file_bytes_total: u64,
    /// Bytes of every file copied so far by this call.
    pub bytes_done: u64,
    /// Files finished so far by this call.
    pub files_done: u64,
    /// Files found so far (a tree copy finds them as it walks; grows until the walk ends).
    pub files_total: u64,
}

/// A progress callback: called on the thread that made the copy call (never another), when a
/// file starts, as its data arrives (at most every chunk) and when it ends. Return 0 to go on,
/// anything else to cancel: the call then returns `SMB3_ERR_CANCELLED`. It may call other
/// smb3_ functions.
#[allow(non_camel_case_types)]
pub type smb3_progress_fn =
    Option<unsafe extern "C" fn(progress: *const smb3_progress, user_data: *mut c_void) -> c_int>;

/// A named stream of a file (`smb3_share_streams`).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct smb3_stream {
    /// `::$DATA` for the default stream, `:name:$DATA` for a named one. Owned by the array.
    pub name: *mut c_char,
    /// The stream's size in bytes.
    pub size: u64,
    /// Bytes allocated for it.
    pub allocation_size: u64,
}

/// A snapshot ("previous version") of a share (`smb3_share_snapshots`).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct smb3_snapshot {
    /// Its token, `@GMT-YYYY.MM.DD-HH.MM.SS`. Owned by the array.
    pub token: *mut c_char,
    /// When it was taken.
    pub time: smb3_time,
}

/// Bytes returned by the library (a security descriptor). Free with `smb3_buffer_free`.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct smb3_buffer {
    /// The bytes; NULL when `len` is 0.
    pub data: *mut u8,
    /// How many.
    pub len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_on_both_sides_of_the_epoch() {
        for (sec, nsec) in [
            (0, 0),
            (1_700_000_000, 123_456_700),
            (-1, 500),
            (-86_400, 0),
        ] {
            let t = smb3_time {
                sec,
                nsec,
                is_set: true,
            };
            let back = smb3_time::from_system(t.to_system().unwrap());
            assert_eq!(back, t);
        }
        assert_eq!(smb3_time::default().to_system().unwrap(), None);
        let bad = smb3_time {
            sec: 0,
            nsec: 1_000_000_000,
            is_set: true,
        };
        assert!(bad.to_system().is_err());
    }
}
