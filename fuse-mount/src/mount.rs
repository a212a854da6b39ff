//! From the command line to a served mount, and back to a clean exit.
//!
//! Order matters for "no half-mounted directory": everything that can fail for a reason the
//! user should hear about (options, mount point, credentials, server, share, subdirectory) is
//! checked before the kernel mount; the mount is the last step, and readiness is reported
//! only after the kernel's INIT handshake.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smb3_client::location::{Location, RemotePath};
use smb3_client::ClientConfig;

use crate::adapter::{FuseAdapter, KernelSettings};
use crate::daemon;
use crate::dir_watch::{Stale, StaleSink};
use crate::fs::{FsConfig, SmbFs};
use crate::options::{CacheMode, MountOptions};

/// How long after unmounting on a signal the daemon waits for the kernel to end its FUSE
/// session before aborting the connection itself.
const ABORT_AFTER_UNMOUNT: Duration = Duration::from_secs(5);

/// Exit status: mounted, served and unmounted cleanly.
pub const EXIT_OK: i32 = 0;
/// Exit status: the mount failed (server unreachable, wrong password, no such share, the
/// kernel refused the mount).
pub const EXIT_MOUNT_FAILED: i32 = 1;
/// Exit status: usage or configuration error (bad option, mount point missing, not a
/// directory or not empty).
pub const EXIT_USAGE: i32 = 2;

/// The command line.
#[derive(clap::Parser, Debug)]
#[command(
    name = "smbfuse",
    version,
    about = "Mount an SMB share with FUSE, over every channel to the server.",
    after_help = "Options (-o, comma-separated; unknown ones are an error):\n  \
        username=, domain=, credentials=FILE, uid=, gid=, file_mode=, dir_mode=,\n  \
        vers=2.1|3|3.0|3.02|3.1.1|default, sign|nosign, seal, posix|noposix, dfs|nodfs,\n  \
        mapposix|nomapposix, mfsymlinks, reparse=native|nfs|none,\n  \
        modefromsid (modes kept in each file's DACL, as S-1-5-88-3-MODE),\n  \
        actimeo=SECONDS,\n  \
        cache=strict|none, rsize=, wsize=,\n  \
        hard|soft, nobrl, write_behind=, prefetch=, watch_dirs=, closetimeo=, max_channels=,\n  \
        channels_per_nic=, nomultichannel, dispatch=, port=, sec=krb5|ntlmssp, keytab=FILE,\n  \
        transport=tcp|quic, cafile=FILE, pinsha256=BASE64,\n  \
        krb5_ccache=, krb5_principal=, krb5_realm=, kdc=, spn_host=,\n  \
        ntlm_fallback, allow_other, allow_root, perm|noperm,\n  \
        default_permissions, ro|rw, max_readahead=, max_write=, threads=,\n  \
        and the generic nodev, nosuid, noexec, noatime, _netdev, nofail, ...\n\
        Security: SMB 3.0 or newer is offered (vers=default); vers=2.1, for servers that\n\
        speak nothing newer, has no downgrade protection. Every reply must be signed (sign);\n\
        nosign is UNSAFE (anyone on the path can alter replies) and the only way to accept\n\
        a guest session. With allow_other the kernel checks the shown modes (perm); noperm\n\
        lets every local user act with the SMB user's rights.\n\
        SMB over QUIC (transport=quic): TLS 1.3 on UDP port 443 unless the source or port=\n\
        names one; the certificate must chain to cafile= (else the system's CAs) and name\n\
        the host, or its key must be pinned (pinsha256=, base64 SHA-256, repeatable).\n\
        The password comes from SMB_PASSWORD or the credentials file, never the command line;\n\
        with none given and a Kerberos ticket in the cache (kinit), the ticket is used."
)]
pub struct Args {
    /// smb://[DOMAIN;]USER@HOST[:PORT]/SHARE[/DIR] or //HOST/SHARE[/DIR].
    pub source: String,
    /// An existing, empty directory.
    pub mountpoint: PathBuf,
    /// Mount options (see below); may be repeated.
    #[arg(short = 'o', value_name = "OPTIONS")]
    pub options: Vec<String>,
    /// Stay in the foreground (logs on stderr, filtered by RUST_LOG).
    #[arg(short = 'f', long)]
    pub foreground: bool,
    /// Write the daemon's log here (RUST_LOG filters; warnings and errors without it).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    #[arg(long = "daemon-child", hide = true)]
    daemon_child: bool,
}

/// `smbfuse --generate man|bash|zsh|fish` alone: the man page or a completion script (see
/// `smb3_frontend::generate`), parsed apart because the source and mount point are required
/// otherwise.
#[derive(clap::Parser, Debug)]
#[command(name = "smbfuse")]
#[command(group(clap::ArgGroup::new("what").required(true).args(["generate", "generate_into"])))]
pub struct GenerateOnly {
    /// What to print.
    #[arg(long, value_enum)]
    pub generate: Option<smb3_frontend::generate::Generate>,
    /// Write every man page and completion script below this `share` directory.
    #[arg(long, value_name = "DIR")]
    pub generate_into: Option<PathBuf>,
}

/// Run `smbfuse` with parsed arguments; returns the exit status.
pub fn run(args: Args) -> i32 {
    // Before any secret is read: from here on this process may hold the password.
    daemon::forbid_inspection();
    if !args.foreground && !args.daemon_child {
        let handoff = handoff_of(&args);
        return daemon::spawn_and_wait(handoff.as_ref());
    }
    let handed = if args.daemon_child {
        daemon::detach();
        daemon::receive_handoff()
    } else {
        None
    };
    init_logging(&args);
    match prepare(&args, handed) {
        Ok(p) => serve(p, args.daemon_child),
        Err((code, msg)) => {
            eprintln!("smbfuse: {msg}");
            code
        }
    }
}

/// What the daemon is handed instead of `SMB_PASSWORD` in its environment: the user, domain
/// and password as they resolve here (the environment, a credentials file, or asked on the
/// terminal). `None` when the credentials do not resolve (the daemon then tries itself and
/// reports why, in its place among the other checks).
fn handoff_of(args: &Args) -> Option<daemon::Handoff> {
    let opts = MountOptions::parse(&args.options).ok()?;
    let remote = remote_of(&args.source, &opts).ok()?;
    // Asks on the terminal when neither SMB_PASSWORD nor a credentials file gives one: the
    // daemon has no terminal to ask on.
    let mut config = ClientConfig::default();
    opts.apply_to(&mut config).ok()?;
    let creds = smb3_frontend::credentials_for(
        &remote,
        opts.username.as_deref(),
        opts.credentials.as_deref(),
        &config,
    )
    .ok()?;
    Some(daemon::Handoff {
        user: creds.user,
        domain: creds.domain,
        password: zeroize::Zeroizing::new(creds.password.expose_secret().to_string()),
    })
}

fn init_logging(args: &Args) {
    use tracing_subscriber::util::SubscriberInitExt;
    let rust_log = std::env::var("RUST_LOG").ok();
    if let Some(path) = &args.log_file {
        match open_log_file(path) {
            Ok(file) => {
                let _ = log_subscriber(std::sync::Mutex::new(file), rust_log.as_deref()).try_init();
            }
            Err(e) => eprintln!("smbfuse: {e}; logging nowhere"),
        }
    } else if !args.daemon_child {
        let _ = log_subscriber(std::io::stderr, rust_log.as_deref()).try_init();
    }
}

/// The daemon's log: `rust_log` (`RUST_LOG`; warn without it) chooses what is written, except
/// that the security package and its Kerberos codecs (`smb3_client::log_filter::SECRET_LOGGING_TARGETS`) never
/// log below info: at debug and trace they write NTLM AUTHENTICATE messages, Kerberos
/// tickets and session keys. The cap is a second filter on the layer
/// (`smb3_client::log_filter::without_secrets`) rather than `sspi=info` directives added to the `RUST_LOG`
/// one: such a directive loses to a more specific `sspi::ntlm=trace` or a span directive
/// (`[span]=trace`), and it raises those targets to info when `RUST_LOG` asks for less.
fn log_subscriber<W>(
    writer: W,
    rust_log: Option<&str>,
) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::Layer;
    let filter = rust_log
        .and_then(|s| tracing_subscriber::EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    let layer = tracing_subscriber::fmt::layer()
        // No colours: tracing-subscriber is built without its `ansi` feature.
        .with_ansi(false)
        .with_writer(writer)
        .with_filter(filter)
        .with_filter(tracing_subscriber::filter::filter_fn(
            smb3_client::log_filter::without_secrets,
        ));
    tracing_subscriber::registry().with(layer)
}

/// Open the daemon's log file for appending, private to its owner: created 0600; refused when
/// the name is a symbolic link (never followed: someone who can write the directory could
/// point it at a file of the mounting user's), when it is not a regular file, or when it
/// belongs to a user other than this one or root; an existing file that group or others may
/// read is made 0600. The log names files and servers and is nobody else's business.
pub fn open_log_file(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        // O_NONBLOCK: a FIFO in the log's place fails or opens at once instead of hanging
        // the mount; it is refused below either way. Regular files ignore the flag.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => format!("log file {shown} is a symbolic link: refused"),
            Some(libc::ENXIO) => format!("log file {shown} is not a regular file: refused"),
            _ => format!("cannot open log file {shown}: {e}"),
        })?;
    let md = file
        .metadata()
        .map_err(|e| format!("log file {shown}: {e}"))?;
    if !md.is_file() {
        return Err(format!("log file {shown} is not a regular file: refused"));
    }
    let me = rustix::process::geteuid().as_raw();
    if md.uid() != me && md.uid() != 0 {
        return Err(format!(
            "log file {shown} belongs to uid {}, not to this user (uid {me}) or root: refused",
            md.uid()
        ));
    }
    if md.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| {
                format!(
                    "log file {shown} is open to group or others (mode {:04o}) and cannot be \
                     made private: {e}",
                    md.mode() & 0o7777
                )
            })?;
    }
    Ok(file)
}

/// Everything checked and connected, ready to mount.
struct Prepared {
    rt: tokio::runtime::Runtime,
    fs: Arc<SmbFs>,
    mountpoint: PathBuf,
    opts: MountOptions,
    remote: RemotePath,
}

type Failure = (i32, String);

fn usage(msg: impl Into<String>) -> Failure {
    (EXIT_USAGE, msg.into())
}

fn failed(msg: impl Into<String>) -> Failure {
    (EXIT_MOUNT_FAILED, msg.into())
}

/// The mount point must be an existing, empty directory that is not a mount point already:
/// a second mount stacked on the first would hide it (an empty share's mount passes the
/// emptiness check), as mount.cifs refuses too.
pub fn check_mountpoint(path: &Path) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("mount point {shown} does not exist"),
        _ => format!("mount point {shown}: {e}"),
    })?;
    if !meta.is_dir() {
        return Err(format!("mount point {shown} is not a directory"));
    }
    if let Ok(canonical) = std::fs::canonicalize(path) {
        if is_mounted_on(&canonical) {
            return Err(format!(
                "{shown} is a mount point already (umount it first)"
            ));
        }
    }
    let mut entries = std::fs::read_dir(path).map_err(|e| format!("mount point {shown}: {e}"))?;
    if entries.next().is_some() {
        return Err(format!("mount point {shown} is not empty"));
    }
    Ok(())
}

/// Whether something is mounted on `path` (canonical): listed as a mount point in
/// /proc/self/mountinfo (field 5, with spaces and the like as octal escapes), or, where
/// there is no such file, on another device than its parent.
fn is_mounted_on(path: &Path) -> bool {
    if let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") {
        return info
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .any(|m| Path::new(&unescape_mountinfo(m)) == path);
    }
    use std::os::unix::fs::MetadataExt as _;
    let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    path.parent()
        .is_some_and(|parent| dev(parent).is_some() && dev(parent) != dev(path))
}

/// A mountinfo path with its `\ooo` octal escapes (space, tab, newline, backslash) undone.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The source as a remote location.
pub fn parse_source(source: &str) -> Result<RemotePath, String> {
    match smb3_frontend::parse_location(source)? {
        Location::Remote(r) => Ok(r),
        Location::Local(_) => Err(format!(
            "{source}: not an SMB location (smb://[DOMAIN;]USER@HOST/SHARE[/DIR] or //HOST/SHARE[/DIR])"
        )),
    }
}

/// The source as a remote location, with the port and domain the options give.
fn remote_of(source: &str, opts: &MountOptions) -> Result<RemotePath, String> {
    let mut remote = parse_source(source)?;
    if let Some(port) = opts.port {
        remote.port = Some(port);
    }
    if remote.domain.is_none() {
        remote.domain = opts.domain.clone();
    }
    Ok(remote)
}

/// What a failed connection says, with the option that would change it where the cause is
/// one of the safe defaults (signing required, no guest sessions).
fn explain_connect_failure(msg: String, opts: &MountOptions) -> String {
    if !opts.require_signing {
        return msg;
    }
    if msg.contains("mapped to guest") {
        format!(
            "{msg}; a guest session cannot be signed: only -o nosign (UNSAFE: anyone on the \
             path can then alter the server's replies) accepts one"
        )
    } else if msg.contains("where signing is required") {
        format!(
            "{msg}; if this server cannot sign, -o nosign turns the requirement off (UNSAFE: \
             anyone on the path can then alter its replies)"
        )
    } else {
        msg
    }
}

fn prepare(args: &Args, handed: Option<daemon::Handoff>) -> Result<Prepared, Failure> {
    let opts = MountOptions::parse(&args.options).map_err(usage)?;
    let remote = remote_of(&args.source, &opts).map_err(usage)?;
    check_mountpoint(&args.mountpoint).map_err(usage)?;
    let mountpoint = std::fs::canonicalize(&args.mountpoint)
        .map_err(|e| usage(format!("mount point {}: {e}", args.mountpoint.display())))?;
    // The configuration first: with no password, whether a Kerberos ticket is used instead
    // (sec=krb5, keytab=, or a ticket in the cache) depends on it.
    let mut config = ClientConfig::default();
    opts.apply_to(&mut config).map_err(usage)?;
    let resolved = smb3_frontend::credentials_for(
        &remote,
        opts.username.as_deref(),
        opts.credentials.as_deref(),
        &config,
    );
    let creds = match (resolved, handed) {
        (Ok(c), _) => c,
        // No password here: the daemon was started without SMB_PASSWORD, and the command
        // handed the credentials over (a credentials file's password, found above, wins as
        // it does for every smbcp tool).
        (Err(_), Some(h)) => smb3_client::UserCredentials {
            user: h.user,
            domain: h.domain,
            password: h.password.as_str().into(),
        },
        (Err(e), None) => {
            return Err(usage(
                e.replace("--user", "-o username=")
                    .replace("--credentials FILE", "-o credentials=FILE"),
            ))
        }
    };
    // Read: nothing needs it in the environment any more, and whatever this process starts
    // (fusermount3, say) must not inherit it. /proc/PID/environ keeps showing the initial
    // environment of a foreground daemon; `daemon::forbid_inspection` keeps other processes
    // of the user out of it, and a background daemon never had it there.
    std::env::remove_var(daemon::PASSWORD_ENV);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("smbfuse")
        .build()
        .map_err(|e| failed(format!("cannot start the runtime: {e}")))?;
    let (share, root) = rt.block_on(async {
        let client = smb3_frontend::connect(&remote, &creds, config.clone())
            .await
            .map_err(|e| failed(explain_connect_failure(e, &opts)))?;
        let share = match client.share(&remote.share).await {
            Ok(s) => s,
            Err(e) => {
                let _ = client.logoff().await;
                return Err(failed(format!(
                    "//{}/{}: {}",
                    remote.host,
                    remote.share,
                    e.brief()
                )));
            }
        };
        // A path behind DFS links mounts the share the referrals lead to.
        let route = match smb3_frontend::route(&share, &remote, &remote.path).await {
            Ok(route) => route,
            Err(line) => {
                let _ = client.logoff().await;
                return Err(failed(line));
            }
        };
        if !route.path.is_empty() {
            let problem = match route.share.metadata(&route.path).await {
                Ok(m) if m.is_dir() => None,
                Ok(_) => Some("not a directory".to_string()),
                Err(e) => Some(e.brief().to_string()),
            };
            if let Some(p) = problem {
                let _ = client.logoff().await;
                return Err(failed(format!("{}: {p}", remote.display())));
            }
        }
        if !route.hops.is_empty() {
            tracing::info!(
                source = %remote.display(),
                share = route.share.name(),
                path = %route.path,
                hops = route.hops.len(),
                "followed DFS referrals"
            );
        }
        Ok((route.share, route.path))
    })?;
    let fs_config = FsConfig {
        uid: opts.uid,
        gid: opts.gid,
        file_mode: opts.file_mode,
        dir_mode: opts.dir_mode,
        ttl: opts.actimeo,
        read_only: opts.read_only,
        hard: opts.hard,
        write_behind: opts.write_behind,
        watch_dirs: opts.watch_dirs,
        close_delay: opts.closetimeo,
        prefetch: opts.prefetch,
        mapposix: opts.mapposix,
        mfsymlinks: opts.mfsymlinks,
        modefromsid: opts.modefromsid,
        reparse: opts.reparse,
        user_xattr: opts.user_xattr,
        kernel_readahead: match opts.cache {
            CacheMode::Strict => u64::from(opts.max_readahead),
            CacheMode::None => 0,
        },
        // What the library sends per READ: its I/O size, within what the server allows.
        io_size: opts
            .rsize
            .into_iter()
            .chain(opts.wsize)
            .max()
            .unwrap_or(ClientConfig::default().io_size)
            .min(share.client().max_io().read),
    };
    let fs = Arc::new(SmbFs::new(share, &root, fs_config));
    Ok(Prepared {
        rt,
        fs,
        mountpoint,
        opts,
        remote,
    })
}

/// Where lease breaks and the directory watches' findings go: one thread of its own tells the
/// kernel to forget them. An invalidation writes to /dev/fuse and may wait for the kernel,
/// which may be waiting for a reply of ours: never on a runtime thread, never inside a
/// request.
fn kernel_forgetter(notifier: fuser::Notifier) -> std::io::Result<StaleSink> {
    let (tx, rx) = std::sync::mpsc::channel::<Vec<Stale>>();
    std::thread::Builder::new()
        .name("smbfuse-forget".into())
        .spawn(move || {
            for batch in rx {
                for stale in batch {
                    let done = match &stale {
                        Stale::Entry { parent, name } => {
                            notifier.inval_entry(fuser::INodeNo(*parent), OsStr::new(name))
                        }
                        // A negative offset: the attributes only. Cached pages follow the
                        // file's lease (see `SmbFs::on_lease_break`).
                        Stale::Attrs(ino) => notifier.inval_inode(fuser::INodeNo(*ino), -1, 0),
                        Stale::Pages(ino) => notifier.inval_inode(fuser::INodeNo(*ino), 0, 0),
                    };
                    if let Err(e) = done {
                        tracing::debug!(?stale, error = %e, "the kernel refused to forget");
                    }
                }
            }
        })?;
    Ok(Arc::new(move |batch| {
        let _ = tx.send(batch);
    }))
}

fn fuse_config(opts: &MountOptions, remote: &RemotePath) -> fuser::Config {
    use fuser::MountOption as M;
    let mut config = fuser::Config::default();
    let mut mo = vec![
        M::FSName(remote.display()),
        M::Subtype("smbfuse".into()),
        if opts.read_only { M::RO } else { M::RW },
    ];
    if opts.kernel_checks_permissions() {
        mo.push(M::DefaultPermissions);
    }
    for flag in &opts.kernel_flags {
        mo.push(match flag.as_str() {
            "dev" => M::Dev,
            "nodev" => M::NoDev,
            "suid" => M::Suid,
            "nosuid" => M::NoSuid,
            "exec" => M::Exec,
            "noexec" => M::NoExec,
            "atime" => M::Atime,
            "noatime" => M::NoAtime,
            "dirsync" => M::DirSync,
            "sync" => M::Sync,
            _ => M::Async,
        });
    }
    config.mount_options = mo;
    config.acl = if opts.allow_other {
        fuser::SessionACL::All
    } else if opts.allow_root {
        fuser::SessionACL::RootAndOwner
    } else {
        fuser::SessionACL::Owner
    };
    // Several threads read requests from /dev/fuse (Linux only in fuser); each request then
    // runs as its own tokio task.
    #[cfg(target_os = "linux")]
    {
        config.n_threads = Some(opts.threads);
    }
    config
}

fn serve(p: Prepared, daemon_child: bool) -> i32 {
    let Prepared {
        rt,
        fs,
        mountpoint,
        opts,
        remote,
    } = p;
    let kernel = KernelSettings {
        max_write: opts.max_write,
        max_readahead: opts.max_readahead,
        direct_io: opts.cache == CacheMode::None,
        server_locks: opts.server_locks,
    };
    let adapter = FuseAdapter::new(fs.clone(), rt.handle().clone(), kernel);
    let (session, own_mount) =
        match start_session(adapter, &mountpoint, &fuse_config(&opts, &remote)) {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "smbfuse: cannot mount {} on {}: {e}",
                    remote.display(),
                    mountpoint.display()
                );
                rt.block_on(fs.shutdown());
                return EXIT_MOUNT_FAILED;
            }
        };
    let forget = match kernel_forgetter(session.notifier()) {
        Ok(sink) => sink,
        Err(e) => {
            eprintln!("smbfuse: cannot start the thread that keeps the kernel's cache true: {e}");
            drop(session);
            release(own_mount.as_ref());
            rt.block_on(fs.shutdown());
            return EXIT_MOUNT_FAILED;
        }
    };
    if opts.cache == CacheMode::Strict {
        let forget = forget.clone();
        fs.on_lease_break(move |ino| forget(vec![Stale::Pages(ino)]));
    }
    fs.on_server_change(forget);
    tracing::info!(source = %remote.display(), mountpoint = %mountpoint.display(), "mounted");
    #[cfg(target_os = "linux")]
    let device = crate::kernel::device_of(&mountpoint);
    #[cfg(target_os = "linux")]
    if let Some(dev) = &device {
        crate::kernel::set_readahead(dev, opts.max_readahead);
    }
    // Before `ready`: `smbctl status` works as soon as smbfuse returns, and a background
    // daemon's stderr is still the user's terminal for the warning.
    #[cfg(unix)]
    let status_socket =
        match crate::status_server::serve(rt.handle(), fs.clone(), &mountpoint, remote.display()) {
            Ok(s) => Some(s),
            Err(e) => {
                // The mount works without it; only `smbctl status` does not.
                tracing::warn!(error = %e, "no status socket");
                if daemon_child {
                    eprintln!(
                        "smbfuse: warning: no status socket, smbctl status will not answer: {e}"
                    );
                }
                None
            }
        };
    crate::idle_memory::watch_io(rt.handle(), fs.clone());
    if daemon_child {
        daemon::ready();
    }
    // SIGTERM / SIGINT: unmount, which ends the request loop below like `umount` does.
    let mp = mountpoint.clone();
    let session_ended = Arc::new(AtomicBool::new(false));
    let ended = session_ended.clone();
    rt.spawn(async move {
        wait_for_signal().await;
        // Unmount only our own mount: after an unmount from outside (`fusermount -u`) this
        // daemon may still be logging off when a new mount takes the same mount point, and
        // unmounting by path would take that one down. Our connection is still ended below:
        // a copy of the mount may keep it alive elsewhere.
        #[cfg(target_os = "linux")]
        let mounted_here = match (&device, crate::kernel::device_of(&mp)) {
            (Some(ours), Some(now)) => *ours == now,
            (Some(_), None) => false,
            // Our device was never known: the mount point is all there is to go by.
            (None, _) => true,
        };
        #[cfg(not(target_os = "linux"))]
        let mounted_here = true;
        if mounted_here && !ended.load(Ordering::SeqCst) {
            tracing::info!("signal: unmounting");
            unmount(&mp);
        } else {
            tracing::info!("signal: no longer mounted here");
        }
        // A copy of the mount in another mount namespace keeps the kernel's connection
        // open after the unmount (see `kernel::abort_connection`): end it, or this daemon
        // would never exit.
        tokio::time::sleep(ABORT_AFTER_UNMOUNT).await;
        #[cfg(target_os = "linux")]
        if let Some(dev) = device.filter(|_| !ended.load(Ordering::SeqCst)) {
            crate::kernel::abort_connection(&dev);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = ended;
    });
    if let Err(e) = session.run() {
        tracing::warn!(error = %e, "FUSE session ended with an error");
    }
    session_ended.store(true, Ordering::SeqCst);
    // The session ends when the kernel lets go (an unmount); if it ended for another reason
    // the mount would be left answering ENOTCONN.
    release(own_mount.as_ref());
    tracing::info!(mountpoint = %mountpoint.display(), "unmounted; closing handles and logging off");
    // Unmounted: nothing to report any more (and a new mount there may want the name).
    #[cfg(unix)]
    if let Some(s) = status_socket {
        s.remove();
    }
    // The kernel has let go: close every handle and log off.
    let done = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), fs.shutdown())
            .await
            .is_ok()
    });
    if !done {
        tracing::warn!("closing handles at unmount timed out");
    }

    rt.shutdown_timeout(Duration::from_secs(1));
    EXIT_OK
}

/// The mount this process made itself (root on Linux, see `kernel_mount`), else none.
#[cfg(target_os = "linux")]
type OwnMount = crate::kernel_mount::OwnMount;
#[cfg(not(target_os = "linux"))]
type OwnMount = ();

/// Mount and start the FUSE session: root on Linux mounts by itself so the mount's type is
/// `fuse.smbfuse`; everyone else goes through fuser (fusermount3 for unprivileged users).
fn start_session(
    adapter: FuseAdapter,
    mountpoint: &Path,
    config: &fuser::Config,
) -> std::io::Result<(fuser::Session<FuseAdapter>, Option<OwnMount>)> {
    #[cfg(target_os = "linux")]
    if rustix::process::geteuid().is_root() {
        let (fd, own) =
            crate::kernel_mount::mount_fuse(mountpoint, &config.mount_options, config.acl)?;
        return match fuser::Session::from_fd(adapter, fd, config.acl, config.clone()) {
            Ok(session) => Ok((session, Some(own))),
            Err(e) => {
                own.release();
                Err(e)
            }
        };
    }
    fuser::Session::new(adapter, mountpoint, config).map(|session| (session, None))
}

fn release(own: Option<&OwnMount>) {
    #[cfg(target_os = "linux")]
    if let Some(own) = own {
        own.release();
    }
    #[cfg(not(target_os = "linux"))]
    let _ = own;
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            std::future::pending::<()>().await;
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
}

/// Unmount `mp`: at once if nothing uses it, else lazily (it disappears now; the session
/// ends once the last user lets go). Root unmounts directly; others through fusermount3.
fn unmount(mp: &Path) {
    #[cfg(target_os = "linux")]
    {
        if rustix::process::geteuid().is_root() {
            use rustix::mount::{unmount, UnmountFlags};
            match unmount(mp, UnmountFlags::empty()) {
                Ok(()) => return,
                // Not a mount point any more: unmounted already (by `umount`, say); a copy
                // in another mount namespace is the caller's to end.
                Err(rustix::io::Errno::INVAL) => {
                    tracing::info!("already unmounted");
                    return;
                }
                Err(e) => tracing::info!(error = %e, "unmount busy; detaching"),
            }
            if let Err(e) = unmount(mp, UnmountFlags::DETACH) {
                tracing::warn!(error = %e, "lazy unmount failed");
            }
            return;
        }
        let ok = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(mp)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::process::Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(mp)
                .status();
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = std::process::Command::new("umount").arg(mp).status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped_and_mount_points_found() {
        assert_eq!(unescape_mountinfo("/mnt/my\\040share"), "/mnt/my share");
        assert_eq!(unescape_mountinfo("/a\\134b"), "/a\\b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
        assert!(is_mounted_on(Path::new("/proc")));
        assert!(!is_mounted_on(
            &std::env::temp_dir().join("surely-not-a-mount-point")
        ));
    }

    #[test]
    fn mount_points_are_checked() {
        let base = std::env::temp_dir().join(format!("smbfuse-mp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("empty")).unwrap();
        std::fs::create_dir_all(base.join("full/x")).unwrap();
        std::fs::write(base.join("file"), b"x").unwrap();
        assert!(check_mountpoint(&base.join("empty")).is_ok());
        let e = check_mountpoint(&base.join("full")).unwrap_err();
        assert!(e.ends_with("is not empty"), "{e}");
        let e = check_mountpoint(&base.join("file")).unwrap_err();
        assert!(e.ends_with("is not a directory"), "{e}");
        let e = check_mountpoint(&base.join("missing")).unwrap_err();
        assert!(e.ends_with("does not exist"), "{e}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_log_file_is_private_and_never_reached_through_a_link() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let base = std::env::temp_dir().join(format!("smbfuse-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;

        // Created 0600, appended to.
        let log = base.join("new.log");
        std::io::Write::write_all(&mut open_log_file(&log).unwrap(), b"one\n").unwrap();
        assert_eq!(mode(&log), 0o600);
        std::io::Write::write_all(&mut open_log_file(&log).unwrap(), b"two\n").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"one\ntwo\n");

        // An existing one others may read: made private, kept.
        let loose = base.join("loose.log");
        std::fs::write(&loose, b"old\n").unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o666)).unwrap();
        open_log_file(&loose).unwrap();
        assert_eq!(mode(&loose), 0o600);
        assert_eq!(std::fs::read(&loose).unwrap(), b"old\n");

        // A symbolic link, even to one's own file: refused, the target untouched.
        let target = base.join("target");
        std::fs::write(&target, b"precious").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = base.join("link.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = open_log_file(&link).unwrap_err();
        assert!(e.contains("symbolic link: refused"), "{e}");
        assert_eq!(mode(&target), 0o644);
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        let dangling = base.join("dangling.log");
        std::os::unix::fs::symlink(base.join("made-through-link"), &dangling).unwrap();
        assert!(open_log_file(&dangling).is_err());
        assert!(!base.join("made-through-link").exists());

        // Not a regular file: refused without hanging (a FIFO nobody reads).
        let fifo = base.join("fifo.log");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            let e = open_log_file(&fifo).unwrap_err();
            assert!(e.contains("not a regular file"), "{e}");
        }
        assert!(open_log_file(&base).is_err(), "a directory");

        // Another user's file (chown needs root).
        if rustix::process::geteuid().is_root() {
            let theirs = base.join("theirs.log");
            std::fs::write(&theirs, b"").unwrap();
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o666)).unwrap();
            std::os::unix::fs::lchown(&theirs, Some(12345), None).unwrap();
            let e = open_log_file(&theirs).unwrap_err();
            assert!(e.contains("belongs to uid 12345"), "{e}");
            assert_eq!(mode(&theirs), 0o666);
        } else {
            eprintln!("not root: the other-owner case is skipped");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A writer into a shared buffer, for reading back what was logged.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What is logged of one event per (target, level) below, under `rust_log`.
    fn logged(rust_log: Option<&str>) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = log_subscriber(move || writer.clone(), rust_log);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("outer");
            let _in = span.enter();
            tracing::trace!(target: "sspi::ntlm", "sspi-trace");
            tracing::debug!(target: "sspi::kerberos", "sspi-debug");
            tracing::info!(target: "sspi", "sspi-info");
            tracing::debug!(target: "picky_krb::messages", "picky-krb-debug");
            tracing::debug!(target: "picky_asn1", "picky-asn1-debug");
            tracing::debug!(target: "smb3_client::session", "client-debug");
            tracing::trace!(target: "smb3_client::channel", "client-trace");
            tracing::warn!(target: "smbfuse", "smbfuse-warn");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text
    }

    #[test]
    fn secrets_libraries_never_log_below_info() {
        for rust_log in [
            "trace",
            "debug",
            "sspi=trace,trace",
            "trace,sspi=trace,picky_krb=trace,picky_asn1=trace",
            "sspi::ntlm=trace,sspi::kerberos=trace,picky_krb::messages=trace,trace",
            "[outer]=trace,trace",
        ] {
            let text = logged(Some(rust_log));
            for hidden in [
                "sspi-trace",
                "sspi-debug",
                "picky-krb-debug",
                "picky-asn1-debug",
            ] {
                assert!(
                    !text.contains(hidden),
                    "{rust_log}: {hidden} logged:\n{text}"
                );
            }
            let mut shown = vec!["sspi-info", "client-debug", "smbfuse-warn"];
            if rust_log != "debug" {
                shown.push("client-trace");
            }
            for shown in shown {
                assert!(text.contains(shown), "{rust_log}: {shown} missing:\n{text}");
            }
        }
        // Without RUST_LOG, or with less than info: the cap raises nothing.
        let text = logged(None);
        assert!(
            text.contains("smbfuse-warn") && !text.contains("sspi-info"),
            "{text}"
        );
        assert!(!text.contains("client-debug"), "{text}");
        let text = logged(Some("warn,smb3_client=debug"));
        assert!(
            text.contains("client-debug") && !text.contains("sspi-info"),
            "{text}"
        );
    }

    #[test]
    fn the_safe_defaults_name_their_opt_out_when_they_stop_a_mount() {
        let safe = MountOptions::parse::<&str>(&[]).unwrap();
        let guest = "10.0.0.1:445: authentication failed: server offered only a guest \
                     session: user \"x\" was mapped to guest"
            .to_string();
        let e = explain_connect_failure(guest.clone(), &safe);
        assert!(
            e.starts_with(&guest) && e.contains("-o nosign (UNSAFE"),
            "{e}"
        );
        let unsigned = "unsigned TREE_CONNECT reply (MessageId 3) where signing is required: \
                        refused"
            .to_string();
        assert!(explain_connect_failure(unsigned, &safe).contains("-o nosign"));
        let other = "connection refused".to_string();
        assert_eq!(explain_connect_failure(other.clone(), &safe), other);
        let nosign = MountOptions::parse(&["nosign"]).unwrap();
        assert_eq!(explain_connect_failure(guest.clone(), &nosign), guest);
    }

    #[test]
    fn other_users_meet_default_permissions() {
        use fuser::MountOption as M;
        let remote = parse_source("//h/s").unwrap();
        let has = |opts: &str| {
            fuse_config(&MountOptions::parse(&[opts]).unwrap(), &remote)
                .mount_options
                .contains(&M::DefaultPermissions)
        };
        assert!(!has(""));
        assert!(has("allow_other"));
        assert!(!has("allow_other,noperm"));
        assert!(has("allow_other,noperm,default_permissions"));
        assert!(has("default_permissions"));
    }

    #[test]
    fn sources() {
        let r = parse_source("//10.0.0.1/data/sub/dir").unwrap();
        assert_eq!((r.share.as_str(), r.path.as_str()), ("data", "sub/dir"));
        let r = parse_source("smb://CORP;alice@nas/data").unwrap();
        assert_eq!(r.user.as_deref(), Some("alice"));
        assert!(parse_source("/tmp/x")
            .unwrap_err()
            .contains("not an SMB location"));
    }
}
