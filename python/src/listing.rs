//! Listings as Python iterators: one directory a page at a time (`scandir`), or a whole tree
//! breadth-first (`walk_entries`, the library's walk).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use smb3_client::{ReadDir, Walk};

use crate::errors;
use crate::runtime::Ctx;
use crate::stat::StatResult;

/// One entry of a listing, as `os.DirEntry`: `name`, `path` (share-relative), `is_dir()`,
/// `is_file()`, `stat()` (from the listing itself: no extra request), `inode()`.
#[pyclass(module = "smb3._smb3", frozen)]
#[derive(Debug)]
pub(crate) struct DirEntry {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    path: String,
    stat: StatResult,
    dir: bool,
    ino: u64,
}

impl DirEntry {
    fn new(parent: &str, e: &smb3_client::DirEntry) -> DirEntry {
        let path = if parent.is_empty() {
            e.name.clone()
        } else {
            format!("{parent}/{}", e.name)
        };
        DirEntry::at(path, e)
    }

    fn at(path: String, e: &smb3_client::DirEntry) -> DirEntry {
        DirEntry {
            name: e.name.clone(),
            path,
            stat: StatResult::from(&e.metadata),
            dir: e.metadata.is_dir(),
            ino: e.file_id,
        }
    }
}

#[pymethods]
impl DirEntry {
    /// Whether the entry is a directory.
    #[pyo3(signature = (*, follow_symlinks=true))]
    fn is_dir(&self, follow_symlinks: bool) -> bool {
        let _ = follow_symlinks;
        self.dir
    }

    /// Whether the entry is a regular file.
    #[pyo3(signature = (*, follow_symlinks=true))]
    fn is_file(&self, follow_symlinks: bool) -> bool {
        let _ = follow_symlinks;
        !self.dir
    }

    /// Always False (links are reported as what they point to by the server).
    fn is_symlink(&self) -> bool {
        false
    }

    /// The entry's metadata, as the listing gave it.
    #[pyo3(signature = (*, follow_symlinks=true))]
    fn stat(&self, follow_symlinks: bool) -> StatResult {
        let _ = follow_symlinks;
        self.stat.clone()
    }

    /// The file id.
    fn inode(&self) -> u64 {
        self.ino
    }

    fn __fspath__(&self) -> &str {
        &self.path
    }

    fn __repr__(&self) -> String {
        format!("<smb3.DirEntry {:?}>", self.name)
    }
}

/// What a scandir iterator holds: the open listing (`None` once done or closed) and the
/// rest of the page it is going through.
#[derive(Debug)]
struct ScanState {
    listing: Option<ReadDir>,
    page: VecDeque<smb3_client::DirEntry>,
}

/// An iterator of `DirEntry` for one directory, read a page (one QUERY_DIRECTORY reply) at a
/// time. A context manager: leaving it (or `close()`) closes the directory on the server.
#[pyclass(module = "smb3._smb3", frozen)]
#[derive(Debug)]
pub(crate) struct ScandirIterator {
    state: Mutex<ScanState>,
    dir: String,
    ctx: Arc<Ctx>,
}

impl ScandirIterator {
    pub(crate) fn new(listing: ReadDir, dir: String, ctx: Arc<Ctx>) -> ScandirIterator {
        ScandirIterator {
            state: Mutex::new(ScanState {
                listing: Some(listing),
                page: VecDeque::new(),
            }),
            dir,
            ctx,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScanState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl ScandirIterator {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<DirEntry>> {
        loop {
            // The listing is taken out while the page is fetched (with the GIL released), so
            // the lock is never held across waiting for the GIL.
            let mut listing = {
                let mut s = self.lock();
                if let Some(e) = s.page.pop_front() {
                    return Ok(Some(DirEntry::new(&self.dir, &e)));
                }
                match s.listing.take() {
                    Some(l) => l,
                    None => return Ok(None),
                }
            };
            let (listing, page) = self.ctx.run(py, async move {
                let page = listing.next_page().await;
                (listing, page)
            })?;
            match page {
                Ok(Some(entries)) => {
                    let mut s = self.lock();
                    s.page.extend(entries);
                    s.listing = Some(listing);
                }
                Ok(None) => {
                    // The end: the listing closed itself (or closes when dropped).
                    self.ctx.drop_inside(listing);
                    return Ok(None);
                }
                Err(e) => {
                    self.ctx.drop_inside(listing);
                    return Err(errors::from_client(py, &e));
                }
            }
        }
    }

    /// Stop listing and close the directory.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let listing = {
            let mut s = self.lock();
            s.page.clear();
            s.listing.take()
        };
        match listing {
            Some(l) => self.ctx.call(py, async move { l.close().await }),
            None => Ok(()),
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.close(py)
    }
}

impl Drop for ScandirIterator {
    fn drop(&mut self) {
        let listing = self.lock().listing.take();
        self.ctx.drop_inside(listing);
    }
}

/// An iterator over the library's walk of a tree: `DirEntry` objects whose `path` is
/// share-relative, breadth-first, several directories listed at once.
#[pyclass(module = "smb3._smb3", frozen)]
#[derive(Debug)]
pub(crate) struct WalkIterator {
    walk: Mutex<Option<Walk>>,
    ctx: Arc<Ctx>,
    onerror: Option<PyObject>,
}

impl WalkIterator {
    pub(crate) fn new(walk: Walk, ctx: Arc<Ctx>, onerror: Option<PyObject>) -> WalkIterator {
        WalkIterator {
            walk: Mutex::new(Some(walk)),
            ctx,
            onerror,
        }
    }
}

#[pymethods]
impl WalkIterator {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<DirEntry>> {
        loop {
            let taken = self.walk.lock().unwrap_or_else(|e| e.into_inner()).take();
            let Some(mut walk) = taken else {
                return Ok(None);
            };
            let (walk, item) = self.ctx.run(py, async move {
                let item = walk.next().await;
                (walk, item)
            })?;
            match item {
                None => {
                    self.ctx.drop_inside(walk);
                    return Ok(None);
                }
                Some(item) => {
                    *self.walk.lock().unwrap_or_else(|e| e.into_inner()) = Some(walk);
                    match item {
                        Ok(entry) => return Ok(Some(DirEntry::at(entry.path, &entry.entry))),
                        Err(err) => {
                            if let Some(cb) = &self.onerror {
                                let exc = errors::from_client(py, &err.error);
                                cb.call1(py, (exc.into_value(py),))?;
                            }
                        }
                    }
                }
            }
        }
    }
}

impl Drop for WalkIterator {
    fn drop(&mut self) {
        let walk = self.walk.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.ctx.drop_inside(walk);
    }
}
