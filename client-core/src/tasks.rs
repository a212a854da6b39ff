//! The registry of the library's background tasks: every task the library spawns is started
//! through [`spawn`] with a [`TaskKind`], and counted from the spawn until its future is
//! dropped (finished, cancelled or aborted). A task that outlives its work shows up as a kind
//! whose live count does not return to where it was: the soak compares the counts at rest
//! before and after its faults, and `smbctl status` prints them for a mount.
//!
//! The counts are per process, not per client: a task such as a channel's reader does not know
//! which client it serves, and the front ends that show the counts run one client each.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::task::JoinHandle;

/// What a background task of the library does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum TaskKind {
    /// Reads a channel's socket and routes replies; ends when the connection closes.
    ChannelReader,
    /// Writes a channel's queued frames; ends when the connection closes.
    ChannelWriter,
    /// Passes a channel's unsolicited messages (breaks) to the session; ends with the channel.
    BreakForwarder,
    /// Handles a session's lease and oplock breaks; ends with the session.
    BreakHandler,
    /// Sends one break acknowledgment.
    BreakAck,
    /// Watches a session for the loss of its last channel and reconnects; ends with the
    /// session.
    Reconnector,
    /// Keeps a lease key reserved while the server may still hold a lost durable open.
    LeaseKeyHold,
    /// Looks at the channels for silence; ends with the session.
    Watchdog,
    /// Sends one keep-alive ECHO on a quiet channel.
    KeepAlive,
    /// Probes one suspected channel.
    Probe,
    /// Plans and binds channels, re-queries interfaces; ends with the session.
    ChannelManager,
    /// Wakes the channel manager when one channel's connection dies.
    DeathWatch,
    /// One interface query (FSCTL_QUERY_NETWORK_INTERFACE_INFO) beside binding.
    InterfaceQuery,
    /// Lets a retired channel finish what it carries, then closes it.
    ChannelRetire,
    /// One CLOSE sent after its handle was dropped without `close()`.
    BackgroundClose,
    /// One READ of a streaming reader's read-ahead.
    ReadAhead,
    /// One WRITE of a streaming writer's write-behind.
    WriteBehind,
    /// Drives a tree walk; ends when the walk is done or dropped.
    WalkDriver,
    /// Lists one directory of a tree walk.
    WalkListing,
    /// One call of the blocking facade, run on its runtime.
    BlockingCall,
}

impl TaskKind {
    /// Every kind, in the order [`live`] reports them.
    pub const ALL: [TaskKind; 20] = [
        TaskKind::ChannelReader,
        TaskKind::ChannelWriter,
        TaskKind::BreakForwarder,
        TaskKind::BreakHandler,
        TaskKind::BreakAck,
        TaskKind::Reconnector,
        TaskKind::LeaseKeyHold,
        TaskKind::Watchdog,
        TaskKind::KeepAlive,
        TaskKind::Probe,
        TaskKind::ChannelManager,
        TaskKind::DeathWatch,
        TaskKind::InterfaceQuery,
        TaskKind::ChannelRetire,
        TaskKind::BackgroundClose,
        TaskKind::ReadAhead,
        TaskKind::WriteBehind,
        TaskKind::WalkDriver,
        TaskKind::WalkListing,
        TaskKind::BlockingCall,
    ];

    /// A short name for logs and status output.
    pub fn label(self) -> &'static str {
        match self {
            TaskKind::ChannelReader => "channel-reader",
            TaskKind::ChannelWriter => "channel-writer",
            TaskKind::BreakForwarder => "break-forwarder",
            TaskKind::BreakHandler => "break-handler",
            TaskKind::BreakAck => "break-ack",
            TaskKind::Reconnector => "reconnector",
            TaskKind::LeaseKeyHold => "lease-key-hold",
            TaskKind::Watchdog => "watchdog",
            TaskKind::KeepAlive => "keep-alive",
            TaskKind::Probe => "probe",
            TaskKind::ChannelManager => "channel-manager",
            TaskKind::DeathWatch => "death-watch",
            TaskKind::InterfaceQuery => "interface-query",
            TaskKind::ChannelRetire => "channel-retire",
            TaskKind::BackgroundClose => "background-close",
            TaskKind::ReadAhead => "read-ahead",
            TaskKind::WriteBehind => "write-behind",
            TaskKind::WalkDriver => "walk-driver",
            TaskKind::WalkListing => "walk-listing",
            TaskKind::BlockingCall => "blocking-call",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for TaskKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Tasks started and ended, per kind.
struct Registry {
    started: [AtomicU64; TaskKind::ALL.len()],
    ended: [AtomicU64; TaskKind::ALL.len()],
}

impl Registry {
    const fn new() -> Self {
        Registry {
            started: [const { AtomicU64::new(0) }; TaskKind::ALL.len()],
            ended: [const { AtomicU64::new(0) }; TaskKind::ALL.len()],
        }
    }

    fn counts(&self) -> Vec<TaskCount> {
        TaskKind::ALL
            .iter()
            .map(|&kind| {
                // `ended` is read first: a task that ends between the reads is then counted
                // as still live, never as a negative count.
                let ended = self.ended[kind.index()].load(Ordering::Relaxed);
                let started = self.started[kind.index()].load(Ordering::Relaxed);
                TaskCount {
                    kind,
                    live: started.saturating_sub(ended),
                    started,
                }
            })
            .collect()
    }
}

/// The process's registry.
static REGISTRY: Registry = Registry::new();

/// Counts one task of `kind` as ended when dropped, which happens with the task's future
/// whether it finished, was aborted, or its runtime shut down.
struct Registered(&'static Registry, TaskKind);

impl Registered {
    fn new(registry: &'static Registry, kind: TaskKind) -> Self {
        registry.started[kind.index()].fetch_add(1, Ordering::Relaxed);
        Registered(registry, kind)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.ended[self.1.index()].fetch_add(1, Ordering::Relaxed);
    }
}

/// Wrap `fut` so that it is counted in `registry` as a live task of `kind` until it is
/// dropped.
fn registered_in<F: Future>(
    registry: &'static Registry,
    kind: TaskKind,
    fut: F,
) -> impl Future<Output = F::Output> {
    let registration = Registered::new(registry, kind);
    async move {
        let _registration = registration;
        fut.await
    }
}

fn registered<F: Future>(kind: TaskKind, fut: F) -> impl Future<Output = F::Output> {
    registered_in(&REGISTRY, kind, fut)
}

/// Spawn `fut` on the current runtime as a task of `kind`.
pub(crate) fn spawn<F>(kind: TaskKind, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(registered(kind, fut))
}

/// Spawn `fut` on `runtime` as a task of `kind`.
pub(crate) fn spawn_on<F>(
    runtime: &tokio::runtime::Handle,
    kind: TaskKind,
    fut: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    runtime.spawn(registered(kind, fut))
}

/// Spawn `fut` into `set` as a task of `kind`.
pub(crate) fn spawn_into<T, F>(set: &mut tokio::task::JoinSet<T>, kind: TaskKind, fut: F)
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    set.spawn(registered(kind, fut));
}

/// How many tasks of one kind are alive, and how many were ever started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskCount {
    /// What the tasks do.
    pub kind: TaskKind,
    /// Spawned and not yet ended.
    pub live: u64,
    /// Spawned since the process started.
    pub started: u64,
}

/// The library's background tasks in this process, one entry per kind (every kind, in
/// [`TaskKind::ALL`] order, zeros included).
pub fn live() -> Vec<TaskCount> {
    REGISTRY.counts()
}

/// The library's live background tasks in this process, all kinds together.
pub fn live_total() -> u64 {
    live().iter().map(|c| c.live).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live_of(registry: &Registry, kind: TaskKind) -> u64 {
        registry
            .counts()
            .iter()
            .find(|c| c.kind == kind)
            .map_or(0, |c| c.live)
    }

    #[test]
    fn every_kind_is_listed_once_in_order() {
        for (i, kind) in TaskKind::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind}");
        }
        let labels: std::collections::HashSet<_> =
            TaskKind::ALL.iter().map(|k| k.label()).collect();
        assert_eq!(labels.len(), TaskKind::ALL.len());
        assert_eq!(live().len(), TaskKind::ALL.len());
    }

    #[tokio::test]
    async fn a_task_counts_until_it_ends_or_is_aborted() {
        static OWN: Registry = Registry::new();
        let kind = TaskKind::Probe;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let finishing = tokio::spawn(registered_in(&OWN, kind, async move {
            let _ = rx.await;
        }));
        let pending = tokio::spawn(registered_in(&OWN, kind, std::future::pending::<()>()));
        assert_eq!(live_of(&OWN, kind), 2);
        tx.send(()).unwrap();
        finishing.await.unwrap();
        assert_eq!(live_of(&OWN, kind), 1);
        pending.abort();
        assert!(pending.await.unwrap_err().is_cancelled());
        assert_eq!(live_of(&OWN, kind), 0);
        let started = OWN.counts()[kind.index()].started;
        assert_eq!(started, 2);
    }

    #[test]
    fn a_task_never_polled_is_released_with_its_runtime() {
        static OWN: Registry = Registry::new();
        let kind = TaskKind::ReadAhead;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _never_awaited = rt.spawn(registered_in(&OWN, kind, async {}));
        assert_eq!(live_of(&OWN, kind), 1);
        drop(rt);
        assert_eq!(live_of(&OWN, kind), 0);
    }
}
