//! The man pages and completion scripts the tools generate (`--generate-into`, as
//! scripts/install.sh installs them) cover every command and every option `--help` shows.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const SMBCP: &str = env!("CARGO_BIN_EXE_smbcp");
const SMBCTL: &str = env!("CARGO_BIN_EXE_smbctl");

/// The long options an option list of `--help` names (`--recursive`, `--max-dialect`, ...).
fn long_options(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        // The option's own words, before the two spaces that start its description.
        .map(|l| l.split("  ").next().unwrap_or(l))
        .flat_map(|l| l.split([' ', ',', '[', '=', '<']))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().expect("run");
    assert!(out.status.success(), "{bin} {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every long option of `bin [sub] --help` is in `page` (roff writes `-` as `\-`) and in
/// each completion script.
fn covered(bin: &str, sub: Option<&str>, share: &Path, page: &str) {
    let name = Path::new(bin).file_name().unwrap().to_str().unwrap();
    let mut args: Vec<&str> = sub.into_iter().collect();
    args.push("--help");
    let options = long_options(&run(bin, &args));
    assert!(options.len() > 3, "{name} {sub:?}: {options:?}");
    let man = std::fs::read_to_string(share.join(page))
        .unwrap()
        .replace("\\-", "-");
    let scripts = [
        format!("bash-completion/completions/{name}"),
        format!("zsh/site-functions/_{name}"),
        format!("fish/vendor_completions.d/{name}.fish"),
    ];
    for o in &options {
        assert!(man.contains(o.as_str()), "{page} lacks {o}");
        for s in &scripts {
            let text = std::fs::read_to_string(share.join(s)).unwrap();
            // fish names a long option without its dashes (`-l recursive`).
            let bare = o.trim_start_matches('-');
            assert!(
                text.contains(o.as_str()) || text.contains(&format!("-l {bare}")),
                "{s} lacks {o}"
            );
        }
    }
}

#[test]
fn man_pages_and_completions_cover_every_command_and_option() {
    let share = std::env::temp_dir().join(format!("smbcp-manuals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&share);
    for bin in [SMBCP, SMBCTL] {
        let listed = run(bin, &["--generate-into", share.to_str().unwrap()]);
        assert!(listed.lines().count() >= 4, "{listed}");
    }
    covered(SMBCP, None, &share, "man/man1/smbcp.1");
    covered(SMBCTL, None, &share, "man/man1/smbctl.1");
    for sub in ["ls", "stat", "channels", "watch", "status", "interfaces"] {
        covered(
            SMBCTL,
            Some(sub),
            &share,
            &format!("man/man1/smbctl-{sub}.1"),
        );
    }
    // The page starts the way man(1) reads it.
    let page = std::fs::read_to_string(share.join("man/man1/smbcp.1")).unwrap();
    assert!(page.contains(".TH smbcp 1"), "{page}");
    std::fs::remove_dir_all(&share).unwrap();
}
