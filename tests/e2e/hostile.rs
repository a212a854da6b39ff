//! A hostile server: the testbed's real smbd behind a man in the middle (`smb3_tests::mitm`)
//! that breaks one rule per test, or a listener that never behaves. Each test states what the
//! client must do instead of hanging, panicking or trusting the bytes: a typed error, or the
//! documented recovery (a connection that broke the protocol is dropped — nothing more from it
//! is trusted — and the session is set up again on a new one, in-flight requests replayed),
//! within a stated time. docs/RELIABILITY.md has the table of cases and outcomes.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use smb3_client::{
    Client, ClientConfig, Error, OpenOptions, ProtocolError, Share, UserCredentials,
};
use smb3_tests::mitm::{command, Action, BoxedRule, Direction, Mitm, SigningKeys, Smb2};
use smb3_tests::{client_block_on, Testbed, TestbedConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Every wait of the client under test is bounded by this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

fn testbed() -> Testbed {
    Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"))
}

/// One channel (the server's other addresses would bypass the proxy), short timeouts. The
/// loss watchdog is slowed down: on a busy machine it would otherwise take a slow reply for a
/// silent channel, hand the request back and replay it, so a spoiled reply would arrive for a
/// request nobody waits for any more (these tests are not about silent channels).
fn config() -> ClientConfig {
    let mut c = ClientConfig::default();
    c.multichannel = false;
    c.request_timeout = REQUEST_TIMEOUT;
    c.connect_timeout = Duration::from_secs(2);
    c.failover_wait = Duration::from_secs(5);
    c.silent_loss_after = Duration::from_secs(60);
    c.probe_timeout = Duration::from_secs(10);
    c
}

/// [`config`] for a guest session: allowed, and (unsafe, which is the point of these tests)
/// unsigned, so the proxy can change replies without breaking a signature.
fn guest_config() -> ClientConfig {
    let mut c = config();
    c.allow_guest = true;
    c.require_signing = false;
    c
}

/// An unknown user: Samba maps it to guest, whose session is unsigned, so the proxy can
/// change replies without breaking a signature.
fn guest() -> UserCredentials {
    UserCredentials {
        user: "no-such-user".into(),
        domain: String::new(),
        password: "whatever".into(),
    }
}

fn upstream(tb: &Testbed) -> SocketAddr {
    SocketAddr::from((tb.server_addr(1), 445))
}

/// Run `test` in the client namespace with a proxy in front of smbd using `rules`.
fn through_proxy<M, R, F, Fut>(rules: R, test: F)
where
    M: smb3_tests::mitm::Mischief + 'static,
    R: FnMut(u64) -> Option<M> + Send + 'static,
    F: FnOnce(Arc<Testbed>, Arc<Mitm>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let tb = Arc::new(testbed());
    let rt = tb.client_runtime();
    let up = upstream(&tb);
    let mitm = Arc::new(client_block_on(&rt, Mitm::start(up, rules)));
    client_block_on(&rt, test(tb.clone(), mitm));
}

async fn guest_share(mitm: &Mitm) -> (Client, Share) {
    let client = Client::connect(&mitm.addr().to_string(), &guest(), guest_config())
        .await
        .expect("connect through the proxy");
    let share = client.share("public").await.expect("public share");
    (client, share)
}

async fn write_file(share: &Share, name: &str, data: &'static [u8]) {
    smb3_tests::write_file(share, name, Bytes::from_static(data)).await;
}

/// Replies after the session is set up (the mischief starts once the client can work).
fn after_setup(frame: &Smb2) -> bool {
    !matches!(
        frame.command(),
        command::NEGOTIATE | command::SESSION_SETUP | command::TREE_CONNECT
    )
}

fn forward(frame: Bytes) -> Vec<Action> {
    vec![Action::Frame(frame)]
}

/// STATUS_PENDING: an interim reply (MS-SMB2 3.3.4.2), which a loaded smbd sends before a
/// slow READ's final one. Interim replies are unsigned by rule and carry no data, so the
/// tests spoil the final reply.
const PENDING: u32 = 0x0000_0103;

/// A final reply (not an interim one) to `cmd`, on its way to the client.
fn final_reply(dir: Direction, m: &Smb2, cmd: u16) -> bool {
    dir == Direction::ToClient && m.command() == cmd && m.status() != PENDING
}

// ---------------------------------------------------------------- servers that never behave

/// Connect to a listener that reads the NEGOTIATE, writes `answer` (raw bytes, its own
/// framing) and then holds the connection open without another word. Returns the client's
/// error and how long it took.
fn connect_to_a_server_that_answers(answer: &'static [u8]) -> (Error, Duration) {
    let tb = testbed();
    let rt = tb.client_runtime();
    client_block_on(&rt, async move {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(answer).await;
                    tokio::time::sleep(Duration::from_secs(60)).await;
                });
            }
        });
        let started = Instant::now();
        let e = Client::connect(&addr.to_string(), &guest(), guest_config())
            .await
            .expect_err("connect must fail");
        (e, started.elapsed())
    })
}

#[test]
fn a_server_that_accepts_and_never_speaks_times_out() {
    let (e, took) = connect_to_a_server_that_answers(b"");
    eprintln!("silent server: {e:?} after {took:?}");
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(took < REQUEST_TIMEOUT + Duration::from_secs(2), "{took:?}");
}

#[test]
fn a_16_mib_length_prefix_followed_by_nothing_times_out() {
    let (e, took) =
        connect_to_a_server_that_answers(&[0x00, 0xFF, 0xFF, 0xFF, 0xFE, b'S', b'M', b'B']);
    eprintln!("slowloris: {e:?} after {took:?}");
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(took < REQUEST_TIMEOUT + Duration::from_secs(2), "{took:?}");
}

#[test]
fn a_4_gib_length_prefix_is_refused_at_once() {
    let (e, took) = connect_to_a_server_that_answers(&[0xFF, 0xFF, 0xFF, 0xFF]);
    eprintln!("4 GiB prefix: {e:?} after {took:?}");
    assert!(
        matches!(e, Error::ConnectionLost { .. } | Error::Protocol(_)),
        "{e:?}"
    );
    // Well under the request timeout: the prefix itself is refused, nothing waited for.
    assert!(took < REQUEST_TIMEOUT - Duration::from_secs(2), "{took:?}");
}

// ---------------------------------------------------------------- credits

/// Apply `change` to every reply once the session is set up.
fn every_reply_after_setup(change: fn(&mut Smb2)) -> impl FnMut(u64) -> Option<BoxedRule> {
    move |_| {
        Some(Box::new(move |dir, frame: Bytes| {
            let Some(mut m) = Smb2::of(&frame) else {
                return forward(frame);
            };
            if dir == Direction::ToClient && after_setup(&m) {
                change(&mut m);
                return forward(m.frame());
            }
            forward(frame)
        }) as BoxedRule)
    }
}

#[test]
fn a_server_that_grants_no_credits_ends_in_a_typed_error() {
    through_proxy(
        every_reply_after_setup(|m| {
            m.set_credits(0);
        }),
        |_, mitm| async move {
            let (client, share) = guest_share(&mitm).await;
            let started = Instant::now();
            let mut last = None;
            // Each reply grants nothing: the credits from the set-up run out.
            for i in 0..2000 {
                if let Err(e) = share.metadata(".").await {
                    last = Some((i, e));
                    break;
                }
            }
            let (i, e) = last.expect("an error once the credits ran out");
            eprintln!(
                "no credits: {e:?} after {i} requests, {:?}; {:#?}",
                started.elapsed(),
                client.channels()
            );
            // Each metadata is a compound of three: it finds fewer than three left.
            assert!(
                matches!(
                    e,
                    Error::Protocol(ProtocolError::TooFewCredits { needed: 3, held }) if held < 3
                ),
                "{e:?}"
            );
            assert!(started.elapsed() < Duration::from_secs(30));
        },
    );
}

#[test]
fn a_server_that_grants_65535_credits_a_reply_is_held_to_a_sane_window() {
    through_proxy(
        every_reply_after_setup(|m| {
            m.set_credits(65535);
        }),
        |_, mitm| async move {
            let (client, share) = guest_share(&mitm).await;
            for i in 0..50 {
                write_file(&share, &format!("many-credits-{i}"), b"x").await;
            }
            let credits = client.channels()[0].credits;
            eprintln!("65535 per reply: the client holds {credits} credits");
            assert!(credits <= 65535, "{credits}");
        },
    );
}

#[test]
fn a_credit_charge_that_differs_from_the_request_is_ignored() {
    through_proxy(
        every_reply_after_setup(|m| {
            m.set_credit_charge(7);
        }),
        |_, mitm| async move {
            let (client, share) = guest_share(&mitm).await;
            write_file(&share, "charge.txt", b"charged").await;
            let f = share
                .open("charge.txt", &OpenOptions::new().read(true))
                .await
                .expect("open");
            assert_eq!(&f.read_at(0, 100).await.expect("read")[..], b"charged");
            assert_eq!(client.multichannel().failover.channel_losses, 0);
        },
    );
}

// ---------------------------------------------------------------- framing and offsets

/// Break the first reply of `which` with `spoil`; everything else passes. Returns the rules.
fn spoil_first(which: u16, spoil: fn(&mut Smb2)) -> impl FnMut(u64) -> Option<BoxedRule> {
    let done = Arc::new(AtomicBool::new(false));
    move |_| {
        let done = done.clone();
        Some(Box::new(move |dir, frame: Bytes| {
            let Some(mut m) = Smb2::of(&frame) else {
                return forward(frame);
            };
            if final_reply(dir, &m, which) && !done.swap(true, Ordering::SeqCst) {
                spoil(&mut m);
                return forward(m.frame());
            }
            forward(frame)
        })
            as Box<dyn FnMut(Direction, Bytes) -> Vec<Action> + Send>)
    }
}

/// `name` holding `data`, opened for reading.
async fn file_to_read(share: &Share, name: &str, data: &'static [u8]) -> smb3_client::File {
    write_file(share, name, data).await;
    share
        .open(name, &OpenOptions::new().read(true))
        .await
        .expect("open")
}

/// A reply that breaks the framing rules loses its connection (nothing more from it is
/// trusted); the session comes back on a new one and the READ is replayed there, so the
/// caller gets its bytes.
fn framing_error_is_survived(spoil: fn(&mut Smb2)) {
    through_proxy(spoil_first(command::READ, spoil), |_, mitm| async move {
        let (client, share) = guest_share(&mitm).await;
        let f = file_to_read(&share, "framing.txt", b"12345").await;
        let started = Instant::now();
        let got = f.read_at(0, 5).await.expect("read");
        let fo = client.multichannel().failover;
        eprintln!("recovered in {:?}; {fo:#?}", started.elapsed());
        assert_eq!(&got[..], b"12345");
        assert_eq!(fo.channel_losses, 1, "{fo:#?}");
        assert_eq!(mitm.connections(), 2);
        assert!(started.elapsed() < Duration::from_secs(10));
    });
}

#[test]
fn next_command_past_the_end_of_the_frame_drops_the_connection_and_is_survived() {
    framing_error_is_survived(|m| {
        let len = m.0.len() as u32;
        m.set_next_command((len + 64).next_multiple_of(8));
    });
}

#[test]
fn next_command_pointing_into_its_own_header_drops_the_connection_and_is_survived() {
    framing_error_is_survived(|m| {
        m.set_next_command(8);
    });
}

#[test]
fn a_reply_for_a_message_id_never_sent_drops_the_connection_and_is_survived() {
    framing_error_is_survived(|m| {
        let id = m.message_id();
        m.set_message_id(id + 1_000_000);
    });
}

/// STATUS_NO_MEMORY, what Samba answers TREE_CONNECT with for a moment after it starts.
const NO_MEMORY: u32 = 0xC000_0017;

/// A server that has just come back may answer as one not ready yet (Samba says NO_MEMORY to
/// TREE_CONNECT for a moment after a restart). The re-establishment of the session is then
/// tried again on a new connection, and the open comes back: taken at its word, that answer
/// would have lost every open of the share for a moment's delay.
#[test]
fn a_server_not_ready_when_the_session_comes_back_is_asked_again_and_no_open_is_lost() {
    let rules = |n: u64| -> Option<BoxedRule> {
        match n {
            // The first connection breaks at its first READ reply (a MessageId never sent).
            0 => Some(Box::new(spoil_once(command::READ, |m| {
                let id = m.message_id();
                m.set_message_id(id + 1_000_000);
            }))),
            // The second, where the session is set up again, is refused its TREE_CONNECT.
            1 => Some(Box::new(spoil_once(command::TREE_CONNECT, |m| {
                m.set_status(NO_MEMORY);
            }))),
            _ => None,
        }
    };
    through_proxy(rules, |_, mitm| async move {
        let (client, share) = guest_share(&mitm).await;
        let f = file_to_read(&share, "not-ready.txt", b"still here").await;
        let got = f
            .read_at(0, 10)
            .await
            .expect("read after the session came back");
        let fo = client.multichannel().failover;
        eprintln!("{fo:#?}");
        assert_eq!(&got[..], b"still here");
        assert_eq!(
            mitm.connections(),
            3,
            "one attempt refused, the next one good"
        );
        assert_eq!(fo.sessions_reestablished, 1, "{fo:#?}");
        assert_eq!(fo.opens_lost, 0, "{fo:#?}");
        assert_eq!(fo.opens_reclaimed + fo.opens_reopened, 1, "{fo:#?}");
    });
}

/// A rule that applies `spoil` to the first final reply to `which` on its connection.
fn spoil_once(
    which: u16,
    spoil: fn(&mut Smb2),
) -> impl FnMut(Direction, Bytes) -> Vec<Action> + Send {
    let mut done = false;
    move |dir, frame: Bytes| {
        let Some(mut m) = Smb2::of(&frame) else {
            return forward(frame);
        };
        if !done && final_reply(dir, &m, which) {
            done = true;
            spoil(&mut m);
            return forward(m.frame());
        }
        forward(frame)
    }
}

#[test]
fn a_read_whose_data_offset_points_outside_the_frame_is_a_decode_error() {
    through_proxy(
        spoil_first(command::READ, |m| {
            // READ response: DataOffset is the byte after StructureSize (64 + 2).
            m.0[66] = 0xF0;
        }),
        |_, mitm| async move {
            let (client, share) = guest_share(&mitm).await;
            let f = file_to_read(&share, "offset.txt", b"abcdef").await;
            let e = f.read_at(0, 6).await.expect_err("a malformed READ reply");
            eprintln!("bad DataOffset: {e:?}");
            assert!(
                matches!(e, Error::Protocol(ProtocolError::Decode { .. })),
                "{e:?}"
            );
            // The connection itself is fine: the next read works on it.
            assert_eq!(&f.read_at(0, 6).await.expect("read")[..], b"abcdef");
            assert_eq!(client.multichannel().failover.channel_losses, 0);
        },
    );
}

#[test]
fn a_reply_sent_twice_drops_the_connection_and_is_survived() {
    let done = Arc::new(AtomicBool::new(false));
    through_proxy(
        move |_| {
            let done = done.clone();
            Some(move |dir, frame: Bytes| {
                let twice = Smb2::of(&frame).is_some_and(|m| final_reply(dir, &m, command::READ));
                if twice && !done.swap(true, Ordering::SeqCst) {
                    return vec![Action::Frame(frame.clone()), Action::Frame(frame)];
                }
                forward(frame)
            })
        },
        |_, mitm| async move {
            let (client, share) = guest_share(&mitm).await;
            let f = file_to_read(&share, "twice.txt", b"12").await;
            assert_eq!(&f.read_at(0, 2).await.expect("read")[..], b"12");
            // The duplicate drops the connection when it arrives; the next read goes to the
            // session set up again.
            let started = Instant::now();
            assert_eq!(&f.read_at(0, 2).await.expect("read again")[..], b"12");
            let fo = client.multichannel().failover;
            eprintln!("reply twice: {fo:#?}");
            assert_eq!(fo.channel_losses, 1, "{fo:#?}");
            assert_eq!(mitm.connections(), 2);
            assert!(started.elapsed() < Duration::from_secs(10));
        },
    );
}

// ---------------------------------------------------------------- signatures and sealing

/// The test user's signed session through a proxy that applies `spoil` to the first READ
/// reply: that READ fails with the error `expected` accepts (it is not replayed: the server
/// may have acted on it and said something else), the connection is dropped, the session
/// comes back and the next READ works.
fn signed_reply_refused(spoil: fn(&mut Smb2), expected: fn(&ProtocolError) -> bool) {
    through_proxy(spoil_first(command::READ, spoil), |tb, mitm| async move {
        let client = Client::connect(&mitm.addr().to_string(), &tb.credentials(), config())
            .await
            .expect("connect");
        assert!(client.signing().is_some());
        let share = client.share("plain").await.expect("share");
        let f = file_to_read(&share, "signed.txt", b"signed").await;
        let e = f
            .read_at(0, 6)
            .await
            .expect_err("a reply that does not verify");
        eprintln!("spoiled signature: {e:?}");
        assert!(matches!(&e, Error::Protocol(p) if expected(p)), "{e:?}");
        assert_eq!(&f.read_at(0, 6).await.expect("read after")[..], b"signed");
        assert_eq!(mitm.connections(), 2);
    });
}

#[test]
fn a_reply_with_a_wrong_signature_is_refused() {
    signed_reply_refused(
        |m| {
            m.spoil_signature();
        },
        |e| matches!(e, ProtocolError::BadSignature { .. }),
    );
}

#[test]
fn a_signed_session_answered_unsigned_is_refused() {
    signed_reply_refused(
        |m| {
            m.unsign();
        },
        |e| matches!(e, ProtocolError::UnsignedReply { .. }),
    );
}

#[test]
fn an_encrypted_reply_with_a_wrong_nonce_or_session_drops_the_connection_and_is_survived() {
    // TRANSFORM_HEADER (MS-SMB2 2.2.41): Nonce at 20, SessionId at 44.
    for (what, at) in [("nonce", 20usize), ("session id", 44)] {
        let sealed_replies = Arc::new(AtomicU32::new(0));
        let count = sealed_replies.clone();
        through_proxy(
            move |_| {
                let count = count.clone();
                Some(move |dir, frame: Bytes| {
                    // Sealed replies: the CREATE of the open, then the READ, spoiled.
                    let sealed = frame.len() > 52 && frame[..4] == [0xFD, b'S', b'M', b'B'];
                    if dir == Direction::ToClient
                        && sealed
                        && count.fetch_add(1, Ordering::SeqCst) == 1
                    {
                        let mut f = frame.to_vec();
                        f[at] ^= 0x55;
                        return forward(Bytes::from(f));
                    }
                    forward(frame)
                })
            },
            move |tb, mitm| async move {
                let client = Client::connect(&mitm.addr().to_string(), &tb.credentials(), config())
                    .await
                    .expect("connect");
                let share = client.share("encrypted").await.expect("encrypted share");
                let f = share
                    .open(
                        "sealed.txt",
                        &OpenOptions::new().read(true).write(true).create(true),
                    )
                    .await
                    .expect("create");
                let started = Instant::now();
                let got = f.read_at(0, 10).await;
                let fo = client.multichannel().failover;
                eprintln!(
                    "{what} spoiled: {:?} in {:?}; {fo:#?}",
                    got,
                    started.elapsed()
                );
                assert!(got.expect("read").is_empty());
                assert_eq!(fo.channel_losses, 1, "{fo:#?}");
                assert_eq!(mitm.connections(), 2);
                assert!(started.elapsed() < Duration::from_secs(10));
            },
        );
        assert!(sealed_replies.load(Ordering::SeqCst) >= 2, "{what}");
    }
}

// ---------------------------------------------------------------- unsolicited and unanswered

/// A lease break notification (MS-SMB2 2.2.23.2) for `key`: MessageId 0xFFFFFFFFFFFFFFFF,
/// command OPLOCK_BREAK, a 44-byte body asking to go from RWH to nothing, ack required.
fn lease_break_for(key: [u8; 16]) -> Bytes {
    let mut f = Vec::with_capacity(64 + 44);
    f.extend_from_slice(&[0xFE, b'S', b'M', b'B']);
    f.extend_from_slice(&64u16.to_le_bytes()); // StructureSize
    f.extend_from_slice(&0u16.to_le_bytes()); // CreditCharge
    f.extend_from_slice(&0u32.to_le_bytes()); // Status
    f.extend_from_slice(&0x12u16.to_le_bytes()); // OPLOCK_BREAK
    f.extend_from_slice(&0u16.to_le_bytes()); // CreditResponse
    f.extend_from_slice(&1u32.to_le_bytes()); // SMB2_FLAGS_SERVER_TO_REDIR
    f.extend_from_slice(&0u32.to_le_bytes()); // NextCommand
    f.extend_from_slice(&u64::MAX.to_le_bytes()); // MessageId
    f.extend_from_slice(&[0u8; 4 + 4 + 8 + 16]); // Reserved, TreeId, SessionId, Signature
    f.extend_from_slice(&44u16.to_le_bytes()); // StructureSize
    f.extend_from_slice(&1u16.to_le_bytes()); // NewEpoch
    f.extend_from_slice(&1u32.to_le_bytes()); // SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED
    f.extend_from_slice(&key);
    f.extend_from_slice(&7u32.to_le_bytes()); // CurrentLeaseState: RWH
    f.extend_from_slice(&0u32.to_le_bytes()); // NewLeaseState: none
    f.extend_from_slice(&[0u8; 12]); // BreakReason, AccessMaskHint, ShareMaskHint
    Bytes::from(f)
}

#[test]
fn a_lease_break_for_an_unknown_lease_key_harms_nothing() {
    let injected = Arc::new(AtomicBool::new(false));
    let flag = injected.clone();
    through_proxy(
        move |_| {
            let flag = flag.clone();
            Some(move |dir, frame: Bytes| {
                let read = Smb2::of(&frame).is_some_and(|m| final_reply(dir, &m, command::READ));
                if read && !flag.swap(true, Ordering::SeqCst) {
                    return vec![
                        Action::Frame(frame),
                        Action::Frame(lease_break_for([0xAB; 16])),
                    ];
                }
                forward(frame)
            })
        },
        |_, mitm| async move {
            let (client, share) = guest_share(&mitm).await;
            let f = file_to_read(&share, "leased.txt", b"lease").await;
            for _ in 0..20 {
                assert_eq!(&f.read_at(0, 5).await.expect("read")[..], b"lease");
            }
            f.close().await.expect("close");
            write_file(&share, "after-break.txt", b"ok").await;
            let fo = client.multichannel().failover;
            assert_eq!(fo.channel_losses, 0, "{fo:#?}");
            assert_eq!(mitm.connections(), 1);
        },
    );
    assert!(injected.load(Ordering::SeqCst));
}

#[test]
fn a_cancel_the_server_never_answers_leaves_the_session_working() {
    const CANCELLED: u32 = 0xC000_0120;
    through_proxy(
        |_| {
            Some(|dir, frame: Bytes| {
                // Swallow the final reply a CANCEL earns (STATUS_CANCELLED).
                if dir == Direction::ToClient
                    && Smb2::of(&frame).is_some_and(|m| m.status() == CANCELLED)
                {
                    return vec![];
                }
                forward(frame)
            })
        },
        |_, mitm| async move {
            let (client, share) = guest_share(&mitm).await;
            share.create_dir("watched").await.expect("mkdir");
            let mut watch = share
                .watch(
                    "watched",
                    smb3_client::WatchFilter::NAMES,
                    smb3_client::WatchScope::Directory,
                )
                .await
                .expect("watch");
            // Wait until the server parked the request (interim reply), then give up on it.
            let waited = tokio::time::timeout(Duration::from_millis(300), watch.next()).await;
            assert!(waited.is_err(), "no change was expected");
            drop(watch);
            let started = Instant::now();
            while client.channels()[0].cancels_sent == 0
                && started.elapsed() < Duration::from_secs(5)
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(client.channels()[0].cancels_sent, 1);
            // The session goes on, nothing is taken for lost.
            let f = file_to_read(&share, "after-cancel.txt", b"fine").await;
            for _ in 0..20 {
                assert_eq!(&f.read_at(0, 4).await.expect("read")[..], b"fine");
            }
            let info = &client.channels()[0];
            eprintln!(
                "unanswered CANCEL: outstanding {} credits {}",
                info.outstanding, info.credits
            );
            let fo = client.multichannel().failover;
            assert_eq!(fo.channel_losses, 0, "{fo:#?}");
        },
    );
}

// ---------------------------------------------------------------- signed replies changed and signed again

/// FSCTL_QUERY_NETWORK_INTERFACE_INFO (MS-SMB2 2.2.31).
const QUERY_INTERFACES: u32 = 0x0014_01FC;
/// What the client allows an interface list (its MaxOutputResponse).
const INTERFACE_LIST_LIMIT: usize = 64 * 1024;
/// NETWORK_INTERFACE_INFO (MS-SMB2 2.2.32.5) is 152 bytes.
const INTERFACE_ENTRY: usize = 152;

/// The test user's signed session with its key log feeding `keys`, multichannel on (at most
/// four channels), the interface poll left at its default so that only the first query and
/// the test's refreshes ask.
fn signed_config(keys: &SigningKeys) -> ClientConfig {
    let mut c = config();
    c.allow_guest = false;
    c.multichannel = true;
    c.max_channels = 4;
    c.key_log = Some(keys.key_log());
    c
}

/// The test user's session through `mitm` with `config`.
async fn signed_client(mitm: &Mitm, tb: &Testbed, config: ClientConfig) -> Client {
    Client::connect(&mitm.addr().to_string(), &tb.credentials(), config)
        .await
        .expect("connect")
}

/// One NETWORK_INTERFACE_INFO entry; `family` 2 (IPv4) or 0x17 (IPv6) with `addr`, anything
/// else as an unknown family with no address.
fn interface_entry(last: bool, if_index: u32, rss: bool, speed: u64, addr: IpAddr) -> Vec<u8> {
    let mut e = Vec::with_capacity(INTERFACE_ENTRY);
    let next = if last { 0 } else { INTERFACE_ENTRY as u32 };
    e.extend_from_slice(&next.to_le_bytes());
    e.extend_from_slice(&if_index.to_le_bytes());
    e.extend_from_slice(&u32::from(rss).to_le_bytes()); // Capability: RSS_CAPABLE
    e.extend_from_slice(&0u32.to_le_bytes()); // Reserved
    e.extend_from_slice(&speed.to_le_bytes());
    match addr {
        IpAddr::V4(a) => {
            e.extend_from_slice(&2u16.to_le_bytes());
            e.extend_from_slice(&0u16.to_le_bytes()); // Port
            e.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            e.extend_from_slice(&0x17u16.to_le_bytes());
            e.extend_from_slice(&0u16.to_le_bytes()); // Port
            e.extend_from_slice(&0u32.to_le_bytes()); // FlowInfo
            e.extend_from_slice(&a.octets());
        }
    }
    e.resize(INTERFACE_ENTRY, 0);
    e
}

/// An entry of an address family the spec does not know (0x99), zeros for the address.
fn unknown_family_entry(last: bool) -> Vec<u8> {
    let mut e = interface_entry(last, 9, false, 1, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    e[24..26].copy_from_slice(&0x99u16.to_le_bytes());
    e
}

/// `m`, a successful IOCTL reply to FSCTL_QUERY_NETWORK_INTERFACE_INFO, with its output
/// replaced by `list` (MS-SMB2 2.2.32: a 48-byte body, the output right behind it).
fn with_interface_list(m: &Smb2, list: &[u8]) -> Smb2 {
    let mut out = BytesMut::from(&m.0[..64 + 24]); // header, StructureSize..FileId
    let output_offset = 64u32 + 48;
    out.extend_from_slice(&output_offset.to_le_bytes()); // InputOffset
    out.extend_from_slice(&0u32.to_le_bytes()); // InputCount
    out.extend_from_slice(&output_offset.to_le_bytes()); // OutputOffset
    out.extend_from_slice(&(list.len() as u32).to_le_bytes()); // OutputCount
    out.extend_from_slice(&[0u8; 8]); // Flags, Reserved2
    out.extend_from_slice(list);
    let mut changed = Smb2(out);
    changed.set_next_command(0);
    changed
}

/// A proxy rule that answers every interface query with `list` (signed again), while
/// `spoiling` holds; counts the replies it replaced in `replaced`.
fn interface_list_rule(
    list: Arc<Vec<u8>>,
    keys: SigningKeys,
    spoiling: Arc<AtomicBool>,
    replaced: Arc<AtomicU32>,
) -> impl FnMut(u64) -> Option<BoxedRule> {
    move |_| {
        let (list, keys, spoiling, replaced) = (
            list.clone(),
            keys.clone(),
            spoiling.clone(),
            replaced.clone(),
        );
        Some(Box::new(move |dir, frame: Bytes| {
            let Some(m) = Smb2::of(&frame) else {
                return forward(frame);
            };
            let ctl_code = || u32::from_le_bytes(m.0[68..72].try_into().unwrap());
            if final_reply(dir, &m, command::IOCTL)
                && m.status() == 0
                && m.0.len() >= 64 + 48
                && ctl_code() == QUERY_INTERFACES
                && spoiling.load(Ordering::SeqCst)
            {
                let mut changed = with_interface_list(&m, &list);
                assert!(
                    keys.sign(&mut changed),
                    "the session's key is in the key log"
                );
                replaced.fetch_add(1, Ordering::SeqCst);
                return forward(changed.frame());
            }
            forward(frame)
        }) as BoxedRule)
    }
}

/// Poll `status` until `done` says so, for at most `within`.
async fn eventually(
    client: &Client,
    within: Duration,
    done: impl Fn(&smb3_client::MultichannelStatus) -> bool,
) -> smb3_client::MultichannelStatus {
    let started = Instant::now();
    loop {
        let st = client.multichannel();
        if done(&st) || started.elapsed() > within {
            return st;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn an_interface_list_longer_than_asked_for_is_refused_and_the_session_goes_on() {
    // 10,000 entries: 1.52 MB of output where the client allowed 64 KiB.
    let keys = SigningKeys::default();
    let spoiling = Arc::new(AtomicBool::new(true));
    let replaced = Arc::new(AtomicU32::new(0));
    let tb = Arc::new(testbed());
    let server = IpAddr::V4(tb.server_addr(1));
    let list: Vec<u8> = (0..10_000)
        .flat_map(|i| interface_entry(i == 9_999, i, true, 10_000_000_000, server))
        .collect();
    assert!(list.len() > INTERFACE_LIST_LIMIT);
    let rules = interface_list_rule(
        Arc::new(list),
        keys.clone(),
        spoiling.clone(),
        replaced.clone(),
    );
    let rt = tb.client_runtime();
    let mitm = client_block_on(&rt, Mitm::start(upstream(&tb), rules));
    client_block_on(&rt, async move {
        let started = Instant::now();
        let client = signed_client(&mitm, &tb, signed_config(&keys)).await;
        let st = eventually(&client, Duration::from_secs(10), |s| {
            s.query_error.is_some()
        })
        .await;
        eprintln!(
            "10,000 interfaces: {:?} after {:?}",
            st.query_error,
            started.elapsed()
        );
        let error = st.query_error.clone().expect("the query failed");
        assert!(
            error.contains("1520000 bytes of output") && error.contains("allowed 65536"),
            "{error}"
        );
        assert!(st.server_interfaces.is_empty(), "{st:#?}");
        assert_eq!(client.channels().len(), 1);
        // The session and its channel are unharmed.
        let share = client.share("plain").await.expect("share");
        write_file(&share, "after-long-list.txt", b"still here").await;
        let f = file_to_read(&share, "after-long-list.txt", b"still here").await;
        assert_eq!(&f.read_at(0, 10).await.expect("read")[..], b"still here");
        assert_eq!(client.multichannel().failover.channel_losses, 0);
        // A server that answers within the limit again is used at the next query.
        spoiling.store(false, Ordering::SeqCst);
        client.refresh_interfaces();
        let st = eventually(&client, Duration::from_secs(10), |s| {
            s.query_error.is_none() && !s.server_interfaces.is_empty()
        })
        .await;
        assert!(st.query_error.is_none(), "{st:#?}");
        assert!(
            st.server_interfaces.iter().any(|n| n.address == server),
            "{st:#?}"
        );
        assert_eq!(mitm.connections(), 1);
    });
    assert!(replaced.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_bogus_interface_list_plans_only_the_real_distinct_addresses() {
    // 400 entries (60,800 bytes, within the limit): the server's real address 100 times with
    // other interface numbers, RSS flags and speeds from 0 to u64::MAX; 100 each of 0.0.0.0,
    // :: and an unknown address family.
    let keys = SigningKeys::default();
    let tb = Arc::new(testbed());
    let server = IpAddr::V4(tb.server_addr(1));
    let speeds = [0, 1, 1_000_000_000, u64::MAX];
    let mut list = Vec::new();
    for i in 0..100u32 {
        list.extend(interface_entry(
            false,
            i,
            i % 2 == 0,
            speeds[i as usize % 4],
            server,
        ));
        list.extend(interface_entry(
            false,
            1000 + i,
            true,
            u64::MAX,
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        ));
        list.extend(interface_entry(
            false,
            2000 + i,
            true,
            1,
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        ));
        list.extend(unknown_family_entry(i == 99));
    }
    assert_eq!(list.len(), 400 * INTERFACE_ENTRY);
    let replaced = Arc::new(AtomicU32::new(0));
    let rules = interface_list_rule(
        Arc::new(list),
        keys.clone(),
        Arc::new(AtomicBool::new(true)),
        replaced.clone(),
    );
    let rt = tb.client_runtime();
    let mitm = client_block_on(&rt, Mitm::start(upstream(&tb), rules));
    client_block_on(&rt, async move {
        let client = signed_client(&mitm, &tb, signed_config(&keys)).await;
        let st = eventually(&client, Duration::from_secs(15), |s| s.settled).await;
        eprintln!(
            "bogus list: {} server interfaces, {} planned, {} current, {} notes",
            st.server_interfaces.len(),
            st.planned(),
            st.current(),
            st.notes.len()
        );
        assert!(st.settled && st.query_error.is_none(), "{st:#?}");
        // The list is shown as the server gave it (unknown families dropped by the decoder);
        // the plan merges the duplicates into one pair and leaves the unspecified addresses
        // out, each explained once.
        assert_eq!(st.server_interfaces.len(), 300, "{st:#?}");
        let planned: Vec<&smb3_client::PairStatus> =
            st.pairs.iter().filter(|p| p.planned > 0).collect();
        assert_eq!(planned.len(), 1, "{st:#?}");
        assert_eq!(planned[0].server, Some(server));
        assert!(st.planned() >= 1 && st.planned() <= 4, "{st:#?}");
        assert_eq!(
            st.notes[..3],
            [
                "server 0.0.0.0 skipped: unspecified address (100 times)".to_string(),
                "server :: skipped: unspecified address (100 times)".to_string(),
                format!("server {server} listed twice: merged (99 times)"),
            ],
            "{st:#?}"
        );
        // The bindings go to the real address on the proxy's port, where nothing listens:
        // they fail and are retried later; the channel through the proxy carries on.
        assert!(client.channels().len() <= 4 + 1, "{:#?}", client.channels());
        // I/O goes on over whatever channels there are.
        let share = client.share("plain").await.expect("share");
        let data = smb3_tests::pattern(3, 4 << 20);
        smb3_tests::write_file(&share, "after-bogus-list.bin", Bytes::from(data.clone())).await;
        let f = share
            .open("after-bogus-list.bin", &OpenOptions::new().read(true))
            .await
            .expect("open");
        let mut back = Vec::new();
        while back.len() < data.len() {
            let chunk = f.read_at(back.len() as u64, 1 << 20).await.expect("read");
            assert!(!chunk.is_empty());
            back.extend_from_slice(&chunk);
        }
        assert!(back == data, "the bytes read back differ");
        assert_eq!(client.multichannel().failover.channel_losses, 0);
        drop(mitm);
    });
    assert!(replaced.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_reclaim_answered_with_another_open_is_refused_and_the_file_opened_again() {
    // The connection is cut under an upload; the reclaim of its durable handle on the next
    // connection is answered with another persistent FileId (signed again, so it verifies).
    // The client must not write through it: it gives it back, opens the file again by path,
    // checks it is the same file, and replays the writes.
    let keys = SigningKeys::default();
    let cut_done = Arc::new(AtomicBool::new(false));
    let reclaim_changed = Arc::new(AtomicBool::new(false));
    let rules = {
        let (keys, cut_done, changed) = (keys.clone(), cut_done.clone(), reclaim_changed.clone());
        move |n: u64| {
            let (keys, cut_done, changed) = (keys.clone(), cut_done.clone(), changed.clone());
            let mut writes = 0u32;
            Some(Box::new(move |dir, frame: Bytes| {
                let Some(mut m) = Smb2::of(&frame) else {
                    return forward(frame);
                };
                if n == 0 && dir == Direction::ToServer && m.command() == command::WRITE {
                    writes += 1;
                    if writes == 3 && !cut_done.swap(true, Ordering::SeqCst) {
                        return vec![Action::Close];
                    }
                }
                // On the next connection the first successful CREATE is the reclaim.
                if n == 1
                    && final_reply(dir, &m, command::CREATE)
                    && m.status() == 0
                    && !changed.swap(true, Ordering::SeqCst)
                {
                    // CREATE response body: FileId at 64 (MS-SMB2 2.2.14), Persistent first.
                    m.0[64 + 64] ^= 0x5A;
                    assert!(keys.sign(&mut m), "the new session's key is in the key log");
                    return forward(m.frame());
                }
                forward(frame)
            }) as BoxedRule)
        }
    };
    let tb = Arc::new(testbed());
    let rt = tb.client_runtime();
    let mitm = client_block_on(&rt, Mitm::start(upstream(&tb), rules));
    let on_disk = tb.share_path("plain").join("reclaim-other-id.bin");
    let data = smb3_tests::pattern(11, 8 << 20);
    let expected = data.clone();
    let (fo, took) = client_block_on(&rt, async move {
        let mut config = signed_config(&keys);
        config.multichannel = false;
        let client = signed_client(&mitm, &tb, config).await;
        let share = client.share("plain").await.expect("share");
        let started = Instant::now();
        let f = share
            .open(
                "reclaim-other-id.bin",
                &OpenOptions::new().write(true).create(true).truncate(true),
            )
            .await
            .expect("create");
        for (i, chunk) in data.chunks(1 << 20).enumerate() {
            f.write_at((i << 20) as u64, Bytes::copy_from_slice(chunk))
                .await
                .unwrap_or_else(|e| panic!("write {i}: {e}"));
        }
        f.close().await.expect("close");
        let took = started.elapsed();
        assert_eq!(mitm.connections(), 2);
        (client.multichannel().failover, took)
    });
    eprintln!("reclaim answered with another FileId: {took:?}; {fo:#?}");
    assert!(reclaim_changed.load(Ordering::SeqCst));
    assert_eq!(fo.opens_reclaimed, 0, "{fo:#?}");
    assert_eq!(fo.opens_reopened, 1, "{fo:#?}");
    assert_eq!(fo.opens_lost, 0, "{fo:#?}");
    let got = std::fs::read(&on_disk).expect("the file on the server's disk");
    assert!(got == expected, "the file on the server's disk differs");
}

// ---------------------------------------------------------------- server-side copy limits

/// FSCTL_SRV_COPYCHUNK_WRITE (MS-SMB2 2.2.31).
const FSCTL_SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;

/// The CtlCode of an IOCTL request or response (the same place in both bodies).
fn ctl_code(m: &Smb2) -> u32 {
    u32::from_le_bytes(m.0[68..72].try_into().unwrap())
}

/// An IOCTL response refusing a copy with STATUS_INVALID_PARAMETER and the server's limits
/// in its SRV_COPYCHUNK_RESPONSE (MS-SMB2 3.3.5.15.6): `chunks` per request, `chunk` bytes
/// each, `total` bytes per request. Built on the header of the server's own reply.
fn copy_limits_reply(reply: &Smb2, chunks: u32, chunk: u32, total: u32) -> Bytes {
    let mut out = BytesMut::from(&reply.0[..64]);
    out[8..12].copy_from_slice(&0xC000_000Du32.to_le_bytes()); // STATUS_INVALID_PARAMETER
    out[20..24].copy_from_slice(&[0; 4]); // NextCommand
    out.extend_from_slice(&49u16.to_le_bytes()); // StructureSize
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&reply.0[68..88]); // CtlCode and FileId, as the server sent them
    out.extend_from_slice(&0u32.to_le_bytes()); // InputOffset
    out.extend_from_slice(&0u32.to_le_bytes()); // InputCount
    out.extend_from_slice(&112u32.to_le_bytes()); // OutputOffset: header + fixed body
    out.extend_from_slice(&12u32.to_le_bytes()); // OutputCount
    out.extend_from_slice(&[0; 8]); // Flags, Reserved2
    for v in [chunks, chunk, total] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.freeze()
}

/// A server whose copy limits are smaller than MS-SMB2's defaults refuses the first copy
/// request with them; the copy goes on in requests within those limits and every byte
/// arrives. (Samba has the defaults, so the proxy plays the smaller server.)
#[test]
fn a_server_with_smaller_copy_limits_gets_requests_within_them() {
    const LEN: usize = 3 << 20;
    // (chunks in the request, its largest chunk, its total) for every copy request seen.
    let seen: Arc<std::sync::Mutex<Vec<(u32, u32, u64)>>> = Arc::default();
    let record = seen.clone();
    let refused = Arc::new(AtomicBool::new(false));
    let rules = move |n: u64| -> Option<BoxedRule> {
        if n != 0 {
            return None;
        }
        let (record, refused) = (record.clone(), refused.clone());
        Some(Box::new(move |dir, frame: Bytes| {
            let Some(m) = Smb2::of(&frame) else {
                return forward(frame);
            };
            if m.command() != command::IOCTL
                || m.0.len() < 120
                || ctl_code(&m) != FSCTL_SRV_COPYCHUNK_WRITE
            {
                return forward(frame);
            }
            if dir == Direction::ToServer {
                let input = u32::from_le_bytes(m.0[88..92].try_into().unwrap()) as usize;
                let count = u32::from_le_bytes(m.0[input + 24..input + 28].try_into().unwrap());
                let (mut largest, mut total) = (0u32, 0u64);
                for i in 0..count as usize {
                    let at = input + 32 + 24 * i + 16;
                    let len = u32::from_le_bytes(m.0[at..at + 4].try_into().unwrap());
                    largest = largest.max(len);
                    total += u64::from(len);
                }
                record.lock().unwrap().push((count, largest, total));
                return forward(frame);
            }
            if final_reply(dir, &m, command::IOCTL) && !refused.swap(true, Ordering::SeqCst) {
                return forward(copy_limits_reply(&m, 4, 64 << 10, 256 << 10));
            }
            forward(frame)
        }))
    };
    through_proxy(rules, move |tb, mitm| async move {
        let (client, share) = guest_share(&mitm).await;
        let data = smb3_tests::pattern(5, LEN);
        smb3_tests::write_file(&share, "limits-src.bin", Bytes::from(data.clone())).await;
        let n = share
            .copy_file_on_server("limits-src.bin", &share, "limits-dst.bin")
            .await
            .expect("the copy within the smaller limits");
        assert_eq!(n, LEN as u64);
        let requests = seen.lock().unwrap().clone();
        eprintln!("copy requests (chunks, largest, total): {requests:?}");
        assert_eq!(
            requests[0],
            (3, 1 << 20, LEN as u64),
            "the first at the defaults"
        );
        let after = &requests[1..];
        assert_eq!(after.len(), LEN / (256 << 10), "{after:?}");
        assert!(
            after
                .iter()
                .all(|&(c, l, t)| c <= 4 && l <= 64 << 10 && t <= 256 << 10),
            "{after:?}"
        );
        let on_disk = std::fs::read(tb.share_path("public").join("limits-dst.bin")).unwrap();
        assert!(on_disk == data, "the copy differs from its source");
        client.logoff().await.unwrap();
    });
}
