//! Self-test of the testbed: real namespaces, real smbd, real shaping. Needs root and Samba;
//! without them these tests FAIL with the script's message (they never skip).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use smb3_tests::{client_block_on, netns_exists, Testbed, TestbedConfig};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

fn start(config: TestbedConfig) -> Testbed {
    match Testbed::start(config) {
        Ok(tb) => tb,
        Err(e) => panic!("cannot start the testbed:\n{e}"),
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/testbed.sh")
}

/// True when PID exists and is not a zombie.
fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
            !matches!(state, Some(Some('Z' | 'X')) | None)
        }
        Err(_) => false,
    }
}

fn mounts() -> String {
    std::fs::read_to_string("/proc/mounts").expect("read /proc/mounts")
}

/// A TCP connect to ADDR:445 from a client-namespace runtime thread, bounded by `limit`.
/// Returns the local address on success.
fn connect_445(
    rt: &tokio::runtime::Runtime,
    addr: Ipv4Addr,
    limit: Duration,
) -> Result<SocketAddr, String> {
    client_block_on(rt, async move {
        match tokio::time::timeout(limit, TcpStream::connect((addr, 445))).await {
            Ok(Ok(stream)) => stream.local_addr().map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(format!("connect {addr}:445: {e}")),
            Err(_) => Err(format!("connect {addr}:445: timed out after {limit:?}")),
        }
    })
}

/// Deterministic, not-too-regular test content.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn smbclient(
    tb: &Testbed,
    k: usize,
    share: &str,
    extra: &[&str],
    commands: &str,
) -> (bool, String) {
    let creds = format!("{}%{}", tb.user(), tb.password());
    let unc = tb.unc(k, share);
    let mut argv: Vec<&str> = vec!["smbclient", &unc, "-U", &creds];
    argv.extend_from_slice(extra);
    argv.extend_from_slice(&["-c", commands]);
    let out = tb.exec_client(&argv);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn two_shaped_links_serve_smb_and_obey_faults() {
    let tb = start(TestbedConfig::shaped(2, 200));
    eprintln!(
        "testbed {} up in {:?} at {}",
        tb.id(),
        tb.up_took(),
        tb.run_dir().display()
    );
    assert_eq!(tb.links().len(), 2);
    assert_eq!(tb.link(1).rate_mbit, Some(200));
    assert_eq!(tb.link(2).speed_bps, 200_000_000);
    assert_eq!(tb.shares(), ["plain", "encrypted", "signed", "public"]);
    assert_ne!(tb.server_addr(1), tb.server_addr(2));
    assert!(
        pid_alive(tb.smbd_pid()),
        "smbd pid {} is not running",
        tb.smbd_pid()
    );

    let conf = std::fs::read_to_string(tb.smb_conf()).expect("read smb.conf");
    let expected_interfaces = format!(
        "interfaces = \"{}\" \"{}\"",
        Testbed::interface_spec(tb.server_addr(1), 200_000_000, true),
        Testbed::interface_spec(tb.server_addr(2), 200_000_000, true)
    );
    assert!(
        conf.contains(&expected_interfaces),
        "smb.conf lacks {expected_interfaces}:\n{conf}"
    );

    // smbd answers on both server addresses, and the connects really leave from the client
    // namespace (the local address is the client end of that link).
    let rt = tb.client_runtime();
    for k in 1..=2 {
        let local = connect_445(&rt, tb.server_addr(k), Duration::from_secs(3))
            .unwrap_or_else(|e| panic!("link {k}: {e}"));
        assert_eq!(
            local.ip(),
            tb.client_addr(k),
            "link {k} connect left from {local}"
        );
    }

    // A file round-trips through [plain] with Samba's own client.
    let content = pattern(300_000);
    let src = tb.run_dir().join("upload.bin");
    let back = tb.run_dir().join("download.bin");
    std::fs::write(&src, &content).expect("write upload.bin");
    let cmds = format!(
        "put {} roundtrip.bin; get roundtrip.bin {}",
        src.display(),
        back.display()
    );
    let (ok, text) = smbclient(&tb, 1, "plain", &[], &cmds);
    assert!(ok, "smbclient put/get failed:\n{text}");
    assert_eq!(
        std::fs::read(&back).expect("read download.bin"),
        content,
        "downloaded bytes differ"
    );
    let on_server =
        std::fs::read(tb.share_path("plain").join("roundtrip.bin")).expect("server copy");
    assert_eq!(on_server, content, "the server's copy differs");

    // [encrypted] refuses a dialect that cannot encrypt, accepts SMB 3.1.1.
    let (ok, text) = smbclient(&tb, 2, "encrypted", &["-m", "SMB2_10"], "ls");
    assert!(
        !ok && text.contains("NT_STATUS_ACCESS_DENIED"),
        "SMB2_10 on [encrypted]:\n{text}"
    );
    let (ok, text) = smbclient(&tb, 2, "encrypted", &[], "ls");
    assert!(ok, "SMB3 on [encrypted] failed:\n{text}");
    // [public] takes guests.
    let out = tb.exec_client(&["smbclient", &tb.unc(1, "public"), "-N", "-c", "ls"]);
    assert!(
        out.status.success(),
        "guest on [public]: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A wrong password for the real user is refused (not mapped to guest).
    let out = tb.exec_client(&[
        "smbclient",
        &tb.unc(1, "plain"),
        "-U",
        &format!("{}%wrong-password", tb.user()),
        "-c",
        "ls",
    ]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains("NT_STATUS_LOGON_FAILURE"),
        "wrong password:\n{text}"
    );
    let status = tb.smbstatus(&["-j"]).expect("smbstatus -j");
    assert!(status.contains("\"sessions\""), "smbstatus -j: {status}");

    // Link 1 down: connects to it get no answer at all; link 2 is unaffected.
    tb.link_down(1).expect("link-down 1");
    let started = Instant::now();
    let err = connect_445(&rt, tb.server_addr(1), Duration::from_secs(2))
        .expect_err("connect over a downed link succeeded");
    assert!(
        err.contains("timed out") && started.elapsed() >= Duration::from_secs(2),
        "{err}"
    );
    connect_445(&rt, tb.server_addr(2), Duration::from_secs(3))
        .expect("link 2 while link 1 is down");
    tb.link_up(1).expect("link-up 1");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match connect_445(&rt, tb.server_addr(1), Duration::from_secs(1)) {
            Ok(_) => break,
            Err(e) if Instant::now() > deadline => panic!("link 1 after link-up: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }

    // cut(2) resets the connection on link 2 and leaves link 1's alone.
    let (a1, a2) = (tb.server_addr(1), tb.server_addr(2));
    let (s1, s2) = client_block_on(&rt, async move {
        let s1 = TcpStream::connect((a1, 445)).await.expect("connect link 1");
        let s2 = TcpStream::connect((a2, 445)).await.expect("connect link 2");
        (s1, s2)
    });
    // Let smbd accept both before cutting.
    std::thread::sleep(Duration::from_millis(300));
    let cut = tb.cut(Some(2)).expect("cut 2");
    assert!(cut >= 1, "cut found no connection on link 2");
    let (r1, r2) = client_block_on(&rt, async move {
        let (mut s1, mut s2) = (s1, s2);
        let mut buf = [0u8; 16];
        let r2 = tokio::time::timeout(Duration::from_secs(3), s2.read(&mut buf)).await;
        let r1 = tokio::time::timeout(Duration::from_millis(500), s1.read(&mut buf)).await;
        (r1.is_err(), r2.map(|r| r.map_err(|e| e.kind())))
    });
    assert!(r1, "the link 1 connection did not stay open");
    match r2 {
        Ok(Err(std::io::ErrorKind::ConnectionReset)) | Ok(Ok(0)) => {}
        other => panic!("link 2 connection after cut: {other:?}"),
    }

    // restart gives a new smbd that answers on both links; the old one is gone.
    let old = tb.smbd_pid();
    let new = tb.restart().expect("restart");
    assert_ne!(old, new);
    assert_eq!(tb.smbd_pid(), new);
    assert!(!pid_alive(old), "old smbd {old} still running");
    for k in 1..=2 {
        connect_445(&rt, tb.server_addr(k), Duration::from_secs(3))
            .unwrap_or_else(|e| panic!("link {k} after restart: {e}"));
    }

    // set-interfaces rewrites the advertised list and reloads; listeners stay.
    let spec = Testbed::interface_spec(tb.server_addr(2), 5_000_000_000, false);
    tb.set_interfaces(&[spec.as_str()]).expect("set-interfaces");
    let conf = std::fs::read_to_string(tb.smb_conf()).expect("read smb.conf");
    assert!(
        conf.contains(&format!("interfaces = \"{spec}\"\n")),
        "smb.conf:\n{conf}"
    );
    tb.reload().expect("reload");
    connect_445(&rt, tb.server_addr(1), Duration::from_secs(3))
        .expect("link 1 after set-interfaces");
    assert!(pid_alive(tb.smbd_pid()));

    // After drop nothing is left: namespaces, smbd, the tmpfs, the run dir.
    let (srv, cli, pid) = (
        tb.server_ns().to_string(),
        tb.client_ns().to_string(),
        tb.smbd_pid(),
    );
    let shares = tb.run_dir().join("shares").display().to_string();
    let dir = tb.run_dir().to_path_buf();
    drop(rt);
    let t = Instant::now();
    drop(tb);
    eprintln!("testbed down in {:?}", t.elapsed());
    assert!(
        !netns_exists(&srv) && !netns_exists(&cli),
        "namespaces {srv} / {cli} left"
    );
    assert!(!pid_alive(pid), "smbd {pid} left running");
    assert!(
        !mounts().contains(&shares),
        "tmpfs left mounted at {shares}"
    );
    assert!(!dir.exists(), "run dir {} left", dir.display());
}

#[test]
fn iperf3_goodput_follows_the_shaping() {
    let tb = start(TestbedConfig::per_link(&[Some(200), Some(1000), None]));
    for (k, rate) in [(1usize, 200.0f64), (2, 1000.0)] {
        let up = tb
            .iperf3_mbit(k, 3, false)
            .unwrap_or_else(|e| panic!("iperf3 link {k}: {e}"));
        let down = tb
            .iperf3_mbit(k, 3, true)
            .unwrap_or_else(|e| panic!("iperf3 -R link {k}: {e}"));
        eprintln!(
            "link {k} shaped at {rate} Mbit/s: client->server {up:.0} Mbit/s ({:.1} %), \
             server->client {down:.0} Mbit/s ({:.1} %)",
            100.0 * up / rate,
            100.0 * down / rate
        );
        for got in [up, down] {
            assert!(
                got >= 0.90 * rate,
                "link {k}: {got} Mbit/s is below 90 % of {rate}"
            );
            assert!(
                got <= 1.02 * rate,
                "link {k}: {got} Mbit/s is above the {rate} Mbit/s shaping"
            );
        }
    }
    let unshaped = tb.iperf3_mbit(3, 3, false).expect("iperf3 unshaped link");
    eprintln!("link 3 unshaped: {unshaped:.0} Mbit/s");
    assert!(
        unshaped > 2000.0,
        "an unshaped veth gave only {unshaped} Mbit/s"
    );
}

#[test]
fn not_root_fails_with_a_clear_message() {
    let dir = std::env::temp_dir().join(format!("smbtb-notroot-{}", std::process::id()));
    // A world-readable copy: the checkout may sit below a directory nobody cannot enter.
    let copy = std::env::temp_dir().join(format!("smbtb-notroot-{}.sh", std::process::id()));
    std::fs::copy(script(), &copy).expect("copy the script");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"])
        .arg(&copy)
        .args(["up", "--dir"])
        .arg(&dir)
        .args(["--links", "1"])
        .output()
        .expect("run setpriv");
    let _ = std::fs::remove_file(&copy);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "up as nobody succeeded");
    assert!(
        stderr.contains("the testbed needs root (network namespaces)"),
        "stderr: {stderr}"
    );
    assert!(!dir.exists(), "up as nobody created {}", dir.display());
}

#[test]
fn missing_tools_are_named_with_their_packages() {
    // Hide /usr/sbin (smbd, tc, useradd) in a private mount namespace of a child process.
    let empty = std::env::temp_dir().join(format!("smbtb-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("create empty dir");
    let shell = format!(
        "mount --bind {} /usr/sbin && exec bash {} up --dir {}/x --links 1",
        empty.display(),
        script().display(),
        empty.display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "bash", "-c", &shell])
        .output()
        .expect("run unshare");
    let _ = std::fs::remove_dir_all(&empty);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "up without /usr/sbin succeeded");
    assert!(
        stderr.contains("apt-get install -y")
            && stderr.contains("samba")
            && stderr.contains("iproute2"),
        "stderr: {stderr}"
    );
    // (ip itself survives: Debian also ships it as /usr/bin/ip.)
    assert!(
        stderr.contains(" smbd") && stderr.contains(" tc "),
        "stderr: {stderr}"
    );
}

#[test]
fn a_testbed_whose_owner_died_is_collected() {
    let dir = std::env::temp_dir().join(format!("smbtb-stale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut owner = Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("spawn sleep");
    let out = Command::new("bash")
        .arg(script())
        .args(["up", "--links", "1", "--rate", "100", "--owner"])
        .arg(owner.id().to_string())
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("run testbed.sh up");
    assert!(
        out.status.success(),
        "up: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
            .unwrap_or_else(|| panic!("no {key}= in {text}"))
    };
    let (srv, pid) = (
        value("server_ns"),
        value("smbd_pid").parse::<u32>().expect("pid"),
    );
    assert!(netns_exists(&srv));
    assert!(pid_alive(pid));

    owner.kill().expect("kill owner");
    owner.wait().expect("reap owner");
    let gc = Command::new("bash")
        .arg(script())
        .arg("gc")
        .output()
        .expect("run gc");
    let gc_err = String::from_utf8_lossy(&gc.stderr);
    // (Another test's `up` may have collected it first: every up runs gc.)
    assert!(gc.status.success(), "gc: {gc_err}");
    assert!(!netns_exists(&srv), "namespace {srv} survived gc");
    assert!(!pid_alive(pid), "smbd {pid} survived gc");
    assert!(
        !mounts().contains(&dir.join("shares").display().to_string()),
        "tmpfs survived gc"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
