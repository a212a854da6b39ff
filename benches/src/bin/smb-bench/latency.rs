//! Latency of small reads at queue depth 1: the library in-process, and the closest thing
//! `smbclient` can do.
//!
//! smbclient has no "read N bytes at offset X"; what it can do in one session is `get` a small
//! file, which costs CREATE, QUERY_INFO, READ and CLOSE. So the library is timed twice: one
//! `read_at` at a random aligned offset of the big file, and the same four requests on a
//! small file; and smbclient's `get`s are fed one at a time on its stdin, each timed from
//! writing the command to reading its "getting file" line (two pipe hops and its command
//! parsing included, some tens of microseconds).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use smb3_benches::data::Pattern;
use smb3_benches::session::connect_plain;
use smb3_benches::stats::{median, percentile};
use smb3_client::{ClientConfig, OpenOptions, Share};
use smb3_tests::{client_block_on, Testbed};

use crate::transfer::smbclient;

/// Size of every read.
pub(crate) const READ_SIZE: usize = 4096;
/// Operations done first and not counted (connection warm-up, caches).
const WARMUP: usize = 100;
const FOUR_REQUESTS: &str = "CREATE, QUERY_INFO, READ, CLOSE";

/// Latency of one kind of operation.
#[derive(Debug, Clone)]
pub(crate) struct Latency {
    pub(crate) what: &'static str,
    /// The SMB requests one operation costs.
    pub(crate) requests: &'static str,
    pub(crate) ops: usize,
    pub(crate) median_us: f64,
    pub(crate) p99_us: f64,
}

impl Latency {
    fn of(what: &'static str, requests: &'static str, samples: &[Duration]) -> Latency {
        let us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        Latency {
            what,
            requests,
            ops: us.len(),
            median_us: median(&us).unwrap_or(f64::NAN),
            p99_us: percentile(&us, 99.0).unwrap_or(f64::NAN),
        }
    }
}

/// The files read, as named on `[plain]`, with what they hold.
#[derive(Debug, Clone)]
pub(crate) struct LatencyFiles {
    pub(crate) big: String,
    /// The big file on the host, to check what was read.
    pub(crate) big_host: PathBuf,
    pub(crate) small: String,
    pub(crate) small_contents: Vec<u8>,
}

/// The two library measurements, on a runtime in the client namespace.
pub(crate) fn library(
    tb: &Testbed,
    files: &LatencyFiles,
    ops: usize,
    seed: u64,
) -> Result<Vec<Latency>, String> {
    let rt = tb.client_runtime();
    let (connect, files) = (connect_plain(tb, ClientConfig::default()), files.clone());
    let (reads, gets) = client_block_on(&rt, async move {
        let (client, share) = connect.await?;
        let reads = random_reads(&share, &files, ops, seed).await?;
        let gets = small_gets(&share, &files, ops).await?;
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
    ])
}

/// `ops` timed reads at random aligned offsets, one at a time, each checked against the file
/// on the host afterwards.
async fn random_reads(
    share: &Share,
    files: &LatencyFiles,
    ops: usize,
    seed: u64,
) -> Result<Vec<Duration>, String> {
    let file = share
        .open(&files.big, &OpenOptions::new().read(true))
        .await
        .map_err(|e| format!("open {}: {e}", files.big))?;
    let blocks = (file.size_at_open() / READ_SIZE as u64).max(1);
    let mut rng = Pattern::new(seed);
    let (mut times, mut seen) = (Vec::with_capacity(ops), Vec::with_capacity(ops));
    for i in 0..WARMUP + ops {
        let offset = (rng.next_u64() % blocks) * READ_SIZE as u64;
        let started = Instant::now();
        let data = file
            .read_at(offset, READ_SIZE)
            .await
            .map_err(|e| format!("read_at {offset}: {e}"))?;
        if i >= WARMUP {
            times.push(started.elapsed());
            seen.push((offset, data));
        }
    }
    let _ = file.close().await;
    let host = std::fs::File::open(&files.big_host)
        .map_err(|e| format!("{}: {e}", files.big_host.display()))?;
    let mut expected = vec![0u8; READ_SIZE];
    for (offset, data) in seen {
        host.read_exact_at(&mut expected, offset)
            .map_err(|e| format!("{}: {e}", files.big_host.display()))?;
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
async fn small_gets(
    share: &Share,
    files: &LatencyFiles,
    ops: usize,
) -> Result<Vec<Duration>, String> {
    let mut times = Vec::with_capacity(ops);
    for i in 0..WARMUP + ops {
        let started = Instant::now();
        let file = share
            .open(&files.small, &OpenOptions::new().read(true))
            .await
            .map_err(|e| format!("open {}: {e}", files.small))?;
        let len = file
            .metadata()
            .await
            .map_err(|e| format!("metadata: {e}"))?
            .len;
        let data = file
            .read_at(0, len as usize)
            .await
            .map_err(|e| format!("read: {e}"))?;
        file.close().await.map_err(|e| format!("close: {e}"))?;
        let took = started.elapsed();
        if data[..] != files.small_contents[..] {
            return Err(format!(
                "{} read back wrong ({} bytes)",
                files.small,
                data.len()
            ));
        }
        if i >= WARMUP {
            times.push(took);
        }
    }
    Ok(times)
}

/// smbclient `get SMALL /dev/null` repeated in one session.
pub(crate) fn smbclient_gets(
    tb: &Testbed,
    files: &LatencyFiles,
    ops: usize,
) -> Result<Latency, String> {
    let mut child = smbclient(tb, "plain")
        // -E sends smbclient's messages (the "getting file" line) to unbuffered stderr.
        .arg("-E")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start smbclient: {e}"))?;
    let (Some(mut stdin), Some(stderr)) = (child.stdin.take(), child.stderr.take()) else {
        return Err("smbclient pipes missing".into());
    };
    let mut replies = BufReader::new(stderr);
    let command = format!("get {} /dev/null\n", files.small);
    let mut times = Vec::with_capacity(ops);
    let outcome = (0..WARMUP + ops).try_for_each(|i| {
        let started = Instant::now();
        stdin
            .write_all(command.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("smbclient stdin: {e}"))?;
        await_get_line(&mut replies, files.small_contents.len())?;
        if i >= WARMUP {
            times.push(started.elapsed());
        }
        Ok::<_, String>(())
    });
    // Closing stdin ends the session; smbclient exits on EOF.
    drop(stdin);
    let status = child.wait().map_err(|e| format!("smbclient: {e}"))?;
    outcome?;
    if !status.success() {
        return Err(format!("smbclient ended with {status}"));
    }
    let what = "smbclient `get` of a 4 KiB file to /dev/null, commands on stdin of one session";
    Ok(Latency::of(what, FOUR_REQUESTS, &times))
}

/// Reads smbclient's messages up to the "getting file ... of size N" line of one `get`,
/// skipping its banner lines.
fn await_get_line(replies: &mut impl BufRead, size: usize) -> Result<(), String> {
    let mut line = String::new();
    loop {
        line.clear();
        if replies
            .read_line(&mut line)
            .map_err(|e| format!("smbclient stderr: {e}"))?
            == 0
        {
            return Err("smbclient exited in the middle of the latency run".into());
        }
        if line.starts_with("getting file") {
            return match line.contains(&format!("of size {size} ")) {
                true => Ok(()),
                false => Err(format!("smbclient got the wrong size: {}", line.trim())),
            };
        }
        if line.contains("NT_STATUS_") {
            return Err(format!("smbclient: {}", line.trim()));
        }
    }
}
