//! The soak's short mode as a test: three minutes of verified uploads, downloads and listings
//! over four 100 Mbit/s links that flap (down, dropped replies, resets, every connection
//! reset) with two smbd restarts, seed fixed. It fails on anything the soak checks (an
//! operation that failed or lost a byte, an open lost, a task, descriptor or heap left behind
//! at rest, a handle still open at the server). Needs root and the testbed, like the e2e
//! tests; `scripts/soak.sh` runs the same for an hour or more (docs/RELIABILITY.md).

#![cfg(target_os = "linux")]

use std::time::Duration;

use smb3_benches::soak::{self, checks, heap::Counting, Settings};

/// Counts the heap, so the at-rest check covers it.
#[global_allocator]
static HEAP: Counting = Counting;

/// Its faults are known to cover every kind (see `events.csv` of a run).
const SEED: u64 = 4242;

#[test]
fn a_three_minute_soak_with_faults_loses_nothing_and_leaks_nothing() {
    let out = std::env::temp_dir().join(format!("short-soak-{}", std::process::id()));
    let settings = Settings {
        duration: Duration::from_secs(180),
        seed: SEED,
        links: 4,
        rate_mbit: 100,
        uploaders: 3,
        downloaders: 3,
        out_dir: out.clone(),
        sample_every: Duration::from_secs(10),
        mount: None,
    };
    let outcome = soak::run(&settings).unwrap_or_else(|e| panic!("the soak could not run: {e}"));
    let reasons = checks::judge(&outcome);
    if let Err(e) = checks::write_files(&outcome, &reasons) {
        eprintln!("short soak: {e}");
    }
    let summary = checks::summary_text(&outcome, &reasons);
    eprintln!("{summary}");
    assert!(
        reasons.is_empty(),
        "the short soak failed (samples and events in {}):\n{summary}",
        out.display()
    );
    let _ = std::fs::remove_dir_all(&out);
}
