//! DFS namespaces against Samba's standalone DFS root (the testbed's `[dfs]` share,
//! `msdfs root = yes`): links made as `msdfs:` symbolic links in its directory, followed by
//! `smb3_client::dfs` to the share that holds each path. Links to another share, to a share
//! that encrypts, through two links in a row, with a first target that refuses connections,
//! to a share that does not exist, and in a circle; a path in the root itself is no link.
//! Every byte read through a link is compared with the target's file on the server's disk.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::path::Path;

use bytes::Bytes;
use std::collections::BTreeMap;

use smb3_client::{
    dfs, Client, ClientConfig, Error, IfExists, NtStatus, OpenOptions, ProtocolError, Share,
    WalkOptions,
};
use smb3_tests::{pattern, Testbed, TestbedConfig};

fn start() -> Testbed {
    Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"))
}

/// A link named `name` in the DFS root, leading to `targets` (`SERVER\SHARE[\DIR]` each).
fn link(tb: &Testbed, name: &str, targets: &[String]) {
    let root = tb.share_path("dfs");
    std::os::unix::fs::symlink(format!("msdfs:{}", targets.join(",")), root.join(name))
        .unwrap_or_else(|e| panic!("link {name}: {e}"));
}

fn put(tb: &Testbed, share: &str, path: &str, data: &[u8]) {
    let file = tb.share_path(share).join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, data).unwrap();
    tb.give_to_user(&tb.share_path(share));
}

/// The whole file at `path` of `share`.
async fn read_all(share: &Share, path: &str) -> Bytes {
    let f = share
        .open(path, &OpenOptions::new().read(true))
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let len = f.metadata_at_open().len as usize;
    let data = f.read_at(0, len).await.unwrap();
    f.close().await.unwrap();
    data
}

fn on_disk(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn links_lead_to_their_targets_byte_for_byte() {
    let tb = start();
    let addr = tb.server_addr(1).to_string();
    let data = pattern(31, 3 << 20);
    put(&tb, "plain", "sub/big.bin", &data);
    put(&tb, "encrypted", "secret.txt", b"sealed all the way");
    put(&tb, "dfs", "inroot/here.txt", b"no link on the way");
    link(&tb, "tolink", &[format!("{addr}\\plain")]);
    link(&tb, "todir", &[format!("{addr}\\plain\\sub")]);
    link(&tb, "tosealed", &[format!("{addr}\\encrypted")]);
    // A link to a path that is itself behind a link: two referrals.
    link(&tb, "twohops", &[format!("{addr}\\dfs\\todir")]);
    let plain = tb.share_path("plain");
    tb.run_as_client(move |server, creds| async move {
        let config = ClientConfig::default();
        let route = dfs::connect(&server, &creds, config.clone(), "dfs", "tolink/sub/big.bin")
            .await
            .expect("through the link");
        assert_eq!(route.share.name(), "plain");
        assert_eq!(route.path, "sub/big.bin");
        assert_eq!(route.hops.len(), 1);
        let hop = &route.hops[0];
        assert_eq!(hop.referral.rest, "sub/big.bin");
        assert!(hop.referral.ttl.as_secs() > 0, "Samba gives a TTL (600 s)");
        let got = read_all(&route.share, &route.path).await;
        assert!(
            got[..] == data[..],
            "the file read through the link is the target's"
        );

        // Written through a link into a directory of the target share.
        let route = dfs::connect(&server, &creds, config.clone(), "dfs", "todir/new.txt")
            .await
            .unwrap();
        assert_eq!(
            route.path, "sub/new.txt",
            "the link's directory, then the rest"
        );
        let route_dir = route.hops[0].referral.targets[0].path.clone();
        assert_eq!(route_dir, "sub");
        route
            .share
            .write_new_file(&route.path, Bytes::from_static(b"written via DFS"))
            .await
            .unwrap();

        // Two links in a row.
        let route = dfs::connect(&server, &creds, config.clone(), "dfs", "twohops/big.bin")
            .await
            .unwrap();
        assert_eq!(route.hops.len(), 2, "{route:?}");
        assert_eq!(
            (route.share.name(), route.path.as_str()),
            ("plain", "sub/big.bin")
        );

        // A link to a share that encrypts: the target tree is sealed.
        let route = dfs::connect(
            &server,
            &creds,
            config.clone(),
            "dfs",
            "tosealed/secret.txt",
        )
        .await
        .unwrap();
        assert_eq!(route.share.name(), "encrypted");
        assert_eq!(
            &read_all(&route.share, &route.path).await[..],
            b"sealed all the way"
        );

        // A path in the root itself: no referral.
        let route = dfs::connect(&server, &creds, config, "dfs", "inroot/here.txt")
            .await
            .unwrap();
        assert!(route.hops.is_empty());
        assert_eq!(route.share.name(), "dfs");
        assert_eq!(
            &read_all(&route.share, &route.path).await[..],
            b"no link on the way"
        );
    });
    assert_eq!(on_disk(&plain.join("sub/new.txt")), b"written via DFS");
}

#[test]
fn unreachable_broken_and_circular_links_end_in_clear_errors() {
    let tb = start();
    let addr = tb.server_addr(1).to_string();
    put(&tb, "plain", "f.txt", b"second target");
    // The first target refuses connections (nothing listens on port 445 of the client's
    // own loopback); the second works.
    link(
        &tb,
        "failover",
        &["127.0.0.1\\plain".to_string(), format!("{addr}\\plain")],
    );
    link(&tb, "broken", &[format!("{addr}\\nosuchshare")]);
    link(&tb, "loop1", &[format!("{addr}\\dfs\\loop2")]);
    link(&tb, "loop2", &[format!("{addr}\\dfs\\loop1")]);
    tb.run_as_client(move |server, creds| async move {
        let config = ClientConfig::default();
        let route = dfs::connect(&server, &creds, config.clone(), "dfs", "failover/f.txt")
            .await
            .expect("the second target");
        assert_eq!(route.hops[0].used, 1);
        assert_eq!(route.hops[0].failed.len(), 1, "{:?}", route.hops[0].failed);
        assert_eq!(
            &read_all(&route.share, &route.path).await[..],
            b"second target"
        );
        // The referral is cached with the target that worked: the next path below the link
        // goes there first, and the refusing target is not tried again.
        let again = dfs::connect(&server, &creds, config.clone(), "dfs", "failover/f.txt")
            .await
            .unwrap();
        assert_eq!(again.hops[0].used, 1);
        assert!(
            again.hops[0].failed.is_empty(),
            "{:?}",
            again.hops[0].failed
        );

        // With DFS off (mount.cifs's nodfs) the share is used as it is: the path is not there.
        let mut nodfs = config.clone();
        nodfs.follow_dfs = false;
        let route = dfs::connect(&server, &creds, nodfs, "dfs", "failover/f.txt")
            .await
            .unwrap();
        assert!(route.hops.is_empty());
        let e = route.share.metadata(&route.path).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Status {
                    status: NtStatus::PATH_NOT_COVERED,
                    ..
                }
            ),
            "{e:?}"
        );

        let e = dfs::connect(&server, &creds, config.clone(), "dfs", "broken/x")
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Status {
                    status: NtStatus::BAD_NETWORK_NAME,
                    ..
                }
            ),
            "{e:?}"
        );

        let e = dfs::connect(&server, &creds, config.clone(), "dfs", "loop1/x")
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::Protocol(ProtocolError::BadReferral { .. })),
            "{e:?}"
        );
        assert!(e.to_string().contains("circle"), "{e}");

        // The root share itself meets the circle too (a walk or a mount of the namespace
        // lists `loop1`), and ends it the same way, after a bounded number of referrals.
        let root = Client::connect(&server, &creds, config.clone())
            .await
            .unwrap()
            .share("dfs")
            .await
            .unwrap();
        for _ in 0..2 {
            let e = root.list("loop1").await.unwrap_err();
            assert!(
                matches!(e, Error::Protocol(ProtocolError::BadReferral { .. })),
                "{e:?}"
            );
        }
    });
}

/// Every path of a namespace's root, walked, listed, read, written or renamed on the root
/// share itself, crosses its links as Windows' redirector does: no route asked for first.
#[test]
fn a_walk_and_every_path_operation_cross_links_by_themselves() {
    let tb = start();
    let addr = tb.server_addr(1).to_string();
    let data = pattern(77, 1 << 20);
    put(&tb, "plain", "sub/a.txt", b"behind the link");
    put(&tb, "plain", "sub/deeper/b.bin", &data);
    put(&tb, "dfs", "inroot/here.txt", b"no link on the way");
    link(&tb, "tolink", &[format!("{addr}\\plain")]);
    link(&tb, "todir", &[format!("{addr}\\plain\\sub")]);
    link(&tb, "twohops", &[format!("{addr}\\dfs\\todir")]);
    link(&tb, "broken", &[format!("{addr}\\nosuchshare")]);
    let plain = tb.share_path("plain");
    tb.run_as_client(move |server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .unwrap();
        let root = client.share("dfs").await.unwrap();

        // A walk of the whole namespace: every file behind every link, each read back.
        let mut walk = root.walk("", WalkOptions::default());
        let mut files = BTreeMap::new();
        let mut failed = Vec::new();
        while let Some(item) = walk.next().await {
            match item {
                Ok(e) if !e.entry.metadata.is_dir() => {
                    files.insert(e.path.clone(), e.entry.metadata.len);
                }
                Ok(_) => {}
                Err(e) => failed.push((e.path.clone(), e.error)),
            }
        }
        let expected: BTreeMap<String, u64> = [
            ("inroot/here.txt", 18),
            ("todir/a.txt", 15),
            ("todir/deeper/b.bin", 1 << 20),
            ("tolink/sub/a.txt", 15),
            ("tolink/sub/deeper/b.bin", 1 << 20),
            ("twohops/a.txt", 15),
            ("twohops/deeper/b.bin", 1 << 20),
        ]
        .into_iter()
        .map(|(p, n)| (p.to_string(), n))
        .collect();
        assert_eq!(files, expected);
        // The broken link is the walk's one failure, named by the caller's path.
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].0, "broken");
        assert_eq!(failed[0].1.status(), Some(NtStatus::BAD_NETWORK_NAME));
        for path in ["tolink/sub/deeper/b.bin", "twohops/deeper/b.bin"] {
            assert!(read_all(&root, path).await[..] == data[..], "{path}");
        }

        // A link itself is the directory it leads to.
        assert!(root.metadata("tolink").await.unwrap().is_dir());
        assert!(root.is_behind_link("tolink/sub"));
        assert!(!root.is_behind_link("inroot/here.txt"));

        // Written, renamed and removed through a link, on the target's disk.
        root.write_new_file("todir/new.txt", Bytes::from_static(b"via the root"))
            .await
            .unwrap();
        assert_eq!(on_disk(&plain.join("sub/new.txt")), b"via the root");
        root.rename("todir/new.txt", "todir/renamed.txt", IfExists::Fail)
            .await
            .unwrap();
        assert_eq!(on_disk(&plain.join("sub/renamed.txt")), b"via the root");
        root.create_dir("tolink/made").await.unwrap();
        assert!(plain.join("made").is_dir());
        root.remove_dir("tolink/made").await.unwrap();

        // Between a link's share and the root no server can rename: EXDEV, so `mv` copies.
        let e = root
            .rename("todir/renamed.txt", "inroot/moved.txt", IfExists::Fail)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::DifferentShares { .. }), "{e:?}");
        assert_eq!(e.to_errno(), 18);
        root.remove_file("todir/renamed.txt").await.unwrap();
        assert!(!plain.join("sub/renamed.txt").exists());

        // What fails behind a link names the caller's path, not the target's.
        let e = root.metadata("tolink/sub/nothing.txt").await.unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND));
        assert!(e.to_string().contains("tolink/sub/nothing.txt"), "{e}");
    });
}
