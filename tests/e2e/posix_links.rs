//! Symbolic links and special files on a share with the SMB3 POSIX extensions, against Samba
//! 4.22 (the testbed's Debian 13 root): links made by the client read back, are symlinks to
//! Samba (its POSIX metadata from another connection, smbclient's `allinfo`, the reparse
//! point in the file's xattr on the server's disk); symlinks made on the server's disk read
//! back as Samba gives them; FIFOs, sockets and devices made by the client have their type and
//! numbers; a share without the extensions keeps them too (Samba 4.17 keeps none). Hostile
//! server answers cannot be faked here: the unit tests of `smb3_proto::msg::reparse` and
//! `smb3_client`'s `symlinks` cover them.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::path::Path;

use bytes::Bytes;
use smb3_client::{
    Client, ClientConfig, DosAttributes, Error, IfExists, LinkForm, Metadata, NfsReparse, NtStatus,
    PosixFileType, ReparseData, Share, SpecialKind, SymlinkReparse, MAX_LINK_TARGET,
};
use smb3_tests::{client_block_on, Testbed, TestbedConfig};

/// IO_REPARSE_TAG_SYMLINK and IO_REPARSE_TAG_NFS (MS-FSCC 2.1.2.1).
const TAG_SYMLINK: u32 = 0xA000_000C;
const TAG_NFS: u32 = 0x8000_0014;
/// Samba applies a share's `create mask` (default 0744) to the mode of a POSIX create
/// (source3/smbd/open.c `apply_conf_file_mask`): group and others lose their write bits.
const CREATE_MASK: u32 = 0o744;

fn start() -> Testbed {
    Testbed::start(TestbedConfig::unshaped(1).with_samba_trixie())
        .unwrap_or_else(|e| panic!("testbed: {e}"))
}

async fn connect(server: &str, creds: &smb3_client::UserCredentials, share: &str) -> Share {
    let client = Client::connect(server, creds, ClientConfig::default())
        .await
        .expect("connect");
    client.share(share).await.expect("tree connect")
}

fn file_type(m: &Metadata) -> Option<PosixFileType> {
    m.posix
        .as_ref()
        .expect("a POSIX share reports POSIX metadata")
        .file_type
}

/// The reparse point Samba keeps for a file, from its xattr on the server's disk.
fn stored_reparse_point(path: &Path) -> Vec<u8> {
    let out = std::process::Command::new("getfattr")
        .args(["--only-values", "-n", "user.SmbReparse"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("getfattr: {e}"));
    assert!(
        out.status.success(),
        "getfattr {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// smbclient 4.22 from the root, as the test user, on share `plain`: what Samba's own client
/// makes of our files.
fn smbclient(tb: &Testbed, commands: &str) -> String {
    let out = tb
        .client_root_command("smbclient")
        .arg(format!("//{}/plain", tb.server_addr(1)))
        .arg("-U")
        .arg(format!("{}%{}", tb.user(), tb.password()))
        .args(["-c", commands])
        .output()
        .expect("smbclient runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "smbclient -c {commands:?}: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn link_cases() -> Vec<(&'static str, String)> {
    vec![
        ("rel", "target.txt".to_string()),
        ("up", "../outside/x".to_string()),
        ("abs", "/etc/passwd".to_string()),
        (
            "spaces and ünïcødé ファイル",
            "dir/with spaces/ünïcødé ファイル 🎉".to_string(),
        ),
        // As long as a POSIX target can be: 4095 bytes.
        ("long", format!("{}abcde", "abcdefghi/".repeat(409))),
        ("dangling", "no/such/thing".to_string()),
    ]
}

#[test]
fn links_made_by_the_client_read_back_and_are_symlinks_to_samba() {
    let tb = start();
    let disk = tb.share_path("plain");
    let rt = tb.client_runtime();
    let server = format!("{}:445", tb.server_addr(1));
    let creds = tb.credentials();
    assert_eq!(link_cases()[4].1.len(), MAX_LINK_TARGET);
    client_block_on(&rt, async move {
        let share = connect(&server, &creds, "plain").await;
        assert!(share.is_posix(), "Samba 4.22 with smb3 unix extensions");
        share
            .write_new_file("target.txt", Bytes::from_static(b"the target"))
            .await
            .unwrap();
        share.create_dir("dir").await.unwrap();

        for (name, target) in link_cases() {
            share.symlink(&target, name).await.unwrap();
            assert_eq!(share.read_link(name).await.unwrap(), target, "{name}");
            // Samba's view: a symlink, stored as the reparse point we set, with the mode the
            // library gives a link's file.
            let m = share.metadata(name).await.unwrap();
            let p = m.posix.as_ref().unwrap();
            assert_eq!(p.file_type, Some(PosixFileType::Symlink), "{name}");
            assert_eq!(p.reparse_tag, TAG_SYMLINK);
            assert_eq!(p.permissions, 0o644);
            assert!(m.attributes.contains(DosAttributes::REPARSE_POINT));
            let relative = !target.starts_with('/');
            assert_eq!(
                share.reparse_point(name).await.unwrap(),
                Some(ReparseData::Symlink(SymlinkReparse {
                    substitute_name: target.replace('/', "\\"),
                    print_name: target.clone(),
                    flags: u32::from(relative),
                }))
            );
        }
        // In a subdirectory: on a POSIX open `/` separates, so the link lands in `dir`.
        share.symlink("../target.txt", "dir/inner").await.unwrap();
        assert_eq!(share.read_link("dir/inner").await.unwrap(), "../target.txt");

        // Listings say the same, from one QUERY_DIRECTORY.
        let listed = share.read_dir("").await.unwrap();
        for (name, _) in link_cases() {
            let entry = listed.iter().find(|e| e.name == name).expect("listed");
            assert_eq!(file_type(&entry.metadata), Some(PosixFileType::Symlink));
        }
        let inner = share.read_dir("dir").await.unwrap();
        assert_eq!(inner.len(), 1);
        assert_eq!(inner[0].name, "inner");
        assert_eq!(file_type(&inner[0].metadata), Some(PosixFileType::Symlink));

        // Another connection sees links, not files: it is Samba's state, not ours.
        let other = connect(&server, &creds, "plain").await;
        for (name, target) in link_cases() {
            let m = other.metadata(name).await.unwrap();
            assert_eq!(file_type(&m), Some(PosixFileType::Symlink), "{name}");
            assert_eq!(other.read_link(name).await.unwrap(), target);
        }

        // A name that is taken stays what it is.
        for taken in ["target.txt", "rel", "dir"] {
            let e = share.symlink("elsewhere", taken).await.unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_COLLISION), "{taken}");
        }
        assert_eq!(share.read_link("rel").await.unwrap(), "target.txt");
        assert_eq!(
            share
                .read_small_file("target.txt", 64)
                .await
                .unwrap()
                .unwrap(),
            &b"the target"[..]
        );

        // What is not a link says so (EINVAL, as readlink(2)).
        for plain in ["target.txt", "dir"] {
            match share.read_link(plain).await {
                Err(e @ Error::NotALink { reparse_tag: 0, .. }) => assert_eq!(e.to_errno(), 22),
                other => panic!("{plain}: {other:?}"),
            }
            assert_eq!(share.reparse_point(plain).await.unwrap(), None);
        }
        assert!(matches!(
            share.read_link("no such file").await,
            Err(Error::Status {
                status: NtStatus::OBJECT_NAME_NOT_FOUND,
                ..
            })
        ));
        // Targets no link may have are refused before anything is sent.
        for bad in [
            String::new(),
            "a\0b".into(),
            "x".repeat(MAX_LINK_TARGET + 1),
        ] {
            assert!(matches!(
                share.symlink(&bad, "bad").await,
                Err(Error::ApiMisuse(_))
            ));
        }
        assert!(!share.exists("bad").await.unwrap());
    });
    drop(rt);

    // On the server's disk: an empty regular file whose xattr holds exactly the buffer set.
    for (name, target) in link_cases() {
        let path = disk.join(name);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file() && meta.len() == 0, "{name}: {meta:?}");
        let relative = !target.starts_with('/');
        let want = ReparseData::Symlink(SymlinkReparse {
            substitute_name: target.replace('/', "\\"),
            print_name: target.clone(),
            flags: u32::from(relative),
        })
        .encode()
        .unwrap();
        assert_eq!(stored_reparse_point(&path), want, "{name}");
    }
    assert!(disk.join("dir/inner").is_file());
    assert!(!disk.join("dir\\inner").exists());

    // Samba's own client reads the same link.
    let info = smbclient(&tb, "allinfo rel; readlink rel");
    assert!(info.contains("IO_REPARSE_TAG_SYMLINK"), "{info}");
    assert!(info.contains("substitute_name=target.txt"), "{info}");
    assert!(info.contains("flags=1"), "{info}");
    assert!(info.contains("rel -> target.txt"), "{info}");
}

#[test]
fn links_on_the_servers_disk_read_back_as_samba_gives_them() {
    let tb = start();
    let disk = tb.share_path("plain");
    // The share's directory as smbd, chrooted in the Debian 13 root, sees it.
    let inside = tb.path_in_root(&disk);
    let link = |target: &Path, name: &str| std::os::unix::fs::symlink(target, disk.join(name));
    std::fs::create_dir(disk.join("dir")).unwrap();
    std::fs::create_dir(disk.join("sub")).unwrap();
    link(Path::new("../elsewhere/target"), "rel").unwrap();
    link(&inside.join("dir/x"), "abs_in").unwrap();
    link(&disk.join("dir/x"), "abs_host").unwrap();
    link(Path::new("/etc/hostname"), "abs_out").unwrap();
    link(&inside.join("sub/y"), "sub/down_abs").unwrap();
    link(&inside.join("dir/z"), "sub/across_abs").unwrap();
    link(Path::new("a\\b"), "backslash").unwrap();
    let nodisk = tb.share_path("noposix");
    std::os::unix::fs::symlink("../elsewhere/target", nodisk.join("rel")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", nodisk.join("abs_out")).unwrap();
    tb.give_to_user(&disk);
    tb.give_to_user(&nodisk);
    let rt = tb.client_runtime();
    let server = format!("{}:445", tb.server_addr(1));
    let creds = tb.credentials();
    let host_target = disk.join("dir/x").to_string_lossy().into_owned();
    let across = inside.join("dir/z").to_string_lossy().into_owned();
    client_block_on(&rt, async move {
        let share = connect(&server, &creds, "plain").await;
        let expect = [
            // Relative: as on disk.
            ("rel", "../elsewhere/target".to_string()),
            // Absolute, below the link's directory as smbd sees it: made relative by Samba.
            ("abs_in", "dir/x".to_string()),
            // Absolute elsewhere (the host's path is not smbd's): as given.
            ("abs_host", host_target),
            ("abs_out", "/etc/hostname".to_string()),
            // Samba compares with the link's own directory, not the share's root.
            ("sub/down_abs", "y".to_string()),
            ("sub/across_abs", across),
            // A `\` in an on-disk target reads as `/`: targets from the wire are in SMB's
            // terms, where `\` separates.
            ("backslash", "a/b".to_string()),
        ];
        for (name, target) in &expect {
            assert_eq!(&share.read_link(name).await.unwrap(), target, "{name}");
            let Some(ReparseData::Symlink(raw)) = share.reparse_point(name).await.unwrap() else {
                panic!("{name}: a symlink reparse point");
            };
            assert_eq!(raw.is_relative(), !target.starts_with('/'), "{name}");
        }
        for name in ["rel", "abs_in", "abs_out", "backslash"] {
            let m = share.metadata(name).await.unwrap();
            assert_eq!(file_type(&m), Some(PosixFileType::Symlink), "{name}");
        }
        let listed = share.read_dir("sub").await.unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed
            .iter()
            .all(|e| file_type(&e.metadata) == Some(PosixFileType::Symlink)));

        // Without the POSIX extensions too: the FSCTL does not need them.
        let noposix = connect(&server, &creds, "noposix").await;
        assert!(!noposix.is_posix());
        assert_eq!(
            noposix.read_link("rel").await.unwrap(),
            "../elsewhere/target"
        );
        assert_eq!(noposix.read_link("abs_out").await.unwrap(), "/etc/hostname");
    });
}

#[test]
fn special_files_made_by_the_client_have_their_type() {
    let tb = start();
    let disk = tb.share_path("plain");
    // Made on the server's disk: Samba answers for them with NFS reparse points of its own.
    for (args, name) in [
        (vec!["mkfifo"], "disk_fifo"),
        (vec!["mknod", "-m", "0644"], "disk_null"),
    ] {
        let mut cmd = std::process::Command::new(args[0]);
        cmd.args(&args[1..]).arg(disk.join(name));
        if name == "disk_null" {
            cmd.args(["c", "1", "3"]);
        }
        assert!(cmd.status().unwrap().success(), "{args:?}");
    }
    tb.give_to_user(&disk);
    let cases = [
        ("fifo", SpecialKind::Fifo, 0o640, PosixFileType::Fifo),
        ("socket", SpecialKind::Socket, 0o600, PosixFileType::Socket),
        (
            "null",
            SpecialKind::CharDevice { major: 1, minor: 3 },
            0o666,
            PosixFileType::CharDevice,
        ),
        (
            "sda1",
            SpecialKind::BlockDevice {
                major: 8,
                minor: 1 << 20 | 1,
            },
            0o660,
            PosixFileType::BlockDevice,
        ),
    ];
    let rt = tb.client_runtime();
    let server = format!("{}:445", tb.server_addr(1));
    let creds = tb.credentials();
    client_block_on(&rt, async move {
        let share = connect(&server, &creds, "plain").await;
        for (name, kind, mode, want) in cases {
            share.make_special(name, kind, mode).await.unwrap();
            let m = share.metadata(name).await.unwrap();
            let p = m.posix.as_ref().unwrap();
            assert_eq!(p.file_type, Some(want), "{name}");
            assert_eq!(p.permissions, mode & CREATE_MASK, "{name}");
            assert_eq!(p.reparse_tag, TAG_NFS);
            let Some(ReparseData::Nfs(nfs)) = share.reparse_point(name).await.unwrap() else {
                panic!("{name}: an NFS reparse point");
            };
            let numbers = match (kind, nfs) {
                (SpecialKind::Fifo, NfsReparse::Fifo)
                | (SpecialKind::Socket, NfsReparse::Socket) => None,
                (
                    SpecialKind::CharDevice { major, minor },
                    NfsReparse::CharDevice { major: a, minor: b },
                )
                | (
                    SpecialKind::BlockDevice { major, minor },
                    NfsReparse::BlockDevice { major: a, minor: b },
                ) => Some(((major, minor), (a, b))),
                (kind, nfs) => panic!("{name}: made {kind:?}, read {nfs:?}"),
            };
            if let Some((made, read)) = numbers {
                assert_eq!(made, read, "{name}");
            }
            match share.read_link(name).await {
                Err(Error::NotALink { reparse_tag, .. }) => assert_eq!(reparse_tag, TAG_NFS),
                other => panic!("{name}: {other:?}"),
            }
            let e = share
                .make_special(name, SpecialKind::Fifo, 0o600)
                .await
                .unwrap_err();
            assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_COLLISION));
        }
        // From another connection, and in a listing.
        let other = connect(&server, &creds, "plain").await;
        let listed = other.read_dir("").await.unwrap();
        for (name, _, mode, want) in cases {
            let entry = listed.iter().find(|e| e.name == name).expect("listed");
            assert_eq!(file_type(&entry.metadata), Some(want), "{name}");
            assert_eq!(
                entry.metadata.posix.as_ref().unwrap().permissions,
                mode & CREATE_MASK
            );
        }
        // What Samba makes of the server's own FIFO and device.
        assert_eq!(
            other.reparse_point("disk_fifo").await.unwrap(),
            Some(ReparseData::Nfs(NfsReparse::Fifo))
        );
        assert_eq!(
            other.reparse_point("disk_null").await.unwrap(),
            Some(ReparseData::Nfs(NfsReparse::CharDevice {
                major: 1,
                minor: 3
            }))
        );
        let m = other.metadata("disk_null").await.unwrap();
        assert_eq!(file_type(&m), Some(PosixFileType::CharDevice));
    });
    drop(rt);

    // On the server's disk: a regular empty file holding the NFS reparse point; no FIFO or
    // device node is made.
    for (name, kind, mode, _) in cases {
        let path = disk.join(name);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file() && meta.len() == 0, "{name}: {meta:?}");
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
            mode & CREATE_MASK
        );
        let nfs = match kind {
            SpecialKind::Fifo => NfsReparse::Fifo,
            SpecialKind::Socket => NfsReparse::Socket,
            SpecialKind::CharDevice { major, minor } => NfsReparse::CharDevice { major, minor },
            SpecialKind::BlockDevice { major, minor } => NfsReparse::BlockDevice { major, minor },
        };
        let want = ReparseData::Nfs(nfs).encode().unwrap();
        assert_eq!(stored_reparse_point(&path), want, "{name}");
    }
    let info = smbclient(&tb, "allinfo fifo; allinfo null");
    assert!(info.contains("NFS_SPECFILE_FIFO"), "{info}");
    assert!(info.contains("NFS_SPECFILE_CHR"), "{info}");
    assert!(info.contains("1/3"), "{info}");
}

/// Without the extensions (the `noposix` share, and a client that does not ask for them on
/// the POSIX share) Samba 4.22 keeps reparse points all the same: links of both forms and
/// special files are made and read back; `metadata` of one works although Samba refuses to
/// open a link without FILE_OPEN_REPARSE_POINT (STOPPED_ON_SYMLINK, IO_REPARSE_TAG_NOT_HANDLED
/// for an NFS one) and shows the reparse point; a listing carries the tags; rename and
/// remove act on the link itself.
#[test]
fn shares_without_the_extensions_keep_links_as_reparse_points() {
    let tb = start();
    let nodisk = tb.share_path("noposix");
    let rt = tb.client_runtime();
    let server = format!("{}:445", tb.server_addr(1));
    let creds = tb.credentials();
    client_block_on(&rt, async move {
        let share = connect(&server, &creds, "noposix").await;
        assert!(!share.is_posix());
        share.symlink("target dir/x", "link").await.unwrap();
        share
            .symlink_as("/abs/y", "nfs-link", LinkForm::Nfs)
            .await
            .unwrap();
        share
            .make_special("fifo", SpecialKind::Fifo, 0o644)
            .await
            .unwrap();
        assert_eq!(share.read_link("link").await.unwrap(), "target dir/x");
        assert_eq!(share.read_link("nfs-link").await.unwrap(), "/abs/y");
        assert!(matches!(
            share.read_link("fifo").await,
            Err(Error::NotALink {
                reparse_tag: TAG_NFS,
                ..
            })
        ));
        for name in ["link", "nfs-link", "fifo"] {
            let m = share.metadata(name).await.unwrap();
            assert!(
                m.attributes.contains(DosAttributes::REPARSE_POINT),
                "{name}"
            );
            assert!(m.posix.is_none() && m.len == 0, "{name}");
        }
        let mut tags: Vec<(String, u32)> = share
            .read_dir("")
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.reparse_tag))
            .collect();
        tags.sort();
        assert_eq!(
            tags,
            [
                ("fifo".to_string(), TAG_NFS),
                ("link".to_string(), TAG_SYMLINK),
                ("nfs-link".to_string(), TAG_NFS)
            ]
        );
        share.rename("link", "link2", IfExists::Fail).await.unwrap();
        assert_eq!(share.read_link("link2").await.unwrap(), "target dir/x");
        for name in ["link2", "nfs-link", "fifo"] {
            share.remove_file(name).await.unwrap();
        }
        // A client that does not ask for the extensions: the same on the POSIX share.
        let mut config = ClientConfig::default();
        config.posix_extensions = false;
        let client = Client::connect(&server, &creds, config).await.unwrap();
        let plain = client.share("plain").await.unwrap();
        plain.symlink("target", "link").await.unwrap();
        assert_eq!(plain.read_link("link").await.unwrap(), "target");
        plain.remove_file("link").await.unwrap();
    });
    drop(rt);
    assert_eq!(std::fs::read_dir(&nodisk).unwrap().count(), 0);
    assert!(!tb.share_path("plain").join("link").exists());
}

/// Samba 4.17 (the testbed's default server) keeps no reparse points: every reparse FSCTL
/// answers NOT_A_REPARSE_POINT (source3/modules/util_reparse.c), which is
/// [`Error::Unsupported`], and the file the attempt created is taken back.
#[test]
fn samba_4_17_keeps_no_reparse_points() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("plain");
    let rt = tb.client_runtime();
    let server = format!("{}:445", tb.server_addr(1));
    let creds = tb.credentials();
    client_block_on(&rt, async move {
        let share = connect(&server, &creds, "plain").await;
        assert!(!share.is_posix());
        let refused = |r: Result<(), Error>| {
            matches!(
                r,
                Err(Error::Unsupported {
                    status: NtStatus(0xC000_0275),
                    ..
                })
            )
        };
        assert!(refused(share.symlink("target", "link").await));
        assert!(refused(
            share.symlink_as("target", "nfs-link", LinkForm::Nfs).await
        ));
        assert!(refused(
            share.make_special("fifo", SpecialKind::Fifo, 0o644).await
        ));
    });
    drop(rt);
    assert_eq!(std::fs::read_dir(&disk).unwrap().count(), 0, "nothing left");
}
