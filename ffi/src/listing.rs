//! Listings as iterators: one directory a page at a time (`smb3_dir`), or a whole tree
//! breadth-first (`smb3_walk`).

use std::ffi::{c_char, c_int, CString};
use std::sync::Arc;

use smb3_client::{DirEntry, ReadDir, Walk, WalkError, WalkOptions};

use crate::client::smb3_share;
use crate::error::{guard, guard_value, guard_void, FfiError, FfiResult};
use crate::ptr::{handle, handle_mut, put, str_arg};
use crate::runtime::Ctx;
use crate::types::smb3_stat;

/// A directory being listed (`smb3_share_list`). Entries come from the server a page (one
/// QUERY_DIRECTORY reply) at a time, so memory stays bounded for huge directories. Use it
/// from one thread at a time; free with `smb3_dir_close`.
#[derive(Debug)]
pub struct smb3_dir {
    inner: Option<ReadDir>,
    page: std::vec::IntoIter<DirEntry>,
    /// The name handed out by the last `smb3_dir_next`.
    name: CString,
    ctx: Arc<Ctx>,
}

/// Store a name for C: the pointer stays valid until the next call on the iterator.
fn keep_name(slot: &mut CString, name: &str) -> *const c_char {
    *slot = CString::new(name.split('\0').next().unwrap_or_default()).unwrap_or_default();
    slot.as_ptr()
}

/// Open the directory `path` ("" for the share's root) for listing. On success `*out` is a
/// new listing, freed with `smb3_dir_close`.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string, `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_list(
    share: *const smb3_share,
    path: *const c_char,
    out: *mut *mut smb3_dir,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        crate::ptr::out_arg(out, "out")?;
        let s = share.inner.clone();
        let inner = share.ctx.call(async move { s.list(&path).await })?;
        let dir = smb3_dir {
            inner: Some(inner),
            page: Vec::new().into_iter(),
            name: CString::default(),
            ctx: share.ctx.clone(),
        };
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, Box::into_raw(Box::new(dir))) };
        Ok(())
    })
}

impl smb3_dir {
    fn next_entry(&mut self) -> FfiResult<Option<DirEntry>> {
        loop {
            if let Some(e) = self.page.next() {
                return Ok(Some(e));
            }
            let Some(mut listing) = self.inner.take() else {
                return Ok(None);
            };
            let (listing, page) = self.ctx.run(async move {
                let page = listing.next_page().await;
                (listing, page)
            })?;
            match page? {
                Some(page) => {
                    self.inner = Some(listing);
                    self.page = page.into_iter();
                }
                // The end: the listing closed its handle already.
                None => {
                    self.ctx.drop_inside(listing);
                    return Ok(None);
                }
            }
        }
    }
}

/// The next entry ("." and ".." are not listed): returns 1 and sets `*name` (owned by the
/// listing, valid until the next call on it) and `*stat` (when not NULL); 0 at the end; a
/// negative error otherwise (the listing then ends). `name` may be NULL.
///
/// # Safety
/// `dir` is a live listing used by this thread only; `name` NULL or valid for a write;
/// `stat` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_dir_next(
    dir: *mut smb3_dir,
    name: *mut *const c_char,
    stat: *mut smb3_stat,
) -> c_int {
    guard_value(|| {
        // SAFETY: NULL-checked; live and used by this thread only by the caller's contract.
        let dir = unsafe { handle_mut(dir, "dir") }?;
        let entry = match dir.next_entry() {
            Ok(Some(e)) => e,
            Ok(None) => return Ok(0),
            Err(e) => {
                // Its position at the server is unknown: close it.
                if let Some(listing) = dir.inner.take() {
                    dir.ctx.drop_inside(listing);
                }
                return Err(e);
            }
        };
        let p = keep_name(&mut dir.name, &entry.name);
        if !name.is_null() {
            // SAFETY: not NULL; valid for a write by the caller's contract.
            unsafe { put(name, p) };
        }
        if !stat.is_null() {
            // SAFETY: not NULL; valid for a write by the caller's contract.
            unsafe { put(stat, smb3_stat::from(&entry)) };
        }
        Ok(1)
    })
}

/// Stop listing, close the directory at the server and free the listing. NULL is ignored.
///
/// # Safety
/// `dir` is NULL or a live listing, not used again.
#[no_mangle]
pub unsafe extern "C" fn smb3_dir_close(dir: *mut smb3_dir) {
    if dir.is_null() {
        return;
    }
    // SAFETY: made by Box::into_raw in this library, freed once by the caller's contract.
    let mut dir = unsafe { Box::from_raw(dir) };
    guard_void(move || {
        if let Some(listing) = dir.inner.take() {
            // A close the server does not answer is not worth reporting from a free.
            let _ = dir.ctx.run(async move { listing.close().await });
        }
        let ctx = dir.ctx.clone();
        ctx.drop_inside(dir);
    });
}

/// A walk of a directory tree (`smb3_share_walk`): breadth-first, several directories
/// listed at once, each entry as it comes. Use it from one thread at a time; free with
/// `smb3_walk_free`.
#[derive(Debug)]
pub struct smb3_walk {
    inner: Option<Walk>,
    path: CString,
    ctx: Arc<Ctx>,
}

/// Walk the tree under `root` ("" for the whole share), at most `max_depth` levels deep (0:
/// no limit; 1: the root's entries only). Reparse points (symbolic links) and directories
/// already walked are reported but not entered. On success `*out` is a new walk, freed with
/// `smb3_walk_free`.
///
/// # Safety
/// `share` is a live share handle, `root` a NUL-terminated string, `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_walk(
    share: *const smb3_share,
    root: *const c_char,
    max_depth: u32,
    out: *mut *mut smb3_walk,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let root = unsafe { str_arg(root, "root") }?.to_string();
        crate::ptr::out_arg(out, "out")?;
        let options = WalkOptions {
            max_depth: (max_depth > 0).then_some(max_depth as usize),
            ..WalkOptions::default()
        };
        let s = share.inner.clone();
        // The walk's driver task is spawned on the client's runtime.
        let inner = share.ctx.run(async move { s.walk(&root, options) })?;
        let walk = smb3_walk {
            inner: Some(inner),
            path: CString::default(),
            ctx: share.ctx.clone(),
        };
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, Box::into_raw(Box::new(walk))) };
        Ok(())
    })
}

/// The next entry of the walk: returns 1 and sets `*path` (share-relative, `root/dir/name`;
/// owned by the walk, valid until the next call on it), `*depth` (1 for the root's entries)
/// and `*stat`, each when not NULL; 0 when the whole tree was walked; a negative error when
/// a directory could not be listed (the message names it): the walk goes on without it, so
/// call again.
///
/// # Safety
/// `walk` is a live walk used by this thread only; the out-pointers NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn smb3_walk_next(
    walk: *mut smb3_walk,
    path: *mut *const c_char,
    depth: *mut u32,
    stat: *mut smb3_stat,
) -> c_int {
    guard_value(|| {
        // SAFETY: NULL-checked; live and used by this thread only by the caller's contract.
        let walk = unsafe { handle_mut(walk, "walk") }?;
        let Some(mut inner) = walk.inner.take() else {
            return Ok(0);
        };
        let (inner, item) = walk.ctx.run(async move {
            let item = inner.next().await;
            (inner, item)
        })?;
        let entry = match item {
            None => {
                walk.ctx.drop_inside(inner);
                return Ok(0);
            }
            Some(Err(e)) => {
                walk.inner = Some(inner);
                return Err(FfiError::Client(naming_the_directory(e)));
            }
            Some(Ok(entry)) => {
                walk.inner = Some(inner);
                entry
            }
        };
        let p = keep_name(&mut walk.path, &entry.path);
        // SAFETY: (all three) each is checked not NULL; valid for a write by the caller's
        // contract.
        unsafe {
            if !path.is_null() {
                put(path, p);
            }
            if !depth.is_null() {
                put(depth, u32::try_from(entry.depth).unwrap_or(u32::MAX));
            }
            if !stat.is_null() {
                put(stat, smb3_stat::from(&entry.entry));
            }
        }
        Ok(1)
    })
}

/// The error of a directory a walk could not list, its message naming the directory.
pub(crate) fn naming_the_directory(e: WalkError) -> smb3_client::Error {
    match e.error {
        smb3_client::Error::Status {
            status,
            command,
            path: None,
        } => smb3_client::Error::Status {
            status,
            command,
            path: Some(e.path),
        },
        other => other,
    }
}

/// Stop the walk and free it. NULL is ignored.
///
/// # Safety
/// `walk` is NULL or a live walk, not used again.
#[no_mangle]
pub unsafe extern "C" fn smb3_walk_free(walk: *mut smb3_walk) {
    if walk.is_null() {
        return;
    }
    // SAFETY: made by Box::into_raw in this library, freed once by the caller's contract.
    let walk = unsafe { Box::from_raw(walk) };
    guard_void(move || {
        let ctx = walk.ctx.clone();
        ctx.drop_inside(walk);
    });
}
