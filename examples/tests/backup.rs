//! The incremental backup example against the testbed's [backup] share (shadow_copy2,
//! streams_xattr, acl_xattr): a first run copies the newest snapshot with times, streams and
//! security descriptors; a second copies nothing; a newer snapshot copies only what changed;
//! a partial file left by an interrupted run is continued when it matches the server and
//! copied again when it does not.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use smb3_tests::{Testbed, TestbedConfig};

/// Bytes of the large file: several of the example's 8 MiB reads.
const BIG: usize = 20 << 20;

/// Make the snapshot `token` with `files` (path, content) in it, as root on the server's
/// disk, owned by the test user like everything the share holds.
fn snapshot(tb: &Testbed, token: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let root = tb.share_path("backup").join(".snapshots").join(token);
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
    }
    own(tb, &tb.share_path("backup"));
    root
}

fn own(tb: &Testbed, path: &Path) {
    let ok = Command::new("chown")
        .arg("-R")
        .arg(format!("{}:", tb.user()))
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

/// Run the example into `out`; returns its stdout (it must succeed).
fn backup(tb: &Testbed, out: &Path) -> String {
    let o = common::run_example(tb, "backup", "backup", &[out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("{stdout}");
    stdout
}

#[test]
fn incremental_backups_from_snapshots_with_streams_acls_and_resume() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    // The live share has the directories the snapshots have (Samba 4.17 opens files of a
    // snapshot only below directories that still exist live).
    std::fs::create_dir_all(disk.join("sub")).unwrap();
    std::fs::write(disk.join("a.txt"), b"live, changed since").unwrap();
    let big = smb3_tests::pattern(7, BIG);
    let first = snapshot(
        &tb,
        "@GMT-2026.11.20-10.00.00",
        &[("a.txt", b"first"), ("sub/big.bin", &big)],
    );
    // A named stream on a.txt, where streams_xattr keeps it (with Samba's trailing NUL).
    let ok = Command::new("setfattr")
        .args(["-n", "user.DosStream.note:$DATA", "-v", "0x6e6f746500"])
        .arg(first.join("a.txt"))
        .status()
        .expect("setfattr (package attr)")
        .success();
    assert!(ok);
    let out = std::env::temp_dir().join(format!("backup-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);

    // First run: everything, with times, the stream and the descriptors.
    let log = backup(&tb, &out);
    assert!(
        log.contains("backing up snapshot @GMT-2026.11.20-10.00.00"),
        "{log}"
    );
    assert!(
        log.contains("2 copied, 0 resumed, 0 unchanged, 0 failed"),
        "{log}"
    );
    assert_eq!(std::fs::read(out.join("data/a.txt")).unwrap(), b"first");
    assert!(std::fs::read(out.join("data/sub/big.bin")).unwrap() == big);
    let server_mtime = std::fs::metadata(first.join("sub/big.bin"))
        .unwrap()
        .mtime();
    let local_mtime = std::fs::metadata(out.join("data/sub/big.bin"))
        .unwrap()
        .mtime();
    assert_eq!(local_mtime, server_mtime, "last-write time kept");
    assert_eq!(
        std::fs::read(out.join("meta/a.txt.streams/note")).unwrap(),
        b"note"
    );
    for sd in [
        "meta/.sd",
        "meta/sub.sd",
        "meta/a.txt.sd",
        "meta/sub/big.bin.sd",
    ] {
        let raw = std::fs::read(out.join(sd)).unwrap_or_else(|e| panic!("{sd}: {e}"));
        // A self-relative descriptor: revision 1, SE_SELF_RELATIVE in its control word.
        assert!(raw.len() >= 20 && raw[0] == 1, "{sd}: {raw:?}");
        assert_ne!(u16::from_le_bytes([raw[2], raw[3]]) & 0x8000, 0, "{sd}");
    }
    assert!(!out.join("meta/sub/big.bin.streams").exists());

    // Second run, same snapshot: nothing to copy.
    let log = backup(&tb, &out);
    assert!(
        log.contains("0 copied, 0 resumed, 2 unchanged, 0 failed"),
        "{log}"
    );

    // A newer snapshot where a.txt changed and big.bin did not (same bytes and times): only
    // a.txt is copied.
    let second = tb
        .share_path("backup")
        .join(".snapshots/@GMT-2026.11.21-10.00.00");
    let cp = Command::new("cp")
        .args(["-a"])
        .arg(&first)
        .arg(&second)
        .status()
        .unwrap();
    assert!(cp.success());
    std::fs::write(second.join("a.txt"), b"second version").unwrap();
    own(&tb, &disk);
    let log = backup(&tb, &out);
    assert!(
        log.contains("backing up snapshot @GMT-2026.11.21-10.00.00"),
        "{log}"
    );
    assert!(
        log.contains("1 copied, 0 resumed, 1 unchanged, 0 failed"),
        "{log}"
    );
    assert_eq!(
        std::fs::read(out.join("data/a.txt")).unwrap(),
        b"second version"
    );

    // An interrupted run left the first 5 MiB of a new file: continued from there.
    let big2 = smb3_tests::pattern(8, BIG);
    snapshot(
        &tb,
        "@GMT-2026.11.22-10.00.00",
        &[("a.txt", b"second version"), ("sub/big2.bin", &big2)],
    );
    let partial = out.join("data/sub/big2.bin.partial");
    std::fs::write(&partial, &big2[..5 << 20]).unwrap();
    let log = backup(&tb, &out);
    assert!(
        log.contains("resumed sub/big2.bin from byte 5242880"),
        "{log}"
    );
    assert!(std::fs::read(out.join("data/sub/big2.bin")).unwrap() == big2);
    assert!(!partial.exists());

    // A partial file whose bytes are not the server's is copied again from the start.
    let big3 = smb3_tests::pattern(12, BIG); // (pattern uses seed | 1: not 9)
    snapshot(&tb, "@GMT-2026.11.23-10.00.00", &[("sub/big3.bin", &big3)]);
    let partial = out.join("data/sub/big3.bin.partial");
    std::fs::write(&partial, &big2[..3 << 20]).unwrap();
    let log = backup(&tb, &out);
    assert!(log.contains("does not match the server"), "{log}");
    assert!(log.contains("copied  sub/big3.bin"), "{log}");
    assert!(std::fs::read(out.join("data/sub/big3.bin")).unwrap() == big3);
    std::fs::remove_dir_all(&out).ok();
}
