//! Linux: a NIC's speed, receive queues and carrier from sysfs (`/sys/class/net/NAME`).
//!
//! Compiled everywhere so its tests run on every platform; only Linux calls it.

use std::path::Path;

use super::LinkFacts;

/// `class/net/NAME/carrier` under `sysfs_root`: "1" up, "0" down; reading it fails with
/// EINVAL while the NIC is administratively down, which is down as well. A missing NIC or
/// an unsafe name is unknown.
pub(crate) fn carrier(sysfs_root: &Path, name: &str) -> Option<bool> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return None;
    }
    let dir = sysfs_root.join("class/net").join(name);
    if !dir.exists() {
        return None;
    }
    match std::fs::read_to_string(dir.join("carrier")) {
        Ok(text) => match text.trim() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        },
        Err(e) if e.raw_os_error() == Some(22) => Some(false),
        Err(_) => None,
    }
}

/// Speed and receive queues of NIC `name` from a sysfs tree rooted at `sysfs_root` (`/sys`):
/// `class/net/NAME/speed` holds Mb/s (-1, unreadable or absent: unknown; reading it on a down
/// or virtual NIC fails with EINVAL), and each `class/net/NAME/queues/rx-N` directory is one
/// receive queue.
pub(crate) fn link_facts(sysfs_root: &Path, name: &str) -> LinkFacts {
    // A name that could walk out of the NIC's directory is not a NIC name.
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return LinkFacts::default();
    }
    let dir = sysfs_root.join("class/net").join(name);
    let link_speed = std::fs::read_to_string(dir.join("speed"))
        .ok()
        .and_then(|text| parse_sysfs_speed(&text));
    let rx_queues = std::fs::read_dir(dir.join("queues"))
        .map(|entries| {
            let count = entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count();
            u32::try_from(count).unwrap_or(u32::MAX)
        })
        .unwrap_or(0);
    LinkFacts {
        link_speed,
        rx_queues,
    }
}

/// Mb/s text from sysfs to bits per second. -1 (SPEED_UNKNOWN), 0, its u32 form 4294967295,
/// and anything not a number mean unknown.
fn parse_sysfs_speed(text: &str) -> Option<u64> {
    let mbps: i64 = text.trim().parse().ok()?;
    if mbps <= 0 || mbps >= i64::from(u32::MAX) {
        return None;
    }
    u64::try_from(mbps).ok()?.checked_mul(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "smb3-inventory-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        /// Make `class/net/NAME` with an optional speed file and `rx` rx-queue directories
        /// (plus one tx queue, which must not count).
        fn nic(&self, name: &str, speed: Option<&str>, rx: usize) {
            let dir = self.0.join("class/net").join(name);
            std::fs::create_dir_all(dir.join("queues/tx-0")).unwrap();
            for n in 0..rx {
                std::fs::create_dir_all(dir.join(format!("queues/rx-{n}"))).unwrap();
            }
            if let Some(text) = speed {
                std::fs::write(dir.join("speed"), text).unwrap();
            }
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn sysfs_speed_10000_mbps_is_10_gbps_and_4_rx_queues_is_rss() {
        let root = TempDir::new();
        root.nic("eth0", Some("10000\n"), 4);
        let facts = link_facts(&root.0, "eth0");
        assert_eq!(
            facts,
            LinkFacts {
                link_speed: Some(10_000_000_000),
                rx_queues: 4
            }
        );
        assert_eq!(facts.rss(), Some(true));
    }

    #[test]
    fn sysfs_speed_minus_one_is_unknown_and_1_rx_queue_is_not_rss() {
        let root = TempDir::new();
        root.nic("veth1", Some("-1\n"), 1);
        let facts = link_facts(&root.0, "veth1");
        assert_eq!(
            facts,
            LinkFacts {
                link_speed: None,
                rx_queues: 1
            }
        );
        assert_eq!(facts.rss(), Some(false));
    }

    #[test]
    fn sysfs_missing_speed_file_is_unknown() {
        let root = TempDir::new();
        root.nic("lo", None, 1);
        assert_eq!(link_facts(&root.0, "lo").link_speed, None);
    }

    #[test]
    fn carrier_comes_from_sysfs_and_unknown_when_absent() {
        let t = TempDir::new();
        t.nic("up0", None, 1);
        t.nic("down0", None, 1);
        t.nic("odd0", None, 1);
        let dir = |n: &str| t.0.join("class/net").join(n);
        std::fs::write(dir("up0").join("carrier"), "1\n").unwrap();
        std::fs::write(dir("down0").join("carrier"), "0\n").unwrap();
        std::fs::write(dir("odd0").join("carrier"), "x\n").unwrap();
        assert_eq!(carrier(&t.0, "up0"), Some(true));
        assert_eq!(carrier(&t.0, "down0"), Some(false));
        assert_eq!(carrier(&t.0, "odd0"), None);
        assert_eq!(carrier(&t.0, "gone0"), None);
        assert_eq!(carrier(&t.0, "../up0"), None);
    }

    #[test]
    fn sysfs_missing_nic_knows_nothing() {
        let root = TempDir::new();
        assert_eq!(link_facts(&root.0, "eth9"), LinkFacts::default());
        assert_eq!(link_facts(&root.0, ".."), LinkFacts::default());
    }

    #[test]
    fn sysfs_speed_text_edge_cases() {
        assert_eq!(parse_sysfs_speed("1000\n"), Some(1_000_000_000));
        assert_eq!(parse_sysfs_speed("2500"), Some(2_500_000_000));
        assert_eq!(parse_sysfs_speed("0"), None);
        assert_eq!(parse_sysfs_speed("4294967295"), None);
        assert_eq!(parse_sysfs_speed("fast"), None);
        assert_eq!(parse_sysfs_speed(""), None);
    }
}
