//! What backup software needs beyond file data, against the testbed's real smbd on the
//! [backup] share (`vfs objects = ... acl_xattr streams_xattr`, on tmpfs): alternate data
//! streams, security descriptors, and sparse files with their allocated ranges. Where the
//! server keeps the truth in a place the host can see (extended attributes, block counts),
//! the test looks there too.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use smb3_client::{
    Ace, AceType, AllocatedRange, Client, ClientConfig, NtStatus, OpenOptions, SecurityParts, Sid,
};
use smb3_tests::{Testbed, TestbedConfig};

const MIB: u64 = 1 << 20;

/// The extended attributes of a file on the server's disk, as `getfattr -d -m - -e hex`
/// prints them (`name=0xHEX` lines). getfattr comes with the `attr` package, which
/// `scripts/install-deps.sh` installs.
fn xattrs(path: &Path) -> String {
    let out = Command::new("getfattr")
        .args(["-d", "-m", "-", "-e", "hex"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("getfattr (package attr): {e}"));
    assert!(out.status.success(), "getfattr {}: {out:?}", path.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of one xattr from [`xattrs`] output.
fn xattr_value(all: &str, name: &str) -> Option<String> {
    all.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .map(str::to_string)
}

#[test]
fn alternate_data_streams() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("backup").await.expect("tree connect");
        let create = OpenOptions::new().write(true).create(true);
        let f = share.open("s.txt", &create).await.unwrap();
        f.write_at(0, Bytes::from_static(b"main data"))
            .await
            .unwrap();
        f.close().await.unwrap();

        // A named stream is opened as `file:name`, read and written like a file.
        let s = share.open("s.txt:meta", &create).await.unwrap();
        s.write_at(0, Bytes::from_static(b"stream data 123"))
            .await
            .unwrap();
        s.close().await.unwrap();
        let read = |path: String| {
            let share = share.clone();
            async move {
                let f = share
                    .open(&path, &OpenOptions::new().read(true))
                    .await
                    .unwrap();
                let data = f.read_at(0, 100).await.unwrap();
                f.close().await.unwrap();
                data
            }
        };
        assert_eq!(read("s.txt:meta".into()).await, "stream data 123");
        assert_eq!(read("s.txt:meta:$DATA".into()).await, "stream data 123");
        assert_eq!(
            read("s.txt".into()).await,
            "main data",
            "the default stream is untouched"
        );

        // The list: the default stream and the named one, with their sizes.
        let mut streams = share.streams("s.txt").await.unwrap();
        streams.sort_by(|a, b| a.name.cmp(&b.name));
        let summary: Vec<(&str, u64, bool)> = streams
            .iter()
            .map(|s| (s.name.as_str(), s.size, s.is_default()))
            .collect();
        assert_eq!(
            summary,
            vec![("::$DATA", 9, true), (":meta:$DATA", 15, false)]
        );
        assert_eq!(streams[1].stream_name(), "meta");
        // Through an open handle too, and the full name appended to the path opens it.
        let f = share
            .open("s.txt", &OpenOptions::new().read(true))
            .await
            .unwrap();
        let mut by_handle = f.streams().await.unwrap();
        by_handle.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(by_handle, streams);
        f.close().await.unwrap();
        // On a handle to a named stream, Samba 4.17 refuses the query (INVALID_PARAMETER);
        // a server that answers must list the file's streams, never something else.
        let on_stream = share
            .open("s.txt:meta", &OpenOptions::new().read(true))
            .await
            .unwrap();
        match on_stream.streams().await {
            Ok(mut from_stream) => {
                from_stream.sort_by(|a, b| a.name.cmp(&b.name));
                assert_eq!(from_stream, streams);
            }
            Err(e) => assert_eq!(e.status(), Some(NtStatus::INVALID_PARAMETER), "{e}"),
        }
        on_stream.close().await.unwrap();
        assert_eq!(
            read(format!("s.txt{}", streams[1].name)).await,
            "stream data 123"
        );

        // A directory has no default stream; a stream on it is listed alone.
        share.create_dir("d").await.unwrap();
        assert_eq!(share.streams("d").await.unwrap(), vec![]);
        let ds = share.open("d:tag", &create).await.unwrap();
        ds.write_at(0, Bytes::from_static(b"x")).await.unwrap();
        ds.close().await.unwrap();
        let dir_streams = share.streams("d").await.unwrap();
        assert_eq!(
            dir_streams
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            vec![":tag:$DATA"]
        );

        // Many streams: more than the first 4 KiB answer holds.
        for i in 0..150 {
            let p = format!("s.txt:extra_stream_number_{i:03}");
            let s = share.open(&p, &create).await.unwrap();
            s.close().await.unwrap();
        }
        let all = share.streams("s.txt").await.unwrap();
        assert_eq!(all.len(), 152, "every stream listed");
        for i in 0..150 {
            share
                .remove_file(&format!("s.txt:extra_stream_number_{i:03}"))
                .await
                .unwrap();
        }

        // Missing files and streams.
        let e = share.streams("missing.txt").await.unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
        let e = share
            .open("s.txt:nope", &OpenOptions::new().read(true))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
        client.logoff().await.unwrap();
    });

    // Server-side truth: streams_xattr keeps the stream in an xattr of the file (Samba
    // appends a NUL byte to the value), and the file's own data is only the main stream.
    let file = disk.join("s.txt");
    assert_eq!(std::fs::read(&file).unwrap(), b"main data");
    let x = xattrs(&file);
    let v = xattr_value(&x, "user.DosStream.meta:$DATA").unwrap_or_else(|| panic!("{x}"));
    assert!(v.starts_with("0x73747265616d2064617461"), "{v}"); // "stream data"
    assert!(
        !x.contains("extra_stream_number"),
        "removed streams are gone: {x}"
    );
}

#[test]
fn security_descriptors() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    let file = disk.join("acl.txt");
    let ntacl = move || xattr_value(&xattrs(&file), "security.NTACL");
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("backup").await.expect("tree connect");
        share
            .open("acl.txt", &OpenOptions::new().write(true).create(true))
            .await
            .unwrap()
            .close()
            .await
            .unwrap();
        let parts = SecurityParts::standard();

        // What Samba gives a new file: the user as owner, a group, and an allow-only DACL
        // giving the owner full control.
        let before = share.security_descriptor("acl.txt", parts).await.unwrap();
        let sd = &before.descriptor;
        let owner = sd.owner.clone().expect("owner");
        let group = sd.group.clone().expect("group");
        eprintln!("owner {owner}, group {group}, dacl {:?}", sd.dacl);
        assert!(owner.to_string().starts_with("S-1-5-21-"), "{owner}");
        let dacl = sd.dacl.clone().expect("DACL");
        assert!(
            dacl.aces
                .iter()
                .any(|a| a.ace_type == AceType::ACCESS_ALLOWED
                    && a.sid.as_ref() == Some(&owner)
                    && a.access_mask == 0x001f_01ff),
            "{dacl:?}"
        );
        assert_eq!(sd.sacl, None, "not asked for");
        // The encoder lays a descriptor out as Samba does: the same bytes back.
        assert_eq!(sd.encode().unwrap(), before.raw);
        // The same through a handle opened with READ_CONTROL; without it the server refuses.
        let f = share
            .open(
                "acl.txt",
                &OpenOptions::new().read(true).read_security(true),
            )
            .await
            .unwrap();
        assert_eq!(f.security_descriptor(parts).await.unwrap(), before);
        f.close().await.unwrap();
        let f = share
            .open("acl.txt", &OpenOptions::new().read(true))
            .await
            .unwrap();
        let e = f.security_descriptor(parts).await.unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::ACCESS_DENIED), "{e}");
        f.close().await.unwrap();
        // Only the owner.
        let only_owner = share
            .security_descriptor("acl.txt", SecurityParts::OWNER)
            .await
            .unwrap();
        assert_eq!(only_owner.descriptor.owner, Some(owner.clone()));
        assert_eq!(only_owner.descriptor.dacl, None);

        // A new DACL: the owner, and a deny ACE for Everyone's writes first.
        let everyone: Sid = "S-1-1-0".parse().unwrap();
        let mut new_sd = sd.clone();
        let mut new_dacl = dacl.clone();
        new_dacl.aces = vec![
            Ace::deny(everyone.clone(), 0x0000_0002, 0),
            Ace::allow(owner.clone(), 0x001f_01ff, 0),
            Ace::allow(everyone.clone(), 0x0012_00a9, 0),
        ];
        new_sd.dacl = Some(new_dacl.clone());
        share
            .set_security_descriptor("acl.txt", &new_sd, SecurityParts::DACL)
            .await
            .unwrap();
        let after = share.security_descriptor("acl.txt", parts).await.unwrap();
        let got: Vec<(AceType, u32, Option<Sid>)> = after
            .descriptor
            .dacl
            .as_ref()
            .unwrap()
            .aces
            .iter()
            .map(|a| (a.ace_type, a.access_mask, a.sid.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (AceType::ACCESS_DENIED, 2, Some(everyone.clone())),
                (AceType::ACCESS_ALLOWED, 0x001f_01ff, Some(owner.clone())),
                (AceType::ACCESS_ALLOWED, 0x0012_00a9, Some(everyone.clone())),
            ]
        );
        assert_eq!(after.descriptor.owner, Some(owner.clone()), "owner kept");

        // The refusal: giving the file to root (Unix User\root, S-1-22-1-0) is not for an
        // unprivileged user: Samba answers INVALID_OWNER, as it would have to chown. (SIDs
        // with no Unix id, such as SYSTEM S-1-5-18, it accepts and only records in the
        // security.NTACL xattr; the file's Unix owner stays the user.) The request also
        // carries a DACL, which must not be applied either.
        let kept = ntacl();
        let mut hijack = after.descriptor.clone();
        hijack.owner = Some("S-1-22-1-0".parse().unwrap());
        hijack.dacl.as_mut().unwrap().aces.truncate(1);
        let e = share
            .set_security_descriptor(
                "acl.txt",
                &hijack,
                SecurityParts::OWNER | SecurityParts::DACL,
            )
            .await
            .unwrap_err();
        eprintln!("setting owner S-1-22-1-0: {e}");
        assert!(
            matches!(
                e.status(),
                Some(NtStatus::INVALID_OWNER | NtStatus::ACCESS_DENIED)
            ),
            "{e}"
        );
        let unchanged = share.security_descriptor("acl.txt", parts).await.unwrap();
        assert_eq!(unchanged, after, "nothing of the refused request applied");
        assert_eq!(ntacl(), kept, "security.NTACL untouched");

        // Restoring the bytes a backup kept brings the first descriptor back exactly.
        share
            .set_security_descriptor_raw("acl.txt", before.raw.clone(), SecurityParts::DACL)
            .await
            .unwrap();
        let restored = share.security_descriptor("acl.txt", parts).await.unwrap();
        assert_eq!(restored.descriptor.dacl, before.descriptor.dacl);

        // Through a handle opened for it.
        let f = share
            .open(
                "acl.txt",
                &OpenOptions::new().read_security(true).write_security(true),
            )
            .await
            .unwrap();
        f.set_security_descriptor(&new_sd, SecurityParts::DACL)
            .await
            .unwrap();
        assert_eq!(
            f.security_descriptor(SecurityParts::DACL)
                .await
                .unwrap()
                .descriptor
                .dacl
                .unwrap()
                .aces
                .len(),
            3
        );
        f.close().await.unwrap();
        // The deny ACE for Everyone's writes (first, so it decides) refuses this user's.
        let e = share
            .open("acl.txt", &OpenOptions::new().write(true))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(NtStatus::ACCESS_DENIED), "{e}");
        // The SACL needs a privilege the test user lacks.
        let e = share
            .security_descriptor("acl.txt", SecurityParts::SACL)
            .await
            .unwrap_err();
        assert!(e.status().is_some(), "{e}");
        client.logoff().await.unwrap();
    });
}

#[test]
fn sparse_files_and_allocated_ranges() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    tb.run_as_client(|server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("backup").await.expect("tree connect");
        let rw = OpenOptions::new().read(true).write(true).create(true);

        // 1 MiB at 0, 1 MiB at 64 MiB, 128 MiB long: a hole between and after.
        let f = share.open("sparse.bin", &rw).await.unwrap();
        f.set_sparse(true).await.unwrap();
        let mib = Bytes::from(vec![0x5au8; MIB as usize]);
        f.write_at(0, mib.clone()).await.unwrap();
        f.write_at(64 * MIB, mib.clone()).await.unwrap();
        f.set_len(128 * MIB).await.unwrap();
        let m = f.metadata().await.unwrap();
        assert_eq!(m.len, 128 * MIB);
        assert!(m
            .attributes
            .contains(smb3_client::DosAttributes::SPARSE_FILE));
        let ranges = f.allocated_ranges(0, 128 * MIB).await.unwrap();
        eprintln!("allocated ranges: {ranges:?}");
        assert_eq!(
            ranges,
            vec![
                AllocatedRange {
                    offset: 0,
                    len: MIB
                },
                AllocatedRange {
                    offset: 64 * MIB,
                    len: MIB
                },
            ]
        );
        // A window inside the hole has nothing; one across the data is clipped to it.
        assert_eq!(f.allocated_ranges(8 * MIB, MIB).await.unwrap(), vec![]);
        assert_eq!(
            f.allocated_ranges(MIB / 2, 64 * MIB).await.unwrap(),
            vec![
                AllocatedRange {
                    offset: MIB / 2,
                    len: MIB / 2
                },
                AllocatedRange {
                    offset: 64 * MIB,
                    len: MIB / 2
                },
            ]
        );
        // The hole reads as zeros.
        assert_eq!(f.read_at(32 * MIB, 4096).await.unwrap(), vec![0u8; 4096]);

        // More ranges than the first answer holds (it asks for 256): 600 4 KiB pieces, one
        // every 64 KiB. Samba answers all or nothing (no ranges when they do not fit), so the
        // client asks again with a bigger buffer until they do.
        let many = share.open("many.bin", &rw).await.unwrap();
        many.set_sparse(true).await.unwrap();
        let page = Bytes::from(vec![1u8; 4096]);
        for i in 0..600u64 {
            many.write_at(i * 65536, page.clone()).await.unwrap();
        }
        let got = many.allocated_ranges(0, 600 * 65536).await.unwrap();
        let want: Vec<AllocatedRange> = (0..600u64)
            .map(|i| AllocatedRange {
                offset: i * 65536,
                len: 4096,
            })
            .collect();
        assert_eq!(got.len(), want.len());
        assert_eq!(got, want);
        many.close().await.unwrap();

        // A file not marked sparse: one range for all of it, holes or not (Samba does not
        // look for holes in it).
        let dense = share.open("dense.bin", &rw).await.unwrap();
        dense.write_at(0, Bytes::from_static(b"abc")).await.unwrap();
        dense.set_len(16 * MIB).await.unwrap();
        let r = dense.allocated_ranges(0, 16 * MIB).await.unwrap();
        eprintln!("non-sparse file: {r:?}");
        assert_eq!(
            r,
            vec![AllocatedRange {
                offset: 0,
                len: 16 * MIB
            }]
        );
        dense.close().await.unwrap();

        // Clearing the mark.
        f.set_sparse(false).await.unwrap();
        assert!(!f
            .metadata()
            .await
            .unwrap()
            .attributes
            .contains(smb3_client::DosAttributes::SPARSE_FILE));
        f.close().await.unwrap();
        client.logoff().await.unwrap();
    });
    // Server-side truth: the 128 MiB file takes about the 2 MiB written.
    let on_disk = std::fs::metadata(disk.join("sparse.bin")).unwrap();
    assert_eq!(on_disk.len(), 128 * MIB);
    assert!(
        on_disk.blocks() * 512 < 8 * MIB,
        "{} blocks",
        on_disk.blocks()
    );
}
