//! smbcp and smbctl through DFS links of the testbed's standalone DFS root (`[dfs]`,
//! `msdfs root = yes`): a download keeps the link's name, an upload lands in the link's
//! target, `smbctl dfs` shows the referral chain (lines and JSON), and `--no-dfs` turns
//! following off.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

mod common;

use common::{json, scratch, smbcp, smbctl, testbed, url};
use smb3_tests::Testbed;

/// A link `name` in the DFS root leading to `target` (`SHARE[\DIR]` on the testbed's server).
fn link(tb: &Testbed, name: &str, target: &str) {
    let to = format!("msdfs:{}\\{target}", tb.server_addr(1));
    std::os::unix::fs::symlink(to, tb.share_path("dfs").join(name)).unwrap();
}

#[test]
fn smbcp_and_smbctl_go_through_dfs_links() {
    let tb = testbed();
    let plain = tb.share_path("plain");
    std::fs::create_dir_all(plain.join("reports/2026")).unwrap();
    std::fs::write(plain.join("reports/2026/q3.txt"), b"third quarter").unwrap();
    std::fs::create_dir_all(plain.join("copied")).unwrap();
    tb.give_to_user(&plain);
    link(&tb, "quarterly", "plain\\reports");

    // Down, recursively: the tree arrives under the link's name (quarterly), not its
    // target's (reports).
    let local = scratch("down");
    let out = smbcp(
        &tb,
        &[
            "-r",
            &url(&tb, "dfs/quarterly"),
            &format!("{}/", local.display()),
        ],
    );
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(local.join("quarterly/2026/q3.txt")).unwrap(),
        b"third quarter"
    );

    // Up, into a directory behind the link.
    let up = local.join("new.txt");
    std::fs::write(&up, b"filed through DFS").unwrap();
    let out = smbcp(
        &tb,
        &[up.to_str().unwrap(), &url(&tb, "dfs/quarterly/2026/")],
    );
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(plain.join("reports/2026/new.txt")).unwrap(),
        b"filed through DFS"
    );

    // Within the server (the link's target and the destination share are on one server):
    // the copy is named after the link too.
    let out = smbcp(
        &tb,
        &["-r", &url(&tb, "dfs/quarterly"), &url(&tb, "plain/copied/")],
    );
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(plain.join("copied/quarterly/2026/q3.txt")).unwrap(),
        b"third quarter"
    );

    // The referral chain, for people and as JSON.
    let out = smbctl(&tb, &["dfs", &url(&tb, "dfs/quarterly/2026")]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(link, ttl 600 s)"), "{text}");
    assert!(text.contains("\\plain\\reports (used)"), "{text}");
    assert!(text.ends_with("/plain/reports/2026\n"), "{text}");
    let out = smbctl(&tb, &["dfs", "--json", &url(&tb, "dfs/quarterly/2026")]);
    let v = json(&out);
    assert_eq!(v["hops"][0]["targets"][0]["state"], "used");
    assert_eq!(v["hops"][0]["rest"], "2026");
    assert_eq!(v["reached"]["share"], "plain");
    assert_eq!(v["reached"]["path"], "reports/2026");

    // ls and stat through the link; with --no-dfs the link is not followed.
    let out = smbctl(&tb, &["ls", &url(&tb, "dfs/quarterly/2026")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("q3.txt") && text.contains("new.txt"),
        "{text}"
    );
    let out = smbctl(
        &tb,
        &["--no-dfs", "stat", &url(&tb, "dfs/quarterly/2026/q3.txt")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("PATH_NOT_COVERED"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&local);
}

/// `smbcp -r` of a namespace's root copies what lies behind its links as directories of the
/// copy, down and back up, byte for byte; a broken link is one failed entry and the rest is
/// copied.
#[test]
fn a_copy_of_a_namespace_root_goes_through_its_links() {
    let tb = testbed();
    let plain = tb.share_path("plain");
    let data = smb3_tests::pattern(9, 3 << 20);
    std::fs::create_dir_all(plain.join("whole-ns/inner")).unwrap();
    std::fs::write(plain.join("whole-ns/inner/big.bin"), &data).unwrap();
    tb.give_to_user(&plain);
    let root = tb.share_path("dfs").join("whole");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("top.txt"), b"in the root").unwrap();
    tb.give_to_user(&tb.share_path("dfs"));
    let to = format!("msdfs:{}\\plain\\whole-ns", tb.server_addr(1));
    std::os::unix::fs::symlink(to, root.join("linked")).unwrap();
    let broken = format!("msdfs:{}\\nosuchshare", tb.server_addr(1));
    std::os::unix::fs::symlink(broken, root.join("broken")).unwrap();

    let local = scratch("whole-ns");
    let out = smbcp(
        &tb,
        &[
            "-r",
            &url(&tb, "dfs/whole"),
            &format!("{}/", local.display()),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "the broken link failed, the rest copied"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken"));
    assert_eq!(
        std::fs::read(local.join("whole/top.txt")).unwrap(),
        b"in the root"
    );
    assert!(std::fs::read(local.join("whole/linked/inner/big.bin")).unwrap() == data);

    // Back up into a new directory of the link's target, through the root.
    std::fs::remove_file(root.join("broken")).unwrap();
    let out = smbcp(
        &tb,
        &[
            "-r",
            local.join("whole/linked/inner").to_str().unwrap(),
            &url(&tb, "dfs/whole/linked/"),
        ],
    );
    assert!(out.status.success());
    assert!(std::fs::read(plain.join("whole-ns/inner/big.bin")).unwrap() == data);
}
