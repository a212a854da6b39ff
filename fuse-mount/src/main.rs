//! `smbfuse SOURCE MOUNTPOINT [-o OPTIONS] [-f]`: see `smbfuse --help` and docs/MOUNT.md.

use clap::{CommandFactory, Parser};

fn main() {
    if let Ok(g) = smbfuse::mount::GenerateOnly::try_parse() {
        let cmd = smbfuse::mount::Args::command();
        let status = match (g.generate, g.generate_into) {
            (Some(what), _) => smb3_frontend::generate::print(cmd, what, "8"),
            (None, Some(dir)) => smb3_frontend::generate::print_all(cmd, "8", &dir),
            (None, None) => 2,
        };
        std::process::exit(status);
    }
    smbfuse::idle_memory::set_allocator(smbfuse::idle_memory::Allocator {
        release_free_memory,
        in_use: heap_in_use,
    });
    let args = smbfuse::mount::Args::parse();
    std::process::exit(smbfuse::mount::run(args));
}

/// Give glibc's free memory back to the system (see `smbfuse::idle_memory`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn release_free_memory() {
    // SAFETY: malloc_trim only walks the allocator's own free lists under its locks; it takes
    // no pointer of ours.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes glibc has handed out and not had back: in its arenas and in blocks of their own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn heap_in_use() -> u64 {
    // SAFETY: mallinfo2 reads the allocator's statistics under its locks and returns them by
    // value.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as u64
}

/// Other C libraries return freed memory on their own terms.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

/// Not known without glibc's statistics.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_in_use() -> u64 {
    0
}
