//! The failover benchmark (`smb-bench --failover`): how long a multichannel transfer suffers
//! when one of its links fails, or all of its connections do, seen from outside the client.
//!
//! For each fault kind ([`Fault::Rst`]: the server resets link K's connections, the link stays
//! up; [`Fault::Silent`]: link K goes down without a word and comes back some seconds later;
//! [`Fault::All`]: the server resets every connection, so the session must be re-established)
//! and each direction, `smbcp` copies a file over N shaped links while a thread samples the
//! byte counters of every client-side veth, and the established connections to port 445,
//! every 50 ms. When about 30 % of the file has crossed the wire the fault is injected. The
//! counters give per-link and aggregate throughput over time, from which [`analyse`] computes
//! the failover gap, the bytes lost during it, and when link K carries its share again; the
//! connection count tells when every channel is back. smbcp's exit status, its failover
//! counters and the SHA-256 of what arrived are recorded; a transfer that fails or hangs is a
//! measured result (reported as such), never a reason for the benchmark to stop. Every
//! (fault, direction) may run several times: the [`table`] shows medians, the [`chart()`]
//! the run of median time lost.
//!
//! One module per job: [`sampler`] reads the link counters, [`run`] does one run (smbcp, the
//! fault, the checks), [`analysis`] turns counters into metrics, [`report`] into the table,
//! the event lines and the Markdown section, [`chart`](mod@chart) into the charts. The faults themselves
//! are the testbed's (`smb3_tests::Testbed::{cut, take_link_down}`), the same the e2e
//! failover tests inject.

use std::fmt;
use std::time::Duration;

pub mod analysis;
pub mod chart;
pub mod report;
pub mod run;
pub mod sampler;

#[cfg(test)]
mod fixtures;

pub use analysis::{analyse, Metrics, Outcome, Timeline};
pub use chart::chart;
pub use report::{csv, event_lines, section, table};
pub use run::{run_once, Check, Exit, FailoverCounters, Job, Run};
pub use sampler::{Reading, SAMPLE_EVERY};

/// The link the fault hits (1-based). Not link 1: smbcp's session starts there, and losing
/// the first channel is a different (harder) case than losing one of several.
pub const FAULT_LINK: usize = 2;
/// Links of the default testbed.
pub const DEFAULT_LINKS: usize = 4;
/// Per-link rate (Mbit/s) by default: low enough that a 1 GiB file lasts long enough for the
/// fault, the link-down time and a recovery afterwards, and that the two CPUs are never the
/// limit (4 links carry about 48 MB/s).
pub const DEFAULT_RATE_MBIT: u32 = 100;
/// Share of the file moved before the fault.
pub const FAULT_AT: f64 = 0.30;
/// How a link fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `testbed cut K`: the server resets every TCP connection over link K; the link stays
    /// up, so the client can reconnect at once.
    Rst,
    /// `testbed link-down K`: packets on link K are silently lost; `link-up K` follows after
    /// the configured time.
    Silent,
    /// `testbed cut`: the server resets every connection of port 445 at once, so the client
    /// loses every channel and has to re-establish the session (new connection with
    /// PreviousSessionId, durable opens reclaimed) before any I/O can resume.
    All,
}

impl Fault {
    /// Every kind, in report order.
    pub const ALL: [Fault; 3] = [Fault::Rst, Fault::Silent, Fault::All];

    /// Short name (table rows, file names).
    pub fn name(self) -> &'static str {
        match self {
            Fault::Rst => "rst",
            Fault::Silent => "silent",
            Fault::All => "all",
        }
    }

    /// True when the fault resets connections (and the links stay up), so recovery is
    /// measured from the fault rather than from a link-up.
    pub(crate) fn resets(self) -> bool {
        matches!(self, Fault::Rst | Fault::All)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How one failover run is done.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Links of the testbed.
    pub links: usize,
    /// Rate of every link (Mbit/s).
    pub rate_mbit: u32,
    /// The link that fails (1-based).
    pub fault_link: usize,
    /// How long link `fault_link` stays down for [`Fault::Silent`].
    pub down_for: Duration,
    /// smbcp is killed when it runs longer than this.
    pub deadline: Duration,
}

/// What N links of `rate_mbit` carry in payload bytes per second (TCP goodput over tbf is
/// about 95 % of the rate at MTU 1500).
pub fn payload_bytes_per_s(links: usize, rate_mbit: u32) -> f64 {
    links as f64 * f64::from(rate_mbit) * 1e6 / 8.0 * 0.95
}

/// The default file size in MiB: big enough that, with a client that fails over well, the
/// transfer still runs `down_for` seconds after the link is back (so recovery can be seen),
/// counting 30 % before the fault and 3/4 of the rate while the link is down. At least 1 GiB
/// (256 MiB with `quick`), rounded up to 256 MiB (64 MiB).
pub fn default_size_mib(links: usize, rate_mbit: u32, down_for: Duration, quick: bool) -> u64 {
    let links = links.max(2);
    let rate = payload_bytes_per_s(links, rate_mbit);
    let down = down_for.as_secs_f64();
    let surviving = (links - 1) as f64 / links as f64;
    let after_fault_s = surviving * down + down;
    let bytes = rate * after_fault_s / (1.0 - FAULT_AT);
    let (floor, step) = if quick { (256, 64) } else { (1024, 256) };
    let mib = (bytes / (1u64 << 20) as f64).ceil() as u64;
    mib.div_ceil(step).saturating_mul(step).max(floor)
}

/// The default link-down time: 8 s, 4 s with `--quick`.
pub fn default_down_for(quick: bool) -> Duration {
    Duration::from_secs(if quick { 4 } else { 8 })
}

/// How long smbcp may run: three times what the links need for the file plus two minutes
/// (the client's own request timeout is 60 s), so a stalled transfer is ended and reported.
pub fn default_deadline(size: u64, links: usize, rate_mbit: u32) -> Duration {
    let expected = size as f64 / payload_bytes_per_s(links.max(1), rate_mbit) + 10.0;
    Duration::from_secs_f64(expected * 3.0 + 120.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes_fit_the_timeline() {
        // 4 x 100 Mbit/s, 8 s down: about 20 s of transfer at full rate, under 1 GiB.
        assert_eq!(
            default_size_mib(4, 100, Duration::from_secs(8), false),
            1024
        );
        assert_eq!(default_size_mib(4, 100, Duration::from_secs(4), true), 512);
        // Faster links need a bigger file: 4 x 500 Mbit/s carry 237.5 MB/s.
        assert_eq!(
            default_size_mib(4, 500, Duration::from_secs(8), false),
            4608
        );
        assert!(default_deadline(1 << 30, 4, 100) > Duration::from_secs(120));
    }
}
