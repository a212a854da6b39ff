//! The file system operations the FUSE mount needs (client-core/src/set_info.rs and
//! byte_locks.rs), against the testbed's real smbd: times, the read-only attribute, hard links,
//! file ids and link counts.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use smb3_client::{Client, ClientConfig, FileTimes, IfExists, IfLocked, NtStatus, OpenOptions};
use smb3_tests::{Testbed, TestbedConfig};

#[test]
fn times_readonly_links_and_file_ids() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("plain");
    let disk2 = disk.clone();
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        let f = share
            .open("t.txt", &OpenOptions::new().write(true).create(true))
            .await
            .unwrap();
        f.write_at(0, Bytes::from_static(b"hello")).await.unwrap();

        // Times by handle and by path; a time left None is kept.
        let t1 = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        f.set_times(&FileTimes::new().modified(t1).accessed(t1))
            .await
            .unwrap();
        let m = f.metadata().await.unwrap();
        assert_eq!((m.modified, m.accessed), (Some(t1), Some(t1)));
        f.close().await.unwrap();
        let t2 = UNIX_EPOCH + Duration::new(1_200_000_000, 123_456_700);
        share
            .set_times("t.txt", &FileTimes::new().modified(t2))
            .await
            .unwrap();
        let m = share.metadata("t.txt").await.unwrap();
        assert_eq!(m.modified, Some(t2), "100 ns resolution kept");
        assert_eq!(m.accessed, Some(t1), "access time unchanged");
        let on_disk = std::fs::metadata(disk.join("t.txt")).unwrap();
        assert_eq!(on_disk.mtime(), 1_200_000_000);

        // File ids: the same from a listing and from metadata, the server's inode number.
        let listed = share.read_dir("").await.unwrap();
        let e = listed.iter().find(|e| e.name == "t.txt").unwrap();
        assert_ne!(m.file_id, 0);
        assert_eq!(e.metadata.file_id, m.file_id);
        assert_eq!(e.file_id, m.file_id);
        assert_eq!(m.file_id & 0xffff_ffff, on_disk.ino() & 0xffff_ffff);
        assert_eq!(m.links, 1);

        // Hard links: same id, two links; no replacing without `replace`.
        share.create_dir("d").await.unwrap();
        share
            .hard_link("t.txt", "d/alias.txt", IfExists::Fail)
            .await
            .unwrap();
        let a = share.metadata("d/alias.txt").await.unwrap();
        assert_eq!((a.file_id, a.links), (m.file_id, 2));
        assert_eq!(share.metadata("t.txt").await.unwrap().links, 2);
        let e = share
            .hard_link("t.txt", "d/alias.txt", IfExists::Fail)
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_COLLISION), "{e}");
        share.remove_file("d/alias.txt").await.unwrap();
        assert_eq!(share.metadata("t.txt").await.unwrap().links, 1);
        let e = share
            .hard_link("d", "d2", IfExists::Fail)
            .await
            .unwrap_err();
        assert!(e.status().is_some(), "linking a directory is refused: {e}");

        // The read-only attribute: set, refused writes, cleared again.
        let attrs = share.set_readonly("t.txt", true).await.unwrap();
        assert_ne!(attrs & 0x1, 0);
        assert!(share.metadata("t.txt").await.unwrap().is_readonly());
        let e = share
            .open("t.txt", &OpenOptions::new().write(true))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::ACCESS_DENIED), "{e}");
        share.set_readonly("t.txt", false).await.unwrap();
        assert!(!share.metadata("t.txt").await.unwrap().is_readonly());
        share
            .open("t.txt", &OpenOptions::new().write(true))
            .await
            .unwrap()
            .close()
            .await
            .unwrap();
        let e = share
            .set_times("missing", &FileTimes::new().modified(t1))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
        client.logoff().await.unwrap();
    });
    assert!(disk2.join("t.txt").exists());
}

#[test]
fn byte_range_locks_between_two_sessions() {
    use smb3_client::LockKind;
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    tb.run_as_client(|server, creds| async move {
        let a = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .unwrap();
        let b = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .unwrap();
        let (sa, sb) = (
            a.share("plain").await.unwrap(),
            b.share("plain").await.unwrap(),
        );
        let rw = OpenOptions::new().read(true).write(true).create(true);
        let fa = sa.open("locked.db", &rw).await.unwrap();
        fa.write_at(0, Bytes::from(vec![7u8; 4096])).await.unwrap();
        let fb = sb.open("locked.db", &rw).await.unwrap();

        // Exclusive on A: B can neither lock nor write the range; outside it, B can.
        fa.lock(100, 10, LockKind::Exclusive, IfLocked::Fail)
            .await
            .unwrap();
        let e = fb
            .lock(105, 1, LockKind::Shared, IfLocked::Fail)
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::LOCK_NOT_GRANTED), "{e}");
        let e = fb
            .write_at(100, Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::FILE_LOCK_CONFLICT), "{e}");
        fb.lock(200, 10, LockKind::Exclusive, IfLocked::Fail)
            .await
            .unwrap();
        fb.unlock(200, 10).await.unwrap();
        assert!(fb.unlock(200, 10).await.is_err(), "unlocking twice");

        // A waiting lock is granted when the holder lets go.
        let waiter = tokio::spawn({
            let fb = fb.clone();
            async move {
                let t = std::time::Instant::now();
                fb.lock(100, 10, LockKind::Exclusive, IfLocked::Wait)
                    .await
                    .map(|()| t.elapsed())
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "granted while A holds the range");
        fa.unlock(100, 10).await.unwrap();
        let waited = waiter.await.unwrap().expect("lock after A's unlock");
        assert!(waited >= Duration::from_millis(250), "{waited:?}");

        // Shared locks stack across sessions; an exclusive one then waits for both.
        fb.unlock(100, 10).await.unwrap();
        fa.lock(0, 1, LockKind::Shared, IfLocked::Fail)
            .await
            .unwrap();
        fb.lock(0, 1, LockKind::Shared, IfLocked::Fail)
            .await
            .unwrap();
        let e = fb
            .lock(0, 1, LockKind::Exclusive, IfLocked::Fail)
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::LOCK_NOT_GRANTED), "{e}");
        // Closing a handle drops its locks.
        fa.close().await.unwrap();
        fb.unlock(0, 1).await.unwrap();
        fb.lock(0, 1, LockKind::Exclusive, IfLocked::Fail)
            .await
            .unwrap();
        fb.close().await.unwrap();
        a.logoff().await.unwrap();
        b.logoff().await.unwrap();
    });
}

#[test]
fn dos_attributes_as_a_typed_set() {
    use smb3_client::DosAttributes;
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        share
            .open("a.txt", &OpenOptions::new().write(true).create(true))
            .await
            .unwrap()
            .close()
            .await
            .unwrap();

        // Hidden and system travel with the file (Samba: the user.DOSATTRIB xattr).
        let want = DosAttributes::HIDDEN | DosAttributes::SYSTEM | DosAttributes::ARCHIVE;
        share.set_attributes("a.txt", want).await.unwrap();
        let got = share.metadata("a.txt").await.unwrap().attributes;
        assert!(got.contains(want), "{got}");
        assert!(!got.contains(DosAttributes::READONLY), "{got}");
        let listed = share.read_dir("").await.unwrap();
        let e = listed.iter().find(|e| e.name == "a.txt").unwrap();
        assert!(e.metadata.attributes.contains(want));

        // Times and attributes in one request; the empty set clears them all.
        let t = UNIX_EPOCH + Duration::new(1_300_000_000, 500);
        share
            .set_times_and_attributes(
                "a.txt",
                &FileTimes::new().modified(t),
                DosAttributes::READONLY,
            )
            .await
            .unwrap();
        let m = share.metadata("a.txt").await.unwrap();
        assert_eq!(m.modified, Some(t));
        assert!(m.attributes.contains(DosAttributes::READONLY));
        assert!(
            !m.attributes.contains(DosAttributes::HIDDEN),
            "{}",
            m.attributes
        );
        share
            .set_attributes("a.txt", DosAttributes::empty())
            .await
            .unwrap();
        let a = share.metadata("a.txt").await.unwrap().attributes;
        assert!(a.intersection(DosAttributes::SETTABLE).is_empty(), "{a}");

        // A directory keeps its directory bit whatever is set.
        share.create_dir("d").await.unwrap();
        share
            .set_attributes("d", DosAttributes::HIDDEN)
            .await
            .unwrap();
        let d = share.metadata("d").await.unwrap();
        assert!(d.is_dir());
        assert!(d
            .attributes
            .contains(DosAttributes::DIRECTORY | DosAttributes::HIDDEN));
        let e = share
            .set_attributes("missing", DosAttributes::HIDDEN)
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
        client.logoff().await.unwrap();
    });
}

/// Bytes the session's channels have sent and received so far.
fn wire_bytes(client: &Client) -> u64 {
    client
        .channels()
        .iter()
        .map(|c| c.bytes_sent + c.bytes_received)
        .sum()
}

/// Server-side copy (FSCTL_SRV_COPYCHUNK_WRITE, MS-SMB2 3.3.5.15.6): a whole file within a
/// share and to another share of the same server, and a range at offsets, byte-exact on the
/// server's disk while only requests cross the network; a range past the source's end is
/// refused with the server's status and copies nothing.
#[test]
fn server_side_copy_within_and_between_shares() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let (plain, public) = (tb.share_path("plain"), tb.share_path("public"));
    let len = (40 << 20) + 12_345;
    let data = smb3_tests::pattern(7, len);
    let want = data.clone();
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("plain");
        let other = client.share("public").await.expect("public");
        smb3_tests::write_file(&share, "src.bin", Bytes::from(data)).await;

        let before = wire_bytes(&client);
        let n = share
            .copy_file_on_server("src.bin", &share, "copy.bin")
            .await
            .expect("copy within the share");
        let moved = wire_bytes(&client) - before;
        eprintln!("copied {n} bytes on the server; {moved} bytes crossed the network");
        assert_eq!(n, len as u64);
        assert!(
            moved < 256 << 10,
            "{moved} bytes on the wire for a server-side copy"
        );
        let n = share
            .copy_file_on_server("src.bin", &other, "across.bin")
            .await
            .expect("copy to another share");
        assert_eq!(n, len as u64);

        // A range, to an offset of another file.
        let src = share
            .open("src.bin", &OpenOptions::new().read(true))
            .await
            .unwrap();
        let dst = share
            .open(
                "range.bin",
                &OpenOptions::new().write(true).create(true).truncate(true),
            )
            .await
            .unwrap();
        let n = dst
            .copy_range_from(&src, 3 << 20, 5, 1 << 20)
            .await
            .unwrap();
        assert_eq!(n, 1 << 20);
        // Past the source's end: refused, nothing copied.
        let e = dst
            .copy_range_from(&src, len as u64 - 10, 0, 100)
            .await
            .expect_err("a range past the end of the source");
        eprintln!("past the end: {e}");
        // MS-SMB2 3.3.5.15.6: a chunk past the source's end is STATUS_INVALID_VIEW_SIZE.
        assert_eq!(e.status(), Some(NtStatus::INVALID_VIEW_SIZE), "{e:?}");
        dst.close().await.unwrap();
        src.close().await.unwrap();
        client.logoff().await.unwrap();
    });
    assert!(std::fs::read(plain.join("copy.bin")).unwrap() == want);
    assert!(std::fs::read(public.join("across.bin")).unwrap() == want);
    let range = std::fs::read(plain.join("range.bin")).unwrap();
    assert_eq!(range.len(), 5 + (1 << 20));
    assert!(range[..5].iter().all(|&b| b == 0));
    assert!(range[5..] == want[3 << 20..4 << 20]);
}

/// A file held open and renamed keeps its lease; a new file created at its old name gets a
/// lease of its own. smbd refuses one lease key for two files (MS-SMB2 3.3.5.9.8), so sending
/// the renamed file's key again fails the CREATE (the editor pattern: keep `a` open, move it
/// to `a~`, write a new `a`).
#[test]
fn a_new_file_at_a_renamed_files_old_name_opens() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        let rw = OpenOptions::new().read(true).write(true).create(true);
        let held = share.open("a", &rw).await.unwrap();
        assert!(held.lease().is_some(), "smbd grants a lease");
        held.write_at(0, Bytes::from_static(b"old")).await.unwrap();
        share.rename("a", "a~", IfExists::Fail).await.unwrap();
        let new = share
            .open("a", &rw)
            .await
            .expect("a new file at the old name");
        new.write_at(0, Bytes::from_static(b"new")).await.unwrap();
        held.write_at(3, Bytes::from_static(b"er")).await.unwrap();
        new.close().await.unwrap();
        held.close().await.unwrap();
        let read = |p: &'static str| {
            let share = share.clone();
            async move {
                let f = share.open(p, &OpenOptions::new().read(true)).await.unwrap();
                let d = f.read_at(0, 16).await.unwrap();
                f.close().await.unwrap();
                d
            }
        };
        assert_eq!(&read("a").await[..], b"new");
        assert_eq!(&read("a~").await[..], b"older");
    });
}
