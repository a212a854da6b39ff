//! smbfuse's man page (section 8) and completion scripts, generated as scripts/install.sh
//! installs them, cover every option `smbfuse --help` shows, and the mount options.

use std::process::Command;

const SMBFUSE: &str = env!("CARGO_BIN_EXE_smbfuse");

#[test]
fn the_man_page_and_completions_cover_every_option() {
    let share = std::env::temp_dir().join(format!("smbfuse-manual-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&share);
    let out = Command::new(SMBFUSE)
        .args(["--generate-into", share.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = Command::new(SMBFUSE).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let options: Vec<&str> = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .map(|l| l.split("  ").next().unwrap_or(l))
        .flat_map(|l| l.split([' ', ',', '<']))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .collect();
    assert!(options.contains(&"--foreground"), "{options:?}");
    let man = std::fs::read_to_string(share.join("man/man8/smbfuse.8"))
        .unwrap()
        .replace("\\-", "-");
    assert!(man.contains(".TH smbfuse 8"), "{man}");
    for o in &options {
        assert!(man.contains(o), "smbfuse.8 lacks {o}");
    }
    // The -o options the page explains, the safe defaults' opt-outs among them.
    for o in ["nosign", "noperm", "vers="] {
        assert!(man.contains(o), "smbfuse.8 lacks {o}");
    }
    for script in [
        "bash-completion/completions/smbfuse",
        "zsh/site-functions/_smbfuse",
        "fish/vendor_completions.d/smbfuse.fish",
    ] {
        let text = std::fs::read_to_string(share.join(script)).unwrap();
        assert!(text.contains("foreground"), "{script}");
    }
    std::fs::remove_dir_all(&share).unwrap();
}
