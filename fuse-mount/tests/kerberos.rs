//! smbfuse with `-o sec=krb5` and no password, against the testbed's AD DC (which refuses
//! NTLM): the mount authenticates with the ticket `kinit` put in a cache; without a ticket
//! it fails at once with one line that says to run kinit. The daemon runs in the client
//! network namespace (`nsenter --net`), the mount in this process's mount namespace; the
//! mount is undone and the daemon stopped by its PID whatever happens (`Mount`'s Drop).

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smb3_tests::{Testbed, TestbedConfig};

const SMBFUSE: &str = env!("CARGO_BIN_EXE_smbfuse");
const PRINCIPAL: &str = "smbtest@TESTBED.LAN";

fn is_mounted(mp: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mp.to_string_lossy();
    text.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_ref()))
}

/// smbfuse in the client namespace with the testbed's krb5.conf, the cache `ccache`, and no
/// password or terminal anywhere.
fn smbfuse(tb: &Testbed, ccache: &str) -> Command {
    let k = tb.kerberos().expect("a Kerberos testbed");
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/run/netns/{}", tb.client_ns()))
        .arg("--")
        .arg(SMBFUSE)
        .env("KRB5_CONFIG", &k.krb5_conf)
        .env("KRB5CCNAME", ccache)
        .env_remove("SMB_PASSWORD")
        .env_remove("SMB_USER")
        .env_remove("SMB_DOMAIN")
        .env_remove("KRB5_CLIENT_KTNAME")
        .stdin(Stdio::null());
    cmd
}

/// A foreground mount; unmounted and its daemon ended (by PID) when dropped.
struct Mount {
    mp: PathBuf,
    child: Child,
}

impl Drop for Mount {
    fn drop(&mut self) {
        if is_mounted(&self.mp)
            && !Command::new("umount")
                .arg(&self.mp)
                .status()
                .is_ok_and(|s| s.success())
        {
            let _ = Command::new("umount").arg("-l").arg(&self.mp).status();
        }
        let began = Instant::now();
        while began.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_dir_all(&self.mp);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.mp);
    }
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

#[test]
fn sec_krb5_mounts_with_the_ticket_and_no_password() {
    let tb = Testbed::start(TestbedConfig {
        kerberos: true,
        ..TestbedConfig::unshaped(2)
    })
    .unwrap_or_else(|e| panic!("testbed: {e}"));
    let k = tb.kerberos().expect("a Kerberos testbed").clone();
    // By address, as the daemon's namespace has no name for the DC: spn_host names it.
    let src = format!("//{}/plain", tb.server_addr(1));
    let spn = format!("spn_host={}", k.server_host);
    let dir = std::env::temp_dir().join(format!("smbfuse-krb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // No ticket: one line that says to run kinit, and no mount.
    let missing = format!("FILE:{}", dir.join("no-cache").display());
    let mp = dir.join("mp-none");
    std::fs::create_dir_all(&mp).unwrap();
    let began = Instant::now();
    let out = smbfuse(&tb, &missing)
        .arg(&src)
        .arg(&mp)
        .args(["-f", "-o", &format!("sec=krb5,{spn}")])
        .output()
        .expect("run smbfuse");
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("no ticket: {err}");
    assert!(!out.status.success());
    assert!(!is_mounted(&mp));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("run kinit"), "{err}");
    assert!(began.elapsed() < Duration::from_secs(10));

    // With a ticket: the mount works, bytes go through both ways.
    let cache = format!("FILE:{}", dir.join("cc").display());
    kinit(&tb, &cache);
    let mp = dir.join("mp");
    std::fs::create_dir_all(&mp).unwrap();
    let child = smbfuse(&tb, &cache)
        .arg(&src)
        .arg(&mp)
        .args(["-f", "-o", &format!("sec=krb5,{spn}")])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start smbfuse");
    let mut m = Mount {
        mp: mp.clone(),
        child,
    };
    let began = Instant::now();
    while !is_mounted(&mp) {
        assert!(
            m.child.try_wait().ok().flatten().is_none(),
            "smbfuse exited before mounting"
        );
        assert!(began.elapsed() < Duration::from_secs(30), "not mounted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let data: Vec<u8> = (0..2 * 1024 * 1024 + 3)
        .map(|i| (i * 7 % 253) as u8)
        .collect();
    std::fs::write(mp.join("via-krb5-mount.bin"), &data).unwrap();
    assert_eq!(std::fs::read(mp.join("via-krb5-mount.bin")).unwrap(), data);
    assert_eq!(
        std::fs::read(tb.share_path("plain").join("via-krb5-mount.bin")).unwrap(),
        data,
        "bytes on the server's disk"
    );
    drop(m);
    assert!(!is_mounted(&mp));
    let _ = std::fs::remove_dir_all(&dir);
}
