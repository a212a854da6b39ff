//! smbfuse over SMB over QUIC (`-o transport=quic,cafile=`), through the tests' QUIC relay in
//! front of the testbed's smbd (`smb3_tests::quic_relay`): a relay, not Windows Server.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smb3_tests::quic_relay::QuicRelay;
use smb3_tests::{client_block_on, pattern, Testbed, TestbedConfig};

const SMBFUSE: &str = env!("CARGO_BIN_EXE_smbfuse");

fn mounted(mp: &Path) -> bool {
    Command::new("mountpoint")
        .arg("-q")
        .arg(mp)
        .status()
        .is_ok_and(|s| s.success())
}

/// A foreground smbfuse; on drop its mount is undone and the daemon ended by its PID.
struct Daemon {
    mp: PathBuf,
    child: Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        for lazily in [false, true] {
            if mounted(&self.mp) {
                let mut umount = Command::new("umount");
                if lazily {
                    umount.arg("-l");
                }
                let _ = umount.arg(&self.mp).status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A mount of the `plain` share over QUIC (UDP 443, no port in the source) checking the
/// relay's certificate against its CA: files written through it reach the share byte-exact
/// and read back the same; a file the server has is read through it.
#[test]
fn the_mount_reads_and_writes_over_quic() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let rt = tb.client_runtime();
    let upstream: SocketAddr = format!("{}:445", tb.server_addr(1)).parse().unwrap();
    let relay = client_block_on(&rt, async move {
        QuicRelay::start_at("127.0.0.1:443".parse().unwrap(), upstream, "127.0.0.1").await
    });
    let dir = smb3_tests::scratch::Scratch::new("smbfuse-quic", "mount");
    let mp = dir.path().to_path_buf();
    let source = format!("smb://{};{}@127.0.0.1/plain", tb.domain(), tb.user());
    let options = format!("transport=quic,cafile={}", relay.ca_file().display());
    let child = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", tb.client_ns()))
        .arg("--")
        .arg(SMBFUSE)
        .arg(&source)
        .arg(&mp)
        .args(["-f", "-o", &options])
        .env("SMB_PASSWORD", tb.password())
        .env_remove("SMB_USER")
        .env_remove("SMB_DOMAIN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("start smbfuse");
    let mut daemon = Daemon {
        mp: mp.clone(),
        child,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !mounted(&mp) && daemon.child.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "smbfuse did not mount {source}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(mounted(&mp), "smbfuse ended without mounting {source}");

    let data = pattern(37, 3 * 1024 * 1024 + 11);
    std::fs::write(mp.join("quic-mount.bin"), &data).expect("write through the mount");
    let on_server = std::fs::read(tb.share_path("plain").join("quic-mount.bin")).unwrap();
    assert!(on_server == data, "the share's copy differs");
    std::fs::write(
        tb.share_path("plain").join("from-server.txt"),
        b"over QUIC\n",
    )
    .unwrap();
    assert_eq!(
        std::fs::read(mp.join("from-server.txt")).expect("read through the mount"),
        b"over QUIC\n"
    );
    assert!(relay.streams() >= 1, "the mount went through the relay");

    drop(daemon);
    assert!(!mounted(&mp));
    client_block_on(&rt, async move { drop(relay) });
    drop(rt);
}
