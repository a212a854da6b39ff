//! Runs a file's chunk transfers with many in flight, unordered, but never more than
//! [`SPAN`] bytes ahead of the first unfinished chunk.
//!
//! Why the bound: the destination of an interrupted copy (a `.partial` file) then has every
//! byte below `its size - SPAN` written, holes can only be in the last `SPAN` bytes, and
//! `--resume` can continue from there (see `resume.rs`) without trusting the whole file.
//! Unbounded out-of-order completion (one chunk stuck on a slow channel while hundreds pass
//! it) would leave holes anywhere. The bound is wide enough that it rarely holds anything
//! back: 64 chunks of 1 MiB, four per channel for 16 channels.

use std::collections::BTreeSet;
use std::future::Future;

use futures_util::stream::{FuturesUnordered, StreamExt};

/// How far (bytes) a started chunk's end may be beyond the first unfinished chunk's offset.
pub(crate) const SPAN: u64 = 64 * 1024 * 1024;

/// Call `f(offset, len)` for each chunk of `[start, end)` (chunks of `chunk` bytes, the last
/// one shorter), at most `depth()` at once and within [`SPAN`]; stop at the first error.
///
/// `depth` is asked again before each chunk starts: it follows the session's channels as
/// they bind, so a copy starts at once on the first channel and widens as others join.
pub(crate) async fn for_each_chunk<D, F, Fut, E>(
    start: u64,
    end: u64,
    chunk: u32,
    depth: D,
    mut f: F,
) -> Result<(), E>
where
    D: Fn() -> usize,
    F: FnMut(u64, u32) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let chunk = u64::from(chunk.max(1));
    let count = end.saturating_sub(start).div_ceil(chunk);
    let offset = |i: u64| start + i * chunk;
    let len = |i: u64| (end - offset(i)).min(chunk) as u32;
    let mut in_flight = FuturesUnordered::new();
    // Chunks finished above the first unfinished one (`low`).
    let mut done_above = BTreeSet::new();
    let (mut low, mut next) = (0u64, 0u64);
    loop {
        while next < count
            && in_flight.len() < depth().max(1)
            // Always allow one chunk, even if a chunk is wider than SPAN.
            && (next == low || offset(next) + u64::from(len(next)) <= offset(low) + SPAN)
        {
            let i = next;
            let fut = f(offset(i), len(i));
            in_flight.push(async move { (i, fut.await) });
            next += 1;
        }
        let Some((i, result)) = in_flight.next().await else {
            return Ok(());
        };
        result?;
        done_above.insert(i);
        while done_above.remove(&low) {
            low += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn every_chunk_once_within_the_span() {
        let chunk = 4 * 1024 * 1024u32;
        let end = 10 * SPAN + 123;
        let seen = Rc::new(RefCell::new(Vec::new()));
        let finished = Rc::new(RefCell::new(BTreeSet::new()));
        let counter = AtomicU64::new(0);
        for_each_chunk(
            100,
            end,
            chunk,
            || 1000,
            |off, len| {
                let (seen, finished) = (seen.clone(), finished.clone());
                // Chunk 0 of every 40 is slow: others overtake it up to the span.
                let slow = counter.fetch_add(1, Ordering::Relaxed) % 40 == 0;
                async move {
                    let low = {
                        let fin = finished.borrow();
                        (100..)
                            .step_by(chunk as usize)
                            .find(|o| !fin.contains(o))
                            .unwrap()
                    };
                    assert!(
                        off + u64::from(len) <= low + SPAN,
                        "{off} beyond {low}+SPAN"
                    );
                    seen.borrow_mut().push((off, len));
                    for _ in 0..if slow { 50 } else { 1 } {
                        tokio::task::yield_now().await;
                    }
                    finished.borrow_mut().insert(off);
                    Ok::<(), ()>(())
                }
            },
        )
        .await
        .unwrap();
        let mut s = seen.borrow().clone();
        s.sort();
        let total: u64 = s.iter().map(|(_, l)| u64::from(*l)).sum();
        assert_eq!(total, end - 100);
        assert_eq!(s.first().unwrap().0, 100);
    }

    #[tokio::test]
    async fn first_error_stops() {
        let r = for_each_chunk(
            0,
            100,
            10,
            || 4,
            |off, _| async move {
                if off == 30 {
                    Err(off)
                } else {
                    Ok(())
                }
            },
        )
        .await;
        assert_eq!(r, Err(30));
        assert_eq!(
            for_each_chunk(5, 5, 10, || 4, |_, _| async { Err::<(), ()>(()) }).await,
            Ok(())
        );
    }

    /// The depth is read before each chunk starts: raising it (channels joining the
    /// session) lets more chunks start at once from then on, and never more than it says.
    #[tokio::test]
    async fn a_depth_that_grows_is_followed() {
        let depth = Rc::new(std::cell::Cell::new(1usize));
        let (running, most) = (
            Rc::new(std::cell::Cell::new(0usize)),
            Rc::new(RefCell::new(Vec::new())),
        );
        let started = Rc::new(std::cell::Cell::new(0u32));
        for_each_chunk(
            0,
            40,
            1,
            || depth.get(),
            |_, _| {
                let (depth, running, most, started) = (
                    depth.clone(),
                    running.clone(),
                    most.clone(),
                    started.clone(),
                );
                async move {
                    running.set(running.get() + 1);
                    most.borrow_mut().push((depth.get(), running.get()));
                    started.set(started.get() + 1);
                    // After ten chunks, three more channels "join".
                    if started.get() == 10 {
                        depth.set(4);
                    }
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                    }
                    running.set(running.get() - 1);
                    Ok::<(), ()>(())
                }
            },
        )
        .await
        .unwrap();
        let seen = most.borrow();
        assert_eq!(seen.len(), 40);
        assert!(seen.iter().all(|&(d, r)| r <= d), "{seen:?}");
        assert!(seen.iter().any(|&(_, r)| r == 4), "never widened: {seen:?}");
    }
}
