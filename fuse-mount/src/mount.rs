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

use smb3_client::ClientConfig;
use smbcp::location::{Location, RemotePath};

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
        vers=2.1|3|3.0|3.02|3.1.1, seal, actimeo=SECONDS, cache=strict|none, rsize=, wsize=,\n  \
        hard|soft, nobrl, write_behind=, prefetch=, watch_dirs=, closetimeo=, max_channels=,\n  \
        channels_per_nic=, nomultichannel, dispatch=, port=, krb5_realm=, kdc=, spn_host=,\n  \
        ntlm_fallback, allow_other, allow_root,\n  \
        default_permissions, ro|rw, max_readahead=, max_write=, threads=,\n  \
        and the generic nodev, nosuid, noexec, noatime, _netdev, nofail, ...\n\
        The password comes from SMB_PASSWORD or the credentials file, never the command line."
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
    /// Write the daemon's log here (RUST_LOG filters; default level info).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    #[arg(long = "daemon-child", hide = true)]
    daemon_child: bool,
}

/// Run `smbfuse` with parsed arguments; returns the exit status.
pub fn run(args: Args) -> i32 {
    if !args.foreground && !args.daemon_child {
        return daemon::spawn_and_wait();
    }
    if args.daemon_child {
        daemon::detach();
    }
    init_logging(&args);
    match prepare(&args) {
        Ok(p) => serve(p, args.daemon_child),
        Err((code, msg)) => {
            eprintln!("smbfuse: {msg}");
            code
        }
    }
}

fn init_logging(args: &Args) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if let Some(path) = &args.log_file {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(file) => {
                let _ = builder
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(file))
                    .try_init();
            }
            Err(e) => eprintln!("smbfuse: cannot open log file {}: {e}", path.display()),
        }
    } else if !args.daemon_child {
        let _ = builder.with_writer(std::io::stderr).try_init();
    }
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

/// The mount point must be an existing, empty directory.
pub fn check_mountpoint(path: &Path) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("mount point {shown} does not exist"),
        _ => format!("mount point {shown}: {e}"),
    })?;
    if !meta.is_dir() {
        return Err(format!("mount point {shown} is not a directory"));
    }
    let mut entries = std::fs::read_dir(path).map_err(|e| format!("mount point {shown}: {e}"))?;
    if entries.next().is_some() {
        return Err(format!("mount point {shown} is not empty"));
    }
    Ok(())
}

/// The source as a remote location.
pub fn parse_source(source: &str) -> Result<RemotePath, String> {
    match Location::parse(source)? {
        Location::Remote(r) => Ok(r),
        Location::Local(_) => Err(format!(
            "{source}: not an SMB location (smb://[DOMAIN;]USER@HOST/SHARE[/DIR] or //HOST/SHARE[/DIR])"
        )),
    }
}

fn prepare(args: &Args) -> Result<Prepared, Failure> {
    let opts = MountOptions::parse(&args.options).map_err(usage)?;
    let mut remote = parse_source(&args.source).map_err(usage)?;
    if let Some(port) = opts.port {
        remote.port = port;
    }
    if remote.domain.is_none() {
        remote.domain = opts.domain.clone();
    }
    check_mountpoint(&args.mountpoint).map_err(usage)?;
    let mountpoint = std::fs::canonicalize(&args.mountpoint)
        .map_err(|e| usage(format!("mount point {}: {e}", args.mountpoint.display())))?;
    let creds = smbcp::credentials(
        &remote,
        opts.username.as_deref(),
        opts.credentials.as_deref(),
    )
    .map_err(|e| {
        usage(
            e.replace("--user", "-o username=")
                .replace("--credentials FILE", "-o credentials=FILE"),
        )
    })?;
    let mut config = ClientConfig::default();
    opts.apply_to(&mut config).map_err(usage)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("smbfuse")
        .build()
        .map_err(|e| failed(format!("cannot start the runtime: {e}")))?;
    let share = rt.block_on(async {
        let client = smbcp::connect(&remote, &creds, config)
            .await
            .map_err(failed)?;
        let share = match client.share(&remote.share).await {
            Ok(s) => s,
            Err(e) => {
                let _ = client.logoff().await;
                return Err(failed(format!(
                    "//{}/{}: {}",
                    remote.host,
                    remote.share,
                    smbcp::describe(&e)
                )));
            }
        };
        if !remote.path.is_empty() {
            let problem = match share.metadata(&remote.path).await {
                Ok(m) if m.is_dir() => None,
                Ok(_) => Some("not a directory".to_string()),
                Err(e) => Some(smbcp::describe(&e)),
            };
            if let Some(p) = problem {
                let _ = client.logoff().await;
                return Err(failed(format!("{}: {p}", remote.display())));
            }
        }
        Ok(share)
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
    let fs = Arc::new(SmbFs::new(share, &remote.path, fs_config));
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
    if opts.default_permissions {
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
    let session = match fuser::Session::new(adapter, &mountpoint, &fuse_config(&opts, &remote)) {
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
    if daemon_child {
        daemon::ready();
    }
    #[cfg(unix)]
    let status_socket =
        crate::status::serve(rt.handle(), fs.clone(), &mountpoint, remote.display());
    // SIGTERM / SIGINT: unmount, which ends the request loop below like `umount` does.
    let mp = mountpoint.clone();
    let session_ended = Arc::new(AtomicBool::new(false));
    let ended = session_ended.clone();
    rt.spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal: unmounting");
        unmount(&mp);
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
