//! The replay loop against in-memory peers: which channel a lost request goes to, with which
//! flags and ChannelSequence, and when it is not sent again. No network; the tests about
//! time run on tokio's paused clock, so they assert exact instants without sleeping.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use smb3_proto::header::{Header, HeaderFlags};
use smb3_proto::msg::echo::EchoRequest;
use smb3_proto::replay::{Replay, ReplayHazard};
use smb3_proto::{Command, NtStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::{call, ReplayContext};
use crate::addressing::{Addressing, Target};
use crate::channel::{Channel, ChannelOptions, Request};
use crate::config::Dispatch;
use crate::error::{
    ConnectionLossCause, Error, FileChange, HandleLossCause, ReclaimRefusal, ReopenFailure,
};
use crate::failover::stats::FailoverState;
use crate::multichannel::channel_set::{ChannelSet, PathInfo};

const SESSION: u64 = 0x55;

/// How the fake server treats the requests it reads.
#[derive(Clone, Copy)]
pub(crate) enum Peer {
    /// Read one request, then drop the connection (the client sees it closed).
    DiesAfterOne,
    /// Answer each request with the next status of the list (the last one repeats).
    Answers(&'static [NtStatus]),
    /// Read requests and never answer, keeping the connection open (a path that went silent).
    Silent,
}

/// The requests one peer received: header, whole message, and when (tokio's clock).
pub(crate) type Seen = Arc<Mutex<Vec<(Header, Vec<u8>, tokio::time::Instant)>>>;

fn headers(seen: &Seen) -> Vec<Header> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|(h, _, _)| h.clone())
        .collect()
}

/// When each request reached the peer, as time since `start`.
pub(crate) fn arrivals(seen: &Seen, start: tokio::time::Instant) -> Vec<Duration> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|(_, _, at)| at.duration_since(start))
        .collect()
}

pub(crate) fn channel(port: u16, peer: Peer) -> (Channel, Seen) {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (rd, wr) = tokio::io::split(ours);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let (ch, _unsolicited) = Channel::start(rd, wr, addr, addr, &ChannelOptions::default());
    let seen: Seen = Arc::default();
    tokio::spawn(serve(theirs, peer, seen.clone()));
    (ch, seen)
}

async fn serve(mut io: DuplexStream, peer: Peer, seen: Seen) {
    let mut answered = 0usize;
    loop {
        let mut len = [0u8; 4];
        if io.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize & 0x00FF_FFFF];
        if io.read_exact(&mut frame).await.is_err() {
            return;
        }
        let header = Header::decode(&frame).unwrap();
        seen.lock()
            .unwrap()
            .push((header.clone(), frame.clone(), tokio::time::Instant::now()));
        match peer {
            Peer::DiesAfterOne => return,
            Peer::Silent => continue,
            Peer::Answers(statuses) => {
                let status = statuses[answered.min(statuses.len() - 1)];
                answered += 1;
                let reply = reply_to(&header, status);
                // Direct TCP transport header: a zero byte and a 24-bit length.
                let mut out = Vec::from((reply.len() as u32).to_be_bytes());
                out.extend_from_slice(&reply);
                if io.write_all(&out).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn reply_to(req: &Header, status: NtStatus) -> BytesMut {
    let h = Header {
        status,
        command: req.command,
        credits: 8,
        credit_charge: req.credit_charge,
        flags: HeaderFlags(HeaderFlags::SERVER_TO_REDIR),
        message_id: req.message_id,
        session_id: req.session_id,
        tree_id: req.tree_id,
        ..Header::default()
    };
    let mut out = BytesMut::new();
    h.encode(&mut out);
    out.put_u16_le(4);
    out.put_u16_le(0);
    out
}

fn context<'a>(set: &'a ChannelSet, failover: &'a FailoverState, back: bool) -> ReplayContext<'a> {
    // One per test for the test's duration: leaked, it lives as long as the borrows need.
    let addressing: &'static Addressing = Box::leak(Box::new(Addressing::new(SESSION, None)));
    ReplayContext {
        channels: set,
        addressing,
        failover,
        smb3: true,
        channels_return: back,
        failover_wait: Duration::from_millis(300),
        internal: false,
        manager: None,
    }
}

/// One ECHO through the replay loop.
async fn send_echo(
    set: &ChannelSet,
    failover: &FailoverState,
    channels_return: bool,
    replay: Replay,
) -> crate::error::Result<crate::channel::Response> {
    let request = Request::new(&EchoRequest {});
    call(
        &context(set, failover, channels_return),
        request,
        &Target::default(),
        Command::ECHO,
        replay,
    )
    .await
}

/// A set whose first channel dies after reading one request and whose second answers.
fn dying_then_answering() -> (ChannelSet, Seen, Seen) {
    let (a, seen_a) = channel(1, Peer::DiesAfterOne);
    let (b, seen_b) = channel(2, Peer::Answers(&[NtStatus::SUCCESS]));
    let set = ChannelSet::new(a, Dispatch::RoundRobin);
    set.add(b, None, PathInfo::default(), false);
    (set, seen_a, seen_b)
}

fn replayed(h: &Header) -> bool {
    h.flags.has(HeaderFlags::REPLAY_OPERATION)
}

#[tokio::test]
async fn a_request_lost_with_its_channel_is_replayed_on_the_survivor() {
    let (set, seen_a, seen_b) = dying_then_answering();
    let failover = FailoverState::default();

    let resp = send_echo(&set, &failover, true, Replay::Safe)
        .await
        .unwrap();

    assert_eq!(resp.header.status, NtStatus::SUCCESS);
    assert!(resp.resent, "the caller learns the reply answers a resend");
    let first = headers(&seen_a);
    let second = headers(&seen_b);
    assert_eq!(first.len(), 1);
    assert!(!replayed(&first[0]));
    assert_eq!(first[0].channel_sequence(), 0);
    assert_eq!(second.len(), 1);
    assert!(replayed(&second[0]), "the resend carries REPLAY_OPERATION");
    assert_eq!(
        second[0].channel_sequence(),
        1,
        "ChannelSequence moved past the lost copy"
    );
    let c = failover.snapshot();
    assert_eq!((c.replays, c.not_replayed, c.channel_sequence), (1, 0, 1));
    assert!(c.last_failover.is_some());
}

#[tokio::test]
async fn a_request_unsafe_to_repeat_fails_with_connection_lost() {
    let (set, _seen_a, seen_b) = dying_then_answering();
    let failover = FailoverState::default();

    let err = send_echo(&set, &failover, true, Replay::Unsafe(ReplayHazard::Lock))
        .await
        .unwrap_err();

    // The error names the rule that kept the request from being sent again, and how its
    // channel was lost (the fake peer hung up).
    match &err {
        Error::ConnectionLost {
            command: Command::ECHO,
            cause: ConnectionLossCause::NotReplayable { hazard, loss },
        } => {
            assert_eq!(*hazard, ReplayHazard::Lock);
            assert!(
                matches!(**loss, ConnectionLossCause::ClosedByServer),
                "{loss:?}"
            );
        }
        other => panic!("expected a request not replayed, got {other:?}"),
    }
    assert!(seen_b.lock().unwrap().is_empty(), "nothing was resent");
    let c = failover.snapshot();
    assert_eq!((c.replays, c.not_replayed), (0, 1));
}

#[tokio::test]
async fn a_request_refused_as_stale_is_replayed_with_the_flag() {
    let (a, seen) = channel(
        1,
        Peer::Answers(&[NtStatus::FILE_NOT_AVAILABLE, NtStatus::SUCCESS]),
    );
    let set = ChannelSet::new(a, Dispatch::RoundRobin);
    let failover = FailoverState::default();

    let resp = send_echo(&set, &failover, false, Replay::Safe)
        .await
        .unwrap();

    assert_eq!(resp.header.status, NtStatus::SUCCESS);
    let seen = headers(&seen);
    assert_eq!(seen.len(), 2);
    assert!(!replayed(&seen[0]));
    assert!(replayed(&seen[1]));
    assert_eq!(failover.snapshot().replays, 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_refused_as_stale_again_and_again_is_resent_after_pauses_doubling_to_half_a_second(
) {
    let (a, seen) = channel(1, Peer::Answers(&[NtStatus::FILE_NOT_AVAILABLE]));
    let set = ChannelSet::new(a, Dispatch::RoundRobin);
    let failover = FailoverState::default();
    let start = tokio::time::Instant::now();

    let resp = send_echo(&set, &failover, false, Replay::Safe)
        .await
        .unwrap();

    // After the last resend the server's answer is the caller's.
    assert_eq!(resp.header.status, NtStatus::FILE_NOT_AVAILABLE);
    let at = arrivals(&seen, start);
    assert_eq!(at.len(), 1 + super::MAX_RESENDS as usize);
    let pauses: Vec<u64> = at
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis() as u64)
        .collect();
    let mut expected = vec![5, 10, 20, 40, 80, 160, 320];
    expected.resize(super::MAX_RESENDS as usize, 500);
    assert_eq!(pauses, expected);
    assert_eq!(at[0], Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn with_no_channel_left_and_none_coming_back_the_error_is_immediate() {
    let (a, _seen) = channel(1, Peer::DiesAfterOne);
    let set = ChannelSet::new(a, Dispatch::RoundRobin);
    let failover = FailoverState::default();
    let started = tokio::time::Instant::now();

    let err = send_echo(&set, &failover, false, Replay::Safe)
        .await
        .unwrap_err();

    // No channel came back after the peer hung up.
    match &err {
        Error::ConnectionLost {
            cause: ConnectionLossCause::NoChannel { loss: Some(loss) },
            ..
        } => assert!(
            matches!(**loss, ConnectionLossCause::ClosedByServer),
            "{loss:?}"
        ),
        other => panic!("expected no channel, got {other:?}"),
    }
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(failover.snapshot().not_replayed, 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_waits_for_a_channel_to_come_back_within_the_failover_wait() {
    let (a, _seen_a) = channel(1, Peer::DiesAfterOne);
    let set = Arc::new(ChannelSet::new(a, Dispatch::RoundRobin));
    let failover = FailoverState::default();
    let (b, seen_b) = channel(2, Peer::Answers(&[NtStatus::SUCCESS]));
    let later = set.clone();
    let start = tokio::time::Instant::now();
    // Not a multiple of any polling step: the request must go the instant the channel is
    // added, woken by it.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(103)).await;
        later.add(b, None, PathInfo::default(), false);
    });

    let resp = send_echo(&set, &failover, true, Replay::Safe)
        .await
        .unwrap();

    assert_eq!(resp.header.status, NtStatus::SUCCESS);
    assert_eq!(arrivals(&seen_b, start), [Duration::from_millis(103)]);
    assert!(resp.resent);
}

#[tokio::test(start_paused = true)]
async fn a_request_waits_for_a_suspected_channel_to_return_to_service() {
    let (a, _seen_a) = channel(1, Peer::DiesAfterOne);
    let set = Arc::new(ChannelSet::new(a, Dispatch::RoundRobin));
    let (b, seen_b) = channel(2, Peer::Answers(&[NtStatus::SUCCESS]));
    let suspected = set.add(b, None, PathInfo::default(), false);
    suspected.suspect();
    let failover = FailoverState::default();
    let start = tokio::time::Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(77)).await;
        // Its probe was answered.
        suspected.clear_suspicion();
    });

    let resp = send_echo(&set, &failover, true, Replay::Safe)
        .await
        .unwrap();

    assert_eq!(resp.header.status, NtStatus::SUCCESS);
    assert_eq!(arrivals(&seen_b, start), [Duration::from_millis(77)]);
}

/// A set whose only channel dies with the first request, under a manager (eligible for
/// multichannel) whose binding rounds the test drives.
fn managed_dying() -> crate::multichannel::state::Multichannel {
    let (a, _) = channel(1, Peer::DiesAfterOne);
    let mc = crate::multichannel::state::Multichannel::new(
        a,
        &crate::config::ClientConfig::default(),
        Ok(()),
    );
    mc.binding_round_done();
    mc
}

fn managed_context<'a>(
    mc: &'a crate::multichannel::state::Multichannel,
    failover: &'a FailoverState,
) -> ReplayContext<'a> {
    let mut s = context(&mc.channels, failover, true);
    s.manager = Some(mc);
    s.failover_wait = Duration::from_secs(30);
    s
}

/// What `background::reconnect` does when the session is back: a binding round starts, the new
/// channel joins.
fn reestablish(mc: &crate::multichannel::state::Multichannel, port: u16) -> Seen {
    let (b, seen) = channel(port, Peer::Answers(&[NtStatus::SUCCESS]));
    mc.rebinding_begins();
    mc.channels.add(b, None, PathInfo::default(), true);
    seen
}

#[tokio::test(start_paused = true)]
async fn after_a_reestablished_session_requests_hold_back_until_the_binding_round_ends() {
    let mc = Arc::new(managed_dying());
    let failover = FailoverState::default();
    let start = tokio::time::Instant::now();
    let manager = tokio::spawn({
        let mc = mc.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let seen = reestablish(&mc, 2);
            tokio::time::sleep(Duration::from_millis(200)).await;
            mc.binding_round_done();
            seen
        }
    });

    call(
        &managed_context(&mc, &failover),
        Request::new(&EchoRequest {}),
        &Target::default(),
        Command::ECHO,
        Replay::Safe,
    )
    .await
    .unwrap();

    let seen = manager.await.unwrap();
    assert_eq!(arrivals(&seen, start), [Duration::from_millis(250)]);
}

#[tokio::test(start_paused = true)]
async fn a_binding_round_that_does_not_end_holds_requests_back_for_at_most_the_spread_wait() {
    let mc = Arc::new(managed_dying());
    let failover = FailoverState::default();
    let start = tokio::time::Instant::now();
    let manager = tokio::spawn({
        let mc = mc.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            reestablish(&mc, 2)
        }
    });

    call(
        &managed_context(&mc, &failover),
        Request::new(&EchoRequest {}),
        &Target::default(),
        Command::ECHO,
        Replay::Safe,
    )
    .await
    .unwrap();

    let seen = manager.await.unwrap();
    assert_eq!(
        arrivals(&seen, start),
        [Duration::from_millis(50) + super::SPREAD_WAIT]
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_waiting_across_a_reconnect_goes_out_with_the_new_ids() {
    use smb3_proto::msg::flush::FlushRequest;
    use smb3_proto::msg::FileId;

    use crate::addressing::{FileIdentity, OpenParams, OpenState, ServerHandle};

    let (a, _seen_a) = channel(1, Peer::DiesAfterOne);
    let set = Arc::new(ChannelSet::new(a, Dispatch::RoundRobin));
    let failover = FailoverState::default();
    let addressing = Arc::new(Addressing::new(SESSION, None));
    let tree = addressing.trees.add("data", 3, false);
    let old_id = FileId {
        persistent: 1,
        volatile: 2,
    };
    let open = Arc::new(OpenState::new(
        ServerHandle {
            file_id: old_id,
            create_guid: None,
            durable: None,
        },
        tree,
        OpenParams {
            wire_path: "f".into(),
            desired_access: 0,
            share_access: 0,
            create_options: 0,
            file_attributes: 0,
            timewarp: None,
            file_id_name: None,
            posix: false,
        },
        None,
        FileIdentity {
            creation_time: 0,
            disk_id: None,
        },
    ));
    let new_id = FileId {
        persistent: 1,
        volatile: 0x99,
    };
    // What a session reconnect does: new SessionId, TreeId and FileId, then a channel.
    let (b, seen_b) = channel(2, Peer::Answers(&[NtStatus::SUCCESS]));
    let (later, ids, reopened) = (set.clone(), addressing.clone(), open.clone());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ids.session.replace(0x77, None);
        ids.trees.reconnected(tree.handle, 8);
        reopened.replace_file_id(new_id);
        later.add(b, None, PathInfo::default(), false);
    });
    let mut ctx = context(&set, &failover, true);
    ctx.addressing = &addressing;
    let target = Target {
        tree: Some(tree),
        open: Some(open.clone()),
    };
    let request = Request::new(&FlushRequest { file_id: old_id });

    call(&ctx, request, &target, Command::FLUSH, Replay::Safe)
        .await
        .unwrap();

    let seen = seen_b.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let (header, frame, _) = &seen[0];
    assert_eq!((header.session_id, header.tree_id), (0x77, 8));
    let at = smb3_proto::header::HEADER_LEN + 8;
    assert_eq!(frame[at..at + 8], 1u64.to_le_bytes(), "persistent half");
    assert_eq!(
        frame[at + 8..at + 16],
        0x99u64.to_le_bytes(),
        "new volatile half"
    );

    // Once the open is known lost, the request fails naming it instead of being sent.
    open.mark_lost(HandleLossCause::NotReclaimed {
        refusal: ReclaimRefusal::Expired,
        reopen: ReopenFailure::AnotherFile(FileChange::CreationTime),
    });
    let request = Request::new(&FlushRequest { file_id: new_id });
    let err = call(&ctx, request, &target, Command::FLUSH, Replay::Safe)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::HandleLost {
            path: Some(p),
            cause: HandleLossCause::NotReclaimed {
                refusal: ReclaimRefusal::Expired,
                reopen: ReopenFailure::AnotherFile(FileChange::CreationTime),
            },
            ..
        } if p == "f"),
        "{err}"
    );
    assert_eq!(seen_b.lock().unwrap().len(), 1, "nothing more was sent");
}

#[tokio::test(start_paused = true)]
async fn a_request_timing_out_on_a_channel_that_said_nothing_closes_it() {
    let (a, seen_a) = channel(1, Peer::Silent);
    let set = ChannelSet::new(a, Dispatch::RoundRobin);
    let failover = FailoverState::default();
    let mut request = Request::new(&EchoRequest {});
    request.timeout = Duration::from_millis(50);
    let start = tokio::time::Instant::now();
    let e = call(
        &context(&set, &failover, true),
        request,
        &Target::default(),
        Command::ECHO,
        Replay::Safe,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert_eq!(start.elapsed(), Duration::from_millis(50));
    assert_eq!(seen_a.lock().unwrap().len(), 1);
    // The channel is closed, as silent: the next request does not wait out another timeout
    // there.
    assert!(!set.any_usable());
    assert!(matches!(
        set.active()[0].channel.dead_reason(),
        Some(ConnectionLossCause::Silent { .. })
    ));
    let started = tokio::time::Instant::now();
    let e = send_echo(&set, &failover, false, Replay::Safe)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ConnectionLost {
                cause: ConnectionLossCause::NoChannel { loss: None },
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn requests_made_later_in_one_outage_give_up_with_its_first() {
    let (a, _seen_a) = channel(1, Peer::DiesAfterOne);
    let set = ChannelSet::new(a, Dispatch::RoundRobin);
    let failover = FailoverState::default();
    // The first request waits the whole failover wait (300 ms) for a channel, not a moment
    // longer.
    let started = tokio::time::Instant::now();
    let e = send_echo(&set, &failover, true, Replay::Safe)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::ConnectionLost { .. }), "{e:?}");
    assert_eq!(started.elapsed(), Duration::from_millis(300));
    // The outage goes on: later requests do not wait 300 ms each.
    for _ in 0..3 {
        tokio::time::advance(Duration::from_millis(40)).await;
        let started = tokio::time::Instant::now();
        let e = send_echo(&set, &failover, true, Replay::Safe)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::ConnectionLost { .. }), "{e:?}");
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
    // A channel back ends the outage: the next one that goes waits the whole wait again.
    let (b, _seen_b) = channel(2, Peer::Answers(&[NtStatus::SUCCESS]));
    set.add(b, None, PathInfo::default(), false);
    send_echo(&set, &failover, true, Replay::Safe)
        .await
        .unwrap();
    let now = tokio::time::Instant::now().into_std();
    assert_eq!(
        failover.outage_deadline(now, Duration::ZERO),
        now,
        "a new outage starts now"
    );
}

#[tokio::test(start_paused = true)]
async fn losses_in_quick_succession_leave_the_session_time_to_come_back() {
    // A server still going down or coming up: whenever the session has no channel, one comes
    // back (a reconnect) and dies with the first request it takes. After a second the server
    // is itself again. Resent at once each time, the request would use up its resends in
    // milliseconds and fail; paced, it is still there when a good channel comes.
    let (first, _) = channel(1, Peer::DiesAfterOne);
    let set = Arc::new(ChannelSet::new(first, Dispatch::RoundRobin));
    let server = tokio::spawn({
        let set = set.clone();
        async move {
            let started = tokio::time::Instant::now();
            let mut port = 2;
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                if set.any_usable() {
                    continue;
                }
                if started.elapsed() < Duration::from_secs(1) {
                    let (dying, _) = channel(port, Peer::DiesAfterOne);
                    set.add(dying, None, PathInfo::default(), false);
                    port += 1;
                } else {
                    let (good, seen) = channel(port, Peer::Answers(&[NtStatus::SUCCESS]));
                    set.add(good, None, PathInfo::default(), false);
                    return seen;
                }
            }
        }
    });
    let failover = FailoverState::default();

    let resp = send_echo(&set, &failover, true, Replay::Safe)
        .await
        .expect("answered once the server is itself again");

    assert_eq!(resp.header.status, NtStatus::SUCCESS);
    let seen = server.await.unwrap();
    assert_eq!(headers(&seen).len(), 1, "the good channel got it");
    let c = failover.snapshot();
    assert_eq!(c.not_replayed, 0);
    assert!(c.replays <= 16, "{c:?}");
}

#[tokio::test(start_paused = true)]
async fn a_request_lost_every_time_it_is_sent_gives_up_naming_its_resends() {
    // Whenever the session has no channel one comes back, and it dies with the first
    // request it takes, for ever.
    let (first, _) = channel(1, Peer::DiesAfterOne);
    let set = Arc::new(ChannelSet::new(first, Dispatch::RoundRobin));
    let server = tokio::spawn({
        let set = set.clone();
        async move {
            let mut port = 2;
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                if !set.any_usable() {
                    let (dying, _) = channel(port, Peer::DiesAfterOne);
                    set.add(dying, None, PathInfo::default(), false);
                    port += 1;
                }
            }
        }
    });
    let failover = FailoverState::default();

    let err = send_echo(&set, &failover, true, Replay::Safe)
        .await
        .unwrap_err();
    server.abort();

    match &err {
        Error::ConnectionLost {
            command: Command::ECHO,
            cause: ConnectionLossCause::TooManyResends { resends, loss },
        } => {
            assert_eq!(*resends, super::MAX_RESENDS);
            assert!(
                matches!(**loss, ConnectionLossCause::ClosedByServer),
                "{loss:?}"
            );
        }
        other => panic!("expected too many resends, got {other:?}"),
    }
    assert_eq!(failover.snapshot().not_replayed, 1);
}
