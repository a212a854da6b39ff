//! smbfuse end to end: the real testbed smbd, the daemon in the client network namespace
//! (`nsenter --net`, so the mount itself is in this process's mount namespace), ordinary
//! programs on the mount. Every test unmounts and stops its daemon, also when it fails
//! (`Mounted`'s Drop), and the testbed goes with its own Drop.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smb3_tests::{Testbed, TestbedConfig};

const SMBFUSE: &str = env!("CARGO_BIN_EXE_smbfuse");

fn testbed() -> Testbed {
    Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"))
}

fn source(tb: &Testbed, share_and_path: &str) -> String {
    format!(
        "smb://{};{}@{}/{share_and_path}",
        tb.domain(),
        tb.user(),
        tb.server_addr(1)
    )
}

/// A scratch directory of this test process, removed when dropped (not while mounted).
fn scratch(name: &str) -> smb3_tests::scratch::Scratch {
    smb3_tests::scratch::Scratch::new("smbfuse-e2e", name)
}

/// Whether `mp` is a mount point in this mount namespace.
fn is_mounted(mp: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mp.to_string_lossy();
    text.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_ref()))
}

/// The type and source `findmnt` shows for the mount at `mp`: what `df -T` and
/// `umount -t` go by.
fn findmnt_type_and_source(mp: &Path) -> (String, String) {
    let out = run(Command::new("findmnt")
        .args(["-n", "-o", "FSTYPE,SOURCE", "--mountpoint"])
        .arg(mp));
    let text = String::from_utf8_lossy(&out.stdout);
    let (fs_type, source) = text
        .trim()
        .split_once(char::is_whitespace)
        .unwrap_or_default();
    (fs_type.to_string(), source.trim().to_string())
}

/// Processes whose command line holds `mp` and the daemon flag (the background daemon).
fn daemons_of(mp: &Path) -> Vec<u32> {
    let want = mp.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == &want) && args.iter().any(|a| a == "--daemon-child") {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// Wait up to `limit` for `cond`, polling.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// smbfuse run in the client namespace.
fn smbfuse_cmd(tb: &Testbed, password: &str) -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/run/netns/{}", tb.client_ns()))
        .arg("--")
        .arg(SMBFUSE)
        .env("SMB_PASSWORD", password)
        .env_remove("SMB_USER")
        .env_remove("SMB_DOMAIN")
        .stdin(Stdio::null());
    cmd
}

/// A mount made by a test; unmounted and its daemon gone when dropped.
struct Mounted {
    mp: PathBuf,
    /// The mount point's scratch directory when the mount made it: removed after the unmount.
    _dir: Option<smb3_tests::scratch::Scratch>,
    /// The foreground daemon (`-f`), when the test started one.
    child: Option<Child>,
}

impl Mounted {
    /// Mount `src` on a fresh directory with `smbfuse -f` and wait (bounded) until mounted.
    fn foreground(tb: &Testbed, src: &str, name: &str, opts: &[&str]) -> Mounted {
        let mp = scratch(name);
        let mut cmd = smbfuse_cmd(tb, tb.password());
        cmd.arg(src).arg(&mp).arg("-f");
        for o in opts {
            cmd.args(["-o", o]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start smbfuse");
        let mut m = Mounted {
            mp: mp.to_path_buf(),
            _dir: Some(mp),
            child: Some(child),
        };
        let up = wait_until(Duration::from_secs(30), || {
            is_mounted(&m.mp)
                || m.child
                    .as_mut()
                    .is_some_and(|c| c.try_wait().ok().flatten().is_some())
        });
        assert!(up && is_mounted(&m.mp), "smbfuse -f did not mount {src}");
        m
    }

    /// Mount `src` in the background (the default) and return once `smbfuse` has returned.
    fn daemon(tb: &Testbed, src: &str, name: &str, opts: &[&str]) -> (Mounted, Output) {
        let mp = scratch(name);
        let mut cmd = smbfuse_cmd(tb, tb.password());
        cmd.arg(src).arg(&mp);
        for o in opts {
            cmd.args(["-o", o]);
        }
        let out = cmd.output().expect("run smbfuse");
        (
            Mounted {
                mp: mp.to_path_buf(),
                _dir: Some(mp),
                child: None,
            },
            out,
        )
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.mp.join(rel)
    }

    /// Send SIGTERM to the foreground daemon and return its exit status (bounded wait).
    fn terminate(&mut self) -> Option<i32> {
        let child = self.child.as_mut()?;
        let pid = child.id() as i32;
        // SAFETY-free: kill(2) through the command line tool, by PID.
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if is_mounted(&self.mp) {
            let ok = Command::new("umount")
                .arg(&self.mp)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("umount {} failed: detaching it lazily", self.mp.display());
                let _ = Command::new("umount").arg("-l").arg(&self.mp).status();
            }
        }
        let mut pids = daemons_of(&self.mp);
        if let Some(c) = &self.child {
            pids.push(c.id());
        }
        // A daemon still running after the unmount is kept by a copy of the mount in another
        // mount namespace (an smbd the test restarted is started in one): SIGTERM makes it
        // abort its kernel connection and exit cleanly, its status socket removed.
        if !wait_until(Duration::from_secs(3), || pids.iter().all(|p| !alive(*p))) {
            for p in &pids {
                let _ = Command::new("kill")
                    .args(["-TERM", &p.to_string()])
                    .status();
            }
        }
        if !wait_until(Duration::from_secs(20), || pids.iter().all(|p| !alive(*p))) {
            for p in &pids {
                let _ = Command::new("kill")
                    .args(["-KILL", &p.to_string()])
                    .status();
            }
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.mp);
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().expect("run command");
    if !out.status.success() {
        panic!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

fn sh(script: &str) -> String {
    String::from_utf8_lossy(
        &run(Command::new("bash").args(["-euo", "pipefail", "-c", script])).stdout,
    )
    .into_owned()
}

/// `diff -r` must find nothing.
fn same_tree(a: &Path, b: &Path) {
    run(Command::new("diff").arg("-r").arg(a).arg(b));
}

/// Relative path, type and size of everything under `root`, sorted.
fn listing(root: &Path) -> String {
    sh(&format!(
        "cd '{}' && find . -mindepth 1 -printf '%P %y %s\\n' | LC_ALL=C sort",
        root.display()
    ))
    .lines()
    // Directory sizes mean nothing across file systems.
    .map(|l| {
        if l.contains(" d ") {
            l.rsplit_once(' ').unwrap().0.to_string()
        } else {
            l.to_string()
        }
    })
    .collect::<Vec<_>>()
    .join("\n")
}

/// A tree of `small` small files over 40 directories, a few large ones, odd names, and
/// known modification times.
fn make_tree(root: &Path, small: usize) {
    for i in 0..small {
        let dir = root.join(format!("d{:02}", i % 40));
        std::fs::create_dir_all(&dir).unwrap();
        let len = (i * 37) % 4096;
        let data: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
        std::fs::write(dir.join(format!("f{i:05}.txt")), data).unwrap();
    }
    for (name, len) in [
        ("large/a.bin", 16 * 1024 * 1024 + 1),
        ("large/b.bin", 5 * 1024 * 1024),
        ("large/c.bin", 1024 * 1024),
        ("large/empty", 0),
        ("ünïcødé dir/ファイル.txt", 3000),
    ] {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, smb3_tests::pattern(len as u64 + 7, len)).unwrap();
    }
    std::fs::create_dir_all(root.join("emptydir")).unwrap();
    sh(&format!(
        "touch -d '2001-02-03 04:05:06' '{}/d00/f00000.txt' '{}/large/b.bin'",
        root.display(),
        root.display()
    ));
}

fn mtime(p: &Path) -> i64 {
    std::fs::metadata(p).unwrap().mtime()
}

/// Handles still open at the server (bounded wait for them to go).
fn no_open_files(tb: &Testbed) {
    let mut last = Vec::new();
    let gone = wait_until(Duration::from_secs(10), || {
        last = tb.open_files().unwrap_or_default();
        last.is_empty()
    });
    assert!(gone, "handles left open at the server: {last:?}");
}

#[test]
fn cp_rsync_tar_and_git_through_the_mount() {
    let tb = testbed();
    let local = scratch("local");
    let src = local.join("src");
    make_tree(&src, 2000);
    let mut m = Mounted::foreground(&tb, &source(&tb, "plain"), "mnt1", &[]);
    let server = tb.share_path("plain");

    // cp -a in, compare through the mount and on the server's disk; then out again.
    let t = Instant::now();
    run(Command::new("cp").arg("-a").arg(&src).arg(m.path("cp")));
    eprintln!("cp -a of 2005 files into the mount: {:?}", t.elapsed());
    same_tree(&src, &m.path("cp"));
    same_tree(&src, &server.join("cp"));
    assert_eq!(listing(&src), listing(&m.path("cp")));
    for f in ["d00/f00000.txt", "large/b.bin", "large/a.bin"] {
        assert_eq!(
            mtime(&src.join(f)),
            mtime(&m.path("cp").join(f)),
            "{f}: mtime"
        );
    }
    let t = Instant::now();
    run(Command::new("cp")
        .arg("-a")
        .arg(m.path("cp"))
        .arg(local.join("back")));
    eprintln!("cp -a out of the mount: {:?}", t.elapsed());
    same_tree(&src, &local.join("back"));

    // rsync -a both ways; a second run finds nothing to do (times kept; modes are the
    // mount's, so permissions are left out of the comparison).
    run(Command::new("rsync")
        .arg("-a")
        .arg(format!("{}/", src.display()))
        .arg(m.path("rs")));
    same_tree(&src, &m.path("rs"));
    run(Command::new("rsync")
        .arg("-a")
        .arg(format!("{}/", m.path("rs").display()))
        .arg(local.join("rs-back")));
    same_tree(&src, &local.join("rs-back"));
    let again = run(Command::new("rsync")
        .args(["-ai", "--no-perms", "--modify-window=1"])
        .arg(format!("{}/", src.display()))
        .arg(m.path("rs")));
    let changed = String::from_utf8_lossy(&again.stdout).into_owned();
    assert!(
        changed.trim().is_empty(),
        "rsync found differences: {changed}"
    );

    // tar round trip.
    std::fs::create_dir(m.path("tar")).unwrap();
    sh(&format!(
        "tar -C '{}' -cf - . | tar -C '{}' -xf -",
        src.display(),
        m.path("tar").display()
    ));
    same_tree(&src, &m.path("tar"));
    assert_eq!(
        mtime(&src.join("large/b.bin")),
        mtime(&m.path("tar/large/b.bin"))
    );
    std::fs::create_dir(local.join("tar-back")).unwrap();
    sh(&format!(
        "tar -C '{}' -cf - . | tar -C '{}' -xf -",
        m.path("tar").display(),
        local.join("tar-back").display()
    ));
    same_tree(&src, &local.join("tar-back"));

    // git on the mount.
    let repo = m.path("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = run(Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.invalid"])
            .args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q", "."]);
    run(Command::new("cp").arg("-r").arg(src.join("d01")).arg(&repo));
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(repo.join("d01/new.txt"), b"second\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "second"]);
    let log = git(&["log", "--format=%s"]);
    assert_eq!(log.lines().collect::<Vec<_>>(), ["second", "first"]);
    git(&["fsck", "--strict"]);
    assert!(git(&["status", "--porcelain"]).trim().is_empty());

    // SIGTERM: unmounted, exit 0, nothing left open at the server.
    assert_eq!(m.terminate(), Some(0), "smbfuse exit status after SIGTERM");
    assert!(!is_mounted(&m.mp));
    no_open_files(&tb);
    drop(m);
    let _ = std::fs::remove_dir_all(&local);
}

#[test]
fn posix_semantics_on_the_mount() {
    use std::fs;
    let tb = testbed();
    let m = Mounted::foreground(
        &tb,
        &source(&tb, "plain"),
        "mnt2",
        &["uid=1234,gid=567,file_mode=0644,dir_mode=0750"],
    );
    let p = |r: &str| m.path(r);

    // Owner and modes come from the options.
    fs::write(p("a"), b"hello").unwrap();
    let md = fs::metadata(p("a")).unwrap();
    assert_eq!((md.uid(), md.gid(), md.mode() & 0o7777), (1234, 567, 0o644));
    fs::create_dir(p("dir")).unwrap();
    assert_eq!(fs::metadata(p("dir")).unwrap().mode() & 0o7777, 0o750);

    // Inode numbers are the server's file ids: stable, shared by hard links.
    let ino = md.ino();
    assert_eq!(fs::metadata(p("a")).unwrap().ino(), ino);
    fs::hard_link(p("a"), p("dir/alias")).unwrap();
    let l = fs::metadata(p("dir/alias")).unwrap();
    assert_eq!((l.ino(), l.nlink()), (ino, 2));
    assert_eq!(fs::read(p("dir/alias")).unwrap(), b"hello");
    assert_eq!(
        fs::metadata(tb.share_path("plain").join("a"))
            .unwrap()
            .nlink(),
        2
    );

    // rename: across directories, replacing a file, a directory over an empty directory.
    fs::write(p("b"), b"bee").unwrap();
    fs::rename(p("b"), p("dir/b2")).unwrap();
    assert_eq!(fs::read(p("dir/b2")).unwrap(), b"bee");
    fs::write(p("c"), b"sea").unwrap();
    fs::rename(p("c"), p("dir/b2")).unwrap();
    assert_eq!(fs::read(p("dir/b2")).unwrap(), b"sea");
    assert!(!p("c").exists());
    fs::create_dir_all(p("x/inner")).unwrap();
    fs::write(p("x/inner/f"), b"f").unwrap();
    fs::create_dir(p("y")).unwrap();
    fs::rename(p("x"), p("y")).unwrap();
    assert_eq!(fs::read(p("y/inner/f")).unwrap(), b"f");
    fs::create_dir(p("z")).unwrap();
    fs::write(p("z/keep"), b"k").unwrap();
    let e = fs::rename(p("y"), p("z")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY), "{e}");

    // truncate, extend, write at an offset.
    let f = fs::OpenOptions::new().write(true).open(p("a")).unwrap();
    f.set_len(2).unwrap();
    f.set_len(4).unwrap();
    drop(f);
    assert_eq!(fs::read(p("a")).unwrap(), b"he\0\0");
    {
        use std::os::unix::fs::FileExt;
        let f = fs::OpenOptions::new().write(true).open(p("a")).unwrap();
        f.write_all_at(b"XY", 6).unwrap();
    }
    assert_eq!(fs::read(p("a")).unwrap(), b"he\0\0\0\0XY");

    // utimensat, also through an open handle that wrote.
    let t = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let f = fs::File::options().write(true).open(p("dir/b2")).unwrap();
    (&f).write_all(b"more").unwrap();
    f.set_times(fs::FileTimes::new().set_modified(t).set_accessed(t))
        .unwrap();
    drop(f);
    let back = || {
        fs::metadata(tb.share_path("plain").join("dir/b2"))
            .unwrap()
            .modified()
            .unwrap()
    };
    assert!(
        wait_until(Duration::from_secs(5), || back() == t),
        "mtime after close: {:?}",
        back()
    );
    assert_eq!(fs::metadata(p("dir/b2")).unwrap().modified().unwrap(), t);

    // rsync's order: write a temporary file, close it, set its times by path at once (the
    // kernel's RELEASE of the writer is still under way), rename it. The close must not move
    // the times back, wherever it lands among the others (2 s on: Samba's delayed update).
    fs::create_dir(p("rs")).unwrap();
    for i in 0..200 {
        let tmp = p(&format!("rs/.f{i}.tmp"));
        fs::write(&tmp, smb3_tests::pattern(i, 3000)).unwrap();
        let by_path = fs::File::open(&tmp).unwrap();
        by_path
            .set_times(fs::FileTimes::new().set_modified(t).set_accessed(t))
            .unwrap();
        drop(by_path);
        fs::rename(&tmp, p(&format!("rs/f{i}"))).unwrap();
    }
    std::thread::sleep(Duration::from_secs(3));
    let moved: Vec<_> = (0..200)
        .filter(|i| {
            let on_disk = tb.share_path("plain").join(format!("rs/f{i}"));
            fs::metadata(on_disk).unwrap().modified().unwrap() != t
        })
        .collect();
    assert!(moved.is_empty(), "mtime moved after close: {moved:?}");

    // chmod without write bits sets the read-only attribute; writing is then refused; chown
    // is accepted and changes nothing (mount.cifs without POSIX extensions).
    fs::set_permissions(p("a"), std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    assert_eq!(fs::metadata(p("a")).unwrap().mode() & 0o777, 0o444);
    let e = fs::OpenOptions::new().write(true).open(p("a")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
    std::os::unix::fs::chown(p("a"), Some(1), Some(1)).unwrap();
    assert_eq!(fs::metadata(p("a")).unwrap().uid(), 1234);
    // A read-only file can still be removed (POSIX: it is the directory that matters).
    fs::remove_file(p("dir/alias")).unwrap();
    fs::remove_file(p("a")).unwrap();
    assert!(!p("a").exists());

    // errno values for what the server refuses.
    let e = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p("dir/b2"))
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    let e = fs::remove_dir(p("z")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY));
    let e = fs::read(p("nope")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    let e = fs::create_dir(p("z")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    let e = std::os::unix::fs::symlink("a", p("link")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
    let e = fs::read_dir(p("dir/b2")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR));

    // statfs reports the share's tmpfs.
    let df = sh(&format!("stat -f -c '%b %S' '{}'", m.mp.display()));
    let (blocks, bsize) = df.trim().split_once(' ').unwrap();
    let total: u64 = blocks.parse::<u64>().unwrap() * bsize.parse::<u64>().unwrap();
    assert!(total > 1 << 30, "share size {total}");

    // A listing of many entries matches the server's.
    fs::create_dir(p("many")).unwrap();
    for i in 0..1500 {
        fs::write(p(&format!("many/e{i:04}")), b"").unwrap();
    }
    let t = Instant::now();
    let n = fs::read_dir(p("many")).unwrap().count();
    eprintln!("listing 1500 entries: {:?}", t.elapsed());
    assert_eq!(n, 1500);
    assert_eq!(
        listing(&p("many")),
        listing(&tb.share_path("plain").join("many"))
    );
    let _ = SystemTime::now();
}

/// One bad-input case: smbfuse fails with exit status `code` and exactly one stderr line
/// containing `want`, and leaves nothing mounted or running.
fn fails(tb: &Testbed, password: &str, src: &str, mp: &Path, opts: &[&str], code: i32, want: &str) {
    let mut cmd = smbfuse_cmd(tb, password);
    cmd.arg(src).arg(mp);
    for o in opts {
        cmd.args(["-o", o]);
    }
    let t = Instant::now();
    let out = cmd.output().expect("run smbfuse");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!(
        "{src} {opts:?}: {:?} in {:?}: {err}",
        out.status.code(),
        t.elapsed()
    );
    assert_eq!(out.status.code(), Some(code), "{src} {opts:?}: {err}");
    assert_eq!(err.lines().count(), 1, "one line expected: {err:?}");
    assert!(
        err.starts_with("smbfuse: ") && err.contains(want),
        "{err:?} lacks {want:?}"
    );
    assert!(!is_mounted(mp), "{} left mounted", mp.display());
    assert!(
        daemons_of(mp).is_empty(),
        "a daemon is left for {}",
        mp.display()
    );
}

#[test]
fn bad_input_gives_one_line_and_a_status() {
    let tb = testbed();
    let mp = scratch("bad");
    let good = source(&tb, "plain");
    fails(
        &tb,
        "wrong-password",
        &good,
        &mp,
        &[],
        1,
        "logon failure: wrong user name or password",
    );
    fails(
        &tb,
        tb.password(),
        &source(&tb, "nosuchshare"),
        &mp,
        &[],
        1,
        "no such share (BAD_NETWORK_NAME)",
    );
    fails(
        &tb,
        tb.password(),
        &source(&tb, "plain/no/such/dir"),
        &mp,
        &[],
        1,
        "OBJECT_",
    );
    fails(
        &tb,
        tb.password(),
        &good,
        &mp,
        &["port=1"],
        1,
        "connection refused",
    );
    fails(
        &tb,
        tb.password(),
        &good,
        &mp,
        &["frobnicate"],
        2,
        "unknown option \"frobnicate\"",
    );
    fails(
        &tb,
        tb.password(),
        &good,
        &mp,
        &["password=x"],
        2,
        "password= is refused",
    );
    fails(
        &tb,
        tb.password(),
        &good,
        &mp.join("missing"),
        &[],
        2,
        "does not exist",
    );
    fails(
        &tb,
        tb.password(),
        "/not/a/url",
        &mp,
        &[],
        2,
        "not an SMB location",
    );
    std::fs::write(mp.join("occupied"), b"x").unwrap();
    fails(&tb, tb.password(), &good, &mp, &[], 2, "is not empty");
    let _ = std::fs::remove_dir_all(&mp);
}

#[test]
fn background_mount_umount_and_mount_helper() {
    let tb = testbed();
    // The default: smbfuse returns once the mount is ready, and the daemon keeps serving.
    let (m, out) = Mounted::daemon(&tb, &source(&tb, "plain"), "mnt3", &["actimeo=0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(is_mounted(&m.mp), "mounted when smbfuse returned");
    let unc = format!("//{}/plain", tb.server_addr(1));
    assert_eq!(
        findmnt_type_and_source(&m.mp),
        ("fuse.smbfuse".into(), unc.clone())
    );
    let pids = daemons_of(&m.mp);
    assert_eq!(pids.len(), 1, "one daemon: {pids:?}");
    std::fs::write(m.path("f"), b"via daemon").unwrap();
    assert_eq!(
        std::fs::read(tb.share_path("plain").join("f")).unwrap(),
        b"via daemon"
    );
    // umount ends the daemon after it closed its handles and logged off.
    run(Command::new("umount").arg(&m.mp));
    assert!(
        wait_until(Duration::from_secs(20), || !alive(pids[0])),
        "daemon still running after umount"
    );
    no_open_files(&tb);
    drop(m);

    // mount(8) through mount.fuse3, as fstab does: mount.fuse3 runs `smbfuse SOURCE MP -o
    // OPTS` (with `-t fuse.smbfuse` found on mount's PATH; here `-t fuse PROGRAM#SOURCE`
    // names the binary under test, the same helper and command line otherwise).
    let mp = scratch("mnt4");
    let helper_source = format!("{SMBFUSE}#//{}/plain/", tb.server_addr(1));
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/run/netns/{}", tb.client_ns()))
        .args(["--", "mount", "-t", "fuse", &helper_source])
        .arg(&mp)
        .args([
            "-o",
            &format!(
                "username={},domain={},_netdev,noatime",
                tb.user(),
                tb.domain()
            ),
        ])
        .env("SMB_PASSWORD", tb.password());
    let guard = Mounted {
        mp: mp.to_path_buf(),
        _dir: None,
        child: None,
    };
    run(&mut cmd);
    assert!(is_mounted(&mp));
    assert_eq!(findmnt_type_and_source(&mp), ("fuse.smbfuse".into(), unc));
    assert_eq!(std::fs::read(mp.join("f")).unwrap(), b"via daemon");
    run(Command::new("umount").arg(&mp));
    drop(guard);
    no_open_files(&tb);
}

/// sqlite3 in `db` with a busy timeout, the SQL on stdin; its output, or the error.
fn sqlite(db: &Path, timeout_ms: u32, sql: &str) -> Result<String, String> {
    let mut child = Command::new("sqlite3")
        .arg("-cmd")
        .arg(format!(".timeout {timeout_ms}"))
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sqlite3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() && err.is_empty() {
        Ok(text)
    } else {
        Err(format!("{}{err}", text))
    }
}

#[test]
fn sqlite_from_two_clients_is_safe() {
    use std::io::{BufRead, BufReader};
    let tb = testbed();
    // Two mounts are two sessions, i.e. two SMB clients; no page cache and no attribute or
    // name cache, so each sees at once what the other wrote or deleted (the journal): see
    // the README on databases.
    let opts = ["cache=none,actimeo=0"];
    let a = Mounted::foreground(&tb, &source(&tb, "plain"), "sqa", &opts);
    let b = Mounted::foreground(&tb, &source(&tb, "plain"), "sqb", &opts);
    let (da, db) = (a.path("test.db"), b.path("test.db"));
    sqlite(&da, 0, "CREATE TABLE t(x INTEGER, who TEXT);").unwrap();

    // A holds an exclusive transaction: B is told the database is locked.
    let mut holder = Command::new("sqlite3")
        .arg(&da)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = holder.stdin.take().unwrap();
    stdin
        .write_all(b"BEGIN EXCLUSIVE;\nINSERT INTO t VALUES(0, 'a');\n.print locked\n")
        .unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
    let e = sqlite(&db, 0, "INSERT INTO t VALUES(1, 'b');").unwrap_err();
    assert!(e.contains("locked"), "B while A holds the lock: {e}");
    stdin.write_all(b"COMMIT;\n.quit\n").unwrap();
    drop(stdin);
    assert!(holder.wait().unwrap().success());
    assert_eq!(
        sqlite(&db, 0, "SELECT count(*) FROM t;").unwrap().trim(),
        "1"
    );

    // Both insert at once, each row its own transaction: nothing lost, nothing corrupt.
    let n = 100;
    let script = |who: &str| {
        (0..n)
            .map(|i| format!("INSERT INTO t VALUES({i}, '{who}');\n"))
            .collect::<String>()
    };
    let t = Instant::now();
    let (sa, sb) = (script("a"), script("b"));
    let (pa, pb) = (da.clone(), db.clone());
    let ta = std::thread::spawn(move || sqlite(&pa, 30_000, &sa));
    let tbh = std::thread::spawn(move || sqlite(&pb, 30_000, &sb));
    ta.join().unwrap().expect("client A's inserts");
    tbh.join().unwrap().expect("client B's inserts");
    eprintln!("{} inserts from two clients: {:?}", 2 * n, t.elapsed());
    for d in [&da, &db] {
        let counts = sqlite(
            d,
            5_000,
            "SELECT who, count(*) FROM t GROUP BY who ORDER BY who;",
        )
        .unwrap();
        assert_eq!(counts.trim(), format!("a|{}\nb|{n}", n + 1));
        assert_eq!(
            sqlite(d, 5_000, "PRAGMA integrity_check;").unwrap().trim(),
            "ok"
        );
    }
    drop(b);
    drop(a);
    no_open_files(&tb);
}

/// Two mounts are two SMB clients. A file kept open on one, its pages in the kernel's cache,
/// is rewritten through the other: the server breaks the first client's lease, which drops
/// those pages at once, so the next read of the still-open file sees the new bytes
/// (`cache=strict`, the default). Without that, the open file would go on showing the old
/// bytes until it is closed.
#[test]
fn a_lease_break_drops_the_cached_pages_of_an_open_file() {
    use std::os::unix::fs::FileExt;
    let tb = testbed();
    // Attributes cached for a minute, so only the lease break can make the new bytes show
    // within the wait below (an attribute timeout noticing the new mtime would take 60 s).
    let a = Mounted::foreground(&tb, &source(&tb, "plain"), "lease-a", &["actimeo=60"]);
    let b = Mounted::foreground(&tb, &source(&tb, "plain"), "lease-b", &[]);
    let old = smb3_tests::pattern(1, 1 << 20);
    let new = smb3_tests::pattern(2, 1 << 20);
    std::fs::write(a.path("coherent.bin"), &old).unwrap();

    let held = std::fs::File::open(a.path("coherent.bin")).unwrap();
    let read_all = |f: &std::fs::File| {
        let mut buf = vec![0u8; 1 << 20];
        f.read_exact_at(&mut buf, 0).unwrap();
        buf
    };
    assert!(read_all(&held) == old, "the first read");
    assert!(
        read_all(&held) == old,
        "the second read, from the page cache"
    );

    // The other client rewrites it in place (same size, so no attribute change helps).
    let other = std::fs::OpenOptions::new()
        .write(true)
        .open(b.path("coherent.bin"))
        .unwrap();
    other.write_all_at(&new, 0).unwrap();
    other.sync_all().unwrap();
    let written = Instant::now();
    let fresh = wait_until(Duration::from_secs(10), || read_all(&held) == new);
    let took = written.elapsed();
    eprintln!("the open file showed the new bytes {took:?} after the other client's write");
    assert!(fresh, "the open file still shows the old bytes after 10 s");
    // The break reaches this mount before the writer's open completes, so the bound is
    // loose even on a busy machine; the issue's promise is "within 1 s".
    assert!(took < Duration::from_secs(1), "took {took:?}");
    drop((held, other));
    let _ = std::fs::remove_file(a.path("coherent.bin"));
}

/// Handles open at the server on `name` (a share-relative path).
fn opens_of(tb: &Testbed, name: &str) -> usize {
    let opens = tb.open_files().unwrap_or_default();
    opens.iter().filter(|o| o.name == name).count()
}

#[test]
fn a_large_directory_is_read_a_page_at_a_time_with_seeks_and_rewinds() {
    const FILES: usize = 20_000;
    let tb = testbed();
    // Made on the server's disk directly (as root; smbd serves them as the test user).
    let big = tb.share_path("plain").join("big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..FILES {
        std::fs::File::create(big.join(format!("f{i:05}"))).unwrap();
    }
    tb.give_to_user(&big);
    // No directory watch, so that the only handle on "big" is the listing's.
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "bigdir", &["watch_dirs=0"]);

    let names: std::collections::BTreeSet<String> = std::fs::read_dir(m.path("big"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), FILES, "every entry once");
    assert!(names.iter().all(|n| n.len() == 6 && n.starts_with('f')));
    assert_eq!(
        opens_of(&tb, "big"),
        0,
        "a listing read to its end is closed"
    );

    // telldir/seekdir back into an earlier page, rewinddir, and a directory held open
    // half-read: its listing stays open at the server until closedir, then goes.
    let script = r#"
        use strict;
        opendir(my $d, $ARGV[0]) or die "opendir: $!";
        my @first = map { scalar readdir($d) } 1..100;
        my $pos = telldir($d);
        my @next = map { scalar readdir($d) } 1..3000;
        seekdir($d, $pos);
        my @again = map { scalar readdir($d) } 1..3000;
        die "seekdir: other entries" unless "@next" eq "@again";
        rewinddir($d);
        my @rewound = map { scalar readdir($d) } 1..100;
        die "rewinddir: other entries" unless "@first" eq "@rewound";
        print "held\n";
        STDOUT->flush();
        my $go = <STDIN>;
        closedir($d);
        print "closed\n";
    "#;
    let mut perl = Command::new("perl")
        .args(["-e", script])
        .arg(m.path("big"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("perl");
    let mut out = std::io::BufReader::new(perl.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    if line.trim() != "held" {
        let output = perl.wait_with_output().unwrap();
        panic!(
            "perl: {line} {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    assert_eq!(opens_of(&tb, "big"), 1, "the half-read listing is open");
    perl.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let output = perl.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let gone = wait_until(Duration::from_secs(10), || opens_of(&tb, "big") == 0);
    assert!(gone, "closedir left the listing open at the server");
    drop(m);
    no_open_files(&tb);
}

/// How many directories `m` watches, from its status socket.
fn watched_dirs(m: &Mounted) -> u64 {
    status_number(m, &["watched_dirs"])
}

#[test]
fn another_clients_changes_show_at_once_in_a_watched_directory() {
    let tb = testbed();
    // Names and attributes cached for a minute: within this test, only the directory watch
    // can make mount `a` see what the other client does. `b`, the other client, watches
    // nothing, and shows what a minute of caching does without a watch.
    let a = Mounted::foreground(&tb, &source(&tb, "plain"), "watch-a", &["actimeo=60"]);
    let b = Mounted::foreground(
        &tb,
        &source(&tb, "plain"),
        "watch-b",
        &["actimeo=60", "watch_dirs=0"],
    );
    std::fs::create_dir(a.path("w")).unwrap();
    for name in ["keep.txt", "gone.txt", "old.txt", "b-caches.txt"] {
        std::fs::write(a.path(&format!("w/{name}")), b"hello").unwrap();
    }
    // Both mounts cache the directory's names and the files' attributes.
    for m in [&a, &b] {
        let names = std::fs::read_dir(m.path("w")).unwrap().count();
        assert_eq!(names, 4);
        for name in ["keep.txt", "gone.txt", "old.txt", "b-caches.txt"] {
            assert_eq!(
                std::fs::metadata(m.path(&format!("w/{name}")))
                    .unwrap()
                    .len(),
                5
            );
        }
    }
    assert!(
        wait_until(Duration::from_secs(10), || watched_dirs(&a) >= 1),
        "mount a never reported its watch on w/"
    );
    assert_eq!(watched_dirs(&b), 0, "watch_dirs=0 watches nothing");

    // The other client deletes, renames, grows a file and adds one.
    let changed = Instant::now();
    std::fs::remove_file(b.path("w/gone.txt")).unwrap();
    std::fs::rename(b.path("w/old.txt"), b.path("w/new.txt")).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(b.path("w/keep.txt"))
        .unwrap();
    f.write_all(b" world").unwrap();
    drop(f);
    std::fs::write(b.path("w/added.txt"), b"new").unwrap();
    let seen = |rel: &str| std::fs::metadata(a.path(rel)).ok().map(|m| m.len());
    let fresh = wait_until(Duration::from_secs(10), || {
        seen("w/gone.txt").is_none()
            && seen("w/old.txt").is_none()
            && seen("w/new.txt") == Some(5)
            && seen("w/keep.txt") == Some(11)
            && seen("w/added.txt") == Some(3)
    });
    let took = changed.elapsed();
    eprintln!("mount a showed the other client's changes {took:?} after they began");
    assert!(
        fresh,
        "after 10 s mount a shows gone.txt {:?}, old.txt {:?}, new.txt {:?}, keep.txt {:?}, \
         added.txt {:?}",
        seen("w/gone.txt"),
        seen("w/old.txt"),
        seen("w/new.txt"),
        seen("w/keep.txt"),
        seen("w/added.txt")
    );
    let mut names: Vec<String> = std::fs::read_dir(a.path("w"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["added.txt", "b-caches.txt", "keep.txt", "new.txt"]);

    // The control: mount a deletes a file b has cached; b, watching nothing, still shows it
    // (for up to its minute), which is what a would show without its watch.
    std::fs::remove_file(a.path("w/b-caches.txt")).unwrap();
    assert_eq!(
        std::fs::metadata(b.path("w/b-caches.txt"))
            .map(|m| m.len())
            .ok(),
        Some(5),
        "without a watch the cached entry stays"
    );
    drop((a, b));
    let _ = std::fs::remove_dir_all(tb.share_path("plain").join("w"));
}

/// The mount's watches hold the watched directories open at the server, which would make
/// the server refuse to rename a directory with a watched one below it, and keep a removed
/// directory's name in use until the watch goes. So the mount ends them first: a listed tree
/// renames, and a listed directory that just changed can be removed and made again at once.
#[test]
fn watched_directories_rename_and_go_at_once() {
    let tb = testbed();
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "watch-rename", &[]);
    std::fs::create_dir_all(m.path("wr/a/b/c")).unwrap();
    std::fs::write(m.path("wr/a/b/c/f.txt"), b"data").unwrap();
    for dir in ["wr", "wr/a", "wr/a/b", "wr/a/b/c"] {
        std::fs::read_dir(m.path(dir)).unwrap().for_each(drop);
    }
    assert!(
        wait_until(Duration::from_secs(10), || watched_dirs(&m) >= 4),
        "the four listed directories are never all watched ({} are)",
        watched_dirs(&m)
    );
    std::fs::rename(m.path("wr/a"), m.path("wr/z"))
        .expect("rename a tree whose directories are watched");
    assert_eq!(std::fs::read(m.path("wr/z/b/c/f.txt")).unwrap(), b"data");
    assert!(!m.path("wr/a").exists());

    for round in 0..10 {
        let d = m.path("wr/d");
        std::fs::create_dir(&d).unwrap();
        std::fs::read_dir(&d).unwrap().for_each(drop);
        let before = watched_dirs(&m);
        // A change inside, so the watch has just reported a batch when the removal comes.
        std::fs::write(d.join("x"), b"x").unwrap();
        std::fs::remove_file(d.join("x")).unwrap();
        std::fs::remove_dir(&d).unwrap();
        std::fs::create_dir(&d).unwrap_or_else(|e| {
            panic!("round {round}: mkdir right after rmdir ({before} watched): {e}")
        });
        std::fs::remove_dir(&d).unwrap();
    }
    drop(m);
    let _ = std::fs::remove_dir_all(tb.share_path("plain").join("wr"));
}

/// A number from `m`'s status: `keys` walk into the JSON.
fn status_number(m: &Mounted, keys: &[&str]) -> u64 {
    let mut v =
        smb3_frontend::status_socket::read_status(&m.mp).unwrap_or_else(|e| panic!("status: {e}"));
    for k in keys {
        v = v[*k].take();
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("no number at {keys:?}"))
}

#[test]
fn a_file_read_again_is_served_from_its_parked_handle_and_cached_pages() {
    let tb = testbed();
    // Parked for 20 s: a busy machine's pauses between the steps below stay well inside it,
    // and a name kept DELETE_PENDING by a parked handle would take that long to free.
    let a = Mounted::foreground(&tb, &source(&tb, "plain"), "park-a", &["closetimeo=20"]);
    let b = Mounted::foreground(&tb, &source(&tb, "plain"), "park-b", &[]);
    let old = smb3_tests::pattern(3, 4 << 20);
    let new = smb3_tests::pattern(4, 4 << 20);
    std::fs::create_dir(a.path("pk")).unwrap();
    std::fs::write(a.path("pk/f.bin"), &old).unwrap();
    let parked = || status_number(&a, &["parked_handles"]);
    let reads = || status_number(&a, &["fuse_io", "read", "requests"]);

    // Read and closed: the read-only handle is parked, not closed.
    assert!(std::fs::read(a.path("pk/f.bin")).unwrap() == old);
    assert!(
        wait_until(Duration::from_secs(15), || parked() == 1),
        "parked handles: {}",
        parked()
    );
    // Read again: the parked handle serves the open and the pages come from the kernel's
    // cache, no READ reaches the daemon.
    let before = reads();
    assert!(before > 0);
    assert!(std::fs::read(a.path("pk/f.bin")).unwrap() == old);
    assert_eq!(reads(), before, "the second read came from the page cache");

    // Another client rewrites it: the lease break closes the parked handle and drops the
    // pages, so the next read gets the new bytes.
    assert!(wait_until(Duration::from_secs(15), || parked() == 1));
    std::fs::write(b.path("pk/f.bin"), &new).unwrap();
    assert!(
        wait_until(Duration::from_secs(15), || parked() == 0),
        "the break did not close the parked handle"
    );
    assert!(
        std::fs::read(a.path("pk/f.bin")).unwrap() == new,
        "stale bytes"
    );
    assert!(reads() > before);

    // Deleting a file whose handle is parked frees its name at once.
    assert!(wait_until(Duration::from_secs(15), || parked() == 1));
    let started = Instant::now();
    std::fs::remove_file(a.path("pk/f.bin")).unwrap();
    std::fs::write(a.path("pk/f.bin"), b"again").unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "delete and create took {took:?}"
    );
    assert_eq!(std::fs::read(a.path("pk/f.bin")).unwrap(), b"again");

    // A directory with a parked handle below it can be renamed.
    assert!(wait_until(Duration::from_secs(15), || parked() == 1));
    std::fs::rename(a.path("pk"), a.path("pk2")).unwrap();
    assert_eq!(std::fs::read(a.path("pk2/f.bin")).unwrap(), b"again");

    // Left alone, a parked handle is closed after a few seconds (RELEASE comes after
    // close(2) returns: wait for it to park first).
    assert!(wait_until(Duration::from_secs(15), || parked() == 1));
    assert!(
        wait_until(Duration::from_secs(40), || parked() == 0),
        "still parked: {}",
        parked()
    );
    // At the server, only the directory watches hold handles now.
    let open = tb.open_files().unwrap();
    assert!(open.iter().all(|o| !o.name.ends_with("f.bin")), "{open:?}");
    drop((a, b));
    no_open_files(&tb);
    let _ = std::fs::remove_dir_all(tb.share_path("plain").join("pk2"));
}

/// Read `len` bytes of `f` from `offset` in `step`-byte `read(2)`s (with `cache=none` each
/// one is a READ to the daemon).
fn read_in_steps(f: &std::fs::File, offset: u64, len: usize, step: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut out = vec![0u8; len];
    for (i, chunk) in out.chunks_mut(step).enumerate() {
        f.read_exact_at(chunk, offset + (i * step) as u64).unwrap();
    }
    out
}

/// Numbers the kernel shows for the FUSE connection of `device` (`major:minor`) under
/// fusectl, mounted for the moment on a directory of this test's own (the host may have none
/// mounted at /sys/fs/fuse/connections).
fn fuse_connection_numbers(device: &str, names: &[&str]) -> Vec<u64> {
    let minor = device.split_once(':').unwrap().1;
    let mut numbers = Vec::new();
    smbfuse::kernel::with_private_fusectl(|dir| {
        for name in names {
            let text = std::fs::read_to_string(dir.join(minor).join(name))?;
            numbers.push(text.trim().parse().unwrap());
        }
        Ok(())
    })
    .unwrap_or_else(|e| panic!("fusectl of connection {device}: {e}"));
    numbers
}

#[test]
fn the_kernel_gets_the_read_ahead_window_and_request_limits() {
    let tb = testbed();
    // (options, read_ahead_kb, max_background = congestion_threshold)
    for (opts, window_kb, background) in [
        (&[][..], 8 << 10, 68),
        (&["max_readahead=64M"][..], 64 << 10, 260),
    ] {
        let m = Mounted::foreground(&tb, &source(&tb, "plain"), "kernel-limits", opts);
        // Mounted is not yet set up: the kernel takes the limits from the daemon's answer to
        // INIT, which a stat of the root waits for, and the daemon sets the window after
        // mounting and only then opens its status socket.
        std::fs::metadata(&m.mp).unwrap();
        assert!(
            wait_until(Duration::from_secs(30), || {
                smb3_frontend::status_socket::read_status(&m.mp).is_ok()
            }),
            "the mount's status socket never answered"
        );
        let dev = smbfuse::kernel::device_of(&m.mp).expect("the mount's device");
        let read_ahead =
            std::fs::read_to_string(format!("/sys/class/bdi/{dev}/read_ahead_kb")).unwrap();
        assert_eq!(
            read_ahead.trim(),
            window_kb.to_string(),
            "read_ahead_kb, {opts:?}"
        );
        let [max_background, congestion_threshold] =
            fuse_connection_numbers(&dev, &["max_background", "congestion_threshold"])[..]
        else {
            unreachable!("two numbers asked for")
        };
        assert_eq!(max_background, background, "{opts:?}");
        // The kernel drops allocated read-ahead past this threshold: no lower than the limit.
        assert_eq!(congestion_threshold, background, "{opts:?}");
        drop(m);
    }
}

#[test]
fn a_sequential_reader_is_served_ahead_and_never_sees_stale_bytes() {
    use std::os::unix::fs::FileExt;
    const MIB: usize = 1 << 20;
    let tb = testbed();
    // No page cache, so every read(2) reaches the daemon; attributes cached for a minute,
    // so only a write or a lease break can make the daemon drop what it fetched.
    let a = Mounted::foreground(
        &tb,
        &source(&tb, "plain"),
        "ahead-a",
        &["cache=none,actimeo=60"],
    );
    let b = Mounted::foreground(&tb, &source(&tb, "plain"), "ahead-b", &["cache=none"]);
    let off = Mounted::foreground(
        &tb,
        &source(&tb, "plain"),
        "ahead-off",
        &["cache=none,prefetch=0"],
    );
    let old = smb3_tests::pattern(5, 32 * MIB);
    let new = smb3_tests::pattern(6, 32 * MIB);
    std::fs::write(a.path("seq.bin"), &old).unwrap();
    let fetched = |m: &Mounted| status_number(m, &["prefetch", "fetched_bytes"]);
    let served = |m: &Mounted| status_number(m, &["prefetch", "served_bytes"]);

    // A whole sequential read in 64 KiB steps: the bytes are right and almost all of them
    // came from parts fetched ahead.
    let f = std::fs::File::open(a.path("seq.bin")).unwrap();
    assert!(
        read_in_steps(&f, 0, 32 * MIB, 64 << 10) == old,
        "sequential read"
    );
    eprintln!(
        "prefetch after one read: {}",
        smb3_frontend::status_socket::read_status(&a.mp).unwrap()["prefetch"]
    );
    assert!(
        served(&a) >= 30 * MIB as u64,
        "served ahead: {}",
        served(&a)
    );
    drop(f);
    // The same read with prefetch=0 fetches nothing ahead (the control).
    let f = std::fs::File::open(off.path("seq.bin")).unwrap();
    assert!(read_in_steps(&f, 0, 4 * MIB, 64 << 10) == old[..4 * MIB]);
    assert_eq!(fetched(&off), 0);
    drop(f);

    // This mount writes the middle of a file being read: the reader sees the new bytes.
    let reader = std::fs::File::open(a.path("seq.bin")).unwrap();
    assert!(read_in_steps(&reader, 0, 4 * MIB, 64 << 10) == old[..4 * MIB]);
    let before = fetched(&a);
    {
        let w = std::fs::OpenOptions::new()
            .write(true)
            .open(a.path("seq.bin"))
            .unwrap();
        w.write_all_at(&new[6 * MIB..7 * MIB], 6 * MIB as u64)
            .unwrap();
    }
    let mut expect = old.clone();
    expect[6 * MIB..7 * MIB].copy_from_slice(&new[6 * MIB..7 * MIB]);
    assert!(
        read_in_steps(&reader, 4 * MIB as u64, 8 * MIB, 64 << 10) == expect[4 * MIB..12 * MIB],
        "stale bytes after this mount's own write"
    );
    assert!(
        fetched(&a) > before,
        "the reader was not served ahead again"
    );

    // Another client rewrites the file while the reader is in a streak: its lease break
    // makes the daemon drop what it fetched, so the next reads show the new bytes.
    assert!(
        read_in_steps(&reader, 12 * MIB as u64, 4 * MIB, 64 << 10) == expect[12 * MIB..16 * MIB]
    );
    {
        let w = std::fs::OpenOptions::new()
            .write(true)
            .open(b.path("seq.bin"))
            .unwrap();
        w.write_all_at(&new, 0).unwrap();
        w.sync_all().unwrap();
    }
    let written = Instant::now();
    let mut chunk = vec![0u8; 64 << 10];
    // Well inside the 60 s attribute timeout: only the lease break can explain fresh bytes.
    let fresh = wait_until(Duration::from_secs(10), || {
        reader.read_exact_at(&mut chunk, 16 * MIB as u64).unwrap();
        chunk[..] == new[16 * MIB..16 * MIB + (64 << 10)]
    });
    let took = written.elapsed();
    eprintln!("the reader saw the other client's bytes {took:?} after its write");
    assert!(
        fresh,
        "the reader still sees old bytes 10 s after another client's write"
    );
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert!(read_in_steps(&reader, 16 * MIB as u64, 16 * MIB, 64 << 10) == new[16 * MIB..]);
    drop(reader);
    drop((a, b, off));
    let _ = std::fs::remove_file(tb.share_path("plain").join("seq.bin"));
}

/// `cp from to`, with `fault` run once `to` has grown past `started` bytes; `cp` must succeed.
/// A read (`what`) starts with the page cache dropped, so its bytes come over the wire.
fn copy_through_a_fault(
    what: &str,
    from: &Path,
    to: &Path,
    started: u64,
    fault: impl FnOnce() -> String,
) {
    if what == "read" {
        std::fs::write("/proc/sys/vm/drop_caches", b"3").unwrap();
    }
    let mut cp = Command::new("cp")
        .arg(from)
        .arg(to)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // Bounded wait for the first bytes to land; a cp that ended already says why.
    let mut ended = None;
    let under_way = wait_until(Duration::from_secs(60), || {
        ended = cp.try_wait().unwrap();
        ended.is_some() || std::fs::metadata(to).is_ok_and(|m| m.len() > started)
    });
    assert!(
        ended.is_none_or(|status| status.success()),
        "{what}: cp failed before the fault: {ended:?}"
    );
    assert!(under_way, "{what}: copy did not get past {started} bytes");
    let done = fault();
    let status = cp.wait().unwrap();
    eprintln!("{what}: {done} during the copy; cp {status}");
    assert!(
        status.success(),
        "{what}: cp failed across the fault ({done})"
    );
}

/// Four links, so the mount's session has channels on each: one link goes down in the
/// middle of a large write through the mount and comes back, then another in the middle of a
/// large read. The library replays what the lost channels held on the others; `cp` sees no
/// error and every byte is right.
#[test]
fn a_link_lost_during_large_copies_through_the_mount_costs_no_byte() {
    let tb =
        Testbed::start(TestbedConfig::shaped(4, 400)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "links", &[]);
    let local = scratch("links-local");
    let big = local.join("big.bin");
    std::fs::write(&big, smb3_tests::pattern(43, 192 << 20)).unwrap();
    for (what, link, from, to) in [
        ("write", 2, big.clone(), m.path("big.bin")),
        ("read", 3, m.path("big.bin"), local.join("back.bin")),
    ] {
        copy_through_a_fault(what, &from, &to, 32 << 20, || {
            tb.link_down(link).unwrap();
            std::thread::sleep(Duration::from_secs(3));
            tb.link_up(link).unwrap();
            format!("link {link} down for 3 s")
        });
    }
    run(Command::new("cmp").arg(&big).arg(m.path("big.bin")));
    run(Command::new("cmp").arg(&big).arg(local.join("back.bin")));
    drop(m);
    no_open_files(&tb);
    let _ = std::fs::remove_dir_all(&local);
}

#[test]
fn connection_cuts_during_large_copies_and_an_idle_restart() {
    let tb = testbed();
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "faults", &[]);
    let local = scratch("faults-local");
    let big = local.join("big.bin");
    std::fs::write(&big, smb3_tests::pattern(42, 256 << 20)).unwrap();

    // Every connection reset in the middle of a large write, then of a large read: the
    // library reconnects and reclaims the durable opens; cp sees no error, bytes are exact.
    for (what, from, to) in [
        ("write", big.clone(), m.path("big.bin")),
        ("read", m.path("big.bin"), local.join("back.bin")),
    ] {
        copy_through_a_fault(what, &from, &to, 16 << 20, || {
            format!("cut {} connection(s)", tb.cut(None).unwrap())
        });
    }
    run(Command::new("cmp").arg(&big).arg(m.path("big.bin")));
    run(Command::new("cmp").arg(&big).arg(local.join("back.bin")));

    // smbd restarted while the mount is idle: the next access works again.
    tb.restart().unwrap();
    let ok = wait_until(Duration::from_secs(30), || {
        std::fs::read_dir(&m.mp)
            .map(|d| d.count() >= 1)
            .unwrap_or(false)
    });
    assert!(ok, "listing after the restart");
    std::fs::write(m.path("after-restart"), b"fine").unwrap();
    assert_eq!(std::fs::read(m.path("after-restart")).unwrap(), b"fine");
    // The restarted smbd holds a copy of the mount in its own mount namespace: the daemon
    // still ends cleanly, and its status socket goes with it.
    let status_socket = smb3_frontend::status_socket::socket_path(&m.mp);
    assert!(status_socket.exists(), "{}", status_socket.display());
    drop(m);
    assert!(
        !status_socket.exists(),
        "{} left behind",
        status_socket.display()
    );
    no_open_files(&tb);
    let _ = std::fs::remove_dir_all(&local);
}

#[test]
fn soft_gives_an_error_in_bounded_time_and_hard_waits_for_the_server() {
    // The only link goes silent (packets dropped, no reset): the server is gone. Under
    // `soft` (the default) an access returns an error once the library's bounded waits end:
    // the request in flight times out (request_timeout, 60 s; the silent channel is then
    // closed), and what follows waits for the session to come back no longer than what is
    // left of failover_wait (30 s) counted from the start of the outage. Under `hard` it is
    // tried again until the server is back, and succeeds.
    const SOFT_BOUND: Duration = Duration::from_secs(60 + 30 + 20);
    let tb = testbed();
    std::fs::write(
        tb.share_path("plain").join("still-there.txt"),
        b"back again",
    )
    .unwrap();
    let soft = Mounted::foreground(&tb, &source(&tb, "plain"), "soft", &["actimeo=0"]);
    let hard = Mounted::foreground(&tb, &source(&tb, "plain"), "hard", &["actimeo=0", "hard"]);
    // Both mounts have their session up before the link goes.
    assert!(soft.path("still-there.txt").exists() && hard.path("still-there.txt").exists());
    tb.link_down(1).unwrap();
    let started = Instant::now();
    let soft_path = soft.path("still-there.txt");
    let soft_access = std::thread::spawn(move || std::fs::read(soft_path));
    let hard_path = hard.path("still-there.txt");
    let hard_access = std::thread::spawn(move || std::fs::read(hard_path));
    let soft_result = soft_access.join().unwrap();
    let soft_took = started.elapsed();
    eprintln!("soft: {soft_result:?} after {soft_took:?}");
    let e = soft_result.expect_err("the server is gone: soft must fail");
    assert!(
        matches!(
            e.raw_os_error(),
            Some(libc::EIO | libc::ETIMEDOUT | libc::ECONNRESET)
        ),
        "{e:?}"
    );
    assert!(soft_took < SOFT_BOUND, "soft took {soft_took:?}");
    // The hard access is still waiting; bring the server back.
    assert!(
        !hard_access.is_finished(),
        "hard gave up while the server was gone"
    );
    tb.link_up(1).unwrap();
    let hard_result = hard_access.join().unwrap();
    eprintln!(
        "hard: {:?} after {:?}",
        hard_result.as_ref().map(Vec::len),
        started.elapsed()
    );
    assert_eq!(
        hard_result.expect("hard waits for the server"),
        b"back again"
    );
    // And the soft mount works again once its session is back (it fails at once, not
    // after a wait, while the session is still being set up again).
    let back = wait_until(Duration::from_secs(30), || {
        std::fs::read(soft.path("still-there.txt")).is_ok_and(|b| b == b"back again")
    });
    assert!(back, "the soft mount works again after the server is back");
    drop(soft);
    drop(hard);
    no_open_files(&tb);
}

/// Where pjdfstest's source is: `PJDFSTEST_SRC`, or the machine's shared third-party folder
/// beside the repository (`../shared/third_party/pjdfstest`, as `pjdfstest.sh` assumes).
fn pjdfstest_source() -> Option<PathBuf> {
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/third_party/pjdfstest");
    std::env::var_os("PJDFSTEST_SRC")
        .map(PathBuf::from)
        .into_iter()
        .chain([beside])
        .find(|p| p.join("tests").is_dir())
}

/// pjdfstest's groups that apply to SMB (open, truncate, ftruncate, mkdir, rmdir, unlink,
/// rename, link, utimensat, posix_fallocate, and symlink: the mount has `mfsymlinks`)
/// against the mount of a share without the POSIX extensions, compared both ways with
/// `tests/pjdfstest-expected-failures.txt`: a new failure fails, and so does a listed one that
/// passes now.
#[test]
fn pjdfstest_fails_only_where_expected() {
    let tb = testbed();
    run_pjdfstest(
        &tb,
        "pjdfstest-expected-failures.txt",
        "open truncate ftruncate mkdir rmdir unlink rename link utimensat posix_fallocate \
         symlink",
        &["mfsymlinks"],
    );
}

/// Every pjdfstest group that applies to Linux (not chflags, a BSD call, nor granular, NFSv4
/// ACLs), on a share with the SMB3 POSIX extensions (Samba 4.22), against its own list:
/// `tests/pjdfstest-expected-failures-posix.txt`, whose header says why each kind fails.
#[test]
fn pjdfstest_on_a_posix_share_fails_only_where_expected() {
    let tb = Testbed::start(TestbedConfig::unshaped(1).with_samba_trixie())
        .unwrap_or_else(|e| panic!("testbed: {e}"));
    run_pjdfstest(
        &tb,
        "pjdfstest-expected-failures-posix.txt",
        "chmod chown ftruncate link mkdir mkfifo mknod open posix_fallocate rename rmdir \
         symlink truncate unlink utimensat",
        &[],
    );
}

/// Run pjdfstest's `groups` on a mount of the testbed's `plain` share and compare with
/// `list` (beside this file). `PJDFSTEST_WRITE_LIST=1` rewrites the list instead (the header
/// is kept).
fn run_pjdfstest(tb: &Testbed, list: &str, groups: &str, opts: &[&str]) {
    let src = pjdfstest_source().unwrap_or_else(|| {
        panic!(
            "pjdfstest's source not found: set PJDFSTEST_SRC or put it at \
             ../shared/third_party/pjdfstest beside the repository"
        )
    });
    // One mount point per list: the two pjdfstest tests run side by side.
    let name = list.trim_end_matches(".txt");
    let m = Mounted::foreground(tb, &source(tb, "plain"), name, opts);
    let started = Instant::now();
    let mut cmd = Command::new("bash");
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pjdfstest.sh"))
        .arg(&m.mp);
    if std::env::var_os("PJDFSTEST_WRITE_LIST").is_some() {
        cmd.arg("--write-list");
    }
    let out = cmd
        .env("PJDFSTEST_SRC", &src)
        .env(
            "PJDFSTEST_LIST",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests")
                .join(list),
        )
        .env(
            "PJDFSTEST_GROUPS",
            groups.split_whitespace().collect::<Vec<_>>().join(" "),
        )
        .stdin(Stdio::null())
        .output()
        .expect("run pjdfstest.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "{stdout}{}(pjdfstest took {:.0?})",
        String::from_utf8_lossy(&out.stderr),
        started.elapsed()
    );
    assert!(out.status.success(), "pjdfstest: {}\n{stdout}", out.status);
    drop(m);
    no_open_files(tb);
}

/// The super options of the mount at `mp` (after ` - TYPE SOURCE ` in /proc/self/mountinfo):
/// what the kernel's FUSE mount was given, `default_permissions` and `allow_other` among them.
fn super_options(mp: &Path) -> String {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = mp.to_string_lossy();
    let line = text
        .lines()
        .rfind(|l| l.split(' ').nth(4) == Some(want.as_ref()))
        .unwrap_or_else(|| panic!("{} is not mounted", mp.display()));
    let after = line.split_once(" - ").expect("mountinfo separator").1;
    after.splitn(3, ' ').nth(2).unwrap_or_default().to_string()
}

/// A background mount: no password in the daemon's environment, its status socket and log
/// private, the security library silent below info under `RUST_LOG=trace`, and other users
/// checked by the kernel (`allow_other` brings `default_permissions`).
#[test]
fn a_background_mount_keeps_its_secrets_and_status_private() {
    let tb = testbed();
    let mp = scratch("private");
    let log_dir = scratch("private-log");
    let log = log_dir.join("smbfuse.log");
    let mut cmd = smbfuse_cmd(&tb, tb.password());
    cmd.arg(source(&tb, "plain"))
        .arg(&mp)
        .args(["-o", "allow_other"])
        .arg("--log-file")
        .arg(&log)
        .env("RUST_LOG", "trace");
    let t = Instant::now();
    let out = cmd.output().expect("run smbfuse");
    let m = Mounted {
        mp: mp.to_path_buf(),
        _dir: None,
        child: None,
    };
    eprintln!("background mount took {:?}", t.elapsed());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pids = daemons_of(&mp);
    assert_eq!(pids.len(), 1, "one daemon: {pids:?}");

    // A second mount onto it is refused, not stacked on top (the share is empty, so the
    // mount point passes the emptiness check).
    let again = smbfuse_cmd(&tb, tb.password())
        .arg(source(&tb, "plain"))
        .arg(&mp)
        .output()
        .expect("run smbfuse");
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert!(err.contains("is a mount point already"), "{err}");
    assert_eq!(daemons_of(&mp).len(), 1, "still one daemon");

    // The password reached the daemon on a pipe, not in its environment.
    let environ = std::fs::read(format!("/proc/{}/environ", pids[0])).unwrap();
    let names: Vec<String> = environ
        .split(|b| *b == 0)
        .filter_map(|v| v.split(|b| *b == b'=').next())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n == "RUST_LOG"),
        "environ read: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n == "SMB_PASSWORD"),
        "SMB_PASSWORD in the daemon's environment"
    );
    std::fs::write(m.path("f"), b"via the daemon").unwrap();
    assert_eq!(
        std::fs::read(tb.share_path("plain").join("f")).unwrap(),
        b"via the daemon"
    );

    // allow_other without noperm: the kernel checks modes for the other users.
    let opts = super_options(&mp);
    assert!(
        opts.split(',').any(|o| o == "allow_other")
            && opts.split(',').any(|o| o == "default_permissions"),
        "super options: {opts}"
    );

    // The status socket answers as soon as smbfuse returned, 0600 in a 0700 directory.
    let sock = smb3_frontend::status_socket::socket_path(&mp);
    let md = std::fs::symlink_metadata(&sock).unwrap();
    assert!(
        std::os::unix::fs::FileTypeExt::is_socket(&md.file_type()),
        "{}",
        sock.display()
    );
    assert_eq!(md.mode() & 0o7777, 0o600, "{}", sock.display());
    let dir_md = std::fs::symlink_metadata(sock.parent().unwrap()).unwrap();
    assert_eq!(
        (dir_md.uid(), dir_md.mode() & 0o077),
        (0, 0),
        "socket directory mode {:o}",
        dir_md.mode()
    );
    let status = smb3_frontend::status_socket::read_status(&mp).expect("status");
    assert_eq!(status["share"], "plain");
    assert_ne!(status["signing"], "-", "a signed session by default");
    // The truth about sealing: a cipher is agreed, but neither the session nor this share
    // encrypts.
    assert_eq!(status["encrypts_everything"], false);
    assert_eq!(status["share_encrypted"], false);
    // The library's background tasks, by kind: a mounted session has its channels' readers
    // and writers, its watchdog and its reconnector.
    let tasks = &status["library_tasks"];
    for kind in [
        "channel-reader",
        "channel-writer",
        "watchdog",
        "reconnector",
    ] {
        assert!(
            tasks[kind]["live"].as_u64().is_some_and(|n| n >= 1),
            "{kind}: {tasks}"
        );
    }
    let active = status["channels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["state"] == "active")
        .count() as u64;
    assert!(
        tasks["channel-reader"]["live"].as_u64() >= Some(active),
        "{active} active channels: {tasks}"
    );
    // Asked from any path inside the mount.
    std::fs::create_dir_all(mp.join("deep/er")).unwrap();
    let inside =
        smb3_frontend::status_socket::read_status(&mp.join("deep/er")).expect("status inside");
    assert_eq!(inside["mountpoint"], status["mountpoint"]);

    run(Command::new("umount").arg(&mp));
    assert!(
        wait_until(Duration::from_secs(20), || !alive(pids[0])),
        "daemon still running after umount"
    );
    drop(m);
    assert!(!sock.exists(), "socket removed at unmount");

    // The log: private; sspi's lines reach it (at info: its spans' return values), none of
    // them, nor picky's, below info (those carry NTLM messages, tickets and keys).
    let md = std::fs::symlink_metadata(&log).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o600);
    let text = std::fs::read_to_string(&log).unwrap();
    let below_info = |l: &&str| l.contains(" DEBUG ") || l.contains(" TRACE ");
    assert!(
        text.lines()
            .any(|l| l.contains(" INFO ") && l.contains(" sspi::")),
        "no line from sspi at all:\n{text}"
    );
    // A line's target is the word ending in ':' after its level and spans.
    let secret: Vec<&str> = text
        .lines()
        .filter(below_info)
        .filter(|l| {
            l.split_whitespace()
                .any(|w| (w.starts_with("sspi") || w.starts_with("picky")) && w.ends_with(':'))
        })
        .collect();
    assert!(
        secret.is_empty(),
        "security library lines below info: {secret:#?}"
    );
    let _ = std::fs::remove_dir_all(&log_dir);
}

/// Signing, guest sessions and permission checks as options: a guest session is refused
/// (with the option that would allow it named) unless `nosign`; `vers=2.1` still mounts,
/// signed; `noperm` leaves `allow_other` without `default_permissions`.
#[test]
fn guest_needs_nosign_and_vers_2_1_and_noperm_still_mount() {
    let tb = testbed();
    let guest = format!("smb://no-such-user@{}/public", tb.server_addr(1));
    let mp = scratch("guest-refused");
    fails(&tb, "whatever", &guest, &mp, &[], 1, "-o nosign");
    let _ = std::fs::remove_dir_all(&mp);

    let mut cmd = smbfuse_cmd(&tb, "whatever");
    let mp = scratch("guest");
    cmd.arg(&guest).arg(&mp).args(["-o", "nosign"]);
    let m = Mounted {
        mp: mp.to_path_buf(),
        _dir: None,
        child: None,
    };
    let out = cmd.output().expect("run smbfuse");
    assert!(
        out.status.success(),
        "guest with nosign: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(m.path("from-guest.txt"), b"guest data").unwrap();
    assert_eq!(
        std::fs::read(tb.share_path("public").join("from-guest.txt")).unwrap(),
        b"guest data"
    );
    let status = smb3_frontend::status_socket::read_status(&mp).expect("status");
    assert_eq!(status["signing"], "-", "a guest session cannot sign");
    drop(m);

    let m = Mounted::foreground(
        &tb,
        &source(&tb, "plain"),
        "vers21",
        &["vers=2.1,allow_other,noperm"],
    );
    std::fs::write(m.path("old"), b"2.1").unwrap();
    assert_eq!(std::fs::read(m.path("old")).unwrap(), b"2.1");
    assert!(
        wait_until(Duration::from_secs(30), || {
            smb3_frontend::status_socket::read_status(&m.mp).is_ok()
        }),
        "the mount's status socket never answered"
    );
    let status = smb3_frontend::status_socket::read_status(&m.mp).unwrap();
    assert_eq!(status["dialect"], "2.1");
    assert_ne!(status["signing"], "-", "signing is still required on 2.1");
    let opts = super_options(&m.mp);
    assert!(
        opts.split(',').any(|o| o == "allow_other")
            && !opts.split(',').any(|o| o == "default_permissions"),
        "super options: {opts}"
    );
    drop(m);
    no_open_files(&tb);
}

/// The mount on a share with the SMB3 POSIX extensions (Samba 4.22) behaves as a local file
/// system where editors, log rotation and build tools rely on it: modes kept and shown, the
/// server's group, names that differ only in case are two files, a case-only rename renames,
/// an unlinked open file stays readable (and `fstat`-able) through its descriptor while its
/// name is made again, and a rename over an open file (an editor's atomic save) works with
/// the old file still readable through the descriptor.
#[test]
fn a_posix_share_mounts_with_local_file_semantics() {
    use std::io::{Read, Seek};
    use std::os::unix::fs::PermissionsExt;
    let tb = Testbed::start(TestbedConfig::unshaped(1).with_samba_trixie())
        .unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("plain");
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "posix-semantics", &[]);

    // Modes: created under the umask, changed by chmod, the same on the server's disk.
    std::fs::write(m.path("script"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(m.path("script"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let shown = std::fs::metadata(m.path("script")).unwrap();
    assert_eq!(shown.mode() & 0o7777, 0o750);
    let on_disk = std::fs::metadata(disk.join("script")).unwrap();
    assert_eq!(on_disk.mode() & 0o7777, 0o750);
    assert_eq!(
        shown.gid(),
        on_disk.gid(),
        "the server's group, mapped from S-1-22-2-GID"
    );
    std::fs::create_dir(m.path("dir")).unwrap();
    std::fs::set_permissions(m.path("dir"), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(
        std::fs::metadata(disk.join("dir")).unwrap().mode() & 0o7777,
        0o700
    );

    // Names: case-sensitive, and a case-only rename is a rename.
    std::fs::write(m.path("foo"), b"lower").unwrap();
    std::fs::write(m.path("FOO"), b"UPPER").unwrap();
    assert_eq!(std::fs::read(m.path("foo")).unwrap(), b"lower");
    assert_eq!(std::fs::read(m.path("FOO")).unwrap(), b"UPPER");
    std::fs::rename(m.path("foo"), m.path("Foo")).unwrap();
    assert!(disk.join("Foo").exists() && !disk.join("foo").exists());

    // Unlink of an open file.
    std::fs::write(m.path("log"), b"first generation").unwrap();
    let mut held = std::fs::File::open(m.path("log")).unwrap();
    std::fs::remove_file(m.path("log")).unwrap();
    assert!(!disk.join("log").exists(), "the name is gone at once");
    let mut text = String::new();
    held.read_to_string(&mut text).unwrap();
    assert_eq!(text, "first generation");
    assert_eq!(
        held.metadata().unwrap().len(),
        16,
        "fstat of an unlinked file"
    );
    std::fs::write(m.path("log"), b"second").unwrap();
    held.rewind().unwrap();
    text.clear();
    held.read_to_string(&mut text).unwrap();
    assert_eq!(text, "first generation");
    drop(held);
    assert_eq!(std::fs::read(m.path("log")).unwrap(), b"second");

    // Rename over an open file, as an editor saves.
    std::fs::write(m.path("doc"), b"old text").unwrap();
    let mut held = std::fs::File::open(m.path("doc")).unwrap();
    std::fs::write(m.path("doc.tmp"), b"new text").unwrap();
    std::fs::rename(m.path("doc.tmp"), m.path("doc")).unwrap();
    text.clear();
    held.read_to_string(&mut text).unwrap();
    assert_eq!(text, "old text");
    drop(held);
    assert_eq!(std::fs::read(m.path("doc")).unwrap(), b"new text");
    let mut left: Vec<String> = std::fs::read_dir(&disk)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["FOO", "Foo", "dir", "doc", "log", "script"],
        "no aside name left"
    );
    drop(m);
    no_open_files(&tb);
}

/// Real programs on a mount of a POSIX share (Samba 4.22): a git checkout with a symlink and
/// an executable is clean afterwards, a tar round trip keeps modes and links, rsync's second
/// run finds nothing to do, and links, FIFOs and device nodes are made and read back. The
/// test runs as root, the share is reached as an ordinary user: rsync and tar are asked not to
/// give files to root, which the server rightly refuses (EPERM).
#[test]
fn git_tar_and_rsync_round_trip_on_a_posix_mount() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let tb = Testbed::start(TestbedConfig::unshaped(1).with_samba_trixie())
        .unwrap_or_else(|e| panic!("testbed: {e}"));
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "posix-programs", &[]);
    let run = |cmd: &mut Command| {
        let out = cmd.stdin(Stdio::null()).output().expect("run");
        assert!(
            out.status.success(),
            "{cmd:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // A local tree with modes, a symlink and an executable, and a git repository of it.
    let local = scratch("posix-programs-src");
    std::fs::create_dir_all(local.join("a/b")).unwrap();
    std::fs::write(local.join("a/f"), b"data\n").unwrap();
    std::fs::write(local.join("a/b/run"), b"#!/bin/sh\necho hi\n").unwrap();
    std::os::unix::fs::symlink("../f", local.join("a/b/link")).unwrap();
    for (p, mode) in [("a/f", 0o640), ("a/b/run", 0o755), ("a/b", 0o750)] {
        std::fs::set_permissions(local.join(p), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let git = |dir: &Path| {
        let mut c = Command::new("git");
        c.current_dir(dir)
            .args(["-c", "user.email=t@example.org", "-c", "user.name=t"]);
        c
    };
    run(git(&local).args(["init", "-q"]));
    run(git(&local).args(["add", "-A"]));
    run(git(&local).args(["commit", "-qm", "tree"]));

    run(git(&m.mp).args(["clone", "-q"]).arg(&local).arg("clone"));
    let status = run(git(&m.path("clone")).args(["status", "--porcelain"]));
    assert_eq!(status, "", "a fresh checkout is clean");
    assert_eq!(
        std::fs::read_link(m.path("clone/a/b/link")).unwrap(),
        Path::new("../f")
    );
    assert_eq!(
        std::fs::metadata(m.path("clone/a/b/run")).unwrap().mode() & 0o777,
        0o755,
        "the executable bit survives the server's create mask"
    );

    // tar: modes and the link come back as they were.
    let archive_dir = scratch("posix-programs-tar");
    let archive = archive_dir.join("t.tar");
    std::fs::create_dir_all(archive.parent().unwrap()).unwrap();
    run(Command::new("tar")
        .arg("cf")
        .arg(&archive)
        .arg("-C")
        .arg(&local)
        .arg("a"));
    std::fs::create_dir(m.path("untar")).unwrap();
    run(Command::new("tar")
        .args(["xpf"])
        .arg(&archive)
        .arg("--no-same-owner")
        .arg("-C")
        .arg(m.path("untar")));
    run(Command::new("diff")
        .arg("-r")
        .arg(local.join("a"))
        .arg(m.path("untar/a")));
    for p in ["a/f", "a/b/run", "a/b"] {
        let (want, got) = (
            std::fs::metadata(local.join(p)).unwrap().mode() & 0o7777,
            std::fs::metadata(m.path("untar").join(p)).unwrap().mode() & 0o7777,
        );
        assert_eq!(got, want, "{p}");
    }

    // rsync twice: the second run has nothing to do.
    let rsync = || {
        let mut c = Command::new("rsync");
        c.args(["-rlpt", "--itemize-changes"])
            .arg(format!("{}/", local.display()))
            .arg(m.path("rsync"));
        c
    };
    run(&mut rsync());
    assert_eq!(run(&mut rsync()), "", "the second rsync lists nothing");

    // A FIFO and a character device made through the mount are what they say.
    run(Command::new("mkfifo").arg(m.path("fifo")));
    run(Command::new("mknod")
        .arg(m.path("null"))
        .args(["c", "1", "3"]));
    assert!(std::fs::symlink_metadata(m.path("fifo"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(std::fs::symlink_metadata(m.path("null"))
        .unwrap()
        .file_type()
        .is_char_device());
    // Their numbers too (st_rdev, from the reparse point: the POSIX metadata has none), by
    // lookup here and, on a fresh mount, in a listing (`ls -l` shows "major, minor").
    std::fs::create_dir(m.path("devices")).unwrap();
    let mknod = |name: &str, kind: &str, major: &str, minor: &str| {
        let out = Command::new("mknod")
            .arg(m.path(&format!("devices/{name}")))
            .args([kind, major, minor])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    mknod("null", "c", "1", "3");
    mknod("sda1", "b", "8", "1");
    mknod("wide", "c", "254", "70000");
    let rdev = |p: &str| std::fs::symlink_metadata(m.path(p)).unwrap().rdev();
    assert_eq!(rdev("null"), 0x0103);
    assert_eq!(rdev("devices/sda1"), 0x0801);
    // glibc's makedev(254, 70000): minor's low byte, major, minor's upper bits above.
    assert_eq!(
        rdev("devices/wide"),
        (70000 & 0xff) | (254 << 8) | ((70000 & !0xff) << 12)
    );
    let fresh = Mounted::foreground(&tb, &source(&tb, "plain"), "posix-devices", &[]);
    let out = Command::new("ls")
        .args(["-l", "--color=never"])
        .arg(fresh.path("devices"))
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let line_of = |name: &str| {
        listed
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} not listed: {listed}"))
            .to_string()
    };
    // `ls` pads the numbers into columns: compare word by word.
    let shows = |name: &str, kind: char, numbers: [&str; 2]| {
        let line = line_of(name);
        let words: Vec<&str> = line.split_whitespace().collect();
        line.starts_with(kind) && words.windows(2).any(|w| w == numbers)
    };
    assert!(shows("null", 'c', ["1,", "3"]), "{listed}");
    assert!(shows("sda1", 'b', ["8,", "1"]), "{listed}");
    assert!(shows("wide", 'c', ["254,", "70000"]), "{listed}");
    // SMB has no inode flags: `lsattr` gets a clean "not supported", as on NFS.
    let lsattr = Command::new("lsattr")
        .arg("-d")
        .arg(fresh.path("devices"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&lsattr.stderr).into_owned();
    assert!(
        !lsattr.status.success() && said.contains("Operation not supported"),
        "{said}"
    );
    drop(fresh);
    drop(m);
    let _ = std::fs::remove_dir_all(&local);
    let _ = std::fs::remove_dir_all(archive.parent().unwrap());
    no_open_files(&tb);
}

/// A source behind a DFS link (the testbed's `[dfs]` root, a link to a directory of
/// `[plain]`) mounts the link's target: its files read and written through the mount land
/// there, and the mount still shows the source as given. With `nodfs` the link is not
/// followed and nothing is mounted.
#[test]
fn a_source_behind_a_dfs_link_mounts_the_links_target() {
    let tb = testbed();
    let plain = tb.share_path("plain");
    std::fs::create_dir_all(plain.join("projects")).unwrap();
    std::fs::write(plain.join("projects/plan.txt"), b"the plan").unwrap();
    tb.give_to_user(&plain);
    std::os::unix::fs::symlink(
        format!("msdfs:{}\\plain\\projects", tb.server_addr(1)),
        tb.share_path("dfs").join("projects"),
    )
    .unwrap();

    let (m, out) = Mounted::daemon(&tb, &source(&tb, "dfs/projects"), "dfs", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(m.path("plan.txt")).unwrap(), b"the plan");
    std::fs::write(m.path("notes.txt"), b"via the link").unwrap();
    assert_eq!(
        findmnt_type_and_source(&m.mp),
        (
            "fuse.smbfuse".into(),
            format!("//{}/dfs/projects", tb.server_addr(1))
        )
    );
    drop(m);
    assert_eq!(
        std::fs::read(plain.join("projects/notes.txt")).unwrap(),
        b"via the link"
    );

    let mp = scratch("nodfs");
    fails(
        &tb,
        tb.password(),
        &source(&tb, "dfs/projects"),
        &mp,
        &["nodfs"],
        1,
        "PATH_NOT_COVERED",
    );
    no_open_files(&tb);
}

/// A mount of a DFS namespace's root goes into its links like into directories: `ls -R`
/// lists what lies behind them, files read and write on the link's target, node ids there
/// are the mount's own (the target's file ids number another share), and `rename(2)` from
/// behind a link to the root says EXDEV, so `mv` copies.
#[test]
fn the_mount_of_a_namespace_root_goes_through_its_links() {
    let tb = testbed();
    let plain = tb.share_path("plain");
    let data = smb3_tests::pattern(41, 256 << 10);
    std::fs::create_dir_all(plain.join("ns-data/deep")).unwrap();
    std::fs::write(plain.join("ns-data/deep/f.bin"), &data).unwrap();
    tb.give_to_user(&plain);
    std::os::unix::fs::symlink(
        format!("msdfs:{}\\plain\\ns-data", tb.server_addr(1)),
        tb.share_path("dfs").join("nslink"),
    )
    .unwrap();

    let (m, out) = Mounted::daemon(&tb, &source(&tb, "dfs"), "dfs-root", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(names_in(&m.mp).contains(&"nslink".to_string()));
    assert!(std::fs::metadata(m.path("nslink")).unwrap().is_dir());
    assert_eq!(names_in(&m.path("nslink")), ["deep"]);
    assert_eq!(names_in(&m.path("nslink/deep")), ["f.bin"]);
    assert!(std::fs::read(m.path("nslink/deep/f.bin")).unwrap() == data);
    let ino = std::fs::metadata(m.path("nslink/deep/f.bin"))
        .unwrap()
        .ino();
    assert!(
        ino >= 1 << 63,
        "a node id of the mount's own behind a link: {ino:#x}"
    );

    std::fs::write(m.path("nslink/new.txt"), b"through the root").unwrap();
    assert_eq!(
        std::fs::read(plain.join("ns-data/new.txt")).unwrap(),
        b"through the root"
    );
    let e = std::fs::rename(m.path("nslink/new.txt"), m.path("moved.txt")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{e}");
    std::fs::rename(m.path("nslink/new.txt"), m.path("nslink/deep/new.txt")).unwrap();
    assert!(plain.join("ns-data/deep/new.txt").is_file());
    drop(m);
    no_open_files(&tb);
}

/// The names in `dir`, sorted (hidden ones too: `read_dir` shows names starting with `.`).
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// On a share without the POSIX extensions (Samba 4.17, the `plain` share): an unlinked open
/// file stays readable and `fstat`-able while its name is made again, a rename over an open
/// file works (an editor's save; log rotation under `tail -F`), leaving no hidden file once
/// closed; a case-only rename renames, and a create that differs only in case from an
/// existing name fails with EEXIST; and every character Windows forbids, a trailing dot and a
/// trailing space round trip, stored as the Linux kernel client's SFM mapping stores them
/// (`fs/smb/client/cifs_unicode.h`, `SFM_*`; the kernel cannot run here, so its mapping is
/// checked on the server's disk and through a second mount with `nomapposix`, which lists
/// names as the library gets them from the server).
#[test]
fn a_plain_share_keeps_open_files_case_and_every_name() {
    use std::io::{Read, Seek};
    let tb = testbed();
    let disk = tb.share_path("plain");
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "plain-semantics", &[]);
    let raw = Mounted::foreground(
        &tb,
        &source(&tb, "plain"),
        "plain-raw",
        &["nomapposix", "actimeo=0"],
    );

    // Unlink of an open file: the fd reads and fstats it, the name is free at once.
    std::fs::write(m.path("log"), b"first generation").unwrap();
    let mut held = std::fs::File::open(m.path("log")).unwrap();
    std::fs::remove_file(m.path("log")).unwrap();
    assert!(!m.path("log").exists(), "the name is gone at once");
    assert!(
        names_in(&m.mp).is_empty(),
        "nothing listed: {:?}",
        names_in(&m.mp)
    );
    assert!(!disk.join("log").exists());
    assert_eq!(
        held.metadata().unwrap().len(),
        16,
        "fstat of an unlinked file"
    );
    assert_eq!(
        held.metadata().unwrap().nlink(),
        0,
        "an unlinked file has no link"
    );
    let mut text = String::new();
    held.read_to_string(&mut text).unwrap();
    assert_eq!(text, "first generation");
    std::fs::write(m.path("log"), b"second").unwrap();
    held.rewind().unwrap();
    text.clear();
    held.read_to_string(&mut text).unwrap();
    assert_eq!(text, "first generation", "the old file, not the new one");
    assert_eq!(names_in(&m.mp), ["log"]);
    drop(held);
    assert_eq!(std::fs::read(m.path("log")).unwrap(), b"second");
    assert!(
        wait_until(Duration::from_secs(5), || names_in(&disk) == ["log"]),
        "the unlinked file is deleted at its last close: {:?}",
        names_in(&disk)
    );
    // A hidden file left by a daemon that died while the file was open (Samba then keeps
    // it): never shown, and no obstacle to removing its directory.
    std::fs::create_dir(m.path("crashed")).unwrap();
    std::fs::write(disk.join("crashed/.smbfuse0123456789abcdef"), b"left").unwrap();
    assert!(names_in(&m.path("crashed")).is_empty());
    assert!(!m.path("crashed/.smbfuse0123456789abcdef").exists());
    std::fs::remove_dir(m.path("crashed")).unwrap();
    assert!(!disk.join("crashed").exists());
    // The same from a shell: `cat <&8` after `rm`.
    let out = sh(&format!(
        "cd '{}' && echo kept > f && exec 8<f && rm f && echo other > f && cat <&8 && cat f",
        m.mp.display()
    ));
    assert_eq!(out, "kept\nother\n");

    // An editor's save: rename over the file a reader holds open.
    std::fs::write(m.path("doc"), b"old text").unwrap();
    let mut reader = std::fs::File::open(m.path("doc")).unwrap();
    std::fs::write(m.path("doc.tmp"), b"new text").unwrap();
    std::fs::rename(m.path("doc.tmp"), m.path("doc")).unwrap();
    text.clear();
    reader.read_to_string(&mut text).unwrap();
    assert_eq!(text, "old text");
    assert_eq!(std::fs::read(m.path("doc")).unwrap(), b"new text");
    drop(reader);

    // Log rotation under `tail -F`: the log renamed away while tail reads it, a new one
    // made, then replaced by a rename over it while tail holds it open.
    std::fs::write(m.path("app.log"), b"line 1\n").unwrap();
    let out_dir = scratch("tail-out");
    let out_path = out_dir.join("out");
    let mut tail = Command::new("tail")
        .args(["-n", "+1", "-F", "-s", "0.1"])
        .arg(m.path("app.log"))
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let seen = |want: &str| {
        wait_until(Duration::from_secs(10), || {
            std::fs::read_to_string(&out_path).is_ok_and(|t| t.contains(want))
        })
    };
    assert!(seen("line 1\n"));
    std::fs::rename(m.path("app.log"), m.path("app.log.1")).unwrap();
    std::fs::write(m.path("app.log"), b"line 2\n").unwrap();
    let line2 = seen("line 2\n");
    std::fs::write(m.path("app.tmp"), b"line 3\n").unwrap();
    std::fs::rename(m.path("app.tmp"), m.path("app.log")).unwrap();
    let line3 = seen("line 3\n");
    let _ = tail.kill();
    let _ = tail.wait();
    let shown = std::fs::read_to_string(&out_path).unwrap();
    assert!(line2 && line3, "tail -F saw: {shown:?}");
    assert_eq!(std::fs::read(m.path("app.log.1")).unwrap(), b"line 1\n");

    // Case: a case-only rename renames (seen on the server and by the library).
    std::fs::write(m.path("a.txt"), b"case").unwrap();
    std::fs::rename(m.path("a.txt"), m.path("A.txt")).unwrap();
    assert!(names_in(&m.mp).contains(&"A.txt".to_string()));
    assert!(!names_in(&m.mp).contains(&"a.txt".to_string()));
    assert!(disk.join("A.txt").exists() && !disk.join("a.txt").exists());
    assert!(names_in(&raw.mp).contains(&"A.txt".to_string()));
    assert!(
        !m.path("a.txt").exists(),
        "no other case of the name is found"
    );
    // A create of another case of an existing name: EEXIST, the file untouched.
    std::fs::write(m.path("foo"), b"lower").unwrap();
    let err = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.path("FOO"))
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST), "{err}");
    assert_eq!(std::fs::read(m.path("foo")).unwrap(), b"lower");
    let err = std::fs::create_dir(m.path("Foo")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST), "{err}");
    std::fs::write(m.path("bar"), b"bar").unwrap();
    let err = std::fs::rename(m.path("bar"), m.path("FOO")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST), "{err}");
    assert_eq!(std::fs::read(m.path("foo")).unwrap(), b"lower");

    // Names: each reserved character, a trailing dot and a trailing space, in a file and in
    // a directory name, round trip; on the server they are the SFM code points.
    std::fs::create_dir(m.path("names")).unwrap();
    let cases = [
        ("colon:x", "colon\u{F022}x"),
        ("what?", "what\u{F025}"),
        ("star*", "star\u{F021}"),
        ("<angle>", "\u{F023}angle\u{F024}"),
        ("pipe|d", "pipe\u{F027}d"),
        ("\"quoted\"", "\u{F020}quoted\u{F020}"),
        ("back\\slash", "back\u{F026}slash"),
        ("trailing.", "trailing\u{F029}"),
        ("trailing ", "trailing\u{F028}"),
    ];
    for (name, _) in cases {
        std::fs::write(m.path(&format!("names/{name}")), name.as_bytes()).unwrap();
    }
    std::fs::create_dir(m.path("names/dir.")).unwrap();
    std::fs::write(m.path("names/dir./in:side"), b"deep").unwrap();
    let mut want: Vec<String> = cases.iter().map(|(n, _)| n.to_string()).collect();
    want.push("dir.".into());
    want.sort();
    assert_eq!(names_in(&m.path("names")), want);
    for (name, _) in cases {
        assert_eq!(
            std::fs::read(m.path(&format!("names/{name}"))).unwrap(),
            name.as_bytes()
        );
    }
    assert_eq!(
        std::fs::read(m.path("names/dir./in:side")).unwrap(),
        b"deep"
    );
    let mut stored: Vec<String> = cases.iter().map(|(_, s)| s.to_string()).collect();
    stored.push("dir\u{F029}".into());
    stored.sort();
    assert_eq!(
        names_in(&disk.join("names")),
        stored,
        "on the server's disk"
    );
    assert_eq!(
        names_in(&raw.path("names")),
        stored,
        "as the library lists them"
    );
    assert_eq!(
        names_in(&disk.join("names/dir\u{F029}")),
        ["in\u{F022}side"]
    );
    // `cp -a` of the tree keeps every name (no 8.3 name comes out).
    let copy = scratch("names-copy");
    run(Command::new("cp").arg("-a").arg(m.path("names")).arg(&copy));
    same_tree(&m.path("names"), &copy.join("names"));
    // Without the mapping, a name the server would keep only mangled is refused.
    for bad in ["dot.", "space ", "a\\b"] {
        let err = std::fs::write(raw.path(bad), b"x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{bad:?}: {err}");
    }
    std::fs::remove_dir_all(m.path("names")).unwrap();
    let _ = std::fs::remove_dir_all(copy);
    // The other mount's watch of `names` kept it (delete-pending) until it ends.
    drop(raw);
    assert!(wait_until(Duration::from_secs(5), || !disk
        .join("names")
        .exists()));
    drop(m);
    let left: Vec<String> = names_in(&disk)
        .into_iter()
        .filter(|n| n.starts_with(".smbfuse"))
        .collect();
    assert!(left.is_empty(), "hidden files left: {left:?}");
    no_open_files(&tb);
}

/// The Minshall+French link file the Linux kernel makes for `target` (`fs/smb/client/link.c`,
/// `format_mf_symlink`: `XSym\n`, the length in four digits, the MD5 in hex, the target, a
/// newline, spaces to 1067 bytes), built here with `md5sum`, apart from the mount's code.
fn kernel_mfsymlink(target: &str) -> Vec<u8> {
    let out = Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(target.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    let md5 = String::from_utf8(out.stdout).unwrap()[..32].to_string();
    let mut buf = format!("XSym\n{:04}\n{md5}\n{target}\n", target.len()).into_bytes();
    buf.resize(1067, b' ');
    buf
}

/// `-o mfsymlinks` on a share without the POSIX extensions: `ln -s` makes a Minshall+French
/// file, byte for byte what the Linux kernel client makes, `readlink` and the kernel's
/// following read it, a listing shows it as a link; one made by another client (the kernel's
/// bytes put on the server's disk) is a link too; a regular file of the same size stays a file.
/// Without the option, on Samba 4.17, links and FIFOs are EPERM.
#[test]
fn mfsymlinks_are_made_and_read_as_the_kernel_client_does() {
    use std::os::unix::fs::FileTypeExt;
    let tb = testbed();
    let disk = tb.share_path("plain");
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "mfsymlinks", &["mfsymlinks"]);
    std::fs::create_dir(m.path("dir")).unwrap();
    std::fs::write(m.path("dir/data.txt"), b"the data").unwrap();
    std::os::unix::fs::symlink("dir/data.txt", m.path("to-data")).unwrap();
    let target = "../some where/else";
    std::os::unix::fs::symlink(target, m.path("dir/far")).unwrap();
    assert_eq!(
        std::fs::read_link(m.path("dir/far")).unwrap().to_str(),
        Some(target)
    );
    let meta = std::fs::symlink_metadata(m.path("dir/far")).unwrap();
    assert!(meta.file_type().is_symlink());
    assert_eq!(
        meta.len(),
        target.len() as u64,
        "st_size is the target's length"
    );
    assert_eq!(
        std::fs::read(m.path("to-data")).unwrap(),
        b"the data",
        "followed"
    );
    assert_eq!(
        std::fs::read(disk.join("dir/far")).unwrap(),
        kernel_mfsymlink(target),
        "the kernel's bytes"
    );
    // A listing shows links as links.
    let kinds = listed_as(&m.path("dir"), std::fs::FileType::is_symlink);
    assert!(kinds.contains(&("far".into(), true)), "{kinds:?}");
    assert!(kinds.contains(&("data.txt".into(), false)), "{kinds:?}");
    // Made by another client: the kernel's bytes on the server.
    std::fs::write(disk.join("dir/theirs"), kernel_mfsymlink("data.txt")).unwrap();
    // And a regular file of the same size that is no link.
    std::fs::write(disk.join("dir/plain-1067"), vec![b'x'; 1067]).unwrap();
    assert_eq!(
        std::fs::read_link(m.path("dir/theirs")).unwrap().to_str(),
        Some("data.txt")
    );
    assert_eq!(std::fs::read(m.path("dir/theirs")).unwrap(), b"the data");
    let plain = std::fs::symlink_metadata(m.path("dir/plain-1067")).unwrap();
    assert!(plain.file_type().is_file() && !plain.file_type().is_fifo());
    assert_eq!(plain.len(), 1067);
    // Removing and renaming a link are those of its file.
    std::fs::rename(m.path("dir/far"), m.path("dir/near")).unwrap();
    assert_eq!(
        std::fs::read_link(m.path("dir/near")).unwrap().to_str(),
        Some(target)
    );
    std::fs::remove_file(m.path("dir/near")).unwrap();
    assert!(!disk.join("dir/near").exists());
    drop(m);
    // Without the option a link cannot be made, and the file is the file it is.
    // (Samba 4.17 keeps no reparse points: the mount tries one, the server refuses, and
    // nothing is left.)
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "no-mfsymlinks", &[]);
    let err = std::os::unix::fs::symlink("x", m.path("nolink")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    assert_eq!(mkfifo(&m.path("nofifo")), Err(libc::EPERM));
    assert!(!disk.join("nolink").exists() && !disk.join("nofifo").exists());
    // A symlink on the server's disk, which Samba follows: what it points to.
    std::os::unix::fs::symlink("data.txt", disk.join("dir/on-disk")).unwrap();
    assert_eq!(std::fs::read(m.path("dir/on-disk")).unwrap(), b"the data");
    let meta = std::fs::symlink_metadata(m.path("to-data")).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.len(), 1067);
    drop(m);
    no_open_files(&tb);
}

/// `setxattr(2)` and friends on `p`, the errno on failure.
mod xattr {
    use std::path::Path;

    use rustix::fs::XattrFlags;

    fn errno(e: rustix::io::Errno) -> i32 {
        e.raw_os_error()
    }

    pub(crate) fn set(p: &Path, name: &str, value: &[u8], flags: u32) -> Result<(), i32> {
        rustix::fs::setxattr(p, name, value, XattrFlags::from_bits_retain(flags)).map_err(errno)
    }

    pub(crate) fn get(p: &Path, name: &str) -> Result<Vec<u8>, i32> {
        let mut buf = vec![0u8; 70_000];
        let n = rustix::fs::getxattr(p, name, &mut buf[..]).map_err(errno)?;
        buf.truncate(n);
        Ok(buf)
    }

    pub(crate) fn list(p: &Path) -> Vec<String> {
        let mut buf = vec![0u8; 65_536];
        let n = rustix::fs::listxattr(p, &mut buf[..])
            .unwrap_or_else(|e| panic!("listxattr {}: {e}", p.display()));
        buf.truncate(n);
        let mut names: Vec<String> = buf
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        names.sort();
        names
    }

    pub(crate) fn remove(p: &Path, name: &str) -> Result<(), i32> {
        rustix::fs::removexattr(p, name).map_err(errno)
    }
}

/// `user.*` extended attributes through the mount are the files' SMB EAs, which Samba keeps as
/// the same `user.*` xattrs on its disk: each side sees what the other set. The kernel client
/// (fs/smb/client/xattr.c) is the model: `user.` only, other namespaces refused or empty.
#[test]
fn extended_attributes_are_the_files_smb_eas() {
    use std::fs;
    let tb = testbed();
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "xattrs", &["user_xattr"]);
    let f = m.path("tagged.txt");
    fs::write(&f, b"data").unwrap();
    let on_server = tb.share_path("plain").join("tagged.txt");

    xattr::set(&f, "user.colour", b"red", 0).unwrap();
    assert_eq!(xattr::get(&f, "user.colour").unwrap(), b"red");
    assert_eq!(xattr::get(&on_server, "user.colour").unwrap(), b"red");
    // Names are compared without regard to case, as SMB has them.
    assert_eq!(xattr::get(&f, "user.COLOUR").unwrap(), b"red");
    // Set on the server's disk, seen through the mount; Samba's own xattrs stay hidden.
    xattr::set(&on_server, "user.origin", b"server", 0).unwrap();
    assert_eq!(xattr::list(&f), ["user.colour", "user.origin"]);
    assert!(xattr::list(&on_server).contains(&"user.DOSATTRIB".to_string()));

    // Create and replace flags, replacing, a value of the largest size the server's ext4
    // keeps in one block, and binary bytes.
    assert_eq!(xattr::set(&f, "user.colour", b"blue", 1), Err(libc::EEXIST));
    assert_eq!(xattr::set(&f, "user.none", b"x", 2), Err(libc::ENODATA));
    xattr::set(&f, "user.colour", b"blue", 2).unwrap();
    assert_eq!(xattr::get(&on_server, "user.colour").unwrap(), b"blue");
    let binary: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    xattr::set(&f, "user.blob", &binary, 0).unwrap();
    assert_eq!(xattr::get(&f, "user.blob").unwrap(), binary);

    // Removing, twice.
    xattr::remove(&f, "user.origin").unwrap();
    assert_eq!(xattr::get(&on_server, "user.origin"), Err(libc::ENODATA));
    assert_eq!(xattr::remove(&f, "user.origin"), Err(libc::ENODATA));
    assert_eq!(xattr::get(&f, "user.origin"), Err(libc::ENODATA));

    // What SMB cannot keep: an empty value (it would mean "remove"), other namespaces.
    assert_eq!(xattr::set(&f, "user.empty", b"", 0), Err(libc::EINVAL));
    assert_eq!(xattr::get(&f, "user.colour").unwrap(), b"blue");
    assert_eq!(xattr::set(&f, "trusted.x", b"1", 0), Err(libc::EOPNOTSUPP));
    assert_eq!(xattr::get(&f, "security.capability"), Err(libc::ENODATA));

    // Directories carry them too.
    let d = m.path("dir");
    fs::create_dir(&d).unwrap();
    xattr::set(&d, "user.kind", b"folder", 0).unwrap();
    assert_eq!(xattr::list(&d), ["user.kind"]);
    assert_eq!(xattr::list(&m.path("")), Vec::<String>::new());

    // Without `-o user_xattr` (the default): the kernel is told there are none to ask for.
    drop(m);
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "noxattrs", &[]);
    assert_eq!(
        xattr::get(&m.path("tagged.txt"), "user.colour"),
        Err(libc::EOPNOTSUPP)
    );
    drop(m);
    no_open_files(&tb);
}

/// `fallocate(2)` and `lseek(2)`'s SEEK_DATA/SEEK_HOLE through the mount, checked against the
/// file on the server's disk: a reservation grows the file (or only its space), a punched hole
/// frees the server's blocks and reads as zeros, and the holes are found where they are.
#[test]
fn fallocate_punches_holes_and_seek_finds_them() {
    use rustix::fs::{FallocateFlags, SeekFrom::Data, SeekFrom::Hole};
    use std::fs;
    use std::io::{Read, Seek, SeekFrom};
    const MIB: u64 = 1 << 20;
    let tb = testbed();
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "space", &[]);
    let p = m.path("space.bin");
    let on_server = tb.share_path("plain").join("space.bin");
    let fallocate = |f: &fs::File, mode: FallocateFlags, offset: u64, len: u64| {
        rustix::fs::fallocate(f, mode, offset, len).map_err(|e| e.raw_os_error())
    };
    let seek = |f: &fs::File, to: rustix::fs::SeekFrom| {
        rustix::fs::seek(f, to).map_err(|e| e.raw_os_error())
    };

    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    std::io::Write::write_all(&mut f, &vec![b'A'; 3 * MIB as usize]).unwrap();

    // Reserve: mode 0 grows the file, KEEP_SIZE only its space.
    fallocate(&f, FallocateFlags::empty(), 0, 4 * MIB).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 4 * MIB);
    assert_eq!(fs::metadata(&on_server).unwrap().len(), 4 * MIB);
    fallocate(&f, FallocateFlags::KEEP_SIZE, 0, 8 * MIB).unwrap();
    assert_eq!(fs::metadata(&on_server).unwrap().len(), 4 * MIB);
    // Asking for less than the file has changes nothing (SMB would truncate).
    fallocate(&f, FallocateFlags::empty(), 0, MIB).unwrap();
    assert_eq!(fs::metadata(&on_server).unwrap().len(), 4 * MIB);

    // A hole in the middle: zeros through the mount, blocks freed on the server.
    let blocks_before = fs::metadata(&on_server).unwrap().blocks();
    fallocate(
        &f,
        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        MIB,
        MIB,
    )
    .unwrap();
    let blocks_after = fs::metadata(&on_server).unwrap().blocks();
    assert!(
        blocks_after + 2 * 1024 <= blocks_before,
        "the server's file kept its blocks: {blocks_before} -> {blocks_after} (512-byte units)"
    );
    let mut all = Vec::new();
    fs::File::open(&p).unwrap().read_to_end(&mut all).unwrap();
    assert_eq!(all.len(), 4 * MIB as usize);
    let m1 = MIB as usize;
    assert!(all[..m1].iter().all(|&b| b == b'A'));
    assert!(all[m1..2 * m1].iter().all(|&b| b == 0));
    assert!(all[2 * m1..3 * m1].iter().all(|&b| b == b'A'));

    // The holes: the punched MiB, and the reserved tail past the data written.
    assert_eq!(seek(&f, Data(0)), Ok(0));
    assert_eq!(seek(&f, Hole(0)), Ok(MIB));
    assert_eq!(seek(&f, Data(MIB + 5)), Ok(2 * MIB));
    let hole = seek(&f, Hole(2 * MIB)).unwrap();
    assert!(
        (3 * MIB..=4 * MIB).contains(&hole),
        "hole after the second run of data at {hole}"
    );
    assert_eq!(seek(&f, Data(4 * MIB)), Err(libc::ENXIO));
    // The server's own view agrees (its file system's SEEK_HOLE).
    let server = fs::File::open(&on_server).unwrap();
    assert_eq!(seek(&server, Hole(0)), Ok(MIB));

    // Zeroing a range that runs past the end extends the file (no KEEP_SIZE).
    fallocate(&f, FallocateFlags::ZERO_RANGE, 10, 5 * MIB).unwrap();
    assert_eq!(fs::metadata(&on_server).unwrap().len(), 5 * MIB + 10);
    let mut head = [0u8; 20];
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_exact(&mut head).unwrap();
    assert_eq!(&head[..10], b"AAAAAAAAAA");
    assert!(head[10..].iter().all(|&b| b == 0));

    // What SMB cannot do is refused, and the file is untouched.
    assert_eq!(
        fallocate(&f, FallocateFlags::COLLAPSE_RANGE, 0, MIB),
        Err(libc::EOPNOTSUPP)
    );
    assert_eq!(fs::metadata(&on_server).unwrap().len(), 5 * MIB + 10);
    drop(f);
    drop(server);
    drop(m);
    no_open_files(&tb);
}

/// Each entry of the directory `dir` as a listing gives it, and whether its type (from the
/// listing, not a stat) is `is`.
fn listed_as(dir: &Path, is: impl Fn(&std::fs::FileType) -> bool) -> Vec<(String, bool)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                is(&e.file_type().unwrap()),
            )
        })
        .collect()
}

/// `mkfifo(3)` of `path`, its errno when refused.
fn mkfifo(path: &Path) -> Result<(), i32> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    #[allow(unsafe_code)]
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o644) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// The value of the xattr `name` of `path` on this machine's disk, if it has one.
fn disk_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 70_000];
    // SAFETY: valid NUL-terminated strings and a buffer of the length given.
    #[allow(unsafe_code)]
    let len =
        unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (len >= 0).then(|| {
        buf.truncate(len as usize);
        buf
    })
}

/// Set the xattr `name` of `path` on this machine's disk.
fn set_disk_xattr(path: &Path, name: &str, value: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid NUL-terminated strings and a buffer of the length given.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(r, 0, "setxattr {name} on {}", path.display());
}

/// Symbolic links and special files on a share without the SMB3 POSIX extensions, as
/// reparse points: Samba 4.22 mounted `noposix` keeps them (in the `user.SmbReparse` xattr of
/// a regular file). `ln -s` makes a native link (IO_REPARSE_TAG_SYMLINK) that `readlink`,
/// `ls -l`, a listing and the kernel's following read, relative and absolute (shown, not
/// resolved); a Windows absolute target is shown as documented (`C:/...`); `mkfifo` makes an
/// NFS reparse point and a FIFO on the server's own disk shows as one; rename and unlink act
/// on the link; `reparse=nfs` makes NFS links, `reparse=none` none (EPERM).
#[test]
fn reparse_point_links_and_special_files_without_posix() {
    use smb3_proto::msg::reparse::{ReparseData, SymlinkReparse};
    use std::os::unix::fs::{symlink, FileTypeExt};
    let tb = Testbed::start(TestbedConfig::unshaped(1).with_samba_trixie())
        .unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("plain");
    let m = Mounted::foreground(&tb, &source(&tb, "plain"), "reparse-noposix", &["noposix"]);
    std::fs::create_dir(m.path("dir")).unwrap();
    std::fs::write(m.path("dir/data.txt"), b"the data").unwrap();
    symlink("dir/data.txt", m.path("rel")).unwrap();
    symlink("/nowhere/at/all", m.path("abs")).unwrap();
    symlink("data.txt", m.path("dir/beside")).unwrap();
    let target = |p: &str| {
        std::fs::read_link(m.path(p))
            .unwrap_or_else(|e| panic!("readlink {p}: {e}"))
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(target("rel"), "dir/data.txt");
    assert_eq!(target("abs"), "/nowhere/at/all", "absolute: shown as it is");
    assert_eq!(target("dir/beside"), "data.txt");
    let meta = std::fs::symlink_metadata(m.path("rel")).unwrap();
    assert!(meta.file_type().is_symlink());
    assert_eq!(meta.len(), 12, "st_size is the target's length");
    assert_eq!(
        std::fs::read(m.path("rel")).unwrap(),
        b"the data",
        "followed"
    );
    assert_eq!(std::fs::read(m.path("dir/beside")).unwrap(), b"the data");
    // On the server's disk: an empty regular file holding the reparse point, not a
    // Minshall+French file.
    let on_disk = std::fs::symlink_metadata(disk.join("rel")).unwrap();
    assert!(on_disk.file_type().is_file() && on_disk.len() == 0);
    let stored = disk_xattr(&disk.join("rel"), "user.SmbReparse").expect("the reparse point");
    assert_eq!(
        &stored[..4],
        &0xA000_000Cu32.to_le_bytes(),
        "IO_REPARSE_TAG_SYMLINK"
    );
    // `ls -l` and a listing show links as links.
    let ls = sh(&format!("ls -l {}", m.mp.display()));
    assert!(
        ls.lines()
            .any(|l| l.starts_with('l') && l.ends_with("rel -> dir/data.txt")),
        "{ls}"
    );
    assert!(
        ls.lines()
            .any(|l| l.starts_with('l') && l.ends_with("abs -> /nowhere/at/all")),
        "{ls}"
    );
    let kinds = listed_as(&m.path("dir"), std::fs::FileType::is_symlink);
    assert!(kinds.contains(&("beside".into(), true)), "{kinds:?}");
    assert!(kinds.contains(&("data.txt".into(), false)), "{kinds:?}");

    // A link a Windows client made to an absolute path: its reparse point put on the server's
    // disk (the same tag, so the file stays a reparse point).
    symlink("placeholder", m.path("win")).unwrap();
    let windows = ReparseData::Symlink(SymlinkReparse {
        substitute_name: "\\??\\C:\\Windows\\win.ini".into(),
        print_name: "C:\\Windows\\win.ini".into(),
        flags: 0,
    });
    set_disk_xattr(
        &disk.join("win"),
        "user.SmbReparse",
        &windows.encode().unwrap(),
    );
    assert_eq!(target("win"), "C:/Windows/win.ini");

    // Special files: made as NFS reparse points, and one on the server's disk.
    mkfifo(&m.path("fifo")).unwrap();
    assert!(std::fs::symlink_metadata(m.path("fifo"))
        .unwrap()
        .file_type()
        .is_fifo());
    let stored = disk_xattr(&disk.join("fifo"), "user.SmbReparse").expect("the reparse point");
    assert_eq!(
        &stored[..4],
        &0x8000_0014u32.to_le_bytes(),
        "IO_REPARSE_TAG_NFS"
    );
    // A device node: its number read back from the reparse point (st_rdev).
    let made = Command::new("mknod")
        .arg(m.path("dev"))
        .args(["b", "8", "17"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let dev = std::fs::symlink_metadata(m.path("dev")).unwrap();
    assert!(dev.file_type().is_block_device());
    assert_eq!(std::os::unix::fs::MetadataExt::rdev(&dev), 0x0811);
    mkfifo(&disk.join("dir/theirs")).unwrap();
    let listed = listed_as(&m.path("dir"), |t| t.is_fifo());
    assert!(listed.contains(&("theirs".into(), true)), "{listed:?}");
    assert!(std::fs::symlink_metadata(m.path("dir/theirs"))
        .unwrap()
        .file_type()
        .is_fifo());

    // A symlink on the server's own disk is followed by Samba for a client without the POSIX
    // extensions: it shows as what it points to (the name Samba reports is the target's).
    symlink("data.txt", disk.join("dir/on-disk")).unwrap();
    let followed = std::fs::symlink_metadata(m.path("dir/on-disk")).unwrap();
    assert!(followed.file_type().is_file() && followed.len() == 8);
    assert_eq!(std::fs::read(m.path("dir/on-disk")).unwrap(), b"the data");

    // Rename and unlink act on the link, not its target.
    std::fs::rename(m.path("rel"), m.path("rel2")).unwrap();
    assert_eq!(target("rel2"), "dir/data.txt");
    std::fs::remove_file(m.path("rel2")).unwrap();
    std::fs::remove_file(m.path("fifo")).unwrap();
    assert!(!disk.join("rel2").exists() && !disk.join("fifo").exists());
    assert_eq!(std::fs::read(m.path("dir/data.txt")).unwrap(), b"the data");
    drop(m);

    // `reparse=nfs`: links as NFS reparse points, read back alike.
    let m = Mounted::foreground(
        &tb,
        &source(&tb, "plain"),
        "reparse-nfs",
        &["noposix", "reparse=nfs"],
    );
    symlink("../x/y", m.path("dir/nfs-link")).unwrap();
    assert_eq!(
        std::fs::read_link(m.path("dir/nfs-link")).unwrap().to_str(),
        Some("../x/y")
    );
    let stored =
        disk_xattr(&disk.join("dir/nfs-link"), "user.SmbReparse").expect("the reparse point");
    assert_eq!(
        &stored[..4],
        &0x8000_0014u32.to_le_bytes(),
        "IO_REPARSE_TAG_NFS"
    );
    drop(m);

    // `reparse=none`: none made.
    let m = Mounted::foreground(
        &tb,
        &source(&tb, "plain"),
        "reparse-none",
        &["noposix", "reparse=none"],
    );
    let err = symlink("x", m.path("nolink")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    assert_eq!(mkfifo(&m.path("nofifo")), Err(libc::EPERM));
    // Links made before are still read.
    assert_eq!(target_of(&m.path("abs")), "/nowhere/at/all");
    drop(m);
    assert!(!disk.join("nolink").exists() && !disk.join("nofifo").exists());
    no_open_files(&tb);
}

fn target_of(p: &Path) -> String {
    std::fs::read_link(p)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The permission bits (with setuid, setgid and sticky) `stat` shows for `p`.
fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", p.display()));
}

/// `-o modefromsid` on Samba 4.17's [backup] share (acl_xattr): chmod keeps the mode in the
/// file's DACL, `stat` and listings show it, it survives a remount, another mount sees it,
/// the server's access checks follow it, and a mount without the option behaves as before.
/// Samba stores no DACL that names an S-1-5-88 SID (it takes that for a macOS chmod and
/// answers success without storing), so what is kept here is the derived ACEs, read back as
/// the mode: setuid and setgid are not kept (a server that keeps the ACE keeps them too; the
/// library's unit tests cover that form and hostile DACLs).
#[test]
fn modefromsid_keeps_modes_in_the_dacl() {
    use std::fs;
    let tb = testbed();
    let src = source(&tb, "backup");
    let m = Mounted::foreground(&tb, &src, "modefromsid", &["modefromsid"]);
    let f = m.path("f.txt");
    fs::write(&f, b"data").unwrap();
    let d = m.path("dir");
    fs::create_dir(&d).unwrap();
    // Nothing kept yet: file_mode / dir_mode, as without the option.
    assert_eq!((mode_of(&f), mode_of(&d)), (0o755, 0o755));

    for want in [0o640, 0o755, 0o600] {
        chmod(&f, want);
        assert_eq!(mode_of(&f), want, "after chmod {want:o}");
    }
    chmod(&d, 0o1770);
    assert_eq!(mode_of(&d), 0o1770, "a directory's sticky bit is kept");
    let g = m.path("g.sh");
    fs::write(&g, b"#!/bin/sh\n").unwrap();
    chmod(&g, 0o4750);
    assert_eq!(mode_of(&g), 0o750, "setuid has nowhere to go on Samba");
    let h = m.path("dir/h.txt");
    fs::write(&h, b"in dir").unwrap();
    chmod(&h, 0o604);
    assert_eq!(mode_of(&h), 0o604);

    // The owner still reads and writes its 0600 file: the server's checks follow the ACEs
    // derived from the mode, which give the owner rw.
    fs::write(&f, b"written after chmod 600").unwrap();
    assert_eq!(fs::read(&f).unwrap(), b"written after chmod 600");
    // chmod a-w still sets the read-only attribute: writes are refused, as without the option.
    chmod(&f, 0o400);
    assert_eq!(mode_of(&f), 0o400);
    let refused = fs::OpenOptions::new().write(true).open(&f).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EACCES), "{refused}");
    chmod(&f, 0o600);
    fs::write(&f, b"writable again").unwrap();

    // On the server's disk Samba mapped the ACEs to the file's POSIX ACL too: others have
    // nothing of the 0600 file (its group bits show the ACL's mask, not the group's rights).
    let on_disk = tb.share_path("backup").join("f.txt");
    assert_eq!(
        fs::metadata(&on_disk).unwrap().mode() & 0o007,
        0,
        "the server's file keeps no rights for others"
    );

    // A second mount (another client, reading the descriptors) sees the same modes, in a
    // listing (READDIRPLUS: one DACL compound per entry) and by lookup.
    let m2 = Mounted::foreground(&tb, &src, "modefromsid-second", &["modefromsid"]);
    let listed: Vec<(String, u32)> = {
        let mut v: Vec<(String, u32)> = fs::read_dir(&m2.mp)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let mode = e.metadata().unwrap().mode() & 0o7777;
                (e.file_name().to_string_lossy().into_owned(), mode)
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        listed,
        [
            ("dir".to_string(), 0o1770),
            ("f.txt".to_string(), 0o600),
            ("g.sh".to_string(), 0o750)
        ]
    );
    assert_eq!(mode_of(&m2.path("dir/h.txt")), 0o604);
    // A change by one mount shows in the other once its attribute cache (actimeo=1) lapses.
    chmod(&m2.path("g.sh"), 0o711);
    assert!(
        wait_until(Duration::from_secs(5), || mode_of(&g) == 0o711),
        "the first mount sees the second's chmod"
    );
    drop(m2);
    drop(m);

    // Remounted: the modes are the server's, not the daemon's memory.
    let m = Mounted::foreground(&tb, &src, "modefromsid-again", &["modefromsid"]);
    assert_eq!(mode_of(&m.path("f.txt")), 0o600);
    assert_eq!(mode_of(&m.path("dir")), 0o1770);
    assert_eq!(mode_of(&m.path("dir/h.txt")), 0o604);
    drop(m);

    // Without the option: today's behaviour. file_mode / dir_mode whatever the DACL says,
    // and a chmod that keeps a write bit succeeds and changes nothing, on the server too.
    let plain = Mounted::foreground(&tb, &src, "nomodefromsid", &[]);
    assert_eq!(mode_of(&plain.path("f.txt")), 0o755);
    assert_eq!(mode_of(&plain.path("dir")), 0o755);
    chmod(&plain.path("f.txt"), 0o644);
    assert_eq!(mode_of(&plain.path("f.txt")), 0o755);
    drop(plain);
    let m = Mounted::foreground(&tb, &src, "modefromsid-last", &["modefromsid"]);
    assert_eq!(
        mode_of(&m.path("f.txt")),
        0o600,
        "untouched by the plain mount"
    );
    drop(m);
    no_open_files(&tb);
}
