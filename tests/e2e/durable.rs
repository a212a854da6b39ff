//! Durable opens and leases against the testbed's real smbd: every file open is durable on
//! every SMB 3 dialect and share, our own opens of one file share its lease, another
//! session's open breaks our lease and we acknowledge at once, and the lease-key table empties
//! as files close.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smb3_client::{Client, ClientConfig, Dialect, File, OpenOptions, UserCredentials};
use smb3_tests::{pattern, Testbed, TestbedConfig};

fn start() -> Arc<Testbed> {
    Arc::new(Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}")))
}

async fn connect(server: &str, creds: &UserCredentials, dialect: Dialect) -> Client {
    let mut config = ClientConfig::default();
    config.min_dialect = dialect;
    config.max_dialect = dialect;
    let client = Client::connect(server, creds, config)
        .await
        .expect("connect");
    // Let the bound channels come up, so breaks can arrive on any of them.
    client.wait_for_channels(Duration::from_secs(10)).await;
    client
}

fn writer() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true)
}

fn lease(f: &File) -> Option<String> {
    f.lease().map(|l| l.to_string())
}

/// Wait (up to 5 s) for handles closed in the background to be released.
async fn settled(client: &Client) -> (usize, usize) {
    for _ in 0..50 {
        if client.leased_files() == 0 && client.durable_opens() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (client.leased_files(), client.durable_opens())
}

#[test]
fn file_opens_are_durable_with_a_lease_on_every_smb3_dialect_and_share() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        for dialect in [Dialect::Smb300, Dialect::Smb302, Dialect::Smb311] {
            let client = connect(&server, &creds, dialect).await;
            assert_eq!(client.dialect(), dialect);
            for share_name in ["plain", "encrypted", "signed"] {
                let label = format!("{dialect} on [{share_name}]");
                let share = client.share(share_name).await.expect("tree connect");
                let name = format!("durable-{}.bin", dialect.to_string().replace('.', ""));

                let w = share.open(&name, &writer()).await.expect("create");
                assert!(w.is_durable(), "{label}: writer not durable");
                assert_eq!(lease(&w).as_deref(), Some("RWH"), "{label}");
                assert_eq!(client.durable_opens(), 1, "{label}");
                assert_eq!(client.leased_files(), 1, "{label}");
                let data = Bytes::from(pattern(7, 100_000));
                w.write_at(0, data.clone()).await.expect("write");
                w.close().await.expect("close");
                assert_eq!(client.leased_files(), 0, "{label}: key kept after close");
                assert_eq!(client.durable_opens(), 0, "{label}");

                // A reader asks for Read and Handle caching only, and is durable too.
                let r = share
                    .open(&name, &OpenOptions::new().read(true))
                    .await
                    .expect("open");
                assert!(r.is_durable(), "{label}: reader not durable");
                assert_eq!(lease(&r).as_deref(), Some("RH"), "{label}");
                assert_eq!(r.read_at(0, 200_000).await.expect("read"), data, "{label}");
                r.close().await.expect("close");

                // Directory and metadata opens take no lease (they stay as they were).
                let dir = format!("dir-{name}");
                share.create_dir(&dir).await.expect("mkdir");
                assert!(
                    share.read_dir(&dir).await.expect("ls").is_empty(),
                    "{label}"
                );
                assert_eq!(share.metadata(&name).await.expect("stat").len, 100_000);
                assert_eq!(settled(&client).await, (0, 0), "{label}");
            }
            client.logoff().await.expect("logoff");
        }
    });
}

#[test]
fn two_opens_of_one_file_share_the_lease_and_do_not_wait_on_each_other() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        let client = connect(&server, &creds, Dialect::Smb311).await;
        let share = client.share("plain").await.expect("tree connect");
        let first = share.open("Shared.bin", &writer()).await.expect("first");
        assert_eq!(lease(&first).as_deref(), Some("RWH"));

        // Another spelling of the same name: Samba treats names case-insensitively, and so
        // does the key table.
        let started = Instant::now();
        let second = share.open("shared.BIN", &writer()).await.expect("second");
        let took = started.elapsed();
        eprintln!("second open of the same file by the same session: {took:?}");
        // Waiting on a lease break would take Samba's break timeout (tens of seconds).
        assert!(took < Duration::from_secs(5), "second open took {took:?}");
        assert_eq!(client.leased_files(), 1, "one key for both opens");
        assert_eq!(client.durable_opens(), 2);
        assert!(first.is_durable() && second.is_durable());
        // Had the second open used another key, Samba would have broken the first lease's
        // Write caching; with the same key nothing was broken.
        assert_eq!(lease(&first).as_deref(), Some("RWH"));
        assert_eq!(lease(&second).as_deref(), Some("RWH"));

        second
            .write_at(0, Bytes::from_static(b"written by the second open"))
            .await
            .expect("write");
        assert_eq!(
            first.read_at(0, 100).await.expect("read"),
            Bytes::from_static(b"written by the second open")
        );
        first.close().await.expect("close first");
        assert_eq!(
            client.leased_files(),
            1,
            "the second open still uses the key"
        );
        second.close().await.expect("close second");
        assert_eq!((client.leased_files(), client.durable_opens()), (0, 0));

        // Many files open at once: one key each; all gone once they are closed or dropped.
        let mut files = Vec::new();
        for i in 0..100 {
            files.push(
                share
                    .open(&format!("many-{i}"), &writer())
                    .await
                    .expect("open"),
            );
        }
        assert_eq!(client.leased_files(), 100);
        assert_eq!(client.durable_opens(), 100);
        let dropped = files.split_off(50);
        for f in files {
            f.close().await.expect("close");
        }
        assert_eq!(client.leased_files(), 50);
        drop(dropped); // closed in the background
        assert_eq!(settled(&client).await, (0, 0));
    });
}

#[test]
fn another_sessions_open_breaks_our_lease_and_we_acknowledge_at_once() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        let holder = connect(&server, &creds, Dialect::Smb311).await;
        let share_a = holder.share("plain").await.expect("tree connect");
        let mine = share_a
            .open("contended.bin", &writer())
            .await
            .expect("open");
        assert_eq!(lease(&mine).as_deref(), Some("RWH"));
        let data = Bytes::from(pattern(3, 64 * 1024));
        mine.write_at(0, data.clone()).await.expect("write");

        // A second, independent session (its own ClientGuid, so its own lease).
        let other = connect(&server, &creds, Dialect::Smb311).await;
        let share_b = other.share("plain").await.expect("tree connect");
        let started = Instant::now();
        let theirs = share_b
            .open("contended.bin", &writer())
            .await
            .expect("open");
        let took = started.elapsed();
        eprintln!(
            "open by another session: {took:?}; our lease is now {:?}; {} channels",
            lease(&mine),
            holder.channels().len()
        );
        // Samba holds the open until the lease break is acknowledged, or for 35 s.
        assert!(
            took < Duration::from_secs(5),
            "the other open took {took:?}"
        );
        assert!(theirs.is_durable());
        let ours = lease(&mine).expect("still leased");
        assert!(
            !ours.contains('W'),
            "our Write caching was not broken: {ours}"
        );

        // Both handles work: they write, we read their bytes and ours back, and write again.
        theirs
            .write_at(64 * 1024, Bytes::from_static(b"tail"))
            .await
            .expect("their write");
        let back = mine.read_at(0, 128 * 1024).await.expect("our read");
        assert_eq!(back.len(), 64 * 1024 + 4);
        assert_eq!(back.slice(..64 * 1024), data);
        assert_eq!(&back[64 * 1024..], b"tail");
        mine.write_at(0, Bytes::from_static(b"ours again"))
            .await
            .expect("our write after the break");
        assert_eq!(
            theirs.read_at(0, 10).await.expect("their read"),
            Bytes::from_static(b"ours again")
        );

        theirs.close().await.expect("close theirs");
        mine.close().await.expect("close mine");
        assert_eq!((holder.leased_files(), holder.durable_opens()), (0, 0));
        assert_eq!((other.leased_files(), other.durable_opens()), (0, 0));
        let _ = share_a.disconnect().await;
        let _ = share_b.disconnect().await;
    });
}

#[test]
fn renaming_and_deleting_a_file_we_hold_open_is_not_held_up_by_our_own_lease() {
    let tb = start();
    tb.run_as_client(|server, creds| async move {
        let client = connect(&server, &creds, Dialect::Smb302).await;
        let share = client.share("encrypted").await.expect("tree connect");
        let f = share.open("before.txt", &writer()).await.expect("create");
        f.write_at(0, Bytes::from_static(b"payload"))
            .await
            .expect("write");
        assert_eq!(lease(&f).as_deref(), Some("RWH"));

        // The rename's own open (no lease) makes Samba break our Handle caching first and
        // wait for the acknowledgment.
        let started = Instant::now();
        share
            .rename("before.txt", "after.txt", smb3_client::IfExists::Fail)
            .await
            .expect("rename");
        let took = started.elapsed();
        eprintln!(
            "rename of an open file: {took:?}; lease now {:?}",
            lease(&f)
        );
        assert!(took < Duration::from_secs(5), "rename took {took:?}");
        assert!(!share.exists("before.txt").await.expect("exists"));
        assert_eq!(
            f.read_at(0, 100).await.expect("read"),
            Bytes::from_static(b"payload")
        );

        let started = Instant::now();
        share.remove_file("after.txt").await.expect("delete");
        assert!(started.elapsed() < Duration::from_secs(5));
        f.close().await.expect("close");
        assert!(!share.exists("after.txt").await.expect("exists"));
        assert_eq!((client.leased_files(), client.durable_opens()), (0, 0));
    });
}
