//! `smbcp --preserve=all` within one server, against smbd's [backup] share (streams_xattr,
//! acl_xattr): a copy keeps its source's named data streams, security descriptor (owner,
//! group, DACL), times and attributes; `-r` gives directories their descriptors too.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use smb3_client::{
    Ace, Client, ClientConfig, DosAttributes, FileTimes, OpenOptions, SecurityParts, Share, Sid,
};
use smb3_tests::{Testbed, TestbedConfig};

mod common;
use common::{smbcp, url};

/// Write `data` to `path` (a file or `file:stream`), creating it.
async fn put(share: &Share, path: &str, data: &'static [u8]) {
    let f = share
        .open(path, &OpenOptions::new().write(true).create(true))
        .await
        .unwrap();
    f.write_at(0, Bytes::from_static(data)).await.unwrap();
    f.close().await.unwrap();
}

async fn get(share: &Share, path: &str) -> Bytes {
    let f = share
        .open(path, &OpenOptions::new().read(true))
        .await
        .unwrap();
    let data = f.read_at(0, 1 << 16).await.unwrap();
    f.close().await.unwrap();
    data
}

/// The user's DACL with one more ACE in front: Everyone may not write extended attributes
/// (FILE_WRITE_EA). Something a plain copy would not carry over.
async fn mark_dacl(share: &Share, path: &str) {
    let mut sd = share
        .security_descriptor(path, SecurityParts::DACL)
        .await
        .unwrap()
        .descriptor;
    let everyone: Sid = "S-1-1-0".parse().unwrap();
    sd.dacl
        .as_mut()
        .unwrap()
        .aces
        .insert(0, Ace::deny(everyone, 0x10, 0));
    share
        .set_security_descriptor(path, &sd, SecurityParts::DACL)
        .await
        .unwrap();
}

#[test]
fn preserve_all_keeps_streams_security_descriptors_and_times() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let t = UNIX_EPOCH + Duration::new(1_250_000_000, 1_000);
    tb.run_as_client(move |server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .unwrap();
        let share = client.share("backup").await.unwrap();
        put(&share, "orig.txt", b"the data").await;
        put(&share, "orig.txt:meta", b"stream one").await;
        put(&share, "orig.txt:other", b"two").await;
        mark_dacl(&share, "orig.txt").await;
        share
            .set_times_and_attributes(
                "orig.txt",
                &FileTimes::new().modified(t),
                DosAttributes::HIDDEN,
            )
            .await
            .unwrap();
        share.create_dir("tree").await.unwrap();
        put(&share, "tree/f.txt", b"in the tree").await;
        put(&share, "tree/f.txt:s", b"tree stream").await;
        mark_dacl(&share, "tree").await;
        client.logoff().await.unwrap();
    });

    let o = smbcp(
        &tb,
        &[
            "-q",
            "--preserve=all",
            &url(&tb, "backup/orig.txt"),
            &url(&tb, "backup/copy.txt"),
        ],
    );
    assert!(o.status.success());
    let o = smbcp(
        &tb,
        &[
            "-q",
            "-r",
            "--preserve=all",
            &url(&tb, "backup/tree"),
            &url(&tb, "backup/tree2"),
        ],
    );
    assert!(o.status.success());
    // -p alone is --preserve=basic: times and attributes, no streams.
    let o = smbcp(
        &tb,
        &[
            "-q",
            "-p",
            &url(&tb, "backup/orig.txt"),
            &url(&tb, "backup/basic.txt"),
        ],
    );
    assert!(o.status.success());

    tb.run_as_client(move |server, creds| async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .unwrap();
        let share = client.share("backup").await.unwrap();
        assert_eq!(get(&share, "copy.txt").await, "the data");
        assert_eq!(get(&share, "copy.txt:meta").await, "stream one");
        assert_eq!(get(&share, "copy.txt:other").await, "two");
        let names = |v: Vec<smb3_client::StreamInfo>| {
            let mut n: Vec<String> = v.into_iter().map(|s| s.name).collect();
            n.sort();
            n
        };
        assert_eq!(
            names(share.streams("copy.txt").await.unwrap()),
            names(share.streams("orig.txt").await.unwrap())
        );
        let parts = SecurityParts::standard();
        let sd = |p: &'static str| {
            let share = share.clone();
            async move {
                share
                    .security_descriptor(p, parts)
                    .await
                    .unwrap()
                    .descriptor
            }
        };
        let (orig, copy) = (sd("orig.txt").await, sd("copy.txt").await);
        assert_eq!(copy.dacl, orig.dacl);
        assert_eq!(copy.owner, orig.owner);
        assert_eq!(copy.dacl.as_ref().unwrap().aces[0].access_mask, 0x10);
        let m = share.metadata("copy.txt").await.unwrap();
        assert_eq!(m.modified, Some(t));
        assert!(m.attributes.contains(DosAttributes::HIDDEN));

        assert_eq!(get(&share, "tree2/f.txt:s").await, "tree stream");
        assert_eq!(sd("tree2").await.dacl, sd("tree").await.dacl);

        let basic = share.metadata("basic.txt").await.unwrap();
        assert_eq!(basic.modified, Some(t));
        assert_eq!(share.streams("basic.txt").await.unwrap().len(), 1);
        assert_ne!(sd("basic.txt").await.dacl, orig.dacl);
        client.logoff().await.unwrap();
    });
}
