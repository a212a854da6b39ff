//! Listings page by page and the breadth-first walk (client-core/src/listing.rs), against
//! the testbed's real smbd: a directory of 20,000 entries, a tree with a symbolic-link
//! loop in it, and a directory the user may not list.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::collections::BTreeSet;
use std::os::unix::fs::symlink;

use smb3_client::{Client, ClientConfig, WalkOptions};
use smb3_tests::{client_block_on, Testbed, TestbedConfig};

const MANY: usize = 20_000;

#[test]
fn listings_arrive_page_by_page_and_walks_go_around_loops_and_errors() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("plain");
    // Made on the server's disk directly (as root; smbd serves them as the test user).
    let many = disk.join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..MANY {
        std::fs::write(many.join(format!("f{i:05}")), b"").unwrap();
    }
    let tree = disk.join("tree");
    for d in ["a/b/c", "a/d", "e"] {
        std::fs::create_dir_all(tree.join(d)).unwrap();
    }
    for f in ["top.txt", "a/1.txt", "a/b/2.txt", "a/b/c/3.txt", "e/4.txt"] {
        std::fs::write(tree.join(f), f.as_bytes()).unwrap();
    }
    // A link back up: followed, it would lead the walk round and round.
    symlink("..", tree.join("a/loop")).unwrap();
    // A directory the user may not list.
    std::fs::create_dir(tree.join("locked")).unwrap();
    std::fs::write(tree.join("locked/hidden.txt"), b"x").unwrap();
    tb.give_to_user(&disk);
    std::fs::set_permissions(
        tree.join("locked"),
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .unwrap();

    let rt = tb.client_runtime();
    let (server, creds) = (format!("{}:445", tb.server_addr(1)), tb.credentials());
    let client = client_block_on(&rt, async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");

        // Page by page: no page holds the whole directory, all pages together do, once.
        let mut listing = share.list("many").await.unwrap();
        let (mut pages, mut largest) = (0, 0);
        let mut names = BTreeSet::new();
        while let Some(page) = listing.next_page().await.unwrap() {
            pages += 1;
            largest = largest.max(page.len());
            for e in page {
                assert!(names.insert(e.name), "an entry came twice");
            }
        }
        eprintln!("{MANY} entries in {pages} pages, at most {largest} per page");
        assert_eq!(names.len(), MANY);
        assert!(largest < MANY / 10, "a page of {largest} entries");
        // Entry by entry, and closed early: the handle goes (checked at the end).
        let mut listing = share.list("many").await.unwrap();
        for _ in 0..10 {
            assert!(listing.next_entry().await.unwrap().is_some());
        }
        listing.close().await.unwrap();
        let mut dropped = share.list("many").await.unwrap();
        assert!(dropped.next_entry().await.unwrap().is_some());
        drop(dropped);
        // A missing directory is an error that names it.
        let err = share.list("no/such/dir").await.unwrap_err();
        assert!(err.to_string().contains("no/such/dir"), "{err}");

        // The walk: every entry once, directories before what they hold, the loop entered
        // no further than its own name, the locked directory one error.
        let mut walk = share.walk("tree", WalkOptions::default());
        let (mut seen, mut errors) = (Vec::new(), Vec::new());
        while let Some(item) = walk.next().await {
            match item {
                Ok(e) => seen.push((e.path, e.depth, e.entry.metadata.is_dir())),
                Err(e) => errors.push(e.to_string()),
            }
        }
        let paths: BTreeSet<&str> = seen.iter().map(|(p, _, _)| p.as_str()).collect();
        assert_eq!(paths.len(), seen.len(), "an entry came twice: {seen:?}");
        let want: BTreeSet<&str> = [
            "tree/top.txt",
            "tree/a",
            "tree/a/1.txt",
            "tree/a/b",
            "tree/a/b/2.txt",
            "tree/a/b/c",
            "tree/a/b/c/3.txt",
            "tree/a/d",
            "tree/a/loop",
            "tree/e",
            "tree/e/4.txt",
            "tree/locked",
        ]
        .into();
        assert_eq!(paths, want);
        let depth = |p: &str| seen.iter().find(|s| s.0 == p).unwrap().1;
        assert_eq!((depth("tree/top.txt"), depth("tree/a/b/c/3.txt")), (1, 4));
        // Breadth-first: every entry of depth 1 before any of depth 3.
        let last_shallow = seen.iter().rposition(|s| s.1 == 1).unwrap();
        let first_deep = seen.iter().position(|s| s.1 == 3).unwrap();
        assert!(last_shallow < first_deep, "{seen:?}");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("tree/locked"), "{errors:?}");

        // A depth limit; and a walk dropped half-way stops.
        let mut walk = share.walk(
            "tree",
            WalkOptions {
                max_depth: Some(1),
                ..WalkOptions::default()
            },
        );
        let mut top = BTreeSet::new();
        while let Some(item) = walk.next().await {
            top.insert(item.unwrap().path);
        }
        assert_eq!(top.len(), 4, "{top:?}");
        let mut walk = share.walk("", WalkOptions::default());
        assert!(walk.next().await.is_some());
        drop(walk);
        client
    });
    // Nothing left open at the server by the listings closed early or dropped (those close
    // in the background), with the session still up.
    let mut open = tb.open_files().unwrap();
    for _ in 0..100 {
        if open.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        open = tb.open_files().unwrap();
    }
    assert!(open.is_empty(), "{open:?}");
    client_block_on(&rt, async move { client.logoff().await.unwrap() });
    std::fs::set_permissions(
        tb.share_path("plain").join("tree/locked"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
}
