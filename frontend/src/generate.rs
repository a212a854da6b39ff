//! Man pages and shell completions, made from the same definitions as `--help`, so they can
//! never disagree with it: each tool takes a hidden `--generate man|bash|zsh|fish` and prints
//! the page or the script on stdout (`scripts/install.sh` puts them in place).

use std::io::Write;

/// What `--generate` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generate {
    /// The man page (roff).
    Man,
    /// A bash completion script.
    Bash,
    /// A zsh completion script.
    Zsh,
    /// A fish completion script.
    Fish,
}

/// Write `what` for the command `cmd` (its name is the program's) to `out`; a man page goes
/// in `section` (1 for commands, 8 for smbfuse, which mounts).
pub fn write(
    mut cmd: clap::Command,
    what: Generate,
    section: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let name = cmd.get_name().to_string();
    match what {
        Generate::Man => clap_mangen::Man::new(cmd).section(section).render(out),
        Generate::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, name, out);
            Ok(())
        }
        Generate::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, name, out);
            Ok(())
        }
        Generate::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, name, out);
            Ok(())
        }
    }
}

/// Every page and script of `cmd` below `share` (a `PREFIX/share` directory): the man page
/// `man<section>/<name>.<section>` and one per subcommand (`<name>-<sub>.<section>`, as git
/// has, since a page shows only its own command's options), and the completions where
/// bash, zsh and fish look for them. Returns the files written.
pub fn write_all(
    cmd: clap::Command,
    section: &str,
    share: &std::path::Path,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut cmd = cmd;
    // Built, the subcommands carry the global options too (they take them as well).
    cmd.build();
    let name = cmd.get_name().to_string();
    let man_dir = share.join(format!("man/man{section}"));
    let mut pages = vec![(name.clone(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let sub_name = format!("{name}-{}", sub.get_name());
        pages.push((sub_name.clone(), sub.clone().name(sub_name)));
    }
    let mut written = Vec::new();
    let mut put = |path: std::path::PathBuf, c: clap::Command, what: Generate| {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        write(c, what, section, &mut out)?;
        out.flush()?;
        written.push(path);
        Ok::<(), std::io::Error>(())
    };
    for (page, c) in pages {
        put(man_dir.join(format!("{page}.{section}")), c, Generate::Man)?;
    }
    let completions = [
        (
            format!("bash-completion/completions/{name}"),
            Generate::Bash,
        ),
        (format!("zsh/site-functions/_{name}"), Generate::Zsh),
        (
            format!("fish/vendor_completions.d/{name}.fish"),
            Generate::Fish,
        ),
    ];
    for (rel, what) in completions {
        put(share.join(rel), cmd.clone(), what)?;
    }
    Ok(written)
}

/// [`write_all`] for a tool's hidden `--generate-into DIR`; the exit status.
pub fn print_all(cmd: clap::Command, section: &str, share: &std::path::Path) -> i32 {
    match write_all(cmd, section, share) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            0
        }
        Err(e) => {
            eprintln!("{}: {e}", share.display());
            1
        }
    }
}

/// `write` to stdout, for a tool's `--generate`; the exit status.
pub fn print(cmd: clap::Command, what: Generate, section: &str) -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match write(cmd, what, section, &mut out).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    #[command(name = "tool")]
    struct Tool {
        /// A flag that must reach every output.
        #[arg(long)]
        distinctive_flag: bool,
    }

    #[test]
    fn every_output_names_the_tool_and_its_options() {
        use clap::CommandFactory;
        for what in [Generate::Man, Generate::Bash, Generate::Zsh, Generate::Fish] {
            let mut out = Vec::new();
            write(Tool::command(), what, "1", &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.contains("tool"), "{what:?}");
            assert!(text.contains("distinctive"), "{what:?}: {text}");
        }
    }
}
