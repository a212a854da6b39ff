//! Secure by default, against an attacker on the path: the testbed's real smbd behind a relay
//! (`smb3_tests::mitm`) that plays either attacker of the threat model:
//!
//! - a man in the middle *without* the session's keys, who rewrites what is not protected
//!   (NEGOTIATE, the last SESSION_SETUP reply, a reply it strips of its signature), and
//! - a hostile server, or a man in the middle that somehow holds the keys, who signs (or seals)
//!   again what it changes with the keys of the session (`SigningKeys`, fed by the client's
//!   key log).
//!
//! Each test states the attack and the defence, with its MS-SMB2 section, and runs the same
//! operation through an untampered relay as a control. The client runs with the library's
//! defaults (signing required, 3.0 to 3.1.1) unless a test says otherwise, on one channel (the
//! server's other addresses would bypass the relay) and with short timeouts, so that every
//! wait is bounded. docs/RELIABILITY.md, "Security", has the table of cases.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use smb3_client::{
    AuthDetail, AuthFailure, Cipher, Client, ClientConfig, Command, Dialect, Error, OpenOptions,
    ProtocolError, Share, SigningAlgorithm, UserCredentials, WalkOptions,
};
use smb3_tests::mitm::{
    command, renaming_entries, wire, Action, BoxedRule, Direction, Mitm, RenameCounts, SigningKeys,
    Smb2,
};
use smb3_tests::{client_block_on, Signing, Testbed, TestbedConfig};

/// Every wait of the client under test is bounded by this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

fn testbed(signing: Signing) -> Testbed {
    Testbed::start(TestbedConfig {
        signing,
        ..TestbedConfig::unshaped(1)
    })
    .unwrap_or_else(|e| panic!("testbed: {e}"))
}

/// The library's defaults (signing required, 3.0 to 3.1.1), on one channel, with short
/// timeouts; the loss watchdog slowed down so that a slow reply on a busy machine is not taken
/// for a silent channel (see tests/e2e/hostile.rs).
fn config() -> ClientConfig {
    let mut c = ClientConfig::default();
    assert!(c.require_signing, "signing is required by default");
    assert_eq!(
        c.min_dialect,
        Dialect::Smb300,
        "3.0 is the lowest by default"
    );
    c.multichannel = false;
    c.request_timeout = REQUEST_TIMEOUT;
    c.connect_timeout = Duration::from_secs(2);
    c.failover_wait = Duration::from_secs(5);
    c.silent_loss_after = Duration::from_secs(60);
    c.probe_timeout = Duration::from_secs(10);
    c
}

/// [`config`] with only `dialect` offered.
fn config_at(dialect: Dialect) -> ClientConfig {
    let mut c = config();
    c.min_dialect = dialect;
    c.max_dialect = dialect;
    c
}

/// [`config`] with the session's keys going to `keys`, for a relay that plays the server.
fn keyed(mut c: ClientConfig, keys: &SigningKeys) -> ClientConfig {
    c.key_log = Some(keys.key_log());
    c
}

fn upstream(tb: &Testbed) -> SocketAddr {
    SocketAddr::from((tb.server_addr(1), 445))
}

fn forward(frame: Bytes) -> Vec<Action> {
    vec![Action::Frame(frame)]
}

/// Rules that forward every frame unchanged: the control.
fn untouched(_: u64) -> Option<BoxedRule> {
    None
}

/// A final reply (not an interim STATUS_PENDING one) to `cmd`, on its way to the client.
fn final_reply(dir: Direction, m: &Smb2, cmd: u16) -> bool {
    dir == Direction::ToClient && m.command() == cmd && m.status() != wire::STATUS_PENDING
}

/// The same rule on every connection: `change` sees each plain SMB2 frame and says whether
/// it changed it; changed frames are counted in `count`.
fn rewriting(
    count: Arc<AtomicU32>,
    change: impl Fn(Direction, &mut Smb2) -> bool + Send + Sync + 'static,
) -> impl FnMut(u64) -> Option<BoxedRule> {
    let change = Arc::new(change);
    move |_| {
        let (change, count) = (change.clone(), count.clone());
        Some(Box::new(move |dir, frame: Bytes| {
            let Some(mut m) = Smb2::of(&frame) else {
                return forward(frame);
            };
            if change(dir, &mut m) {
                count.fetch_add(1, Ordering::SeqCst);
                return forward(m.frame());
            }
            forward(frame)
        }) as BoxedRule)
    }
}

/// Like [`rewriting`], but only the first frame `change` accepts, over every connection.
fn rewriting_once(
    count: Arc<AtomicU32>,
    change: impl Fn(Direction, &mut Smb2) -> bool + Send + Sync + 'static,
) -> impl FnMut(u64) -> Option<BoxedRule> {
    let done = Arc::new(AtomicBool::new(false));
    rewriting(count, move |dir, m| {
        if done.load(Ordering::SeqCst) {
            return false;
        }
        let mut copy = Smb2(m.0.clone());
        if change(dir, &mut copy) && !done.swap(true, Ordering::SeqCst) {
            *m = copy;
            return true;
        }
        false
    })
}

async fn connect(mitm: &Mitm, creds: &UserCredentials, config: ClientConfig) -> Client {
    Client::connect(&mitm.addr().to_string(), creds, config)
        .await
        .expect("connect through the relay")
}

async fn connect_err(mitm: &Mitm, creds: &UserCredentials, config: ClientConfig) -> Error {
    let started = Instant::now();
    let e = Client::connect(&mitm.addr().to_string(), creds, config)
        .await
        .map(drop)
        .expect_err("the connect must fail");
    eprintln!("connect failed after {:?}: {e:?}\n  {e}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(15), "bounded");
    e
}

/// `name` holding `data` on `share`, opened for reading.
async fn file_to_read(share: &Share, name: &str, data: &'static [u8]) -> smb3_client::File {
    smb3_tests::write_file(share, name, Bytes::from_static(data)).await;
    share
        .open(name, &OpenOptions::new().read(true))
        .await
        .expect("open")
}

fn is_unsigned(e: &Error, cmd: Command) -> bool {
    matches!(e, Error::Protocol(ProtocolError::UnsignedReply { command, .. }) if *command == cmd)
}

// ---------------------------------------------------------------- NEGOTIATE downgrades

/// Downgrade to 2.1 (NEGOTIATE dialects all 0x0210, SIGNING_REQUIRED cleared) → connect fails with `DialectNotOffered`, no session (MS-SMB2 3.2.5.2).
// Downgrade to 2.1 (MS-SMB2 3.2.5.2): the relay rewrites every dialect of the client's
// NEGOTIATE to 0x0210 and clears SIGNING_REQUIRED in the server's answer; the client refuses
// the dialect it never offered (`DialectNotOffered`, chosen 0x0210) and sets up no session.
#[test]
fn a_negotiate_rewritten_down_to_2_1_is_refused_as_a_dialect_not_offered() {
    let tb = testbed(Signing::Mandatory);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let rewritten = Arc::new(AtomicU32::new(0));
    let session_setups = Arc::new(AtomicU32::new(0));
    let (count, setups) = (rewritten.clone(), session_setups.clone());
    client_block_on(&rt, async move {
        let plain = Mitm::start(up, untouched).await;
        let client = connect(&plain, &creds, config()).await;
        assert_eq!(client.dialect(), Dialect::Smb311, "control");
        client.logoff().await.expect("logoff");

        let mitm = Mitm::start(
            up,
            rewriting(count, move |dir, m| match (dir, m.command()) {
                (Direction::ToServer, command::NEGOTIATE) => {
                    m.map_request_dialects(|_| 0x0210);
                    true
                }
                (Direction::ToClient, command::NEGOTIATE) => {
                    let mode = m.negotiate_security_mode();
                    m.set_negotiate_security_mode(mode & !wire::SIGNING_REQUIRED);
                    true
                }
                (Direction::ToServer, command::SESSION_SETUP) => {
                    setups.fetch_add(1, Ordering::SeqCst);
                    false
                }
                _ => false,
            }),
        )
        .await;
        let e = connect_err(&mitm, &creds, config()).await;
        assert!(
            matches!(
                e,
                Error::Protocol(ProtocolError::DialectNotOffered {
                    chosen: 0x0210,
                    lowest: Dialect::Smb300,
                    highest: Dialect::Smb311,
                })
            ),
            "{e:?}"
        );
        assert_eq!(mitm.connections(), 1);
    });
    assert_eq!(rewritten.load(Ordering::SeqCst), 2, "request and answer");
    assert_eq!(
        session_setups.load(Ordering::SeqCst),
        0,
        "no SESSION_SETUP was sent"
    );
}

/// Downgrade 3.1.1 → 3.0.2 (0x0311 replaced in the NEGOTIATE) → VALIDATE_NEGOTIATE_INFO exposes it, no share ever works (MS-SMB2 3.2.5.14.12, 3.3.5.15.12).
// Downgrade from 3.1.1 to 3.0.2 (MS-SMB2 3.2.5.2, 3.2.5.14.12, 3.3.5.15.12): the relay
// replaces 0x0311 in the client's NEGOTIATE by 0x0302, where 3.1.1's preauth integrity does
// not apply. The session comes up at 3.0.2, but the FSCTL_VALIDATE_NEGOTIATE_INFO after the
// tree connect tells the server what the client really offered, so no share is ever usable.
// What Samba 4.17 does (measured here): it never answers the validation; it closes the TCP
// connection. The client sets the session up again on a new connection (downgraded again by
// the relay), whose validation ends the same way, until `failover_wait` (5 s) runs out:
// `share()` fails with `ConnectionLost { command: IOCTL }`, and the next `share()` at once
// with `ConnectionLost`. No `NegotiateValidation` mismatch is ever seen by the client, since
// the server never sends its side.
#[test]
fn a_negotiate_rewritten_from_3_1_1_to_3_0_2_never_gives_a_working_share() {
    let tb = testbed(Signing::Mandatory);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let rewritten = Arc::new(AtomicU32::new(0));
    let validations = Arc::new(AtomicU32::new(0));
    let answers = Arc::new(AtomicU32::new(0));
    let (count, asked, answered) = (rewritten.clone(), validations.clone(), answers.clone());
    client_block_on(&rt, async move {
        let plain = Mitm::start(up, untouched).await;
        let client = connect(&plain, &creds, config()).await;
        assert_eq!(client.dialect(), Dialect::Smb311, "control");
        client.share("plain").await.expect("control share");
        client.logoff().await.expect("logoff");

        let mitm = Mitm::start(
            up,
            rewriting(count, move |dir, m| {
                if m.command() == command::IOCTL && is_validate_negotiate(m) {
                    match dir {
                        Direction::ToServer => asked.fetch_add(1, Ordering::SeqCst),
                        Direction::ToClient => answered.fetch_add(1, Ordering::SeqCst),
                    };
                }
                if dir == Direction::ToServer && m.command() == command::NEGOTIATE {
                    m.map_request_dialects(|d| if d == 0x0311 { 0x0302 } else { d });
                    return true;
                }
                false
            }),
        )
        .await;
        let client = connect(&mitm, &creds, config()).await;
        assert_eq!(
            client.dialect(),
            Dialect::Smb302,
            "the downgrade itself got through"
        );
        for attempt in 0..2 {
            let started = Instant::now();
            let e = client
                .share("plain")
                .await
                .map(drop)
                .expect_err("no share on a downgraded connection");
            eprintln!(
                "share() after the downgrade, attempt {attempt}: {e:?}\n  {e}\n  after {:?}, {} connections",
                started.elapsed(),
                mitm.connections()
            );
            assert!(started.elapsed() < Duration::from_secs(10), "bounded");
            if attempt == 0 {
                assert!(
                    matches!(
                        e,
                        Error::ConnectionLost {
                            command: Command::IOCTL,
                            ..
                        }
                    ),
                    "{e:?}"
                );
            } else {
                assert!(
                    matches!(
                        e,
                        Error::ConnectionLost { .. }
                            | Error::Protocol(ProtocolError::NegotiateValidation)
                    ),
                    "{e:?}"
                );
            }
        }
        drop(client);
    });
    let (asked, answered) = (
        validations.load(Ordering::SeqCst),
        answers.load(Ordering::SeqCst),
    );
    eprintln!(
        "{} NEGOTIATEs downgraded, {asked} validations sent, {answered} answered",
        rewritten.load(Ordering::SeqCst)
    );
    assert!(rewritten.load(Ordering::SeqCst) >= 1);
    assert!(asked >= 1);
    assert_eq!(
        answered, 0,
        "Samba closes the connection instead of answering"
    );
}

/// Whether `m` is an FSCTL_VALIDATE_NEGOTIATE_INFO request or reply (MS-SMB2 2.2.31, 2.2.32:
/// CtlCode at body offset 4).
fn is_validate_negotiate(m: &Smb2) -> bool {
    m.0.len() >= 64 + 8
        && u32::from_le_bytes(m.0[68..72].try_into().unwrap())
            == wire::FSCTL_VALIDATE_NEGOTIATE_INFO
}

// ---------------------------------------------------------------- signatures stripped on 3.0.2

/// On 3.0.2 with the default configuration, `spoil` is applied to the first final READ reply:
/// that READ fails with `UnsignedReply` and the connection is dropped; the session comes
/// back on a new connection, where the same READ, untampered, returns the file (the control).
fn stripped_read_on_3_0_2(spoil: fn(&mut Smb2)) {
    let tb = testbed(Signing::Mandatory);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let spoiled = Arc::new(AtomicU32::new(0));
    let count = spoiled.clone();
    client_block_on(&rt, async move {
        let mitm = Mitm::start(
            up,
            rewriting_once(count, move |dir, m| {
                if final_reply(dir, m, command::READ) {
                    spoil(m);
                    return true;
                }
                false
            }),
        )
        .await;
        let client = connect(&mitm, &creds, config_at(Dialect::Smb302)).await;
        assert_eq!(client.dialect(), Dialect::Smb302);
        assert!(client.signing().is_some());
        let share = client.share("plain").await.expect("share (validated)");
        let f = file_to_read(&share, "stripped.txt", b"original").await;
        let started = Instant::now();
        let e = f.read_at(0, 8).await.expect_err("an unsigned READ reply");
        eprintln!("stripped READ reply: {e:?} after {:?}", started.elapsed());
        assert!(is_unsigned(&e, Command::READ), "{e:?}");
        assert!(started.elapsed() < REQUEST_TIMEOUT, "refused on arrival");
        // The control: the same READ through the relay, now untampered.
        assert_eq!(&f.read_at(0, 8).await.expect("read after")[..], b"original");
        assert_eq!(
            mitm.connections(),
            2,
            "the stripped reply's connection was dropped"
        );
    });
    assert_eq!(spoiled.load(Ordering::SeqCst), 1);
}

/// 3.0.2, READ reply stripped of its signature by a MITM without keys → `UnsignedReply` (READ), connection dropped (MS-SMB2 3.2.5.1.3).
// Signature stripping (MS-SMB2 3.2.5.1.3): on 3.0.2 a relay without keys clears the
// SIGNED flag and the signature of a READ reply; signing is required by default, so the
// READ fails with `UnsignedReply` and the connection is dropped.
#[test]
fn on_3_0_2_a_read_reply_stripped_of_its_signature_is_refused() {
    stripped_read_on_3_0_2(|m| {
        m.unsign();
    });
}

/// 3.0.2, READ reply's data changed and its signature stripped → `UnsignedReply` (READ), the changed byte never reaches the caller (MS-SMB2 3.2.5.1.3).
// Tampering hidden by stripping (MS-SMB2 3.2.5.1.3): the relay changes a byte of a READ
// reply's data and strips the signature that would have shown it; the READ fails with
// `UnsignedReply`, the changed byte never reaches the caller.
#[test]
fn on_3_0_2_a_changed_read_reply_stripped_of_its_signature_is_refused() {
    stripped_read_on_3_0_2(|m| {
        let data_offset = usize::from(m.0[66]);
        m.0[data_offset] ^= 0x20;
        m.unsign();
    });
}

/// 3.0.2, VALIDATE_NEGOTIATE_INFO reply stripped of its signature → `share()` fails with `UnsignedReply` (IOCTL) (MS-SMB2 3.2.5.14.12, 3.2.5.1.3).
// Signature stripping of FSCTL_VALIDATE_NEGOTIATE_INFO (MS-SMB2 3.2.5.14.12): on 3.0.2 the
// relay strips the signature of the validation's reply; with signing required (the default)
// the reply is refused as `UnsignedReply` (IOCTL) and `share()` fails; the next `share()`,
// validated on a new connection through the same relay untampered, works (the control).
#[test]
fn on_3_0_2_a_validate_negotiate_reply_stripped_of_its_signature_fails_the_share() {
    let tb = testbed(Signing::Mandatory);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let stripped = Arc::new(AtomicU32::new(0));
    let count = stripped.clone();
    client_block_on(&rt, async move {
        let mitm = Mitm::start(up, rewriting_once(count, strip_validate_negotiate)).await;
        let client = connect(&mitm, &creds, config_at(Dialect::Smb302)).await;
        let e = client
            .share("plain")
            .await
            .map(drop)
            .expect_err("an unsigned validation reply");
        eprintln!("stripped VALIDATE_NEGOTIATE_INFO reply: {e:?}");
        assert!(is_unsigned(&e, Command::IOCTL), "{e:?}");
        let share = client.share("plain").await.expect("control: share again");
        smb3_tests::write_file(&share, "validated.txt", Bytes::from_static(b"ok")).await;
    });
    assert_eq!(stripped.load(Ordering::SeqCst), 1);
}

/// The rule of the validation tests: strip the signature of a successful
/// FSCTL_VALIDATE_NEGOTIATE_INFO reply (MS-SMB2 2.2.32: CtlCode at body offset 4).
fn strip_validate_negotiate(dir: Direction, m: &mut Smb2) -> bool {
    if final_reply(dir, m, command::IOCTL) && is_validate_negotiate(m) {
        m.unsign();
        return true;
    }
    false
}

/// Opt-out (`require_signing = false`, server not requiring signing): a changed, stripped READ is believed, a stripped validation fails with `UnprotectedNegotiateValidation` (MS-SMB2 3.2.5.14.12).
// The opt-out, and what it costs (MS-SMB2 3.2.5.1.3, 3.2.5.14.12): against a server that does
// not require signing (`server signing = default`), a 3.0.2 client with `require_signing =
// false` believes a READ reply whose data a relay changed and whose signature it stripped —
// the risk the option's documentation names. The validation of the negotiation is the one
// reply it still insists on: stripped of its signature, `share()` fails with
// `UnprotectedNegotiateValidation`. Controls: the same client through an untampered relay
// connects, validates and reads the file as it is.
#[test]
fn with_signing_opted_out_on_3_0_2_a_stripped_reply_is_believed_but_never_a_stripped_validation() {
    let tb = testbed(Signing::Default);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let mut opted_out = config_at(Dialect::Smb302);
    opted_out.require_signing = false;
    let (stripped_reads, stripped_validations) =
        (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (reads, validations) = (stripped_reads.clone(), stripped_validations.clone());
    client_block_on(&rt, async move {
        // Control.
        let plain = Mitm::start(up, untouched).await;
        let client = connect(&plain, &creds, opted_out.clone()).await;
        let share = client.share("plain").await.expect("control share");
        let f = file_to_read(&share, "opted-out.txt", b"original").await;
        assert_eq!(
            &f.read_at(0, 8).await.expect("control read")[..],
            b"original"
        );
        drop(f);
        client.logoff().await.expect("logoff");

        // A changed READ reply, stripped: believed.
        let mitm = Mitm::start(
            up,
            rewriting_once(reads, |dir, m| {
                if final_reply(dir, m, command::READ) {
                    let data_offset = usize::from(m.0[66]);
                    m.0[data_offset] ^= 0x20;
                    m.unsign();
                    return true;
                }
                false
            }),
        )
        .await;
        let client = connect(&mitm, &creds, opted_out.clone()).await;
        assert!(client.signing().is_some(), "requests are still signed");
        let share = client.share("plain").await.expect("share");
        let f = share
            .open("opted-out.txt", &OpenOptions::new().read(true))
            .await
            .expect("open");
        let got = f.read_at(0, 8).await.expect("the opt-out takes it");
        eprintln!(
            "opted out, changed and stripped READ: {:?}",
            String::from_utf8_lossy(&got)
        );
        assert_eq!(&got[..], b"Original", "the relay's change was believed");
        drop(f);
        client.logoff().await.expect("logoff");

        // The validation's reply, stripped: refused all the same.
        let mitm = Mitm::start(up, rewriting_once(validations, strip_validate_negotiate)).await;
        let client = connect(&mitm, &creds, opted_out).await;
        let e = client
            .share("plain")
            .await
            .map(drop)
            .expect_err("an unprotected validation reply");
        eprintln!("opted out, stripped VALIDATE_NEGOTIATE_INFO reply: {e:?}");
        assert!(
            matches!(
                e,
                Error::Protocol(ProtocolError::UnprotectedNegotiateValidation)
            ),
            "{e:?}"
        );
        // MS-SMB2 3.2.5.14.12: the client terminates the connection and the session with
        // it; nothing more is sent on either, and the session is not set up again.
        let again = client.share("plain").await.map(drop);
        eprintln!(
            "after it, share() again: {again:?}; {} connection(s)",
            mitm.connections(),
        );
        assert!(
            matches!(again, Err(Error::ConnectionLost { .. })),
            "the session ended with the failed validation: {again:?}"
        );
        assert_eq!(mitm.connections(), 1, "and was not set up again");
    });
    assert_eq!(stripped_reads.load(Ordering::SeqCst), 1);
    assert_eq!(stripped_validations.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------- the last SESSION_SETUP reply

/// Final SESSION_SETUP reply stripped of its signature (and ENCRYPT_DATA, if set) → connect fails with `UnsignedReply` (SESSION_SETUP) on 3.1.1 and 3.0.2 (MS-SMB2 3.2.5.3.1).
// Stripping the session's first signature (MS-SMB2 3.2.5.3.1): the relay clears the
// signature of the final SUCCESS SESSION_SETUP reply (and SMB2_SESSION_FLAG_ENCRYPT_DATA,
// were it set, so the session would run in clear); on 3.1.1, with or without encryption
// asked for, and on 3.0.2 with signing required (the default), connect fails with
// `UnsignedReply` (SESSION_SETUP). Control: each configuration connects through an
// untampered relay.
#[test]
fn a_final_session_setup_reply_stripped_of_its_signature_fails_the_connect() {
    let tb = testbed(Signing::Mandatory);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let mut encrypted = config_at(Dialect::Smb311);
    encrypted.encrypt = true;
    let cases = [
        ("3.1.1", config_at(Dialect::Smb311)),
        ("3.1.1, encryption asked for", encrypted),
        ("3.0.2", config_at(Dialect::Smb302)),
        ("3.0 to 3.1.1 (defaults)", config()),
    ];
    client_block_on(&rt, async move {
        for (what, config) in cases {
            let plain = Mitm::start(up, untouched).await;
            let client = connect(&plain, &creds, config.clone()).await;
            let share = client.share("plain").await.expect("control share");
            smb3_tests::write_file(&share, "setup.txt", Bytes::from_static(b"x")).await;
            client.logoff().await.expect("logoff");

            let stripped = Arc::new(AtomicU32::new(0));
            let encrypt_flag_seen = Arc::new(AtomicBool::new(false));
            let seen = encrypt_flag_seen.clone();
            let mitm = Mitm::start(
                up,
                rewriting(stripped.clone(), move |dir, m| {
                    if final_reply(dir, m, command::SESSION_SETUP) && m.status() == 0 {
                        let flags = m.session_flags();
                        if flags & wire::SESSION_FLAG_ENCRYPT_DATA != 0 {
                            seen.store(true, Ordering::SeqCst);
                            m.set_session_flags(flags & !wire::SESSION_FLAG_ENCRYPT_DATA);
                        }
                        m.unsign();
                        return true;
                    }
                    false
                }),
            )
            .await;
            eprintln!("{what}:");
            let e = connect_err(&mitm, &creds, config).await;
            assert!(is_unsigned(&e, Command::SESSION_SETUP), "{what}: {e:?}");
            assert_eq!(stripped.load(Ordering::SeqCst), 1, "{what}");
            eprintln!(
                "  ENCRYPT_DATA in the server's reply: {}",
                encrypt_flag_seen.load(Ordering::SeqCst)
            );
        }
    });
}

// ---------------------------------------------------------------- negotiate contexts

/// NEGOTIATE contexts rewritten to HMAC-SHA256 signing / AES-128-CCM → `SigningAlgorithmNotOffered(0)` / `CipherNotOffered(1)` (MS-SMB2 3.2.5.2, 2.2.4.1.2, 2.2.4.1.7).
// Algorithms the client did not offer (MS-SMB2 3.2.5.2, 2.2.4.1.2, 2.2.4.1.7): the client
// offers only AES-128-GCM and AES-GMAC signing; the relay rewrites the server's
// SIGNING_CAPABILITIES to HMAC-SHA256 (0x0000), or its ENCRYPTION_CAPABILITIES to AES-128-CCM
// (0x0001); connect fails with `SigningAlgorithmNotOffered(0)` / `CipherNotOffered(1)`.
// Control: untampered, the session signs with AES-GMAC and encrypts with AES-128-GCM.
#[test]
fn a_cipher_or_signing_algorithm_the_client_did_not_offer_is_refused() {
    let tb = testbed(Signing::Mandatory);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let mut narrow = config_at(Dialect::Smb311);
    narrow.ciphers = vec![Cipher::Aes128Gcm];
    narrow.signing_algorithms = vec![SigningAlgorithm::AesGmac];
    let offered = Arc::new(Mutex::new(HashMap::new()));
    let record = offered.clone();
    client_block_on(&rt, async move {
        // Control, recording what the server chose in each context.
        let plain = Mitm::start(
            up,
            rewriting(Arc::default(), move |dir, m| {
                if dir == Direction::ToClient && m.command() == command::NEGOTIATE {
                    let mut r = record.lock().unwrap();
                    for kind in [wire::SIGNING_CAPABILITIES, wire::ENCRYPTION_CAPABILITIES] {
                        r.insert(kind, m.context_algorithms(kind));
                    }
                }
                false
            }),
        )
        .await;
        let client = connect(&plain, &creds, narrow.clone()).await;
        assert_eq!(client.signing(), Some(SigningAlgorithm::AesGmac), "control");
        assert_eq!(client.cipher(), Some(Cipher::Aes128Gcm), "control");
        let share = client.share("encrypted").await.expect("control share");
        smb3_tests::write_file(&share, "ctx.txt", Bytes::from_static(b"x")).await;
        client.logoff().await.expect("logoff");
        eprintln!("the server chose: {:?}", offered.lock().unwrap());

        for (kind, id) in [
            (wire::SIGNING_CAPABILITIES, 0x0000u16),
            (wire::ENCRYPTION_CAPABILITIES, 0x0001),
        ] {
            let changed = Arc::new(AtomicU32::new(0));
            let mitm = Mitm::start(
                up,
                rewriting(changed.clone(), move |dir, m| {
                    dir == Direction::ToClient
                        && m.command() == command::NEGOTIATE
                        && m.set_context_algorithms(kind, id)
                }),
            )
            .await;
            let e = connect_err(&mitm, &creds, narrow.clone()).await;
            assert_eq!(
                changed.load(Ordering::SeqCst),
                1,
                "context {kind} rewritten"
            );
            if kind == wire::SIGNING_CAPABILITIES {
                assert!(
                    matches!(
                        e,
                        Error::Protocol(ProtocolError::SigningAlgorithmNotOffered(0))
                    ),
                    "{e:?}"
                );
            } else {
                assert!(
                    matches!(e, Error::Protocol(ProtocolError::CipherNotOffered(1))),
                    "{e:?}"
                );
            }
        }
    });
}

// ---------------------------------------------------------------- sealing

/// What the relay of the sealing test does with a sealed final READ reply.
const PASS: u8 = 0;
/// Decrypt it and encrypt it again with the session's keys (the relay's keys work).
const RESEAL: u8 = 1;
/// Decrypt it, sign it with the session's signing key and send it in clear.
const UNSEAL_AND_SIGN: u8 = 2;

/// Hostile server with the keys answers a sealed READ in clear, validly signed → `UnsealedReply` (READ) (MS-SMB2 3.2.5.1.1, 3.3.4.1.4).
// Encryption stripped by a hostile server (MS-SMB2 3.2.5.1.1, 3.3.4.1.4): on the encrypted
// share a READ goes sealed; the relay, holding the session's keys, decrypts the sealed reply
// with the server-to-client key, signs the plaintext with the signing key and sends it
// unsealed. The signature verifies, yet the READ fails with `UnsealedReply`: a reply to an
// encrypted request must be encrypted. Control: the same relay decrypting and sealing the
// reply again with the same keys is accepted, and the bytes arrive.
#[test]
fn a_sealed_read_answered_in_clear_and_validly_signed_is_refused() {
    let tb = testbed(Signing::Mandatory);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let keys = SigningKeys::default();
    let mode = Arc::new(AtomicU8::new(PASS));
    let done = Arc::new(Mutex::new(Vec::new()));
    let rules = {
        let (keys, mode, done) = (keys.clone(), mode.clone(), done.clone());
        move |_| {
            let (keys, mode, done) = (keys.clone(), mode.clone(), done.clone());
            Some(Box::new(move |dir, frame: Bytes| {
                let how = mode.load(Ordering::SeqCst);
                if dir != Direction::ToClient || how == PASS {
                    return forward(frame);
                }
                let Some(mut inner) = keys.unseal(&frame) else {
                    return forward(frame);
                };
                if inner.next_command() != 0 || !final_reply(dir, &inner, command::READ) {
                    return forward(frame);
                }
                mode.store(PASS, Ordering::SeqCst);
                done.lock().unwrap().push(how);
                if how == RESEAL {
                    return forward(keys.seal(&inner).expect("the session's cipher and key"));
                }
                assert!(
                    !inner.is_signed(),
                    "the message inside a sealed frame is unsigned"
                );
                assert!(keys.sign(&mut inner), "the session's signing key");
                assert!(keys.verifies(&inner));
                forward(inner.frame())
            }) as BoxedRule)
        }
    };
    let (m, k) = (mode.clone(), keys.clone());
    client_block_on(&rt, async move {
        let mitm = Mitm::start(up, rules).await;
        let client = connect(&mitm, &creds, keyed(config(), &k)).await;
        let share = client.share("encrypted").await.expect("encrypted share");
        assert!(share.is_encrypted());
        let f = file_to_read(&share, "sealed.txt", b"sealed bytes").await;

        m.store(RESEAL, Ordering::SeqCst);
        let got = f
            .read_at(0, 12)
            .await
            .expect("control: sealed again by the relay");
        assert_eq!(&got[..], b"sealed bytes");

        m.store(UNSEAL_AND_SIGN, Ordering::SeqCst);
        let started = Instant::now();
        let e = f
            .read_at(0, 12)
            .await
            .expect_err("a READ answered in clear");
        eprintln!(
            "unsealed, signed READ reply: {e:?} after {:?}",
            started.elapsed()
        );
        assert!(
            matches!(
                e,
                Error::Protocol(ProtocolError::UnsealedReply {
                    command: Command::READ,
                    ..
                })
            ),
            "{e:?}"
        );
        assert!(started.elapsed() < REQUEST_TIMEOUT, "refused on arrival");
        // The session comes back on a new connection; reads work again.
        assert_eq!(
            &f.read_at(0, 12).await.expect("read after")[..],
            b"sealed bytes"
        );
        assert_eq!(mitm.connections(), 2);
    });
    assert_eq!(*done.lock().unwrap(), [RESEAL, UNSEAL_AND_SIGN]);
}

// ---------------------------------------------------------------- names from the wire

/// The names a hostile server gives entries of `names/`, each as long in UTF-16 as the name of
/// the real file it replaces (so every offset of the reply stays valid): (real name, name on
/// the wire).
fn hostile_renames() -> Vec<(String, String)> {
    let owned = format!("/tmp/owned-{:04x}", std::process::id() & 0xFFFF);
    [owned.as_str(), "../../x", "a/b", "c\\d", "n\0l", ".."]
        .into_iter()
        .map(|bad| {
            (
                bad.replace(['/', '\\', '\0'], "_").replace('.', "d"),
                bad.to_string(),
            )
        })
        .collect()
}

/// Files of `names/` that keep their names.
const GOOD: [(&str, &[u8]); 2] = [
    ("good-1.txt", b"first good file"),
    ("good-2.bin", b"second good file, a little longer"),
];

/// `names/` on the server's disk: the good files and the real files of [`hostile_renames`].
fn make_names_dir(tb: &Testbed) {
    let dir = tb.share_path("plain").join("names");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, data) in GOOD {
        std::fs::write(dir.join(name), data).unwrap();
    }
    for (real, _) in hostile_renames() {
        std::fs::write(dir.join(&real), b"renamed on the wire").unwrap();
    }
    tb.give_to_user(&dir);
}

/// The relay's rule: [`hostile_renames`] in QUERY_DIRECTORY replies while `on` holds, signed
/// again with `keys` if there are keys.
fn renaming_rule(
    keys: Option<SigningKeys>,
    on: Arc<AtomicBool>,
    counts: RenameCounts,
) -> impl FnMut(u64) -> Option<BoxedRule> {
    renaming_entries(hostile_renames().into_iter().collect(), keys, on, counts)
}

/// Hostile server (re-signing) lists `/tmp/owned-…`, `../../x`, `a/b`, `c\d`, `n<NUL>l`, `..` → each refused with `Error::UnsafeName`, the rest listed (MS-FSCC 2.1.5, MS-SMB2 2.2.34).
// Unsafe names from a hostile server (MS-FSCC 2.1.5, MS-SMB2 2.2.34): a server holding the
// session's keys renames entries of `names/` to `/tmp/owned-…`, `../../x`, `a/b`, `c\d`,
// `n<NUL>l` and `..`,
// signing its replies again. `ReadDir` hands out the good entries and one
// `Error::UnsafeName` (naming the directory and the raw name) per refused entry; `walk` gives
// a `WalkError` for each and goes on; `read_dir` fails with one. The listing leaves out the
// directory's own `.` and `..` (Samba lists them first); the file renamed to `..` is a
// second one and is refused like the others.
// Control: the same listing with the renaming off shows every real name.
#[test]
fn a_hostile_server_renaming_entries_to_paths_gets_them_refused_one_by_one() {
    let tb = testbed(Signing::Mandatory);
    make_names_dir(&tb);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let keys = SigningKeys::default();
    let (on, counts) = (Arc::new(AtomicBool::new(false)), RenameCounts::default());
    let rules = renaming_rule(Some(keys.clone()), on.clone(), counts.clone());
    let renames = hostile_renames();
    client_block_on(&rt, async move {
        let mitm = Mitm::start(up, rules).await;
        let client = connect(&mitm, &creds, keyed(config(), &keys)).await;
        let share = client.share("plain").await.expect("share");

        // Control: the real names.
        let real: BTreeSet<String> = share
            .read_dir("names")
            .await
            .expect("control listing")
            .into_iter()
            .map(|e| e.name)
            .collect();
        let mut expected: BTreeSet<String> = GOOD.iter().map(|(n, _)| n.to_string()).collect();
        expected.extend(renames.iter().map(|(real, _)| real.clone()));
        assert_eq!(real, expected, "control");

        on.store(true, Ordering::SeqCst);
        let bad: BTreeSet<String> = renames.iter().map(|(_, bad)| bad.clone()).collect();
        let good: BTreeSet<String> = GOOD.iter().map(|(n, _)| n.to_string()).collect();

        // ReadDir: the good entries, then one error per refused entry.
        let mut listing = share.list("names").await.expect("list");
        let (mut listed, mut refused) = (BTreeSet::new(), BTreeSet::new());
        let started = Instant::now();
        loop {
            match listing.next_page().await {
                Ok(Some(page)) => listed.extend(page.into_iter().map(|e| e.name)),
                Ok(None) => break,
                Err(Error::UnsafeName { dir, name, reason }) => {
                    eprintln!("ReadDir refused {name:?} in {dir:?}: {reason}");
                    assert_eq!(dir, "names");
                    refused.insert(name);
                }
                Err(e) => panic!("listing: {e:?}"),
            }
            assert!(started.elapsed() < Duration::from_secs(10), "bounded");
        }
        eprintln!("ReadDir: listed {listed:?}, refused {refused:?}");
        assert_eq!(listed, good);
        assert!(refused.is_subset(&bad), "{refused:?}");
        for must in &bad {
            assert!(refused.contains(must), "{must:?} refused: {refused:?}");
        }

        // Walk: every good entry, a WalkError per refused one, and it goes on.
        let mut walk = share.walk("names", WalkOptions::default());
        let (mut walked, mut walk_refused) = (BTreeSet::new(), BTreeSet::new());
        while let Some(item) = walk.next().await {
            match item {
                Ok(e) => {
                    walked.insert(e.path);
                }
                Err(w) => match w.error {
                    Error::UnsafeName { dir, name, .. } => {
                        assert_eq!((w.path.as_str(), dir.as_str()), ("names", "names"));
                        walk_refused.insert(name);
                    }
                    other => panic!("walk: {}: {other:?}", w.path),
                },
            }
        }
        let good_paths: BTreeSet<String> = good.iter().map(|n| format!("names/{n}")).collect();
        assert_eq!(walked, good_paths);
        assert_eq!(walk_refused, refused, "walk and ReadDir agree");

        // read_dir: fails with one of them.
        match share.read_dir("names").await {
            Err(Error::UnsafeName { dir, name, .. }) => {
                assert_eq!(dir, "names");
                assert!(refused.contains(&name), "{name:?}");
            }
            other => panic!("read_dir must fail with UnsafeName: {other:?}"),
        }
        assert_eq!(mitm.connections(), 1, "nothing here breaks the connection");
    });
    assert!(counts.renamed.load(Ordering::SeqCst) >= 3 * 6);
    assert_eq!(counts.unsigned.load(Ordering::SeqCst), 0);
    let owned = &hostile_renames()[0].1;
    assert!(!std::path::Path::new(owned).exists());
}

/// MITM without keys renames directory entries → the listing fails with `BadSignature` (QUERY_DIRECTORY), no name handed out (MS-SMB2 3.2.5.1.3).
// The same renaming by a man in the middle without the keys (MS-SMB2 3.2.5.1.3): the
// changed QUERY_DIRECTORY reply does not verify, so the listing fails with `BadSignature`
// and no name of it is handed out, nor any entry of that reply; the connection is dropped.
// Control: with the renaming off, the session (set up again) lists the real names.
#[test]
fn a_man_in_the_middle_renaming_entries_without_the_keys_is_a_bad_signature() {
    let tb = testbed(Signing::Mandatory);
    make_names_dir(&tb);
    let rt = tb.client_runtime();
    let (up, creds) = (upstream(&tb), tb.credentials());
    let (on, counts) = (Arc::new(AtomicBool::new(true)), RenameCounts::default());
    let rules = renaming_rule(None, on.clone(), counts.clone());
    client_block_on(&rt, async move {
        let mitm = Mitm::start(up, rules).await;
        let client = connect(&mitm, &creds, config()).await;
        let share = client.share("plain").await.expect("share");
        let e = share
            .read_dir("names")
            .await
            .map(|l| l.into_iter().map(|e| e.name).collect::<Vec<_>>())
            .expect_err("a changed reply");
        eprintln!("renamed without the keys, read_dir: {e:?}");
        assert!(
            matches!(
                e,
                Error::Protocol(ProtocolError::BadSignature {
                    command: Command::QUERY_DIRECTORY,
                    ..
                })
            ),
            "{e:?}"
        );
        let mut walk = share.walk("names", WalkOptions::default());
        let mut items = Vec::new();
        while let Some(item) = walk.next().await {
            items.push(
                item.map(|e| e.path)
                    .map_err(|w| format!("{}: {:?}", w.path, w.error)),
            );
        }
        eprintln!("renamed without the keys, walk: {items:?}");
        assert!(items.iter().all(|i| i.is_err()), "{items:?}");
        assert!(
            items
                .iter()
                .any(|i| i.as_ref().is_err_and(|e| e.contains("BadSignature"))),
            "{items:?}"
        );
        on.store(false, Ordering::SeqCst);
        let names = share.read_dir("names").await.expect("control listing");
        assert_eq!(names.len(), GOOD.len() + hostile_renames().len());
        assert!(
            mitm.connections() >= 2,
            "each changed reply dropped its connection"
        );
    });
    assert!(counts.renamed.load(Ordering::SeqCst) >= 6);
}

// ---------------------------------------------------------------- Kerberos

/// 3.1.1 with Kerberos through the relay: realm and KDC from the testbed, the server named by
/// its host name for the SPN (the relay's address is what the client connects to).
fn kerberos_config(tb: &Testbed) -> ClientConfig {
    let k = tb.kerberos().expect("a Kerberos testbed");
    let mut c = config_at(Dialect::Smb311);
    c.kerberos_realm = Some(k.realm.clone());
    c.kerberos_kdc = Some(k.kdc.to_string());
    c.kerberos_service_host = Some(k.server_host.clone());
    c.connect_timeout = Duration::from_secs(5);
    c
}

/// Kerberos: final SESSION_SETUP reply's AP-REP emptied → connect fails with `NoMutualAuthentication` (RFC 4120 3.2.4, MS-SMB2 3.2.5.3).
// No mutual authentication (RFC 4120 3.2.4, MS-SMB2 3.2.5.3): the relay empties the security
// buffer of the final SUCCESS SESSION_SETUP reply, which carries the server's AP-REP — the
// proof that it holds the service key. The client refuses the session:
// `Error::Auth { kind: MutualAuthentication, detail: NoMutualAuthentication }`. Control: the
// untampered relay connects with Kerberos and signs.
#[test]
fn kerberos_without_the_servers_ap_rep_is_refused_as_no_mutual_authentication() {
    let tb = Testbed::start(TestbedConfig {
        kerberos: true,
        ..TestbedConfig::unshaped(1)
    })
    .unwrap_or_else(|e| panic!("testbed: {e}"));
    let rt = tb.client_runtime();
    let (up, creds, kconfig) = (upstream(&tb), tb.credentials(), kerberos_config(&tb));
    let emptied = Arc::new(AtomicU32::new(0));
    let count = emptied.clone();
    client_block_on(&rt, async move {
        let plain = Mitm::start(up, untouched).await;
        let client = connect(&plain, &creds, kconfig.clone()).await;
        assert!(client.signing().is_some(), "control");
        let share = client.share("plain").await.expect("control share");
        smb3_tests::write_file(&share, "krb.txt", Bytes::from_static(b"x")).await;
        client.logoff().await.expect("logoff");

        let mitm = Mitm::start(
            up,
            rewriting(count, |dir, m| {
                if final_reply(dir, m, command::SESSION_SETUP)
                    && m.status() == 0
                    && !m.session_security_buffer().is_empty()
                {
                    eprintln!(
                        "emptying a {}-byte security buffer (the AP-REP)",
                        m.session_security_buffer().len()
                    );
                    m.empty_session_security_buffer();
                    return true;
                }
                false
            }),
        )
        .await;
        let e = connect_err(&mitm, &creds, kconfig).await;
        assert!(
            matches!(
                e,
                Error::Auth {
                    kind: AuthFailure::MutualAuthentication,
                    detail: AuthDetail::NoMutualAuthentication,
                }
            ),
            "{e:?}"
        );
    });
    assert_eq!(emptied.load(Ordering::SeqCst), 1);
}
