//! Directory watches that keep the kernel's cached names and attributes true to the server.
//!
//! The kernel keeps what LOOKUP and GETATTR returned for `actimeo`; on its own, a file that
//! another client deletes, renames or rewrites looks unchanged here for that long. So the
//! mount watches the directories in use (listed, or looked up in) with the library's
//! CHANGE_NOTIFY watches and, when the server reports a change, tells the kernel which names
//! and attributes to forget: the next access asks the server. A change made by this mount
//! comes back too and costs one extra LOOKUP or GETATTR at most.
//!
//! Each watch holds an open directory and a pending request at the server, so the set is
//! bounded (`watch_dirs`, least recently used out first) and a watch whose directory nobody
//! used for [`DirWatches::idle`] ends. Directories not watched keep the `actimeo` bound.
//!
//! After a batch of changes the next request waits [`REARM_PAUSE`]: the server keeps what
//! changes meanwhile for it, so a burst (this mount's own writes into a watched directory
//! complete a request every few WRITEs) costs one round trip per pause instead of one per
//! batch. The first change after a quiet spell is still reported at once.
//!
//! The open directory is a handle like any other to the server: it keeps a removed
//! directory's name in use until it is closed, and an open handle below a directory makes
//! the server refuse to rename it. So the mount ends the watches at and below a directory
//! before it removes or renames it ([`DirWatches::end_at_or_below`]).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use smb3_client::{Change, Share, WatchFilter, WatchScope};

use crate::inode::{at_or_below, InodeTable};
use crate::sfm::NameMap;

/// Something the kernel must forget because the server said it changed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stale {
    /// The cached entry `name` of directory `parent`: the name was added, removed or renamed.
    Entry {
        /// The directory's node.
        parent: u64,
        /// The name in it.
        name: String,
    },
    /// The cached attributes of a node (its data, size, times or attributes changed; for a
    /// directory, its entries).
    Attrs(u64),
    /// A file's cached pages and attributes (a lease break took Read caching away).
    Pages(u64),
}

/// Where [`Stale`] batches go: the mount hands them to the kernel.
pub type StaleSink = Arc<dyn Fn(Vec<Stale>) + Send + Sync>;

/// How long a watch waits after a batch of changes before it asks for the next one.
pub const REARM_PAUSE: Duration = Duration::from_millis(100);

/// How long ending watches may take (their CLOSEs) before a removal, rename or unmount goes
/// ahead anyway.
const END_PATIENCE: Duration = Duration::from_secs(5);

/// What a watch reports: names, sizes, times, attributes (not security or access times,
/// which the mount does not show).
fn filter() -> WatchFilter {
    WatchFilter::NAMES | WatchFilter::SIZE | WatchFilter::LAST_WRITE | WatchFilter::ATTRIBUTES
}

/// One watched directory.
struct Watched {
    /// Which watch this is (a directory evicted and watched again gets a new one).
    generation: u64,
    /// When the directory was last used, in milliseconds since [`DirWatches::epoch`].
    last_used: AtomicU64,
    /// The task that runs the watch; `None` when setting it up failed (retried once the
    /// directory has been unused for a while, not on every lookup).
    task: Option<tokio::task::JoinHandle<()>>,
    /// Told, the task closes the directory and ends (see [`DirWatches::end_at_or_below`]).
    end: Arc<tokio::sync::Notify>,
    /// The server holds the watch's request: changes from now on are reported.
    armed: bool,
    /// When the entry was made.
    since: Instant,
}

type Registry = Mutex<HashMap<u64, Watched>>;

/// The mount's directory watches (see the module notes).
pub struct DirWatches {
    share: Share,
    inodes: Arc<Mutex<InodeTable>>,
    /// How the server's names are shown (the names in its change reports).
    names: NameMap,
    cap: usize,
    idle: Duration,
    sink: OnceLock<StaleSink>,
    watched: Arc<Registry>,
    epoch: Instant,
    next_generation: AtomicU64,
    sweeper_started: AtomicBool,
}

impl DirWatches {
    /// At most `cap` watches on `share` (0: none), each ending after `idle` unused.
    pub fn new(
        share: Share,
        inodes: Arc<Mutex<InodeTable>>,
        cap: usize,
        idle: Duration,
        names: NameMap,
    ) -> DirWatches {
        DirWatches {
            share,
            inodes,
            names,
            cap,
            idle,
            sink: OnceLock::new(),
            watched: Arc::new(Mutex::new(HashMap::new())),
            epoch: Instant::now(),
            next_generation: AtomicU64::new(1),
            sweeper_started: AtomicBool::new(false),
        }
    }

    /// Start watching: from now on, directories in use are watched and what changes in them
    /// goes to `sink`. Set once.
    pub fn deliver_to(&self, sink: StaleSink) {
        let _ = self.sink.set(sink);
    }

    /// Directories watched now (the server holds their requests).
    pub fn count(&self) -> usize {
        self.watched
            .lock()
            .unwrap()
            .values()
            .filter(|w| w.armed)
            .count()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The directory `dir` is being used: keep its watch, or say that one should start
    /// (then call [`DirWatches::start`] with its path). Cheap: called on every lookup.
    pub fn wants(&self, dir: u64) -> bool {
        if self.cap == 0 || self.sink.get().is_none() {
            return false;
        }
        let now = self.now_ms();
        let watched = self.watched.lock().unwrap();
        match watched.get(&dir) {
            Some(w) => {
                w.last_used.store(now, Ordering::Relaxed);
                w.task.is_none() && w.since.elapsed() >= self.idle
            }
            None => true,
        }
    }

    /// Watch `dir`, whose path on the share is `path`, making room if need be. Must run
    /// inside the tokio runtime.
    pub fn start(&self, dir: u64, path: String) {
        let Some(sink) = self.sink.get().cloned() else {
            return;
        };
        self.start_sweeper();
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let mut watched = self.watched.lock().unwrap();
        if let Some(w) = watched.get(&dir) {
            if w.task.is_some() || w.since.elapsed() < self.idle {
                return; // another lookup started it meanwhile, or it failed lately
            }
        }
        if !watched.contains_key(&dir) && watched.len() >= self.cap {
            let oldest = watched
                .iter()
                .min_by_key(|(_, w)| w.last_used.load(Ordering::Relaxed))
                .map(|(&d, _)| d);
            if let Some(w) = oldest.and_then(|d| watched.remove(&d)) {
                if let Some(task) = w.task {
                    task.abort();
                }
            }
        }
        let end = Arc::new(tokio::sync::Notify::new());
        let task = tokio::spawn(run(Watch {
            share: self.share.clone(),
            dir,
            path,
            generation,
            inodes: self.inodes.clone(),
            names: self.names,
            sink,
            registry: Arc::downgrade(&self.watched),
            end: end.clone(),
        }));
        watched.insert(
            dir,
            Watched {
                generation,
                last_used: AtomicU64::new(self.now_ms()),
                task: Some(task),
                end,
                armed: false,
                since: Instant::now(),
            },
        );
    }

    /// End the watches of `path` and of the directories below it, and wait (a bounded time)
    /// until the server has closed their directories: before the mount removes or renames
    /// `path` (see the module notes). `path_of` gives a watched directory's path now. The
    /// next use of a directory watches it again. The future says how many ended.
    pub fn end_at_or_below(
        &self,
        path: &str,
        path_of: impl Fn(u64) -> Option<String>,
    ) -> impl Future<Output = usize> + Send + 'static {
        // Paths come from the inode table: not looked up under the registry's lock.
        let dirs: Vec<u64> = self.watched.lock().unwrap().keys().copied().collect();
        let ending: HashSet<u64> = dirs
            .into_iter()
            .filter(|&dir| path_of(dir).is_some_and(|p| at_or_below(&p, path)))
            .collect();
        self.end_where(move |dir| ending.contains(&dir))
    }

    /// End every watch, closing their directories, and wait (a bounded time) for those
    /// CLOSEs: at unmount, before the session logs off. The future says how many ended.
    pub fn end_all(&self) -> impl Future<Output = usize> + Send + 'static {
        self.end_where(|_| true)
    }

    /// End the watches of the directories `which` picks; the future waits for them and says
    /// how many there were.
    fn end_where(
        &self,
        which: impl Fn(u64) -> bool,
    ) -> impl Future<Output = usize> + Send + 'static {
        let tasks: Vec<_> = {
            let mut watched = self.watched.lock().unwrap();
            let ending: Vec<u64> = watched.keys().copied().filter(|&d| which(d)).collect();
            ending
                .iter()
                .filter_map(|dir| watched.remove(dir))
                .filter_map(|w| {
                    w.end.notify_one();
                    w.task
                })
                .collect()
        };
        async move {
            let ended = tasks.len();
            // The tasks run on their own: one bound for them all.
            let all = async {
                for task in tasks {
                    let _ = task.await;
                }
            };
            if tokio::time::timeout(END_PATIENCE, all).await.is_err() {
                tracing::debug!("directory watches did not end in time");
            }
            ended
        }
    }

    /// Abort every watch at once (their directories are closed in the background).
    pub fn stop_all(&self) {
        for (_, w) in self.watched.lock().unwrap().drain() {
            if let Some(task) = w.task {
                task.abort();
            }
        }
    }

    /// One task for the whole mount ends the watches of directories unused for `idle`.
    fn start_sweeper(&self) {
        if self.sweeper_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let registry = Arc::downgrade(&self.watched);
        let (epoch, idle) = (self.epoch, self.idle);
        let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                let Some(registry) = registry.upgrade() else {
                    return;
                };
                let now = epoch.elapsed().as_millis() as u64;
                let idle_ms = idle.as_millis() as u64;
                registry.lock().unwrap().retain(|dir, w| {
                    let used = w.last_used.load(Ordering::Relaxed);
                    let keep = now.saturating_sub(used) < idle_ms || w.task.is_none();
                    if !keep {
                        tracing::debug!(dir, "directory unused: watch ends");
                        if let Some(task) = &w.task {
                            task.abort();
                        }
                    }
                    keep
                });
            }
        });
    }
}

impl Drop for DirWatches {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// What one watch task needs.
struct Watch {
    share: Share,
    dir: u64,
    path: String,
    generation: u64,
    inodes: Arc<Mutex<InodeTable>>,
    names: NameMap,
    sink: StaleSink,
    registry: Weak<Registry>,
    end: Arc<tokio::sync::Notify>,
}

impl Watch {
    /// Change this watch's entry, if it is still this watch's.
    fn update(&self, change: impl FnOnce(&mut Watched)) {
        if let Some(registry) = self.registry.upgrade() {
            if let Some(entry) = registry.lock().unwrap().get_mut(&self.dir) {
                if entry.generation == self.generation {
                    change(entry);
                }
            }
        }
    }
}

/// Run one watch until it fails, is told to end (it closes the directory first: removal,
/// rename, unmount), or is aborted (eviction, idleness, the watches dropped: dropping the
/// `DirWatch` cancels its request and closes the directory in the background).
async fn run(w: Watch) {
    let mut watch = match w
        .share
        .watch(&w.path, filter(), WatchScope::Directory)
        .await
    {
        Ok(watch) => watch,
        Err(e) => {
            // Kept as failed, so lookups do not retry it until it has been unused a while.
            tracing::debug!(path = %w.path, error = %e, "cannot watch directory");
            w.update(|entry| entry.task = None);
            return;
        }
    };
    tracing::debug!(path = %w.path, "watching directory");
    w.update(|entry| entry.armed = true);
    loop {
        let next = tokio::select! {
            biased;
            _ = w.end.notified() => {
                // Dropping the pending `next()` cancelled its request; closing now (not in
                // the background) is what lets the removal or rename that asked go through.
                if let Err(e) = watch.close().await {
                    tracing::debug!(path = %w.path, error = %e, "closing a watched directory");
                }
                return;
            }
            next = watch.next() => next,
        };
        match next {
            Ok(changes) => {
                let changes = local_names(&changes, w.names);
                let stale = stale_of(w.dir, &changes, &w.inodes.lock().unwrap());
                if !stale.is_empty() {
                    (w.sink)(stale);
                }
                // The pause ends early when the watch is told to end: the loop's `select!`
                // then sees the stored notification.
                tokio::select! {
                    _ = w.end.notified() => w.end.notify_one(),
                    _ = tokio::time::sleep(REARM_PAUSE) => {}
                }
            }
            Err(e) => {
                // Deleted directory, a session set up again (the handle is gone), ...: what
                // changed meanwhile is unknown, so forget what is cached of the directory,
                // and let the next use watch it again.
                tracing::debug!(path = %w.path, error = %e, "directory watch ended");
                let stale = stale_of(w.dir, &[Change::Rescan], &w.inodes.lock().unwrap());
                (w.sink)(stale);
                break;
            }
        }
    }
    if let Some(registry) = w.registry.upgrade() {
        let mut registry = registry.lock().unwrap();
        if registry.get(&w.dir).map(|e| e.generation) == Some(w.generation) {
            registry.remove(&w.dir);
        }
    }
}

/// `changes` with the names as the kernel knows them (the server reports them as it keeps
/// them, see [`crate::sfm`]).
fn local_names(changes: &[Change], names: NameMap) -> Vec<Change> {
    let local = |n: &String| names.to_local(n).into_owned();
    changes
        .iter()
        .map(|c| match c {
            Change::Added(n) => Change::Added(local(n)),
            Change::Removed(n) => Change::Removed(local(n)),
            Change::Modified(n) => Change::Modified(local(n)),
            Change::RenamedFrom(n) => Change::RenamedFrom(local(n)),
            Change::RenamedTo(n) => Change::RenamedTo(local(n)),
            Change::StreamAdded(n) => Change::StreamAdded(local(n)),
            Change::StreamRemoved(n) => Change::StreamRemoved(local(n)),
            Change::StreamModified(n) => Change::StreamModified(local(n)),
            other => other.clone(),
        })
        .collect()
}

/// What the kernel must forget after `changes` in directory `dir` (a watch that is not
/// recursive: every path is a name in `dir`).
pub fn stale_of(dir: u64, changes: &[Change], inodes: &InodeTable) -> Vec<Stale> {
    let mut out: Vec<Stale> = Vec::new();
    let mut seen: HashSet<Stale> = HashSet::new();
    let mut push = |s: Stale| {
        if seen.insert(s.clone()) {
            out.push(s);
        }
    };
    for change in changes {
        match change {
            Change::Added(name)
            | Change::Removed(name)
            | Change::RenamedFrom(name)
            | Change::RenamedTo(name)
            | Change::Other { path: name, .. } => {
                push(Stale::Entry {
                    parent: dir,
                    name: name.clone(),
                });
                if let Some(child) = inodes.child(dir, name) {
                    push(Stale::Attrs(child)); // its link count, or what it became
                }
                push(Stale::Attrs(dir)); // its times and size
            }
            Change::Modified(name)
            | Change::StreamAdded(name)
            | Change::StreamRemoved(name)
            | Change::StreamModified(name) => {
                if let Some(child) = inodes.child(dir, name) {
                    push(Stale::Attrs(child));
                }
            }
            // `Rescan` (the server lost track), or a kind of change not known here (`Change`
            // may grow): forget everything known in the directory.
            _ => {
                push(Stale::Attrs(dir));
                for (name, child) in inodes.children_of(dir) {
                    push(Stale::Entry { parent: dir, name });
                    push(Stale::Attrs(child));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inode::ROOT;

    fn entry(parent: u64, name: &str) -> Stale {
        Stale::Entry {
            parent,
            name: name.into(),
        }
    }

    #[test]
    fn name_changes_forget_the_entry_the_node_and_the_directory() {
        let mut t = InodeTable::new();
        let dir = t.remember(ROOT, "d", 100);
        let a = t.remember(dir, "a.txt", 200);
        let got = stale_of(
            dir,
            &[
                Change::Removed("a.txt".into()),
                Change::Added("new.txt".into()),
            ],
            &t,
        );
        assert_eq!(
            got,
            vec![
                entry(dir, "a.txt"),
                Stale::Attrs(a),
                Stale::Attrs(dir),
                entry(dir, "new.txt"),
            ]
        );
    }

    #[test]
    fn a_modified_file_loses_its_attributes_only_when_known() {
        let mut t = InodeTable::new();
        let a = t.remember(ROOT, "a.txt", 200);
        assert_eq!(
            stale_of(ROOT, &[Change::Modified("a.txt".into())], &t),
            vec![Stale::Attrs(a)]
        );
        assert!(stale_of(ROOT, &[Change::Modified("unknown".into())], &t).is_empty());
    }

    #[test]
    fn a_rename_forgets_both_names_once_each() {
        let mut t = InodeTable::new();
        let a = t.remember(ROOT, "old", 300);
        let got = stale_of(
            ROOT,
            &[
                Change::RenamedFrom("old".into()),
                Change::RenamedTo("new".into()),
                Change::Modified("new".into()),
            ],
            &t,
        );
        assert_eq!(
            got,
            vec![
                entry(ROOT, "old"),
                Stale::Attrs(a),
                Stale::Attrs(ROOT),
                entry(ROOT, "new"),
            ]
        );
    }

    #[test]
    fn a_rescan_forgets_everything_known_in_the_directory() {
        let mut t = InodeTable::new();
        let dir = t.remember(ROOT, "d", 100);
        let a = t.remember(dir, "a", 200);
        let elsewhere = t.remember(ROOT, "b", 300);
        let got = stale_of(dir, &[Change::Rescan], &t);
        assert_eq!(
            got,
            vec![Stale::Attrs(dir), entry(dir, "a"), Stale::Attrs(a)]
        );
        assert!(!got.contains(&Stale::Attrs(elsewhere)));
    }
}
