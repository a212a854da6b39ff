//! Directory watches (SMB2 CHANGE_NOTIFY) and SMB2 CANCEL against the testbed's real smbd:
//! changes made by another session arrive with the right names and actions, and a watch
//! dropped mid-wait is cancelled on the server (its STATUS_CANCELLED reply comes back, the
//! credits return, nothing stays outstanding), on SMB 3.1.1 and 3.0.2, signed and sealed.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smb3_client::{
    Change, ChannelInfo, Client, ClientConfig, Dialect, OpenOptions, Share, UserCredentials,
    WatchFilter, WatchScope,
};
use smb3_tests::{Testbed, TestbedConfig};
use tokio::sync::mpsc;

fn start() -> Arc<Testbed> {
    Arc::new(Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}")))
}

async fn connect(
    server: &str,
    creds: &UserCredentials,
    dialect: Dialect,
    multichannel: bool,
) -> Client {
    let mut config = ClientConfig::default();
    config.min_dialect = dialect;
    config.max_dialect = dialect;
    config.multichannel = multichannel;
    let client = Client::connect(server, creds, config)
        .await
        .expect("connect");
    client.wait_for_channels(Duration::from_secs(10)).await;
    client
}

/// The (dialect, share) pairs every test runs on: plain, sealed and signing-mandatory shares
/// on 3.1.1 (AES-GMAC signing, whose nonce marks a CANCEL), and 3.0.2 (AES-CMAC).
const CASES: &[(Dialect, &str)] = &[
    (Dialect::Smb311, "plain"),
    (Dialect::Smb311, "encrypted"),
    (Dialect::Smb311, "signed"),
    (Dialect::Smb302, "plain"),
    (Dialect::Smb302, "encrypted"),
];

fn label(dialect: Dialect, share: &str) -> String {
    format!("{dialect} on [{share}]")
}

/// Sum of a counter over the session's channels.
fn total(client: &Client, f: impl Fn(&ChannelInfo) -> u64) -> u64 {
    client.channels().iter().map(f).sum()
}

/// Wait (up to `limit`) until `cond` holds; returns how long it took.
async fn until(what: &str, limit: Duration, cond: impl Fn() -> bool) -> Duration {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < limit, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    started.elapsed()
}

/// Name changes only (Samba may add MODIFIED entries for the directory's own times).
fn names_only(changes: &[Change]) -> Vec<Change> {
    changes
        .iter()
        .filter(|c| !matches!(c, Change::Modified(_)))
        .cloned()
        .collect()
}

#[test]
fn changes_made_by_another_session_arrive_with_names_and_actions() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        for &(dialect, share_name) in CASES {
            let label = label(dialect, share_name);
            let watcher = connect(&server, &creds, dialect, true).await;
            let share = watcher.share(share_name).await.expect("tree connect");
            let dir = format!("watched-{}", dialect.to_string().replace('.', ""));
            share.create_dir(&dir).await.expect("mkdir");
            let mut watch = share
                .watch(&dir, WatchFilter::NAMES, WatchScope::Directory)
                .await
                .expect("watch");

            // `watch` returns once the server holds the first CHANGE_NOTIFY: changes made
            // from now on are reported, with no pause for the request to arrive.
            assert_eq!(
                total(&watcher, |c| c.outstanding as u64),
                1,
                "{label}: the first CHANGE_NOTIFY is out"
            );

            // Collect batches in a task, so the next CHANGE_NOTIFY is always in flight.
            let (tx, mut rx) = mpsc::unbounded_channel::<Vec<Change>>();
            let collector = tokio::spawn(async move {
                loop {
                    let batch = watch.next().await.expect("next");
                    if tx.send(batch).is_err() {
                        return watch;
                    }
                }
            });
            // Another session creates, renames (to a non-ASCII name) and deletes a file.
            let actor = connect(&server, &creds, dialect, false).await;
            let other = actor.share(share_name).await.expect("tree connect");
            let plain = format!("{dir}/a.txt");
            let fancy_name = "Été ファイル ß.txt";
            let fancy = format!("{dir}/{fancy_name}");
            let f = other
                .open(&plain, &OpenOptions::new().write(true).create(true))
                .await
                .expect("create");
            f.write_at(0, Bytes::from_static(b"hello"))
                .await
                .expect("write");
            f.close().await.expect("close");
            other
                .rename(&plain, &fancy, smb3_client::IfExists::Fail)
                .await
                .expect("rename");
            other.remove_file(&fancy).await.expect("delete");
            other
                .create_dir(&format!("{dir}/sub"))
                .await
                .expect("mkdir sub");

            let want = vec![
                Change::Added("a.txt".into()),
                Change::RenamedFrom("a.txt".into()),
                Change::RenamedTo(fancy_name.into()),
                Change::Removed(fancy_name.into()),
                Change::Added("sub".into()),
            ];
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(10);
            while names_only(&got).len() < want.len() && Instant::now() < deadline {
                if let Ok(Some(batch)) =
                    tokio::time::timeout(Duration::from_millis(200), rx.recv()).await
                {
                    eprintln!("{label}: {batch:?}");
                    got.extend(batch);
                }
            }
            // Samba learns of the rename from inotify and reports it as a rename only when
            // both halves come in one read of its inotify descriptor; on a busy machine they
            // can come apart, and it reports the old name removed and the new one added
            // (source3/smbd/notify_inotify.c). Both are what the server said, decoded.
            let mut split = want.clone();
            split[1] = Change::Removed("a.txt".into());
            split[2] = Change::Added(fancy_name.into());
            let names = names_only(&got);
            assert!(
                names == want || names == split,
                "{label}: all changes {got:?}, expected {want:?}"
            );
            if names == split {
                eprintln!("{label}: the server reported the rename as a removal and an addition");
            }
            assert!(!got.contains(&Change::Rescan), "{label}");

            drop(rx);
            // The collector is parked in next(); once the server has answered that request
            // with STATUS_PENDING, abort it: dropping its future cancels the CHANGE_NOTIFY,
            // and the watch closes the directory. (Closed before the interim reply, the
            // server would end the request itself, with STATUS_NOTIFY_CLEANUP.)
            tokio::time::sleep(Duration::from_millis(300)).await;
            collector.abort();
            let _ = collector.await;
            until(
                "the watch's request is answered",
                Duration::from_secs(5),
                || total(&watcher, |c| c.outstanding as u64) == 0,
            )
            .await;
            assert_eq!(total(&watcher, |c| c.cancels_sent), 1, "{label}");
            other
                .remove_dir(&format!("{dir}/sub"))
                .await
                .expect("rmdir");
            actor.logoff().await.expect("logoff");
            watcher.logoff().await.expect("logoff");
        }
    });
}

/// One channel only, so its credits and counters can be compared exactly.
async fn single_channel(
    server: &str,
    creds: &UserCredentials,
    dialect: Dialect,
    share: &str,
) -> (Client, Share) {
    let client = connect(server, creds, dialect, false).await;
    assert_eq!(client.channels().len(), 1);
    let share = client.share(share).await.expect("tree connect");
    (client, share)
}

fn channel(client: &Client) -> ChannelInfo {
    let mut all = client.channels();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

#[test]
fn a_watch_dropped_mid_wait_is_cancelled_and_the_channel_carries_on() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        for &(dialect, share_name) in CASES {
            let label = label(dialect, share_name);
            let (client, share) = single_channel(&server, &creds, dialect, share_name).await;
            let dir = format!("cancel-{}", dialect.to_string().replace('.', ""));
            share.create_dir(&dir).await.expect("mkdir");
            let before = channel(&client);
            let mut watch = share
                .watch(&dir, WatchFilter::ALL, WatchScope::Subtree)
                .await
                .expect("watch");
            // The server holds the watch's first CHANGE_NOTIFY (interim reply received).
            let watching = channel(&client);
            assert_eq!(
                (watching.outstanding, watching.cancels_sent),
                (1, 0),
                "{label}"
            );

            // 1. Dropped while the server holds it (long after its interim reply).
            let waited = tokio::time::timeout(Duration::from_millis(300), watch.next()).await;
            assert!(waited.is_err(), "{label}: nothing changed, yet {waited:?}");
            let sent_at = Instant::now();
            assert_eq!(
                channel(&client).cancels_sent,
                1,
                "{label}: CANCEL sent on drop"
            );
            let took = until(
                "the cancelled request is answered",
                Duration::from_secs(5),
                || channel(&client).outstanding == 0,
            )
            .await;
            let after = channel(&client);
            eprintln!(
                "{label}: CANCEL answered (STATUS_CANCELLED) after {took:?} ({:?} since sent); \
                 credits {} -> {}",
                sent_at.elapsed(),
                before.credits,
                after.credits
            );
            assert_eq!(after.credits, before.credits, "{label}: credits back");
            assert!(after.failure.is_none(), "{label}: {:?}", after.failure);

            // 2. Dropped right after it was sent, before the interim reply: the CANCEL goes
            //    out when the interim arrives.
            tokio::select! {
                biased;
                r = watch.next() => panic!("{label}: answered at once: {r:?}"),
                _ = std::future::ready(()) => {}
            }
            until(
                "the early-dropped request is cancelled",
                Duration::from_secs(5),
                || {
                    let c = channel(&client);
                    c.cancels_sent == 2 && c.outstanding == 0
                },
            )
            .await;
            assert_eq!(
                channel(&client).credits,
                before.credits,
                "{label}: credits back"
            );

            // 3. The channel and the watch carry on: a change is reported by the next call.
            let watching = tokio::spawn(async move {
                let batch = watch.next().await;
                (watch, batch)
            });
            until("the watch is pending again", Duration::from_secs(5), || {
                channel(&client).outstanding == 1
            })
            .await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            share
                .create_dir(&format!("{dir}/later"))
                .await
                .expect("mkdir");
            let (watch, batch) = tokio::time::timeout(Duration::from_secs(10), watching)
                .await
                .expect("a change within 10 s")
                .expect("watch task");
            let batch = batch.expect("next");
            assert!(
                batch.contains(&Change::Added("later".into())),
                "{label}: {batch:?}"
            );
            watch.close().await.expect("close watch");

            let end = channel(&client);
            assert_eq!(
                end.cancels_sent, 2,
                "{label}: a completed watch sends no CANCEL"
            );
            assert_eq!(end.outstanding, 0, "{label}");
            assert!(end.failure.is_none(), "{label}");
            share
                .remove_dir(&format!("{dir}/later"))
                .await
                .expect("rmdir");
            share.remove_dir(&dir).await.expect("rmdir");
            client.logoff().await.expect("logoff");
        }
    });
}

#[test]
fn dropping_a_watch_closes_its_directory() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        let (client, share) = single_channel(&server, &creds, Dialect::Smb311, "plain").await;
        share.create_dir("gone").await.expect("mkdir");
        let watch = share
            .watch("gone", WatchFilter::NAMES, WatchScope::Directory)
            .await
            .expect("watch");
        assert_eq!(channel(&client).outstanding, 1, "the first CHANGE_NOTIFY");
        let requests = channel(&client).requests;
        drop(watch);
        // The CLOSE goes out in the background and is answered.
        until(
            "the background CLOSE is answered",
            Duration::from_secs(5),
            || {
                let c = channel(&client);
                c.requests == requests + 1 && c.outstanding == 0
            },
        )
        .await;
        // With our handle still open, Samba would keep the directory delete-pending.
        share.remove_dir("gone").await.expect("rmdir");
        assert!(!share.exists("gone").await.expect("stat"));
        assert_eq!(channel(&client).outstanding, 0);
        assert_eq!(
            channel(&client).cancels_sent,
            1,
            "the first CHANGE_NOTIFY, never waited for, is cancelled"
        );
    });
}

/// Dropped watches and files leave a CANCEL, late STATUS_CANCELLED replies and CLOSEs on
/// their way, spread over the session's channels. A LOGOFF right after waits for them:
/// answered after the session is gone, they would come back unsigned, and a signed session
/// drops a channel that brings an unsigned reply.
#[test]
fn a_logoff_right_after_dropping_watches_and_files_loses_no_channel() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        for &(dialect, share_name) in CASES {
            let label = label(dialect, share_name);
            let client = connect(&server, &creds, dialect, true).await;
            let share = client.share(share_name).await.expect("tree connect");
            let dir = format!("logoff-{}", dialect.to_string().replace('.', ""));
            let mut watches = Vec::new();
            let mut files = Vec::new();
            for i in 0..8 {
                let sub = format!("{dir}/w{i}");
                share.create_dir_all(&sub).await.expect("mkdir");
                let watch = share
                    .watch(&sub, WatchFilter::NAMES, WatchScope::Directory)
                    .await
                    .expect("watch");
                watches.push(watch);
                let file = share
                    .open(
                        &format!("{dir}/f{i}"),
                        &OpenOptions::new().write(true).create(true),
                    )
                    .await
                    .expect("create");
                files.push(file);
            }
            let channels = client.channels().len();
            drop(watches);
            drop(files);
            client.logoff().await.expect("logoff");
            let failed: Vec<_> = client
                .channels()
                .into_iter()
                .filter_map(|c| c.failure)
                .collect();
            eprintln!("{label}: {channels} channel(s), failures after LOGOFF: {failed:?}");
            assert!(failed.is_empty(), "{label}: {failed:?}");

            // Tidy up from a new session.
            let client = connect(&server, &creds, dialect, false).await;
            let share = client.share(share_name).await.expect("tree connect");
            for i in 0..8 {
                share
                    .remove_dir(&format!("{dir}/w{i}"))
                    .await
                    .expect("rmdir");
                share.remove_file(&format!("{dir}/f{i}")).await.expect("rm");
            }
            share.remove_dir(&dir).await.expect("rmdir");
            client.logoff().await.expect("logoff");
        }
    });
}
