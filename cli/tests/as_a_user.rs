//! smbcp tried as a new user would, against the testbed's smbd: each case is one way a copy
//! used to lose or damage data silently, or surprise, with exit status 0.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::io::Write as _;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smb3_tests::{Testbed, TestbedConfig};

mod common;
use common::{scratch, smbcp, testbed, url};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `cp one.txt newdir/` says "Not a directory" when `newdir` does not exist, and `cp f1 f2
/// nodir` refuses several sources into what is not a directory: smbcp does the same, both
/// ways, as a usage error (exit 2), and writes nothing. `cp -r dir newdir/` makes `newdir`.
#[test]
fn a_destination_ending_in_a_slash_must_be_a_directory() {
    let tb = testbed();
    let local = scratch("slash");
    let one = local.join("one.txt");
    let two = local.join("two.txt");
    std::fs::write(&one, b"one").unwrap();
    std::fs::write(&two, b"two").unwrap();
    let plain = tb.share_path("plain");

    // Upload of one file into a directory that does not exist.
    let o = smbcp(&tb, &[one.to_str().unwrap(), &url(&tb, "plain/newdir/")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no such directory"), "{}", stderr(&o));
    assert!(!plain.join("newdir").exists(), "no file named newdir");

    // Several sources into what is not a directory.
    let o = smbcp(
        &tb,
        &[
            one.to_str().unwrap(),
            two.to_str().unwrap(),
            &url(&tb, "plain/nodir/"),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("several sources"), "{}", stderr(&o));
    std::fs::write(plain.join("afile"), b"x").unwrap();
    let o = smbcp(&tb, &[one.to_str().unwrap(), &url(&tb, "plain/afile/")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a directory"), "{}", stderr(&o));
    assert_eq!(std::fs::read(plain.join("afile")).unwrap(), b"x");

    // A directory copied with -r becomes the missing destination.
    let tree = local.join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("in.txt"), b"in").unwrap();
    let o = smbcp(
        &tb,
        &["-r", tree.to_str().unwrap(), &url(&tb, "plain/madedir/")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(plain.join("madedir/in.txt")).unwrap(), b"in");

    // Without the slash, the one file gets that name, as with cp.
    let o = smbcp(&tb, &[one.to_str().unwrap(), &url(&tb, "plain/newname")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(plain.join("newname")).unwrap(), b"one");

    // Downloads: the same rules on the local side.
    std::fs::write(plain.join("down.txt"), b"down").unwrap();
    let missing = local.join("missing");
    let o = smbcp(
        &tb,
        &[
            &url(&tb, "plain/down.txt"),
            &format!("{}/", missing.display()),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no such directory"), "{}", stderr(&o));
    assert!(!missing.exists(), "nothing written");
    let o = smbcp(
        &tb,
        &[
            &url(&tb, "plain/down.txt"),
            &url(&tb, "plain/newname"),
            local.join("one.txt").to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read(&one).unwrap(), b"one", "untouched");
}

/// Append to `path` every 20 ms until `stop`.
fn keep_appending(path: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u32> {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut appends = 0;
        while !stop.load(Ordering::SeqCst) {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(b"another line of the log\n").unwrap();
            appends += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        appends
    })
}

/// A source written to all through its copy (a growing log) is copied once more, then
/// failed with "changed while being copied", exit 1, and nothing is left at the destination:
/// the destination would match no version of the source. Both ways. The link is shaped to
/// 100 Mbit/s so that each copy of the 16 MiB file lasts over a second, many appends long.
#[test]
fn a_source_that_changes_during_the_copy_is_not_reported_copied() {
    let tb = Testbed::start(TestbedConfig::shaped(1, 100)).expect("testbed");
    let local = scratch("changing");
    let log = local.join("app.log");
    std::fs::write(&log, vec![b'x'; 16 << 20]).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let writer = keep_appending(&log, stop.clone());
    let o = smbcp(&tb, &[log.to_str().unwrap(), &url(&tb, "plain/app.log")]);
    stop.store(true, Ordering::SeqCst);
    assert!(writer.join().unwrap() > 10);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("changed while being copied"), "{err}");
    assert!(err.contains("copying it again from the start"), "{err}");
    let plain = tb.share_path("plain");
    assert!(!plain.join("app.log").exists(), "no damaged copy");
    let leftovers: Vec<_> = std::fs::read_dir(&plain).unwrap().collect();
    assert!(leftovers.is_empty(), "no partial file: {leftovers:?}");

    // The same log growing on the server while it is downloaded.
    let remote_log = plain.join("server.log");
    std::fs::write(&remote_log, vec![b'y'; 16 << 20]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = keep_appending(&remote_log, stop.clone());
    let down = local.join("down.log");
    let o = smbcp(
        &tb,
        &[&url(&tb, "plain/server.log"), down.to_str().unwrap()],
    );
    stop.store(true, Ordering::SeqCst);
    assert!(writer.join().unwrap() > 10);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("changed while being copied"), "{err}");
    assert!(!down.exists(), "no damaged copy");

    // Once it holds still, it is copied.
    let o = smbcp(
        &tb,
        &[&url(&tb, "plain/server.log"), down.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&down).unwrap(),
        std::fs::read(&remote_log).unwrap()
    );
}

/// A 255-byte name is legal on both ends: its partial name must not be longer than the file
/// system takes.
#[test]
fn a_255_byte_name_is_copied_both_ways() {
    let tb = testbed();
    let local = scratch("long");
    let name = "n".repeat(255);
    std::fs::write(local.join(&name), vec![7u8; 3 << 20]).unwrap();
    let o = smbcp(
        &tb,
        &[local.join(&name).to_str().unwrap(), &url(&tb, "plain/")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let down = local.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let o = smbcp(
        &tb,
        &[&url(&tb, &format!("plain/{name}")), down.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(down.join(&name)).unwrap().len(), 3 << 20);
}

/// The bytes smbcp's summary line says it moved.
fn bytes_moved(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains(" bytes in "))
        .unwrap();
    let before = line.split(" bytes in ").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// A sparse file is copied sparse both ways: its data moves, its holes stay holes (on the
/// server's disk and here), and the copy holds the same bytes. A file the server has with holes
/// but does not mark sparse can only be copied in full, and that is said on stderr.
#[test]
fn a_sparse_file_is_copied_sparse_both_ways() {
    use std::os::unix::fs::MetadataExt as _;
    let tb = testbed();
    let local = scratch("sparse");
    let holes = local.join("holes.img");
    let f = std::fs::File::create(&holes).unwrap();
    f.set_len(64 << 20).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, &[7u8; 100_000], 0).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, b"!", 32 << 20).unwrap();
    drop(f);
    let o = smbcp(
        &tb,
        &[holes.to_str().unwrap(), &url(&tb, "plain/holes.img")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("sparse"), "{err}");
    // The bytes counted are the bytes sent: the data, in the file system's blocks.
    assert!(bytes_moved(&err) < 1 << 20, "{err}");
    let plain = tb.share_path("plain");
    let up = plain.join("holes.img");
    let md = std::fs::metadata(&up).unwrap();
    assert_eq!(md.len(), 64 << 20);
    assert!(
        md.blocks() * 512 < 1 << 20,
        "the server's copy takes {} bytes",
        md.blocks() * 512
    );
    assert!(std::fs::read(&up).unwrap() == std::fs::read(&holes).unwrap());
    // Marked sparse, and not hidden (Samba keeps the partial file's dot name's "hidden"
    // once the mark made it store the attributes).
    let o = smbctl_in(&tb, "UTC", &["stat", &url(&tb, "plain/holes.img")]);
    let out = String::from_utf8_lossy(&o.stdout);
    let attributes = out.lines().find(|l| l.starts_with("attributes:")).unwrap();
    assert!(
        attributes.contains("sparse") && !attributes.contains("hidden"),
        "{attributes}"
    );

    // Back again: the server marked its copy sparse, so the download is sparse too.
    let down = local.join("down.img");
    let o = smbcp(&tb, &[&url(&tb, "plain/holes.img"), down.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("sparse"), "{err}");
    assert!(bytes_moved(&err) < 1 << 20, "{err}");
    let md = std::fs::metadata(&down).unwrap();
    assert_eq!(md.len(), 64 << 20);
    assert!(
        md.blocks() * 512 < 1 << 20,
        "the local copy takes {} bytes",
        md.blocks() * 512
    );
    assert!(std::fs::read(&down).unwrap() == std::fs::read(&holes).unwrap());

    // Holes the server has in a file it does not mark sparse: every byte is data to SMB.
    let served = plain.join("served.img");
    let f = std::fs::File::create(&served).unwrap();
    f.set_len(48 << 20).unwrap();
    drop(f);
    let down = local.join("served.img");
    let o = smbcp(
        &tb,
        &[&url(&tb, "plain/served.img"), down.to_str().unwrap()],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("served.img: ") && err.contains("not marked sparse"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&down).unwrap().len(), 48 << 20);

    // A file with its data written is no note.
    let full = local.join("full.bin");
    std::fs::write(&full, vec![1u8; 4 << 20]).unwrap();
    let o = smbcp(&tb, &[full.to_str().unwrap(), &url(&tb, "plain/full.bin")]);
    assert!(!stderr(&o).contains("sparse"), "{}", stderr(&o));
}

/// With no password given, smbcp asks for one on the terminal, as smbclient and mount.cifs
/// do, without echoing it; without a terminal it fails at once instead of waiting. Run
/// through a pseudo-terminal (`script`), the password typed only once the prompt shows.
#[test]
fn the_password_is_asked_on_a_terminal_and_never_echoed() {
    use std::io::Read as _;
    use std::process::Stdio;
    let tb = testbed();
    let local = scratch("prompt");
    let file = local.join("asked.txt");
    std::fs::write(&file, b"asked for").unwrap();
    // `script` runs the command through a shell: the URL's `;` must be quoted.
    let cmd = format!(
        "{} {} '{}'",
        common::SMBCP,
        file.display(),
        url(&tb, "plain/asked.txt")
    );
    let mut child = tb
        .client_command("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .env_remove("SMB_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script");
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let seen = rx.recv_timeout(Duration::from_secs(20)).expect("output");
        if seen.contains("Password for") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no prompt: {seen}");
    }
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", tb.password()).unwrap();
    let status = child.wait().expect("wait");
    let seen = reader.join().unwrap();
    eprintln!("terminal:\n{seen}");
    assert!(status.success(), "{seen}");
    assert!(
        seen.contains(&format!("Password for SMBTB\\{}@", tb.user())),
        "{seen}"
    );
    assert!(
        !seen.contains(tb.password()),
        "the password was echoed: {seen}"
    );
    assert_eq!(
        std::fs::read(tb.share_path("plain").join("asked.txt")).unwrap(),
        b"asked for"
    );

    // No terminal: one line, exit 2, at once.
    let o = tb
        .client_command(common::SMBCP)
        .env_remove("SMB_PASSWORD")
        .args([file.to_str().unwrap(), &url(&tb, "plain/again.txt")])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no password"), "{}", stderr(&o));
}

const SMBCTL: &str = env!("CARGO_BIN_EXE_smbctl");

/// smbctl with the test user's password, in the time zone `tz` (a POSIX TZ string).
fn smbctl_in(tb: &Testbed, tz: &str, args: &[&str]) -> Output {
    let out = tb
        .client_command(SMBCTL)
        .env("SMB_PASSWORD", tb.password())
        .env("TZ", tz)
        .args(args)
        .output()
        .expect("run smbctl");
    eprintln!(
        "smbctl {args:?}: {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `smbctl ls -l` shows attributes and the last-write time in local time, `-h` sizes as
/// `ls -h`, `--json` every field; `stat` prints times as ISO 8601 in local time (no more
/// `SystemTime { tv_sec: .. }`), with `--json` too.
#[test]
fn smbctl_ls_long_and_stat_speak_local_time() {
    let tb = testbed();
    let plain = tb.share_path("plain");
    std::fs::create_dir_all(plain.join("dir")).unwrap();
    let f = std::fs::File::create(plain.join("dir/report.pdf")).unwrap();
    f.set_len(1536 * 1024).unwrap();
    // 2026-11-27 12:00:00 UTC.
    let t = std::time::UNIX_EPOCH + Duration::from_secs(1_795_780_800);
    f.set_times(std::fs::FileTimes::new().set_modified(t))
        .unwrap();
    drop(f);
    std::fs::write(plain.join("dir/small.txt"), b"tiny").unwrap();
    let tz = "XST-01:30"; // 90 minutes east of UTC, no daylight saving

    let o = smbctl_in(&tb, tz, &["ls", "-l", "-h", &url(&tb, "plain/dir")]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.ends_with("report.pdf"))
        .expect("listed");
    assert!(line.starts_with("-"), "{line}");
    assert!(line.contains(" 1.5M "), "{line}");
    assert!(line.contains("2026-11-27 13:30:00"), "{line}");

    let o = smbctl_in(&tb, tz, &["ls", "--json", &url(&tb, "plain/dir")]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let pdf = v
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "report.pdf")
        .expect("in the JSON");
    assert_eq!(pdf["size"], 1536 * 1024);
    assert_eq!(pdf["modified"], "2026-11-27T13:30:00+01:30");

    let o = smbctl_in(&tb, tz, &["stat", &url(&tb, "plain/dir/report.pdf")]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("modified: 2026-11-27T13:30:00+01:30"), "{out}");
    assert!(out.contains("size: 1572864 (1.5M)"), "{out}");
    assert!(!out.contains("SystemTime"), "{out}");
    let o = smbctl_in(
        &tb,
        tz,
        &["stat", "--json", &url(&tb, "plain/dir/small.txt")],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["size"], 4);
    assert_eq!(v["type"], "file");

    // whoami: the user as given, NTLMv2, signed.
    let o = smbctl_in(&tb, tz, &["whoami", &url(&tb, "plain")]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("user:       {}\\{}", tb.domain(), tb.user())),
        "{out}"
    );
    assert!(out.contains("auth:       NTLMv2"), "{out}");
    assert!(out.contains("signing:    AES-128-"), "{out}");
    let o = smbctl_in(&tb, tz, &["whoami", "--json", &url(&tb, "plain")]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["mechanism"], "NTLMv2", "{v}");
    assert!(v["ticket_expires_in_s"].is_null(), "{v}");
}

/// On a case-insensitive share `foo` and `FOO` are one file: a tree holding both, or a second
/// run copying `foo` where an earlier one left `FOO`, would overwrite one with the other and
/// report both copied. Each such name is reported and not copied (exit 1); the rest is.
#[test]
fn names_that_differ_only_in_case_are_never_merged_on_the_share() {
    let tb = testbed();
    let local = scratch("case");
    let both = local.join("both");
    std::fs::create_dir_all(&both).unwrap();
    std::fs::write(both.join("foo"), b"lower").unwrap();
    std::fs::write(both.join("FOO"), b"UPPER").unwrap();
    std::fs::write(both.join("other"), b"other").unwrap();
    let o = smbcp(&tb, &["-r", both.to_str().unwrap(), &url(&tb, "plain/")]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("differ only in case"), "{err}");
    let copied: Vec<String> = std::fs::read_dir(tb.share_path("plain").join("both"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(copied.len(), 2, "one of foo/FOO, and other: {copied:?}");
    assert!(copied.contains(&"other".to_string()));

    // Two runs: case1/FOO, then case2/foo into the same directory.
    let case1 = local.join("case1");
    let case2 = local.join("case2");
    std::fs::create_dir_all(&case1).unwrap();
    std::fs::create_dir_all(&case2).unwrap();
    std::fs::write(case1.join("FOO"), b"first run").unwrap();
    std::fs::write(case2.join("foo"), b"second run").unwrap();
    std::fs::write(case2.join("bar"), b"bar").unwrap();
    let merged = tb.share_path("plain").join("merged");
    std::fs::create_dir_all(&merged).unwrap();
    // Made here as root: the test user must be able to write into it.
    std::fs::set_permissions(&merged, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let o = smbcp(
        &tb,
        &[
            case1.join("FOO").to_str().unwrap(),
            &url(&tb, "plain/merged/"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = smbcp(
        &tb,
        &[
            case2.join("foo").to_str().unwrap(),
            case2.join("bar").to_str().unwrap(),
            &url(&tb, "plain/merged/"),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("holds \"FOO\""), "{err}");
    assert_eq!(std::fs::read(merged.join("FOO")).unwrap(), b"first run");
    assert!(!merged.join("foo").exists());
    assert_eq!(std::fs::read(merged.join("bar")).unwrap(), b"bar");

    // The same name again is the same file: replaced, as before.
    let o = smbcp(
        &tb,
        &[
            case1.join("FOO").to_str().unwrap(),
            &url(&tb, "plain/merged/"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Symbolic links in a tree are made again on the server as links to the same targets, as
/// `cp -r` does (relative, absolute and dangling ones alike, never resolved), where the server
/// keeps links: here Samba 4.22, whose reparse points hold them. A FIFO is made again too (an
/// NFS-style reparse point), as `cp -r` makes one. A second run finds them up to date. `-L`
/// copies what the links point to instead. A FIFO named alone, without -r, is reported.
#[test]
fn links_and_special_files_in_a_tree_are_made_again_on_the_server() {
    use std::os::unix::fs::symlink;
    let tb = smb3_tests::Testbed::start(TestbedConfig::unshaped(1).with_samba_trixie())
        .unwrap_or_else(|e| panic!("testbed: {e}"));
    let local = scratch("links");
    let tree = local.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("data.txt"), b"the data").unwrap();
    symlink("data.txt", tree.join("rel")).unwrap();
    symlink("/etc/hostname", tree.join("abs")).unwrap();
    symlink("../nowhere", tree.join("sub/dangling")).unwrap();
    symlink("sub", tree.join("dirlink")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(tree.join("pipe"))
        .status()
        .unwrap();
    assert!(fifo.success());

    let o = smbcp(&tb, &["-r", tree.to_str().unwrap(), &url(&tb, "plain/")]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("6 copied"),
        "data.txt, four links, the FIFO: {err}"
    );
    // The links and the FIFO as they are, read back from the server: a second run finds each
    // one there and leaves it (the file is copied again, as files are without -u).
    let o = smbcp(&tb, &["-r", tree.to_str().unwrap(), &url(&tb, "plain/")]);
    let err = stderr(&o);
    assert!(err.contains("1 copied, 5 skipped"), "{err}");
    // Without -r a FIFO would be read as a file: it is reported instead.
    let o = smbcp(
        &tb,
        &[tree.join("pipe").to_str().unwrap(), &url(&tb, "plain/")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("pipe: a FIFO: not copied"), "{err}");

    // -L: what they point to (the dangling one cannot be followed and is reported).
    let o = smbcp(
        &tb,
        &[
            "-r",
            "-L",
            tree.to_str().unwrap(),
            &url(&tb, "plain/followed"),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("dangling"), "{err}");
    let disk = tb.share_path("plain").join("followed");
    assert_eq!(std::fs::read(disk.join("rel")).unwrap(), b"the data");
    assert!(
        disk.join("dirlink").is_dir(),
        "a followed link to a directory is one"
    );
    assert!(std::fs::symlink_metadata(disk.join("rel"))
        .unwrap()
        .file_type()
        .is_file());
}

/// A server that keeps no symbolic links (Samba 4.17: no reparse points, no POSIX
/// extensions): each link in a tree is a failure that says so and what to do, never a silent
/// gap in the copy; the rest is copied.
#[test]
fn a_link_the_server_cannot_keep_is_reported() {
    let tb = testbed();
    let local = scratch("links-417");
    std::fs::write(local.join("data.txt"), b"the data").unwrap();
    std::os::unix::fs::symlink("data.txt", local.join("rel")).unwrap();
    let o = smbcp(
        &tb,
        &["-r", local.to_str().unwrap(), &url(&tb, "plain/tree")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("rel:") && err.contains("-L copies what it points to"),
        "{err}"
    );
    assert!(err.contains("1 copied, 0 skipped, 1 failed"), "{err}");
    let disk = tb.share_path("plain").join("tree");
    assert_eq!(std::fs::read(disk.join("data.txt")).unwrap(), b"the data");
    assert!(
        !disk.join("rel").exists(),
        "no empty file where the link was"
    );
}

/// The permission bits of `p` (not following a link).
fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// `smbcp -a` to and from a share with the SMB3 POSIX extensions (Samba 4.22) keeps a tree
/// as it was, as `cp -a` between two local directories would: every file's and directory's
/// mode exactly (on the server's disk too), times, and symbolic links as links to the same
/// targets (relative, absolute, dangling, to a directory), made locally never resolved. A
/// second run leaves everything (`--update`). `-L` copies what links point to, within the
/// share only. The server plays the attacker too: a link to a directory outside the
/// destination, then a directory of that name with a file in it: nothing is ever written
/// through the local link. Owners: as root, `--preserve=all` gives downloaded files the
/// server's owner; uploads name the files it could not give away in one note.
#[test]
fn a_tree_with_links_and_modes_comes_back_as_it_was_from_a_posix_share() {
    use std::os::unix::fs::{symlink, MetadataExt as _, PermissionsExt as _};
    let tb = smb3_tests::Testbed::start(TestbedConfig::unshaped(1).with_samba_trixie())
        .unwrap_or_else(|e| panic!("testbed: {e}"));
    let local = scratch("posix-tree");
    let tree = local.join("tree");
    let victim = local.join("victim");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::create_dir_all(&victim).unwrap();
    let set_mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    std::fs::write(tree.join("data.txt"), b"the data").unwrap();
    std::fs::write(tree.join("run.sh"), b"#!/bin/sh\necho hi\n").unwrap();
    std::fs::write(tree.join("sub/inner.txt"), b"inner").unwrap();
    set_mode(&tree.join("data.txt"), 0o640);
    set_mode(&tree.join("run.sh"), 0o755);
    set_mode(&tree.join("sub/inner.txt"), 0o600);
    set_mode(&tree.join("sub"), 0o750);
    symlink("data.txt", tree.join("rel")).unwrap();
    symlink("/etc/hostname", tree.join("abs")).unwrap();
    symlink("../nowhere", tree.join("sub/dangling")).unwrap();
    symlink("sub", tree.join("dirlink")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(tree.join("fifo"))
        .status()
        .unwrap();
    assert!(fifo.success());

    // Up: modes exact on the server's disk (Samba's create mask 0744 would have taken
    // run.sh's group and other x bits without -p).
    let o = smbcp(&tb, &["-a", tree.to_str().unwrap(), &url(&tb, "plain/")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let disk = tb.share_path("plain").join("tree");
    for (name, mode) in [
        ("data.txt", 0o640),
        ("run.sh", 0o755),
        ("sub", 0o750),
        ("sub/inner.txt", 0o600),
    ] {
        assert_eq!(mode_of(&disk.join(name)), mode, "{name} on the server");
    }
    // The server's own link, pointing outside whatever directory a download goes to, and a
    // device node of its own.
    symlink(&victim, disk.join("escape")).unwrap();
    let null = std::process::Command::new("mknod")
        .arg(disk.join("null"))
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(null.success());

    // Down: the same tree.
    let back = local.join("back");
    std::fs::create_dir(&back).unwrap();
    let o = smbcp(
        &tb,
        &["-a", &url(&tb, "plain/tree"), back.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let copy = back.join("tree");
    for name in ["data.txt", "run.sh", "sub", "sub/inner.txt"] {
        assert_eq!(
            mode_of(&copy.join(name)),
            mode_of(&tree.join(name)),
            "{name} back here"
        );
        // At SMB's resolution: 100 ns.
        let ticks = |p: &Path| {
            let t = std::fs::metadata(p).unwrap().modified().unwrap();
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() / 100
        };
        assert_eq!(
            ticks(&copy.join(name)),
            ticks(&tree.join(name)),
            "{name}'s time"
        );
    }
    assert_eq!(
        std::fs::read(copy.join("run.sh")).unwrap(),
        b"#!/bin/sh\necho hi\n"
    );
    let link = |p: &Path| std::fs::read_link(p).unwrap();
    assert_eq!(link(&copy.join("rel")), Path::new("data.txt"));
    assert_eq!(link(&copy.join("abs")), Path::new("/etc/hostname"));
    assert_eq!(link(&copy.join("sub/dangling")), Path::new("../nowhere"));
    assert_eq!(link(&copy.join("dirlink")), Path::new("sub"));
    assert_eq!(link(&copy.join("escape")), victim.as_path());
    // The FIFO, and the device (this test runs as root, which mknod needs), made again.
    use std::os::unix::fs::FileTypeExt as _;
    let special = |p: &str| std::fs::symlink_metadata(copy.join(p)).unwrap();
    assert!(special("fifo").file_type().is_fifo());
    assert!(special("null").file_type().is_char_device());
    assert_eq!(special("null").rdev(), 0x0103);
    assert_eq!(
        mode_of(&copy.join("null")),
        0o600,
        "a device from a server: root's alone"
    );
    // A link named as the source is followed, as `cp` does.
    let one = local.join("one.txt");
    let o = smbcp(&tb, &[&url(&tb, "plain/tree/rel"), one.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&one).unwrap(), b"the data");
    // Again: everything is there already.
    let o = smbcp(
        &tb,
        &[
            "-a",
            "--update",
            &url(&tb, "plain/tree"),
            back.to_str().unwrap(),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("0 copied, 10 skipped"),
        "3 files, 5 links, a FIFO and a device: {err}"
    );

    // The server turns its link into a directory holding a file: the local link is left,
    // not written through.
    std::fs::remove_file(disk.join("escape")).unwrap();
    std::fs::create_dir(disk.join("escape")).unwrap();
    std::fs::write(disk.join("escape/pwned"), b"from the server").unwrap();
    set_mode(&disk.join("escape/pwned"), 0o644);
    let o = smbcp(
        &tb,
        &["-a", &url(&tb, "plain/tree"), back.to_str().unwrap()],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("escape") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "nothing outside"
    );
    std::fs::remove_dir_all(disk.join("escape")).unwrap();

    // -L: what the links lead to, inside the share only.
    symlink("../../../..", disk.join("up")).unwrap();
    let followed = local.join("followed");
    let o = smbcp(
        &tb,
        &[
            "-r",
            "-L",
            &url(&tb, "plain/tree"),
            followed.to_str().unwrap(),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(std::fs::read(followed.join("rel")).unwrap(), b"the data");
    assert_eq!(
        std::fs::read(followed.join("dirlink/inner.txt")).unwrap(),
        b"inner"
    );
    assert!(followed.join("dirlink").is_dir() && !followed.join("dirlink").is_symlink());
    assert!(
        err.contains("abs: a symbolic link to \"/etc/hostname\", outside the share"),
        "{err}"
    );
    assert!(
        err.contains("up: a symbolic link to \"../../../..\", outside the share"),
        "{err}"
    );
    assert!(err.contains("dangling"), "{err}");
    assert!(!followed.join("abs").exists() && !followed.join("up").exists());
    std::fs::remove_file(disk.join("up")).unwrap();

    // Owners: this test runs as root, so a file the server names by Unix ids (a user
    // without a Samba account: S-1-22-1-UID) becomes theirs here. The SMB user's own files
    // Samba names by its account SID, which has no Unix id: those are counted in a note.
    std::fs::write(disk.join("foreign.txt"), b"not mine").unwrap();
    std::os::unix::fs::chown(disk.join("foreign.txt"), Some(4242), Some(4343)).unwrap();
    set_mode(&disk.join("foreign.txt"), 0o4755);
    let owned = local.join("owned");
    let o = smbcp(
        &tb,
        &[
            "-r",
            "--preserve=all",
            &url(&tb, "plain/tree"),
            owned.to_str().unwrap(),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let foreign = std::fs::metadata(owned.join("foreign.txt")).unwrap();
    assert_eq!((foreign.uid(), foreign.gid()), (4242, 4343));
    assert_eq!(
        mode_of(&owned.join("foreign.txt")),
        0o755,
        "a server's setuid bit is never kept"
    );
    assert!(
        err.contains("owner or group of 5 files and directories not kept"),
        "the tree, sub and three files of the SMB user: {err}"
    );
    // ...and the server does not let its SMB user give files to root: one note says so.
    let o = smbcp(
        &tb,
        &[
            "-r",
            "--preserve=all",
            tree.to_str().unwrap(),
            &url(&tb, "plain/again"),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("owner or group of 5 files and directories not kept"),
        "{err}"
    );
    assert_eq!(mode_of(&tb.share_path("plain").join("again/run.sh")), 0o755);
}
