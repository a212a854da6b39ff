//! The Python package against the testbed's real smbd: builds and installs `smb3` into a
//! venv (`pip install ./python`, maturin as the build backend) and runs the pytest suite in
//! `tests/py/` inside the testbed's client namespace, the server's address and account in
//! `SMB3_TEST_*` variables.
//!
//! The venv is `$SMB3_PYTHON_VENV` when set (CI prepares one with `tests/requirements.txt`
//! under /var/cache), else `target/python-venv`, made here with `python3 -m venv` and the
//! requirements from PyPI the first time. Needs root (the testbed); run with
//! `cargo test -p smb3-python --release --test pytest`.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smb3_tests::{Testbed, TestbedConfig};

/// Longest the pytest run may take before it is killed (it takes a few seconds).
const PYTEST_LIMIT: Duration = Duration::from_secs(300);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `target/`, from this test's own path (`target/<profile>/deps/<test>`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The venv's python, made and filled with the requirements when missing.
fn venv() -> PathBuf {
    let dir = match std::env::var_os("SMB3_PYTHON_VENV") {
        Some(d) => PathBuf::from(d),
        None => target_dir().join("python-venv"),
    };
    let python = dir.join("bin/python");
    let reqs = crate_dir().join("tests/requirements.txt");
    if !python.exists() {
        run(
            Command::new("python3").arg("-m").arg("venv").arg(&dir),
            "python3 -m venv (Debian: apt-get install python3-venv)",
        );
    }
    // Quick when everything is there already (no download).
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&reqs),
        "pip install -r tests/requirements.txt",
    );
    python
}

/// `pip install ./python` into the venv, built by its maturin into this test's target dir
/// (the workspace's dependencies are compiled already).
fn install(python: &Path) {
    let profile_release = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent()?.parent()?.file_name().map(|n| n == "release"))
        .unwrap_or(true);
    let mut cmd = Command::new(python);
    cmd.args([
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "--no-build-isolation",
        "--no-deps",
        "--force-reinstall",
    ])
    .arg(crate_dir())
    .env("CARGO_TARGET_DIR", target_dir())
    .env("PATH", path_with_venv(python));
    if !profile_release {
        cmd.env("MATURIN_PEP517_ARGS", "--profile dev");
    }
    run(&mut cmd, "pip install ./python");
}

/// PATH with the venv's bin first (pip's build backend runs `maturin` from there).
fn path_with_venv(python: &Path) -> std::ffi::OsString {
    let bin = python.parent().expect("venv/bin").to_path_buf();
    let mut paths = vec![bin];
    if let Some(p) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(paths).expect("PATH")
}

#[test]
fn pytest_suite_passes_against_smbd() {
    let python = venv();
    install(&python);
    let tb = Testbed::start(TestbedConfig::unshaped(2)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let share = "plain";
    let scratch = std::env::temp_dir().join(format!("smb3-python-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let mut child = tb
        .client_command(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"])
        .arg(format!("--basetemp={}", scratch.join("pytest").display()))
        .arg(crate_dir().join("tests/py"))
        .current_dir(crate_dir().join("tests/py"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("SMB3_TEST_HOST", tb.server_addr(1).to_string())
        .env("SMB3_TEST_USER", tb.user())
        .env("SMB3_TEST_PASSWORD", tb.password())
        .env("SMB3_TEST_DOMAIN", tb.domain())
        .env("SMB3_TEST_SHARE", share)
        .env("SMB3_TEST_SHARE_DIR", tb.share_path(share))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pytest in the client namespace");
    // Read the output on threads so a full pipe never stalls pytest.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).ok();
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).ok();
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for pytest") {
            break Some(status);
        }
        if started.elapsed() > PYTEST_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (out, err) = (out_t.join().unwrap(), err_t.join().unwrap());
    println!("{out}");
    eprintln!("{err}");
    let _ = std::fs::remove_dir_all(&scratch);
    let status =
        status.unwrap_or_else(|| panic!("pytest ran over {PYTEST_LIMIT:?}:\n{out}\n{err}"));
    assert!(
        status.success(),
        "pytest failed ({status:?}):\n{out}\n{err}"
    );
    assert!(out.contains(" passed"), "pytest ran no test:\n{out}");
    // Every file the tests opened was closed at the server.
    assert_eq!(tb.open_files().unwrap(), vec![]);
}
