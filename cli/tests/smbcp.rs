//! smbcp end to end: trees both ways, the JSON summary, and every error a user meets.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Output;

use sha2::{Digest, Sha256};
use smb3_tests::{Testbed, TestbedConfig};

mod common;
use common::{json, scratch, smbcp, smbcp_as, smbctl, testbed, url, SMBCP, SMBCTL};

/// What smbcp itself said on stderr: without the library's log lines, which the fault tests
/// turn on (`RUST_LOG`) so that a failure shows what the session went through.
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|line| !is_log_line(line))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// A line of the tracing log: it starts with a timestamp like `2026-11-24T07:26:32.062203Z`.
fn is_log_line(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 20 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[10] == b'T'
}

/// Every file under `root` with its sha256, relative paths sorted.
fn tree(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                let hash: String = Sha256::digest(std::fs::read(&p).unwrap())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                out.push((rel, hash));
            }
        }
    }
    out.sort();
    out
}

fn make_tree(root: &Path) {
    let files: &[(&str, usize)] = &[
        ("empty", 0),
        ("one", 1),
        ("sub/mid.bin", 3 * 1024 * 1024 + 17),
        ("sub/deeper/ünïcødé ファイル.txt", 5000),
        ("sub/deeper/more/x", 64 * 1024),
    ];
    for (i, (name, size)) in files.iter().enumerate() {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let data: Vec<u8> = (0..*size)
            .map(|k| (k * 31 + i * 7 + k / 251) as u8)
            .collect();
        std::fs::write(p, data).unwrap();
    }
    std::fs::create_dir_all(root.join("emptydir")).unwrap();
}

#[test]
fn copies_a_tree_up_and_down_byte_exact() {
    let tb = testbed();
    let local = scratch("up");
    let src = local.join("src");
    make_tree(&src);
    let up = smbcp_as(
        &tb,
        tb.password(),
        &[
            "-r",
            "-q",
            "--json",
            src.to_str().unwrap(),
            &url(&tb, "plain/"),
        ],
    );
    assert!(up.status.success(), "{}", stderr(&up));
    let summary = String::from_utf8_lossy(&up.stdout);
    assert!(summary.contains("\"files\":5"), "{summary}");
    assert!(summary.contains("\"channels\":[{"), "{summary}");
    let on_server = tb.share_path("plain").join("src");
    assert_eq!(tree(&on_server), tree(&src));
    assert!(on_server.join("emptydir").is_dir());
    // no temporary names left behind
    assert!(!tree(&on_server)
        .iter()
        .any(|(n, _)| n.contains("smbcp-partial")));

    let down = local.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let o = smbcp_as(
        &tb,
        tb.password(),
        &["-r", "-q", &url(&tb, "plain/src"), down.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tree(&down.join("src")), tree(&src));

    // Single file to an explicit name, and over an existing file.
    let o = smbcp_as(
        &tb,
        tb.password(),
        &[
            "-q",
            &url(&tb, "plain/src/sub/mid.bin"),
            down.join("copy.bin").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = smbcp_as(
        &tb,
        tb.password(),
        &[
            "-q",
            &url(&tb, "plain/src/one"),
            down.join("copy.bin").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(down.join("copy.bin")).unwrap(),
        std::fs::read(src.join("one")).unwrap()
    );
    std::fs::remove_dir_all(&local).ok();
}

/// Many small files, each sent whole in one round trip, next to files of exactly one chunk
/// and one byte more (the regular path); some destinations exist already, with other
/// content: they are replaced through the partial name.
#[test]
fn many_small_files_arrive_whole_and_replace_what_was_there() {
    let tb = testbed();
    let local = scratch("small");
    let src = local.join("src");
    let mut sizes = Vec::new();
    for i in 0..300usize {
        let size = (i * 677) % 20_000;
        let p = src.join(format!("d{}/f{i:03}", i % 6));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, smb3_tests::pattern(i as u64 + 1, size)).unwrap();
        sizes.push(size);
    }
    std::fs::write(src.join("chunk"), smb3_tests::pattern(1000, 1 << 20)).unwrap();
    std::fs::write(
        src.join("chunk+1"),
        smb3_tests::pattern(1001, (1 << 20) + 1),
    )
    .unwrap();
    // Destinations already there, made on the server's disk: longer and shorter.
    let on_server = tb.share_path("plain").join("src");
    for (name, len) in [("d0/f000", 50_000), ("d1/f001", 1), ("chunk", 10)] {
        let p = on_server.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, vec![9u8; len]).unwrap();
    }
    tb.give_to_user(&tb.share_path("plain"));
    let o = smbcp(
        &tb,
        &[
            "-q",
            "--json",
            "-r",
            src.to_str().unwrap(),
            &url(&tb, "plain/"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        json(&o)["files"],
        302,
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(tree(&on_server), tree(&src));

    let down = local.join("down");
    std::fs::create_dir_all(down.join("src/d2")).unwrap();
    // A local destination with other content, replaced too.
    std::fs::write(down.join("src/d2/f002"), b"stale").unwrap();
    let o = smbcp(
        &tb,
        &[
            "-q",
            "--json",
            "-r",
            &url(&tb, "plain/src"),
            down.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["files"], 302);
    assert_eq!(tree(&down.join("src")), tree(&src));
    std::fs::remove_dir_all(&local).ok();
}

/// A credentials file carries the password only when it is private (mode 0600, this user's);
/// a loose one is refused with the fix, a usage error, and the password is never printed.
#[test]
fn a_credentials_file_is_used_only_when_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let tb = testbed();
    let local = scratch("creds");
    let file = local.join("c.bin");
    std::fs::write(&file, b"by credentials file").unwrap();
    let creds = local.join("smb.cred");
    std::fs::write(
        &creds,
        format!(
            "username={}\npassword={}\ndomain={}\n",
            tb.user(),
            tb.password(),
            tb.domain()
        ),
    )
    .unwrap();
    let target = format!("//{}/plain/c.bin", tb.server_addr(1));
    let run = || {
        tb.client_command(SMBCP)
            .env_remove("SMB_PASSWORD")
            .env_remove("SMB_USER")
            .args(["--credentials", creds.to_str().unwrap()])
            .args([file.to_str().unwrap(), &target])
            .output()
            .expect("run smbcp")
    };
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("chmod 600") && !err.contains(tb.password()),
        "{err}"
    );
    assert!(!tb.share_path("plain").join("c.bin").exists());

    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(tb.share_path("plain").join("c.bin")).unwrap(),
        b"by credentials file"
    );
}

#[test]
fn errors_are_one_clear_line_and_nothing_is_half_written() {
    let tb = testbed();
    let local = scratch("err");
    let file = local.join("f.bin");
    std::fs::write(&file, vec![7u8; 100_000]).unwrap();
    let dest = local.join("out.bin");

    let o = smbcp_as(
        &tb,
        "wrong-password",
        &[file.to_str().unwrap(), &url(&tb, "plain/f.bin")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("LOGON_FAILURE"), "{}", stderr(&o));
    assert!(!tb.share_path("plain").join("f.bin").exists());

    let o = smbcp_as(
        &tb,
        tb.password(),
        &[file.to_str().unwrap(), &url(&tb, "nosuchshare/f.bin")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no such share"), "{}", stderr(&o));
    assert!(stderr(&o).contains("nosuchshare"), "{}", stderr(&o));

    let o = smbcp_as(
        &tb,
        tb.password(),
        &[&url(&tb, "plain/missing.bin"), dest.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("missing.bin") && stderr(&o).contains("OBJECT_NAME_NOT_FOUND"),
        "{}",
        stderr(&o)
    );
    assert!(!dest.exists(), "nothing written for a failed download");

    let o = smbcp_as(
        &tb,
        tb.password(),
        &[file.to_str().unwrap(), &url(&tb, "plain/no/such/dir/f.bin")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("was not written"), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("partial upload remains"),
        "{}",
        stderr(&o)
    );

    let refused = format!(
        "smb://{};{}@{}:4450/plain/x",
        tb.domain(),
        tb.user(),
        tb.server_addr(1)
    );
    let o = smbcp_as(&tb, tb.password(), &[file.to_str().unwrap(), &refused]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("connection refused"), "{}", stderr(&o));

    // Usage errors: exit 2.
    let o = tb
        .client_command(SMBCP)
        .env_remove("SMB_PASSWORD")
        .args([file.to_str().unwrap(), &url(&tb, "plain/x")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no password"), "{}", stderr(&o));
    let o = smbcp_as(
        &tb,
        tb.password(),
        &[file.to_str().unwrap(), "smb://host-without-share"],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = smbcp_as(&tb, tb.password(), &["smb://u:pw@h/s/x", "/tmp/x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("passwords are not accepted"),
        "{}",
        stderr(&o)
    );

    // A directory without -r is refused, others still copied: exit 1, listed.
    let o = smbcp_as(
        &tb,
        tb.password(),
        &["-q", local.to_str().unwrap(), &url(&tb, "plain/")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is a directory (use -r)"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&local).ok();
}

/// Bytes every channel of the run sent and received, from `--json`.
fn wire_bytes(summary: &serde_json::Value) -> u64 {
    summary["channels"]
        .as_array()
        .expect("channels")
        .iter()
        .map(|c| c["bytes_sent"].as_u64().unwrap() + c["bytes_received"].as_u64().unwrap())
        .sum()
}

/// Both ends on one server: the server copies the file itself (the channels carry next to
/// nothing), within a share and into a directory of another share; `--no-server-copy` moves
/// the bytes through this machine with the same result; a directory or an option the mode
/// does not take is refused with one line.
#[test]
fn copies_within_a_server_are_made_by_the_server() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let len = 24 << 20;
    let data = smb3_tests::pattern(11, len);
    std::fs::write(tb.share_path("plain").join("orig.bin"), &data).unwrap();
    let into = tb.share_path("public").join("into");
    std::fs::create_dir(&into).unwrap();
    // Made here as root: open it to the share's users.
    std::fs::set_permissions(&into, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    std::fs::create_dir(tb.share_path("plain").join("adir")).unwrap();
    let pw = tb.password();
    let orig = url(&tb, "plain/orig.bin");

    let o = smbcp_as(
        &tb,
        pw,
        &["-q", "--json", &orig, &url(&tb, "plain/copy.bin")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = json(&o);
    assert_eq!(summary["bytes"], len as u64, "{summary}");
    let moved = wire_bytes(&summary);
    eprintln!("server-side copy of {len} bytes: {moved} bytes on the wire");
    assert!(moved < 1 << 20, "{moved} bytes on the wire");
    assert!(std::fs::read(tb.share_path("plain").join("copy.bin")).unwrap() == data);

    let o = smbcp_as(&tb, pw, &["-q", "--json", &orig, &url(&tb, "public/into/")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(tb.share_path("public").join("into/orig.bin")).unwrap() == data);

    let o = smbcp_as(
        &tb,
        pw,
        &[
            "-q",
            "--json",
            "--no-server-copy",
            &orig,
            &url(&tb, "plain/through.bin"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let moved = wire_bytes(&json(&o));
    assert!(
        moved > 2 * len as u64,
        "through this machine: {moved} bytes"
    );
    assert!(std::fs::read(tb.share_path("plain").join("through.bin")).unwrap() == data);
    assert!(!tb
        .share_path("plain")
        .join(".through.bin.smbcp-partial")
        .exists());

    // A directory needs -r, as everywhere.
    let o = smbcp_as(&tb, pw, &[&url(&tb, "plain/adir"), &url(&tb, "plain/bdir")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // One line for the directory, then the run's summary line.
    let e = stderr(&o);
    let lines: Vec<&str> = e.trim().lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(
        lines[0].contains("plain/adir: is a directory (use -r)"),
        "{e}"
    );
    assert!(lines[1].contains("0 copied, 0 skipped, 1 failed"), "{e}");

    // A tree, into a directory of the other share.
    let tree = tb.share_path("plain").join("adir");
    std::fs::create_dir_all(tree.join("sub/deeper")).unwrap();
    std::fs::write(tree.join("one.bin"), &data[..1 << 20]).unwrap();
    std::fs::write(tree.join("sub/two.bin"), &data[1 << 20..3 << 20]).unwrap();
    std::fs::write(tree.join("sub/deeper/three.bin"), b"three").unwrap();
    std::fs::write(tree.join("sub/empty.bin"), b"").unwrap();
    let o = smbcp_as(
        &tb,
        pw,
        &[
            "-r",
            "--json",
            &url(&tb, "plain/adir"),
            &url(&tb, "public/into/"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["files"], 4, "{}", json(&o));
    let copied = tb.share_path("public").join("into/adir");
    for rel in [
        "one.bin",
        "sub/two.bin",
        "sub/deeper/three.bin",
        "sub/empty.bin",
    ] {
        assert!(
            std::fs::read(copied.join(rel)).unwrap() == std::fs::read(tree.join(rel)).unwrap(),
            "{rel}"
        );
    }

    // What this mode does not do yet is refused with one line.
    let o = smbcp_as(&tb, pw, &["--update", &orig, &url(&tb, "plain/p.bin")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("a copy within a server takes none of"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn copies_over_every_channel_and_reports_them() {
    // smbcp starts copying on the first channel while the others bind, and each channel
    // takes chunks from the moment it is up. Links of 100 Mbit/s make each copy last about
    // two seconds, far longer than binding eight channels takes even on a busy machine
    // (about 0.1 s on a quiet one), so every channel must have carried some of the file.
    let tb =
        Testbed::start(TestbedConfig::shaped(2, 100)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let dir = scratch("mc");
    let src = dir.join("big.bin");
    let data: Vec<u8> = (0..48u32 << 20)
        .map(|k| (k.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    let want = Sha256::digest(&data);

    // Upload with the default plan: 4 channels per RSS link pair, 2 links.
    let out = smbcp_as(
        &tb,
        tb.password(),
        &["--json", src.to_str().unwrap(), &url(&tb, "plain/")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = json(&out);
    assert_eq!(summary["files"], 1);
    assert_eq!(summary["bytes"], data.len() as u64);
    let channels = summary["channels"].as_array().expect("channels");
    assert_eq!(channels.len(), 8, "{summary:#}");
    for c in channels {
        assert!(c["bytes"].as_u64().unwrap() > 0, "{c}");
        assert!(c["requests"].as_u64().unwrap() > 0, "{c}");
        assert!(c["local"]
            .as_str()
            .unwrap()
            .parse::<std::net::IpAddr>()
            .is_ok());
        assert!(c["server"]
            .as_str()
            .unwrap()
            .parse::<std::net::IpAddr>()
            .is_ok());
    }
    assert_eq!(
        Sha256::digest(std::fs::read(tb.share_path("plain").join("big.bin")).unwrap()),
        want
    );

    // Download with options: 2 per pair, least-loaded; then with multichannel off.
    let back = dir.join("back.bin");
    let out = smbcp_as(
        &tb,
        tb.password(),
        &[
            "--json",
            "--channels-per-nic",
            "2",
            "--dispatch",
            "least-loaded",
            &url(&tb, "plain/big.bin"),
            back.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = json(&out);
    assert_eq!(
        summary["channels"].as_array().unwrap().len(),
        4,
        "{summary:#}"
    );
    assert_eq!(summary["multichannel"]["dispatch"], "least-loaded");
    // No fault in this copy: the failover counters are there and say nothing happened.
    assert_eq!(summary["failover"]["channel_losses"], 0, "{summary}");
    assert_eq!(summary["failover"]["replays"], 0, "{summary}");
    assert_eq!(
        summary["failover"]["sessions_reestablished"], 0,
        "{summary}"
    );
    assert!(
        summary["failover"]["last_failover_ms"].is_null(),
        "{summary}"
    );
    assert_eq!(Sha256::digest(std::fs::read(&back).unwrap()), want);

    let out = smbcp_as(
        &tb,
        tb.password(),
        &[
            "--json",
            "--no-multichannel",
            &url(&tb, "plain/big.bin"),
            back.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = json(&out);
    assert_eq!(
        summary["channels"].as_array().unwrap().len(),
        1,
        "{summary:#}"
    );
    assert_eq!(summary["multichannel"]["enabled"], false);

    let out = smbcp_as(
        &tb,
        tb.password(),
        &[
            "--max-channels",
            "0",
            src.to_str().unwrap(),
            &url(&tb, "plain/"),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn smbctl_shows_interfaces_channels_and_explains() {
    let tb = Testbed::start(TestbedConfig::unshaped(2)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let share = url(&tb, "plain");

    let out = smbctl(&tb, &["channels", "--explain", &share]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("multichannel on"), "{text}");
    for k in 1..=2 {
        assert!(text.contains(&tb.server_addr(k).to_string()), "{text}");
    }
    assert!(text.contains("8 of 8 planned channels are up"), "{text}");

    let out = smbctl(&tb, &["channels", "--json", &share]);
    let v = json(&out);
    assert_eq!(v["channels"].as_array().unwrap().len(), 8, "{v:#}");
    assert_eq!(v["multichannel"]["planned"], 8);
    assert_eq!(v["multichannel"]["current"], 8);
    let pairs = v["multichannel"]["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2);
    for p in pairs {
        assert_eq!(p["planned"], 4);
        assert_eq!(p["current"], 4);
        assert_eq!(p["rss"], true);
    }

    let out = smbctl(&tb, &["interfaces", &share]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("server interfaces:") && text.contains("local interfaces:"),
        "{text}"
    );
    assert!(text.contains("cli1") && text.contains("cli2"), "{text}");
    assert!(text.contains("4 channel(s)"), "{text}");

    let out = smbctl(&tb, &["channels", "--explain", "--no-multichannel", &share]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("multichannel is off: multichannel is turned off"),
        "{text}"
    );
}

#[test]
fn copies_with_kerberos_against_a_domain_controller() {
    let tb = Testbed::start(TestbedConfig {
        kerberos: true,
        ..TestbedConfig::unshaped(1)
    })
    .unwrap_or_else(|e| panic!("testbed: {e}"));
    let k = tb.kerberos().expect("Kerberos testbed").clone();
    let kdc = k.kdc.to_string();
    let krb = [
        "--kerberos-realm",
        k.realm.as_str(),
        "--kdc",
        kdc.as_str(),
        "--spn-host",
        k.server_host.as_str(),
    ];
    let local = scratch("krb");
    let src = local.join("src");
    make_tree(&src);
    let mut args = vec!["-r", "-q"];
    args.extend(krb);
    let up_url = url(&tb, "plain/");
    let up = smbcp_as(
        &tb,
        tb.password(),
        &[&args[..], &[src.to_str().unwrap(), &up_url]].concat(),
    );
    assert!(up.status.success(), "{}", stderr(&up));
    assert_eq!(tree(&tb.share_path("plain").join("src")), tree(&src));

    let down = local.join("down");
    std::fs::create_dir_all(&down).unwrap();
    let down_url = url(&tb, "plain/src");
    let o = smbcp_as(
        &tb,
        tb.password(),
        &[&args[..], &[&down_url, down.to_str().unwrap()]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tree(&down.join("src")), tree(&src));

    // The DC refuses NTLM: without the Kerberos options the same copy is refused, clearly.
    let o = smbcp_as(
        &tb,
        tb.password(),
        &["-r", "-q", &down_url, down.to_str().unwrap()],
    );
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("NTLM authentication is disabled"),
        "{}",
        stderr(&o)
    );
    // A wrong password is one clear line too.
    let o = smbcp_as(
        &tb,
        "wrong",
        &[&args[..], &[&down_url, down.to_str().unwrap()]].concat(),
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("wrong password?"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("OctetString"), "{}", stderr(&o));
    std::fs::remove_dir_all(&local).ok();
}

fn sha256_of(path: &Path) -> String {
    hex_of(&Sha256::digest(std::fs::read(path).unwrap()))
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Run smbcp in the background, run `fault` once `partial` has grown past `threshold` bytes,
/// and return smbcp's output. Bounded: smbcp gets 120 s in all.
fn copy_through_a_fault(
    tb: &Testbed,
    args: &[&str],
    partial: &Path,
    threshold: u64,
    fault: impl FnOnce(&Testbed),
) -> Output {
    let child = tb
        .client_command(SMBCP)
        .env("SMB_PASSWORD", tb.password())
        .env_remove("SMB_USER")
        .env("RUST_LOG", "smb3_client=info")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start smbcp");
    let started = std::time::Instant::now();
    let mut fault = Some(fault);
    while started.elapsed() < std::time::Duration::from_secs(30) {
        if std::fs::metadata(partial).map_or(0, |m| m.len()) >= threshold {
            (fault.take().unwrap())(tb);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = started + std::time::Duration::from_secs(120);
    while !waiter.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if !waiter.is_finished() {
        // Stop it by its PID (it runs in the client namespace, not as our thread).
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
    let out = waiter.join().unwrap().expect("smbcp output");
    eprintln!(
        "smbcp {args:?} through a fault\n  status {:?}\n  stderr (with the library's log) {}\n  stdout {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        fault.is_none(),
        "{} never reached {threshold} bytes",
        partial.display()
    );
    out
}

fn restart_smbd(tb: &Testbed) {
    tb.restart().expect("restart smbd");
}

/// Cut the client off and, meanwhile, put another file where `path` was.
fn replace_while_cut_off(tb: &Testbed, path: &Path) {
    tb.while_cut_off(|| smb3_tests::replace_on_server(path, b"another file"))
        .expect("cut off");
}

/// Samba 4.17 forgets durable handles when smbd restarts; the library opens the same file
/// again and sends what the server had not acknowledged, so the copy carries on in place,
/// both ways, with nothing copied twice.
#[test]
fn a_copy_carries_on_through_an_smbd_restart() {
    let tb = Testbed::start(TestbedConfig::shaped(1, 400)).unwrap_or_else(|e| panic!("{e}"));
    let local = scratch("restart");
    let src = local.join("restart.bin");
    write_pattern(&src, 192 << 20);
    let want = sha256_of(&src);
    let threshold = 48 << 20;

    let up = copy_through_a_fault(
        &tb,
        &[
            "-q",
            "--json",
            src.to_str().unwrap(),
            &url(&tb, "plain/restart.bin"),
        ],
        &tb.share_path("plain").join(".restart.bin.smbcp-partial"),
        threshold,
        restart_smbd,
    );
    assert!(up.status.success(), "{}", stderr(&up));
    let summary = json(&up);
    assert_eq!(summary["retried"], 0, "{summary}");
    assert_eq!(summary["failover"]["opens_reopened"], 1, "{summary}");
    assert_eq!(summary["failed"], 0, "{summary}");
    assert_eq!(summary["bytes"], 192u64 << 20, "{summary}");
    assert_eq!(sha256_of(&tb.share_path("plain").join("restart.bin")), want);
    assert!(!tb
        .share_path("plain")
        .join(".restart.bin.smbcp-partial")
        .exists());

    let down = local.join("down.bin");
    let o = copy_through_a_fault(
        &tb,
        &[
            "-q",
            "--json",
            &url(&tb, "plain/restart.bin"),
            down.to_str().unwrap(),
        ],
        &local.join(".down.bin.smbcp-partial"),
        threshold,
        restart_smbd,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = json(&o);
    assert_eq!(summary["retried"], 0, "{summary}");
    assert_eq!(summary["failover"]["opens_reopened"], 1, "{summary}");
    assert_eq!(sha256_of(&down), want);
    assert!(!local.join(".down.bin.smbcp-partial").exists());
    std::fs::remove_dir_all(&local).ok();
}

/// When the open cannot come back (another file now stands at its path), smbcp copies the
/// file again from the start and says so; with retries off it fails the file with one line
/// and leaves no short file.
#[test]
fn a_copy_whose_open_is_lost_starts_the_file_again() {
    let tb = Testbed::start(TestbedConfig::shaped(1, 400)).unwrap_or_else(|e| panic!("{e}"));
    let local = scratch("lost-open");
    let src = local.join("lost.bin");
    write_pattern(&src, 192 << 20);
    let want = sha256_of(&src);
    let threshold = 48 << 20;
    let partial = tb.share_path("plain").join(".lost.bin.smbcp-partial");

    let up = copy_through_a_fault(
        &tb,
        &[
            "-q",
            "--json",
            src.to_str().unwrap(),
            &url(&tb, "plain/lost.bin"),
        ],
        &partial,
        threshold,
        |tb| replace_while_cut_off(tb, &partial),
    );
    assert!(up.status.success(), "{}", stderr(&up));
    let summary = json(&up);
    assert_eq!(summary["retried"], 1, "{summary}");
    assert_eq!(summary["failover"]["opens_lost"], 1, "{summary}");
    assert_eq!(summary["failed"], 0, "{summary}");
    assert!(
        stderr(&up).contains("copying it again from the start (retry 1 of 2)"),
        "{}",
        stderr(&up)
    );
    assert!(stderr(&up).contains("lost.bin"), "{}", stderr(&up));
    assert_eq!(sha256_of(&tb.share_path("plain").join("lost.bin")), want);
    assert!(!partial.exists());

    // Retries off: the download of a source replaced mid-copy fails with one clear line.
    let source = tb.share_path("plain").join("lost.bin");
    let o = copy_through_a_fault(
        &tb,
        &[
            "-q",
            "--retries",
            "0",
            &url(&tb, "plain/lost.bin"),
            local.join("again.bin").to_str().unwrap(),
        ],
        &local.join(".again.bin.smbcp-partial"),
        threshold,
        |tb| replace_while_cut_off(tb, &source),
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("not reclaimed") && e.contains("another one"),
        "{e}"
    );
    assert!(!local.join("again.bin").exists());
    assert!(!local.join(".again.bin.smbcp-partial").exists());
    std::fs::remove_dir_all(&local).ok();
}

/// `len` bytes of a fixed pattern in `path`.
fn write_pattern(path: &Path, len: u32) {
    let data: Vec<u8> = (0..len)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    std::fs::write(path, &data).unwrap();
}

#[test]
fn smbctl_watch_prints_changes_as_they_happen() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::Duration;

    let tb = testbed();
    use std::os::unix::fs::PermissionsExt;
    let dir = tb.share_path("plain").join("watched");
    std::fs::create_dir(&dir).unwrap();
    // Made here as root: let the share's user write into it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut child = tb
        .client_command(SMBCTL)
        .env("SMB_PASSWORD", tb.password())
        .env_remove("SMB_USER")
        // The library's log, kept apart from smbctl's own lines, explains a failure.
        .env("RUST_LOG", "smb3_client=debug")
        .args(["watch", &url(&tb, "plain/watched")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run smbctl watch");
    // smbctl's lines from both streams, tagged, through one queue; log lines aside.
    let (tx, rx) = mpsc::channel::<(&str, String)>();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(("out", l));
        }
    });
    let log_lines = log.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            // smbctl's own stderr lines are "watching ..." and "smbctl: ..." (an error); the
            // rest is the library's log, whatever its shape.
            if l.starts_with("watching ") || l.starts_with("smbctl") {
                let _ = tx2.send(("err", l));
            } else {
                log_lines.lock().unwrap().push(l);
            }
        }
    });
    let mut seen: Vec<String> = Vec::new();
    let next = |what: &str, seen: &[String]| {
        // Generous: a machine running two test suites at once has been seen to need more
        // than 15 s here.
        rx.recv_timeout(Duration::from_secs(45))
            .unwrap_or_else(|_| {
                panic!(
                    "no {what} within 45 s; lines so far {seen:?}; smbctl's log:\n{}",
                    log.lock().unwrap().join("\n")
                )
            })
    };
    let (stream, line) = next("'watching' line", &seen);
    assert_eq!(stream, "err", "{line}");
    assert!(line.starts_with("watching "), "{line}");

    // smbctl says "watching" once the server holds its first CHANGE_NOTIFY: a file another
    // client (smbcp) puts into the directory right away shows up as added under its final
    // name: a new small file is created whole in one round trip, with no partial name.
    let local = scratch("watch");
    let src = local.join("née.txt");
    std::fs::write(&src, b"hello").unwrap();
    let up = smbcp_as(
        &tb,
        tb.password(),
        &[src.to_str().unwrap(), &url(&tb, "plain/watched/")],
    );
    assert_eq!(up.status.code(), Some(0), "{}", stderr(&up));
    while !seen.iter().any(|l| l == "added née.txt") {
        let (stream, line) = next("change line", &seen);
        assert_eq!(stream, "out", "{line}; so far {seen:?}");
        seen.push(line);
    }
    assert!(
        !seen.iter().any(|l| l.contains("smbcp-partial")),
        "{seen:?}"
    );
    child.kill().expect("stop smbctl watch");
    child.wait().expect("reap smbctl");
    std::fs::remove_dir_all(&local).ok();
}

#[test]
fn smb_keylogfile_gets_each_sessions_keys_and_a_bad_path_is_one_clear_line() {
    let tb = testbed();
    let local = scratch("keylog");
    let src = local.join("keyed.txt");
    std::fs::write(&src, b"keyed").unwrap();
    let log = local.join("keys.log");
    let run = |keylog: &Path| {
        let out = tb
            .client_command(SMBCP)
            .env("SMB_PASSWORD", tb.password())
            .env("SMB_KEYLOGFILE", keylog)
            .args(["-q", src.to_str().unwrap(), &url(&tb, "plain/keyed.txt")])
            .output()
            .expect("run smbcp");
        eprintln!("status {:?} stderr {}", out.status.code(), stderr(&out));
        out
    };
    let o = run(&log);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&log).expect("the key log");
    let first = text.lines().next().expect("one line per session");
    assert!(first.starts_with("SMB3 session_id="), "{first}");
    assert!(first.contains("bound_channel=false"), "{first}");
    let signing_key = first
        .split(' ')
        .find_map(|f| f.strip_prefix("signing_key="))
        .expect("a signing key");
    assert_eq!(signing_key.len(), 32, "{first}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "only its owner may read the keys");

    let o = run(&local.join("no-such-dir").join("keys.log"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("SMB_KEYLOGFILE=") && err.contains("No such file"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    std::fs::remove_dir_all(&local).unwrap();
}
