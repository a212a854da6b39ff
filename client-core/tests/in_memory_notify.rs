//! Directory watches (`Share::watch`, SMB2 CHANGE_NOTIFY) and their cancellation against the
//! in-memory server: the names and actions of changes made through another connection, the
//! filter and the scope, changes that wait on the server between two requests, the overflow
//! that asks for a rescan, CANCEL, CLOSE and a lost connection. The same behaviour against
//! smbd is covered by `tests/e2e/notify.rs`; these run in process, in milliseconds.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smb3_client::{
    Change, ChannelInfo, Client, ClientConfig, Command, Dialect, DirWatch, IfExists, NtStatus,
    OpenOptions, Share, UserCredentials, WatchFilter, WatchScope,
};
use smb3_testserver::{Fault, ServerConfig, TestServer};

/// The most any single wait in these tests may take; each is over in milliseconds normally.
const LIMIT: Duration = Duration::from_secs(5);

async fn server_with(config: ServerConfig) -> TestServer {
    TestServer::start(config)
        .await
        .expect("the test server starts")
}

async fn server() -> TestServer {
    server_with(ServerConfig::default()).await
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

/// A client on one channel, so that its counters can be compared exactly, and its share.
async fn single_channel(server: &TestServer) -> (Client, Share) {
    let mut config = ClientConfig::default();
    config.multichannel = false;
    let client = connect(server, config).await;
    let share = client.share("data").await.expect("tree connect");
    assert_eq!(client.channels().len(), 1);
    (client, share)
}

fn channel(client: &Client) -> ChannelInfo {
    let mut all = client.channels();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

/// Wait, at most [`LIMIT`], until `cond` holds. Polls: the conditions are counters of the
/// server and the client, which have nothing to wait on.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// `fut`, which must finish within [`LIMIT`].
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {LIMIT:?}"))
}

/// Batches from `watch` until at least `count` changes came.
async fn collect(watch: &mut DirWatch, count: usize) -> Vec<Change> {
    let mut got = Vec::new();
    while got.len() < count {
        let batch = tokio::time::timeout(LIMIT, watch.next())
            .await
            .unwrap_or_else(|_| panic!("no change within {LIMIT:?}; so far {got:?}"))
            .expect("next");
        got.extend(batch);
    }
    got
}

async fn create_file(share: &Share, path: &str, data: &'static [u8]) {
    let f = share
        .open(path, &OpenOptions::new().write(true).create(true))
        .await
        .expect("create");
    if !data.is_empty() {
        f.write_at(0, Bytes::from_static(data))
            .await
            .expect("write");
    }
    f.close().await.expect("close");
}

fn added(path: &str) -> Change {
    Change::Added(path.into())
}

/// The watcher's configurations: 3.1.1 signed (AES-GMAC), 3.1.1 sealed, 3.0.2 signed
/// (AES-CMAC). The final response of a request that went async is signed or sealed like any.
fn watcher_configs() -> Vec<(&'static str, ClientConfig)> {
    let signed = ClientConfig::default();
    let mut sealed = ClientConfig::default();
    sealed.encrypt = true;
    let mut smb302 = ClientConfig::default();
    smb302.max_dialect = Dialect::Smb302;
    vec![
        ("3.1.1 signed", signed),
        ("3.1.1 sealed", sealed),
        ("3.0.2", smb302),
    ]
}

#[tokio::test]
async fn changes_made_through_another_connection_arrive_with_names_and_actions() {
    let server = server().await;
    let actor = connect(&server, ClientConfig::default()).await;
    let other = actor.share("data").await.expect("tree connect");
    for (i, (label, config)) in watcher_configs().into_iter().enumerate() {
        let watcher = connect(&server, config).await;
        let share = watcher.share("data").await.expect("tree connect");
        let dir = format!("watched{i}");
        share.create_dir(&dir).await.expect("mkdir");
        let mut watch = share
            .watch(&dir, WatchFilter::NAMES, WatchScope::Directory)
            .await
            .expect("watch");
        assert_eq!(server.pending_notifies(), 1, "{label}: the server holds it");

        let plain = format!("{dir}/a.txt");
        let fancy_name = "Été ファイル ß.txt";
        let fancy = format!("{dir}/{fancy_name}");
        // The data written is no name change: the NAMES filter does not see it.
        create_file(&other, &plain, b"hello").await;
        other
            .rename(&plain, &fancy, IfExists::Fail)
            .await
            .expect("rename");
        other.remove_file(&fancy).await.expect("delete");
        other
            .create_dir(&format!("{dir}/sub"))
            .await
            .expect("mkdir sub");

        let got = collect(&mut watch, 5).await;
        assert_eq!(
            got,
            vec![
                added("a.txt"),
                Change::RenamedFrom("a.txt".into()),
                Change::RenamedTo(fancy_name.into()),
                Change::Removed(fancy_name.into()),
                added("sub"),
            ],
            "{label}"
        );
        watch.close().await.expect("close");
        assert_eq!(server.pending_notifies(), 0, "{label}");
        watcher.logoff().await.expect("logoff");
    }
}

#[tokio::test]
async fn a_write_reaches_only_a_watch_whose_filter_asks_for_it() {
    let server = server().await;
    let (_client, share) = single_channel(&server).await;
    let actor = connect(&server, ClientConfig::default()).await;
    let other = actor.share("data").await.expect("tree connect");
    share.create_dir("w").await.expect("mkdir");
    create_file(&share, "w/f", b"").await;
    let mut names = share
        .watch("w", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch names");
    let mut writes = share
        .watch(
            "w",
            WatchFilter::LAST_WRITE | WatchFilter::SIZE,
            WatchScope::Directory,
        )
        .await
        .expect("watch writes");

    let f = other
        .open("w/f", &OpenOptions::new().write(true))
        .await
        .expect("open");
    f.write_at(0, Bytes::from_static(b"grown"))
        .await
        .expect("write");
    f.write_at(0, Bytes::from_static(b"again"))
        .await
        .expect("write");
    f.close().await.expect("close");
    create_file(&other, "w/marker", b"").await;

    // Two writes in a row are one MODIFIED; the new name is not a write.
    assert_eq!(
        collect(&mut writes, 1).await,
        vec![Change::Modified("f".into())]
    );
    // The writes came first and were not wanted: the request waited for the new name.
    assert_eq!(collect(&mut names, 1).await, vec![added("marker")]);
}

#[tokio::test]
async fn a_subdirectory_change_reaches_only_a_watch_on_the_tree() {
    let server = server().await;
    let (_client, share) = single_channel(&server).await;
    let actor = connect(&server, ClientConfig::default()).await;
    let other = actor.share("data").await.expect("tree connect");
    share.create_dir_all("top/sub").await.expect("mkdir");
    let mut flat = share
        .watch("top", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch");
    let mut deep = share
        .watch("top", WatchFilter::NAMES, WatchScope::Subtree)
        .await
        .expect("watch tree");

    create_file(&other, "top/sub/deep.txt", b"").await;
    create_file(&other, "top/shallow.txt", b"").await;
    assert_eq!(collect(&mut flat, 1).await, vec![added("shallow.txt")]);
    assert_eq!(
        collect(&mut deep, 2).await,
        vec![added("sub/deep.txt"), added("shallow.txt")]
    );

    // From one directory to another is a removal and an addition, as smbd reports it; the
    // flat watch sees the half in its own directory.
    other
        .rename("top/shallow.txt", "top/sub/moved.txt", IfExists::Fail)
        .await
        .expect("rename");
    assert_eq!(
        collect(&mut deep, 2).await,
        vec![
            Change::Removed("shallow.txt".into()),
            added("sub/moved.txt")
        ]
    );
    assert_eq!(
        collect(&mut flat, 1).await,
        vec![Change::Removed("shallow.txt".into())]
    );
}

#[tokio::test]
async fn changes_made_while_no_request_waits_come_with_the_next_at_once() {
    let server = server().await;
    let (client, share) = single_channel(&server).await;
    share.create_dir("w").await.expect("mkdir");
    let mut watch = share
        .watch("w", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch");
    share.create_dir("w/one").await.expect("mkdir");
    assert_eq!(collect(&mut watch, 1).await, vec![added("one")]);

    // No request waits now: the server keeps what happens for the next one.
    assert_eq!(server.pending_notifies(), 0);
    share.create_dir("w/two").await.expect("mkdir");
    server.put_file("data", "w/three", b"3");
    let cancels = channel(&client).cancels_sent;
    let batch = within("the next request", watch.next())
        .await
        .expect("next");
    assert_eq!(batch, vec![added("two"), added("three")]);
    assert_eq!(server.pending_notifies(), 0, "answered without waiting");
    assert_eq!(channel(&client).cancels_sent, cancels);
}

#[tokio::test]
async fn more_changes_than_the_buffer_holds_ask_for_a_rescan() {
    // MaxTransactSize 4 KiB: the client asks for 4 KiB of changes, about 130 names.
    let server = server_with(ServerConfig {
        max_io: 4096,
        ..ServerConfig::default()
    })
    .await;
    let (_client, share) = single_channel(&server).await;
    share.create_dir("w").await.expect("mkdir");
    let mut watch = share
        .watch("w", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch");
    share.create_dir("w/first").await.expect("mkdir");
    assert_eq!(collect(&mut watch, 1).await, vec![added("first")]);

    for i in 0..200 {
        share
            .create_dir(&format!("w/d{i:04}"))
            .await
            .expect("mkdir");
    }
    let batch = within("the rescan", watch.next()).await.expect("next");
    assert_eq!(batch, vec![Change::Rescan]);

    // The watch goes on afresh.
    share.create_dir("w/after").await.expect("mkdir");
    assert_eq!(collect(&mut watch, 1).await, vec![added("after")]);
}

#[tokio::test]
async fn a_dropped_next_is_cancelled_on_the_server_and_the_watch_goes_on() {
    let server = server().await;
    let (client, share) = single_channel(&server).await;
    share.create_dir("w").await.expect("mkdir");
    let before = channel(&client);
    let mut watch = share
        .watch("w", WatchFilter::ALL, WatchScope::Subtree)
        .await
        .expect("watch");
    assert_eq!(server.pending_notifies(), 1);
    assert_eq!(channel(&client).outstanding, 1);

    // 1. Dropped while the server holds it: the CANCEL names it by its AsyncId.
    tokio::select! {
        biased;
        r = watch.next() => panic!("answered with nothing changed: {r:?}"),
        _ = std::future::ready(()) => {}
    }
    assert_eq!(channel(&client).cancels_sent, 1, "CANCEL sent on drop");
    until("the cancelled request is answered", || {
        server.pending_notifies() == 0 && channel(&client).outstanding == 0
    })
    .await;
    assert_eq!(server.requests(Command::CANCEL), 1);
    assert_eq!(channel(&client).credits, before.credits, "credits back");

    // 2. Dropped right after it was sent, before its interim response: the client sends the
    //    CANCEL once that arrives.
    tokio::select! {
        biased;
        r = watch.next() => panic!("answered at once: {r:?}"),
        _ = std::future::ready(()) => {}
    }
    until("the early-dropped request is cancelled", || {
        let c = channel(&client);
        c.cancels_sent == 2 && c.outstanding == 0 && server.pending_notifies() == 0
    })
    .await;
    assert_eq!(server.requests(Command::CANCEL), 2);
    assert_eq!(channel(&client).credits, before.credits, "credits back");

    // 3. The watch goes on: a change is reported by the next request.
    let waiting = tokio::spawn(async move {
        let batch = watch.next().await;
        (watch, batch)
    });
    until("the watch waits again", || server.pending_notifies() == 1).await;
    share.create_dir("w/later").await.expect("mkdir");
    let (watch, batch) = within("the change", waiting).await.expect("watch task");
    assert!(
        batch.expect("next").contains(&added("later")),
        "a change after two cancels"
    );
    watch.close().await.expect("close");
    let end = channel(&client);
    assert_eq!(end.cancels_sent, 2, "a completed request needs no CANCEL");
    assert_eq!(end.outstanding, 0);
    assert!(end.failure.is_none(), "{:?}", end.failure);
}

#[tokio::test]
async fn dropping_a_watch_cancels_its_request_and_closes_the_directory() {
    let server = server().await;
    let (client, share) = single_channel(&server).await;
    share.create_dir("gone").await.expect("mkdir");
    let watch = share
        .watch("gone", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch");
    assert_eq!(server.open_handles(), 1);
    drop(watch);
    until("the request is cancelled and the directory closed", || {
        server.pending_notifies() == 0
            && server.open_handles() == 0
            && channel(&client).outstanding == 0
    })
    .await;
    assert_eq!(channel(&client).cancels_sent, 1);
    assert_eq!(server.requests(Command::CANCEL), 1);
    share.remove_dir("gone").await.expect("rmdir");
}

// Two worker threads: on one, the client's reader would take in the CLOSE response and the
// STATUS_NOTIFY_CLEANUP behind it before `close` resumed, hiding a server that sent them in
// the wrong order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_handle_ends_the_waiting_request_with_notify_cleanup() {
    let server = server().await;
    let (client, share) = single_channel(&server).await;
    share.create_dir("w").await.expect("mkdir");

    // `close` while the first request waits: the server completes it (STATUS_NOTIFY_CLEANUP)
    // before it answers the CLOSE, so the client has nothing to cancel.
    let watch = share
        .watch("w", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch");
    watch.close().await.expect("close");
    assert_eq!(server.pending_notifies(), 0);
    assert_eq!(server.open_handles(), 0);
    let c = channel(&client);
    assert_eq!((c.outstanding, c.cancels_sent), (0, 0));
    assert_eq!(server.requests(Command::CANCEL), 0);

    // The handle closed another way, by disconnecting its tree, while `next` waits: the
    // request ends with the status.
    let mut watch = share
        .watch("w", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch");
    let waiting = tokio::spawn(async move { watch.next().await.map_err(|e| e.status()) });
    until("the server holds the request", || {
        server.pending_notifies() == 1
    })
    .await;
    share.disconnect().await.expect("tree disconnect");
    let ended = within("the cleanup", waiting).await.expect("watch task");
    assert_eq!(ended, Err(Some(NtStatus::NOTIFY_CLEANUP)));
    assert_eq!(server.pending_notifies(), 0);
    assert_eq!(server.open_handles(), 0);
}

#[tokio::test]
async fn a_lost_connection_drops_the_waiting_request() {
    let server = server().await;
    let (_client, share) = single_channel(&server).await;
    share.create_dir("w").await.expect("mkdir");
    let mut watch = share
        .watch("w", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch");
    let waiting = tokio::spawn(async move { watch.next().await });
    server.cut_connections();
    until("the server forgets the request", || {
        server.pending_notifies() == 0
    })
    .await;
    let ended = within("the watch's end", waiting)
        .await
        .expect("watch task");
    assert!(ended.is_err(), "{ended:?}");
}

#[tokio::test]
async fn a_fault_on_change_notify_reaches_the_watch() {
    let server = server().await;
    let (_client, share) = single_channel(&server).await;
    share.create_dir("guarded").await.expect("mkdir");
    share.create_dir("open").await.expect("mkdir");

    // The first request refused: the watch fails, and its directory is closed.
    server.fail(Fault::fail(Command::CHANGE_NOTIFY, NtStatus::ACCESS_DENIED).at_path("guarded"));
    let refused = share
        .watch("guarded", WatchFilter::NAMES, WatchScope::Directory)
        .await;
    assert_eq!(
        refused.map(|_| ()).map_err(|e| e.status()),
        Err(Some(NtStatus::ACCESS_DENIED))
    );
    until("the refused watch's directory is closed", || {
        server.open_handles() == 0
    })
    .await;

    // A later request refused: that `next` fails, and the one after it works.
    let mut watch = share
        .watch("open", WatchFilter::NAMES, WatchScope::Directory)
        .await
        .expect("watch");
    share.create_dir("open/one").await.expect("mkdir");
    assert_eq!(collect(&mut watch, 1).await, vec![added("one")]);
    server.fail(Fault::fail(
        Command::CHANGE_NOTIFY,
        NtStatus::INSUFFICIENT_RESOURCES,
    ));
    let failed = within("the refused request", watch.next()).await;
    assert_eq!(
        failed.map_err(|e| e.status()),
        Err(Some(NtStatus::INSUFFICIENT_RESOURCES))
    );
    share.create_dir("open/two").await.expect("mkdir");
    assert_eq!(collect(&mut watch, 1).await, vec![added("two")]);

    assert_eq!(server.faults_pending(), 0);
}
