//! `-o` mount options, named like mount.cifs where one exists. Unknown options are an error.

use std::path::PathBuf;
use std::time::Duration;

use smb3_client::{Auth, ClientConfig, Dialect, Dispatch};
use smb3_frontend::transport::{QuicOnly, TransportOptions};
use smb3_frontend::KerberosOptions;

use crate::fs::ReparseForm;

/// How file data is cached in the kernel (mount.cifs `cache=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// Close-to-open: cached pages are dropped when a file is opened again (the default).
    Strict,
    /// No page cache: every read and write goes to the server (FUSE direct I/O).
    None,
}

/// Every setting `-o` can make.
#[derive(Clone, Debug, PartialEq)]
pub struct MountOptions {
    /// `username=` / `user=`.
    pub username: Option<String>,
    /// `domain=` / `dom=` / `workgroup=`.
    pub domain: Option<String>,
    /// `credentials=` / `cred=`: a mount.cifs credentials file.
    pub credentials: Option<PathBuf>,
    /// `uid=`: owner shown for every file (default: the mounting user).
    pub uid: u32,
    /// `gid=`: group shown for every file (default: the mounting user's group).
    pub gid: u32,
    /// `file_mode=` (octal, default 0755 as mount.cifs).
    pub file_mode: u32,
    /// `dir_mode=` (octal, default 0755).
    pub dir_mode: u32,
    /// `vers=`: the dialects offered (`2.1`, `3`, `3.0`, `3.02`, `3.1.1`, `default`). `None`
    /// keeps the library's range, SMB 3.0 to 3.1.1: 2.1 has no protection against a man in
    /// the middle who rewrites NEGOTIATE to downgrade the connection, so it is offered only
    /// when asked for by name.
    pub dialects: Option<(Dialect, Dialect)>,
    /// `sign` (the default): every reply must be signed (or sealed), and a guest session,
    /// which cannot sign, is refused. `nosign` turns both off: UNSAFE, for servers that
    /// cannot sign; anyone on the path can then alter what the server sends.
    pub require_signing: bool,
    /// `seal`: encrypt the whole session.
    pub seal: bool,
    /// `posix` (the default) / `noposix`: use the SMB3 POSIX extensions when the server
    /// offers them (real modes, owners, symlinks, special files, case-sensitive names).
    pub posix: bool,
    /// `dfs` (the default) / `nodfs`: follow DFS referrals, so a source path behind a link of
    /// a DFS share mounts the share that holds it (mount.cifs's `nodfs`).
    pub dfs: bool,
    /// `actimeo=` seconds: how long attributes and names are cached (default 1).
    pub actimeo: Duration,
    /// `cache=strict|none`.
    pub cache: CacheMode,
    /// `rsize=` bytes per READ request.
    pub rsize: Option<u32>,
    /// `wsize=` bytes per WRITE request.
    pub wsize: Option<u32>,
    /// `hard`: retry operations that failed because the server went away, without bound;
    /// `soft` (the default) returns an error once the library's timeouts expire.
    pub hard: bool,
    /// `max_channels=`.
    pub max_channels: Option<usize>,
    /// `channels_per_nic=` (not in mount.cifs).
    pub channels_per_nic: Option<usize>,
    /// `nomultichannel` (`multichannel` turns it back on).
    pub multichannel: bool,
    /// `dispatch=round-robin|least-loaded`.
    pub dispatch: Option<Dispatch>,
    /// `port=`: the server's port (TCP, or UDP with `transport=quic`), over the source's.
    pub port: Option<u16>,
    /// `transport=tcp|quic`, and for QUIC `cafile=FILE` and `pinsha256=BASE64` (repeatable):
    /// the same values smbcp's `--transport`, `--ca-file` and `--pin-sha256` take.
    pub transport: TransportOptions,
    /// `sec=krb5|ntlmssp` (mount.cifs's; without it, a Kerberos ticket is used when no
    /// password is given and one is in the cache), `keytab=FILE`, `krb5_ccache=CACHE`,
    /// `krb5_principal=NAME`: Kerberos from a ticket cache or keytab; `krb5_realm=` (also
    /// `SMB_KRB_REALM`): Kerberos with the password, `kdc=` (also `SMB_KRB_KDC`) and
    /// `ntlm_fallback` with it; `spn_host=`: the server's name for `cifs/NAME`.
    pub kerberos: KerberosOptions,
    /// `allow_other`: users other than the mounting one may use the mount.
    pub allow_other: bool,
    /// `allow_root`: root may use it too.
    pub allow_root: bool,
    /// `default_permissions`: the kernel checks the shown modes before asking the server.
    pub default_permissions: bool,
    /// `perm` (the default, as mount.cifs) / `noperm`: with `allow_other`, `perm` makes the
    /// kernel check the shown modes (`default_permissions`) before another local user acts
    /// with the SMB user's rights; `noperm` lets every local user act with them.
    pub perm: bool,
    /// `ro` (`rw` is the default).
    pub read_only: bool,
    /// `max_readahead=` bytes: the kernel's read-ahead window for sequential readers
    /// (default 8 MiB, at most 64 MiB).
    pub max_readahead: u32,
    /// `max_write=` bytes per FUSE WRITE (default and kernel maximum 1 MiB).
    pub max_write: u32,
    /// `threads=`: FUSE request threads (Linux; default 4).
    pub threads: usize,
    /// `nobrl`: keep fcntl/flock locks on this machine only (`brl`, the default, sends them
    /// to the server as SMB2 LOCKs).
    pub server_locks: bool,
    /// `prefetch=`: the largest read-ahead window of one sequential reader in the daemon
    /// (default 64M; 0 turns it off; the mount keeps at most four such windows fetched).
    pub prefetch: u64,
    /// `write_behind=`: bytes of writes in flight behind the applications, per mount
    /// (default 64M; 0 answers each write only once the server has it).
    pub write_behind: u64,
    /// `watch_dirs=`: directories in use watched for other clients' changes at once
    /// (CHANGE_NOTIFY; default 32, 0 turns watching off and leaves `actimeo` alone).
    pub watch_dirs: usize,
    /// `closetimeo=` seconds a read-only handle whose lease grants Read and Handle caching
    /// stays open after its last close, to be reused with its cached pages (default 5, 0: closed
    /// at once; mount.cifs's option, whose default is 1).
    pub closetimeo: Duration,
    /// `mapposix` (the default) / `nomapposix`: on a share without the POSIX extensions,
    /// the characters Windows forbids in names (`" * : < > ? | \\` and a trailing space or
    /// period) are sent as the Unicode private-use characters the Linux kernel client's SFM
    /// mapping uses, and shown as themselves again (mount.cifs's `mapposix`).
    pub mapposix: bool,
    /// `mfsymlinks`: on a share without the POSIX extensions, symbolic links are made and
    /// read as Minshall+French files (as mount.cifs's `mfsymlinks`).
    pub mfsymlinks: bool,
    /// `modefromsid`: on a share without the POSIX extensions, a file's mode is kept in its
    /// DACL (an S-1-5-88-3-MODE ACE beside ACEs derived from it) and shown from there, as
    /// mount.cifs's `modefromsid` (see `smb3_client::mode_from_descriptor`).
    pub modefromsid: bool,
    /// `reparse=native|nfs|none`: on a share without the POSIX extensions (and without
    /// `mfsymlinks` for links), how `symlink(2)` and `mknod(2)` of a FIFO, socket or device
    /// are kept: as reparse points, links in Windows' form (`native`, the default) or NFS's
    /// (`nfs`), special files in NFS's; or not at all (`none`: EPERM). mount.cifs's option of
    /// that name (Linux 6.10; its `wsl` form is not made here).
    pub reparse: ReparseForm,
    /// `user_xattr` / `nouser_xattr` (the default): `user.*` extended attributes kept as the
    /// files' SMB extended attributes (mount.cifs's option of that name). Off by default: a
    /// FUSE file system that answers xattr requests is asked for `security.capability`
    /// before every write(2), which costs small writes a round trip to the daemon.
    pub user_xattr: bool,
    /// Generic mount flags passed on to the kernel (`nodev`, `nosuid`, `noexec`, `noatime`...).
    pub kernel_flags: Vec<String>,
}

/// Most directories watched at once: each holds an open handle and a pending request (one
/// credit) at the server.
pub const MAX_WATCH_DIRS: usize = 256;

/// 1 MiB: the largest FUSE request the kernel sends (256 pages).
pub const MAX_FUSE_IO: u32 = 1 << 20;

/// Largest read-ahead window accepted (64 MiB).
pub const MAX_READAHEAD: u32 = 64 << 20;

/// Default read-ahead window: 8 MiB, eight 1 MiB READs in flight for a sequential reader
/// (sixteen for one that asks for sequential access with `posix_fadvise`, as `cp` and fio
/// do). Measured on four 1 Gbit/s links: with 4 or 8 MiB `dd` reads at their line rate
/// (476 MB/s), with 32 MiB no faster (453-454); and a larger window costs CPU: the pages are
/// filled long before the reader copies them out, so that copy misses the CPU caches
/// (unshaped, fio read 808-858 MB/s with 32 MiB against 1055-1136 with 8 MiB).
pub const DEFAULT_READAHEAD: u32 = 8 << 20;

/// Largest `prefetch=`: more than enough to keep 32 channels busy with 1 MiB READs.
pub const MAX_PREFETCH: u64 = 256 << 20;

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            username: None,
            domain: None,
            credentials: None,
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
            file_mode: 0o755,
            dir_mode: 0o755,
            dialects: None,
            require_signing: true,
            seal: false,
            posix: true,
            mapposix: true,
            mfsymlinks: false,
            modefromsid: false,
            reparse: ReparseForm::Native,
            user_xattr: false,
            dfs: true,
            actimeo: Duration::from_secs(1),
            cache: CacheMode::Strict,
            rsize: None,
            wsize: None,
            hard: false,
            max_channels: None,
            channels_per_nic: None,
            multichannel: true,
            dispatch: None,
            port: None,
            transport: TransportOptions::default(),
            kerberos: KerberosOptions {
                realm: std::env::var("SMB_KRB_REALM").ok(),
                kdc: std::env::var("SMB_KRB_KDC").ok(),
                spn_host: None,
                ntlm_fallback: false,
                ..KerberosOptions::default()
            },
            allow_other: false,
            allow_root: false,
            default_permissions: false,
            perm: true,
            read_only: false,
            max_readahead: DEFAULT_READAHEAD,
            max_write: MAX_FUSE_IO,
            threads: 4,
            write_behind: 64 << 20,
            prefetch: 64 << 20,
            watch_dirs: 32,
            closetimeo: Duration::from_secs(5),
            server_locks: true,
            kernel_flags: Vec::new(),
        }
    }
}

/// Generic mount(8) options: passed to the kernel as they are.
const KERNEL_FLAGS: &[&str] = &[
    "dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime", "dirsync", "sync",
    "async",
];

/// Options mount(8), fstab and mount.fuse3 may pass that mean nothing to the mount itself.
const IGNORED: &[&str] = &[
    "defaults",
    "_netdev",
    "nofail",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "diratime",
    "nodiratime",
    "lazytime",
    "nolazytime",
    "silent",
    "loud",
];

fn octal(name: &str, v: &str) -> Result<u32, String> {
    let mode = u32::from_str_radix(v, 8)
        .map_err(|_| format!("option {name}={v}: not an octal mode (e.g. 0644)"))?;
    if mode > 0o7777 {
        return Err(format!("option {name}={v}: mode out of range"));
    }
    Ok(mode)
}

fn number<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("option {name}={v}: not a number"))
}

/// A byte size: plain bytes, or with a K/M suffix (KiB, MiB).
fn size(name: &str, v: &str) -> Result<u32, String> {
    let (digits, unit) = match v.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => v.split_at(i),
        None => (v, ""),
    };
    let n: u32 = number(name, digits)?;
    let mul = match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        _ => return Err(format!("option {name}={v}: unknown unit {unit:?}")),
    };
    n.checked_mul(mul)
        .filter(|n| *n >= 4096)
        .ok_or_else(|| format!("option {name}={v}: out of range (4 KiB and up)"))
}

fn dialects(v: &str) -> Result<Option<(Dialect, Dialect)>, String> {
    let one = |d| Ok(Some((d, d)));
    match v {
        "default" => Ok(None),
        "2.1" => one(Dialect::Smb210),
        "3" => Ok(Some((Dialect::Smb300, Dialect::Smb311))),
        "3.0" => one(Dialect::Smb300),
        "3.02" | "3.0.2" => one(Dialect::Smb302),
        "3.1.1" | "3.11" => one(Dialect::Smb311),
        other => Err(format!(
            "option vers={other}: unknown dialect (2.1, 3, 3.0, 3.02, 3.1.1 or default)"
        )),
    }
}

impl MountOptions {
    /// Parse the comma-separated lists given with `-o` (several `-o` add up). A later value
    /// wins over an earlier one.
    pub fn parse<S: AsRef<str>>(lists: &[S]) -> Result<MountOptions, String> {
        let mut o = MountOptions::default();
        for list in lists {
            for opt in list.as_ref().split(',').filter(|s| !s.is_empty()) {
                o.apply(opt)?;
            }
        }
        Ok(o)
    }

    fn apply(&mut self, opt: &str) -> Result<(), String> {
        let (name, value) = match opt.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (opt, None),
        };
        let need = || value.ok_or_else(|| format!("option {name} needs a value ({name}=...)"));
        match name {
            "username" | "user" if value.is_some() => self.username = Some(need()?.to_string()),
            "domain" | "dom" | "workgroup" => self.domain = Some(need()?.to_string()),
            "credentials" | "cred" => self.credentials = Some(PathBuf::from(need()?)),
            "password" | "pass" => {
                return Err(
                    "option password= is refused: a password on the command line shows \
                     in process lists; use credentials=FILE or SMB_PASSWORD"
                        .into(),
                )
            }
            "uid" => self.uid = number(name, need()?)?,
            "gid" => self.gid = number(name, need()?)?,
            "file_mode" => self.file_mode = octal(name, need()?)?,
            "dir_mode" => self.dir_mode = octal(name, need()?)?,
            "vers" => self.dialects = dialects(need()?)?,
            "sign" => self.require_signing = true,
            "nosign" => self.require_signing = false,
            "seal" => self.seal = true,
            "posix" | "unix" => self.posix = true,
            "noposix" | "nounix" => self.posix = false,
            "mapposix" => self.mapposix = true,
            "nomapposix" => self.mapposix = false,
            "mfsymlinks" => self.mfsymlinks = true,
            "nomfsymlinks" => self.mfsymlinks = false,
            "modefromsid" => self.modefromsid = true,
            "nomodefromsid" => self.modefromsid = false,
            "reparse" => {
                self.reparse = match need()? {
                    "native" | "default" => ReparseForm::Native,
                    "nfs" => ReparseForm::Nfs,
                    "none" => ReparseForm::None,
                    v => {
                        return Err(format!(
                            "option reparse={v}: use reparse=native, reparse=nfs or reparse=none"
                        ))
                    }
                }
            }
            "user_xattr" => self.user_xattr = true,
            "nouser_xattr" => self.user_xattr = false,
            "dfs" => self.dfs = true,
            "nodfs" => self.dfs = false,
            "actimeo" => self.actimeo = Duration::from_secs(number(name, need()?)?),
            "cache" => {
                self.cache = match need()? {
                    "strict" => CacheMode::Strict,
                    "none" => CacheMode::None,
                    v => return Err(format!("option cache={v}: use cache=strict or cache=none")),
                }
            }
            "rsize" => self.rsize = Some(size(name, need()?)?),
            "wsize" => self.wsize = Some(size(name, need()?)?),
            "hard" => self.hard = true,
            "soft" => self.hard = false,
            "max_channels" => {
                let n: usize = number(name, need()?)?;
                if !(1..=256).contains(&n) {
                    return Err(format!("option max_channels={n}: 1 to 256"));
                }
                self.max_channels = Some(n);
            }
            "channels_per_nic" => {
                let n: usize = number(name, need()?)?;
                if !(1..=64).contains(&n) {
                    return Err(format!("option channels_per_nic={n}: 1 to 64"));
                }
                self.channels_per_nic = Some(n);
            }
            "nomultichannel" => self.multichannel = false,
            "nobrl" => self.server_locks = false,
            "brl" => self.server_locks = true,
            "multichannel" => self.multichannel = true,
            "dispatch" => self.dispatch = Some(need()?.parse().map_err(|e| format!("option {e}"))?),
            "port" => self.port = Some(number(name, need()?)?),
            "transport" | "cafile" | "pinsha256" => {
                self.transport.set_option(name, need()?)?;
            }
            "krb5_realm" | "realm" => self.kerberos.realm = Some(need()?.to_string()),
            "kdc" => self.kerberos.kdc = Some(need()?.to_string()),
            "spn_host" => self.kerberos.spn_host = Some(need()?.to_string()),
            "ntlm_fallback" => self.kerberos.ntlm_fallback = true,
            // mount.cifs's sec=: the signing variants (krb5i, ntlmsspi) mean the same here,
            // where every session is signed.
            "sec" => {
                self.kerberos.auth = match need()? {
                    "krb5" | "krb5i" => Auth::Kerberos,
                    "ntlmssp" | "ntlmsspi" | "ntlmv2" | "ntlmv2i" => Auth::Ntlm,
                    v => return Err(format!("option sec={v}: use sec=krb5 or sec=ntlmssp")),
                }
            }
            "keytab" => self.kerberos.keytab = Some(need()?.into()),
            "krb5_ccache" => self.kerberos.ccache = Some(need()?.to_string()),
            "krb5_principal" => self.kerberos.principal = Some(need()?.to_string()),
            "allow_other" => self.allow_other = true,
            "allow_root" => self.allow_root = true,
            "default_permissions" => self.default_permissions = true,
            "perm" => self.perm = true,
            "noperm" => self.perm = false,
            "closetimeo" => self.closetimeo = Duration::from_secs(number(name, need()?)?),
            "watch_dirs" => {
                let n: usize = number(name, need()?)?;
                if n > MAX_WATCH_DIRS {
                    return Err(format!("option watch_dirs={n}: 0 to {MAX_WATCH_DIRS}"));
                }
                self.watch_dirs = n;
            }
            "ro" => self.read_only = true,
            "rw" => self.read_only = false,
            "max_readahead" => self.max_readahead = size(name, need()?)?.min(MAX_READAHEAD),
            "write_behind" => {
                let v = need()?;
                self.write_behind = if v == "0" {
                    0
                } else {
                    u64::from(size(name, v)?)
                };
            }
            "prefetch" => {
                let v = need()?;
                self.prefetch = if v == "0" {
                    0
                } else {
                    u64::from(size(name, v)?).min(MAX_PREFETCH)
                };
            }
            "max_write" => self.max_write = size(name, need()?)?.min(MAX_FUSE_IO),
            "threads" => {
                let n: usize = number(name, need()?)?;
                if !(1..=64).contains(&n) {
                    return Err(format!("option threads={n}: 1 to 64"));
                }
                self.threads = n;
            }
            f if value.is_none() && KERNEL_FLAGS.contains(&f) => self.kernel_flags.push(f.into()),
            f if value.is_none() && IGNORED.contains(&f) => {}
            // systemd and mount(8) annotations (x-systemd.automount, comment=...).
            f if f.starts_with("x-") || f == "comment" => {}
            _ => return Err(format!("unknown option {opt:?} (see smbfuse --help)")),
        }
        Ok(())
    }

    /// Whether the kernel checks the shown owner and modes before a request reaches the
    /// daemon: asked for with `default_permissions`, and on whenever other users may use the
    /// mount (`allow_other`) unless `noperm` says otherwise. Without it, every local user
    /// allowed in acts with the rights of the SMB user the mount logged on as.
    pub fn kernel_checks_permissions(&self) -> bool {
        self.default_permissions || (self.allow_other && self.perm)
    }

    /// Apply the session settings to a client configuration.
    pub fn apply_to(&self, config: &mut ClientConfig) -> Result<(), String> {
        if let Some((min, max)) = self.dialects {
            config.min_dialect = min;
            config.max_dialect = max;
        }
        // A guest session has no key to sign with: accepting one is part of the same opt-out.
        config.require_signing = self.require_signing;
        config.allow_guest = !self.require_signing;
        config.encrypt = self.seal;
        config.posix_extensions = self.posix;
        config.follow_dfs = self.dfs;
        let io = self.rsize.into_iter().chain(self.wsize).max();
        if let Some(n) = io {
            config.io_size = n;
        }
        if let Some(n) = self.max_channels {
            config.max_channels = n;
        }
        if let Some(n) = self.channels_per_nic {
            config.channels_per_rss_nic = n;
            config.channels_per_nic = n;
        }
        config.multichannel = self.multichannel;
        if let Some(d) = self.dispatch {
            config.dispatch = d;
        }
        self.transport
            .apply(config)
            .map_err(|QuicOnly| "cafile= and pinsha256= need transport=quic".to_string())?;
        self.kerberos
            .apply(config)
            .map_err(|_| "kdc= and ntlm_fallback need krb5_realm=".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_cifs_names() {
        let o = MountOptions::parse(&[
            "username=alice,domain=CORP,uid=1000,gid=100,file_mode=0644,dir_mode=0750",
            "vers=3.1.1,seal,actimeo=5,cache=none,rsize=1M,wsize=65536,hard,max_channels=8",
            "nomultichannel,allow_other,ro,_netdev,noatime,x-systemd.automount",
            "closetimeo=0,watch_dirs=4,noposix,nomapposix,mfsymlinks,modefromsid",
        ])
        .unwrap();
        assert!(!o.posix, "noposix");
        assert!(!o.mapposix && o.mfsymlinks && o.modefromsid);
        assert_eq!(o.reparse, ReparseForm::Native, "reparse=native by default");
        for (opt, form) in [
            ("reparse=nfs", ReparseForm::Nfs),
            ("reparse=none", ReparseForm::None),
            ("reparse=native", ReparseForm::Native),
        ] {
            assert_eq!(MountOptions::parse(&[opt]).unwrap().reparse, form, "{opt}");
        }
        assert!(MountOptions::parse(&["reparse=wsl"]).is_err());
        let d = MountOptions::parse(&["ro"]).unwrap();
        assert!(
            d.mapposix && !d.mfsymlinks && !d.modefromsid,
            "mapposix, no mfsymlinks, no modefromsid by default"
        );
        assert!(
            MountOptions::parse(&["ro"]).unwrap().posix,
            "posix by default"
        );
        assert_eq!(o.closetimeo, Duration::ZERO);
        assert_eq!(o.watch_dirs, 4);
        assert_eq!(o.username.as_deref(), Some("alice"));
        assert_eq!(o.domain.as_deref(), Some("CORP"));
        assert_eq!((o.uid, o.gid), (1000, 100));
        assert_eq!((o.file_mode, o.dir_mode), (0o644, 0o750));
        assert_eq!(o.dialects, Some((Dialect::Smb311, Dialect::Smb311)));
        assert!(o.seal && o.hard && o.allow_other && o.read_only && !o.multichannel);
        assert_eq!(o.actimeo, Duration::from_secs(5));
        assert_eq!(o.cache, CacheMode::None);
        assert_eq!((o.rsize, o.wsize), (Some(1 << 20), Some(65536)));
        assert_eq!(o.max_channels, Some(8));
        assert_eq!(o.kernel_flags, vec!["noatime".to_string()]);
        let mut c = ClientConfig::default();
        o.apply_to(&mut c).unwrap();
        assert!(c.encrypt && !c.multichannel && !c.posix_extensions);
        assert_eq!(c.max_channels, 8);
        assert_eq!(c.io_size, 1 << 20);
        assert_eq!(c.max_dialect, Dialect::Smb311);
    }

    #[test]
    fn unknown_and_bad_options_are_errors() {
        for (opts, want) in [
            ("frobnicate", "unknown option \"frobnicate\""),
            ("uid=alice", "uid=alice: not a number"),
            ("file_mode=999", "not an octal mode"),
            ("vers=1.0", "unknown dialect"),
            ("cache=loose", "cache=strict or cache=none"),
            ("password=hunter2", "password= is refused"),
            ("max_channels=0", "1 to 256"),
            ("credentials", "needs a value"),
            ("rsize=12", "out of range"),
            ("watch_dirs=1000", "0 to 256"),
            ("closetimeo=soon", "not a number"),
        ] {
            let e = MountOptions::parse(&[opts]).unwrap_err();
            assert!(e.contains(want), "{opts}: {e}");
        }
        let e = MountOptions::parse(&["kdc=x"])
            .unwrap()
            .apply_to(&mut ClientConfig::default());
        if std::env::var_os("SMB_KRB_REALM").is_none() {
            assert!(e.unwrap_err().contains("krb5_realm="));
        }
    }

    #[test]
    fn transport_options() {
        let pin = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
        let mut c = ClientConfig::default();
        MountOptions::parse(&[format!(
            "transport=quic,cafile=/etc/ca.pem,pinsha256={pin},pinsha256=sha256//{pin}"
        )])
        .unwrap()
        .apply_to(&mut c)
        .unwrap();
        assert_eq!(c.transport, smb3_client::Transport::Quic);
        assert_eq!(c.quic.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(c.quic.pinned_sha256, vec![[1u8; 32]; 2]);
        let e = MountOptions::parse(&["cafile=/etc/ca.pem"])
            .unwrap()
            .apply_to(&mut ClientConfig::default())
            .unwrap_err();
        assert!(e.contains("need transport=quic"), "{e}");
        for (opts, want) in [
            ("transport=udp", "option transport=udp: "),
            ("pinsha256=abc", "option pinsha256=abc: "),
            ("transport", "needs a value"),
        ] {
            let e = MountOptions::parse(&[opts]).unwrap_err();
            assert!(e.contains(want), "{opts}: {e}");
        }
    }

    #[test]
    fn kerberos_options() {
        let mut c = ClientConfig::default();
        MountOptions::parse(&["sec=krb5,keytab=/etc/k.keytab,krb5_principal=svc@CORP"])
            .unwrap()
            .apply_to(&mut c)
            .unwrap();
        assert_eq!(c.auth, Auth::Kerberos);
        assert_eq!(c.kerberos_keytab, Some("/etc/k.keytab".into()));
        assert_eq!(c.kerberos_principal.as_deref(), Some("svc@CORP"));
        let mut c = ClientConfig::default();
        MountOptions::parse(&["sec=ntlmssp,krb5_ccache=KCM:0,spn_host=nas.corp"])
            .unwrap()
            .apply_to(&mut c)
            .unwrap();
        assert_eq!(c.auth, Auth::Ntlm);
        assert_eq!(c.kerberos_ccache.as_deref(), Some("KCM:0"));
        assert_eq!(c.kerberos_service_host.as_deref(), Some("nas.corp"));
        let e = MountOptions::parse(&["sec=none"]).unwrap_err();
        assert!(e.contains("sec=krb5"), "{e}");
    }

    #[test]
    fn defaults() {
        let o = MountOptions::parse::<&str>(&[]).unwrap();
        assert_eq!(o.actimeo, Duration::from_secs(1));
        assert_eq!(o.cache, CacheMode::Strict);
        assert_eq!((o.file_mode, o.dir_mode), (0o755, 0o755));
        assert_eq!(
            (o.max_write, o.max_readahead),
            (MAX_FUSE_IO, DEFAULT_READAHEAD)
        );
        assert_eq!(o.write_behind, 64 << 20);
        let o = MountOptions::parse(&["write_behind=0,max_readahead=16M"]).unwrap();
        assert_eq!((o.write_behind, o.max_readahead), (0, 16 << 20));
        assert_eq!(o.prefetch, 64 << 20);
        let o = MountOptions::parse(&["prefetch=0"]).unwrap();
        assert_eq!(o.prefetch, 0);
        let o = MountOptions::parse(&["prefetch=4000M"]).unwrap();
        assert_eq!(o.prefetch, MAX_PREFETCH);
        assert!(!o.hard && o.multichannel && !o.read_only);
    }

    #[test]
    fn signing_is_required_unless_nosign() {
        let mut c = ClientConfig::default();
        MountOptions::parse::<&str>(&[])
            .unwrap()
            .apply_to(&mut c)
            .unwrap();
        assert!(c.require_signing && !c.allow_guest);
        assert_eq!(
            (c.min_dialect, c.max_dialect),
            (Dialect::Smb300, Dialect::Smb311)
        );

        let o = MountOptions::parse(&["nosign"]).unwrap();
        assert!(!o.require_signing);
        let mut c = ClientConfig::default();
        o.apply_to(&mut c).unwrap();
        assert!(!c.require_signing && c.allow_guest);

        // `sign` is the default spelled out; the later of the two wins, as for every option.
        for (opts, want) in [
            ("sign", true),
            ("nosign,sign", true),
            ("sign,nosign", false),
        ] {
            let o = MountOptions::parse(&[opts]).unwrap();
            let mut c = ClientConfig::default();
            o.apply_to(&mut c).unwrap();
            assert_eq!((c.require_signing, c.allow_guest), (want, !want), "{opts}");
        }
    }

    #[test]
    fn vers_sets_both_ends_and_default_keeps_the_library_range() {
        for (vers, want) in [
            ("2.1", (Dialect::Smb210, Dialect::Smb210)),
            ("3", (Dialect::Smb300, Dialect::Smb311)),
            ("3.0", (Dialect::Smb300, Dialect::Smb300)),
            ("3.02", (Dialect::Smb302, Dialect::Smb302)),
            ("3.1.1", (Dialect::Smb311, Dialect::Smb311)),
            ("default", (Dialect::Smb300, Dialect::Smb311)),
        ] {
            let mut c = ClientConfig::default();
            MountOptions::parse(&[format!("vers={vers}")])
                .unwrap()
                .apply_to(&mut c)
                .unwrap();
            assert_eq!((c.min_dialect, c.max_dialect), want, "vers={vers}");
            // Choosing a dialect lowers nothing else.
            assert!(c.require_signing, "vers={vers}");
        }
    }

    #[test]
    fn other_users_get_kernel_permission_checks_unless_noperm() {
        for (opts, checks) in [
            ("", false),
            ("perm", false),
            ("noperm", false),
            ("allow_root", false),
            ("allow_other", true),
            ("allow_other,perm", true),
            ("allow_other,noperm", false),
            ("noperm,allow_other", false),
            ("allow_other,noperm,perm", true),
            ("default_permissions", true),
            ("default_permissions,noperm", true),
            ("allow_other,noperm,default_permissions", true),
        ] {
            let o = MountOptions::parse(&[opts]).unwrap();
            assert_eq!(o.kernel_checks_permissions(), checks, "{opts:?}");
        }
    }
}
