//! Giving up on requests, against the testbed's real smbd: an open that waits on another
//! client's lease break is cancelled when its future is dropped, and opens, listings and
//! directory creations dropped or timed out half-way leave no handle open at the server.
//! `smbstatus -j` (through [`Testbed::open_files`]) is the judge of what stays open.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smb3_client::{
    ChannelInfo, Client, ClientConfig, Dialect, OpenOptions, Share, UserCredentials,
};
use smb3_tests::{client_block_on, OpenAtServer, Testbed, TestbedConfig};

fn start() -> Arc<Testbed> {
    Arc::new(Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}")))
}

/// A 3.1.1 session with one channel, so its counters can be compared exactly.
async fn single_channel(server: &str, creds: &UserCredentials) -> (Client, Share) {
    let mut config = ClientConfig::default();
    config.min_dialect = Dialect::Smb311;
    config.max_dialect = Dialect::Smb311;
    config.multichannel = false;
    let client = Client::connect(server, creds, config)
        .await
        .expect("connect");
    let share = client.share("plain").await.expect("tree connect");
    (client, share)
}

fn channel(client: &Client) -> ChannelInfo {
    let mut all = client.channels();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

fn writer() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true)
}

/// Poll `cond` every 20 ms until it holds; panics after `limit`. Returns how long it took.
async fn until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < limit, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// Poll `request` once, which queues its CREATE to the socket, then drop it: the caller
/// gives up right after sending, before any reply can have come.
async fn send_then_give_up<F>(request: F)
where
    F: std::future::Future,
    F::Output: std::fmt::Debug,
{
    let mut request = std::pin::pin!(request);
    tokio::select! {
        biased;
        r = &mut request => panic!("answered without a round trip: {r:?}"),
        _ = std::future::ready(()) => {}
    }
}

/// The handles open at the server whose name starts with `prefix`.
fn open_at_server(tb: &Testbed, prefix: &str) -> Vec<OpenAtServer> {
    tb.open_files()
        .expect("smbstatus")
        .into_iter()
        .filter(|o| o.name.starts_with(prefix))
        .collect()
}

/// Wait (up to 5 s) until the server holds no handle whose name starts with `prefix`;
/// background CLOSEs take a round trip or two.
async fn no_handles_left(tb: &Testbed, prefix: &str) {
    let started = Instant::now();
    loop {
        let left = open_at_server(tb, prefix);
        if left.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "handles left open at the server: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Another client holding `path` open with a Read-Write-Handle lease, frozen: its session
/// runs on a current-thread runtime that is not polled until [`LeaseHolder::release`], so a
/// lease break reaches its socket but is never acknowledged, just as with a hung client.
/// Samba then holds any conflicting open for its 35 s break timeout.
struct LeaseHolder {
    release: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LeaseHolder {
    fn start(tb: &Arc<Testbed>, path: &'static str) -> LeaseHolder {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let tb = tb.clone();
        let thread = std::thread::spawn(move || {
            let _netns = tb.enter_client_netns().expect("enter the client namespace");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let server = format!("{}:445", tb.server_addr(1));
            let creds = tb.credentials();
            let (client, file) = rt.block_on(async move {
                let (client, share) = single_channel(&server, &creds).await;
                let file = share.open(path, &writer()).await.expect("holder's open");
                (client, file)
            });
            let lease = file.lease().map(|l| l.to_string());
            ready_tx.send(lease).expect("report the lease");
            // Frozen: nothing on `rt` runs until the test lets go (or panics, which drops
            // the sender and lets go too).
            let _ = release_rx.recv();
            rt.block_on(async move {
                let _ = file.close().await;
                let _ = client.logoff().await;
            });
        });
        let lease = ready_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the holder opened the file");
        assert_eq!(lease.as_deref(), Some("RWH"), "the holder's lease");
        LeaseHolder {
            release: Some(release_tx),
            thread: Some(thread),
        }
    }

    /// Let the holder run again: it acknowledges the break, closes the file and logs off.
    fn release(self) {
        drop(self);
    }
}

impl Drop for LeaseHolder {
    // Also on a failed assertion, so the holder's thread never outlives the test.
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn an_open_waiting_on_another_clients_lease_break_is_cancelled_when_dropped() {
    let tb = start();
    let holder = LeaseHolder::start(&tb, "contended.bin");
    let held = open_at_server(&tb, "contended.bin");
    assert_eq!(held.len(), 1, "{held:?}");
    eprintln!("held at the server: {held:?}");

    let rt = tb.client_runtime();
    let server = format!("{}:445", tb.server_addr(1));
    let creds = tb.credentials();
    let tb_in = tb.clone();
    let (client, share) = client_block_on(&rt, async move {
        let tb = tb_in;
        let (client, share) = single_channel(&server, &creds).await;
        let before = channel(&client);

        // Our open breaks the holder's Write caching; Samba defers it until the break is
        // acknowledged, which the frozen holder never does, and answers STATUS_PENDING.
        let opener = tokio::spawn({
            let share = share.clone();
            async move { share.open("contended.bin", &writer()).await }
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !opener.is_finished(),
            "the open should be waiting on the lease break: {:?}",
            opener.await
        );
        assert_eq!(channel(&client).outstanding, 1);

        opener.abort();
        assert!(opener.await.expect_err("aborted").is_cancelled());
        let took = until(
            "the cancelled open is answered",
            Duration::from_secs(20),
            || channel(&client).outstanding == 0,
        )
        .await;
        let after = channel(&client);
        eprintln!(
            "pending open cancelled: answered {took:?} after the drop (Samba's break timeout is \
             35 s); CANCELs sent {}; credits {} -> {}",
            after.cancels_sent, before.credits, after.credits
        );
        assert_eq!(after.cancels_sent, 1, "one CANCEL");
        // The server ended the open on our CANCEL, not on its break timeout.
        assert!(took < Duration::from_secs(5), "answered after {took:?}");
        assert_eq!(after.credits, before.credits, "credits back");
        assert!(after.failure.is_none(), "{:?}", after.failure);
        assert_eq!(
            client.abandoned_handles_closed(),
            0,
            "STATUS_CANCELLED: nothing was opened"
        );
        let opens = open_at_server(&tb, "contended.bin");
        assert_eq!(opens.len(), 1, "only the holder's open: {opens:?}");

        // The channel carries on.
        share.create_dir("after-cancel").await.expect("mkdir");
        assert!(share.metadata("after-cancel").await.expect("stat").is_dir());
        (client, share)
    });
    holder.release();

    // Once the holder runs again (it acknowledges the break and closes), the same open
    // goes through at once.
    client_block_on(&rt, async move {
        let started = Instant::now();
        let file = share.open("contended.bin", &writer()).await.expect("open");
        eprintln!("open after the holder let go: {:?}", started.elapsed());
        file.close().await.expect("close");
        client.logoff().await.expect("logoff");
    });
}

#[test]
fn opens_dropped_after_sending_are_closed_not_left_open() {
    let tb = start();
    let tb_in = tb.clone();
    tb.run_as_client(move |server, creds| async move {
        let tb = tb_in;
        let (client, share) = single_channel(&server, &creds).await;
        share.create_dir("dropped").await.expect("mkdir");
        const OPENS: u64 = 20;
        for i in 0..OPENS {
            send_then_give_up(share.open(&format!("dropped/{i}.bin"), &writer())).await;
        }
        send_then_give_up(share.create_dir("dropped/sub")).await;

        // The server carried every one of them out; the client closes each handle it got.
        let started = Instant::now();
        until("every reply is in", Duration::from_secs(10), || {
            channel(&client).outstanding == 0
        })
        .await;
        no_handles_left(&tb, "dropped").await;
        eprintln!(
            "{} abandoned handles closed in {:?}",
            client.abandoned_handles_closed(),
            started.elapsed()
        );
        // The opens' handles, each closed by the client once its reply came; the directory's
        // CREATE travelled with its CLOSE in one compound, so the server closed that one.
        assert_eq!(client.abandoned_handles_closed(), OPENS);
        for i in 0..OPENS {
            assert!(
                share
                    .exists(&format!("dropped/{i}.bin"))
                    .await
                    .expect("stat"),
                "open {i} was carried out"
            );
        }
        assert!(share.metadata("dropped/sub").await.expect("stat").is_dir());
        assert_eq!(client.leased_files(), 0);
        assert_eq!(client.durable_opens(), 0);

        // Nothing was held: another session opens them all at once, without lease breaks.
        let (other, other_share) = single_channel(&server, &creds).await;
        let started = Instant::now();
        for i in 0..OPENS {
            let f = other_share
                .open(&format!("dropped/{i}.bin"), &writer())
                .await
                .expect("open");
            f.close().await.expect("close");
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "reopening took {:?}",
            started.elapsed()
        );
        other.logoff().await.expect("logoff");
        client.logoff().await.expect("logoff");
    });
}

#[test]
fn listings_and_deletes_timed_out_half_way_close_their_handles() {
    let tb = start();
    // Enough entries for several QUERY_DIRECTORY pages, made directly in the share.
    let dir = tb.share_path("plain").join("big");
    std::fs::create_dir(&dir).expect("mkdir");
    const ENTRIES: usize = 3000;
    for i in 0..ENTRIES {
        std::fs::write(
            dir.join(format!("entry-{i:05}-with-a-longer-name.txt")),
            b"x",
        )
        .expect("create an entry");
    }
    let tb_in = tb.clone();
    tb.run_as_client(move |server, creds| async move {
        let tb = tb_in;
        let (client, share) = single_channel(&server, &creds).await;
        // Give up after 1, 2, 3 ... ms until a listing completes: each attempt that timed
        // out had its CREATE sent (the first poll sends it) and leaves a handle to close.
        let mut timed_out = 0u64;
        let mut listed = None;
        for ms in 1..=200u64 {
            match tokio::time::timeout(Duration::from_millis(ms), share.read_dir("big")).await {
                Ok(entries) => {
                    listed = Some((ms, entries.expect("read_dir").len()));
                    break;
                }
                Err(_) => timed_out += 1,
            }
        }
        let (ms, count) = listed.expect("a listing within 200 ms");
        eprintln!("listing completed at {ms} ms after {timed_out} timed-out attempts");
        assert_eq!(count, ENTRIES);
        assert!(timed_out > 0, "no listing was cut short");

        // A delete given up on right after sending: only its CREATE went out, so the
        // directory stays, and the handle that CREATE opened is closed.
        share.create_dir("kept").await.expect("mkdir");
        send_then_give_up(share.remove_dir("kept")).await;
        let abandoned = timed_out + 1;

        until("every reply is in", Duration::from_secs(10), || {
            channel(&client).outstanding == 0
        })
        .await;
        no_handles_left(&tb, "big").await;
        no_handles_left(&tb, "kept").await;
        // The last attempt that timed out may have listed everything and sent its CLOSE just
        // before the timeout: its handle was closed as usual, not abandoned. Every other one
        // was given up with its handle open, and is counted.
        let closed = client.abandoned_handles_closed();
        assert!(
            closed == abandoned || closed + 1 == abandoned,
            "{closed} abandoned handles closed, {abandoned} attempts given up"
        );
        assert!(share.metadata("kept").await.expect("stat").is_dir());
        let all = tb.open_files().expect("smbstatus");
        assert!(all.is_empty(), "handles left open at the server: {all:?}");
        eprintln!("{abandoned} abandoned handles closed");
        client.logoff().await.expect("logoff");
    });
}
