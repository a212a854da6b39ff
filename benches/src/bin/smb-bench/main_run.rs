//! `smb-bench main`: one link unshaped, then one shaped to 1 Gbit/s; on each, raw TCP, smbcp
//! and smbclient moving the reference file both ways (on `[plain]`, and on `[encrypted]` too
//! unshaped), and small-read latency. The `results` section of docs/PERFORMANCE.md.
//!
//! Latency is of small reads at queue depth 1: the library in-process, and the closest thing
//! `smbclient` can do. smbclient has no "read N bytes at offset X"; what it can do in one
//! session is `get` a small file, which costs CREATE, QUERY_INFO, READ and CLOSE. So the
//! library is timed twice: one `read_at` at a random aligned offset of the big file, and the
//! same four requests on a small file; and smbclient's `get`s are fed one at a time on its
//! stdin, each timed from writing the command to reading its "getting file" line (two pipe
//! hops and its command parsing included, some tens of microseconds).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use smb3_benches::data::{self, Pattern, BIG_SEED, SMALL_SEED};
use smb3_benches::session::connect_plain;
use smb3_benches::Context;
use smb3_client::{ClientConfig, OpenOptions, Share};
use smb3_tests::{client_block_on, Testbed};

use crate::bench::{Bench, LinkSetup, REMOTE_BIG};
use crate::results::{Latency, THROUGHPUT};
use crate::transfer::{smbclient, Tool};
use crate::Common;

/// Size of every read.
const READ_SIZE: usize = 4096;
/// Operations done first and not counted (connection warm-up, caches).
const WARMUP: usize = 100;
const SMALL: &str = "small4k";
const FOUR_REQUESTS: &str = "CREATE, QUERY_INFO, READ, CLOSE";

pub(crate) fn run(common: &Common, latency_ops: usize) -> Result<(), String> {
    let mut bench = Bench::new(common, common.size(1024, 256), common.reps(3))?;
    let tools = [Tool::smbcp(&bench.smbcp, &[]), Tool::Smbclient];
    let links = [
        ("unshaped", LinkSetup::UNSHAPED, &["plain", "encrypted"][..]),
        ("1 Gbit/s", LinkSetup::shaped(1, 1000), &["plain"][..]),
    ];
    for (label, setup, shares) in links {
        let tb = bench.testbed(&setup, shares, "")?;
        bench.raw_tcp(&tb, &setup, label)?;
        for share in shares {
            bench.both_directions(&tb, label, share, &tools)?;
        }
        common.quiet();
        let set = small_reads(&tb, latency_ops)?;
        for l in &set {
            eprintln!(
                "  {label} {}: median {:.0} µs, p99 {:.0} µs",
                l.what, l.median_us, l.p99_us
            );
        }
        bench.results.latency.push((label.into(), set));
    }
    let mut body = bench.header();
    body.push_str(&bench.results.table(THROUGHPUT, |_| true).markdown());
    body.push_str("\nSmall reads at queue depth 1 (4 KiB, `[plain]` share):\n\n");
    body.push_str(&bench.results.latency_table().markdown());
    common.publish("results", None, &body)
}

/// The library's and smbclient's small reads on `[plain]`: the big file, and a 4 KiB one.
fn small_reads(tb: &Testbed, ops: usize) -> Result<Vec<Latency>, String> {
    let small = tb.share_path("plain").join(SMALL);
    data::write_pattern(&small, SMALL_SEED, READ_SIZE as u64)?;
    let contents = std::fs::read(&small).ctx(small.display())?;
    let big = std::fs::File::open(tb.share_path("plain").join(REMOTE_BIG)).ctx(REMOTE_BIG)?;
    let rt = tb.client_runtime();
    let (connect, expected) = (connect_plain(tb, ClientConfig::default()), contents.clone());
    let (reads, gets) = client_block_on(&rt, async move {
        let (client, share) = connect.await?;
        let reads = random_reads(&share, &big, ops).await?;
        let gets = small_gets(&share, &expected, ops).await?;
        let _ = client.logoff().await;
        Ok::<_, String>((reads, gets))
    })?;
    Ok(vec![
        Latency::of(
            "library `read_at` 4 KiB, random aligned offset, QD1",
            "READ",
            &reads,
        ),
        Latency::of(
            "library open + metadata + read_at + close of a 4 KiB file",
            FOUR_REQUESTS,
            &gets,
        ),
        smbclient_gets(tb, &contents, ops)?,
    ])
}

/// `ops` timed reads at random aligned offsets of the big file, one at a time, each checked
/// against the file on the host (`host`) afterwards.
async fn random_reads(
    share: &Share,
    host: &std::fs::File,
    ops: usize,
) -> Result<Vec<Duration>, String> {
    let file = share
        .open(REMOTE_BIG, &OpenOptions::new().read(true))
        .await
        .ctx("open")?;
    let blocks = (file.size_at_open() / READ_SIZE as u64).max(1);
    let mut rng = Pattern::new(BIG_SEED ^ 0x1a7e);
    let (mut times, mut seen) = (Vec::with_capacity(ops), Vec::with_capacity(ops));
    for i in 0..WARMUP + ops {
        let offset = (rng.next_u64() % blocks) * READ_SIZE as u64;
        let started = Instant::now();
        let data = file
            .read_at(offset, READ_SIZE)
            .await
            .ctx(format!("read_at {offset}"))?;
        if i >= WARMUP {
            times.push(started.elapsed());
            seen.push((offset, data));
        }
    }
    let _ = file.close().await;
    let mut expected = vec![0u8; READ_SIZE];
    for (offset, data) in seen {
        host.read_exact_at(&mut expected, offset).ctx(REMOTE_BIG)?;
        if data[..] != expected[..] {
            return Err(format!(
                "read_at({offset}, {READ_SIZE}) returned wrong data ({} bytes)",
                data.len()
            ));
        }
    }
    Ok(times)
}

/// `ops` timed open + metadata + read + close of the small file, each checked.
async fn small_gets(share: &Share, contents: &[u8], ops: usize) -> Result<Vec<Duration>, String> {
    let mut times = Vec::with_capacity(ops);
    for i in 0..WARMUP + ops {
        let started = Instant::now();
        let file = share
            .open(SMALL, &OpenOptions::new().read(true))
            .await
            .ctx(format!("open {SMALL}"))?;
        let len = file.metadata().await.ctx("metadata")?.len;
        let data = file.read_at(0, len as usize).await.ctx("read")?;
        file.close().await.ctx("close")?;
        let took = started.elapsed();
        if data[..] != contents[..] {
            return Err(format!("{SMALL} read back wrong ({} bytes)", data.len()));
        }
        if i >= WARMUP {
            times.push(took);
        }
    }
    Ok(times)
}

/// smbclient `get SMALL /dev/null` repeated in one session.
fn smbclient_gets(tb: &Testbed, contents: &[u8], ops: usize) -> Result<Latency, String> {
    let mut child = smbclient(tb, "plain")
        // -E sends smbclient's messages (the "getting file" line) to unbuffered stderr.
        .arg("-E")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ctx("cannot start smbclient")?;
    let (Some(mut stdin), Some(stderr)) = (child.stdin.take(), child.stderr.take()) else {
        return Err("smbclient pipes missing".into());
    };
    let mut replies = BufReader::new(stderr);
    let (command, size) = (
        format!("get {SMALL} /dev/null\n"),
        format!("of size {} ", contents.len()),
    );
    let mut times = Vec::with_capacity(ops);
    let outcome = (0..WARMUP + ops).try_for_each(|i| {
        let started = Instant::now();
        (stdin
            .write_all(command.as_bytes())
            .and_then(|()| stdin.flush()))
        .ctx("smbclient stdin")?;
        // Its messages up to the "getting file ... of size N" line of this `get`, banner
        // lines skipped.
        let mut line = String::new();
        while !line.starts_with("getting file") {
            line.clear();
            if replies.read_line(&mut line).ctx("smbclient stderr")? == 0 {
                return Err("smbclient exited in the middle of the latency run".into());
            }
            if line.contains("NT_STATUS_") {
                return Err(format!("smbclient: {}", line.trim()));
            }
        }
        if !line.contains(&size) {
            return Err(format!("smbclient got the wrong size: {}", line.trim()));
        }
        if i >= WARMUP {
            times.push(started.elapsed());
        }
        Ok(())
    });
    // Closing stdin ends the session; smbclient exits on EOF.
    drop(stdin);
    let status = child.wait().ctx("smbclient")?;
    outcome?;
    if !status.success() {
        return Err(format!("smbclient ended with {status}"));
    }
    let what = "smbclient `get` of a 4 KiB file to /dev/null, commands on stdin of one session";
    Ok(Latency::of(what, FOUR_REQUESTS, &times))
}
