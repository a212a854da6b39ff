//! The backup example runs against the testbed's [backup] share and copies the newest
//! snapshot's tree, not the live files.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

mod common;

use smb3_tests::{Testbed, TestbedConfig};

#[test]
fn backup_example_copies_the_newest_snapshot() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    std::fs::write(disk.join("f.txt"), "live").unwrap();
    // Samba 4.17 opens a file in a snapshot only if its directory still exists in the live
    // share (else OBJECT_PATH_NOT_FOUND, smbclient too); listing works either way.
    std::fs::create_dir(disk.join("sub")).unwrap();
    for (token, content) in [
        ("@GMT-2026.11.20-10.00.00", "newest"),
        ("@GMT-2026.11.19-10.00.00", "older"),
    ] {
        let dir = disk.join(".snapshots").join(token).join("sub");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("../f.txt"), content).unwrap();
        std::fs::write(dir.join("g.txt"), format!("{content} g")).unwrap();
    }
    let ok = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{}:", tb.user()))
        .arg(&disk)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let out = std::env::temp_dir().join(format!("backup_snapshot-{}", std::process::id()));
    let o = common::run_example(&tb, "backup_snapshot", "backup", &[out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("@GMT-2026.11.20-10.00.00"), "{stdout}");
    assert!(stdout.contains("2 files"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(out.join("f.txt")).unwrap(),
        "newest"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("sub/g.txt")).unwrap(),
        "newest g"
    );
    std::fs::remove_dir_all(out).ok();
}
