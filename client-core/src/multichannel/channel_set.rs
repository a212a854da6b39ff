//! The channels of one session and the choice of which one carries the next request
//! (DESIGN §3 step 6). A request and its reply always share a channel: the caller gets a
//! `Channel` handle and makes the whole call on it.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use smb3_proto::Command;
use tokio::sync::watch;

use crate::channel::Channel;
use crate::config::Dispatch;
use crate::error::{ConnectionLossCause, Error, Result};
use crate::multichannel::planner::{Slot, SlotKey};
use crate::multichannel::report::{ChannelInfo, ChannelState};

/// How many closed channels' final counters are kept.
const RETIRED_KEPT: usize = 256;

/// Which NIC pair a channel runs over, as far as the client knows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PathInfo {
    /// The local interface's name (`eth0`), empty when unknown.
    pub(crate) local_name: String,
    pub(crate) local_if_index: u32,
    /// The server's IfIndex from its interface list (0 when not matched to one).
    pub(crate) server_if_index: u32,
    pub(crate) rss: bool,
    pub(crate) rdma: bool,
    /// Pair link speed in bits per second, when known.
    pub(crate) link_speed: Option<u64>,
}

impl PathInfo {
    pub(crate) fn of_slot(slot: &Slot) -> PathInfo {
        PathInfo {
            local_name: slot.local_name.clone(),
            local_if_index: slot.local_if_index,
            server_if_index: slot.server_if_index,
            rss: slot.rss,
            rdma: slot.rdma,
            link_speed: slot.link_speed,
        }
    }
}

/// One channel of the session.
#[derive(Debug)]
pub(crate) struct Member {
    /// Unique within the session, so a death notice finds the right member.
    pub(crate) id: u64,
    pub(crate) channel: Channel,
    /// The planner slot this channel fills; `None` for the first channel until a plan
    /// claims it (or when no plan wants its pair).
    pub(crate) slot: Mutex<Option<SlotKey>>,
    pub(crate) path: Mutex<PathInfo>,
    /// The connection the session was set up on.
    pub(crate) primary: bool,
    /// Found making no progress (or its link down): out of dispatch while an ECHO probe
    /// decides between back into service and closed. Private so that every way back into
    /// service goes through [`Member::clear_suspicion`], which tells the waiters.
    suspected: AtomicBool,
    /// An ECHO probe is under way.
    pub(crate) probing: AtomicBool,
    /// The set's signal, raised when this channel returns to service.
    usable_signal: UsableSignal,
}

/// Raised whenever a channel may have become usable: one joined the set, or a suspected one
/// returned to service. A channel's connection never comes back once dead, and suspicion
/// only ends through [`Member::clear_suspicion`], so these are the only ways a set gains a
/// usable channel, and a waiter needs no timer to notice one.
///
/// A generation counter in a `watch`: a receiver taken (or last woken) before the waiter
/// checks [`ChannelSet::any_usable`] sees every raise after that check, so no wake-up falls
/// between the check and the wait.
#[derive(Clone, Debug)]
pub(crate) struct UsableSignal(Arc<watch::Sender<u64>>);

impl UsableSignal {
    fn new() -> UsableSignal {
        UsableSignal(Arc::new(watch::Sender::new(0)))
    }

    fn raise(&self) {
        self.0
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// A receiver that has seen every raise so far; `changed()` completes at the next one.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

impl Member {
    pub(crate) fn slot(&self) -> Option<SlotKey> {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Alive and not under suspicion: may carry new requests.
    pub(crate) fn usable(&self) -> bool {
        !self.channel.is_dead() && !self.is_suspected()
    }

    /// Out of dispatch while a probe decides (see [`Member::suspect`]).
    pub(crate) fn is_suspected(&self) -> bool {
        self.suspected.load(Ordering::Acquire)
    }

    /// Take the channel out of dispatch: it made no progress, or its link is down.
    pub(crate) fn suspect(&self) {
        self.suspected.store(true, Ordering::Release);
    }

    /// Back into service (its probe was answered): requests waiting for a usable channel
    /// are woken.
    pub(crate) fn clear_suspicion(&self) {
        if self.suspected.swap(false, Ordering::AcqRel) {
            self.usable_signal.raise();
        }
    }

    pub(crate) fn path(&self) -> PathInfo {
        self.path.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A snapshot for status; `state` overrides Active (Failed always wins).
    pub(crate) fn info(&self, state: Option<ChannelState>) -> ChannelInfo {
        let m = self;
        let ch = &m.channel;
        let (requests, bytes_sent, bytes_received) = ch.counters();
        let failure = ch.dead_reason().map(|cause| cause.to_string());
        let path = m.path();
        ChannelInfo {
            transport: if ch.verified_tls() {
                crate::config::Transport::Quic
            } else {
                crate::config::Transport::Tcp
            },
            sealing_left_to_tls: ch.sealing_left_to_tls(),
            local: ch.local(),
            server: ch.peer(),
            local_interface: path.local_name,
            local_if_index: path.local_if_index,
            server_if_index: path.server_if_index,
            rss: path.rss,
            rdma: path.rdma,
            link_speed: path.link_speed,
            primary: m.primary,
            state: match (state, &failure) {
                (_, Some(_)) => ChannelState::Failed,
                (None, None) if m.is_suspected() => ChannelState::Suspected,
                (Some(s), None) => s,
                (None, None) => ChannelState::Active,
            },
            requests,
            bytes_sent,
            bytes_received,
            credits: ch.credits_total(),
            outstanding: ch.outstanding(),
            cancels_sent: ch.cancels_sent(),
            failure,
        }
    }

    /// Whether this channel runs from `local` to `server` (addresses only).
    pub(crate) fn runs(&self, local: IpAddr, server: IpAddr) -> bool {
        self.channel.local().ip() == local && self.channel.peer().ip() == server
    }
}

/// The session's live channels, channels being drained, and the dispatch policy.
#[derive(Debug)]
pub(crate) struct ChannelSet {
    active: RwLock<Vec<Arc<Member>>>,
    /// Taken out of dispatch (their interface went away); kept until their last request
    /// is answered so status can show them.
    draining: Mutex<Vec<Arc<Member>>>,
    /// Final counters of channels gone from the session, newest last (at most
    /// `RETIRED_KEPT`), so totals still add up after a channel closes.
    retired: Mutex<Vec<ChannelInfo>>,
    next: AtomicUsize,
    next_id: AtomicU64,
    policy: Dispatch,
    usable_signal: UsableSignal,
}

impl ChannelSet {
    pub(crate) fn new(primary: Channel, policy: Dispatch) -> ChannelSet {
        let set = ChannelSet {
            active: RwLock::new(Vec::new()),
            draining: Mutex::new(Vec::new()),
            retired: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            policy,
            usable_signal: UsableSignal::new(),
        };
        set.add(primary, None, PathInfo::default(), true);
        set
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Member>>> {
        self.active.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<Member>>> {
        self.active.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn policy(&self) -> Dispatch {
        self.policy
    }

    /// Add a channel to dispatch; returns the new member.
    pub(crate) fn add(
        &self,
        channel: Channel,
        slot: Option<SlotKey>,
        path: PathInfo,
        primary: bool,
    ) -> Arc<Member> {
        let member = Arc::new(Member {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            channel,
            slot: Mutex::new(slot),
            path: Mutex::new(path),
            primary,
            suspected: AtomicBool::new(false),
            probing: AtomicBool::new(false),
            usable_signal: self.usable_signal.clone(),
        });
        self.write().push(member.clone());
        // After the push: a waiter woken by this sees the new member.
        self.usable_signal.raise();
        member
    }

    /// The signal raised whenever a channel may have become usable (see [`UsableSignal`]).
    pub(crate) fn usable_signal(&self) -> &UsableSignal {
        &self.usable_signal
    }

    /// The channels in dispatch now (dead ones included until the manager removes them).
    pub(crate) fn active(&self) -> Vec<Arc<Member>> {
        self.read().clone()
    }

    /// Channels taken out of dispatch whose last requests are still outstanding.
    pub(crate) fn draining(&self) -> Vec<Arc<Member>> {
        let mut d = self.draining.lock().unwrap_or_else(|e| e.into_inner());
        let (still, done): (Vec<_>, Vec<_>) = d
            .drain(..)
            .partition(|m| m.channel.outstanding() > 0 && !m.channel.is_dead());
        *d = still;
        drop(d);
        for m in done {
            self.retire(&m);
        }
        self.draining
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Channels gone from the session, with their final counters.
    pub(crate) fn retired(&self) -> Vec<ChannelInfo> {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn retire(&self, m: &Member) {
        let mut info = m.info(Some(ChannelState::Closed));
        if info.failure.is_some() {
            info.state = ChannelState::Failed;
        }
        let mut r = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        if r.len() >= RETIRED_KEPT {
            r.remove(0);
        }
        r.push(info);
    }

    /// Take `id` out of dispatch. With `drain`, requests already sent on it finish there (the
    /// callers hold the channel) and it closes after the last; otherwise it is forgotten.
    pub(crate) fn remove(&self, id: u64, drain: bool) -> Option<Arc<Member>> {
        let removed = {
            let mut active = self.write();
            let pos = active.iter().position(|m| m.id == id)?;
            active.remove(pos)
        };
        if drain && removed.channel.outstanding() > 0 {
            self.draining
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(removed.clone());
        } else {
            self.retire(&removed);
        }
        Some(removed)
    }

    /// Whether some channel's connection is still open (usable or suspected).
    pub(crate) fn any_alive(&self) -> bool {
        self.read().iter().any(|m| !m.channel.is_dead())
    }

    /// How many channels may carry new requests now.
    pub(crate) fn usable_count(&self) -> usize {
        self.read().iter().filter(|m| m.usable()).count()
    }

    /// Whether some channel may carry new requests now.
    pub(crate) fn any_usable(&self) -> bool {
        self.read().iter().any(|m| m.usable())
    }

    /// Whether a channel other than `id` may carry new requests now.
    pub(crate) fn any_usable_besides(&self, id: u64) -> bool {
        self.read().iter().any(|m| m.id != id && m.usable())
    }

    /// The channel to authenticate the session again on: its first connection when that is
    /// usable, else any usable one.
    pub(crate) fn for_session_setup(&self) -> Result<Channel> {
        let members = self.read();
        members
            .iter()
            .filter(|m| m.usable())
            .max_by_key(|m| m.primary)
            .map(|m| m.channel.clone())
            .ok_or(Error::ConnectionLost {
                command: Command::SESSION_SETUP,
                cause: ConnectionLossCause::NoChannel { loss: None },
            })
    }

    /// The channel for the next request of `charge` credits.
    ///
    /// Round-robin takes the next live channel in turn that has the credits free now,
    /// skipping busy ones (what Windows does); least-loaded takes the live channel with the
    /// fewest credits, that is bytes, in flight. When no channel has the credits free, the
    /// one whose turn it is gets the request and it waits there for credits.
    pub(crate) fn pick(&self, charge: u16, command: Command) -> Result<Channel> {
        let members = self.read();
        let live: Vec<&Arc<Member>> = members.iter().filter(|m| m.usable()).collect();
        if live.is_empty() {
            return Err(Error::ConnectionLost {
                command,
                cause: ConnectionLossCause::NoChannel { loss: None },
            });
        }
        if live.len() == 1 {
            return Ok(live[0].channel.clone());
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % live.len();
        let turn = |i: usize| live[(start + i) % live.len()];
        let charge = u32::from(charge.max(1));
        let chosen = match self.policy {
            Dispatch::RoundRobin => (0..live.len())
                .map(turn)
                .find(|m| m.channel.load().0 >= charge)
                .unwrap_or_else(|| turn(0)),
            Dispatch::LeastLoaded => (0..live.len())
                .map(turn)
                .min_by_key(|m| m.channel.load().1)
                .unwrap_or_else(|| turn(0)),
        };
        Ok(chosen.channel.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::SocketAddr;
    use std::time::Duration;

    use smb3_proto::msg::echo::EchoRequest;
    use tokio::io::DuplexStream;

    use super::*;
    use crate::channel::{ChannelOptions, Request};

    /// A channel to a peer that reads nothing and answers nothing: it holds one credit (a
    /// fresh connection's) until a request takes it. Keep the peer end to keep it alive.
    fn silent_channel(port: u16) -> (Channel, DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (rd, wr) = tokio::io::split(ours);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let (ch, _unsolicited) = Channel::start(rd, wr, addr, addr, &ChannelOptions::default());
        (ch, theirs)
    }

    fn set_of(n: u16, policy: Dispatch) -> (ChannelSet, Vec<DuplexStream>) {
        let mut peers = Vec::new();
        let (first, p) = silent_channel(1000);
        peers.push(p);
        let set = ChannelSet::new(first, policy);
        for i in 1..n {
            let (ch, p) = silent_channel(1000 + i);
            peers.push(p);
            set.add(ch, None, PathInfo::default(), false);
        }
        (set, peers)
    }

    fn port_of(ch: &Channel) -> u16 {
        ch.peer().port()
    }

    /// Send one ECHO on `ch` that will never be answered: it holds the channel's credit.
    fn occupy(ch: &Channel) -> tokio::task::JoinHandle<()> {
        let ch = ch.clone();
        let mut req = Request::new(&EchoRequest {});
        req.timeout = Duration::from_secs(60);
        tokio::spawn(async move {
            let _ = ch.call(req).await;
        })
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn round_robin_takes_each_channel_in_turn() {
        let (set, _peers) = set_of(3, Dispatch::RoundRobin);
        let mut counts = BTreeMap::new();
        for _ in 0..30 {
            let ch = set.pick(1, Command::READ).unwrap();
            *counts.entry(port_of(&ch)).or_insert(0) += 1;
        }
        assert_eq!(counts, BTreeMap::from([(1000, 10), (1001, 10), (1002, 10)]));
    }

    #[tokio::test]
    async fn round_robin_skips_a_channel_without_free_credits() {
        let (set, _peers) = set_of(3, Dispatch::RoundRobin);
        let busy = set.active()[1].channel.clone();
        let _held = occupy(&busy);
        settle().await;
        assert_eq!(busy.load(), (0, 1));
        for _ in 0..12 {
            let ch = set.pick(1, Command::READ).unwrap();
            assert_ne!(port_of(&ch), 1001, "picked the channel with no credits");
        }
        // A charge no channel can cover right now still goes somewhere, to wait there.
        assert!(set.pick(8, Command::READ).is_ok());
    }

    #[tokio::test]
    async fn least_loaded_takes_the_channel_with_least_in_flight() {
        let (set, _peers) = set_of(3, Dispatch::LeastLoaded);
        let members = set.active();
        let _a = occupy(&members[0].channel);
        let _b = occupy(&members[2].channel);
        settle().await;
        for _ in 0..6 {
            assert_eq!(port_of(&set.pick(1, Command::READ).unwrap()), 1001);
        }
    }

    #[tokio::test]
    async fn dead_channels_are_skipped_and_none_left_is_connection_lost() {
        let (set, mut peers) = set_of(2, Dispatch::RoundRobin);
        let first = set.active()[0].channel.clone();
        // The peer hangs up: the reader sees EOF and the channel dies.
        drop(peers.remove(0));
        let watch = first.death_watch();
        tokio::time::timeout(Duration::from_secs(5), watch.wait())
            .await
            .expect("channel dies");
        for _ in 0..4 {
            assert_eq!(port_of(&set.pick(1, Command::READ).unwrap()), 1001);
        }
        drop(peers.remove(0));
        let second = set.active()[1].channel.clone();
        tokio::time::timeout(Duration::from_secs(5), second.death_watch().wait())
            .await
            .expect("channel dies");
        assert!(matches!(
            set.pick(1, Command::WRITE),
            Err(Error::ConnectionLost {
                command: Command::WRITE,
                cause: ConnectionLossCause::NoChannel { loss: None },
            })
        ));
    }

    /// What `replay::wait_for_usable_channel` relies on: a receiver taken before the look at
    /// the set sees a channel that becomes usable between that look and the wait.
    #[tokio::test]
    async fn a_channel_usable_between_the_look_and_the_wait_is_not_missed() {
        let (set, _peers) = set_of(1, Dispatch::RoundRobin);
        let first = set.active()[0].clone();
        first.suspect();

        let mut changes = set.usable_signal().subscribe();
        assert!(!set.any_usable());
        // Between the look and the wait: the probe is answered.
        first.clear_suspicion();
        assert!(
            changes.has_changed().unwrap(),
            "the return to service is seen"
        );
        changes.changed().await.unwrap();

        assert!(!changes.has_changed().unwrap());
        // Between the next look and the wait: a channel is bound.
        let (second, _peer) = silent_channel(1001);
        set.add(second, None, PathInfo::default(), false);
        assert!(changes.has_changed().unwrap(), "the new channel is seen");
        assert!(set.any_usable());
    }

    #[tokio::test]
    async fn only_a_return_to_service_raises_the_signal() {
        let (set, _peers) = set_of(1, Dispatch::RoundRobin);
        let first = set.active()[0].clone();
        let changes = set.usable_signal().subscribe();
        first.suspect();
        first.clear_suspicion();
        assert!(changes.has_changed().unwrap());
        let changes = set.usable_signal().subscribe();
        // Not suspected: nothing returned to service, no waiter to wake.
        first.clear_suspicion();
        assert!(!changes.has_changed().unwrap());
    }

    #[tokio::test]
    async fn removed_channels_keep_their_final_counters() {
        let (set, _peers) = set_of(2, Dispatch::RoundRobin);
        let id = set.active()[1].id;
        let held = occupy(&set.active()[1].channel);
        settle().await;
        // Draining: out of dispatch, still listed while its request is outstanding.
        set.remove(id, true).expect("member");
        assert_eq!(set.active().len(), 1);
        assert_eq!(set.draining().len(), 1);
        assert!(set.retired().is_empty());
        for _ in 0..4 {
            assert_eq!(port_of(&set.pick(1, Command::READ).unwrap()), 1000);
        }
        held.abort();
        let _ = held.await;
        // The abandoned request's entry stays pending (the reply could still come), so the
        // member drains only when the connection ends; a plain removal retires at once.
        let id0 = set.active()[0].id;
        set.remove(id0, false).expect("member");
        let retired = set.retired();
        assert_eq!(retired.len(), 1);
        assert_eq!(retired[0].server.port(), 1000);
        assert_eq!(retired[0].state, ChannelState::Closed);
    }
}
