//! The SMB3 POSIX extensions against Samba 4.22 (the testbed's Debian 13 root, with
//! `smb3 unix extensions = yes` in `[global]` and a share `noposix` that turns them off):
//! negotiation, which shares speak them, modes on create and chmod, owners and groups, file
//! types (a symlink is reported as itself, a FIFO as a FIFO), case-sensitive names, and the
//! same metadata from a lookup, an open handle and a listing. Every check compares with what
//! the server's own file system says.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use bytes::Bytes;
use smb3_client::{
    Client, ClientConfig, Error, OpenOptions, PosixFileType, PosixMetadata, DEFAULT_FILE_MODE,
};
use smb3_tests::{Testbed, TestbedConfig};

fn start() -> Testbed {
    Testbed::start(TestbedConfig::unshaped(1).with_samba_trixie())
        .unwrap_or_else(|e| panic!("testbed: {e}"))
}

fn on_disk(path: &Path) -> std::fs::Metadata {
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn posix(m: &smb3_client::Metadata) -> &PosixMetadata {
    m.posix
        .as_ref()
        .expect("a POSIX share reports POSIX metadata")
}

#[test]
fn modes_owners_and_types_come_from_the_server() {
    let tb = start();
    let disk = tb.share_path("plain");
    // Made on the server's disk directly: what the extensions must report as they are.
    std::os::unix::fs::symlink("../elsewhere/target", disk.join("link")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(disk.join("fifo"))
        .status()
        .unwrap();
    assert!(fifo.success());
    tb.give_to_user(&disk.join("fifo"));
    let disk2 = disk.clone();
    tb.run_as_client(|server, creds| async move {
        let disk = disk2;
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        assert!(share.is_posix(), "Samba 4.22 with smb3 unix extensions");

        // A mode asked for on create is the file's mode on the server's disk.
        let f = share
            .open(
                "m640",
                &OpenOptions::new().write(true).create_new(true).mode(0o640),
            )
            .await
            .unwrap();
        f.write_at(0, Bytes::from_static(b"data")).await.unwrap();
        let at_open = posix(f.metadata_at_open()).clone();
        assert_eq!(at_open.permissions, 0o640);
        assert_eq!(at_open.file_type, Some(PosixFileType::Regular));
        let by_handle = f.metadata().await.unwrap();
        assert_eq!(posix(&by_handle).st_mode(), Some(0o100640));
        assert_eq!(by_handle.len, 4);
        f.close().await.unwrap();
        let disk_file = on_disk(&disk.join("m640"));
        assert_eq!(disk_file.permissions().mode() & 0o7777, 0o640);

        // Without a mode: the library's default, 0644.
        share
            .write_new_file("plain-default", Bytes::from_static(b"x"))
            .await
            .unwrap();
        assert_eq!(
            on_disk(&disk.join("plain-default")).permissions().mode() & 0o7777,
            DEFAULT_FILE_MODE
        );

        // Directories too.
        share.create_dir_with_mode("d750", 0o750).await.unwrap();
        assert_eq!(
            on_disk(&disk.join("d750")).permissions().mode() & 0o7777,
            0o750
        );
        let d = share.metadata("d750").await.unwrap();
        assert_eq!(posix(&d).st_mode(), Some(0o040750));
        assert!(d.is_dir());

        // The group is a Unix group SID and maps to the file's gid on the server; the owner
        // is named by the user's account SID (Samba's passdb), which maps to no id by itself.
        let m = share.metadata("m640").await.unwrap();
        let p = posix(&m);
        assert_eq!(p.gid(), Some(disk_file.gid()), "group {}", p.group);
        if let Some(uid) = p.uid() {
            assert_eq!(uid, disk_file.uid());
        }
        assert_eq!(p.links, 1);
        assert_eq!(m.file_id & 0xffff_ffff, disk_file.ino() & 0xffff_ffff);

        // chmod, by path; what the server's disk has afterwards.
        share.set_mode("m640", 0o604).await.unwrap();
        assert_eq!(
            on_disk(&disk.join("m640")).permissions().mode() & 0o7777,
            0o604
        );
        assert_eq!(
            posix(&share.metadata("m640").await.unwrap()).permissions,
            0o604
        );
        share.set_mode("d750", 0o700).await.unwrap();
        assert_eq!(
            on_disk(&disk.join("d750")).permissions().mode() & 0o7777,
            0o700
        );

        // A symlink is reported as itself (lstat), never followed by the server, whose
        // target lies outside the share anyway; a FIFO as a FIFO.
        let link = share.metadata("link").await.unwrap();
        assert_eq!(posix(&link).file_type, Some(PosixFileType::Symlink));
        let fifo = share.metadata("fifo").await.unwrap();
        assert_eq!(posix(&fifo).file_type, Some(PosixFileType::Fifo));

        // The listing carries the same: one QUERY_DIRECTORY, no stat per entry.
        let listed = share.read_dir("").await.unwrap();
        let entry = |name: &str| {
            listed
                .iter()
                .find(|e| e.name == name)
                .unwrap_or_else(|| panic!("{name} listed"))
        };
        assert_eq!(posix(&entry("m640").metadata).st_mode(), Some(0o100604));
        assert_eq!(posix(&entry("d750").metadata).st_mode(), Some(0o040700));
        assert_eq!(
            posix(&entry("link").metadata).file_type,
            Some(PosixFileType::Symlink)
        );
        assert_eq!(
            posix(&entry("fifo").metadata).file_type,
            Some(PosixFileType::Fifo)
        );
        assert_eq!(entry("m640").metadata.file_id, m.file_id);
        assert_eq!(posix(&entry("m640").metadata).group, p.group);
    });
}

#[test]
fn names_are_case_sensitive_on_a_posix_share() {
    let tb = start();
    let disk = tb.share_path("plain");
    let disk2 = disk.clone();
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        assert!(share.is_posix());
        share
            .write_new_file("foo", Bytes::from_static(b"lower"))
            .await
            .unwrap();
        share
            .write_new_file("FOO", Bytes::from_static(b"UPPER"))
            .await
            .expect("FOO is another name than foo");
        let read = |name: &'static str| {
            let share = share.clone();
            async move { share.read_small_file(name, 64).await.unwrap().unwrap() }
        };
        assert_eq!(&read("foo").await[..], b"lower");
        assert_eq!(&read("FOO").await[..], b"UPPER");
        assert!(
            share.metadata("Foo").await.is_err(),
            "no case-folding lookup"
        );
        assert_eq!(std::fs::read(disk2.join("foo")).unwrap(), b"lower");
        assert_eq!(std::fs::read(disk2.join("FOO")).unwrap(), b"UPPER");
    });
}

#[test]
fn shares_without_the_extensions_and_clients_that_do_not_ask() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        // The server offers them, this share turns them off: no POSIX metadata, and a chmod
        // says it cannot rather than doing nothing.
        let share = client.share("noposix").await.expect("tree connect");
        assert!(!share.is_posix());
        share
            .write_new_file("f", Bytes::from_static(b"x"))
            .await
            .unwrap();
        assert!(share.metadata("f").await.unwrap().posix.is_none());
        assert!(matches!(
            share.set_mode("f", 0o600).await,
            Err(Error::Unsupported { .. })
        ));
        let listed = share.read_dir("").await.unwrap();
        assert!(listed.iter().all(|e| e.metadata.posix.is_none()));

        // `noposix` on the client side: even the POSIX share is an ordinary one.
        let mut config = ClientConfig::default();
        config.posix_extensions = false;
        let plain_client = Client::connect(&server, &creds, config).await.unwrap();
        let plain = plain_client.share("plain").await.unwrap();
        assert!(!plain.is_posix());
        assert!(plain.metadata("").await.unwrap().posix.is_none());
    });
}

#[test]
fn an_open_file_survives_unlink_and_rename_over_it() {
    let tb = start();
    let disk = tb.share_path("plain");
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        // POSIX unlink: the name goes at once, the open handle still reads, and the name can
        // be taken by a new file while the old one is open.
        share
            .write_new_file("victim", Bytes::from_static(b"old bytes"))
            .await
            .unwrap();
        let held = share
            .open("victim", &OpenOptions::new().read(true))
            .await
            .unwrap();
        share
            .remove_file("victim")
            .await
            .expect("unlink while open");
        assert!(!disk.join("victim").exists(), "the name is gone at once");
        assert_eq!(&held.read_at(0, 64).await.unwrap()[..], b"old bytes");
        assert_eq!(
            held.metadata().await.unwrap().len,
            9,
            "fstat of an unlinked file"
        );
        share
            .write_new_file("victim", Bytes::from_static(b"new"))
            .await
            .expect("the name can be made again while the old file is open");
        assert_eq!(&held.read_at(0, 64).await.unwrap()[..], b"old bytes");
        held.close().await.unwrap();
        assert_eq!(std::fs::read(disk.join("victim")).unwrap(), b"new");

        // Rename over an open target. Samba 4.22 refuses it while the renaming session itself
        // has the target open (rename_internals_fsp: "Target file open", whatever the kind
        // of open), and allows it over another client's POSIX open, whose handle keeps the
        // old file (has_other_nonposix_opens). The mount works around the first with a
        // rename of the target aside (fuse-mount's rename).
        for name in ["target", "source"] {
            share
                .write_new_file(name, Bytes::from(name.as_bytes().to_vec()))
                .await
                .unwrap();
        }
        let held = share
            .open("target", &OpenOptions::new().read(true))
            .await
            .unwrap();
        let refused = share
            .rename("source", "target", smb3_client::IfExists::Replace)
            .await
            .expect_err("Samba refuses a rename over the session's own open target");
        assert_eq!(refused.status(), Some(smb3_client::NtStatus::ACCESS_DENIED));
        let other = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .unwrap();
        let other_share = other.share("plain").await.unwrap();
        other_share
            .rename("source", "target", smb3_client::IfExists::Replace)
            .await
            .expect("rename over another client's POSIX open");
        assert_eq!(&held.read_at(0, 64).await.unwrap()[..], b"target");
        held.close().await.unwrap();
        assert_eq!(std::fs::read(disk.join("target")).unwrap(), b"source");
    });
}

#[test]
fn paths_below_the_root_and_links_act_on_the_right_names() {
    let tb = start();
    let disk = tb.share_path("plain");
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        // A POSIX open reads `\` as part of a name: every path below the root must reach
        // the server with `/` separators, for opens and for rename and link targets alike.
        share.create_dir_all("a/b").await.unwrap();
        share
            .write_new_file("a/b/f", Bytes::from_static(b"deep"))
            .await
            .unwrap();
        assert_eq!(std::fs::read(disk.join("a/b/f")).unwrap(), b"deep");
        share
            .rename("a/b/f", "a/g", smb3_client::IfExists::Fail)
            .await
            .unwrap();
        assert!(disk.join("a/g").is_file() && !disk.join("a/b/f").exists());
        share
            .hard_link("a/g", "a/b/h", smb3_client::IfExists::Fail)
            .await
            .unwrap();
        assert_eq!(on_disk(&disk.join("a/b/h")).nlink(), 2);
        let listed = share.read_dir("a/b").await.unwrap();
        assert_eq!(
            listed.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["h"]
        );
        let entries: Vec<_> = std::fs::read_dir(&disk)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(entries, ["a"], "no name with a backslash in the root");

        // A symlink is renamed, has its times set and is removed as itself.
        share.symlink("../g", "a/b/l").await.unwrap();
        share
            .rename("a/b/l", "a/l2", smb3_client::IfExists::Fail)
            .await
            .expect("rename a symlink");
        assert_eq!(share.read_link("a/l2").await.unwrap(), "../g");
        share.remove_file("a/l2").await.expect("unlink a symlink");
        assert!(share.metadata("a/l2").await.is_err());
        assert!(disk.join("a/g").is_file(), "the link's target is untouched");
    });
}

#[test]
fn a_posix_open_below_the_root_survives_every_connection_reset() {
    let tb = std::sync::Arc::new(start());
    let tb2 = tb.clone();
    let disk = tb.share_path("plain");
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        share.create_dir_all("d/e").await.unwrap();
        let f = share
            .open(
                "d/e/log",
                &OpenOptions::new().write(true).create_new(true).mode(0o600),
            )
            .await
            .unwrap();
        assert!(f.is_durable());
        f.write_at(0, Bytes::from_static(b"before ")).await.unwrap();
        // The session is set up again and the durable open reclaimed (or reopened) by the
        // same name: a POSIX open with `/` separators, or it would name another file.
        let cut = tb2.clone();
        tokio::task::spawn_blocking(move || cut.cut(None))
            .await
            .unwrap()
            .expect("cut");
        f.write_at(7, Bytes::from_static(b"after")).await.unwrap();
        let m = f.metadata().await.unwrap();
        assert_eq!(posix(&m).permissions, 0o600, "still a POSIX open");
        f.close().await.unwrap();
        assert_eq!(
            std::fs::read(disk.join("d/e/log")).unwrap(),
            b"before after"
        );
        let fo = client.multichannel().failover;
        assert!(fo.sessions_reestablished >= 1, "{fo:#?}");
    });
}
