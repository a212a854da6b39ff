//! The example runs against the testbed's smbd and produces the exact file.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

mod common;

use smb3_tests::{Testbed, TestbedConfig};

#[test]
fn copy_down_example_fetches_the_file() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(tb.share_path("plain").join("example.bin"), &data).unwrap();
    let out = std::env::temp_dir().join(format!("copy_down-{}.bin", std::process::id()));
    let o = common::run_example(
        &tb,
        "copy_down",
        "plain",
        &["example.bin", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("5000000 bytes"));
    assert_eq!(std::fs::read(&out).unwrap(), data);
    std::fs::remove_file(out).ok();
}
