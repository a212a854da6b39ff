//! `smbfuse SOURCE MOUNTPOINT [-o OPTIONS] [-f]`: see `smbfuse --help` and the README.

use clap::Parser;

fn main() {
    let args = smbfuse::mount::Args::parse();
    std::process::exit(smbfuse::mount::run(args));
}
