//! The channel against an in-memory peer: credits, MessageIds, interim replies, dropped
//! callers and compounds, deterministic and without a network.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use smb3_proto::header::{Header, HeaderFlags, HEADER_LEN};
use smb3_proto::msg::RequestBody;
use smb3_proto::{Command, NtStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::frame::frame_prefix;
use super::{Channel, ChannelOptions, Request};
use crate::error::{ConnectionLossCause, LossSign};
use crate::{Error, ProtocolError};

/// An ECHO-shaped request that claims to move `bytes`, so its CreditCharge is > 1.
struct Probe {
    bytes: u32,
}

impl RequestBody for Probe {
    const COMMAND: Command = Command::ECHO;
    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(4);
        msg.put_u16_le(0);
    }
    fn credit_payload(&self) -> u32 {
        self.bytes
    }
}

fn addr() -> SocketAddr {
    "127.0.0.1:445".parse().unwrap()
}

fn reply_to(req: &Header, status: NtStatus, credits: u16, async_id: Option<u64>) -> BytesMut {
    let mut h = Header {
        status,
        command: req.command,
        credits,
        credit_charge: req.credit_charge,
        flags: HeaderFlags(HeaderFlags::SERVER_TO_REDIR),
        message_id: req.message_id,
        session_id: req.session_id,
        tree_id: req.tree_id,
        ..Header::default()
    };
    if let Some(id) = async_id {
        h.flags.0 |= HeaderFlags::ASYNC_COMMAND;
        h.async_id = id;
    }
    let mut out = BytesMut::new();
    h.encode(&mut out);
    out.put_u16_le(4);
    out.put_u16_le(0);
    out
}

async fn read_frame(io: &mut DuplexStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    io.read_exact(&mut len).await.ok()?;
    let n = u32::from_be_bytes(len) as usize & 0x00FF_FFFF;
    let mut f = vec![0u8; n];
    io.read_exact(&mut f).await.ok()?;
    Some(f)
}

async fn write_frame(io: &mut DuplexStream, msg: &[u8]) {
    io.write_all(&frame_prefix(msg.len())).await.unwrap();
    io.write_all(msg).await.unwrap();
}

/// Server-side bookkeeping the fake checks every request against.
#[derive(Default)]
struct Ledger {
    granted: u64,
    used_ids: HashSet<u64>,
    violations: Vec<String>,
}

fn start(opts: ChannelOptions) -> (Channel, DuplexStream) {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (rd, wr) = tokio::io::split(client_io);
    let (ch, _events) = Channel::start(rd, wr, addr(), addr(), &opts);
    (ch, server_io)
}

#[tokio::test]
async fn never_overspends_and_never_reuses_a_message_id() {
    let (ch, mut server) = start(ChannelOptions {
        credit_target: 64,
        ..ChannelOptions::default()
    });
    let ledger = Arc::new(Mutex::new(Ledger {
        granted: 1,
        ..Ledger::default()
    }));
    let l = ledger.clone();
    let fake = tokio::spawn(async move {
        // Grants follow a fixed, stingy pattern (0..=3), never leaving the client at zero.
        let pattern = [0u16, 3, 1, 0, 2, 0, 0, 3, 1, 2];
        let mut i = 0;
        let mut outstanding = 1u64; // credits the client holds, as the server sees it
        while let Some(f) = read_frame(&mut server).await {
            let h = Header::decode(&f).unwrap();
            let charge = u64::from(h.credit_charge.max(1));
            {
                let mut guard = l.lock().unwrap();
                let l = &mut *guard;
                for id in h.message_id..h.message_id + charge {
                    if id >= l.granted {
                        let granted = l.granted;
                        l.violations
                            .push(format!("id {id} beyond granted {granted}"));
                    }
                    if !l.used_ids.insert(id) {
                        l.violations.push(format!("id {id} reused"));
                    }
                }
            }
            outstanding -= charge.min(outstanding);
            let mut grant = pattern[i % pattern.len()];
            i += 1;
            if outstanding + u64::from(grant) < 4 {
                // Stingy, but like real servers it never leaves the client unable to send
                // its largest request (4 credits here) once nothing else is in flight.
                grant = (4 - outstanding) as u16;
            }
            outstanding += u64::from(grant);
            l.lock().unwrap().granted += u64::from(grant);
            write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, grant, None)).await;
        }
    });
    // Bootstrap a little, then run many concurrent multi-credit requests.
    let mut tasks = Vec::new();
    for k in 0..300u32 {
        let ch = ch.clone();
        tasks.push(tokio::spawn(async move {
            let body = Probe {
                bytes: (k % 4) * 65536,
            };
            ch.call(Request::new(&body)).await
        }));
    }
    for t in tasks {
        let r = t.await.unwrap().expect("every request completes");
        assert_eq!(r.header.status, NtStatus::SUCCESS);
    }
    {
        let l = ledger.lock().unwrap();
        assert!(
            l.violations.is_empty(),
            "{:?}",
            &l.violations[..l.violations.len().min(5)]
        );
        assert_eq!(
            l.used_ids.len() as u64,
            (0..300u64).map(|k| (k % 4).max(1)).sum::<u64>()
        );
    }
    drop(ch);
    fake.await.unwrap();
}

#[tokio::test]
async fn interim_pending_reply_is_absorbed_and_grants_credit() {
    let (ch, mut server) = start(ChannelOptions::default());
    let fake = tokio::spawn(async move {
        let f = read_frame(&mut server).await.unwrap();
        let h = Header::decode(&f).unwrap();
        write_frame(&mut server, &reply_to(&h, NtStatus::PENDING, 5, Some(77))).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut fin = reply_to(&h, NtStatus::SUCCESS, 0, Some(77));
        fin[12..14].copy_from_slice(&h.command.0.to_le_bytes());
        write_frame(&mut server, &fin).await;
        server
    });
    let r = ch.call(Request::new(&Probe { bytes: 0 })).await.unwrap();
    assert_eq!(r.header.status, NtStatus::SUCCESS);
    assert_eq!(ch.credits_total(), 5);
    drop(fake.await.unwrap());
}

#[tokio::test]
async fn a_dropped_caller_does_not_wedge_the_channel() {
    let (ch, mut server) = start(ChannelOptions::default());
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let fake = tokio::spawn(async move {
        // Hold the first reply until the caller has given up, then answer everything.
        let f = read_frame(&mut server).await.unwrap();
        let first = Header::decode(&f).unwrap();
        release_rx.await.unwrap();
        write_frame(&mut server, &reply_to(&first, NtStatus::SUCCESS, 2, None)).await;
        while let Some(f) = read_frame(&mut server).await {
            let h = Header::decode(&f).unwrap();
            write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 1, None)).await;
        }
    });
    let mut req = Request::new(&Probe { bytes: 0 });
    req.timeout = Duration::from_millis(30);
    let e = ch.call(req).await.unwrap_err();
    assert!(matches!(e, crate::Error::Timeout { .. }), "{e:?}");
    release_tx.send(()).unwrap();
    // The late reply returned the credit: the channel works on.
    for _ in 0..10 {
        ch.call(Request::new(&Probe { bytes: 0 })).await.unwrap();
    }
    assert!(ch.dead_reason().is_none());
    drop(ch);
    fake.await.unwrap();
}

#[tokio::test]
async fn compound_members_are_aligned_related_and_matched() {
    let (ch, mut server) = start(ChannelOptions::default());
    let fake = tokio::spawn(async move {
        // Give enough credits for a 3-member compound first.
        let f = read_frame(&mut server).await.unwrap();
        let h = Header::decode(&f).unwrap();
        write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 8, None)).await;
        let f = read_frame(&mut server).await.unwrap();
        let mut off = 0;
        let mut headers = Vec::new();
        loop {
            let h = Header::decode(&f[off..]).unwrap();
            headers.push(h.clone());
            if h.next_command == 0 {
                break;
            }
            assert_eq!(h.next_command % 8, 0, "members are 8-byte aligned");
            off += h.next_command as usize;
        }
        assert_eq!(headers.len(), 3);
        assert!(!headers[0].flags.has(HeaderFlags::RELATED_OPERATIONS));
        assert!(headers[1].flags.has(HeaderFlags::RELATED_OPERATIONS));
        assert!(headers[2].flags.has(HeaderFlags::RELATED_OPERATIONS));
        // Answer in one compound frame, statuses differing per member.
        let statuses = [
            NtStatus::SUCCESS,
            NtStatus::ACCESS_DENIED,
            NtStatus::SUCCESS,
        ];
        let mut frame = BytesMut::new();
        for (i, h) in headers.iter().enumerate() {
            let start = frame.len();
            let mut m = reply_to(h, statuses[i], 1, None);
            if i < 2 {
                while m.len() % 8 != 0 {
                    m.put_u8(0);
                }
                let next = m.len() as u32;
                m[20..24].copy_from_slice(&next.to_le_bytes());
            }
            frame.extend_from_slice(&m);
            assert_eq!(start % 8, 0);
        }
        write_frame(&mut server, &frame).await;
        server
    });
    ch.call(Request::new(&Probe { bytes: 0 })).await.unwrap();
    let reqs = (0..3).map(|_| Request::new(&Probe { bytes: 0 })).collect();
    let replies = ch.call_compound(reqs, true).await.unwrap();
    let statuses: Vec<_> = replies
        .into_iter()
        .map(|r| r.unwrap().header.status)
        .collect();
    assert_eq!(
        statuses,
        vec![
            NtStatus::SUCCESS,
            NtStatus::ACCESS_DENIED,
            NtStatus::SUCCESS
        ]
    );
    drop(fake.await.unwrap());
}

#[tokio::test]
async fn malformed_replies_kill_the_channel_with_a_typed_error() {
    let (ch, mut server) = start(ChannelOptions::default());
    let fake = tokio::spawn(async move {
        let f = read_frame(&mut server).await.unwrap();
        let h = Header::decode(&f).unwrap();
        // A reply for a MessageId nobody asked for.
        let mut bogus = h.clone();
        bogus.message_id = 999;
        write_frame(&mut server, &reply_to(&bogus, NtStatus::SUCCESS, 1, None)).await;
        server
    });
    let e = ch
        .call(Request::new(&Probe { bytes: 0 }))
        .await
        .unwrap_err();
    // The caller hears that the server broke the protocol, and what it did.
    let unknown_id = |cause: &ConnectionLossCause| {
        matches!(cause, ConnectionLossCause::ProtocolViolation { source }
            if matches!(**source, Error::Protocol(ProtocolError::UnknownMessageId(999))))
    };
    assert!(
        matches!(&e, Error::ConnectionLost { cause, .. } if unknown_id(cause)),
        "{e:?}"
    );
    assert!(unknown_id(&ch.dead_reason().unwrap()));
    drop(fake.await.unwrap());

    // Garbage that is not even an SMB2 header.
    let (ch, mut server) = start(ChannelOptions::default());
    write_frame(&mut server, b"\xfeSMBshort").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        ch.dead_reason()
            .unwrap()
            .to_string()
            .contains("malformed frame"),
        "{:?}",
        ch.dead_reason()
    );
    let _ = HEADER_LEN;
    let _ = Bytes::new();
}

#[tokio::test]
async fn a_request_larger_than_all_credits_fails_instead_of_hanging() {
    let (ch, mut server) = start(ChannelOptions::default());
    let fake = tokio::spawn(async move {
        while let Some(f) = read_frame(&mut server).await {
            let h = Header::decode(&f).unwrap();
            write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 1, None)).await;
        }
    });
    ch.call(Request::new(&Probe { bytes: 0 })).await.unwrap();
    assert_eq!(ch.credits_total(), 1);
    let e = ch
        .call(Request::new(&Probe { bytes: 3 * 65536 }))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("too few credits"), "{e}");
    // Smaller requests still go through.
    ch.call(Request::new(&Probe { bytes: 100 })).await.unwrap();
    drop(ch);
    fake.await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// CANCEL on drop (MS-SMB2 3.2.4.24)
// ---------------------------------------------------------------------------------------------

/// Stands in for the session's keys: "signs" by writing a marker into the Signature field.
struct MarkerSigner;

const MARKER: [u8; 16] = [0x5A; 16];

impl super::ChannelCrypto for MarkerSigner {
    fn sign(&self, head: &mut [u8], _payload: &[u8]) {
        head[48..64].copy_from_slice(&MARKER);
    }
    fn verify(&self, _msg: &[u8]) -> bool {
        true
    }
    fn verify_in_place(&self, _msg: &mut [u8]) -> bool {
        true
    }
    fn seal(&self, _parts: &[&[u8]]) -> crate::Result<BytesMut> {
        Err(crate::Error::ApiMisuse("no sealing in this test"))
    }
    fn open_in_place(&self, _frame: &mut [u8]) -> crate::Result<usize> {
        Err(crate::Error::ApiMisuse("no sealing in this test"))
    }
    fn replies_must_be_signed(&self) -> bool {
        false
    }
}

/// Wait (up to 2 s) until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..400 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Read the next frame, or `None` if nothing arrives within `ms`.
async fn next_frame_within(io: &mut DuplexStream, ms: u64) -> Option<Vec<u8>> {
    tokio::time::timeout(Duration::from_millis(ms), read_frame(io))
        .await
        .ok()
        .flatten()
}

/// A final reply in the async form, as a server sends it for a request that went async.
fn async_final(req: &Header, status: NtStatus, credits: u16, async_id: u64) -> BytesMut {
    reply_to(req, status, credits, Some(async_id))
}

fn assert_cancel_of(frame: &[u8], req: &Header, async_id: u64) -> Header {
    let h = Header::decode(frame).unwrap();
    assert_eq!(h.command, Command::CANCEL);
    assert_eq!(
        h.message_id, req.message_id,
        "same MessageId as the request"
    );
    assert!(h.flags.has(HeaderFlags::ASYNC_COMMAND), "async form");
    assert_eq!(h.async_id, async_id);
    assert_eq!(h.session_id, req.session_id);
    assert_eq!(h.credit_charge, 0, "takes no credits");
    assert_eq!(h.credits, 0, "asks for none");
    assert_eq!(&frame[HEADER_LEN..], &[4, 0, 0, 0], "CANCEL body");
    h
}

/// A request whose caller is waiting, the session id set so the CANCEL can be checked.
fn probe() -> Request {
    let mut req = Request::new(&Probe { bytes: 0 });
    req.session_id = 0x4400_0000_0011;
    req.tree_id = 9;
    req
}

#[tokio::test]
async fn a_dropped_async_request_sends_exactly_one_cancel_and_its_late_reply_returns_credits() {
    let (ch, mut server) = start(ChannelOptions::default());
    ch.set_crypto(Arc::new(MarkerSigner));
    // Grow the window first so the counts below are not all ones.
    let boot = tokio::spawn({
        let ch = ch.clone();
        async move { ch.call(probe()).await }
    });
    let f = read_frame(&mut server).await.unwrap();
    let h = Header::decode(&f).unwrap();
    write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 10, None)).await;
    boot.await.unwrap().unwrap();
    assert_eq!(ch.credits_total(), 10);

    let mut req = probe();
    req.sign = true;
    let taken_on = Arc::new(tokio::sync::Notify::new());
    req.on_interim = Some(taken_on.clone());
    let mut call = Box::pin(ch.call(req));
    let watched = tokio::select! {
        r = &mut call => panic!("answered early: {:?}", r.map(|r| r.header.status)),
        f = read_frame(&mut server) => Header::decode(&f.unwrap()).unwrap(),
    };
    assert!(watched.flags.has(HeaderFlags::SIGNED));
    // Interim STATUS_PENDING: the request is async now, and the interim grants 3 credits.
    write_frame(
        &mut server,
        &reply_to(&watched, NtStatus::PENDING, 3, Some(0x77)),
    )
    .await;
    tokio::select! {
        r = &mut call => panic!("answered early: {:?}", r.map(|r| r.header.status)),
        _ = until("the interim is absorbed", || ch.progress().outstanding == 0) => {}
    }
    assert_eq!(ch.outstanding(), 1, "still waiting for the final reply");
    assert_eq!(ch.credits_total(), 13);
    // Whoever asked hears that the server took the request on.
    tokio::time::timeout(Duration::from_secs(2), taken_on.notified())
        .await
        .expect("told of the interim reply");
    drop(call);

    let cancel = next_frame_within(&mut server, 2000)
        .await
        .expect("a CANCEL");
    let h = assert_cancel_of(&cancel, &watched, 0x77);
    assert!(h.flags.has(HeaderFlags::SIGNED), "signed like the request");
    assert_eq!(h.signature, MARKER);
    assert_eq!(ch.cancels_sent(), 1);
    assert_eq!(ch.credits_total(), 13, "the CANCEL spent nothing");

    // The server answers the cancelled request; the reply is discarded and its credits
    // (here 2 granted, 1 returned from flight) count.
    write_frame(
        &mut server,
        &async_final(&watched, NtStatus::CANCELLED, 2, 0x77),
    )
    .await;
    until("the cancelled reply arrives", || ch.outstanding() == 0).await;
    assert_eq!(ch.credits_total(), 14);
    assert!(ch.dead_reason().is_none());

    // No second CANCEL, and the channel carries on: the next frame is the next request.
    let next = tokio::spawn({
        let ch = ch.clone();
        async move { ch.call(probe()).await }
    });
    let f = read_frame(&mut server).await.unwrap();
    let h = Header::decode(&f).unwrap();
    assert_eq!(h.command, Command::ECHO);
    write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 1, None)).await;
    next.await.unwrap().unwrap();
    assert_eq!(ch.cancels_sent(), 1);
}

#[tokio::test]
async fn a_request_dropped_before_its_interim_is_cancelled_when_the_interim_arrives() {
    let (ch, mut server) = start(ChannelOptions::default());
    let mut call = Box::pin(ch.call(probe()));
    let req = tokio::select! {
        r = &mut call => panic!("answered early: {:?}", r.map(|r| r.header.status)),
        f = read_frame(&mut server) => Header::decode(&f.unwrap()).unwrap(),
    };
    drop(call);
    // Nothing can name the request yet: no CANCEL until the interim gives it an AsyncId.
    assert!(next_frame_within(&mut server, 50).await.is_none());
    assert_eq!(ch.cancels_sent(), 0);
    assert_eq!(ch.outstanding(), 1);

    write_frame(
        &mut server,
        &reply_to(&req, NtStatus::PENDING, 4, Some(0x1234)),
    )
    .await;
    let cancel = next_frame_within(&mut server, 2000)
        .await
        .expect("a CANCEL");
    let h = assert_cancel_of(&cancel, &req, 0x1234);
    assert!(!h.flags.has(HeaderFlags::SIGNED), "no keys, no signature");
    assert_eq!(ch.cancels_sent(), 1);

    write_frame(
        &mut server,
        &async_final(&req, NtStatus::CANCELLED, 0, 0x1234),
    )
    .await;
    until("the cancelled reply arrives", || ch.outstanding() == 0).await;
    // 1 held at the start (in flight), 4 granted by the interim, the flight credit back.
    assert_eq!(ch.credits_total(), 4);
    assert!(
        next_frame_within(&mut server, 50).await.is_none(),
        "one CANCEL only"
    );
    assert!(ch.dead_reason().is_none());
}

#[tokio::test]
async fn a_timed_out_request_is_cancelled_too() {
    let (ch, mut server) = start(ChannelOptions::default());
    let mut req = probe();
    req.timeout = Duration::from_millis(30);
    let call = tokio::spawn({
        let ch = ch.clone();
        async move { ch.call(req).await }
    });
    let req = Header::decode(&read_frame(&mut server).await.unwrap()).unwrap();
    write_frame(&mut server, &reply_to(&req, NtStatus::PENDING, 1, Some(9))).await;
    let e = call.await.unwrap().unwrap_err();
    assert!(matches!(e, crate::Error::Timeout { .. }), "{e:?}");
    let cancel = next_frame_within(&mut server, 2000)
        .await
        .expect("a CANCEL");
    assert_cancel_of(&cancel, &req, 9);
    write_frame(&mut server, &async_final(&req, NtStatus::CANCELLED, 1, 9)).await;
    until("the cancelled reply arrives", || ch.outstanding() == 0).await;
    assert_eq!(ch.cancels_sent(), 1);
}

#[tokio::test]
async fn requests_answered_normally_send_no_cancel() {
    let (ch, mut server) = start(ChannelOptions::default());
    let fake = tokio::spawn(async move {
        let mut commands = Vec::new();
        while let Some(f) = read_frame(&mut server).await {
            // Every member of a compound, one by one.
            let mut at = 0;
            loop {
                let h = Header::decode(&f[at..]).unwrap();
                commands.push(h.command);
                if h.command != Command::CANCEL {
                    // Every other request goes async first, then completes.
                    let id = h.message_id;
                    write_frame(&mut server, &reply_to(&h, NtStatus::PENDING, 1, Some(id))).await;
                    write_frame(&mut server, &async_final(&h, NtStatus::SUCCESS, 1, id)).await;
                }
                if h.next_command == 0 {
                    break;
                }
                at += h.next_command as usize;
            }
        }
        commands
    });
    for _ in 0..20 {
        let r = ch.call(probe()).await.unwrap();
        assert_eq!(r.header.status, NtStatus::SUCCESS);
    }
    let reqs = (0..3).map(|_| probe()).collect();
    for r in ch.call_compound(reqs, false).await.unwrap() {
        r.unwrap();
    }
    assert_eq!(ch.cancels_sent(), 0);
    assert_eq!(ch.outstanding(), 0);
    drop(ch);
    let commands = fake.await.unwrap();
    assert_eq!(commands.len(), 23);
    assert!(commands.iter().all(|&c| c == Command::ECHO), "{commands:?}");
}

// ---------------------------------------------------------------------------------------------
// Replies nobody waits for, and requests handed back for replay
// ---------------------------------------------------------------------------------------------

/// A probe whose `on_abandoned` records the status of every reply handed to it.
fn probe_with_hook(seen: &Arc<Mutex<Vec<NtStatus>>>) -> Request {
    let mut req = probe();
    let seen = seen.clone();
    req.on_abandoned = Some(Arc::new(move |r: super::Response| {
        seen.lock().unwrap().push(r.header.status);
    }));
    req
}

#[tokio::test]
async fn a_reply_that_comes_after_its_caller_gave_up_goes_to_its_abandon_hook() {
    let (ch, mut server) = start(ChannelOptions::default());
    let seen = Arc::new(Mutex::new(Vec::new()));

    // Answered while the caller waits: the caller gets it, the hook nothing.
    let waited = tokio::spawn({
        let ch = ch.clone();
        let req = probe_with_hook(&seen);
        async move { ch.call(req).await }
    });
    let h = Header::decode(&read_frame(&mut server).await.unwrap()).unwrap();
    write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 2, None)).await;
    assert_eq!(
        waited.await.unwrap().unwrap().header.status,
        NtStatus::SUCCESS
    );

    // The caller drops its future after the send; the server carries the request out anyway.
    let mut call = Box::pin(ch.call(probe_with_hook(&seen)));
    let h = tokio::select! {
        r = &mut call => panic!("answered early: {:?}", r.map(|r| r.header.status)),
        f = read_frame(&mut server) => Header::decode(&f.unwrap()).unwrap(),
    };
    drop(call);
    write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 1, None)).await;
    until("the late reply is handled", || ch.outstanding() == 0).await;
    assert_eq!(*seen.lock().unwrap(), vec![NtStatus::SUCCESS]);

    // A timed-out caller's late reply goes there too.
    let mut req = probe_with_hook(&seen);
    req.timeout = Duration::from_millis(20);
    let timed_out = tokio::spawn({
        let ch = ch.clone();
        async move { ch.call(req).await }
    });
    let h = Header::decode(&read_frame(&mut server).await.unwrap()).unwrap();
    let e = timed_out.await.unwrap().unwrap_err();
    assert!(matches!(e, crate::Error::Timeout { .. }), "{e:?}");
    write_frame(&mut server, &reply_to(&h, NtStatus::ACCESS_DENIED, 1, None)).await;
    until("the late reply is handled", || ch.outstanding() == 0).await;
    assert_eq!(
        *seen.lock().unwrap(),
        vec![NtStatus::SUCCESS, NtStatus::ACCESS_DENIED]
    );
    assert_eq!(ch.cancels_sent(), 0, "none of them went async");
}

#[tokio::test]
async fn requests_handed_back_for_replay_are_cancelled_and_skip_the_abandon_hook() {
    let (ch, mut server) = start(ChannelOptions::default());
    // Grow the window so two requests fit.
    let boot = tokio::spawn({
        let ch = ch.clone();
        async move { ch.call(probe()).await }
    });
    let h = Header::decode(&read_frame(&mut server).await.unwrap()).unwrap();
    write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 8, None)).await;
    boot.await.unwrap().unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let parked = tokio::spawn({
        let ch = ch.clone();
        let req = probe_with_hook(&seen);
        async move { ch.call(req).await }
    });
    let parked_req = Header::decode(&read_frame(&mut server).await.unwrap()).unwrap();
    write_frame(
        &mut server,
        &reply_to(&parked_req, NtStatus::PENDING, 1, Some(0x51)),
    )
    .await;
    until("the interim is absorbed", || ch.progress().outstanding == 0).await;
    let silent = tokio::spawn({
        let ch = ch.clone();
        let req = probe_with_hook(&seen);
        async move { ch.call(req).await }
    });
    let silent_req = Header::decode(&read_frame(&mut server).await.unwrap()).unwrap();

    // The loss detector hands both back: their callers hear of it at once ...
    let sign = LossSign::NoProgress(Duration::from_secs(3));
    let suspected = ConnectionLossCause::Suspected { sign };
    assert_eq!(
        ch.abandon_outstanding(|_| true, suspected).unwrap().len(),
        2
    );
    for caller in [parked, silent] {
        let e = caller.await.unwrap().unwrap_err();
        assert!(
            matches!(e, Error::ConnectionLost { cause: ConnectionLossCause::Suspected { sign: s }, .. } if s == sign),
            "{e:?}"
        );
    }
    // ... and the one the server holds asynchronously is cancelled now,
    let cancel = next_frame_within(&mut server, 2000)
        .await
        .expect("a CANCEL for the parked request");
    assert_cancel_of(&cancel, &parked_req, 0x51);
    // the other once its interim reply names it.
    assert!(next_frame_within(&mut server, 50).await.is_none());
    write_frame(
        &mut server,
        &reply_to(&silent_req, NtStatus::PENDING, 1, Some(0x52)),
    )
    .await;
    let cancel = next_frame_within(&mut server, 2000)
        .await
        .expect("a CANCEL for the silent request");
    assert_cancel_of(&cancel, &silent_req, 0x52);
    assert_eq!(ch.cancels_sent(), 2);

    // Their final replies are matched, return credits, and are not the hook's business: the
    // replay elsewhere answers the caller.
    write_frame(
        &mut server,
        &async_final(&parked_req, NtStatus::CANCELLED, 1, 0x51),
    )
    .await;
    write_frame(
        &mut server,
        &async_final(&silent_req, NtStatus::SUCCESS, 1, 0x52),
    )
    .await;
    until("both late replies arrive", || ch.outstanding() == 0).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(ch.dead_reason().is_none());
    assert!(ch
        .abandon_outstanding(|_| true, ConnectionLossCause::ClosedByClient)
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_channel_holding_a_request_that_must_not_arrive_late_hands_nothing_back() {
    let (ch, mut server) = start(ChannelOptions::default());
    let caller = tokio::spawn({
        let ch = ch.clone();
        async move { ch.call(probe()).await }
    });
    let req = Header::decode(&read_frame(&mut server).await.unwrap()).unwrap();
    // The probe is an ECHO; say ECHO must not arrive late: nothing is handed back.
    let refused =
        ch.abandon_outstanding(|c| c != Command::ECHO, ConnectionLossCause::ClosedByClient);
    assert_eq!(refused, Err(Command::ECHO));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!caller.is_finished(), "its caller was told nothing");
    write_frame(&mut server, &reply_to(&req, NtStatus::SUCCESS, 1, None)).await;
    caller.await.unwrap().expect("answered where it was sent");
    assert_eq!(ch.cancels_sent(), 0);
}

#[tokio::test]
async fn a_closed_channel_hands_its_requests_back_only_once_the_connection_is_closed() {
    use futures_util::FutureExt;
    let (ch, mut server) = start(ChannelOptions::default());
    let caller = tokio::spawn({
        let ch = ch.clone();
        async move { ch.call(probe()).await }
    });
    read_frame(&mut server).await.unwrap();
    let silent = Duration::from_secs(30);
    ch.close(ConnectionLossCause::Silent { silent });
    assert!(ch.is_dead(), "nothing more is sent on it");
    let e = caller.await.unwrap().unwrap_err();
    assert!(
        matches!(e, Error::ConnectionLost { cause: ConnectionLossCause::Silent { silent: s }, .. } if s == silent),
        "{e:?}"
    );
    // By the time the caller hears of the loss (and could replay the request elsewhere),
    // the connection is closed: nothing it held can reach the server any more.
    let mut byte = [0u8; 1];
    let read = server.read(&mut byte).now_or_never();
    assert!(
        matches!(read, Some(Ok(0))),
        "the connection is still open: {read:?}"
    );
    assert!(matches!(
        ch.dead_reason(),
        Some(ConnectionLossCause::Silent { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn a_compound_without_replies_times_out_once_not_once_per_member() {
    let (ch, mut server) = start(ChannelOptions::default());
    // One answered request first, for the credits a three-member compound needs.
    let warm = tokio::spawn({
        let ch = ch.clone();
        async move { ch.call(probe()).await }
    });
    let first = Header::decode(&read_frame(&mut server).await.unwrap()).unwrap();
    write_frame(&mut server, &reply_to(&first, NtStatus::SUCCESS, 8, None)).await;
    warm.await.unwrap().unwrap();

    let reqs: Vec<Request> = (0..3)
        .map(|_| {
            let mut r = probe();
            r.timeout = Duration::from_secs(60);
            r
        })
        .collect();
    let started = tokio::time::Instant::now();
    let replies = ch.call_compound(reqs, false).await.unwrap();
    assert_eq!(replies.len(), 3);
    for r in &replies {
        assert!(
            matches!(r, Err(crate::Error::Timeout { after, .. }) if *after == Duration::from_secs(60)),
            "{r:?}"
        );
    }
    // The members' timeouts run together from the send (three in turn would be 180 s).
    assert!(
        started.elapsed() < Duration::from_secs(61),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_request_that_waits_without_end_is_answered_like_any_other() {
    // CHANGE_NOTIFY's timeout is Duration::MAX: no deadline may overflow.
    let (ch, mut server) = start(ChannelOptions::default());
    let answer = tokio::spawn(async move {
        let f = read_frame(&mut server).await.unwrap();
        let h = Header::decode(&f).unwrap();
        write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 8, None)).await;
        server
    });
    let mut req = probe();
    req.timeout = Duration::MAX;
    ch.call(req).await.unwrap();
    answer.await.unwrap();
    let now = tokio::time::Instant::now();
    assert!(super::send::deadline(now, Duration::MAX) > now + Duration::from_secs(300 * 24 * 3600));
    assert_eq!(
        super::send::deadline(now, Duration::from_secs(60)),
        now + Duration::from_secs(60)
    );
}

// ---------------------------------------------------------------------------------------------
// Transport-level security (SMB over QUIC, MS-SMB2 2.2.4.1.5)
// ---------------------------------------------------------------------------------------------

/// On a channel that is TLS to a verified server and whose server accepted transport-level
/// security, a request that asks to be encrypted goes out signed, not sealed, and its signed
/// reply is taken. A TCP channel refuses to leave sealing to anyone: the same request is
/// sealed there (here the sealer refuses, and the request fails rather than go out plain).
#[tokio::test]
async fn sealing_is_left_to_tls_only_on_a_verified_tls_channel() {
    let (client_io, mut server) = tokio::io::duplex(1 << 20);
    let (rd, wr) = tokio::io::split(client_io);
    let (ch, _events) =
        Channel::start_verified_tls(rd, wr, addr(), addr(), &ChannelOptions::default());
    ch.set_crypto(Arc::new(MarkerSigner));
    assert!(!ch.sealing_left_to_tls());
    assert!(ch.leave_sealing_to_tls());
    let fake = tokio::spawn(async move {
        let f = read_frame(&mut server).await.unwrap();
        assert_eq!(
            &f[..4],
            b"\xfeSMB",
            "a plain SMB2 message, not a TRANSFORM_HEADER"
        );
        let h = Header::decode(&f).unwrap();
        assert!(h.flags.has(HeaderFlags::SIGNED), "signed instead");
        assert_eq!(f[48..64], MARKER);
        write_frame(&mut server, &reply_to(&h, NtStatus::SUCCESS, 1, None)).await;
        server
    });
    let mut req = probe();
    req.encrypt = true;
    req.sign = true;
    ch.call(req).await.expect("signed, not sealed");
    let _server = fake.await.unwrap();

    let (tcp, _server) = start(ChannelOptions::default());
    tcp.set_crypto(Arc::new(MarkerSigner));
    assert!(!tcp.leave_sealing_to_tls(), "never over TCP");
    assert!(!tcp.sealing_left_to_tls());
    let mut req = probe();
    req.encrypt = true;
    req.sign = true;
    assert!(tcp.call(req).await.is_err(), "sealed or nothing");
}
