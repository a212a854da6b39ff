//! The heap the process has allocated and not freed, counted by a global allocator that
//! wraps the system's: the soak's measure of what the client keeps. RSS says little about a
//! leak, since glibc holds freed blocks in its arenas and returns them only now and then.
//! Only a binary that installs [`Counting`] as its `#[global_allocator]` gets counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static LIVE: AtomicU64 = AtomicU64::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The system allocator, counting the bytes it hands out and takes back.
#[derive(Debug)]
pub struct Counting;

// SAFETY: every call is passed to `System` unchanged; the counting only adds and subtracts
// the sizes the caller gives, which `GlobalAlloc`'s contract makes the allocation's own.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        counted(unsafe { System.alloc(layout) }, layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        counted(unsafe { System.alloc_zeroed(layout) }, layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as u64, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        }
        p
    }
}

/// `p`, a new allocation of `layout`, counted when it succeeded.
fn counted(p: *mut u8, layout: Layout) -> *mut u8 {
    INSTALLED.store(true, Ordering::Relaxed);
    if !p.is_null() {
        LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
    }
    p
}

/// Bytes allocated and not yet freed, when [`Counting`] is the global allocator.
pub(crate) fn live_bytes() -> Option<u64> {
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| LIVE.load(Ordering::Relaxed))
}

/// Asks the C allocator to return the free memory it holds (glibc's `malloc_trim`), so that
/// RSS at rest shows what is in use.
pub(crate) fn return_free_memory() {
    #[cfg(target_env = "gnu")]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only walks the allocator's own free lists under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
