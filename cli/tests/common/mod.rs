//! What the smbcp test binaries share: the testbed they start, URLs into it, and running
//! smbcp in the client namespace. Each binary uses part of it.
#![allow(dead_code)]

use std::process::Output;

use smb3_tests::{Testbed, TestbedConfig};

pub(crate) const SMBCP: &str = env!("CARGO_BIN_EXE_smbcp");

/// One unshaped link: these tests are about behaviour, not speed.
pub(crate) fn testbed() -> Testbed {
    Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"))
}

/// `smb://DOMAIN;user@server/share_and_path` on the testbed's first link.
pub(crate) fn url(tb: &Testbed, share_and_path: &str) -> String {
    format!(
        "smb://{};{}@{}/{share_and_path}",
        tb.domain(),
        tb.user(),
        tb.server_addr(1)
    )
}

/// smbcp with the test user's password; what it said is echoed for a failing test's log.
pub(crate) fn smbcp(tb: &Testbed, args: &[&str]) -> Output {
    smbcp_as(tb, tb.password(), args)
}

/// smbcp with `password` (a wrong one, for the tests of errors).
pub(crate) fn smbcp_as(tb: &Testbed, password: &str, args: &[&str]) -> Output {
    let out = tb
        .client_command(SMBCP)
        .env("SMB_PASSWORD", password)
        .env_remove("SMB_USER")
        .args(args)
        .output()
        .expect("run smbcp");
    eprintln!(
        "smbcp {args:?}\n  status {:?}\n  stdout {}\n  stderr {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub(crate) const SMBCTL: &str = env!("CARGO_BIN_EXE_smbctl");

/// smbctl with the test user's password; what it said is echoed for a failing test's log.
pub(crate) fn smbctl(tb: &Testbed, args: &[&str]) -> Output {
    let out = tb
        .client_command(SMBCTL)
        .env("SMB_PASSWORD", tb.password())
        .env_remove("SMB_USER")
        .args(args)
        .output()
        .expect("run smbctl");
    eprintln!(
        "smbctl {args:?}\n  status {:?}\n  stdout {}\n  stderr {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// smbcp's `--json` output.
pub(crate) fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("stdout is not JSON: {e}"))
}

/// A fresh scratch directory of this test binary and process, removed when dropped.
pub(crate) fn scratch(name: &str) -> smb3_tests::scratch::Scratch {
    smb3_tests::scratch::Scratch::new(env!("CARGO_CRATE_NAME"), name)
}
