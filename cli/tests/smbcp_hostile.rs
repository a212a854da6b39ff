//! smbcp against names it must not trust: a hostile server (a relay holding the session's
//! keys, read from smbcp's own `SMB_KEYLOGFILE`, that renames entries of directory listings and
//! signs its replies again), a man in the middle without the keys doing the same, and smbd
//! serving Linux names that Windows forbids. Whatever the server lists, every file smbcp writes
//! lies below the destination; what it refuses is named on stderr and the exit code says so.
//! smbcp runs as a subprocess in the client namespace, through the relay
//! (`smb3_tests::mitm`), on one channel (`--no-multichannel`: other channels would bypass the
//! relay), under `timeout` so that every run is bounded.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smb3_tests::mitm::{renaming_entries, BoxedRule, Mitm, RenameCounts, SigningKeys};
use smb3_tests::{client_block_on, Testbed};

mod common;
use common::{scratch, testbed, SMBCP};

/// The longest an smbcp run may take here.
const RUN_LIMIT: Duration = Duration::from_secs(60);

fn upstream(tb: &Testbed) -> SocketAddr {
    SocketAddr::from((tb.server_addr(1), 445))
}

/// `smb://DOMAIN;user@RELAY/share_and_path`.
fn relay_url(tb: &Testbed, mitm: &Mitm, share_and_path: &str) -> String {
    format!(
        "smb://{};{}@{}/{share_and_path}",
        tb.domain(),
        tb.user(),
        mitm.addr()
    )
}

/// smbcp in the client namespace with the test user's password, its keys appended to
/// `key_log` when given, killed after [`RUN_LIMIT`]; what it said is echoed for the log.
fn smbcp(tb: &Testbed, key_log: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = tb.client_command("timeout");
    cmd.arg(RUN_LIMIT.as_secs().to_string())
        .arg(SMBCP)
        .env("SMB_PASSWORD", tb.password())
        .env_remove("SMB_USER")
        .env_remove("SMB_KEYLOGFILE");
    if let Some(path) = key_log {
        cmd.env("SMB_KEYLOGFILE", path);
    }
    let started = Instant::now();
    let out = cmd.args(args).output().expect("run smbcp");
    eprintln!(
        "smbcp {args:?} ({:?})\n  status {:?}\n  stdout {}\n  stderr {}",
        started.elapsed(),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(124), "smbcp ran past {RUN_LIMIT:?}");
    out
}

/// Every entry below `root` (files, directories, links, without following links), as paths
/// relative to it, with the contents of regular files.
fn everything_below(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if md.is_dir() {
                stack.push(p);
                out.insert(rel, None);
            } else if md.is_file() {
                out.insert(rel, Some(std::fs::read(&p).unwrap()));
            } else {
                out.insert(rel, None);
            }
        }
    }
    out
}

/// The names of the entries of `dir`.
fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The names a hostile server gives entries, each as long in UTF-16 as the real name it
/// replaces: (real name, name on the wire).
fn hostile_renames() -> Vec<(String, String)> {
    let owned = format!("/tmp/owned-{:04x}", std::process::id() & 0xFFFF);
    [owned.as_str(), "../../x", "a/b", "c\\d", "n\0l", ".."]
        .into_iter()
        .map(|bad| {
            (
                bad.replace(['/', '\\', '\0'], "_").replace('.', "d"),
                bad.to_string(),
            )
        })
        .collect()
}

/// Files that keep their names.
fn good_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("good-1.txt", b"first good file".to_vec()),
        // Larger than one chunk: the regular pipeline, not the small-file compound.
        ("good-2.bin", smb3_tests::pattern(7, (1 << 20) + 4321)),
    ]
}

/// `dir` in the plain share's directory on the server's disk, holding `files`.
fn make_server_dir(tb: &Testbed, dir: &str, files: &[(String, Vec<u8>)]) {
    let d = tb.share_path("plain").join(dir);
    std::fs::create_dir_all(&d).unwrap();
    for (name, data) in files {
        std::fs::write(d.join(name), data).unwrap();
    }
    tb.give_to_user(&d);
}

/// The good files and the real files behind [`hostile_renames`] in `names/`.
fn make_names_dir(tb: &Testbed) {
    let mut files: Vec<(String, Vec<u8>)> = good_files()
        .into_iter()
        .map(|(n, d)| (n.to_string(), d))
        .collect();
    for (real, _) in hostile_renames() {
        files.push((real, b"renamed on the wire".to_vec()));
    }
    make_server_dir(tb, "names", &files);
}

/// A relay in front of smbd in the client namespace, renaming entries as `renames` says;
/// with `key_log`, it signs its changes again with the keys smbcp writes there.
fn renaming_relay(
    tb: &Testbed,
    rt: &tokio::runtime::Runtime,
    renames: Vec<(String, String)>,
    key_log: Option<&Path>,
) -> (Mitm, RenameCounts, Option<SigningKeys>) {
    let keys = key_log.map(SigningKeys::from_key_log_file);
    let counts = RenameCounts::default();
    let rules = renaming_entries(
        renames.into_iter().collect::<HashMap<_, _>>(),
        keys.clone(),
        Arc::new(AtomicBool::new(true)),
        counts.clone(),
    );
    let mitm = client_block_on(rt, Mitm::start(upstream(tb), rules));
    (mitm, counts, keys)
}

/// Hostile server (keys from smbcp's SMB_KEYLOGFILE) lists path-like names → smbcp refuses each on stderr, copies the rest, writes nothing outside the destination, exit 1 (MS-SMB2 2.2.34).
// Unsafe names from a hostile server (MS-FSCC 2.1.5, MS-SMB2 2.2.34): a relay holding the
// session's keys (from smbcp's SMB_KEYLOGFILE) renames entries of `names/` to
// `/tmp/owned-…`, `../../x`, `a/b`, `c\d`, `n<NUL>l` and `..` and signs again. `smbcp -r`
// exits 1, names each refused entry on stderr, copies the good files byte-exact, and writes
// nothing outside the destination (`/tmp` and the destination's parent are checked).
// Control: the same copy through an untampered relay copies every real name.
#[test]
fn smbcp_refuses_each_unsafe_name_a_hostile_server_lists_and_copies_the_rest() {
    let tb = testbed();
    make_names_dir(&tb);
    let rt = tb.client_runtime();
    let local = scratch("hostile-names");
    let keys_dir = scratch("hostile-names-keys");
    let key_log = keys_dir.join("keys.log");

    // Control.
    let plain = client_block_on(&rt, Mitm::start(upstream(&tb), |_| None::<BoxedRule>));
    let control = local.join("control");
    std::fs::create_dir_all(&control).unwrap();
    let o = smbcp(
        &tb,
        None,
        &[
            "-r",
            "-q",
            "--no-multichannel",
            &relay_url(&tb, &plain, "plain/names"),
            control.to_str().unwrap(),
        ],
    );
    assert!(o.status.success());
    assert_eq!(
        names_in(&control.join("names")).len(),
        2 + hostile_renames().len()
    );
    drop(plain);
    std::fs::remove_dir_all(&control).unwrap();

    let (mitm, counts, keys) = renaming_relay(&tb, &rt, hostile_renames(), Some(&key_log));
    let down = local.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let o = smbcp(
        &tb,
        Some(&key_log),
        &[
            "-r",
            "-q",
            "--no-multichannel",
            &relay_url(&tb, &mitm, "plain/names"),
            down.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(keys.unwrap().sessions() >= 1, "smbcp logged its keys");
    assert!(counts.renamed.load(Ordering::SeqCst) >= 6);
    assert_eq!(
        counts.unsigned.load(Ordering::SeqCst),
        0,
        "every change signed"
    );
    for (_, bad) in hostile_renames().iter().filter(|(_, bad)| bad != "..") {
        let shown = format!("{bad:?}");
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&shown) && l.contains("refused")),
            "{shown} named on stderr: {stderr}"
        );
    }
    // Only the good files, byte-exact, below the destination; nothing else anywhere.
    let got = everything_below(&down);
    let mut want: BTreeMap<PathBuf, Option<Vec<u8>>> = BTreeMap::new();
    want.insert("names".into(), None);
    for (name, data) in good_files() {
        want.insert(Path::new("names").join(name), Some(data));
    }
    assert!(
        got == want,
        "below the destination: {:?}",
        got.keys().collect::<Vec<_>>()
    );
    assert_eq!(names_in(&local), BTreeSet::from(["down".to_string()]));
    assert!(
        !Path::new(&hostile_renames()[0].1).exists(),
        "nothing in /tmp"
    );
    assert!(!Path::new("/tmp/x").exists() && !local.join("x").exists());
    drop(mitm);
    drop(rt);
    std::fs::remove_dir_all(&local).ok();
    std::fs::remove_dir_all(&keys_dir).ok();
}

/// MITM without keys renames directory entries → smbcp reports a bad signature, writes no file from that listing, exit 1 (MS-SMB2 3.2.5.1.3).
// The same renaming by a man in the middle without the keys (MS-SMB2 3.2.5.1.3): the changed
// QUERY_DIRECTORY reply does not verify, so the listing of `names/` fails with a bad
// signature (named on stderr, exit 1) and no file is written from it.
#[test]
fn smbcp_through_a_man_in_the_middle_without_keys_writes_nothing_from_a_changed_listing() {
    let tb = testbed();
    make_names_dir(&tb);
    let rt = tb.client_runtime();
    let local = scratch("mitm-names");
    let (mitm, counts, _) = renaming_relay(&tb, &rt, hostile_renames(), None);
    let down = local.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let o = smbcp(
        &tb,
        None,
        &[
            "-r",
            "-q",
            "--no-multichannel",
            &relay_url(&tb, &mitm, "plain/names"),
            down.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(counts.renamed.load(Ordering::SeqCst) >= 6);
    assert!(
        stderr.contains("bad signature on QUERY_DIRECTORY reply"),
        "{stderr}"
    );
    let got = everything_below(&down);
    assert!(
        got.values().all(Option::is_none),
        "no file written: {:?}",
        got.keys().collect::<Vec<_>>()
    );
    assert_eq!(names_in(&local), BTreeSet::from(["down".to_string()]));
    assert!(
        !Path::new(&hostile_renames()[0].1).exists(),
        "nothing in /tmp"
    );
    drop(mitm);
    drop(rt);
    std::fs::remove_dir_all(&local).ok();
}

/// Hostile server lists one name twice (`fop` renamed `foo`, re-signed) → smbcp copies the first, reports "listed twice", exit 1 (MS-SMB2 2.2.34).
// A name listed twice (a hostile server renames `fop` to `foo` in place, signing again):
// both would be written to one local file, the second silently replacing the first. smbcp
// copies the first, reports the second ("listed twice") and exits 1. (Linux file systems
// are case-sensitive, so `foo`/`FOO` would both be copied here; the same check refuses them
// on a case-insensitive destination, see cli/src/name_clash.rs.)
#[test]
fn smbcp_copies_one_of_a_name_listed_twice_and_says_so() {
    let tb = testbed();
    let files: Vec<(String, Vec<u8>)> = vec![
        ("foo".into(), b"the real foo".to_vec()),
        ("fop".into(), b"fop, listed as foo".to_vec()),
        ("other".into(), b"another file".to_vec()),
    ];
    make_server_dir(&tb, "clash", &files);
    let rt = tb.client_runtime();
    let local = scratch("clash");
    let keys_dir = scratch("clash-keys");
    let key_log = keys_dir.join("keys.log");
    let renames = vec![("fop".to_string(), "foo".to_string())];
    let (mitm, counts, _) = renaming_relay(&tb, &rt, renames, Some(&key_log));
    let down = local.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let o = smbcp(
        &tb,
        Some(&key_log),
        &[
            "-r",
            "-q",
            "--no-multichannel",
            &relay_url(&tb, &mitm, "plain/clash"),
            down.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(counts.renamed.load(Ordering::SeqCst) >= 1);
    assert_eq!(counts.unsigned.load(Ordering::SeqCst), 0);
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("listed twice") && l.contains("\"foo\"")),
        "{stderr}"
    );
    let got = everything_below(&down);
    let want: BTreeMap<PathBuf, Option<Vec<u8>>> = BTreeMap::from([
        (PathBuf::from("clash"), None),
        (PathBuf::from("clash/foo"), Some(b"the real foo".to_vec())),
        (PathBuf::from("clash/other"), Some(b"another file".to_vec())),
    ]);
    assert!(got == want, "{:?}", got.keys().collect::<Vec<_>>());
    drop(mitm);
    drop(rt);
    std::fs::remove_dir_all(&local).ok();
    std::fs::remove_dir_all(&keys_dir).ok();
}

/// smbd serves Linux names Windows forbids (`\`, `:`, trailing dots/spaces, 255 bytes) → smbcp writes only inside the destination, exit code matches what it copied (MS-FSCC 2.1.5).
// Linux names that Windows forbids, served by smbd itself (no relay): names holding `\`,
// `:`, `*`, `?`, `"`, `<`, `>`, `|`, a newline, trailing dots or spaces, and one of 255 bytes.
// `smbcp -r` writes every file it copies inside the destination, under a name that is one
// component; the test records what Samba 4.17 made of each name (passed through, or a mangled
// 8.3 name) and checks the exit code matches (0 when every file was copied under some safe
// name, 1 when any was refused or failed, each named on stderr).
// Measured with Samba 4.17.12 (default `mangled names = illegal`): every name holding `\`,
// `:`, `*`, `?`, `"`, `<`, `>`, `|` or a newline, and every name ending in a dot or a space, is
// listed under a mangled 8.3 name (`back\slash` as `BAYTAM~F`, `trailing dot.` as `TQEBZE~2`,
// ...), which smbcp copies under that name; ` leading space` and the 255-byte name pass
// through unchanged (the partial file of the latter takes the short `.smbcp-partial-…`
// form). Nothing is refused: exit 0, 14 files, all inside the destination.
#[test]
fn smbcp_down_a_tree_of_linux_names_windows_forbids_stays_inside_the_destination() {
    let tb = testbed();
    let long = "L".repeat(255);
    let names: Vec<String> = [
        "plain.txt",
        "back\\slash",
        "co:lon",
        "st*r",
        "qu?stion",
        "dq\"uote",
        "<angle>",
        "pi|pe",
        "new\nline",
        "trailing dot.",
        "trailing dots...",
        "trailing space ",
        " leading space",
        long.as_str(),
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    // Each file's content names it, so the copy can be matched back whatever its name.
    let files: Vec<(String, Vec<u8>)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), format!("file {i}: {n:?}\n").into_bytes()))
        .collect();
    make_server_dir(&tb, "linuxnames", &files);
    let local = scratch("linux-names");
    let down = local.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let url = format!(
        "smb://{};{}@{}/plain/linuxnames",
        tb.domain(),
        tb.user(),
        tb.server_addr(1)
    );
    let o = smbcp(&tb, None, &["-r", "-q", &url, down.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();

    // Nothing outside the destination, nothing but regular files and the one directory in it.
    assert_eq!(names_in(&local), BTreeSet::from(["down".to_string()]));
    let got = everything_below(&down);
    let mut copied: HashMap<Vec<u8>, String> = HashMap::new();
    for (path, content) in &got {
        let parts: Vec<_> = path.components().collect();
        match content {
            None => assert_eq!(path, Path::new("linuxnames"), "only the one directory"),
            Some(data) => {
                assert_eq!(parts.len(), 2, "{path:?} directly in linuxnames/");
                assert_eq!(parts[0].as_os_str(), "linuxnames");
                let name = parts[1].as_os_str().to_string_lossy().into_owned();
                assert!(smb3_client::check_name(&name).is_ok(), "{name:?}");
                copied.insert(data.clone(), name);
            }
        }
    }
    let mut all_copied = true;
    eprintln!(
        "what Samba {} made of each name, and what smbcp did:",
        samba_version()
    );
    for (name, data) in &files {
        let shown = format!("{name:?}");
        let shown_short = if shown.len() > 40 {
            format!("{}...({} bytes)", &shown[..20], name.len())
        } else {
            shown
        };
        match copied.get(data) {
            Some(local_name) if local_name == name => {
                eprintln!("  {shown_short:<28} passed through, copied under its own name")
            }
            Some(local_name) => {
                eprintln!("  {shown_short:<28} listed as {local_name:?}, copied under that name")
            }
            None => {
                all_copied = false;
                let line = stderr
                    .lines()
                    .find(|l| l.contains(&name[..name.len().min(8)]))
                    .unwrap_or("(no line names it)");
                eprintln!("  {shown_short:<28} NOT copied: {line}");
            }
        }
    }
    assert_eq!(copied.len(), got.values().filter(|c| c.is_some()).count());
    if all_copied {
        assert_eq!(o.status.code(), Some(0), "{stderr}");
    } else {
        assert_eq!(o.status.code(), Some(1), "{stderr}");
    }
    std::fs::remove_dir_all(&local).ok();
}

fn samba_version() -> String {
    std::process::Command::new("smbd")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
