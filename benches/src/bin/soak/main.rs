//! `soak`: an hour (by default) of verified uploads, downloads and listings over flapping
//! links with two smbd restarts, sampling what the client holds; pass or fail at the end
//! (docs/RELIABILITY.md, "Soak"). Needs root and the Linux testbed: elsewhere it says so and
//! exits with status 2. Exit status: 0 passed, 1 failed, 2 could not run.

use std::process::ExitCode;

/// Counts the heap in use, the soak's measure of what the client keeps at rest.
#[cfg(target_os = "linux")]
#[global_allocator]
static HEAP: smb3_benches::soak::heap::Counting = smb3_benches::soak::heap::Counting;

#[cfg(not(target_os = "linux"))]
fn main() -> ExitCode {
    eprintln!("soak drives the Linux testbed (network namespaces, smbd): it runs on Linux only");
    ExitCode::from(2)
}

#[cfg(target_os = "linux")]
fn main() -> ExitCode {
    linux::main()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::path::PathBuf;
    use std::process::ExitCode;
    use std::time::Duration;

    use clap::Parser;
    use smb3_benches::soak::{self, checks, Settings};

    /// Long-running fault soak of the SMB3 multichannel client.
    #[derive(Parser, Debug)]
    #[command(about)]
    struct Args {
        /// Minutes of workload (3 is the short mode).
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=1440))]
        minutes: u64,
        /// Seed of the faults and the workload (default: from the clock; printed either way).
        #[arg(long)]
        seed: Option<u64>,
        /// Links of the testbed.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(2..=8))]
        links: u64,
        /// Rate of every link, Mbit/s.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(10..))]
        rate: u32,
        /// Concurrent uploads (with --mount: fio jobs).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=16))]
        uploaders: u64,
        /// Concurrent downloads.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=16))]
        downloaders: u64,
        /// Run the workload through an smbfuse mount instead of the library: fio jobs writing
        /// and verifying files, `ls -R` of a tree, renames read back (with the `smbfuse` and
        /// `smbctl` built next to this program).
        #[arg(long)]
        mount: bool,
        /// Directory for samples.csv, samples.json, events.csv and summary.json (default
        /// /tmp/soak-<seed>).
        #[arg(long)]
        out: Option<PathBuf>,
    }

    pub(super) fn main() -> ExitCode {
        let args = Args::parse();
        let seed = args.seed.unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(1, |d| d.as_nanos() as u64)
        });
        let mut settings = Settings {
            duration: Duration::from_secs(args.minutes * 60),
            seed,
            links: args.links as usize,
            rate_mbit: args.rate,
            uploaders: args.uploaders as usize,
            downloaders: args.downloaders as usize,
            out_dir: args
                .out
                .unwrap_or_else(|| PathBuf::from(format!("/tmp/soak-{seed}"))),
            sample_every: Duration::from_secs(10),
            mount: None,
        };
        println!(
            "soak: seed {seed} (repeat with --seed {seed}), {} min, results in {}",
            args.minutes,
            settings.out_dir.display()
        );
        if args.mount {
            let programs = ["smbfuse", "smbctl"].map(|p| smb3_benches::beside(None, p));
            match programs {
                [Ok(fuse), Ok(ctl)] => settings.mount = Some((fuse, ctl)),
                [Err(e), _] | [_, Err(e)] => {
                    eprintln!("soak: cannot run: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        let outcome = match soak::run(&settings) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("soak: cannot run: {e}");
                return ExitCode::from(2);
            }
        };
        let reasons = checks::judge(&outcome);
        if let Err(e) = checks::write_files(&outcome, &reasons) {
            eprintln!("soak: {e}");
        }
        print!("{}", checks::summary_text(&outcome, &reasons));
        match reasons.is_empty() {
            true => ExitCode::SUCCESS,
            false => ExitCode::FAILURE,
        }
    }
}
