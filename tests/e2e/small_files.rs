//! Whole small files in one round trip (client-core/src/small_files.rs), against the
//! testbed's real smbd: CREATE + WRITE + CLOSE and CREATE + READ + CLOSE compounds, signed
//! and sealed, what they refuse, and a write refused for lack of space leaving no file.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use bytes::Bytes;
use smb3_client::{Client, ClientConfig, NtStatus};
use smb3_tests::{pattern, Testbed, TestbedConfig};

#[test]
fn whole_files_are_written_and_read_in_one_compound_each() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let plain = tb.share_path("plain");
    let sealed = tb.share_path("encrypted");
    let small = pattern(1, 4096);
    let odd = pattern(2, 70_001);
    // Larger than one WRITE (Samba's limit is 8 MiB): the library opens and writes chunks.
    let large = pattern(3, 9 * 1024 * 1024 + 5);
    let (s, o, l) = (small.clone(), odd.clone(), large.clone());
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        for name in ["plain", "encrypted"] {
            let share = client.share(name).await.expect("tree connect");
            share
                .write_new_file("small.bin", Bytes::from(s.clone()))
                .await
                .unwrap();
            share
                .write_new_file("odd.bin", Bytes::from(o.clone()))
                .await
                .unwrap();
            share.write_new_file("empty", Bytes::new()).await.unwrap();
            share
                .write_new_file("large.bin", Bytes::from(l.clone()))
                .await
                .unwrap();

            // An existing name is refused and left as it was.
            let e = share
                .write_new_file("small.bin", Bytes::from_static(b"other"))
                .await
                .unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_COLLISION), "{e}");
            // A missing directory is the server's answer, with the path.
            let e = share
                .write_new_file("no/such/dir/f", Bytes::from_static(b"x"))
                .await
                .unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::OBJECT_PATH_NOT_FOUND), "{e}");
            assert!(e.to_string().contains("no/such/dir/f"), "{e}");

            // Reads: whole when within the limit, None when larger, empty files too.
            let got = share.read_small_file("small.bin", 4096).await.unwrap();
            assert_eq!(got.as_deref(), Some(&s[..]));
            let got = share.read_small_file("small.bin", 1 << 20).await.unwrap();
            assert_eq!(got.as_deref(), Some(&s[..]));
            assert_eq!(
                share.read_small_file("small.bin", 4095).await.unwrap(),
                None
            );
            let got = share.read_small_file("odd.bin", 70_001).await.unwrap();
            assert_eq!(got.as_deref(), Some(&o[..]));
            let got = share.read_small_file("empty", 0).await.unwrap();
            assert_eq!(got.as_deref(), Some(&[][..]));
            let limit = l.len() as u32;
            let got = share.read_small_file("large.bin", limit).await.unwrap();
            assert!(got.as_deref() == Some(&l[..]), "the large file read back");
            assert_eq!(
                share.read_small_file("large.bin", limit - 1).await.unwrap(),
                None
            );
            let e = share.read_small_file("missing", 10).await.unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
            let e = share.read_small_file("", 10).await.unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::FILE_IS_A_DIRECTORY), "{e}");

            // Directories: CREATE + CLOSE in one compound too.
            share.create_dir("d").await.unwrap();
            let e = share.create_dir("d").await.unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_COLLISION), "{e}");
            assert!(share.metadata("d").await.unwrap().is_dir());
        }
    });
    for disk in [&plain, &sealed] {
        assert_eq!(std::fs::read(disk.join("small.bin")).unwrap(), small);
        assert_eq!(std::fs::read(disk.join("odd.bin")).unwrap(), odd);
        assert_eq!(std::fs::read(disk.join("empty")).unwrap(), b"");
        assert!(std::fs::read(disk.join("large.bin")).unwrap() == large);
        assert!(disk.join("d").is_dir());
    }
    // Every compound closed its handle.
    let open = tb.open_files().expect("smbstatus");
    assert!(open.is_empty(), "handles left open: {open:?}");
}

#[test]
fn a_write_refused_for_lack_of_space_leaves_no_file_behind() {
    let mut config = TestbedConfig::unshaped(1);
    config.tmpfs_size = "8m".into();
    let tb = Testbed::start(config).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("plain");
    // Fill the share's file system (as root, on the server's side) but for a little room.
    let filler = disk.join("filler");
    let mut left = 8 * 1024 * 1024;
    while left > 0 {
        let chunk = vec![7u8; 256 * 1024];
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&filler)
            .unwrap();
        if f.write_all(&chunk).is_err() {
            break;
        }
        left -= chunk.len();
    }
    // Free 64 KiB: room for a small file, not for the 1 MiB one.
    let len = std::fs::metadata(&filler).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(len - 64 * 1024)
        .unwrap();
    tb.give_to_user(&disk);
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        let e = share
            .write_new_file("big.bin", Bytes::from(vec![1u8; 1 << 20]))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::DISK_FULL), "{e}");
        assert!(e.to_string().contains("big.bin"), "{e}");
        // Not left behind empty under its name.
        let e = share.metadata("big.bin").await.unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
        // The session goes on: a file that fits is written.
        share
            .write_new_file("fits.bin", Bytes::from(vec![2u8; 4096]))
            .await
            .unwrap();
    });
    assert!(!disk.join("big.bin").exists());
    assert_eq!(
        std::fs::read(disk.join("fits.bin")).unwrap(),
        vec![2u8; 4096]
    );
}
