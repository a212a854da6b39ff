//! Directory listings: OPENDIR opens a listing at the server, READDIR reads it a page at a
//! time from any entry index, RELEASEDIR closes what was not read to its end.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smb3_client::{DirEntry, Error, ReadDir, Share};

use super::attr::{Attr, Kind};
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

/// A listing, with what each entry that may be a Minshall+French link (`mfsymlinks`) turned
/// out to be: its target's length when it is one.
pub(super) struct Listing {
    pages: ReadDir,
    /// Set with `mfsymlinks`: where to read the candidates.
    links: Option<(Share, String)>,
}

impl Pages for Listing {
    type Entry = (DirEntry, Option<u64>);
    async fn next_page(&mut self) -> Result<Option<Vec<Self::Entry>>, Error> {
        let Some(page) = Pages::next_page(&mut self.pages).await? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(page.len());
        for entry in page {
            // A listing cannot say whether the file is a link: read it (only files of
            // exactly a link file's size), so READDIRPLUS gives the kernel the right type.
            let link = match &self.links {
                Some((share, dir))
                    if !entry.metadata.is_dir()
                        && entry.metadata.len == super::mfsymlinks::FILE_SIZE =>
                {
                    let path = if dir.is_empty() {
                        entry.name.clone()
                    } else {
                        format!("{dir}/{}", entry.name)
                    };
                    match super::mfsymlinks::read(share, &path).await {
                        Ok(target) => target.map(|t| t.len() as u64),
                        Err(e) => {
                            tracing::debug!(path, error = %e, "reading a possible mfsymlink");
                            None
                        }
                    }
                }
                _ => None,
            };
            out.push((entry, link));
        }
        Ok(Some(out))
    }
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
            links: self
                .fs
                .mfsymlinks()
                .then(|| (self.fs.share.clone(), self.path.to_string())),
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

    fn listed(&self, (entry, link): &(DirEntry, Option<u64>)) -> Listed {
        let mut attr = self.attr(0, &entry.metadata);
        if let Some(len) = link {
            attr.kind = Kind::Symlink;
            attr.perm = 0o777;
            attr.size = *len;
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
