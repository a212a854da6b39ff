//! Path operations on a share, and open files: open/create (with backup intent, sharing
//! modes, snapshots), read and write at an offset, stat, times and attributes.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use bytes::Bytes;
use smb3_client::{DosAttributes, File, IfExists, OpenOptions, ShareMode, Snapshot};

use crate::client::smb3_share;
use crate::error::{bad_arg, guard, guard_void, FfiResult};
use crate::ptr::{bytes_arg, handle, opt_str_arg, out_arg, put, str_arg};
use crate::runtime::Ctx;
use crate::types::*;

/// An open file (or named stream, `file.txt:name`). Thread-safe: reads and writes at
/// offsets may come from several threads at once. Close with `smb3_file_close`.
#[derive(Debug)]
pub struct smb3_file {
    pub(crate) inner: File,
    pub(crate) ctx: Arc<Ctx>,
}

/// The library's open options for `SMB3_OPEN_*` flags.
pub(crate) fn open_options(flags: u32) -> FfiResult<OpenOptions> {
    if flags & !SMB3_OPEN_ALL_FLAGS != 0 {
        return bad_arg(format!(
            "unknown SMB3_OPEN_* flags {:#x}",
            flags & !SMB3_OPEN_ALL_FLAGS
        ));
    }
    let on = |f: u32| flags & f != 0;
    let mut o = OpenOptions::new()
        .read(on(SMB3_OPEN_READ))
        .write(on(SMB3_OPEN_WRITE))
        .create(on(SMB3_OPEN_CREATE))
        .create_new(on(SMB3_OPEN_CREATE_NEW))
        .truncate(on(SMB3_OPEN_TRUNCATE))
        .read_security(on(SMB3_OPEN_READ_SECURITY))
        .write_security(on(SMB3_OPEN_WRITE_SECURITY));
    if on(SMB3_OPEN_BACKUP_INTENT) {
        o = o.backup_intent();
    }
    if on(SMB3_OPEN_DELETE_ON_CLOSE) {
        o = o.delete_on_close();
    }
    if on(SMB3_OPEN_DENY_READ | SMB3_OPEN_DENY_WRITE | SMB3_OPEN_DENY_DELETE) {
        let mut mode = ShareMode::NONE;
        for (deny, share) in [
            (SMB3_OPEN_DENY_READ, ShareMode::READ),
            (SMB3_OPEN_DENY_WRITE, ShareMode::WRITE),
            (SMB3_OPEN_DENY_DELETE, ShareMode::DELETE),
        ] {
            if !on(deny) {
                mode = mode | share;
            }
        }
        o = o.share_mode(mode);
    }
    Ok(o)
}

/// A snapshot by its token (`@GMT-YYYY.MM.DD-HH.MM.SS`).
pub(crate) fn snapshot_of(token: &str) -> FfiResult<Snapshot> {
    match Snapshot::from_token(token) {
        Some(s) => Ok(s),
        None => bad_arg(format!(
            "{token:?} is not a snapshot token (@GMT-YYYY.MM.DD-HH.MM.SS)"
        )),
    }
}

/// Open `path` (share-relative, `/` or `\` separated) with `SMB3_OPEN_*` `flags`; when
/// `snapshot` is not NULL, the file as it was in that snapshot (its token from
/// `smb3_share_snapshots`; read-only). On success `*out` is a new file handle, closed with
/// `smb3_file_close`.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string, `snapshot` NULL or one,
/// `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_open(
    share: *const smb3_share,
    path: *const c_char,
    flags: u32,
    snapshot: *const c_char,
    out: *mut *mut smb3_file,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        // SAFETY: as above; NULL allowed.
        let snapshot = unsafe { opt_str_arg(snapshot, "snapshot") }?;
        out_arg(out, "out")?;
        let mut opts = open_options(flags)?;
        if let Some(token) = snapshot {
            opts = opts.snapshot(&snapshot_of(token)?);
        }
        let s = share.inner.clone();
        let inner = share.ctx.call(async move { s.open(&path, &opts).await })?;
        let file = smb3_file {
            inner,
            ctx: share.ctx.clone(),
        };
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, Box::into_raw(Box::new(file))) };
        Ok(())
    })
}

/// Read up to `len` bytes at `offset` into `buf`; `*nread` is how many (fewer than `len` only
/// at end of file, 0 at or past it). Large reads are split into requests that are in flight
/// on every channel at once.
///
/// # Safety
/// `file` is a live file handle, `buf` valid for writes of `len` bytes, `nread` valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_read_at(
    file: *const smb3_file,
    offset: u64,
    buf: *mut c_void,
    len: usize,
    nread: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let file = unsafe { handle(file, "file") }?;
        out_arg(nread, "nread")?;
        if len > 0 && buf.is_null() {
            return bad_arg("buf is NULL");
        }
        let f = file.inner.clone();
        let data = file.ctx.call(async move { f.read_at(offset, len).await })?;
        let n = data.len().min(len);
        if n > 0 {
            // SAFETY: `buf` is not NULL and valid for `len` >= n bytes by the caller's
            // contract; `data` is our own buffer, so the two do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), n) };
        }
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(nread, n) };
        Ok(())
    })
}

/// Write all `len` bytes of `buf` at `offset` (split into requests in flight on every
/// channel). Returns once the server has acknowledged every byte.
///
/// # Safety
/// `file` is a live file handle; `buf` valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_write_at(
    file: *const smb3_file,
    offset: u64,
    buf: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let file = unsafe { handle(file, "file") }?;
        // SAFETY: NULL-checked (unless len is 0); readable for len bytes by contract.
        let data = Bytes::copy_from_slice(unsafe { bytes_arg(buf.cast::<u8>(), len, "buf") }?);
        let f = file.inner.clone();
        file.ctx.call(async move { f.write_at(offset, data).await })
    })
}

/// Size, times and attributes of the open file.
///
/// # Safety
/// `file` is a live file handle, `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_stat(file: *const smb3_file, out: *mut smb3_stat) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let file = unsafe { handle(file, "file") }?;
        out_arg(out, "out")?;
        let f = file.inner.clone();
        let m = file.ctx.call(async move { f.metadata().await })?;
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, smb3_stat::from(&m)) };
        Ok(())
    })
}

/// Truncate or extend the file to `len` bytes.
///
/// # Safety
/// `file` is a live file handle.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_set_len(file: *const smb3_file, len: u64) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let file = unsafe { handle(file, "file") }?;
        let f = file.inner.clone();
        file.ctx.call(async move { f.set_len(len).await })
    })
}

/// Set the times of the open file whose `is_set` is true.
///
/// # Safety
/// `file` is a live file handle, `times` points to an `smb3_file_times`.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_set_times(
    file: *const smb3_file,
    times: *const smb3_file_times,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let file = unsafe { handle(file, "file") }?;
        // SAFETY: as above.
        let times = unsafe { handle(times, "times") }?
            .to_library()
            .or_else(bad_arg)?;
        let f = file.inner.clone();
        file.ctx.call(async move { f.set_times(&times).await })
    })
}

/// Ask the server to flush the file to stable storage (SMB2 FLUSH).
///
/// # Safety
/// `file` is a live file handle.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_flush(file: *const smb3_file) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let file = unsafe { handle(file, "file") }?;
        let f = file.inner.clone();
        file.ctx.call(async move { f.flush().await })
    })
}

/// Close the file and free its handle, reporting the server's answer to the CLOSE. The
/// handle is freed whatever the answer. NULL is ignored (returns 0).
///
/// # Safety
/// `file` is NULL or a live file handle that no other thread is using, not used again.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_close(file: *mut smb3_file) -> c_int {
    if file.is_null() {
        return 0;
    }
    // SAFETY: made by Box::into_raw in this library, freed once by the caller's contract.
    let file = unsafe { Box::from_raw(file) };
    let ctx = file.ctx.clone();
    let code = guard(|| {
        let f = file.inner.clone();
        ctx.call(async move { f.close().await })
    });
    // Dropped inside the runtime: if the CLOSE above could not be sent, the file's own drop
    // closes it in the background.
    guard_void(move || ctx.clone().drop_inside(file));
    code
}

/// Size, times and attributes of `path`.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string, `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_stat(
    share: *const smb3_share,
    path: *const c_char,
    out: *mut smb3_stat,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        out_arg(out, "out")?;
        let s = share.inner.clone();
        let m = share.ctx.call(async move { s.metadata(&path).await })?;
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, smb3_stat::from(&m)) };
        Ok(())
    })
}

/// What a path operation does.
enum PathOp {
    CreateDir,
    CreateDirAll,
    RemoveFile,
    RemoveDir,
}

/// One path operation, for the small entry points below.
///
/// # Safety
/// As each entry point.
unsafe fn path_op(share: *const smb3_share, path: *const c_char, op: PathOp) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        let s = share.inner.clone();
        share.ctx.call(async move {
            match op {
                PathOp::CreateDir => s.create_dir(&path).await,
                PathOp::CreateDirAll => s.create_dir_all(&path).await,
                PathOp::RemoveFile => s.remove_file(&path).await,
                PathOp::RemoveDir => s.remove_dir(&path).await,
            }
        })
    })
}

/// Create the directory `path`; `SMB3_ERR_EXISTS` if it exists.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_mkdir(share: *const smb3_share, path: *const c_char) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { path_op(share, path, PathOp::CreateDir) }
}

/// Create the directory `path` and its missing parents; an existing directory is fine.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_mkdir_all(
    share: *const smb3_share,
    path: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { path_op(share, path, PathOp::CreateDirAll) }
}

/// Delete the file (or named stream) `path`.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_remove_file(
    share: *const smb3_share,
    path: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { path_op(share, path, PathOp::RemoveFile) }
}

/// Delete the empty directory `path`.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_remove_dir(
    share: *const smb3_share,
    path: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { path_op(share, path, PathOp::RemoveDir) }
}

/// Rename or move `from` to `to` within the share; an existing file at `to` is replaced
/// only when `replace` is true (a directory never is).
///
/// # Safety
/// `share` is a live share handle, `from` and `to` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_rename(
    share: *const smb3_share,
    from: *const c_char,
    to: *const c_char,
    replace: bool,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let from = unsafe { str_arg(from, "from") }?.to_string();
        // SAFETY: as above.
        let to = unsafe { str_arg(to, "to") }?.to_string();
        let if_exists = if replace {
            IfExists::Replace
        } else {
            IfExists::Fail
        };
        let s = share.inner.clone();
        share
            .ctx
            .call(async move { s.rename(&from, &to, if_exists).await })
    })
}

/// Set the times of `path` whose `is_set` is true (one SET_INFO).
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string, `times` points to an
/// `smb3_file_times`.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_set_times(
    share: *const smb3_share,
    path: *const c_char,
    times: *const smb3_file_times,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        // SAFETY: as above.
        let times = unsafe { handle(times, "times") }?
            .to_library()
            .or_else(bad_arg)?;
        let s = share.inner.clone();
        share
            .ctx
            .call(async move { s.set_times(&path, &times).await })
    })
}

/// Set the DOS attributes of `path` to exactly `attributes` (`SMB3_ATTR_*`; the settable
/// ones: read-only, hidden, system, archive, temporary; 0 clears them all).
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_set_attributes(
    share: *const smb3_share,
    path: *const c_char,
    attributes: u32,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        let attributes = DosAttributes::from_bits(attributes);
        let s = share.inner.clone();
        share
            .ctx
            .call(async move { s.set_attributes(&path, attributes).await })
    })
}
