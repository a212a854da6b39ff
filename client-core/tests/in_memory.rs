//! The library's public API against the in-memory server (`smb3-testserver`): sessions,
//! files, directories, renames, locks and errors, in process and in milliseconds. The same
//! behaviour against smbd is covered by the e2e suite (`tests/e2e`); these tests pin the
//! client's own logic and run without root.

use bytes::Bytes;
use smb3_client::{
    Cipher, Client, ClientConfig, Command, Dialect, Error, IfExists, NtStatus, OpenOptions,
    UserCredentials,
};
use smb3_testserver::{Fault, FaultAction, ServerConfig, TestServer};

async fn server() -> TestServer {
    TestServer::start(ServerConfig::default())
        .await
        .expect("the test server starts")
}

fn creds(server: &TestServer) -> UserCredentials {
    let c = server.config();
    UserCredentials {
        user: c.user.clone(),
        domain: c.domain.clone(),
        password: c.password.as_str().into(),
    }
}

async fn connect(server: &TestServer, config: ClientConfig) -> Client {
    Client::connect(&server.host(), &creds(server), config)
        .await
        .expect("the client connects")
}

fn status_of(e: &Error) -> Option<NtStatus> {
    e.status()
}

/// `result` failed with the server's `want`.
#[track_caller]
fn assert_status<T>(result: Result<T, Error>, want: NtStatus) {
    match result {
        Ok(_) => panic!("expected {want:?}, the call succeeded"),
        Err(e) => assert_eq!(status_of(&e), Some(want), "{e:?}"),
    }
}

fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true)
}

#[tokio::test]
async fn negotiates_3_1_1_signs_and_seals_when_asked() {
    let server = server().await;
    let client = connect(&server, ClientConfig::default()).await;
    assert_eq!(client.dialect(), Dialect::Smb311);
    assert!(client.signing().is_some());

    let mut config = ClientConfig::default();
    config.encrypt = true;
    let sealed = connect(&server, config).await;
    assert!(sealed.encrypts_everything());
    assert!(sealed.cipher().is_some());
    let share = sealed.share("data").await.unwrap();
    let file = share.open("sealed.bin", &rw()).await.unwrap();
    file.write_at(0, Bytes::from_static(b"under AES"))
        .await
        .unwrap();
    file.close().await.unwrap();
    assert_eq!(
        server.read_file("data", "sealed.bin").unwrap(),
        b"under AES"
    );
}

#[tokio::test]
async fn each_cipher_and_older_dialects_work() {
    let server = server().await;
    for cipher in [
        Cipher::Aes128Ccm,
        Cipher::Aes128Gcm,
        Cipher::Aes256Ccm,
        Cipher::Aes256Gcm,
    ] {
        let mut config = ClientConfig::default();
        config.encrypt = true;
        config.ciphers = vec![cipher];
        let client = connect(&server, config).await;
        assert_eq!(client.cipher(), Some(cipher));
        let share = client.share("data").await.unwrap();
        let name = format!("{cipher:?}.txt");
        let f = share.open(&name, &rw()).await.unwrap();
        f.write_at(0, Bytes::from(name.clone())).await.unwrap();
        assert_eq!(&f.read_at(0, 64).await.unwrap()[..], name.as_bytes());
        f.close().await.unwrap();
    }
    for dialect in [Dialect::Smb300, Dialect::Smb302] {
        let mut config = ClientConfig::default();
        config.max_dialect = dialect;
        // 3.0 and 3.0.2 validate the negotiation over the new tree (FSCTL_VALIDATE_NEGOTIATE_INFO).
        let client = connect(&server, config).await;
        assert_eq!(client.dialect(), dialect);
        client.share("data").await.unwrap();
    }
}

#[tokio::test]
async fn a_wrong_password_is_refused() {
    let server = server().await;
    let mut c = creds(&server);
    c.password = "not it".into();
    let Err(err) = Client::connect(&server.host(), &c, ClientConfig::default()).await else {
        panic!("a wrong password fails");
    };
    assert!(
        matches!(&err, Error::Auth { .. }) || status_of(&err) == Some(NtStatus::LOGON_FAILURE),
        "{err:?}"
    );
    assert_eq!(server.sessions(), 0);
}

#[tokio::test]
async fn an_unknown_share_is_bad_network_name() {
    let server = server().await;
    let client = connect(&server, ClientConfig::default()).await;
    assert_status(client.share("nope").await, NtStatus::BAD_NETWORK_NAME);
}

#[tokio::test]
async fn files_round_trip_large_and_small() {
    let server = server().await;
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    share.create_dir_all("a/b/c").await.unwrap();
    let data: Vec<u8> = (0..5 * 1024 * 1024 + 123)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let f = share.open("a/b/c/big.bin", &rw()).await.unwrap();
    f.write_at(0, Bytes::from(data.clone())).await.unwrap();
    f.flush().await.unwrap();
    assert_eq!(f.metadata().await.unwrap().len, data.len() as u64);
    let back = f.read_at(0, data.len()).await.unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back[..] == data[..]);
    f.close().await.unwrap();
    assert!(server.read_file("data", "a/b/c/big.bin").unwrap() == data);
    assert_eq!(
        share.metadata("a/b/c/big.bin").await.unwrap().len,
        data.len() as u64
    );
    assert_eq!(server.open_handles(), 0, "every handle is closed");
}

#[tokio::test]
async fn create_new_refuses_an_existing_name_and_truncate_empties() {
    let server = server().await;
    server.put_file("data", "here.txt", b"hello world");
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    assert_status(
        share
            .open("HERE.TXT", &OpenOptions::new().write(true).create_new(true))
            .await,
        NtStatus::OBJECT_NAME_COLLISION,
    );
    let f = share
        .open("here.txt", &OpenOptions::new().write(true).truncate(true))
        .await
        .unwrap();
    assert_eq!(f.size_at_open(), 0);
    f.close().await.unwrap();
    assert_eq!(server.read_file("data", "here.txt").unwrap(), b"");
    assert_status(
        share
            .open("missing/x", &OpenOptions::new().read(true))
            .await,
        NtStatus::OBJECT_PATH_NOT_FOUND,
    );
}

#[tokio::test]
async fn listings_renames_and_removal() {
    let server = server().await;
    for i in 0..1500 {
        server.put_file("data", &format!("many/f{i:04}"), &[i as u8]);
    }
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    // Several QUERY_DIRECTORY rounds: 1,500 entries do not fit one 64 KiB reply.
    let names: Vec<String> = share
        .read_dir("many")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names.len(), 1500, "no . or .., nothing twice");
    assert!(server.requests(Command::QUERY_DIRECTORY) > 2);

    share
        .rename("many/f0001", "many/renamed", IfExists::Fail)
        .await
        .unwrap();
    assert_status(
        share
            .rename("many/f0002", "many/renamed", IfExists::Fail)
            .await,
        NtStatus::OBJECT_NAME_COLLISION,
    );
    share
        .rename("many/f0002", "many/renamed", IfExists::Replace)
        .await
        .unwrap();
    assert_eq!(server.read_file("data", "many/renamed").unwrap(), vec![2]);

    assert_status(
        share.remove_dir("many").await,
        NtStatus::DIRECTORY_NOT_EMPTY,
    );
    share.remove_file("many/renamed").await.unwrap();
    assert!(!share.exists("many/renamed").await.unwrap());
    share.create_dir("empty").await.unwrap();
    share.remove_dir("empty").await.unwrap();
    assert_eq!(server.list("data", "").unwrap(), vec!["many".to_string()]);
}

#[tokio::test]
async fn byte_range_locks_conflict_between_handles() {
    use smb3_client::{IfLocked, LockKind};
    let server = server().await;
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    let a = share.open("locked", &rw()).await.unwrap();
    let b = share.open("locked", &rw()).await.unwrap();
    a.write_at(0, Bytes::from_static(&[0; 100])).await.unwrap();
    a.lock(0, 10, LockKind::Exclusive, IfLocked::Fail)
        .await
        .unwrap();
    assert_status(
        b.lock(5, 10, LockKind::Shared, IfLocked::Fail).await,
        NtStatus::LOCK_NOT_GRANTED,
    );
    assert_status(
        b.write_at(0, Bytes::from_static(b"x")).await,
        NtStatus::FILE_LOCK_CONFLICT,
    );
    a.unlock(0, 10).await.unwrap();
    b.lock(5, 10, LockKind::Shared, IfLocked::Fail)
        .await
        .unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test]
async fn server_errors_reach_the_caller_with_their_status() {
    let server = server().await;
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    server.fail(Fault::fail(Command::CREATE, NtStatus::ACCESS_DENIED).at_path("secret"));
    assert_status(
        share.open("secret.txt", &rw()).await,
        NtStatus::ACCESS_DENIED,
    );
    // The fault was used up: the next open works.
    share
        .open("secret.txt", &rw())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();

    let f = share.open("disk.bin", &rw()).await.unwrap();
    server.fail(Fault::fail(Command::WRITE, NtStatus::DISK_FULL));
    assert_status(
        f.write_at(0, Bytes::from_static(b"data")).await,
        NtStatus::DISK_FULL,
    );
    f.close().await.unwrap();
    assert_eq!(server.faults_pending(), 0);
}

/// Wait (bounded) until the server has ended every session, which it does once their
/// connections are gone.
async fn until_no_sessions(server: &TestServer) {
    for _ in 0..200 {
        if server.sessions() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the server still holds {} sessions", server.sessions());
}

#[tokio::test]
async fn a_reset_connection_is_reconnected_and_the_next_call_works() {
    let server = server().await;
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    share.create_dir("d").await.unwrap();
    let setups = server.requests(Command::SESSION_SETUP);
    server.cut_connections();
    until_no_sessions(&server).await;
    // The session is gone on the server: the client must notice, connect, authenticate and
    // connect the tree again before this succeeds.
    let mut ok = false;
    for _ in 0..50 {
        if share.exists("d").await.unwrap_or(false) {
            ok = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        ok,
        "the share is reachable again after the connection was reset"
    );
    assert!(
        server.requests(Command::SESSION_SETUP) > setups,
        "a new session was set up"
    );
    assert_eq!(server.sessions(), 1);
}

#[tokio::test]
async fn a_listing_cut_in_the_middle_goes_on_where_it_was() {
    let server = server().await;
    for i in 0..1500 {
        server.put_file("data", &format!("many/f{i:04}"), b"");
    }
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    let mut listing = share.list("many").await.unwrap();
    let mut names = Vec::new();
    names.extend(
        listing
            .next_page()
            .await
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|e| e.name),
    );
    assert!(
        names.len() < 1500,
        "the first page is not the whole directory"
    );
    // The next QUERY_DIRECTORY is done by the server, and its reply lost with the connection.
    server.fail(Fault::on(Command::QUERY_DIRECTORY, FaultAction::CutAfter));
    while let Some(page) = listing.next_page().await.unwrap() {
        names.extend(page.into_iter().map(|e| e.name));
    }
    listing.close().await.unwrap();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "no name twice");
    assert_eq!(names.len(), 1500, "no name missing");
    assert_eq!(client.multichannel().failover.listings_resumed, 1);
}

async fn multichannel_server() -> TestServer {
    let config = ServerConfig {
        multichannel: true,
        addresses: vec![
            std::net::Ipv4Addr::new(127, 0, 0, 1),
            std::net::Ipv4Addr::new(127, 0, 0, 2),
        ],
        ..ServerConfig::default()
    };
    TestServer::start(config)
        .await
        .expect("the test server starts")
}

#[tokio::test]
async fn a_second_channel_is_bound_to_the_servers_second_address() {
    let server = multichannel_server().await;
    let client = connect(&server, ClientConfig::default()).await;
    assert!(
        client
            .wait_for_channels(std::time::Duration::from_secs(10))
            .await,
        "channels: {:?}",
        client.channels()
    );
    let servers: Vec<_> = client.channels().iter().map(|c| c.server.ip()).collect();
    assert_eq!(
        client.usable_channels(),
        2,
        "{servers:?} {:#?}",
        client.multichannel()
    );
    assert!(servers.contains(&std::net::Ipv4Addr::new(127, 0, 0, 2).into()));
    assert_eq!(
        server.sessions(),
        1,
        "one session, bound to both connections"
    );

    let share = client.share("data").await.unwrap();
    let data: Vec<u8> = (0..16 << 20).map(|i| (i % 253) as u8).collect();
    let f = share.open("spread.bin", &rw()).await.unwrap();
    f.write_at(0, Bytes::from(data.clone())).await.unwrap();
    assert!(f.read_at(0, data.len()).await.unwrap()[..] == data[..]);
    f.close().await.unwrap();
}

#[tokio::test]
async fn losing_one_channel_replays_on_the_other_and_loses_nothing() {
    let server = multichannel_server().await;
    let client = connect(&server, ClientConfig::default()).await;
    assert!(
        client
            .wait_for_channels(std::time::Duration::from_secs(10))
            .await
    );
    let share = client.share("data").await.unwrap();
    let f = share.open("kept.bin", &rw()).await.unwrap();
    let data: Vec<u8> = (0..8 << 20).map(|i| (i % 251) as u8).collect();
    // A WRITE done by the server whose reply is lost with its connection: the client cannot
    // know it was done and sends it again on the surviving channel.
    server.fail(Fault::on(Command::WRITE, FaultAction::CutAfter));
    f.write_at(0, Bytes::from(data.clone())).await.unwrap();
    f.close().await.unwrap();
    assert!(server.read_file("data", "kept.bin").unwrap() == data);
    let failover = client.multichannel().failover;
    assert!(failover.channel_losses >= 1, "{failover:?}");
    assert!(failover.replays >= 1, "{failover:?}");
    assert_eq!(
        server.sessions(),
        1,
        "the session outlived one of its connections"
    );
}

#[tokio::test]
async fn a_chain_whose_close_fails_does_not_leave_its_handle_open() {
    // This server fails the CLOSE of CREATE + READ + CLOSE when the READ of an empty file
    // fails with END_OF_FILE, as MS-SMB2 allows.
    let config = ServerConfig {
        fail_whole_chain: true,
        ..ServerConfig::default()
    };
    let server = TestServer::start(config).await.unwrap();
    server.put_file("data", "empty", b"");
    server.put_file("data", "small", b"four");
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    assert_eq!(
        share
            .read_small_file("empty", 100)
            .await
            .unwrap()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        &share.read_small_file("small", 100).await.unwrap().unwrap()[..],
        b"four"
    );
    assert_eq!(server.open_paths(), Vec::<String>::new());
}

#[tokio::test]
async fn another_clients_open_breaks_write_caching_and_waits_for_the_acknowledgment() {
    write_caching_is_broken(false).await;
}

#[tokio::test]
async fn a_break_reaches_a_client_that_encrypts_everything() {
    write_caching_is_broken(true).await;
}

async fn write_caching_is_broken(encrypt: bool) {
    use smb3_client::LeaseCaching;
    let server = server().await;
    let mut config = ClientConfig::default();
    config.encrypt = encrypt;
    let a = connect(&server, config).await;
    let b = connect(&server, ClientConfig::default()).await;
    let share_a = a.share("data").await.unwrap();
    let share_b = b.share("data").await.unwrap();
    let writer = share_a.open("shared.txt", &rw()).await.unwrap();
    let rwh = LeaseCaching {
        read: true,
        handle: true,
        write: true,
    };
    assert_eq!(writer.lease(), Some(rwh));
    let mut changes = writer.lease_changes().expect("a lease to follow");
    writer
        .write_at(0, Bytes::from_static(b"cached?"))
        .await
        .unwrap();

    // B's open breaks A's Write caching first; B's CREATE completes once A acknowledged.
    let acks_before = server.requests(Command::OPLOCK_BREAK);
    let reader = share_b
        .open("shared.txt", &OpenOptions::new().read(true))
        .await
        .unwrap();
    assert_eq!(
        server.requests(Command::OPLOCK_BREAK),
        acks_before + 1,
        "A acknowledged"
    );
    let now = tokio::time::timeout(std::time::Duration::from_secs(5), changes.changed())
        .await
        .expect("A hears of the break")
        .expect("the lease is still there");
    assert!(!now.write && now.read, "{now:?}");
    assert_eq!(&reader.read_at(0, 64).await.unwrap()[..], b"cached?");
    assert!(
        reader.lease().is_some_and(|l| !l.write),
        "B shares the file: no Write caching"
    );
    writer.close().await.unwrap();
    reader.close().await.unwrap();
    assert_eq!(server.open_paths(), Vec::<String>::new());
}

#[tokio::test]
async fn a_durable_open_is_reclaimed_after_the_connection_is_lost() {
    let server = server().await;
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    let f = share.open("durable.bin", &rw()).await.unwrap();
    assert!(f.is_durable(), "granted with Handle caching");
    f.write_at(0, Bytes::from_static(b"before ")).await.unwrap();
    server.cut_connections();
    until_no_sessions(&server).await;
    assert_eq!(
        server.open_paths(),
        vec!["durable.bin".to_string()],
        "kept for its client"
    );
    // The first write after the loss waits for the session to come back and the open to be
    // reclaimed under its old FileId.
    f.write_at(7, Bytes::from_static(b"and after"))
        .await
        .unwrap();
    f.close().await.unwrap();
    assert_eq!(
        server.read_file("data", "durable.bin").unwrap(),
        b"before and after"
    );
    let failover = client.multichannel().failover;
    assert_eq!(failover.opens_reclaimed, 1, "{failover:?}");
    assert_eq!(failover.opens_lost, 0, "{failover:?}");
    assert_eq!(server.open_paths(), Vec::<String>::new());
}

/// Truncation is done on the open handle, not by the CREATE (see `Share::open`): a non-empty
/// file comes back empty at open, a new or empty one costs no request beyond the CREATE.
#[tokio::test]
async fn truncating_opens_empty_the_file_on_their_handle_and_only_when_it_has_bytes() {
    let server = server().await;
    server.put_file("data", "full.bin", &[7u8; 5000]);
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();
    let truncating = OpenOptions::new().write(true).create(true).truncate(true);

    let before = server.requests(Command::SET_INFO);
    let file = share.open("full.bin", &truncating).await.unwrap();
    assert_eq!(file.size_at_open(), 0);
    assert_eq!(server.requests(Command::SET_INFO), before + 1);
    file.write_at(0, Bytes::from_static(b"new")).await.unwrap();
    file.close().await.unwrap();
    assert_eq!(server.read_file("data", "full.bin").unwrap(), b"new");

    let before = server.requests(Command::SET_INFO);
    for name in ["new.bin", "new.bin"] {
        let file = share.open(name, &truncating).await.unwrap();
        assert_eq!(file.size_at_open(), 0);
        file.close().await.unwrap();
    }
    assert_eq!(
        server.requests(Command::SET_INFO),
        before,
        "an empty file needs no truncation"
    );

    // Truncate without create: the file must exist.
    let existing_only = OpenOptions::new().write(true).truncate(true);
    assert_status(
        share.open("absent.bin", &existing_only).await,
        NtStatus::OBJECT_NAME_NOT_FOUND,
    );
}

/// A directory's CREATE done by the server but whose reply is lost with its channel is sent
/// again on the other channel with the same CreateGuid, and the server answers with the open
/// the first attempt made (MS-SMB2 3.3.5.9.10): the listing ends with no handle left behind.
/// Without the CreateGuid the replay made a second open and the first stayed until the
/// session ended (the soak once found two such directory handles at rest).
#[tokio::test]
async fn a_listing_whose_open_is_lost_with_its_channel_leaves_no_handle_behind() {
    let server = multichannel_server().await;
    server.put_file("data", "dir/a.txt", b"a");
    server.put_file("data", "dir/b.txt", b"b");
    let client = connect(&server, ClientConfig::default()).await;
    assert!(
        client
            .wait_for_channels(std::time::Duration::from_secs(10))
            .await
    );
    let share = client.share("data").await.unwrap();
    server.fail(Fault::on(Command::CREATE, FaultAction::CutAfter).at_path("dir"));
    let mut names: Vec<String> = share
        .read_dir("dir")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt", "b.txt"]);
    let failover = client.multichannel().failover;
    assert!(failover.replays >= 1, "{failover:?}");
    assert_eq!(
        server.open_paths(),
        Vec::<String>::new(),
        "handles left open"
    );
}

/// The server ends the session's authentication (as when a Kerberos ticket ends): every
/// request then meets STATUS_NETWORK_SESSION_EXPIRED. One reauthentication (two SESSION_SETUP
/// rounds of NTLM, on one channel) serves the sixteen reads that met it over both channels;
/// each is sent again and succeeds, and the open file, its lease and the channels stay.
#[tokio::test]
async fn an_expired_session_is_authenticated_once_again_for_every_request_that_met_it() {
    let server = multichannel_server().await;
    let client = connect(&server, ClientConfig::default()).await;
    assert!(
        client
            .wait_for_channels(std::time::Duration::from_secs(10))
            .await
    );
    let share = client.share("data").await.unwrap();
    let data: Vec<u8> = (0..1 << 20).map(|i| (i % 249) as u8).collect();
    let f = share.open("kept-open.bin", &rw()).await.unwrap();
    f.write_at(0, Bytes::from(data.clone())).await.unwrap();

    server.expire_sessions();
    let setups = server.requests(Command::SESSION_SETUP);
    let expired_before = server.requests(Command::READ);
    let reads: Vec<_> = (0..16u64)
        .map(|i| {
            let f = f.clone();
            tokio::spawn(async move { f.read_at(i * 65536, 65536).await })
        })
        .collect();
    for (i, r) in reads.into_iter().enumerate() {
        let got = r.await.unwrap().expect("a read after the expiry");
        assert!(got[..] == data[i * 65536..(i + 1) * 65536], "read {i}");
    }
    assert_eq!(
        client.reauthentications(),
        smb3_client::Reauthentications {
            renewed: 1,
            failed: 0
        }
    );
    assert_eq!(server.requests(Command::SESSION_SETUP) - setups, 2);
    assert!(server.requests(Command::READ) - expired_before >= 16);
    // The same open, and new ones, go on.
    f.write_at(0, Bytes::from_static(b"after")).await.unwrap();
    f.close().await.unwrap();
    assert_eq!(
        &server.read_file("data", "kept-open.bin").unwrap()[..5],
        b"after"
    );
    assert_eq!(client.usable_channels(), 2);
    assert_eq!(
        client.identity().mechanism,
        smb3_client::AuthMechanism::Ntlm
    );
}

/// A rename or delete the server did, whose reply was lost with the only connection: the
/// session is re-established, the first handle is gone with it, and opening the path again
/// finds nothing. The work is done, and the caller is told so, not ENOENT (the mount's
/// `rename(2)` once failed this way in the soak).
#[tokio::test]
async fn a_rename_or_delete_done_before_its_session_was_lost_succeeds() {
    let server = server().await;
    server.put_file("data", "dir/a", b"renamed once");
    server.put_file("data", "dir/gone", b"deleted once");
    let client = connect(&server, ClientConfig::default()).await;
    let share = client.share("data").await.unwrap();

    server.fail(Fault::on(Command::SET_INFO, FaultAction::CutAfter).at_path("dir\\a"));
    share
        .rename("dir/a", "dir/b", IfExists::Fail)
        .await
        .expect("the rename the server did is reported done");
    assert_eq!(server.read_file("data", "dir/b").unwrap(), b"renamed once");
    assert!(server.read_file("data", "dir/a").is_none());

    server.fail(Fault::on(Command::SET_INFO, FaultAction::CutAfter).at_path("dir\\gone"));
    share
        .remove_file("dir/gone")
        .await
        .expect("the delete the server did is reported done");
    assert!(server.read_file("data", "dir/gone").is_none());
    assert!(
        client.multichannel().failover.sessions_reestablished >= 2,
        "{:?}",
        client.multichannel().failover
    );
}
