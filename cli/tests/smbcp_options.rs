//! smbcp's options for backups, end to end against smbd: -p/-a, --update, --exclude,
//! --dry-run, --verify and --verify-only, --resume, the summary line, --json-files and the
//! progress bar.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use smb3_tests::{Testbed, TestbedConfig};

mod common;
use common::{json, scratch, smbcp, testbed, url, SMBCP};

const MIB: usize = 1024 * 1024;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn sha_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|k| (k.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

/// Times in 100 ns units since the epoch: the resolution SMB carries.
fn ticks(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() / 100
}

fn set_times(path: &Path, modified: SystemTime, accessed: SystemTime) {
    let f = std::fs::File::open(path).unwrap();
    f.set_times(
        std::fs::FileTimes::new()
            .set_modified(modified)
            .set_accessed(accessed),
    )
    .unwrap();
}

/// A small tree: three files with old, distinct times (to the nanosecond, so only exact
/// 100 ns preservation matches), one of them read-only.
fn make_tree(root: &Path) -> Vec<(&'static str, SystemTime, SystemTime)> {
    let files = [
        ("a.txt", 1000usize),
        ("sub/b.bin", 3 * MIB + 7),
        ("sub/deeper/c.log", 70_000),
    ];
    let mut out = Vec::new();
    for (i, (name, size)) in files.iter().enumerate() {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, pattern(*size, i as u32)).unwrap();
        let m = UNIX_EPOCH
            + Duration::new(
                1_500_000_000 + i as u64 * 86_400,
                123_456_700 + i as u32 * 100,
            );
        let a = UNIX_EPOCH + Duration::new(1_600_000_000 + i as u64, 987_654_300);
        set_times(&p, m, a);
        out.push((*name, m, a));
    }
    // Directories too, set last (their files' creation moved them).
    let dir_time = UNIX_EPOCH + Duration::new(1_400_000_000, 555_555_500);
    for d in ["sub/deeper", "sub"] {
        set_times(&root.join(d), dir_time, dir_time);
    }
    let ro = root.join("a.txt");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    out
}

#[test]
fn archive_mode_keeps_times_and_read_only_both_ways() {
    let tb = testbed();
    let dir = scratch("preserve");
    let src = dir.join("src");
    let times = make_tree(&src);

    let o = smbcp(
        &tb,
        &["-a", "-q", src.to_str().unwrap(), &url(&tb, "plain/")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Again over the copies: the read-only a.txt on the server is replaced all the same.
    // The first upload read the sources, which moved their access times (relatime): what
    // must arrive is the access time as it is now, before this upload reads them again.
    let accessed: Vec<SystemTime> = times
        .iter()
        .map(|(name, _, _)| {
            std::fs::metadata(src.join(name))
                .unwrap()
                .accessed()
                .unwrap()
        })
        .collect();
    let o = smbcp(
        &tb,
        &["-a", "-q", src.to_str().unwrap(), &url(&tb, "plain/")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let on_server = tb.share_path("plain").join("src");
    for (name, m, _) in &times {
        let md = std::fs::metadata(on_server.join(name)).unwrap();
        assert_eq!(
            ticks(md.modified().unwrap()),
            ticks(*m),
            "{name} mtime on the server"
        );
    }

    // Back down with -p: times equal at 100 ns, a.txt read-only again (through the server's
    // DOS attribute: the local mode bits never travelled).
    let down = dir.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let o = smbcp(
        &tb,
        &["-a", "-q", &url(&tb, "plain/src"), down.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for ((name, m, _), a) in times.iter().zip(&accessed) {
        let md = std::fs::metadata(down.join("src").join(name)).unwrap();
        assert_eq!(ticks(md.modified().unwrap()), ticks(*m), "{name} mtime");
        assert_eq!(ticks(md.accessed().unwrap()), ticks(*a), "{name} atime");
        assert_eq!(
            md.permissions().readonly(),
            *name == "a.txt",
            "{name} read-only"
        );
    }

    for d in ["sub", "sub/deeper"] {
        let up = std::fs::metadata(on_server.join(d)).unwrap();
        let back = std::fs::metadata(down.join("src").join(d)).unwrap();
        let want = UNIX_EPOCH + Duration::new(1_400_000_000, 555_555_500);
        assert_eq!(
            ticks(up.modified().unwrap()),
            ticks(want),
            "{d} on the server"
        );
        assert_eq!(ticks(back.modified().unwrap()), ticks(want), "{d} back");
    }

    // Without -p the copy's times are the time of the copy.
    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let o = smbcp(
        &tb,
        &["-r", "-q", &url(&tb, "plain/src"), plain.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = std::fs::metadata(plain.join("src/sub/b.bin")).unwrap();
    assert_ne!(ticks(md.modified().unwrap()), ticks(times[1].1));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn update_skips_what_matches_to_the_100ns_and_says_so() {
    let tb = testbed();
    let dir = scratch("update");
    let src = dir.join("src");
    make_tree(&src);
    let up = |extra: &[&str]| {
        let mut args = vec!["-a", "-q", "--update", "--json", "--json-files"];
        args.extend_from_slice(extra);
        let s = src.to_str().unwrap().to_string();
        let u = url(&tb, "plain/");
        let mut all: Vec<&str> = args;
        all.push(&s);
        all.push(&u);
        let o = smbcp(&tb, &all);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        json(&o)
    };
    let first = up(&[]);
    assert_eq!(first["copied"], 3, "{first:#}");
    assert_eq!(first["skipped"], 0);
    let second = up(&[]);
    assert_eq!(second["copied"], 0, "{second:#}");
    assert_eq!(second["skipped"], 3);
    assert_eq!(second["bytes"], 0);
    let statuses: Vec<_> = second["per_file"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(statuses, ["skipped", "skipped", "skipped"]);

    // One write time moved by 1 µs (same size): no tolerance window, so it is copied again.
    let c = src.join("sub/deeper/c.log");
    let md = std::fs::metadata(&c).unwrap();
    set_times(
        &c,
        md.modified().unwrap() + Duration::from_micros(1),
        md.accessed().unwrap(),
    );
    let third = up(&[]);
    assert_eq!(third["copied"], 1, "{third:#}");
    assert_eq!(third["skipped"], 2);
    let copied: Vec<_> = third["per_file"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == "copied")
        .map(|f| f["source"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(copied.len(), 1);
    assert!(copied[0].ends_with("c.log"), "{copied:?}");

    // The same downwards: a second -a --update download moves nothing.
    let down = dir.join("down");
    std::fs::create_dir_all(&down).unwrap();
    for (round, want_copied) in [(1, 3), (2, 0)] {
        let o = smbcp(
            &tb,
            &[
                "-a",
                "--update",
                &url(&tb, "plain/src"),
                down.to_str().unwrap(),
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        // The summary line, without --json.
        let line = format!(
            "{want_copied} copied, {} skipped, 0 failed",
            3 - want_copied
        );
        assert!(stderr(&o).contains(&line), "round {round}: {}", stderr(&o));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn exclude_and_dry_run_change_nothing_they_should_not() {
    let tb = testbed();
    let dir = scratch("exclude");
    let src = dir.join("src");
    make_tree(&src);
    let s = src.to_str().unwrap();

    // --dry-run lists what would be copied and creates nothing, not even directories.
    let o = smbcp(
        &tb,
        &[
            "-r",
            "--dry-run",
            "--exclude",
            "*.log",
            s,
            &url(&tb, "plain/"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("would copy") && out.contains("a.txt") && out.contains("b.bin"),
        "{out}"
    );
    assert!(!out.contains("c.log"), "{out}");
    assert!(
        stderr(&o).contains("2 to copy, 0 skipped, 0 failed, 1 excluded"),
        "{}",
        stderr(&o)
    );
    assert!(
        !tb.share_path("plain").join("src").exists(),
        "dry run created something"
    );

    // Directories by relative path, files by base name.
    let o = smbcp(
        &tb,
        &[
            "-r",
            "-q",
            "--json",
            "--exclude",
            "sub/deeper",
            "--exclude",
            "a.*",
            s,
            &url(&tb, "plain/"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o)["copied"], 1);
    assert_eq!(json(&o)["excluded"], 2);
    let on_server = tb.share_path("plain").join("src");
    assert!(on_server.join("sub/b.bin").is_file());
    assert!(!on_server.join("a.txt").exists());
    assert!(!on_server.join("sub/deeper").exists());

    // Excluding everything is not an error, but it is said.
    let o = smbcp(&tb, &["-r", "--exclude", "*", s, &url(&tb, "plain/all")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--exclude left out every file"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("0 copied"), "{}", stderr(&o));

    // A broken pattern is a usage error.
    let o = smbcp(&tb, &["-r", "--exclude", "[ab", s, &url(&tb, "plain/")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("unclosed ["), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn verify_reports_hashes_and_verify_only_finds_a_corrupted_copy() {
    let tb = testbed();
    let dir = scratch("verify");
    let src = dir.join("src");
    make_tree(&src);
    let s = src.to_str().unwrap();
    let o = smbcp(
        &tb,
        &[
            "-r",
            "-q",
            "--verify",
            "--json",
            "--json-files",
            s,
            &url(&tb, "plain/"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary = json(&o);
    for f in summary["per_file"].as_array().unwrap() {
        let path = Path::new(f["source"].as_str().unwrap());
        assert_eq!(f["sha256"], sha_hex(&std::fs::read(path).unwrap()), "{f}");
        assert_eq!(f["status"], "copied");
    }

    // Damage one byte of the server's copy behind smbcp's back (same size, same time).
    let victim = tb.share_path("plain").join("src/sub/b.bin");
    let mut data = std::fs::read(&victim).unwrap();
    data[MIB + 5] ^= 0x40;
    let md = std::fs::metadata(&victim).unwrap();
    std::fs::write(&victim, &data).unwrap();
    set_times(&victim, md.modified().unwrap(), md.accessed().unwrap());
    let o = smbcp(&tb, &["-r", "--verify-only", s, &url(&tb, "plain/")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("b.bin: verify: SHA-256 differs"), "{err}");
    assert!(err.contains("2 verified, 0 skipped, 1 failed"), "{err}");
    assert_eq!(
        stdout(&o).lines().filter(|l| l.starts_with("ok ")).count(),
        2
    );

    // Downwards: a download checked with --verify, then a local copy damaged.
    let down = dir.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let remote = url(&tb, "plain/src/sub/deeper/c.log");
    let local = down.join("c.log");
    let o = smbcp(&tb, &["-q", "--verify", &remote, local.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = smbcp(&tb, &["--verify-only", &remote, local.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut data = std::fs::read(&local).unwrap();
    data[0] ^= 1;
    std::fs::write(&local, &data).unwrap();
    let o = smbcp(&tb, &["--verify-only", &remote, local.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("SHA-256 differs"), "{}", stderr(&o));
    // A missing destination fails the check too.
    let o = smbcp(
        &tb,
        &[
            "--verify-only",
            &remote,
            down.join("nope").to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("reading the destination"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Write a partial file on the server's disk as an interrupted upload leaves it: smbd
/// opens it as the test user, so it must be writable by others than root.
fn write_server_file(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
}

/// The part of `--resume` every test needs: the file's summary for one run.
fn resume_run(tb: &Testbed, extra: &[&str], from: &str, to: &str) -> (serde_json::Value, String) {
    let mut args = vec!["-q", "--resume", "--json", "--json-files"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[from, to]);
    let o = smbcp(tb, &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let f = json(&o)["per_file"][0].clone();
    (f, stderr(&o))
}

#[test]
fn resume_continues_a_matching_partial_and_restarts_one_that_does_not_match() {
    let tb = testbed();
    let dir = scratch("resume");
    let size = 100 * MIB + 12_345;
    let data = pattern(size, 9);
    let want = sha_hex(&data);
    let src = dir.join("big.bin");
    std::fs::write(&src, &data).unwrap();
    let share = tb.share_path("plain");
    let remote_partial = share.join(".big.bin.smbcp-partial");
    let target = url(&tb, "plain/big.bin");

    // Upload: the first 90 MiB already there, as an interrupted run leaves them. Resuming
    // trusts all but the last 64 MiB (they may have holes): it starts at 26 MiB.
    write_server_file(&remote_partial, &data[..90 * MIB]);
    let (f, err) = resume_run(&tb, &[], src.to_str().unwrap(), &target);
    assert_eq!(f["resumed_from"], 26 * MIB as u64, "{f}");
    assert_eq!(f["bytes"], (size - 26 * MIB) as u64, "{f}");
    assert!(err.contains("resuming at byte 27262976"), "{err}");
    assert_eq!(
        sha_hex(&std::fs::read(share.join("big.bin")).unwrap()),
        want
    );
    assert!(!remote_partial.exists());

    // A partial file of other bytes: said on stderr, copied from the start, still right.
    let mut other = data[..90 * MIB].to_vec();
    other[26 * MIB - 10] ^= 0xff;
    write_server_file(&remote_partial, &other);
    let (f, err) = resume_run(&tb, &[], src.to_str().unwrap(), &target);
    assert!(
        err.contains("partial file does not match the source"),
        "{err}"
    );
    assert_eq!(f["resumed_from"], 0, "{f}");
    assert_eq!(f["bytes"], size as u64);
    assert_eq!(
        sha_hex(&std::fs::read(share.join("big.bin")).unwrap()),
        want
    );

    // Damage early in the kept part passes the last-chunk check but not --verify's full one.
    let mut early = data[..90 * MIB].to_vec();
    early[100] ^= 0xff;
    write_server_file(&remote_partial, &early);
    let (f, err) = resume_run(&tb, &["--verify"], src.to_str().unwrap(), &target);
    assert!(
        err.contains("partial file does not match the source"),
        "{err}"
    );
    assert_eq!(f["resumed_from"], 0, "{f}");
    assert_eq!(f["sha256"], want.as_str());

    // Longer than the source: cannot be a prefix.
    let mut longer = data.clone();
    longer.extend_from_slice(b"tail");
    write_server_file(&remote_partial, &longer);
    let (f, err) = resume_run(&tb, &[], src.to_str().unwrap(), &target);
    assert!(err.contains("longer than the source"), "{err}");
    assert_eq!(f["resumed_from"], 0);
    assert_eq!(
        sha_hex(&std::fs::read(share.join("big.bin")).unwrap()),
        want
    );

    // Download: the same with the local partial file.
    let down = dir.join("down.bin");
    let local_partial = dir.join(".down.bin.smbcp-partial");
    std::fs::write(&local_partial, &data[..80 * MIB]).unwrap();
    let (f, err) = resume_run(&tb, &["--verify"], &target, down.to_str().unwrap());
    assert_eq!(f["resumed_from"], 16 * MIB as u64, "{f}");
    assert!(err.contains("resuming at byte"), "{err}");
    assert_eq!(sha_hex(&std::fs::read(&down).unwrap()), want);
    assert!(!local_partial.exists());
    std::fs::write(&local_partial, vec![0u8; 80 * MIB]).unwrap();
    let (f, err) = resume_run(&tb, &[], &target, down.to_str().unwrap());
    assert!(
        err.contains("partial file does not match the source"),
        "{err}"
    );
    assert_eq!(f["resumed_from"], 0);
    assert_eq!(sha_hex(&std::fs::read(&down).unwrap()), want);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn resume_after_smbcp_was_killed_mid_upload() {
    // Shaped so the copy takes seconds: there is time to kill it half-way.
    let tb =
        Testbed::start(TestbedConfig::shaped(1, 200)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let dir = scratch("killed");
    let size = 160 * MIB;
    let data = pattern(size, 3);
    let src = dir.join("big.bin");
    std::fs::write(&src, &data).unwrap();
    let partial = tb.share_path("plain").join(".big.bin.smbcp-partial");
    let target = url(&tb, "plain/big.bin");
    let mut child = tb
        .client_command(SMBCP)
        .env("SMB_PASSWORD", tb.password())
        .env_remove("SMB_USER")
        .args(["-q", src.to_str().unwrap(), &target])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start smbcp");
    // Wait (no wall-time assert: a busy machine only makes this slower) until more than
    // 100 MiB reached the server, then kill smbcp outright: no chance to clean up.
    let mut reached = 0;
    for _ in 0..6000 {
        reached = std::fs::metadata(&partial).map_or(0, |m| m.len());
        if reached > 100 * MIB as u64 {
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        reached > 100 * MIB as u64,
        "partial reached only {reached} bytes"
    );
    // smbd may still apply WRITEs that arrived before the kill, so the partial file only
    // grows from `reached`: resuming starts at least 64 MiB below that, chunk-aligned.
    let (f, err) = resume_run(&tb, &[], src.to_str().unwrap(), &target);
    let from = f["resumed_from"].as_u64().unwrap();
    let floor = (reached - 64 * MIB as u64) / MIB as u64 * MIB as u64;
    assert!(
        from >= floor && from % MIB as u64 == 0,
        "{f} (partial had reached {reached})"
    );
    assert_eq!(f["bytes"].as_u64().unwrap(), size as u64 - from);
    assert!(err.contains("resuming at byte"), "{err}");
    assert_eq!(
        sha_hex(&std::fs::read(tb.share_path("plain").join("big.bin")).unwrap()),
        sha_hex(&data)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn progress_bar_on_a_terminal_only() {
    let tb = testbed();
    let dir = scratch("progress");
    let src = dir.join("src");
    make_tree(&src);
    // `script` gives smbcp a pseudo-terminal: the bar shows files done out of all.
    let cmd = format!("{SMBCP} -r {} '{}'", src.display(), url(&tb, "plain/"));
    let o = tb
        .client_command("script")
        .env("SMB_PASSWORD", tb.password())
        .env_remove("SMB_USER")
        .args(["-qefc", &cmd, "/dev/null"])
        .output()
        .expect("run script");
    let tty = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{tty}");
    assert!(tty.contains("/3 files"), "{tty}");
    // The bar speaks the summary line's units (MB, not MiB), and no rate before any byte.
    assert!(tty.contains(" MB") && !tty.contains("MiB"), "{tty}");
    assert!(!tty.contains(" B/s") && tty.contains("- eta -"), "{tty}");
    // Not a terminal (as in every other test): no bar, just the summary line.
    let o = smbcp(
        &tb,
        &["-r", src.to_str().unwrap(), &url(&tb, "plain/again")],
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(!stderr(&o).contains("files"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("3 copied, 0 skipped, 0 failed"),
        "{}",
        stderr(&o)
    );
    // -q on a terminal: no bar either.
    let cmd_q = format!("{SMBCP} -q -r {} '{}'", src.display(), url(&tb, "plain/q"));
    let o = tb
        .client_command("script")
        .env("SMB_PASSWORD", tb.password())
        .env_remove("SMB_USER")
        .args(["-qefc", &cmd_q, "/dev/null"])
        .output()
        .expect("run script");
    assert!(!stdout(&o).contains("files"), "{}", stdout(&o));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn many_large_files_at_once_stay_within_the_in_flight_budget() {
    const FILES: usize = 24;
    const SIZE: usize = 16 * MIB;
    let tb = testbed();
    let src = scratch("budget");
    for i in 0..FILES {
        std::fs::write(src.join(format!("f{i:02}.bin")), pattern(SIZE, i as u32)).unwrap();
    }
    // 24 files at once, each allowed 16 chunks of 1 MiB in flight: 384 MiB without a run
    // budget; 8 MiB with it.
    let o = smbcp(
        &tb,
        &[
            "-q",
            "--json",
            "-r",
            "-j",
            "24",
            "--max-in-flight",
            "8M",
            src.to_str().unwrap(),
            &url(&tb, "plain/budget"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = json(&o);
    assert_eq!(summary["files"], FILES);
    let peak = summary["peak_rss_bytes"].as_u64().expect("peak_rss_bytes");
    eprintln!("peak resident set {} MiB", peak >> 20);
    assert!(
        peak < 96 * MIB as u64,
        "peak resident set {} MiB",
        peak >> 20
    );
    let disk = tb.share_path("plain").join("budget");
    for i in 0..FILES {
        let name = format!("f{i:02}.bin");
        assert!(
            std::fs::read(disk.join(&name)).unwrap() == pattern(SIZE, i as u32),
            "{name} differs on the server"
        );
    }
    // A budget below one chunk is refused in words.
    let o = smbcp(
        &tb,
        &[
            "--max-in-flight",
            "4K",
            src.to_str().unwrap(),
            &url(&tb, "plain/x"),
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--max-in-flight"), "{}", stderr(&o));
}
