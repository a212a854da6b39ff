//! Directory listings: OPENDIR opens a listing at the server, READDIR reads it a page at a
//! time from any entry index, RELEASEDIR closes what was not read to its end.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smb3_client::{DirEntry, Error, ReadDir, Share};

use super::attr::{Attr, Kind};
use super::reparse::{Seen, SeenKind};
use super::SmbFs;
use crate::dir_stream::{DirCursor, Lister, Pages};
use crate::errno::{FsError, FsResult};

/// One directory entry as READDIR(PLUS) returns it.
#[derive(Clone, Debug)]
pub struct Listed {
    /// Name within the directory.
    pub name: String,
    /// File or directory.
    pub kind: Kind,
    /// The server's file id (0 if none).
    pub file_id: u64,
    /// Its attributes, `ino` not yet assigned (0).
    pub attr: Attr,
}

/// A directory opened by OPENDIR: where its listing stands.
pub(super) struct OpenDir {
    /// Its path on the share.
    path: String,
    cursor: tokio::sync::Mutex<DirCursor<Listing>>,
}

/// A listing, with what each entry that may be a Minshall+French link (`mfsymlinks`) or is
/// an NFS reparse point (see `reparse`) turned out to be, and the mode each file's DACL
/// keeps (`modefromsid`).
pub(super) struct Listing {
    pages: ReadDir,
    /// Where to read what an entry's listing does not say (on a share without the POSIX
    /// extensions its type, on one with them a device's number), and whether
    /// Minshall+French links are among them.
    unknown: Option<(Share, String, bool)>,
    /// Whether to read each entry's mode from its DACL (`modefromsid`).
    modes: bool,
}

/// A listed entry, what it turned out to be, and the mode its DACL keeps.
type Entry = (DirEntry, Option<Seen>, Option<u32>);

impl Listing {
    /// The modes the DACLs of `page`'s files and directories keep, asked for all of them at
    /// once (one compound each, many in flight: a page costs about the round trips of its
    /// slowest answer, not one per entry).
    async fn with_modes(&self, page: Vec<(DirEntry, Option<Seen>)>) -> Vec<Entry> {
        let Some((share, dir, _)) = self.unknown.as_ref().filter(|_| self.modes) else {
            return page.into_iter().map(|(e, s)| (e, s, None)).collect();
        };
        // Links and special files show no mode.
        let asked: Vec<usize> = (0..page.len())
            .filter(|&i| page[i].1.is_none() && page[i].0.reparse_tag == 0)
            .collect();
        let paths: Vec<String> = asked
            .iter()
            .map(|&i| match dir.as_str() {
                "" => page[i].0.name.clone(),
                d => format!("{d}/{}", page[i].0.name),
            })
            .collect();
        let mut modes = vec![None; page.len()];
        for (&i, sd) in asked.iter().zip(share.mode_descriptors(&paths).await) {
            match sd {
                Ok(sd) => modes[i] = super::attr::dacl_mode(sd.as_ref(), &page[i].0.metadata),
                Err(e) => tracing::debug!(name = page[i].0.name, error = %e, "reading a mode"),
            }
        }
        page.into_iter()
            .zip(modes)
            .map(|((e, s), m)| (e, s, m))
            .collect()
    }
}

impl Pages for Listing {
    type Entry = Entry;
    async fn next_page(&mut self) -> Result<Option<Vec<Self::Entry>>, Error> {
        let Some(page) = Pages::next_page(&mut self.pages).await? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(page.len());
        for entry in page {
            // A listing cannot say whether the file is a Minshall+French link (only files of
            // exactly a link file's size are read) or which special file an NFS reparse point
            // is: read them, so READDIRPLUS gives the kernel the right type.
            let seen = match &self.unknown {
                Some((share, dir, mf)) => {
                    let path = || {
                        if dir.is_empty() {
                            entry.name.clone()
                        } else {
                            format!("{dir}/{}", entry.name)
                        }
                    };
                    if super::reparse::needs_reading(&entry) || is_device(&entry) {
                        let path = path();
                        match super::reparse::read(share, &path).await {
                            Ok(seen) => seen,
                            Err(e) => {
                                tracing::debug!(path, error = %e, "reading a reparse point");
                                None
                            }
                        }
                    } else if *mf
                        && entry.reparse_tag == 0
                        && !entry.metadata.is_dir()
                        && entry.metadata.len == super::mfsymlinks::FILE_SIZE
                    {
                        let path = path();
                        match super::mfsymlinks::read(share, &path).await {
                            Ok(target) => target.map(|t| Seen {
                                kind: SeenKind::Symlink,
                                size: t.len() as u64,
                                rdev: 0,
                            }),
                            Err(e) => {
                                tracing::debug!(path, error = %e, "reading a possible mfsymlink");
                                None
                            }
                        }
                    } else {
                        super::reparse::listed_kind(&entry)
                    }
                }
                None => None,
            };
            out.push((entry, seen));
        }
        Ok(Some(self.with_modes(out).await))
    }
}

/// Whether a POSIX share lists `entry` as a device node, whose number only its reparse
/// point holds.
fn is_device(entry: &DirEntry) -> bool {
    use smb3_client::PosixFileType::{BlockDevice, CharDevice};
    let t = entry.metadata.posix.as_ref().and_then(|p| p.file_type);
    matches!(t, Some(CharDevice | BlockDevice))
}

impl OpenDir {
    /// Close the listing at the server if it is still open.
    pub(super) async fn close(&self) {
        let listing = self.cursor.lock().await.take_listing();
        if let Some(listing) = listing {
            if let Err(e) = listing.pages.close().await {
                tracing::debug!(path = self.path, error = %e, "closing a listing");
            }
        }
    }
}

/// Starts listings of one directory of the share, retried as every request (`hard`).
struct ShareLister<'a> {
    fs: &'a SmbFs,
    path: &'a str,
}

impl Lister for ShareLister<'_> {
    type Pages = Listing;
    async fn open(&self) -> Result<Listing, Error> {
        let pages = self.fs.retry(|| self.fs.share.list(self.path)).await?;
        Ok(Listing {
            pages,
            unknown: Some((
                self.fs.share.clone(),
                self.path.to_string(),
                self.fs.mfsymlinks(),
            )),
            modes: self.fs.modes_in_dacls(),
        })
    }
}

impl SmbFs {
    /// OPENDIR: open a listing of the directory and read its first page (a directory that
    /// cannot be listed fails here); READDIR reads on, a page at a time.
    pub async fn opendir(&self, ino: u64) -> FsResult<u64> {
        let path = self.path_of(ino)?;
        let lister = ShareLister {
            fs: self,
            path: &path,
        };
        let mut cursor = DirCursor::new(lister.open().await?);
        cursor.prime(&lister).await?;
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let dir = OpenDir {
            path,
            cursor: tokio::sync::Mutex::new(cursor),
        };
        self.dirs.lock().unwrap().insert(fh, Arc::new(dir));
        self.keep_watching(ino);
        Ok(fh)
    }

    /// READDIR of the open directory `fh` from entry `index` (`.` and `..` not counted):
    /// `add` gets each entry with its index until it says the reply is full (see
    /// [`DirCursor::read_at`]). Returns how many entries `add` took.
    pub async fn read_dir_at(
        &self,
        fh: u64,
        index: u64,
        mut add: impl FnMut(u64, &Listed) -> bool,
    ) -> FsResult<u64> {
        let dir = self
            .dirs
            .lock()
            .unwrap()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::new(libc::EBADF))?;
        let lister = ShareLister {
            fs: self,
            path: &dir.path,
        };
        let mut cursor = dir.cursor.lock().await;
        let taken = cursor
            .read_at(&lister, index, |i, entry| add(i, &self.listed(entry)))
            .await?;
        Ok(taken)
    }

    fn listed(&self, (entry, seen, mode): &Entry) -> Listed {
        let mut attr = self.attr(0, &entry.metadata);
        super::attr::with_dacl_mode(&mut attr, &entry.metadata, *mode);
        if let Some(seen) = seen {
            super::attr::seen_as(&mut attr, *seen);
        }
        Listed {
            kind: attr.kind,
            file_id: entry.file_id,
            name: self.names.to_local(&entry.name).into_owned(),
            attr,
        }
    }

    /// The node id a plain READDIR shows for an entry (no lookup taken).
    pub fn peek_ino(&self, parent: u64, name: &str, file_id: u64) -> u64 {
        let inodes = self.inodes.lock().unwrap();
        let id = match inodes.child_path(parent, name) {
            Some(rel) => self.server_id(&self.on_share(&rel), file_id),
            None => file_id,
        };
        inodes.peek(parent, name, id)
    }

    /// RELEASEDIR: a listing not read to its end is closed at the server.
    pub async fn releasedir(&self, fh: u64) {
        let dir = self.dirs.lock().unwrap().remove(&fh);
        if let Some(dir) = dir {
            dir.close().await;
        }
    }
}
