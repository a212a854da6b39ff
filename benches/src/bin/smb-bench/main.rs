//! `smb-bench`: the project's benchmarks (docs/PERFORMANCE.md), one subcommand per mode, each
//! in its file here. Every mode brings up the testbed (network namespaces, veth links shaped
//! with tbf, a private smbd), measures, verifies every byte it moved (a broken run cannot
//! report a good number), asserts nothing about time, and with `--write-doc` replaces its own
//! section of a Markdown document. Linux only, like the testbed: elsewhere it says so and
//! exits with status 2.

// The modules all drive the testbed, so they are Linux only.
#[cfg(target_os = "linux")]
mod bench;
#[cfg(target_os = "linux")]
mod chart;
#[cfg(target_os = "linux")]
mod child;
#[cfg(target_os = "linux")]
mod failover;
#[cfg(target_os = "linux")]
mod machine;
#[cfg(target_os = "linux")]
mod main_run;
#[cfg(target_os = "linux")]
mod mixed;
#[cfg(target_os = "linux")]
mod mount;
#[cfg(target_os = "linux")]
mod multichannel;
#[cfg(target_os = "linux")]
mod queue_depth;
#[cfg(target_os = "linux")]
mod results;
#[cfg(target_os = "linux")]
mod small_files;
#[cfg(target_os = "linux")]
mod sweep;
#[cfg(target_os = "linux")]
mod transfer;

use std::process::ExitCode;

#[cfg(not(target_os = "linux"))]
fn main() -> ExitCode {
    eprintln!(
        "smb-bench drives the Linux testbed (network namespaces, smbd): it runs on Linux only"
    );
    ExitCode::from(2)
}

#[cfg(target_os = "linux")]
fn main() -> ExitCode {
    use clap::Parser;
    let Cli { mode, common } = Cli::parse();
    child::install_signal_handler();
    let ran = match mode {
        Mode::Main { latency_ops } => main_run::run(&common, latency_ops),
        Mode::Sweep => sweep::run(&common),
        Mode::Multichannel {
            links,
            unshaped_channels,
            variants,
        } => multichannel::run(&common, &links, unshaped_channels, &variants),
        Mode::Failover {
            links,
            down_seconds,
        } => failover::run(&common, links, down_seconds),
        Mode::Mount { mount_compare } => mount::run(&common, &mount_compare),
        Mode::SmallFiles => small_files::run(&common),
        Mode::QueueDepth => queue_depth::run(&common),
        Mode::Mixed => mixed::run(&common),
    };
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smb-bench: {e}");
            match child::interrupted() {
                true => ExitCode::from(child::EXIT_INTERRUPTED),
                false => ExitCode::FAILURE,
            }
        }
    }
}

/// Throughput, latency and failover of smbcp, smbfuse and the library, against smbclient and
/// raw TCP on the same testbed.
#[cfg(target_os = "linux")]
#[derive(clap::Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
    #[command(flatten)]
    common: Common,
}

/// The options every mode takes (before or after its name).
#[cfg(target_os = "linux")]
#[derive(clap::Args, Debug)]
pub(crate) struct Common {
    /// Fast check: a smaller file, one repetition, shorter runs (the mode's help says how).
    #[arg(long, global = true)]
    quick: bool,
    /// Write the results into this Markdown file (e.g. docs/PERFORMANCE.md) between the
    /// mode's marker comments; the text around them is kept.
    #[arg(long, global = true)]
    write_doc: Option<std::path::PathBuf>,
    /// Directory for the charts (default: perf/ next to --write-doc's file; none without it).
    #[arg(long, global = true)]
    svg_dir: Option<std::path::PathBuf>,
    /// Rate of every shaped link, Mbit/s (each mode has its default).
    #[arg(long, global = true, value_parser = clap::value_parser!(u32).range(1..))]
    rate: Option<u32>,
    /// File size in MiB (default 1024, or 256 with --quick, unless the mode says otherwise).
    #[arg(long, global = true)]
    size_mib: Option<u64>,
    /// Repetitions of every measurement; the median is reported (default 3, or 1 with
    /// --quick, unless the mode says otherwise).
    #[arg(long, global = true)]
    reps: Option<usize>,
    /// Seconds per iperf3 run (default 5, or 2 with --quick).
    #[arg(long, global = true)]
    iperf_seconds: Option<u32>,
    /// The smbcp binary (default: the one next to this binary).
    #[arg(long, global = true)]
    smbcp: Option<std::path::PathBuf>,
    /// Seconds to wait before each testbed for other work on the machine to stop (under 10 %
    /// of all CPUs busy); measuring goes ahead afterwards either way.
    #[arg(long, global = true, default_value_t = 300)]
    wait_quiet: u64,
}

#[cfg(target_os = "linux")]
#[derive(clap::Subcommand, Debug)]
enum Mode {
    /// One link unshaped, then one shaped to 1 Gbit/s: smbcp and smbclient both ways (and on
    /// the [encrypted] share unshaped) against raw TCP, and small-read latency. --quick: 256 MiB.
    Main {
        /// Timed operations per latency measurement.
        #[arg(long, default_value_t = 2000)]
        latency_ops: usize,
    },
    /// smbcp's chunk sizes and depths on the unshaped link, smbclient as the yardstick.
    Sweep,
    /// smbcp over N links shaped to --rate (default 500) against their aggregate raw TCP and
    /// smbclient, and one unshaped link with one channel and several. --quick: 64 MiB.
    Multichannel {
        /// Numbers of links, one testbed each.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4", value_parser = clap::value_parser!(u16).range(1..=32))]
        links: Vec<u16>,
        /// Channels of the several-channel run on the unshaped link (`--channels-per-nic`).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=64))]
        unshaped_channels: u16,
        /// Also smbcp with these options on the shaped links (repeatable; one quoted string
        /// each, e.g. --variant "--depth 32").
        #[arg(long = "variant", value_name = "OPTIONS", allow_hyphen_values = true)]
        variants: Vec<String>,
    },
    /// Faults during smbcp copies over links shaped to --rate (default 100): one link's
    /// connections reset, one link silently down, every connection reset; the failover gap,
    /// time lost and recovery. The file size follows from the timeline unless --size-mib.
    Failover {
        /// Links of the testbed (the fault hits link 2).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=32))]
        links: u16,
        /// Seconds the link stays down in the silent fault (default 8, or 4 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
        down_seconds: Option<u64>,
    },
    /// fio through an smbfuse mount against smbcp and smbclient on 1 and 4 links at 1 Gbit/s
    /// and one unshaped link, and listing a 10,000-entry directory.
    Mount {
        /// Also read through a mount with these `-o` options (e.g. cache=none,prefetch=0), in
        /// the same repetitions, as rows of their own; repeatable.
        #[arg(long, value_name = "OPTIONS")]
        mount_compare: Vec<String>,
    },
    /// Trees of many small files copied both ways, smbcp -r against smbclient's mput/mget, on
    /// 1 and 4 links shaped to --rate (default 1000). --quick: a tenth of the files.
    SmallFiles,
    /// 4 KiB random reads and writes through the library at queue depths 1-64, on one channel
    /// and on four links at --rate (default 1000). --quick: 256 MiB, 1 s per point.
    QueueDepth,
    /// The sequence a user runs by hand, round after round (smbcp download, smbclient get,
    /// uploads of what each got), on one unshaped link and on 4 links at --rate (default
    /// 1000); --reps rounds (default 5).
    Mixed,
}
