//! `smb-bench queue-depth`: 4 KiB reads and writes at random aligned offsets of a file with
//! exactly QD operations in flight, for QD 1 to 64, on one link with one channel and on four
//! links with one channel each. The library runs in-process on a runtime in the client
//! namespace, so what is measured is its request path, not a tool's start-up; before
//! measuring, the client must show one active channel per link. Every read and the written
//! file are verified ([`point`]). The `queue-depth` section of docs/PERFORMANCE.md and its
//! chart ([`report`]).

mod point;
mod report;

use std::sync::Arc;
use std::time::Duration;

use smb3_benches::data::{self, Fingerprint, BIG_SEED};
use smb3_benches::session::connect_plain;
use smb3_client::{ChannelInfo, ChannelState, Client, ClientConfig, OpenOptions};
use smb3_tests::{client_block_on, Testbed};

use crate::bench::{header, LinkSetup};
use crate::machine::{check_memory, wait_until_quiet, Facts};
use crate::Common;
use point::{PointPlan, BLOCK};
use report::{Op, Setup, Sweep, DEPTHS};

/// How long binding the extra channels may take.
const BIND_WAIT: Duration = Duration::from_secs(30);
/// Names on `[plain]`.
const READ_FILE: &str = "qd-read";
const WRITE_FILE: &str = "qd-write";

/// Sizes and times of a run.
#[derive(Debug, Clone)]
struct Settings {
    size: u64,
    reps: usize,
    warmup: Duration,
    window: Duration,
}

pub(crate) fn run(common: &Common) -> Result<(), String> {
    let settings = Settings {
        size: common.size(1024, 256),
        reps: common.reps(3),
        warmup: Duration::from_millis(if common.quick { 200 } else { 500 }),
        window: Duration::from_secs(if common.quick { 1 } else { 5 }),
    };
    // Two copies of the file on the server's tmpfs.
    check_memory(settings.size * 2)?;
    let (mut sweep, mut setups, mut notes, mut quiet, mut reference) =
        (Sweep::default(), Vec::new(), Vec::new(), Vec::new(), None);
    for links in [1, 4] {
        let setup = Setup {
            links,
            rate_mbit: common.rate(1000),
        };
        quiet.push(wait_until_quiet(common.wait_quiet()));
        let tb =
            LinkSetup::shaped(links, setup.rate_mbit).start((settings.size >> 20) * 2 + 256, "")?;
        let note = sweep_testbed(&tb, setup, &settings, &mut sweep, &mut reference)?;
        eprintln!("  {note}");
        notes.push(note);
        setups.push(setup);
    }
    let reference = reference.ok_or("no testbed ran")?;
    let what = format!(
        "file {} MiB (sha256 {}), {} repetition(s), median shown; {:.1} s measured per point after {:.1} s of warm-up",
        settings.size >> 20,
        &reference.sha256[..16],
        settings.reps,
        settings.window.as_secs_f64(),
        settings.warmup.as_secs_f64(),
    );
    let mut body = header(&Facts::collect(), false, &what, Some(&quiet), None);
    let lines = sweep.target_lines(&setups);
    if !lines.is_empty() {
        body.push_str(&format!("Targets:\n\n{}\n\n", lines.join("\n")));
    }
    body.push_str(&sweep.table(&setups).markdown());
    body.push_str("\nChannels:\n\n");
    for note in &notes {
        body.push_str(&format!("- {note}\n"));
    }
    let title = format!(
        "4 KiB random I/O on a {} MiB file: IOPS against queue depth (median)",
        settings.size >> 20
    );
    if let Some(svg) = common.chart("queue-depth.svg", || sweep.chart(&setups, &title).svg())? {
        body.push_str(&format!(
            "\n![IOPS against queue depth, one channel and four]({svg})\n"
        ));
    }
    common.publish(
        "queue-depth",
        Some("## Small random I/O and queue depth"),
        &body,
    )
}

/// Every point on one testbed, then the data checks; the line about the channels.
fn sweep_testbed(
    tb: &Testbed,
    setup: Setup,
    settings: &Settings,
    sweep: &mut Sweep,
    reference: &mut Option<Fingerprint>,
) -> Result<String, String> {
    // Both files written straight into the tmpfs behind `[plain]`, given to the test user who
    // writes the second.
    let dir = tb.share_path("plain");
    let (read_host, write_host) = (dir.join(READ_FILE), dir.join(WRITE_FILE));
    let fingerprint = data::write_pattern(&read_host, BIG_SEED, settings.size)?;
    std::fs::copy(&read_host, &write_host).map_err(|e| format!("{}: {e}", write_host.display()))?;
    tb.give_to_user(&read_host);
    tb.give_to_user(&write_host);
    let host = Arc::new(
        std::fs::File::open(&read_host).map_err(|e| format!("{}: {e}", read_host.display()))?,
    );
    // The library's defaults but one channel per link: the testbed advertises RSS, and 4
    // channels per RSS pair would put 16 on 4 links.
    let mut cfg = ClientConfig::default();
    (cfg.channels_per_rss_nic, cfg.channels_per_nic) = (1, 1);
    let (connect, smbd_pid, owned) = (connect_plain(tb, cfg), tb.smbd_pid(), settings.clone());
    let rt = tb.client_runtime();
    let (samples, written, note) = client_block_on(&rt, async move {
        let (client, share) = connect.await?;
        let servers = one_channel_per_link(&client, setup.links).await?;
        let open = |name: &'static str, write: bool| {
            let share = share.clone();
            async move {
                share
                    .open(name, &OpenOptions::new().read(true).write(write))
                    .await
                    .map_err(|e| format!("open {name}: {e}"))
            }
        };
        let (reader, writer) = (open(READ_FILE, false).await?, open(WRITE_FILE, true).await?);
        let before = client.channels();
        let blocks = owned.size / BLOCK as u64;
        let (mut samples, mut written) = (Vec::new(), vec![false; blocks as usize]);
        // The repetitions outermost, so a slow drift of the machine hits every point alike.
        let measured: Result<(), String> = async {
            for rep in 1..=owned.reps {
                for depth in DEPTHS {
                    for op in Op::BOTH {
                        crate::child::check()?;
                        let plan = PointPlan {
                            op,
                            depth,
                            // The same offsets on every testbed, other ones every repetition.
                            seed: BIG_SEED ^ ((rep as u64) << 32) ^ ((depth as u64) << 8) ^ op as u64,
                            blocks,
                            warmup: owned.warmup,
                            window: owned.window,
                            smbd_pid,
                        };
                        let file = if op == Op::Read { &reader } else { &writer };
                        let (sample, blocks) = point::run_point(file, &host, &plan).await?;
                        for b in blocks {
                            written[b as usize] = true;
                        }
                        eprintln!(
                            "  {} {op} QD {depth} #{rep}: {:.0} IOPS, median {:.0} µs, p99 {:.0} µs, CPU per op client {:.1} µs, \
                             smbd {:.1} µs, {:.2} CPUs busy",
                            setup.label(),
                            sample.iops,
                            sample.median_us,
                            sample.p99_us,
                            sample.client_us_per_op,
                            sample.smbd_us_per_op,
                            sample.cpus_busy
                        );
                        samples.push((op, depth, sample));
                    }
                }
            }
            Ok(())
        }
        .await;
        let note = channel_note(setup, &servers, &before, &client.channels());
        let _ = reader.close().await;
        let _ = writer.close().await;
        let _ = client.logoff().await;
        measured.map(|()| (samples, written, note))
    })?;
    drop(rt);
    for (op, depth, sample) in samples {
        sweep.push(setup, op, depth, sample);
    }
    point::verify_written(&write_host, BIG_SEED, settings.size, &written)?;
    data::verify(&read_host, &fingerprint)?;
    let count = written.iter().filter(|w| **w).count();
    eprintln!("  data checked: every read matched; {count} blocks written, the file on the server verifies");
    *reference = Some(fingerprint);
    Ok(note)
}

/// Waits for binding to settle, then insists on exactly one active channel per link
/// (distinct server addresses); their server addresses.
async fn one_channel_per_link(client: &Client, links: usize) -> Result<Vec<String>, String> {
    if !client.wait_for_channels(BIND_WAIT).await {
        return Err(format!(
            "the extra channels were not bound within {} s",
            BIND_WAIT.as_secs()
        ));
    }
    let channels = client.channels();
    let active: Vec<_> = channels
        .iter()
        .filter(|c| c.state == ChannelState::Active)
        .collect();
    let mut servers: Vec<String> = active.iter().map(|c| c.server.ip().to_string()).collect();
    servers.sort();
    servers.dedup();
    if active.len() == links && servers.len() == links {
        return Ok(servers);
    }
    Err(format!(
        "expected {links} active channel(s), one per link, but the client has {} over {} server address(es) ({}); \
         multichannel off because: {}",
        active.len(),
        servers.len(),
        servers.join(", "),
        client.multichannel().off_reason.as_deref().unwrap_or("(it is on)")
    ))
}

/// `4 x 1000 Mbit/s, 4 channels: 4 active channel(s) to ...; requests per channel during the
/// sweep: 10.1.1.2 -> 10.1.1.1: 1200, ...`
fn channel_note(
    setup: Setup,
    servers: &[String],
    before: &[ChannelInfo],
    after: &[ChannelInfo],
) -> String {
    let per_channel: Vec<String> = (after.iter())
        .map(|a| {
            let earlier = before
                .iter()
                .find(|b| b.local == a.local && b.server == a.server)
                .map_or(0, |b| b.requests);
            format!(
                "{} -> {}: {}",
                a.local.ip(),
                a.server.ip(),
                a.requests - earlier
            )
        })
        .collect();
    format!(
        "{}: {} active channel(s) to {}; requests per channel during the sweep: {}",
        setup.label(),
        servers.len(),
        servers.join(", "),
        per_channel.join(", ")
    )
}
