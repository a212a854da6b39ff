//! `-o modefromsid` through the mount's file system (SmbFs, no FUSE) over the in-memory
//! server, which keeps security descriptors as Windows keeps an NTFS file's: whole, any SID.
//! So the mode ACE is kept (setuid and setgid too, which Samba's refusal of S-1-5-88 SIDs
//! loses, see `e2e.rs::modefromsid_keeps_modes_in_the_dacl`), and the server can be made to
//! answer what a hostile one would: descriptors that do not decode, SIDs of 255
//! sub-authorities, several mode ACEs, deny ACEs of that SID. Every one gets a defined mode.

use std::time::Duration;

use smb3_client::{ace_flags, Ace, Acl, Command, SecurityDescriptor, Sid};
use smb3_testserver::{ServerConfig, TestServer};
use smbfuse::fs::{FsConfig, SetAttr, SmbFs};
use smbfuse::inode::ROOT;

mod common;

const SHARE: &str = "data";
const OWNER: &str = "S-1-5-21-7-8-9-1000";
const GROUP: &str = "S-1-5-21-7-8-9-513";

fn sid(s: &str) -> Sid {
    s.parse().unwrap()
}

fn mode_sid(mode: u32) -> Sid {
    Sid::new(5, &[88, 3, mode]).unwrap()
}

/// A descriptor with the owner and group of a file Windows made, and `aces`.
fn descriptor(aces: Vec<Ace>) -> Vec<u8> {
    SecurityDescriptor {
        control: 0,
        rm_control: 0,
        owner: Some(sid(OWNER)),
        group: Some(sid(GROUP)),
        sacl: None,
        dacl: Some(Acl::new(aces)),
    }
    .encode()
    .unwrap()
    .to_vec()
}

async fn mounted(server: &TestServer, modefromsid: bool) -> SmbFs {
    let share = common::share_of(server, SHARE).await;
    let cfg = FsConfig {
        modefromsid,
        file_mode: 0o644,
        dir_mode: 0o755,
        // Change notification is not what this is about.
        watch_dirs: 0,
        ttl: Duration::ZERO,
        ..FsConfig::default()
    };
    SmbFs::new(share, "", cfg)
}

async fn perm(fs: &SmbFs, name: &str) -> u32 {
    u32::from(fs.lookup(ROOT, name).await.expect("lookup").perm)
}

/// What a listing (READDIRPLUS) shows for each name.
async fn listed(fs: &SmbFs) -> Vec<(String, u32)> {
    let fh = fs.opendir(ROOT).await.expect("opendir");
    let mut out = Vec::new();
    fs.read_dir_at(fh, 0, |_, e| {
        out.push((e.name.clone(), u32::from(e.attr.perm)));
        false
    })
    .await
    .expect("readdir");
    fs.releasedir(fh).await;
    out.sort();
    out
}

#[tokio::test]
async fn a_server_that_keeps_the_mode_ace_keeps_every_bit() {
    let server = TestServer::start(ServerConfig::default()).await.unwrap();
    server.put_file(SHARE, "f", b"data");
    server.put_security(
        SHARE,
        "f",
        &descriptor(vec![Ace::allow(sid(OWNER), 0x001f_01ff, 0)]),
    );
    let fs = mounted(&server, true).await;
    // An ACL that is no mode's shape: the mount's file_mode. The metadata and the
    // descriptor come from one open.
    let opens = server.requests(Command::CREATE);
    assert_eq!(perm(&fs, "f").await, 0o644);
    assert_eq!(server.requests(Command::CREATE) - opens, 1);
    let ino = fs.lookup(ROOT, "f").await.unwrap().ino;
    for mode in [0o4750, 0o2711, 0o600, 0o7777, 0o640] {
        let set = SetAttr {
            mode: Some(mode),
            ..SetAttr::default()
        };
        let attr = fs.setattr(ino, None, set).await.expect("chmod");
        assert_eq!(u32::from(attr.perm), mode, "{mode:o}");
        assert_eq!(perm(&fs, "f").await, mode, "{mode:o}");
    }
    // The server holds one mode ACE, then the derived ones; the owner keeps its own.
    let sd = SecurityDescriptor::decode(&server.security(SHARE, "f").unwrap()).unwrap();
    let aces = &sd.dacl.as_ref().unwrap().aces;
    let modes: Vec<_> = aces
        .iter()
        .filter(|a| a.sid == Some(mode_sid(0o640)))
        .collect();
    assert_eq!(modes.len(), 1);
    assert_eq!(
        aces.iter()
            .filter(|a| a.sid == Some(mode_sid(0o600)))
            .count(),
        0
    );
    assert_eq!(sd.owner, Some(sid(OWNER)), "a chmod sends the DACL only");
    assert_eq!(listed(&fs).await, [("f".to_string(), 0o640)]);

    // Without the option the descriptor is not read: file_mode, as before.
    let plain = mounted(&server, false).await;
    assert_eq!(perm(&plain, "f").await, 0o644);
    assert_eq!(server.open_handles(), 0);
}

#[tokio::test]
async fn hostile_descriptors_give_a_defined_mode() {
    let server = TestServer::start(ServerConfig::default()).await.unwrap();
    let fs = mounted(&server, true).await;
    let plant = |name: &str, raw: Vec<u8>| {
        server.put_file(SHARE, name, b"x");
        server.put_security(SHARE, name, &raw);
    };
    // Several mode ACEs: the first that applies to the file (not INHERIT_ONLY, allow or
    // deny, an audit ACE is neither) wins.
    plant(
        "several",
        descriptor(vec![
            Ace::allow(mode_sid(0o777), 0, ace_flags::INHERIT_ONLY),
            Ace::deny(mode_sid(0o640), 0x001f_01ff, 0),
            Ace::allow(mode_sid(0o600), 0, 0),
        ]),
    );
    // Bits above 0o7777 are dropped.
    plant(
        "huge",
        descriptor(vec![Ace::allow(mode_sid(u32::MAX), 0, 0)]),
    );
    // A SID of the family with a fourth sub-authority is no mode.
    plant(
        "longer",
        descriptor(vec![Ace::allow(
            Sid::new(5, &[88, 3, 0o600, 1]).unwrap(),
            0,
            0,
        )]),
    );
    // Bytes that do not decode: 255 sub-authorities in the mode ACE's SID, an AceCount far
    // beyond the ACL, garbage.
    let good = descriptor(vec![Ace::deny(mode_sid(0o600), 0, 0)]);
    let dacl_at = u32::from_le_bytes(good[16..20].try_into().unwrap()) as usize;
    let mut subs = good.clone();
    subs[dacl_at + 8 + 8 + 1] = 255;
    plant("subauthorities", subs);
    let mut count = good.clone();
    count[dacl_at + 4..dacl_at + 6].copy_from_slice(&[0xff, 0xff]);
    plant("acecount", count);
    plant("garbage", vec![0xff; 7]);
    plant("good", good);

    assert_eq!(perm(&fs, "several").await, 0o640);
    assert_eq!(perm(&fs, "huge").await, 0o7777);
    for name in ["longer", "subauthorities", "acecount", "garbage"] {
        assert_eq!(
            perm(&fs, name).await,
            0o644,
            "{name}: the mount's file_mode"
        );
    }
    assert_eq!(perm(&fs, "good").await, 0o600);
    assert_eq!(
        listed(&fs).await,
        [
            ("acecount".to_string(), 0o644),
            ("garbage".to_string(), 0o644),
            ("good".to_string(), 0o600),
            ("huge".to_string(), 0o7777),
            ("longer".to_string(), 0o644),
            ("several".to_string(), 0o640),
            ("subauthorities".to_string(), 0o644),
        ]
    );
    // A chmod over several mode ACEs leaves exactly one.
    let ino = fs.lookup(ROOT, "several").await.unwrap().ino;
    let set = SetAttr {
        mode: Some(0o750),
        ..SetAttr::default()
    };
    fs.setattr(ino, None, set).await.unwrap();
    let sd = SecurityDescriptor::decode(&server.security(SHARE, "several").unwrap()).unwrap();
    let family = |a: &&Ace| {
        a.sid
            .as_ref()
            .is_some_and(|s| s.authority() == 5 && s.sub_authorities().starts_with(&[88, 3]))
    };
    let left: Vec<_> = sd
        .dacl
        .as_ref()
        .unwrap()
        .aces
        .iter()
        .filter(family)
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].sid, Some(mode_sid(0o750)));
    assert_eq!(perm(&fs, "several").await, 0o750);
    assert_eq!(server.open_handles(), 0);
}
