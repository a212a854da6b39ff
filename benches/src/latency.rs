//! Latency of small reads at queue depth 1: the library in-process, and the closest thing
//! `smbclient` can do.
//!
//! smbclient has no "read N bytes at offset X" command. What it can do in one session is `get`
//! a small file, which costs four round trips (CREATE, QUERY_INFO FileAllInformation, READ,
//! CLOSE - seen with strace on Samba 4.17). So there are three measurements:
//! - library `read_at(offset, 4096)` at random 4 KiB-aligned offsets of the big file (1 READ);
//! - library open + metadata + read_at + close of a 4 KiB file: the same four requests as
//!   smbclient's `get`;
//! - smbclient `get small4k /dev/null` commands fed one at a time on stdin of one session,
//!   each timed from writing the command line to reading smbclient's "getting file" line (so
//!   it includes two pipe hops and smbclient's command parsing, some tens of microseconds).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smb3_client::{ClientConfig, OpenOptions, Share};
use smb3_tests::{client_block_on, Testbed};

use crate::data::Pattern;
use crate::session::Login;
use crate::stats::{median, percentile};

/// Size of every read.
pub const READ_SIZE: usize = 4096;
/// Operations done first and not counted (connection warm-up, caches).
const WARMUP: usize = 100;

/// Latency of one kind of operation.
#[derive(Debug, Clone)]
pub struct Latency {
    /// What was timed.
    pub what: String,
    /// The SMB requests one operation costs.
    pub requests: &'static str,
    /// Operations timed.
    pub ops: usize,
    /// Median, microseconds.
    pub median_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
}

impl Latency {
    fn from_samples(what: &str, requests: &'static str, samples: &[Duration]) -> Latency {
        let us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        Latency {
            what: what.to_string(),
            requests,
            ops: us.len(),
            median_us: median(&us).unwrap_or(f64::NAN),
            p99_us: percentile(&us, 99.0).unwrap_or(f64::NAN),
        }
    }
}

/// Files the latency runs read, as they are on the share (host side paths for verification).
#[derive(Debug, Clone)]
pub struct LatencyFiles {
    /// Share-relative name of the big file.
    pub big: String,
    /// Host path of the big file (to check what was read).
    pub big_host: PathBuf,
    /// Share-relative name of the 4 KiB file.
    pub small: String,
    /// Its exact contents.
    pub small_contents: Vec<u8>,
}

/// The two library measurements, in-process on a runtime in the client namespace.
pub fn library(
    tb: &Testbed,
    files: &LatencyFiles,
    ops: usize,
    seed: u64,
) -> Result<Vec<Latency>, String> {
    let rt = tb.client_runtime();
    let login = Login::to(tb);
    let files_owned = files.clone();
    let result = client_block_on(&rt, async move {
        let (client, share) = login.plain_share(ClientConfig::default()).await?;
        let reads = random_reads(&share, &files_owned, ops, seed).await?;
        let gets = small_gets(&share, &files_owned, ops).await?;
        let _ = client.logoff().await;
        Ok::<_, String>((reads, gets))
    });
    drop(rt);
    let (reads, gets) = result?;
    Ok(vec![
        Latency::from_samples(
            "library `read_at` 4 KiB, random aligned offset, QD1",
            "READ",
            &reads,
        ),
        Latency::from_samples(
            "library open + metadata + read_at + close of a 4 KiB file",
            "CREATE, QUERY_INFO, READ, CLOSE",
            &gets,
        ),
    ])
}

/// `ops` timed 4 KiB reads at random aligned offsets, one at a time; every read is checked
/// against the file on the host afterwards.
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
    let blocks = file.size_at_open() / READ_SIZE as u64;
    if blocks == 0 {
        return Err(format!("{} is smaller than one read", files.big));
    }
    let mut rng = Pattern::new(seed);
    let mut times = Vec::with_capacity(ops);
    let mut seen: Vec<(u64, Bytes)> = Vec::with_capacity(ops);
    for i in 0..WARMUP + ops {
        let offset = (rng.next_u64() % blocks) * READ_SIZE as u64;
        let started = Instant::now();
        let data = file
            .read_at(offset, READ_SIZE)
            .await
            .map_err(|e| format!("read_at {offset}: {e}"))?;
        let took = started.elapsed();
        if i >= WARMUP {
            times.push(took);
            seen.push((offset, data));
        }
    }
    let _ = file.close().await;
    check_reads(files, &seen)?;
    Ok(times)
}

fn check_reads(files: &LatencyFiles, seen: &[(u64, Bytes)]) -> Result<(), String> {
    let host = std::fs::File::open(&files.big_host)
        .map_err(|e| format!("{}: {e}", files.big_host.display()))?;
    let mut expected = vec![0u8; READ_SIZE];
    for (offset, data) in seen {
        host.read_exact_at(&mut expected, *offset)
            .map_err(|e| format!("{}: {e}", files.big_host.display()))?;
        if data[..] != expected[..] {
            return Err(format!(
                "read_at({offset}, {READ_SIZE}) returned wrong data ({} bytes)",
                data.len()
            ));
        }
    }
    Ok(())
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

/// smbclient `get SMALL /dev/null` repeated in one session (see the module comment).
pub fn smbclient(tb: &Testbed, files: &LatencyFiles, ops: usize) -> Result<Latency, String> {
    let mut child = tb
        .client_command("smbclient")
        .arg(tb.unc(1, "plain"))
        .args(["-U", &format!("{}/{}", tb.domain(), tb.user())])
        .args(["-m", "SMB3", "-E"])
        .env("PASSWD", tb.password())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        // -E sends smbclient's messages (the "getting file" line) to unbuffered stderr.
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start smbclient: {e}"))?;
    let (Some(mut stdin), Some(stderr)) = (child.stdin.take(), child.stderr.take()) else {
        return Err("smbclient pipes missing".into());
    };
    let mut replies = BufReader::new(stderr);
    let command = format!("get {} /dev/null\n", files.small);
    let mut times = Vec::with_capacity(ops);
    let mut outcome = Ok(());
    for i in 0..WARMUP + ops {
        let started = Instant::now();
        if let Err(e) = stdin
            .write_all(command.as_bytes())
            .and_then(|()| stdin.flush())
        {
            outcome = Err(format!("smbclient stdin: {e}"));
            break;
        }
        if let Err(e) = await_get_line(&mut replies, files.small_contents.len()) {
            outcome = Err(e);
            break;
        }
        if i >= WARMUP {
            times.push(started.elapsed());
        }
    }
    // Closing stdin ends the session; smbclient exits on EOF.
    drop(stdin);
    let status = child.wait().map_err(|e| format!("smbclient: {e}"))?;
    outcome?;
    if !status.success() {
        return Err(format!("smbclient ended with {status}"));
    }
    Ok(Latency::from_samples(
        "smbclient `get` of a 4 KiB file to /dev/null, commands on stdin of one session",
        "CREATE, QUERY_INFO, READ, CLOSE",
        &times,
    ))
}

/// Reads smbclient's messages until the "getting file ... of size N" line of one `get`.
fn await_get_line(replies: &mut impl BufRead, size: usize) -> Result<(), String> {
    let mut line = String::new();
    loop {
        line.clear();
        let n = replies
            .read_line(&mut line)
            .map_err(|e| format!("smbclient stderr: {e}"))?;
        if n == 0 {
            return Err("smbclient exited in the middle of the latency run".into());
        }
        if line.starts_with("getting file") {
            if !line.contains(&format!("of size {size} ")) {
                return Err(format!("smbclient got the wrong size: {}", line.trim()));
            }
            return Ok(());
        }
        if line.contains("NT_STATUS_") {
            return Err(format!("smbclient: {}", line.trim()));
        }
        // Banner lines ("Try \"help\" ...") and the like are skipped.
    }
}
