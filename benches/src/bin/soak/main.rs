//! `soak` (see `linux.rs` beside this file and docs/PERFORMANCE.md).
//!
//! It drives the Linux testbed (network namespaces, veth links, tc, a private smbd), so it
//! runs on Linux only; elsewhere it says so and exits with status 2.

#[cfg(target_os = "linux")]
mod linux;

/// Counts the heap in use, the soak's measure of what the client keeps at rest.
#[cfg(target_os = "linux")]
#[global_allocator]
static HEAP: smb3_benches::soak::heap::Counting = smb3_benches::soak::heap::Counting;

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!("soak drives the Linux testbed (network namespaces, smbd): it runs on Linux only");
    std::process::ExitCode::from(2)
}
