//! An open directory read a page (one QUERY_DIRECTORY reply) at a time, as READDIR asks for
//! it, so that listing a directory of a million entries holds one reply in the daemon, not
//! the whole directory.
//!
//! The kernel asks for entries from an offset: the one after the last entry it took (we give
//! entry `i` the offset `i + 3`, after `.` and `..`). The cursor keeps the entries of the
//! current page the kernel has not taken yet; an offset before them (`rewinddir`, `seekdir`
//! back, a reply the kernel could not deliver) starts a new listing from the directory's
//! beginning and skips to it. A listing cut mid-way (a channel lost: QUERY_DIRECTORY is not
//! replayed mid-way, MS-SMB2 3.2.4.4 leaves its position to the lost open) is started again
//! once, past the entries already handed out.

use std::collections::VecDeque;

use smb3_client::{DirEntry, Error, ReadDir};

/// Where the pages of a listing come from.
pub(crate) trait Pages {
    /// An entry of a page.
    type Entry;
    /// The next page; `None` once the directory is exhausted.
    async fn next_page(&mut self) -> Result<Option<Vec<Self::Entry>>, Error>;
}

/// Starts a listing of the directory from its beginning.
pub(crate) trait Lister {
    /// The listing it starts.
    type Pages: Pages;
    /// A new listing.
    async fn open(&self) -> Result<Self::Pages, Error>;
}

impl Pages for ReadDir {
    type Entry = DirEntry;
    /// The library's pages, without the entries it refused for their names (`..`, `a/b`,
    /// see `smb3_client::check_name`): no name the kernel could not take as one component
    /// reaches it, and one such entry does not make the whole directory unreadable. Each is
    /// logged. Also without the hidden names of files unlinked while open (see
    /// `fs::silly`): they are gone for POSIX.
    async fn next_page(&mut self) -> Result<Option<Vec<DirEntry>>, Error> {
        loop {
            match ReadDir::next_page(self).await {
                Err(e @ Error::UnsafeName { .. }) => {
                    tracing::warn!(error = %e, "directory entry left out");
                }
                Ok(Some(mut page)) => {
                    page.retain(|e| !crate::hidden_names::is_hidden_name(&e.name));
                    return Ok(Some(page));
                }
                other => return other,
            }
        }
    }
}

/// The position in an open directory's listing.
pub(crate) struct DirCursor<P: Pages> {
    /// The listing under way; `None` at its end or after it failed.
    pages: Option<P>,
    /// Entries read from the server and not yet taken by the kernel.
    buffered: VecDeque<P::Entry>,
    /// The index (from the directory's first entry) of `buffered[0]`.
    first: u64,
    /// The listing reached the directory's end.
    at_end: bool,
}

impl<P: Pages> DirCursor<P> {
    /// A cursor at the start of `pages`, a listing just opened.
    pub(crate) fn new(pages: P) -> Self {
        DirCursor {
            pages: Some(pages),
            buffered: VecDeque::new(),
            first: 0,
            at_end: false,
        }
    }

    /// Read the first page now, so that a directory that cannot be listed fails its open.
    pub(crate) async fn prime<L: Lister<Pages = P>>(&mut self, lister: &L) -> Result<(), Error> {
        self.fetch(lister).await
    }

    /// The listing, if still open, for the caller to close; the cursor is at its end after.
    pub(crate) fn take_listing(&mut self) -> Option<P> {
        self.at_end = true;
        self.pages.take()
    }

    /// Hand the entries from `index` on to `add`, with each one's index, until `add` says
    /// the reply is full (it returns `true` and did not take that entry) or the directory
    /// ends. Returns how many entries `add` took. An error after some were taken is kept for
    /// the next call: the kernel gets what was read.
    pub(crate) async fn read_at<L: Lister<Pages = P>>(
        &mut self,
        lister: &L,
        index: u64,
        mut add: impl FnMut(u64, &P::Entry) -> bool,
    ) -> Result<u64, Error> {
        if index < self.first {
            self.restart(lister).await?;
        }
        let mut next = index;
        let mut taken = 0;
        loop {
            // What the kernel asked past has been taken by an earlier reply.
            while self.first < next && self.buffered.pop_front().is_some() {
                self.first += 1;
            }
            if self.first == next {
                for (k, entry) in self.buffered.iter().enumerate() {
                    if add(next + k as u64, entry) {
                        return Ok(taken);
                    }
                    taken += 1;
                }
                next = self.first + self.buffered.len() as u64;
            }
            if self.at_end {
                return Ok(taken);
            }
            match self.fetch(lister).await {
                Ok(()) => {}
                Err(_) if taken > 0 => return Ok(taken),
                Err(e) => return Err(e),
            }
        }
    }

    /// Read one more page into the buffer, or find the end. A listing that fails is started
    /// again once, past the entries already read.
    async fn fetch<L: Lister<Pages = P>>(&mut self, lister: &L) -> Result<(), Error> {
        let read = self.first + self.buffered.len() as u64;
        if self.pages.is_none() {
            return self.reopen_past(lister, read).await;
        }
        let pages = self.pages.as_mut().expect("checked above");
        match pages.next_page().await {
            Ok(Some(page)) => self.buffered.extend(page),
            Ok(None) => self.finish(),
            Err(e) => {
                tracing::debug!(error = %e, "listing failed mid-way; starting it again");
                self.pages = None;
                self.reopen_past(lister, read).await?;
            }
        }
        Ok(())
    }

    /// A new listing from the directory's beginning, positioned at index 0.
    async fn restart<L: Lister<Pages = P>>(&mut self, lister: &L) -> Result<(), Error> {
        self.pages = Some(lister.open().await?);
        self.buffered.clear();
        self.first = 0;
        self.at_end = false;
        Ok(())
    }

    /// A new listing whose first `read` entries are skipped (they were read already); the
    /// entries after them in the same page are buffered.
    async fn reopen_past<L: Lister<Pages = P>>(
        &mut self,
        lister: &L,
        read: u64,
    ) -> Result<(), Error> {
        let mut pages = lister.open().await?;
        let mut skipped = 0;
        loop {
            let Some(page) = pages.next_page().await? else {
                // The directory shrank meanwhile: nothing more to give.
                self.first = read;
                self.buffered.clear();
                self.finish();
                return Ok(());
            };
            let len = page.len() as u64;
            if skipped + len > read {
                let keep = (skipped + len - read) as usize;
                let mut page = page;
                let tail = page.split_off(page.len() - keep);
                self.first = read;
                self.buffered = tail.into();
                self.pages = Some(pages);
                return Ok(());
            }
            skipped += len;
        }
    }

    fn finish(&mut self) {
        self.at_end = true;
        self.pages = None;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A directory of `len` entries `0..len` in pages of `page` entries; listings counted.
    struct FakeDir {
        len: u32,
        page: u32,
        opened: Cell<u32>,
        /// Page reads that fail (the `n`th read of the listing opened first).
        fail_at_read: Option<u32>,
    }

    struct FakePages {
        next: u32,
        len: u32,
        page: u32,
        reads: u32,
        fail_at_read: Option<u32>,
    }

    impl Pages for FakePages {
        type Entry = u32;
        async fn next_page(&mut self) -> Result<Option<Vec<u32>>, Error> {
            self.reads += 1;
            if self.fail_at_read == Some(self.reads) {
                return Err(Error::Io {
                    addr: None,
                    source: std::io::ErrorKind::ConnectionReset.into(),
                });
            }
            if self.next >= self.len {
                return Ok(None);
            }
            let end = (self.next + self.page).min(self.len);
            let page = (self.next..end).collect();
            self.next = end;
            Ok(Some(page))
        }
    }

    impl Lister for FakeDir {
        type Pages = FakePages;
        async fn open(&self) -> Result<FakePages, Error> {
            self.opened.set(self.opened.get() + 1);
            Ok(FakePages {
                next: 0,
                len: self.len,
                page: self.page,
                reads: 0,
                fail_at_read: if self.opened.get() == 1 {
                    self.fail_at_read
                } else {
                    None
                },
            })
        }
    }

    fn dir(len: u32, page: u32) -> FakeDir {
        FakeDir {
            len,
            page,
            opened: Cell::new(0),
            fail_at_read: None,
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Read the whole directory as the kernel does, `per_reply` entries a reply, from
    /// `start`; each entry with its index.
    async fn read_all(
        cursor: &mut DirCursor<FakePages>,
        lister: &FakeDir,
        start: u64,
        per_reply: usize,
    ) -> Vec<(u64, u32)> {
        let mut got = Vec::new();
        let mut next = start;
        loop {
            let mut reply = Vec::new();
            cursor
                .read_at(lister, next, |i, e| {
                    if reply.len() == per_reply {
                        return true;
                    }
                    reply.push((i, *e));
                    false
                })
                .await
                .unwrap();
            let Some(&(last, _)) = reply.last() else {
                return got;
            };
            next = last + 1;
            got.extend(reply);
        }
    }

    #[test]
    fn replies_smaller_than_a_page_take_every_entry_once_and_in_order() {
        let lister = dir(1000, 64);
        block_on(async {
            let mut cursor = DirCursor::new(lister.open().await.unwrap());
            cursor.prime(&lister).await.unwrap();
            let got = read_all(&mut cursor, &lister, 0, 7).await;
            let want: Vec<(u64, u32)> = (0..1000).map(|i| (u64::from(i), i)).collect();
            assert_eq!(got, want);
            assert!(cursor.pages.is_none(), "the listing is closed at its end");
            assert!(cursor.buffered.len() <= 64, "one page at most is held");
        });
        assert_eq!(lister.opened.get(), 1);
    }

    #[test]
    fn replies_larger_than_a_page_span_pages() {
        let lister = dir(300, 64);
        block_on(async {
            let mut cursor = DirCursor::new(lister.open().await.unwrap());
            let got = read_all(&mut cursor, &lister, 0, 200).await;
            assert_eq!(got.len(), 300);
            assert!(got.iter().all(|&(i, e)| i == u64::from(e)));
        });
    }

    #[test]
    fn an_offset_before_the_buffer_starts_again_from_the_beginning() {
        let lister = dir(500, 64);
        block_on(async {
            let mut cursor = DirCursor::new(lister.open().await.unwrap());
            let first = read_all(&mut cursor, &lister, 0, 10).await;
            assert_eq!(first.len(), 500);
            // rewinddir: offset 0 again.
            let again = read_all(&mut cursor, &lister, 0, 10).await;
            assert_eq!(again, first);
            // seekdir back into an earlier page.
            let tail = read_all(&mut cursor, &lister, 123, 10).await;
            assert_eq!(tail, first[123..].to_vec());
        });
        assert_eq!(lister.opened.get(), 3);
    }

    #[test]
    fn an_offset_ahead_of_the_listing_skips_to_it() {
        let lister = dir(500, 64);
        block_on(async {
            let mut cursor = DirCursor::new(lister.open().await.unwrap());
            let tail = read_all(&mut cursor, &lister, 321, 10).await;
            let want: Vec<(u64, u32)> = (321..500).map(|i| (u64::from(i), i)).collect();
            assert_eq!(tail, want);
            // Past the end: nothing, no error.
            assert!(read_all(&mut cursor, &lister, 900, 10).await.is_empty());
        });
    }

    #[test]
    fn a_listing_cut_mid_way_continues_past_what_was_read() {
        let mut lister = dir(400, 64);
        lister.fail_at_read = Some(3);
        block_on(async {
            let mut cursor = DirCursor::new(lister.open().await.unwrap());
            let got = read_all(&mut cursor, &lister, 0, 50).await;
            let want: Vec<(u64, u32)> = (0..400).map(|i| (u64::from(i), i)).collect();
            assert_eq!(
                got, want,
                "every entry once, in order, across the new listing"
            );
        });
        assert_eq!(lister.opened.get(), 2);
    }

    #[test]
    fn an_empty_directory_gives_nothing_and_closes() {
        let lister = dir(0, 64);
        block_on(async {
            let mut cursor = DirCursor::new(lister.open().await.unwrap());
            cursor.prime(&lister).await.unwrap();
            assert!(cursor.pages.is_none());
            assert!(read_all(&mut cursor, &lister, 0, 10).await.is_empty());
        });
    }
}
