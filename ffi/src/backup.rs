//! What backup software needs beside file data: named streams, security descriptors,
//! snapshots and server-side copies; and the free functions of what these return.

use std::ffi::{c_char, c_int, c_void};

use bytes::Bytes;
use smb3_client::SecurityParts;

use crate::client::smb3_share;
use crate::error::{bad_arg, guard, guard_void, FfiResult};
use crate::files::{smb3_file, snapshot_of};
use crate::ptr::{bytes_arg, c_string, free_c_string, handle, out_arg, put, str_arg};
use crate::types::*;

/// The library's parts for `SMB3_SECURITY_*` bits.
fn parts_of(bits: u32) -> FfiResult<SecurityParts> {
    let all = SMB3_SECURITY_STANDARD | SMB3_SECURITY_SACL;
    if bits == 0 || bits & !all != 0 {
        return bad_arg(format!(
            "security parts {bits:#x}: name some of SMB3_SECURITY_OWNER, _GROUP, _DACL, _SACL \
             and nothing else"
        ));
    }
    let mut parts: Option<SecurityParts> = None;
    for (bit, part) in [
        (SMB3_SECURITY_OWNER, SecurityParts::OWNER),
        (SMB3_SECURITY_GROUP, SecurityParts::GROUP),
        (SMB3_SECURITY_DACL, SecurityParts::DACL),
        (SMB3_SECURITY_SACL, SecurityParts::SACL),
    ] {
        if bits & bit != 0 {
            parts = Some(parts.map_or(part, |p| p | part));
        }
    }
    Ok(parts.expect("at least one bit is set"))
}

/// Hand bytes to C as an `smb3_buffer` (freed with `smb3_buffer_free`).
fn buffer_of(bytes: &[u8]) -> smb3_buffer {
    if bytes.is_empty() {
        return smb3_buffer {
            data: std::ptr::null_mut(),
            len: 0,
        };
    }
    let boxed: Box<[u8]> = bytes.into();
    let len = boxed.len();
    smb3_buffer {
        data: Box::into_raw(boxed).cast::<u8>(),
        len,
    }
}

/// Hand an array to C: `*items` and `*count`, freed with [`take_back`].
///
/// # Safety
/// `items` and `count` are valid for writes.
unsafe fn hand_out<T>(array: impl Iterator<Item = T>, items: *mut *mut T, count: *mut usize) {
    let array: Box<[T]> = array.collect();
    // SAFETY: by the caller's contract.
    unsafe {
        put(count, array.len());
        put(items, Box::into_raw(array).cast::<T>());
    }
}

/// Free an array made by [`hand_out`], calling `free_each` on every element first.
///
/// # Safety
/// `items` and `count` are what [`hand_out`] wrote, not freed yet; `free_each` is sound on
/// each element.
unsafe fn take_back<T>(items: *mut T, count: usize, free_each: impl Fn(&T)) {
    let slice = std::ptr::slice_from_raw_parts_mut(items, count);
    // SAFETY: made by Box::<[T]>::into_raw with this length, freed once.
    let array = unsafe { Box::from_raw(slice) };
    array.iter().for_each(free_each);
}

/// Free the bytes of an `smb3_buffer` the library returned, and set it to empty. NULL, or a
/// buffer already empty, is ignored.
///
/// # Safety
/// `buffer` is NULL or points to an `smb3_buffer` this library filled and that was not
/// freed yet.
#[no_mangle]
pub unsafe extern "C" fn smb3_buffer_free(buffer: *mut smb3_buffer) {
    if buffer.is_null() {
        return;
    }
    // SAFETY: not NULL; an smb3_buffer by the caller's contract.
    let b = unsafe { &mut *buffer };
    if !b.data.is_null() && b.len > 0 {
        let slice = std::ptr::slice_from_raw_parts_mut(b.data, b.len);
        // SAFETY: made by Box::<[u8]>::into_raw in `buffer_of` with this length, freed once.
        drop(unsafe { Box::from_raw(slice) });
    }
    b.data = std::ptr::null_mut();
    b.len = 0;
}

/// Free a string the library returned (`smb3_connect_url`'s path). NULL is ignored.
///
/// # Safety
/// `s` is NULL or a string this library returned, not freed yet.
#[no_mangle]
pub unsafe extern "C" fn smb3_string_free(s: *mut c_char) {
    // SAFETY: the caller's contract, passed on.
    unsafe { free_c_string(s) }
}

/// The security descriptor parts `parts` (`SMB3_SECURITY_*`) of `path`, as self-relative
/// bytes (MS-DTYP 2.4.6) exactly as the server sent them: what a backup stores and gives
/// back to `smb3_share_set_security`. `*out` is filled; free it with `smb3_buffer_free`.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string, `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_get_security(
    share: *const smb3_share,
    path: *const c_char,
    parts: u32,
    out: *mut smb3_buffer,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        out_arg(out, "out")?;
        let parts = parts_of(parts)?;
        let s = share.inner.clone();
        let sd = share
            .ctx
            .call(async move { s.security_descriptor(&path, parts).await })?;
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, buffer_of(&sd.raw)) };
        Ok(())
    })
}

/// The security descriptor parts `parts` of an open file (opened with
/// `SMB3_OPEN_READ_SECURITY`), as `smb3_share_get_security` gives them.
///
/// # Safety
/// `file` is a live file handle, `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_get_security(
    file: *const smb3_file,
    parts: u32,
    out: *mut smb3_buffer,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let file = unsafe { handle(file, "file") }?;
        out_arg(out, "out")?;
        let parts = parts_of(parts)?;
        let f = file.inner.clone();
        let sd = file
            .ctx
            .call(async move { f.security_descriptor(parts).await })?;
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, buffer_of(&sd.raw)) };
        Ok(())
    })
}

/// Set the parts `parts` of the security descriptor of `path` from self-relative bytes (as
/// `smb3_share_get_security` returned them). The server applies it whole or refuses it
/// whole (e.g. STATUS_INVALID_OWNER).
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string, `data` valid for reads
/// of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_set_security(
    share: *const smb3_share,
    path: *const c_char,
    parts: u32,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        // SAFETY: NULL-checked unless len is 0; readable for len bytes by contract.
        let raw = Bytes::copy_from_slice(unsafe { bytes_arg(data.cast::<u8>(), len, "data") }?);
        if raw.is_empty() {
            return bad_arg("an empty security descriptor");
        }
        let parts = parts_of(parts)?;
        let s = share.inner.clone();
        share
            .ctx
            .call(async move { s.set_security_descriptor_raw(&path, raw, parts).await })
    })
}

/// The data streams of `path`: `*items` an array of `*count` entries, the default stream
/// `::$DATA` among them; free with `smb3_streams_free(*items, *count)`. A named stream is
/// opened, read and written as `path:name` with `smb3_share_open`.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string, `items` and `count` valid
/// for writes.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_streams(
    share: *const smb3_share,
    path: *const c_char,
    items: *mut *mut smb3_stream,
    count: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        out_arg(items, "items")?;
        out_arg(count, "count")?;
        let s = share.inner.clone();
        let streams = share.ctx.call(async move { s.streams(&path).await })?;
        let array = streams.iter().map(|st| smb3_stream {
            name: c_string(&st.name),
            size: st.size,
            allocation_size: st.allocation_size,
        });
        // SAFETY: both checked not NULL; valid for writes by the caller's contract.
        unsafe { hand_out(array, items, count) };
        Ok(())
    })
}

/// Free an array from `smb3_share_streams`. NULL is ignored.
///
/// # Safety
/// `items` and `count` are exactly what `smb3_share_streams` returned, not freed yet.
#[no_mangle]
pub unsafe extern "C" fn smb3_streams_free(items: *mut smb3_stream, count: usize) {
    if items.is_null() {
        return;
    }
    // SAFETY: made by hand_out with this count, freed once by the caller's contract; each
    // name came from c_string.
    guard_void(|| unsafe { take_back(items, count, |st| free_c_string(st.name)) });
}

/// The snapshots ("previous versions") the server has of `path` ("" for the share's root),
/// newest first: `*items` an array of `*count` entries (empty when there are none), freed
/// with `smb3_snapshots_free(*items, *count)`. Read a file as it was in one with
/// `smb3_share_open(share, path, SMB3_OPEN_READ, token, &file)`, or a whole view with
/// `smb3_share_at_snapshot`.
///
/// # Safety
/// `share` is a live share handle, `path` a NUL-terminated string, `items` and `count` valid
/// for writes.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_snapshots(
    share: *const smb3_share,
    path: *const c_char,
    items: *mut *mut smb3_snapshot,
    count: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let path = unsafe { str_arg(path, "path") }?.to_string();
        out_arg(items, "items")?;
        out_arg(count, "count")?;
        let s = share.inner.clone();
        let snaps = share.ctx.call(async move { s.snapshots(&path).await })?;
        let array = snaps.iter().map(|sn| smb3_snapshot {
            token: c_string(&sn.token),
            time: smb3_time::from_system(Some(sn.time)),
        });
        // SAFETY: both checked not NULL; valid for writes by the caller's contract.
        unsafe { hand_out(array, items, count) };
        Ok(())
    })
}

/// Free an array from `smb3_share_snapshots`. NULL is ignored.
///
/// # Safety
/// `items` and `count` are exactly what `smb3_share_snapshots` returned, not freed yet.
#[no_mangle]
pub unsafe extern "C" fn smb3_snapshots_free(items: *mut smb3_snapshot, count: usize) {
    if items.is_null() {
        return;
    }
    // SAFETY: made by hand_out with this count, freed once by the caller's contract; each
    // token came from c_string.
    guard_void(|| unsafe { take_back(items, count, |sn| free_c_string(sn.token)) });
}

/// A read-only view of the share as it was in the snapshot `token`: every open, listing,
/// walk, stat and copy through the new handle `*out` reads the snapshot. Free it with
/// `smb3_share_free`. A snapshot the server does not have fails the first path used with
/// `SMB3_ERR_NOT_FOUND`.
///
/// # Safety
/// `share` is a live share handle, `token` a NUL-terminated string, `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_at_snapshot(
    share: *const smb3_share,
    token: *const c_char,
    out: *mut *mut smb3_share,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let token = unsafe { str_arg(token, "token") }?;
        out_arg(out, "out")?;
        let snapshot = snapshot_of(token)?;
        let view = smb3_share {
            inner: share.inner.at_snapshot(&snapshot),
            io_size: share.io_size,
            ctx: share.ctx.clone(),
        };
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, Box::into_raw(Box::new(view))) };
        Ok(())
    })
}

/// Have the server copy the file `from` of `share` to `to` on `dest` (the same share or
/// another share of the same server, FSCTL_SRV_COPYCHUNK_WRITE): the bytes never cross the
/// network. `to` is created or replaced. `*copied` (when not NULL) is the bytes copied. A
/// server that does not copy answers `SMB3_ERR_UNSUPPORTED`; copy through the client then.
///
/// # Safety
/// `share` and `dest` are live share handles of one client, `from` and `to` NUL-terminated
/// strings, `copied` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_copy_on_server(
    share: *const smb3_share,
    from: *const c_char,
    dest: *const smb3_share,
    to: *const c_char,
    copied: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let share = unsafe { handle(share, "share") }?;
        // SAFETY: as above.
        let dest = unsafe { handle(dest, "dest") }?;
        // SAFETY: NULL-checked; valid by the caller's contract.
        let from = unsafe { str_arg(from, "from") }?.to_string();
        // SAFETY: as above.
        let to = unsafe { str_arg(to, "to") }?.to_string();
        let (s, d) = (share.inner.clone(), dest.inner.clone());
        let n = share
            .ctx
            .call(async move { s.copy_file_on_server(&from, &d, &to).await })?;
        if !copied.is_null() {
            // SAFETY: not NULL; valid for a write by the caller's contract.
            unsafe { put(copied, n) };
        }
        Ok(())
    })
}

/// Have the server copy `len` bytes of `source` at `source_offset` into `dest` at `offset`
/// (both open files of one server; `dest` opened for writing, `source` for reading).
/// `*copied` (when not NULL) is the bytes copied.
///
/// # Safety
/// `dest` and `source` are live file handles, `copied` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_file_copy_range(
    dest: *const smb3_file,
    source: *const smb3_file,
    source_offset: u64,
    offset: u64,
    len: u64,
    copied: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let dest = unsafe { handle(dest, "dest") }?;
        // SAFETY: as above.
        let source = unsafe { handle(source, "source") }?;
        let (d, s) = (dest.inner.clone(), source.inner.clone());
        let n = dest
            .ctx
            .call(async move { d.copy_range_from(&s, source_offset, offset, len).await })?;
        if !copied.is_null() {
            // SAFETY: not NULL; valid for a write by the caller's contract.
            unsafe { put(copied, n) };
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_parts_from_bits_and_refusals() {
        assert_eq!(
            parts_of(SMB3_SECURITY_STANDARD).unwrap(),
            SecurityParts::standard()
        );
        assert_eq!(
            parts_of(SMB3_SECURITY_DACL).unwrap().bits(),
            SecurityParts::DACL.bits()
        );
        assert!(parts_of(0).is_err());
        assert!(parts_of(0x100).is_err());
    }

    #[test]
    fn buffers_round_trip_and_free_to_empty() {
        let mut b = buffer_of(b"abc");
        assert_eq!(b.len, 3);
        // SAFETY: filled by buffer_of just above.
        unsafe { smb3_buffer_free(&mut b) };
        assert!(b.data.is_null() && b.len == 0);
        // Freeing again (an empty buffer) is harmless.
        // SAFETY: an empty buffer.
        unsafe { smb3_buffer_free(&mut b) };
        assert!(buffer_of(b"").data.is_null());
    }
}
