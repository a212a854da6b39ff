//! `smbfuse SOURCE MOUNTPOINT [-o OPTIONS] [-f]`: see `smbfuse --help` and the README.

use clap::{CommandFactory, Parser};

fn main() {
    if let Ok(g) = smbfuse::mount::GenerateOnly::try_parse() {
        let cmd = smbfuse::mount::Args::command();
        let status = match (g.generate, g.generate_into) {
            (Some(what), _) => smbcp::generate::print(cmd, what, "8"),
            (None, Some(dir)) => smbcp::generate::print_all(cmd, "8", &dir),
            (None, None) => 2,
        };
        std::process::exit(status);
    }
    let args = smbfuse::mount::Args::parse();
    std::process::exit(smbfuse::mount::run(args));
}
