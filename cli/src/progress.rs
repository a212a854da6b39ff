//! The one progress bar of a run: bytes, rate, ETA and files done out of all, redrawn at
//! least twice a second even while no chunk completes (a stalled copy still shows its age).
//! Absent with `-q`, `--json`, or when stderr is not a terminal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{HumanDuration, ProgressBar, ProgressState, ProgressStyle};

/// Counters of a whole run, and the bar when there is one.
#[derive(Clone)]
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    moved: Arc<AtomicU64>,
    files_done: Arc<AtomicU64>,
    files_total: u64,
    /// Bytes of the current attempt at one file, taken back if it starts over.
    attempt: Arc<AtomicU64>,
}

impl Progress {
    /// A run of `files` files, `bytes` bytes in all; a bar only when `show`.
    pub(crate) fn new(show: bool, files: u64, bytes: u64) -> Progress {
        let bar = show.then(|| {
            let b = ProgressBar::new(bytes);
            // Decimal units, as the summary line's MB/s; no rate or ETA before the first
            // bytes (a rate of 0 B/s and an ETA of 0 s say something false).
            let style = ProgressStyle::with_template(
                "{decimal_bytes:>10}/{decimal_total_bytes} {wide_bar} {rate:>11} eta {left} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = match s.pos() {
                    0 => write!(w, "-"),
                    _ => write!(w, "{:.1} MB/s", s.per_sec() / 1e6),
                };
            })
            .with_key("left", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = match s.pos() {
                    0 => write!(w, "-"),
                    _ => write!(w, "{:#}", HumanDuration(s.eta())),
                };
            });
            b.set_style(style);
            b.enable_steady_tick(Duration::from_millis(500));
            b
        });
        let p = Progress {
            bar,
            moved: Arc::new(AtomicU64::new(0)),
            files_done: Arc::new(AtomicU64::new(0)),
            files_total: files,
            attempt: Arc::new(AtomicU64::new(0)),
        };
        p.show_files();
        p
    }

    fn show_files(&self) {
        if let Some(b) = &self.bar {
            let done = self.files_done.load(Ordering::Relaxed);
            b.set_message(format!("{done}/{} files", self.files_total));
        }
    }

    /// `n` more bytes copied.
    pub(crate) fn add(&self, n: u64) {
        self.moved.fetch_add(n, Ordering::Relaxed);
        self.attempt.fetch_add(n, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// `n` bytes of the total will not be copied (skipped, or already in a resumed partial
    /// file), so the rate and ETA count only what moves.
    pub(crate) fn not_copied(&self, n: u64) {
        if let Some(b) = &self.bar {
            let len = b.length().unwrap_or(0);
            b.set_length(len.saturating_sub(n));
        }
    }

    /// One more file is finished (copied, skipped or failed).
    pub(crate) fn file_done(&self) {
        self.files_done.fetch_add(1, Ordering::Relaxed);
        self.show_files();
    }

    /// Print a line on stderr without tearing the bar.
    pub(crate) fn say(&self, line: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| eprintln!("smbcp: {line}")),
            None => eprintln!("smbcp: {line}"),
        }
    }

    /// The same counters, with a fresh count for one file's attempt.
    pub(crate) fn for_file(&self) -> Progress {
        Progress {
            attempt: Arc::new(AtomicU64::new(0)),
            ..self.clone()
        }
    }

    /// Take back what the current attempt added: the file starts over.
    pub(crate) fn rewind(&self) {
        let n = self.attempt.swap(0, Ordering::Relaxed);
        self.moved.fetch_sub(n, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.dec(n);
        }
    }

    /// Remove the bar.
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
