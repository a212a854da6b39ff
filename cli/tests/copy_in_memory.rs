//! smbcp's copy engine (`smbcp::copy`) against the in-memory server: uploads and downloads of
//! trees, excludes, a failed file reported with its NTSTATUS while the others are copied, and
//! a connection lost in the middle of a file that is copied again in full. In process, no
//! root; the same behaviour against smbd is covered by `smbcp.rs` and its siblings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use smb3_client::{Client, ClientConfig, Command, NtStatus, Share, UserCredentials};
use smb3_testserver::{Fault, FaultAction, ServerConfig, TestServer};
use smbcp::copy::{self, CopyOptions, CopyReport, FileStatus};
use smbcp::glob::Excludes;

/// A local directory of the test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "smbcp-in-memory-{tag}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn options(excludes: &[&str]) -> CopyOptions {
    let patterns: Vec<String> = excludes.iter().map(|s| s.to_string()).collect();
    CopyOptions {
        recursive: true,
        jobs: 4,
        small_jobs: 0,
        chunk: 256 * 1024,
        depth: 4,
        max_in_flight: 0,
        progress: false,
        retries: 2,
        preserve: false,
        preserve_owners: false,
        verify: true,
        verify_only: false,
        update: false,
        dry_run: false,
        follow_links: false,
        resume: false,
        excludes: Excludes::new(&patterns).expect("valid patterns"),
    }
}

async fn share_of(server: &TestServer) -> Share {
    let c = server.config();
    let creds = UserCredentials {
        user: c.user.clone(),
        domain: c.domain.clone(),
        password: c.password.as_str().into(),
    };
    let client = Client::connect(&server.host(), &creds, ClientConfig::default())
        .await
        .expect("connects");
    client.share("data").await.expect("tree connect")
}

/// A tree of files of many sizes below `root`: (relative path, contents).
fn make_tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let sizes = [0usize, 1, 4095, 65_536, 300_000, 1 << 20, (3 << 20) + 17];
    for (i, size) in sizes.iter().enumerate() {
        let dir = if i % 2 == 0 { "top" } else { "top/sub" };
        let rel = format!("{dir}/file{i}.bin");
        let data: Vec<u8> = (0..*size).map(|b| (b * 31 + i) as u8).collect();
        files.insert(rel, data);
    }
    files.insert("top/skip.tmp".to_string(), b"excluded".to_vec());
    for (rel, data) in &files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    }
    files
}

fn failed(report: &CopyReport) -> Vec<&copy::FileResult> {
    report
        .per_file
        .iter()
        .filter(|r| r.status == FileStatus::Failed)
        .collect()
}

#[tokio::test]
async fn a_tree_goes_up_and_comes_back_the_same_without_what_is_excluded() {
    let server = TestServer::start(ServerConfig::default()).await.unwrap();
    let share = share_of(&server).await;
    let local = TempDir::new("up");
    let files = make_tree(&local.0);

    let report = copy::upload(
        &share,
        &[local.0.join("top")],
        "",
        false,
        &options(&["*.tmp"]),
    )
    .await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.excluded, 1);
    for (rel, data) in &files {
        let on_server = server.read_file("data", rel);
        if rel.ends_with(".tmp") {
            assert!(on_server.is_none(), "{rel} was excluded");
        } else {
            assert!(on_server.as_ref() == Some(data), "{rel} arrived whole");
        }
    }

    let back = TempDir::new("down");
    let report = copy::download(&share, &["top".to_string()], &back.0, &options(&[])).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    for (rel, data) in files.iter().filter(|(r, _)| !r.ends_with(".tmp")) {
        let got = std::fs::read(back.0.join(rel)).unwrap();
        assert!(&got == data, "{rel} came back whole");
    }
    assert_eq!(
        server.open_paths(),
        Vec::<String>::new(),
        "every handle closed"
    );
}

#[tokio::test]
async fn a_file_the_server_refuses_fails_alone_with_its_ntstatus() {
    let server = TestServer::start(ServerConfig::default()).await.unwrap();
    let share = share_of(&server).await;
    let local = TempDir::new("refused");
    make_tree(&local.0);
    server.fail(Fault::fail(Command::CREATE, NtStatus::ACCESS_DENIED).at_path("file3.bin"));

    let report = copy::upload(&share, &[local.0.join("top")], "", false, &options(&[])).await;
    let failed = failed(&report);
    assert_eq!(failed.len(), 1, "{:?}", report.failures);
    assert!(failed[0].source.ends_with("file3.bin"));
    let json = failed[0].json();
    assert_eq!(json["status"], "failed");
    assert_eq!(json["ntstatus"], "STATUS_ACCESS_DENIED", "{json}");
    assert_eq!(json["ntstatus_code"], "0xc0000022", "{json}");
    assert_eq!(json["error_kind"], "status", "{json}");
    assert!(server.read_file("data", "top/sub/file3.bin").is_none());
    assert!(
        server.read_file("data", "top/sub/file5.bin").is_some(),
        "the others are copied"
    );
}

#[tokio::test]
async fn what_fails_before_copying_is_listed_with_its_ntstatus_too() {
    let server = TestServer::start(ServerConfig::default()).await.unwrap();
    let share = share_of(&server).await;
    server.put_file("data", "top/a.bin", b"a");
    server.put_file("data", "top/sub/b.bin", b"b");
    // The subdirectory cannot be listed: its files are never planned.
    server.fail(Fault::fail(Command::QUERY_DIRECTORY, NtStatus::ACCESS_DENIED).at_path("sub"));
    let local = TempDir::new("unplanned");

    let sources = ["missing.bin".to_string(), "top".to_string()];
    let report = copy::download(&share, &sources, &local.0, &options(&[])).await;
    let failed = failed(&report);
    assert_eq!(failed.len(), 2, "{:?}", report.failures);
    assert_eq!(
        report.failures.len(),
        2,
        "one line each: {:?}",
        report.failures
    );
    let missing = failed
        .iter()
        .find(|f| f.source.ends_with("/missing.bin"))
        .expect("the missing source is listed");
    let json = missing.json();
    assert_eq!(json["ntstatus"], "STATUS_OBJECT_NAME_NOT_FOUND", "{json}");
    assert_eq!(json["error_kind"], "status", "{json}");
    assert_eq!(json["dest"], "", "no destination was chosen: {json}");
    let unlisted = failed
        .iter()
        .find(|f| f.source.ends_with("/top/sub"))
        .expect("the directory that could not be listed is listed");
    assert_eq!(unlisted.json()["ntstatus"], "STATUS_ACCESS_DENIED");
    assert_eq!(std::fs::read(local.0.join("top/a.bin")).unwrap(), b"a");
    assert!(!local.0.join("top/sub/b.bin").exists());
}

#[tokio::test]
async fn a_connection_lost_in_the_middle_of_a_file_loses_nothing() {
    let server = TestServer::start(ServerConfig::default()).await.unwrap();
    let share = share_of(&server).await;
    let local = TempDir::new("cut");
    let data: Vec<u8> = (0..(4 << 20) + 5).map(|b| (b % 241) as u8).collect();
    std::fs::write(local.0.join("big.bin"), &data).unwrap();
    // A WRITE in the middle of the file is done, and the connection lost before its reply.
    // The library sets the session up again, reclaims the durable open (or opens the file
    // again) and replays what was outstanding, or smbcp copies the file again; either way
    // the copy must not report success for a file with a hole.
    server.fail(Fault::on(Command::WRITE, FaultAction::CutAfter).at_path("big.bin"));
    let report = copy::upload(&share, &[local.0.join("big.bin")], "", false, &options(&[])).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(
        server.read_file("data", "big.bin").as_deref() == Some(&data[..]),
        "the file on the server is whole"
    );
    let failover = share.client().multichannel().failover;
    assert!(
        failover.opens_reclaimed + failover.opens_reopened + report.retried.len() as u64 >= 1,
        "the open was made again: {failover:?} {:?}",
        report.retried
    );
}
