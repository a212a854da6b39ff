//! What backup software needs, against the testbed's real smbd and its [backup] share
//! (shadow_copy2 serving `.snapshots/@GMT-…` directories): listing snapshots, reading files
//! and directories as they were in one while the live files change, and the open options
//! (sharing modes, delete-on-close, backup intent, open by file id).

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use smb3_client::{
    Client, ClientConfig, Error, HandleLossCause, NtStatus, OpenOptions, ReclaimRefusal, ShareMode,
    Snapshot,
};
use smb3_tests::{Testbed, TestbedConfig};

const NEWER: &str = "@GMT-2026.11.20-10.00.00";
const OLDER: &str = "@GMT-2026.11.19-09.30.15";

/// Make a snapshot the way shadow_copy2 reads them: a directory named by its token under
/// `.snapshots` in the share's root, holding the tree as it was.
fn make_snapshot(share_dir: &Path, token: &str, files: &[(&str, &str)]) {
    let root = share_dir.join(".snapshots").join(token);
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
    }
}

/// Hand the share's tree to the test user, as smbd expects of files it serves.
fn chown_to(tb: &Testbed, dir: &Path) {
    let ok = Command::new("chown")
        .arg("-R")
        .arg(format!("{}:", tb.user()))
        .arg(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "chown {}", dir.display());
}

#[test]
fn snapshots_are_listed_and_read_while_the_live_files_change() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    std::fs::create_dir_all(disk.join("d")).unwrap();
    std::fs::write(disk.join("f.txt"), "new").unwrap();
    std::fs::write(disk.join("d/a.txt"), "live a").unwrap();
    make_snapshot(
        &disk,
        NEWER,
        &[
            ("f.txt", "old"),
            ("d/a.txt", "old a"),
            ("d/b.txt", "old b"),
            ("gone/c.txt", "old c"),
        ],
    );
    make_snapshot(&disk, OLDER, &[("f.txt", "older")]);
    chown_to(&tb, &disk);
    let disk2 = disk.clone();

    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("backup").await.expect("tree connect");

        // Listed newest first, from the root and from a directory.
        let snaps = share.snapshots("").await.expect("enumerate snapshots");
        let tokens: Vec<&str> = snaps.iter().map(|s| s.token.as_str()).collect();
        assert_eq!(tokens, [NEWER, OLDER]);
        assert_eq!(
            snaps[0].time,
            UNIX_EPOCH + Duration::from_secs(1_795_168_800)
        );
        assert_eq!(share.snapshots("d").await.unwrap().len(), 2);
        let newer = &snaps[0];

        // A backup opens the snapshot's version; the live file changes meanwhile; what the
        // backup reads does not.
        let old = share
            .open("f.txt", &OpenOptions::new().read(true).snapshot(newer))
            .await
            .expect("open in snapshot");
        assert_eq!(&old.read_at(0, 100).await.unwrap()[..], b"old");
        let live = share
            .open("f.txt", &OpenOptions::new().write(true).truncate(true))
            .await
            .unwrap();
        live.write_at(0, Bytes::from_static(b"changed while backing up"))
            .await
            .unwrap();
        live.flush().await.unwrap();
        assert_eq!(&old.read_at(0, 100).await.unwrap()[..], b"old");
        let again = share
            .open("f.txt", &OpenOptions::new().read(true).snapshot(newer))
            .await
            .unwrap();
        assert_eq!(&again.read_at(0, 100).await.unwrap()[..], b"old");
        again.close().await.unwrap();
        old.close().await.unwrap();
        live.close().await.unwrap();
        assert_eq!(
            std::fs::read(disk2.join("f.txt")).unwrap(),
            b"changed while backing up"
        );
        let older = share
            .open("f.txt", &OpenOptions::new().snapshot(&snaps[1]))
            .await
            .unwrap();
        assert_eq!(&older.read_at(0, 100).await.unwrap()[..], b"older");
        older.close().await.unwrap();

        // A view of the whole share as it was: listings and metadata too.
        let view = share.at_snapshot(newer);
        assert_eq!(view.snapshot().as_ref(), Some(newer));
        let mut names: Vec<String> = view
            .read_dir("d")
            .await
            .expect("list in snapshot")
            .into_iter()
            .map(|e| e.name)
            .collect();
        names.sort();
        assert_eq!(names, ["a.txt", "b.txt"]);
        assert_eq!(view.metadata("f.txt").await.unwrap().len, 3);
        assert_eq!(share.metadata("f.txt").await.unwrap().len, 24);
        let a = view
            .open("d/a.txt", &OpenOptions::new().read(true))
            .await
            .unwrap();
        assert_eq!(&a.read_at(0, 100).await.unwrap()[..], b"old a");
        a.close().await.unwrap();

        // A directory deleted from the live share since the snapshot: it is listed, but
        // Samba 4.17 opens no file in it (it looks the parent up in the live tree; smbclient
        // gets the same OBJECT_PATH_NOT_FOUND). Tolerated so the test notices a fixed Samba.
        let gone = view
            .read_dir("gone")
            .await
            .expect("list a directory gone live");
        assert_eq!(gone.len(), 1);
        match view
            .open("gone/c.txt", &OpenOptions::new().read(true))
            .await
        {
            Ok(f) => {
                assert_eq!(&f.read_at(0, 100).await.unwrap()[..], b"old c");
                f.close().await.unwrap();
            }
            Err(e) => {
                eprintln!("file in a directory gone live: {e}");
                assert_eq!(e.status(), Some(NtStatus::OBJECT_PATH_NOT_FOUND), "{e:?}");
            }
        }

        // Read-only: refused before anything is sent, in words.
        let e = share
            .open(
                "f.txt",
                &OpenOptions::new().read(true).write(true).snapshot(newer),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, Error::ApiMisuse(_)), "{e:?}");
        assert!(e.to_string().contains("snapshot is read-only"), "{e}");
        let e = view.create_dir("new").await.unwrap_err();
        assert!(e.to_string().contains("read-only"), "{e}");
        let e = view.remove_file("f.txt").await.unwrap_err();
        assert!(e.to_string().contains("read-only"), "{e}");
        assert!(std::fs::metadata(disk2.join("f.txt")).is_ok());

        // A time with no snapshot: a clear error naming the token, not "file not found".
        let missing = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let e = share
            .open("f.txt", &OpenOptions::new().snapshot_at(missing))
            .await
            .unwrap_err();
        eprintln!("open in a missing snapshot: {e}");
        match &e {
            Error::SnapshotNotFound { snapshot, path } => {
                assert_eq!(snapshot, "@GMT-2023.11.14-22.13.20");
                assert_eq!(path.as_deref(), Some("f.txt"));
            }
            other => panic!("expected SnapshotNotFound, got {other:?}"),
        }
        assert!(e
            .to_string()
            .contains("no snapshot @GMT-2023.11.14-22.13.20"));
        let gone = Snapshot::from_time(missing).unwrap();
        let e = share.at_snapshot(&gone).read_dir("d").await.unwrap_err();
        assert!(matches!(e, Error::SnapshotNotFound { .. }), "{e:?}");
        // A path the snapshot does not have is just not found.
        let e = view.metadata("only-live.txt").await.unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{e:?}");

        client.logoff().await.ok();
    });
}

#[test]
fn open_options_for_backup() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    let disk2 = disk.clone();
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("backup").await.expect("tree connect");
        let w = share
            .open("data.bin", &OpenOptions::new().write(true).create(true))
            .await
            .unwrap();
        w.write_at(0, Bytes::from_static(b"payload")).await.unwrap();
        w.close().await.unwrap();

        // Sharing nothing: a second open fails with a sharing violation until it is closed.
        let exclusive = share
            .open(
                "data.bin",
                &OpenOptions::new().read(true).share_mode(ShareMode::NONE),
            )
            .await
            .expect("exclusive open");
        let e = share
            .open("data.bin", &OpenOptions::new().read(true))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::SHARING_VIOLATION), "{e:?}");
        eprintln!("second open of an unshared file: {e}");
        assert!(e.to_string().contains("data.bin"), "{e}");
        exclusive.close().await.unwrap();
        // Sharing reads: readers get in, a writer does not.
        let reading = share
            .open(
                "data.bin",
                &OpenOptions::new().read(true).share_mode(ShareMode::READ),
            )
            .await
            .unwrap();
        let reader = share
            .open("data.bin", &OpenOptions::new().read(true))
            .await
            .expect("a reader shares");
        let e = share
            .open("data.bin", &OpenOptions::new().write(true))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::SHARING_VIOLATION), "{e:?}");
        reader.close().await.unwrap();
        reading.close().await.unwrap();
        share
            .open("data.bin", &OpenOptions::new().write(true))
            .await
            .expect("free again")
            .close()
            .await
            .unwrap();

        // Backup intent is accepted (and reads like any open).
        let b = share
            .open("data.bin", &OpenOptions::new().read(true).backup_intent())
            .await
            .expect("backup intent open");
        assert_eq!(&b.read_at(0, 64).await.unwrap()[..], b"payload");
        b.close().await.unwrap();

        // Delete-on-close: there while open, gone from the server's disk after the close.
        let scratch = share
            .open(
                "scratch.tmp",
                &OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .delete_on_close(),
            )
            .await
            .expect("delete-on-close open");
        assert!(
            !scratch.is_durable(),
            "delete-on-close opens are not durable"
        );
        scratch
            .write_at(0, Bytes::from_static(b"temp"))
            .await
            .unwrap();
        assert!(disk2.join("scratch.tmp").exists());
        scratch.close().await.unwrap();
        assert!(!disk2.join("scratch.tmp").exists(), "deleted on close");
        assert!(!share.exists("scratch.tmp").await.unwrap());

        // Open by file id: taken if the server does it, else a typed, clear error.
        let id = share.metadata("data.bin").await.unwrap().file_id;
        match share
            .open_by_file_id(id, &OpenOptions::new().read(true))
            .await
        {
            Ok(f) => {
                eprintln!("server opened by file id");
                assert_eq!(&f.read_at(0, 64).await.unwrap()[..], b"payload");
                f.close().await.unwrap();
            }
            Err(e) => {
                eprintln!("open by file id: {e}");
                assert!(
                    matches!(e, Error::Unsupported { .. }),
                    "expected Unsupported, got {e:?}"
                );
                assert!(e.to_string().contains("by its file id"), "{e}");
            }
        }
        client.logoff().await.ok();
    });
}

#[test]
fn a_snapshot_open_survives_losing_the_connection_with_its_options() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    std::fs::write(disk.join("f.txt"), "new").unwrap();
    make_snapshot(&disk, NEWER, &[("f.txt", "old")]);
    chown_to(&tb, &disk);
    let tb = std::sync::Arc::new(tb);
    let tb2 = tb.clone();
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("backup").await.expect("tree connect");
        let snap = Snapshot::from_token(NEWER).unwrap();
        let opts = OpenOptions::new()
            .read(true)
            .snapshot(&snap)
            .share_mode(ShareMode::READ)
            .backup_intent();
        let old = share.open("f.txt", &opts).await.expect("open in snapshot");
        assert!(old.is_durable(), "a snapshot's file is opened durable");
        let scratch = share
            .open(
                "scratch.tmp",
                &OpenOptions::new()
                    .write(true)
                    .create(true)
                    .delete_on_close(),
            )
            .await
            .unwrap();
        assert_eq!(&old.read_at(0, 100).await.unwrap()[..], b"old");

        // Every connection reset: the session is set up again and the open reclaimed (or
        // reopened) as it was asked for: in the snapshot, still sharing only reads.
        let cut = tb2.clone();
        tokio::task::spawn_blocking(move || cut.cut(None))
            .await
            .unwrap()
            .expect("cut");
        assert_eq!(&old.read_at(0, 100).await.unwrap()[..], b"old");
        let fo = client.multichannel().failover;
        assert!(fo.sessions_reestablished >= 1, "{fo:#?}");
        assert!(fo.opens_reclaimed + fo.opens_reopened >= 1, "{fo:#?}");
        // The reclaimed handle holds the snapshot's file: an exclusive open of it fails, one
        // of the live file does not.
        let exclusive = OpenOptions::new().read(true).share_mode(ShareMode::NONE);
        let e = share
            .open("f.txt", &exclusive.clone().snapshot(&snap))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::SHARING_VIOLATION), "{e:?}");
        share
            .open("f.txt", &exclusive)
            .await
            .expect("the live file is not held")
            .close()
            .await
            .unwrap();
        old.close().await.unwrap();

        // The delete-on-close open was not durable: lost with the connection, and the server
        // deleted the file when it closed the open.
        let e = scratch
            .write_at(0, Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::HandleLost {
                    cause: HandleLossCause::NotReclaimed {
                        refusal: ReclaimRefusal::NotDurable,
                        ..
                    },
                    ..
                }
            ),
            "{e:?}"
        );
        // smbd closes the lost open as it tears the old session down; give a busy machine
        // time for it.
        let mut gone = false;
        for _ in 0..40 {
            if !share.exists("scratch.tmp").await.unwrap() {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        assert!(gone, "scratch.tmp still there 10 s after its open was lost");
        client.logoff().await.ok();
    });
}
