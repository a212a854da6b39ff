//! smbcp and smbctl with a Kerberos ticket and no password, against the testbed's AD DC
//! (which refuses NTLM): a ticket in the cache is used instead of asking for a password, a
//! keytab through `--keytab`, and without either the one-line error says to run kinit.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Output, Stdio};

use common::{scratch, SMBCP};
use smb3_tests::{Testbed, TestbedConfig};

const SMBCTL: &str = env!("CARGO_BIN_EXE_smbctl");
const PRINCIPAL: &str = "smbtest@TESTBED.LAN";

fn testbed() -> Testbed {
    Testbed::start(TestbedConfig {
        kerberos: true,
        ..TestbedConfig::unshaped(2)
    })
    .unwrap_or_else(|e| panic!("testbed: {e}"))
}

/// `smb://dc.testbed.lan/...`: by name, as a Kerberos user does (the client namespace's
/// /etc/hosts names the DC); no user in the URL: the ticket says who.
fn url(tb: &Testbed, share_and_path: &str) -> String {
    let host = &tb.kerberos().expect("a Kerberos testbed").server_host;
    format!("smb://{host}/{share_and_path}")
}

/// Run `program` in the client namespace with the testbed's krb5.conf, `env` on top, no
/// password anywhere and no terminal (stdin is /dev/null): a prompt would fail at once.
fn run(tb: &Testbed, program: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    let k = tb.kerberos().expect("a Kerberos testbed");
    let mut cmd = tb.client_command(program);
    cmd.env("KRB5_CONFIG", &k.krb5_conf)
        .env_remove("SMB_PASSWORD")
        .env_remove("SMB_USER")
        .env_remove("KRB5CCNAME")
        .env_remove("KRB5_CLIENT_KTNAME")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().expect("run the program");
    eprintln!(
        "{program} {args:?}\n  status {:?}\n  stdout {}\n  stderr {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn kinit(tb: &Testbed, cache: &str) {
    let k = tb.kerberos().expect("a Kerberos testbed");
    let mut child = tb
        .client_command("kinit")
        .env("KRB5_CONFIG", &k.krb5_conf)
        .args(["-c", cache, PRINCIPAL])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kinit (krb5-user)");
    writeln!(child.stdin.take().unwrap(), "{}", tb.password()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn same_bytes(a: &Path, b: &Path) {
    assert_eq!(
        std::fs::read(a).unwrap(),
        std::fs::read(b).unwrap(),
        "{} and {}",
        a.display(),
        b.display()
    );
}

#[test]
fn smbcp_and_smbctl_use_a_ticket_instead_of_a_password() {
    let tb = testbed();
    let local = scratch("krb-ticket");
    let src = local.join("upload.bin");
    let data: Vec<u8> = (0..3 * 1024 * 1024 + 7)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();

    // No ticket and no password: one line that says what to do, a usage exit.
    let missing = format!("FILE:{}", local.join("no-cache").display());
    let o = run(
        &tb,
        SMBCP,
        &[("KRB5CCNAME", &missing)],
        &["-q", src.to_str().unwrap(), &url(&tb, "plain/")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("run kinit"), "{}", stderr(&o));
    // --kerberos asked for, no ticket: the connection says so.
    let o = run(
        &tb,
        SMBCP,
        &[("KRB5CCNAME", &missing)],
        &[
            "-q",
            "--kerberos",
            src.to_str().unwrap(),
            &url(&tb, "plain/"),
        ],
    );
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("no Kerberos ticket in {missing} (run kinit)")),
        "{}",
        stderr(&o)
    );

    // kinit, then no flag at all: the ticket is used, up and down, byte for byte.
    let cache = format!("FILE:{}", local.join("cc").display());
    kinit(&tb, &cache);
    let env = [("KRB5CCNAME", cache.as_str())];
    let o = run(
        &tb,
        SMBCP,
        &env,
        &["-q", src.to_str().unwrap(), &url(&tb, "plain/")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    same_bytes(&src, &tb.share_path("plain").join("upload.bin"));
    let back = local.join("back.bin");
    let o = run(
        &tb,
        SMBCP,
        &env,
        &["-q", &url(&tb, "plain/upload.bin"), back.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    same_bytes(&src, &back);

    // smbctl: every channel the planner wants is bound with the ticket.
    let o = run(
        &tb,
        SMBCTL,
        &env,
        &["channels", "--json", &url(&tb, "plain")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let channels = v["channels"].as_array().expect("channels");
    assert!(channels.len() >= 2, "{v}");
    assert!(channels.iter().all(|c| c["state"] != "failed"), "{v}");
    let o = run(&tb, SMBCTL, &env, &["ls", &url(&tb, "plain")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("upload.bin"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // smbctl whoami: the principal, Kerberos, the cache, and how long its ticket has left.
    let o = run(&tb, SMBCTL, &env, &["whoami", &url(&tb, "plain")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    eprintln!("{text}");
    assert!(text.contains(&format!("user:       {PRINCIPAL}")), "{text}");
    assert!(
        text.contains(&format!("auth:       Kerberos, tickets from {cache}")),
        "{text}"
    );
    assert!(text.contains("ticket-granting ticket ends in"), "{text}");
    let o = run(&tb, SMBCTL, &env, &["whoami", "--json", &url(&tb, "plain")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["mechanism"], "Kerberos", "{v}");
    assert_eq!(v["user"], PRINCIPAL, "{v}");
    let left = v["ticket_expires_in_s"].as_u64().expect("time left");
    assert!(left > 0 && left <= 24 * 3600, "{v}");
    assert!(v["signing"].is_string(), "{v}");

    // --no-kerberos: NTLM, which needs a password, and there is no terminal to ask on.
    let o = run(
        &tb,
        SMBCTL,
        &env,
        &["--no-kerberos", "ls", &url(&tb, "plain")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // A keytab exported from the DC, through --keytab, with no cache at all.
    let keytab = tb.run_dir().join("cli.keytab");
    let out = tb
        .server_command("samba-tool")
        .args(["domain", "exportkeytab"])
        .arg(&keytab)
        .arg(format!("--principal={PRINCIPAL}"))
        .arg("-s")
        .arg(tb.smb_conf())
        .output()
        .expect("samba-tool");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back2 = local.join("back2.bin");
    let o = run(
        &tb,
        SMBCP,
        &[("KRB5CCNAME", &missing)],
        &[
            "-q",
            "--keytab",
            keytab.to_str().unwrap(),
            &url(&tb, "plain/upload.bin"),
            back2.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    same_bytes(&src, &back2);
    assert!(
        !Path::new(&missing["FILE:".len()..]).exists(),
        "the keytab's tickets stay in memory"
    );
    std::fs::remove_dir_all(&local).ok();
}
