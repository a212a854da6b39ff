//! A directory of 1,000,000 entries listed with `Share::list` against the testbed's smbd: the
//! listing's memory stays bounded by one reply, whatever the directory's size.
//!
//! A test binary of its own, so that nothing else runs in the process while its peak
//! resident set is measured (`/proc/self/status` VmHWM, reset through `/proc/self/clear_refs`).

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::fs::File;
use std::time::Instant;

use smb3_client::{Client, ClientConfig};
use smb3_tests::{client_block_on, Testbed, TestbedConfig};

const ENTRIES: usize = 1_000_000;

/// What the listing may add to the process's peak resident set. Holding the entries would
/// take far more: a `DirEntry` with its metadata and name is over 100 bytes, so a million of
/// them are above 100 MiB; one reply of at most 64 KiB of output holds a few hundred. What
/// the listing does keep per entry is a 16-byte digest of its name, so that it can go on
/// without repeating a name after losing its channel: 16 MiB here (measured growth 16.5 MiB;
/// 52 MiB when those digests were in a hash set).
const BOUND_MIB: u64 = 48;

#[test]
fn a_million_entries_are_listed_in_bounded_memory() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let huge = tb.share_path("plain").join("huge");
    std::fs::create_dir(&huge).unwrap();
    let made = Instant::now();
    for i in 0..ENTRIES {
        File::create(huge.join(format!("f{i:07}"))).unwrap();
    }
    eprintln!("{ENTRIES} files made in {:.1?}", made.elapsed());
    tb.give_to_user(&huge);

    let rt = tb.client_runtime();
    let (server, creds) = (format!("{}:445", tb.server_addr(1)), tb.credentials());
    let (seen, pages, largest, grew, took) = client_block_on(&rt, async move {
        let client = Client::connect(&server, &creds, ClientConfig::default())
            .await
            .expect("connect");
        let share = client.share("plain").await.expect("tree connect");
        // Warm up what one listing needs once (buffers, the runtime's workers), so that the
        // measure below is the listing's growth with the directory's size.
        let mut warm = share.list("huge").await.unwrap();
        assert!(warm.next_page().await.unwrap().is_some());
        warm.close().await.unwrap();

        let before = resident_kib("VmRSS");
        std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak resident set");
        let started = Instant::now();
        // One bit per expected name: each must come exactly once.
        let mut seen = vec![0u64; ENTRIES.div_ceil(64)];
        let (mut count, mut pages, mut largest) = (0usize, 0usize, 0usize);
        let mut listing = share.list("huge").await.unwrap();
        while let Some(page) = listing.next_page().await.unwrap() {
            pages += 1;
            largest = largest.max(page.len());
            for entry in page {
                let i: usize = entry
                    .name
                    .strip_prefix('f')
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("unexpected entry {:?}", entry.name));
                assert!(i < ENTRIES, "unexpected entry {:?}", entry.name);
                let (word, bit) = (i / 64, 1u64 << (i % 64));
                assert_eq!(seen[word] & bit, 0, "{} came twice", entry.name);
                seen[word] |= bit;
                count += 1;
            }
        }
        let took = started.elapsed();
        let grew = resident_kib("VmHWM").saturating_sub(before);
        client.logoff().await.unwrap();
        (count, pages, largest, grew, took)
    });
    eprintln!(
        "{seen} entries in {pages} pages (at most {largest} per page) in {took:.1?}, \
         {:.0} entries/s; peak resident set grew by {grew} KiB",
        seen as f64 / took.as_secs_f64()
    );
    assert_eq!(seen, ENTRIES);
    assert!(
        grew < BOUND_MIB * 1024,
        "listing {ENTRIES} entries grew the peak resident set by {grew} KiB"
    );
    drop(rt);
    // Removing a million files takes a while; the testbed's teardown does it with the share.
}

/// A `/proc/self/status` field in KiB.
fn resident_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}
