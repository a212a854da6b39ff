//! The project's throughput benchmark, `smb-bench` (see `docs/PERFORMANCE.md`).
//!
//! It brings up the testbed (a private smbd behind a veth link, unshaped or shaped with tbf),
//! measures raw TCP with iperf3, then moves a file with `smbcp` and with Samba's `smbclient`
//! in both directions, timing each run from the outside and taking the child's CPU time from
//! `wait4(2)`, and measures small-read latency with the library in-process. Every transfer is
//! verified (size and SHA-256) so a broken run cannot report a good number; nothing about time
//! is asserted.
//!
//! With `--links` it instead measures multichannel: N links shaped to one rate, smbcp over all
//! of them against the links' aggregate raw TCP and against smbclient's single connection, and
//! one channel against several on one unshaped link (see [`multichannel`]).
//!
//! With `--failover` it measures what losing one of several links, or every connection at
//! once, costs a transfer: the throughput gap after the fault, the bytes lost, when the link
//! carries traffic again and when every channel is back, from the client-side link counters
//! sampled every 50 ms, with medians over repetitions (see [`failover`]).
//!
//! With `--mount` it measures smbfuse: `fio` sequential reads and writes through a mount
//! against smbcp on the same links, and listing a 10,000-entry directory through the mount
//! against the library's `read_dir` (see [`mount`]).
//!
//! With `--small-files` it measures trees of many small files copied up and down, `smbcp -r`
//! against `smbclient`'s `mput`/`mget`, in files per second and CPU per file (see
//! [`small_files`]).
//!
//! With `--queue-depth` it measures small random I/O: 4 KiB reads and writes at queue depths
//! 1 to 64 through the library, on one link with one channel and on four links with one
//! channel each, every read and the written file verified (see [`queue_depth`]).
//!
//! With `--mixed` it runs the sequence a user runs by hand instead of the tidy blocks of the
//! main run: per round, smbcp and smbclient download, then each uploads what it downloaded;
//! the worst of five rounds is reported next to the median (issue 17, part 1).
//!
//! The `soak` binary runs a verified workload over flapping links for an hour (see [`soak`]).
//!
//! Everything that drives the testbed (namespaces, smbd, iperf3, fio, child processes) is
//! Linux-only, like the testbed itself; elsewhere only the pure helpers (tables, Markdown
//! sections, SVG, statistics, data patterns) that `crypto-bench` and `microbench-table` use
//! are built.

pub mod chart;
#[cfg(target_os = "linux")]
pub mod child;
pub mod data;
pub mod doc;
#[cfg(target_os = "linux")]
pub mod failover;
#[cfg(target_os = "linux")]
pub mod interrupt;
#[cfg(target_os = "linux")]
pub mod iperf;
#[cfg(target_os = "linux")]
pub mod latency;
#[cfg(target_os = "linux")]
pub mod machine;
#[cfg(target_os = "linux")]
pub mod mount;
#[cfg(target_os = "linux")]
pub mod multichannel;
#[cfg(target_os = "linux")]
pub mod queue_depth;
#[cfg(target_os = "linux")]
pub mod results;
#[cfg(target_os = "linux")]
pub mod server_cpu;
#[cfg(target_os = "linux")]
pub mod session;
#[cfg(target_os = "linux")]
pub mod small_files;
#[cfg(target_os = "linux")]
pub mod soak;
pub mod stats;
pub mod table;
#[cfg(target_os = "linux")]
pub mod transfer;
