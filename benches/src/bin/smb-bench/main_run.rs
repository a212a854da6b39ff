//! `smb-bench main`: one link unshaped, then one shaped to 1 Gbit/s; on each, raw TCP, smbcp
//! and smbclient moving the reference file both ways (on `[plain]`, and on `[encrypted]` too
//! unshaped), and small-read latency. The `results` section of docs/PERFORMANCE.md.

use smb3_benches::data::{self, SMALL_SEED};
use smb3_tests::Testbed;

use crate::bench::{Bench, LinkSetup, REMOTE_BIG};
use crate::latency::{self, LatencyFiles, READ_SIZE};
use crate::machine::wait_until_quiet;
use crate::transfer::{ShareKind, Tool};
use crate::Common;

pub(crate) fn run(common: &Common, latency_ops: usize) -> Result<(), String> {
    let mut bench = Bench::new(common, common.size(1024, 256), common.reps(3))?;
    let tools = [Tool::smbcp(&bench.smbcp, &[]), Tool::Smbclient];
    let links = [
        (
            "unshaped",
            LinkSetup::UNSHAPED,
            &[ShareKind::Plain, ShareKind::Encrypted][..],
        ),
        (
            "1 Gbit/s",
            LinkSetup::shaped(1, 1000),
            &[ShareKind::Plain][..],
        ),
    ];
    for (label, setup, shares) in links {
        let tb = bench.testbed(&setup, shares, "")?;
        bench.raw_tcp(&tb, &setup, label)?;
        for &share in shares {
            bench.both_directions(&tb, label, share, &tools)?;
        }
        small_reads(&mut bench, &tb, label, latency_ops)?;
    }
    let mut body = bench.header();
    body.push_str(&bench.results.throughput_table().markdown());
    body.push_str("\nSmall reads at queue depth 1 (4 KiB, `[plain]` share):\n\n");
    body.push_str(&bench.results.latency_table().markdown());
    common.publish("results", None, &body)
}

/// The library's and smbclient's small reads on `[plain]`: the big file, and a 4 KiB one.
fn small_reads(bench: &mut Bench<'_>, tb: &Testbed, label: &str, ops: usize) -> Result<(), String> {
    wait_until_quiet(bench.common.wait_quiet());
    let dir = tb.share_path("plain");
    let small = dir.join("small4k");
    data::write_pattern(&small, SMALL_SEED, READ_SIZE as u64)?;
    let files = LatencyFiles {
        big: REMOTE_BIG.into(),
        big_host: dir.join(REMOTE_BIG),
        small: "small4k".into(),
        small_contents: std::fs::read(&small).map_err(|e| format!("{}: {e}", small.display()))?,
    };
    let mut set = latency::library(tb, &files, ops, data::BIG_SEED ^ 0x1a7e)?;
    set.push(latency::smbclient_gets(tb, &files, ops)?);
    for l in &set {
        eprintln!(
            "  {label} {}: median {:.0} µs, p99 {:.0} µs",
            l.what, l.median_us, l.p99_us
        );
    }
    bench.results.latency.push((label.into(), set));
    Ok(())
}
