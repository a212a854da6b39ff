//! Listings and walks for the blocking facade: iterators over [`crate::ReadDir`] and
//! [`crate::Walk`], so a program without tokio can go through a directory of a million
//! entries, or a whole share, holding one page of entries at a time.

use std::sync::Arc;

use super::{Runtime, Share, CLOSE_ON_DROP};
use crate::error::Result;
use crate::{DirEntry, WalkEntry, WalkError, WalkOptions};

impl Share {
    /// Open `path` for a listing read a page at a time; see [`crate::Share::list`]. The
    /// listing is an iterator of entries; [`ReadDir::next_page`] takes a whole page.
    pub fn list(&self, path: &str) -> Result<ReadDir> {
        let share = self.inner.clone();
        let path = path.to_string();
        let inner = self.rt.run(async move { share.list(&path).await })??;
        Ok(ReadDir {
            rt: self.rt.clone(),
            inner: Some(inner),
            page: Vec::new().into_iter(),
        })
    }

    /// Walk the tree under `root` breadth-first; see [`crate::Share::walk`]. Each item is an
    /// entry, or a directory that could not be listed (the walk goes on without it).
    pub fn walk(&self, root: &str, options: WalkOptions) -> Walk {
        let share = self.inner.clone();
        let root = root.to_string();
        // The walk's driver task is spawned on the client's runtime.
        let state = match self.rt.run(async move { share.walk(&root, options) }) {
            Ok(walk) => WalkState::Running(walk),
            Err(e) => WalkState::Failed(e),
        };
        Walk {
            rt: self.rt.clone(),
            state,
        }
    }
}

/// A blocking [`crate::ReadDir`]: an `Iterator` of entries, read from the server a page
/// (one QUERY_DIRECTORY reply) at a time. Closed at its end, by [`ReadDir::close`], or when
/// dropped (waiting up to 10 s for the server's answer).
pub struct ReadDir {
    rt: Arc<Runtime>,
    /// `None` once closed (or lost to an error of the runtime).
    inner: Option<crate::ReadDir>,
    /// What is left of the page `next` is going through.
    page: std::vec::IntoIter<DirEntry>,
}

impl ReadDir {
    /// The next page of entries; `None` at the end. Entries the iterator has not yet given
    /// from the current page come first.
    pub fn next_page(&mut self) -> Result<Option<Vec<DirEntry>>> {
        let rest: Vec<DirEntry> = self.page.by_ref().collect();
        if !rest.is_empty() {
            return Ok(Some(rest));
        }
        let Some(mut listing) = self.inner.take() else {
            return Ok(None);
        };
        let (listing, page) = self.rt.run(async move {
            let page = listing.next_page().await;
            (listing, page)
        })?;
        self.inner = Some(listing);
        page
    }

    /// Stop listing and close the directory, reporting the server's answer.
    pub fn close(mut self) -> Result<()> {
        match self.inner.take() {
            Some(listing) => self.rt.run(async move { listing.close().await })?,
            None => Ok(()),
        }
    }
}

impl Iterator for ReadDir {
    type Item = Result<DirEntry>;

    fn next(&mut self) -> Option<Result<DirEntry>> {
        if let Some(entry) = self.page.next() {
            return Some(Ok(entry));
        }
        match self.next_page() {
            Ok(Some(page)) => {
                self.page = page.into_iter();
                self.page.next().map(Ok)
            }
            Ok(None) => None,
            Err(e) => {
                // An error ends the listing: its position at the server is unknown.
                self.close_now();
                Some(Err(e))
            }
        }
    }
}

impl ReadDir {
    /// Close the listing if it is open, waiting a bounded time; errors are only logged.
    fn close_now(&mut self) {
        let Some(listing) = self.inner.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside a runtime the async listing's own drop closes it in the background.
            return;
        }
        let closed = self
            .rt
            .run(async move { tokio::time::timeout(CLOSE_ON_DROP, listing.close()).await });
        match closed {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::debug!(error = %e, "closing a listing failed"),
            Ok(Err(_)) => tracing::debug!("closing a listing timed out"),
            Err(e) => tracing::debug!(error = %e, "closing a listing not sent"),
        }
    }
}

impl Drop for ReadDir {
    fn drop(&mut self) {
        self.close_now();
    }
}

impl std::fmt::Debug for ReadDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::ReadDir")
            .field("inner", &self.inner)
            .finish()
    }
}

/// A blocking [`crate::Walk`]: an `Iterator` of entries and of directories it could not
/// list. Dropping it stops the walk.
pub struct Walk {
    rt: Arc<Runtime>,
    state: WalkState,
}

enum WalkState {
    Running(crate::Walk),
    /// The walk could not start or go on; the error is the next item.
    Failed(crate::Error),
    Done,
}

impl Iterator for Walk {
    type Item = std::result::Result<WalkEntry, WalkItemError>;

    fn next(&mut self) -> Option<Self::Item> {
        match std::mem::replace(&mut self.state, WalkState::Done) {
            WalkState::Done => None,
            WalkState::Failed(e) => Some(Err(WalkItemError::Client(e))),
            WalkState::Running(mut walk) => {
                let step = self.rt.run(async move {
                    let item = walk.next().await;
                    (walk, item)
                });
                match step {
                    Ok((walk, Some(item))) => {
                        self.state = WalkState::Running(walk);
                        Some(item.map_err(WalkItemError::Directory))
                    }
                    Ok((_, None)) => None,
                    Err(e) => Some(Err(WalkItemError::Client(e))),
                }
            }
        }
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        // The walk's drop stops its driver task; let it run inside the runtime.
        if let WalkState::Running(walk) = std::mem::replace(&mut self.state, WalkState::Done) {
            if tokio::runtime::Handle::try_current().is_ok() {
                drop(walk);
            } else {
                let _ = self.rt.run(async move { drop(walk) });
            }
        }
    }
}

impl std::fmt::Debug for Walk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::Walk").finish_non_exhaustive()
    }
}

/// What a blocking [`Walk`] gives instead of an entry.
#[derive(Debug)]
#[non_exhaustive]
pub enum WalkItemError {
    /// A directory could not be listed; the walk goes on without it.
    Directory(WalkError),
    /// The walk could not run at all (the blocking API was called inside a tokio runtime);
    /// it ends.
    Client(crate::Error),
}

impl std::fmt::Display for WalkItemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkItemError::Directory(e) => e.fmt(f),
            WalkItemError::Client(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WalkItemError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WalkItemError::Directory(e) => Some(e),
            WalkItemError::Client(e) => Some(e),
        }
    }
}
