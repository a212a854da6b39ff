//! Read-ahead in the daemon for sequential readers, on top of the kernel's (mountpoint-s3's
//! prefetcher is the model).
//!
//! Why a second read-ahead: with `cache=none` the kernel reads nothing ahead, so each
//! `read(2)` would wait a round trip; and the kernel's window is fixed (`max_readahead=`)
//! whatever the number of channels. Here each open handle that reads sequentially gets a
//! window of READs in flight that starts small and doubles with every read served from it,
//! up to `cap`: the `prefetch=` limit, and no more than four READs per channel (what keeps
//! every channel busy, as the library does for one large read).
//!
//! The rules that keep it honest:
//! - A streak starts with a read that begins where the previous one ended (the first read
//!   of a handle at offset 0 counts). Reads that arrive a little out of order (the kernel
//!   sends its read-ahead from several threads) stay in the streak; a read far from it ends
//!   it and drops what was fetched.
//! - Each part is one READ of at most the library's I/O size, so the library neither splits
//!   nor joins it, and nothing is fetched past the size the file had when it was opened
//!   (reads beyond go to the server directly).
//! - Memory is bounded: every part holds permits for its bytes from one budget shared by
//!   the mount; when it is spent nothing more is fetched ahead.
//! - Nothing stale is served: the owner drops the parts when this mount writes or truncates
//!   the file and when a lease break says another client changed it, and a part older than
//!   `ttl` (the attribute cache time) is not served. A part that failed is dropped and the
//!   read goes to the server directly, so an error is the server's own answer to that read.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// What a part's READ gives: its bytes (fewer than asked at end of file), or `None` when it
/// failed.
pub type Fetch = Pin<Box<dyn Future<Output = Option<Bytes>> + Send>>;

/// Where parts are read from: an open file.
pub trait Source {
    /// Read `len` bytes at `offset` (one request).
    fn fetch(&self, offset: u64, len: u32) -> Fetch;
}

impl Source for smb3_client::File {
    fn fetch(&self, offset: u64, len: u32) -> Fetch {
        let file = self.clone();
        Box::pin(async move { file.read_at(offset, len as usize).await.ok() })
    }
}

/// The first window of a streak.
const MIN_WINDOW: u64 = 256 << 10;
/// The smallest part fetched (while the window is small).
const MIN_PART: u32 = 64 << 10;
/// A read this far before or beyond the streak's parts ends it, beyond the kernel's own
/// read-ahead window (whose requests arrive from several threads, in no strict order).
const NEAR: u64 = 8 << 20;
/// Permits are KiB, so a budget of many GiB fits the semaphore's range.
const UNIT: u64 = 1024;

/// Bytes fetched ahead for the whole mount.
#[derive(Debug, Clone)]
pub struct PrefetchBudget {
    permits: Arc<Semaphore>,
}

impl PrefetchBudget {
    /// A budget of `bytes` (at least one 1 MiB part).
    pub fn new(bytes: u64) -> PrefetchBudget {
        let units = (bytes / UNIT).clamp(1024, u64::from(u32::MAX >> 4)) as usize;
        PrefetchBudget {
            permits: Arc::new(Semaphore::new(units)),
        }
    }

    fn take(&self, len: u32) -> Option<OwnedSemaphorePermit> {
        let units = u64::from(len).div_ceil(UNIT).max(1) as u32;
        self.permits.clone().try_acquire_many_owned(units).ok()
    }
}

/// What the prefetchers of a mount did, for the status socket.
#[derive(Debug, Default)]
pub struct PrefetchStats {
    streaks: AtomicU64,
    fetched: AtomicU64,
    served: AtomicU64,
    dropped: AtomicU64,
}

impl PrefetchStats {
    /// The counts as JSON: streaks started, bytes fetched ahead, bytes of READs served from
    /// them, and bytes fetched but dropped unread (a seek, a write, a lease break).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "streaks": self.streaks.load(Ordering::Relaxed),
            "fetched_bytes": self.fetched.load(Ordering::Relaxed),
            "served_bytes": self.served.load(Ordering::Relaxed),
            "dropped_bytes": self.dropped.load(Ordering::Relaxed),
        })
    }
}

/// The limits of one read, from the mount's settings and the file.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest part: the library's I/O size.
    pub part: u32,
    /// Nothing is fetched at or past this offset (the size at open).
    pub size_hint: u64,
    /// Parts older than this are not served.
    pub ttl: Duration,
    /// The kernel's read-ahead window (0 when it reads nothing ahead): its requests for a
    /// window arrive together, so a read up to this far from the streak is still in it.
    pub kernel_window: u64,
}

/// What a part's READ gave, and when it came back.
#[derive(Clone)]
struct Done {
    bytes: Option<Bytes>,
    at: Instant,
}

/// A part's result: `None` while its READ is in flight.
type Slot = watch::Receiver<Option<Done>>;

/// One READ fetched ahead.
struct Part {
    offset: u64,
    len: u32,
    /// `None` while in flight, then what the READ gave.
    result: Slot,
    /// Bytes of it served so far (it is dropped once all were).
    served: u64,
    _permit: OwnedSemaphorePermit,
}

impl Part {
    fn end(&self) -> u64 {
        self.offset + u64::from(self.len)
    }
}

/// The sequential streak of one handle.
#[derive(Default)]
struct Streak {
    /// Fetched parts, in order and contiguous up to `end`.
    parts: VecDeque<Part>,
    /// Where the next part starts; meaningful while `active`.
    end: u64,
    active: bool,
    /// Bytes to keep fetched beyond the furthest read.
    window: u64,
    /// The largest window of this streak.
    cap: u64,
    /// End of the furthest read seen.
    furthest: u64,
    /// How far from the parts a read may be and still belong to the streak.
    near: u64,
}

/// How one read is answered.
enum Plan {
    /// From the streak's parts.
    Streak,
    /// By a READ of its own.
    Direct,
}

/// The read-ahead of one open handle.
pub struct Prefetcher {
    streak: Mutex<Streak>,
    /// Bumped (under the streak's lock) each time the fetched bytes are dropped, so that a
    /// read that checked for writers before a drop fetches nothing after it.
    epoch: AtomicU64,
    budget: PrefetchBudget,
    stats: Arc<PrefetchStats>,
}

impl Prefetcher {
    /// A prefetcher drawing on the mount's `budget`, counting into `stats`.
    pub fn new(budget: PrefetchBudget, stats: Arc<PrefetchStats>) -> Prefetcher {
        Prefetcher {
            streak: Mutex::new(Streak::default()),
            epoch: AtomicU64::new(0),
            budget,
            stats,
        }
    }

    /// The count of drops so far (see [`Prefetcher::read`]).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Answer the read of `size` bytes at `offset` from the parts fetched ahead, fetching
    /// more as the window allows. `None`: read it directly (not sequential, not fetched, the
    /// part failed, or the bytes were dropped since [`Prefetcher::epoch`] returned `epoch`,
    /// the caller's check that nothing writes the file). `cap` gives the largest window when
    /// a streak starts.
    pub async fn read(
        &self,
        source: &impl Source,
        epoch: u64,
        offset: u64,
        size: u32,
        limits: &Limits,
        cap: impl FnOnce() -> u64,
    ) -> Option<Bytes> {
        if size == 0 || limits.ttl.is_zero() {
            return None;
        }
        let end = offset + u64::from(size);
        let waits = {
            let mut s = self.streak.lock().unwrap();
            if self.epoch.load(Ordering::Acquire) != epoch {
                return None;
            }
            // A reader that asked for sequential access (POSIX_FADV_SEQUENTIAL, as fio and
            // cp do) gets twice the kernel's window.
            let near = 2 * limits.kernel_window + NEAR;
            if let Plan::Direct = self.plan(&mut s, offset, end, near, cap) {
                return None;
            }
            self.fill(&mut s, source, limits);
            covering(&s, offset, end, limits.ttl)
        };
        let Some(waits) = waits else {
            // Beyond what may be fetched (past the size at open, budget spent) or too old.
            return None;
        };
        let mut pieces = Vec::with_capacity(waits.len());
        for (part_offset, part_len, mut rx) in waits {
            let got = rx
                .wait_for(Option::is_some)
                .await
                .ok()?
                .clone()
                .and_then(|d| d.bytes);
            match got {
                Some(bytes) => pieces.push((part_offset, part_len, bytes)),
                None => {
                    self.drop_streak();
                    return None;
                }
            }
        }
        let data = assemble(offset, size, &pieces);
        // Dropped while the parts were awaited: what they hold may predate the change, and a
        // new streak may have begun whose parts and window are not this read's to move.
        self.served(epoch, offset, offset + data.len() as u64)
            .then_some(data)
    }

    /// Forget everything fetched (the file changed); a reader that goes on where it was
    /// starts a new streak.
    pub fn drop_streak(&self) {
        let mut s = self.streak.lock().unwrap();
        self.end_streak(&mut s);
    }

    fn end_streak(&self, s: &mut Streak) {
        let unread: u64 = s
            .parts
            .iter()
            .map(|p| u64::from(p.len).saturating_sub(p.served))
            .sum();
        self.stats.dropped.fetch_add(unread, Ordering::Relaxed);
        s.parts.clear();
        s.active = false;
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    fn plan(
        &self,
        s: &mut Streak,
        offset: u64,
        end: u64,
        near: u64,
        cap: impl FnOnce() -> u64,
    ) -> Plan {
        s.near = near;
        let plan = if s.active {
            let first = s.parts.front().map_or(s.end, |p| p.offset);
            if offset >= first && offset <= s.end + near {
                Plan::Streak
            } else if offset < first && offset + near >= first {
                // A late arrival of the kernel's read-ahead, behind what is kept.
                Plan::Direct
            } else {
                tracing::debug!(
                    offset,
                    first,
                    end = s.end,
                    "read far from the streak: ending it"
                );
                self.end_streak(s);
                Plan::Direct
            }
        } else if offset == s.furthest && cap_allows(&mut s.cap, cap) {
            s.active = true;
            s.end = offset;
            s.window = MIN_WINDOW.min(s.cap);
            self.stats.streaks.fetch_add(1, Ordering::Relaxed);
            Plan::Streak
        } else {
            Plan::Direct
        };
        s.furthest = if s.active { s.furthest.max(end) } else { end };
        plan
    }

    /// Fetch parts until the window beyond the furthest read is covered.
    fn fill(&self, s: &mut Streak, source: &impl Source, limits: &Limits) {
        let target = (s.furthest + s.window).min(limits.size_hint);
        while s.end < target {
            let len = (s.window / 2)
                .clamp(u64::from(MIN_PART), u64::from(limits.part.max(MIN_PART)))
                .min(limits.size_hint - s.end) as u32;
            let Some(permit) = self.budget.take(len) else {
                break;
            };
            let (tx, rx) = watch::channel(None);
            let fetch = source.fetch(s.end, len);
            tokio::spawn(async move {
                let bytes = fetch.await;
                let _ = tx.send(Some(Done {
                    bytes,
                    at: Instant::now(),
                }));
            });
            s.parts.push_back(Part {
                offset: s.end,
                len,
                result: rx,
                served: 0,
                _permit: permit,
            });
            self.stats
                .fetched
                .fetch_add(u64::from(len), Ordering::Relaxed);
            s.end += u64::from(len);
        }
    }

    /// `offset..end` was served: count it, grow the window, and drop the parts that were
    /// read whole or that the reader has left far behind. `false` (nothing counted) if the
    /// streak was dropped since `epoch`: the caller reads directly instead.
    fn served(&self, epoch: u64, offset: u64, end: u64) -> bool {
        let mut s = self.streak.lock().unwrap();
        if self.epoch.load(Ordering::Acquire) != epoch {
            return false;
        }
        self.stats.served.fetch_add(end - offset, Ordering::Relaxed);
        for p in s.parts.iter_mut() {
            let overlap = p.end().min(end).saturating_sub(p.offset.max(offset));
            p.served += overlap;
        }
        s.window = (s.window * 2).min(s.cap);
        let furthest = s.furthest;
        while let Some(p) = s.parts.front() {
            let done = p.served >= u64::from(p.len);
            // (Not one still in flight: a late read of it is surely waiting.)
            let left_behind = p.end() + s.near < furthest && p.result.borrow().is_some();
            if !(done || left_behind) {
                break;
            }
            let unread = u64::from(p.len).saturating_sub(p.served);
            self.stats.dropped.fetch_add(unread, Ordering::Relaxed);
            s.parts.pop_front();
        }
        true
    }
}

/// Whether a streak may start: `cap` (asked now) is not 0; it becomes the streak's cap.
fn cap_allows(streak_cap: &mut u64, cap: impl FnOnce() -> u64) -> bool {
    match cap() {
        0 => false,
        c => {
            *streak_cap = c.max(MIN_WINDOW);
            true
        }
    }
}

/// The parts that hold `offset..end`, with a receiver of each one's result; `None` when
/// they do not cover it all or one is too old to serve.
type Waits = Vec<(u64, u32, Slot)>;

fn covering(s: &Streak, offset: u64, end: u64, ttl: Duration) -> Option<Waits> {
    if end > s.end {
        return None;
    }
    let mut waits = Vec::new();
    let mut next = offset;
    for p in s
        .parts
        .iter()
        .filter(|p| p.offset < end && p.end() > offset)
    {
        // Age counts from the reply: a part still in flight is being read at the server now.
        let stale = p
            .result
            .borrow()
            .as_ref()
            .is_some_and(|d| d.at.elapsed() > ttl);
        if p.offset > next || stale {
            return None;
        }
        waits.push((p.offset, p.len, p.result.clone()));
        next = p.end();
    }
    (next >= end).then_some(waits)
}

/// A fetched part's offset, the length asked for, and the bytes it gave.
type Piece = (u64, u32, Bytes);

/// The `size` bytes at `offset` from `pieces` (in order, contiguous): a slice when one piece
/// holds them, else joined. Stops after a piece that gave fewer bytes than asked (the file
/// ended there).
fn assemble(offset: u64, size: u32, pieces: &[Piece]) -> Bytes {
    let end = offset + u64::from(size);
    let slice = |(at, _, bytes): &Piece| -> Bytes {
        let from = (offset.saturating_sub(*at) as usize).min(bytes.len());
        let to = ((end - at) as usize).min(bytes.len());
        bytes.slice(from..to.max(from))
    };
    if let [one] = pieces {
        return slice(one);
    }
    let mut out = BytesMut::with_capacity(size as usize);
    for piece in pieces {
        out.extend_from_slice(&slice(piece));
        if piece.2.len() < piece.1 as usize {
            break;
        }
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in memory that records the READs it answers.
    struct FakeFile {
        bytes: Bytes,
        reads: Mutex<Vec<(u64, u32)>>,
        fail_at: Option<u64>,
    }

    impl FakeFile {
        fn new(len: usize) -> Arc<FakeFile> {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            Arc::new(FakeFile {
                bytes: Bytes::from(bytes),
                reads: Mutex::new(Vec::new()),
                fail_at: None,
            })
        }

        fn reads(&self) -> Vec<(u64, u32)> {
            self.reads.lock().unwrap().clone()
        }

        fn expected(&self, offset: u64, size: u32) -> Bytes {
            let from = (offset as usize).min(self.bytes.len());
            let to = (offset as usize + size as usize).min(self.bytes.len());
            self.bytes.slice(from..to)
        }
    }

    impl Source for Arc<FakeFile> {
        fn fetch(&self, offset: u64, len: u32) -> Fetch {
            self.reads.lock().unwrap().push((offset, len));
            let result = if self
                .fail_at
                .is_some_and(|f| f >= offset && f < offset + u64::from(len))
            {
                None
            } else {
                Some(self.expected(offset, len))
            };
            Box::pin(async move { result })
        }
    }

    const MIB: u64 = 1 << 20;

    fn limits(size_hint: u64) -> Limits {
        Limits {
            part: MIB as u32,
            size_hint,
            ttl: Duration::from_secs(60),
            kernel_window: 0,
        }
    }

    fn prefetcher(budget: u64) -> (Prefetcher, Arc<PrefetchStats>) {
        let stats = Arc::new(PrefetchStats::default());
        (
            Prefetcher::new(PrefetchBudget::new(budget), stats.clone()),
            stats,
        )
    }

    async fn read(p: &Prefetcher, f: &Arc<FakeFile>, offset: u64, size: u32) -> Option<Bytes> {
        p.read(
            f,
            p.epoch(),
            offset,
            size,
            &limits(f.bytes.len() as u64),
            || 16 * MIB,
        )
        .await
    }

    #[tokio::test]
    async fn a_sequential_reader_is_served_from_a_window_that_grows_to_the_cap() {
        let f = FakeFile::new(64 * MIB as usize);
        let (p, stats) = prefetcher(256 * MIB);
        for i in 0..48 {
            let got = read(&p, &f, i * MIB, MIB as u32).await;
            assert_eq!(got, Some(f.expected(i * MIB, MIB as u32)), "read {i}");
        }
        let reads = f.reads();
        // Contiguous parts from 0, none larger than the part size, and growing.
        let mut next = 0;
        for &(off, len) in &reads {
            assert_eq!(off, next);
            assert!(len <= MIB as u32 && len >= MIN_PART);
            next += u64::from(len);
        }
        assert_eq!(reads.first(), Some(&(0, 128 << 10)));
        assert_eq!(reads.last().map(|r| r.1), Some(MIB as u32));
        // The window reached the cap: 16 MiB beyond the furthest read, not more.
        assert_eq!(next, 48 * MIB + 16 * MIB);
        let json = stats.json();
        assert_eq!(json["streaks"], 1);
        assert_eq!(json["served_bytes"], 48 * MIB);
    }

    #[tokio::test]
    async fn reads_out_of_order_stay_in_the_streak() {
        let f = FakeFile::new(16 * MIB as usize);
        let (p, _) = prefetcher(256 * MIB);
        for i in [0, 2, 1, 4, 3, 5] {
            let got = read(&p, &f, i * MIB, MIB as u32).await;
            assert_eq!(got, Some(f.expected(i * MIB, MIB as u32)), "read {i}");
        }
        // Each byte was fetched once.
        let fetched: u64 = f.reads().iter().map(|r| u64::from(r.1)).sum();
        assert_eq!(
            f.reads().len(),
            f.reads()
                .iter()
                .map(|r| r.0)
                .collect::<std::collections::HashSet<_>>()
                .len()
        );
        assert!(fetched <= 16 * MIB);
    }

    #[tokio::test]
    async fn a_cap_of_zero_starts_no_streak() {
        // The kernel's own read-ahead keeps every channel busy: nothing is fetched here.
        let f = FakeFile::new(16 * MIB as usize);
        let (p, stats) = prefetcher(256 * MIB);
        let lim = limits(16 * MIB);
        for i in 0..8 {
            let r = p.read(&f, p.epoch(), i * MIB, MIB as u32, &lim, || 0);
            assert_eq!(r.await, None);
        }
        assert!(f.reads().is_empty());
        assert_eq!(stats.json()["streaks"], 0);
    }

    #[tokio::test]
    async fn a_random_reader_fetches_nothing_ahead() {
        let f = FakeFile::new(64 * MIB as usize);
        let (p, stats) = prefetcher(256 * MIB);
        for off in [40 * MIB, 3 * MIB, 60 * MIB + 4096, 20 * MIB, 33 * MIB] {
            assert_eq!(read(&p, &f, off, 4096).await, None);
        }
        assert!(f.reads().is_empty());
        assert_eq!(stats.json()["streaks"], 0);
    }

    #[tokio::test]
    async fn a_seek_ends_the_streak_and_reading_on_starts_another() {
        let f = FakeFile::new(64 * MIB as usize);
        let (p, stats) = prefetcher(256 * MIB);
        for i in 0..4 {
            assert!(read(&p, &f, i * MIB, MIB as u32).await.is_some());
        }
        assert_eq!(read(&p, &f, 40 * MIB, MIB as u32).await, None);
        assert!(stats.json()["dropped_bytes"].as_u64().unwrap() > 0);
        let got = read(&p, &f, 41 * MIB, MIB as u32).await;
        assert_eq!(got, Some(f.expected(41 * MIB, MIB as u32)));
        assert_eq!(stats.json()["streaks"], 2);
    }

    #[tokio::test]
    async fn nothing_is_fetched_past_the_size_at_open_and_a_short_part_ends_the_read() {
        let f = FakeFile::new((2 * MIB + 1000) as usize);
        let (p, _) = prefetcher(256 * MIB);
        // Told the file is larger than it is (it shrank): the short part is served short.
        let lim = limits(3 * MIB);
        let mut got = Vec::new();
        for i in 0..3 {
            let r = p
                .read(&f, p.epoch(), i * MIB, MIB as u32, &lim, || 16 * MIB)
                .await;
            got.push(r.map(|b| b.len()));
        }
        assert_eq!(
            got,
            vec![Some(MIB as usize), Some(MIB as usize), Some(1000)]
        );
        assert!(f
            .reads()
            .iter()
            .all(|&(off, len)| off + u64::from(len) <= 3 * MIB));
        // Past the size at open: read directly.
        let r = p
            .read(&f, p.epoch(), 3 * MIB, 4096, &lim, || 16 * MIB)
            .await;
        assert_eq!(r, None);
    }

    #[tokio::test]
    async fn a_failed_part_sends_the_read_to_the_server() {
        let mut file = FakeFile::new(16 * MIB as usize);
        Arc::get_mut(&mut file).unwrap().fail_at = Some(MIB + 5);
        let (p, _) = prefetcher(256 * MIB);
        assert!(read(&p, &file, 0, MIB as u32).await.is_some());
        assert_eq!(read(&p, &file, MIB, MIB as u32).await, None);
    }

    #[tokio::test]
    async fn dropped_bytes_are_never_served_and_a_stale_epoch_reads_directly() {
        let f = FakeFile::new(16 * MIB as usize);
        let (p, _) = prefetcher(256 * MIB);
        assert!(read(&p, &f, 0, MIB as u32).await.is_some());
        let before = p.epoch();
        p.drop_streak();
        let lim = limits(16 * MIB);
        assert_eq!(
            p.read(&f, before, MIB, MIB as u32, &lim, || 16 * MIB).await,
            None
        );
        // With the new epoch the reader goes on in a new streak, fetched afresh.
        let n = f.reads().len();
        assert!(p
            .read(&f, p.epoch(), MIB, MIB as u32, &lim, || 16 * MIB)
            .await
            .is_some());
        assert!(f.reads().len() > n);
    }

    /// A file whose READs are answered only once the gate opens.
    struct GatedFile {
        file: Arc<FakeFile>,
        gate: Arc<tokio::sync::Semaphore>,
    }

    impl Source for GatedFile {
        fn fetch(&self, offset: u64, len: u32) -> Fetch {
            let answer = self.file.fetch(offset, len);
            let gate = self.gate.clone();
            Box::pin(async move {
                let _open = gate.acquire().await;
                answer.await
            })
        }
    }

    #[tokio::test]
    async fn a_streak_dropped_while_its_parts_are_awaited_serves_and_counts_nothing() {
        let f = FakeFile::new(16 * MIB as usize);
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let gated = GatedFile {
            file: f.clone(),
            gate: gate.clone(),
        };
        let (p, stats) = prefetcher(256 * MIB);
        let lim = limits(16 * MIB);
        let reader = p.read(&gated, p.epoch(), 0, MIB as u32, &lim, || 16 * MIB);
        let change = async {
            // Once the reader waits on its parts, the file changes under it.
            for _ in 0..10_000 {
                if !f.reads().is_empty() {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert!(!f.reads().is_empty(), "the reader fetched nothing ahead");
            p.drop_streak();
            gate.add_permits(1 << 20);
        };
        let (got, ()) = tokio::join!(reader, change);
        assert_eq!(got, None, "bytes fetched before the change were served");
        assert_eq!(stats.json()["served_bytes"], 0);
    }

    #[tokio::test]
    async fn a_spent_budget_stops_fetching_ahead() {
        let f = FakeFile::new(64 * MIB as usize);
        let (p, _) = prefetcher(2 * MIB);
        let mut served = 0;
        for i in 0..16 {
            if read(&p, &f, i * MIB, MIB as u32).await.is_some() {
                served += 1;
            }
        }
        assert!(served > 0);
        let outstanding: u64 = f.reads().iter().map(|r| u64::from(r.1)).sum::<u64>() - served * MIB;
        assert!(outstanding <= 2 * MIB, "{outstanding}");
    }

    #[tokio::test]
    async fn parts_older_than_the_ttl_are_not_served() {
        let f = FakeFile::new(16 * MIB as usize);
        let (p, _) = prefetcher(256 * MIB);
        let lim = Limits {
            ttl: Duration::from_millis(200),
            ..limits(16 * MIB)
        };
        assert!(p
            .read(&f, p.epoch(), 0, MIB as u32, &lim, || 16 * MIB)
            .await
            .is_some());
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            p.read(&f, p.epoch(), MIB, MIB as u32, &lim, || 16 * MIB)
                .await,
            None
        );
    }

    #[test]
    fn assemble_slices_one_piece_and_joins_several() {
        let a = Bytes::from(vec![1u8; 100]);
        let b = Bytes::from(vec![2u8; 100]);
        let one = assemble(10, 50, &[(0, 100, a.clone())]);
        assert_eq!(one.len(), 50);
        let two = assemble(90, 20, &[(0, 100, a.clone()), (100, 100, b.clone())]);
        assert_eq!(&two[..], &[[1u8; 10], [2u8; 10]].concat()[..]);
        // The first piece ended early: the file ends there.
        let short = assemble(50, 100, &[(0, 100, a.slice(..80)), (100, 100, b)]);
        assert_eq!(short.len(), 30);
    }
}
