//! Reading what C hands in: NULL checks and UTF-8 checks before anything is used, so a bad
//! argument is an `SMB3_ERR_INVALID_ARGUMENT`, never undefined behaviour.

use std::ffi::{c_char, CStr, CString};

use crate::error::{bad_arg, FfiResult};

/// A required string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid and unchanged for `'a`.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return bad_arg(format!("{what} is NULL"));
    }
    // SAFETY: not NULL, and NUL-terminated and valid for 'a by the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    match s.to_str() {
        Ok(s) => Ok(s),
        Err(e) => bad_arg(format!("{what} is not UTF-8 ({e})")),
    }
}

/// An optional string argument: NULL is `None`.
///
/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn opt_str_arg<'a>(p: *const c_char, what: &str) -> FfiResult<Option<&'a str>> {
    if p.is_null() {
        Ok(None)
    } else {
        // SAFETY: the caller's contract, passed on.
        unsafe { str_arg(p, what) }.map(Some)
    }
}

/// A required handle.
///
/// # Safety
/// `p` is NULL or a pointer this library returned for a `T` and that was not freed yet.
pub(crate) unsafe fn handle<'a, T>(p: *const T, what: &str) -> FfiResult<&'a T> {
    if p.is_null() {
        return bad_arg(format!("{what} is NULL"));
    }
    // SAFETY: not NULL; a live handle by the caller's contract.
    Ok(unsafe { &*p })
}

/// A required mutable handle (a listing being advanced).
///
/// # Safety
/// As [`handle`], and no other thread uses the handle during the call.
pub(crate) unsafe fn handle_mut<'a, T>(p: *mut T, what: &str) -> FfiResult<&'a mut T> {
    if p.is_null() {
        return bad_arg(format!("{what} is NULL"));
    }
    // SAFETY: not NULL; a live handle used by this thread only, by the caller's contract.
    Ok(unsafe { &mut *p })
}

/// Check that an out-parameter is not NULL.
pub(crate) fn out_arg<T>(p: *mut T, what: &str) -> FfiResult<()> {
    if p.is_null() {
        bad_arg(format!("{what} (an out-parameter) is NULL"))
    } else {
        Ok(())
    }
}

/// Store `value` in an out-parameter already checked with [`out_arg`].
///
/// # Safety
/// `p` is not NULL, aligned, and valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, value: T) {
    // SAFETY: by the caller's contract; `write` does not drop what was there (C memory).
    unsafe { p.write(value) }
}

/// A byte buffer argument of `len` bytes (NULL allowed only when `len` is 0).
///
/// # Safety
/// `p` is NULL or valid for reads of `len` bytes for `'a`.
pub(crate) unsafe fn bytes_arg<'a>(p: *const u8, len: usize, what: &str) -> FfiResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return bad_arg(format!("{what} is NULL"));
    }
    // SAFETY: not NULL, valid for `len` bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A string for C, owned by the caller (freed with `smb3_string_free`). A NUL inside (only a
/// broken server sends one) ends the string there.
pub(crate) fn c_string(s: &str) -> *mut c_char {
    let cut = s.split('\0').next().unwrap_or_default();
    CString::new(cut).unwrap_or_default().into_raw()
}

/// Take back a string made by [`c_string`].
///
/// # Safety
/// `p` is NULL or came from [`c_string`] and was not freed yet.
pub(crate) unsafe fn free_c_string(p: *mut c_char) {
    if !p.is_null() {
        // SAFETY: made by CString::into_raw, freed once by the caller's contract.
        drop(unsafe { CString::from_raw(p) });
    }
}
