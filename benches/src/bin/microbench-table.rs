//! `microbench-table`: turns what criterion left under `<target>/criterion/` into the Markdown
//! tables of docs/PERFORMANCE.md, "Micro-benchmarks" (run by `scripts/microbench.sh`).
//!
//! Criterion writes per benchmark `new/benchmark.json` (group, function, parameter,
//! throughput) and `new/estimates.json` (the statistics, in nanoseconds). A table per group: a
//! row per function, a column per parameter (the message size), each cell the median time per
//! call and, where the bench declared a throughput, the rate it means.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::Value;
use smb3_benches::doc::write_section;
use smb3_benches::table::Table;

#[derive(Parser)]
#[command(about = "Markdown tables from criterion's saved results")]
struct Args {
    /// Criterion's output directory (`$CARGO_TARGET_DIR/criterion`).
    criterion_dir: PathBuf,
    /// Text put above the tables (the command, the machine's state).
    #[arg(long, default_value = "")]
    preamble: String,
    /// Replace the `microbench` section of this Markdown file with the tables.
    #[arg(long)]
    write_doc: Option<PathBuf>,
}

/// One benchmark's saved result.
struct Result {
    function: String,
    /// The size it ran with, if any.
    parameter: Option<String>,
    median_ns: f64,
    /// What one call handles: `("Bytes", n)` or `("Elements", n)`.
    throughput: Option<(String, f64)>,
}

fn main() {
    let args = Args::parse();
    // Groups in name order; the order the benches declared is lost on disk, so functions are
    // sorted by name too, which keeps the backends of one operation together.
    let mut groups: BTreeMap<String, Vec<Result>> = BTreeMap::new();
    collect(&args.criterion_dir, &mut |group, r| {
        groups.entry(group).or_default().push(r)
    });
    if groups.is_empty() {
        eprintln!(
            "microbench-table: no criterion results under {}",
            args.criterion_dir.display()
        );
        std::process::exit(1);
    }
    let mut out = args.preamble.trim().to_string();
    for (group, results) in &mut groups {
        results.sort_by(|a, b| a.function.cmp(&b.function));
        let rates = match results.iter().any(|r| r.throughput.is_some()) {
            true => " · the rate it means: GB/s of payload, or M requests/s",
            false => "",
        };
        out.push_str(&format!("\n\n**{group}** (median per call{rates})\n\n"));
        out.push_str(table(results).markdown().trim_end());
    }
    println!("{out}");
    if let Some(path) = args.write_doc {
        if let Err(e) = write_section(&path, "microbench", Some("## Micro-benchmarks"), &out) {
            eprintln!("microbench-table: {e}");
            std::process::exit(1);
        }
    }
}

/// Every result under `dir`: its `benchmark.json` in a `new/` directory (criterion also keeps
/// `report/` and `base/` copies) with `estimates.json` beside it.
fn collect(dir: &Path, found: &mut dyn FnMut(String, Result)) {
    for path in std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
    {
        if path.is_dir() {
            collect(&path, found);
        } else if path.ends_with("new/benchmark.json") {
            let read =
                |p: &Path| serde_json::from_str::<Value>(&std::fs::read_to_string(p).ok()?).ok();
            let (Some(b), Some(e)) = (read(&path), read(&path.with_file_name("estimates.json")))
            else {
                continue;
            };
            let (Some(group), Some(median_ns)) = (
                b["group_id"].as_str(),
                e["median"]["point_estimate"].as_f64(),
            ) else {
                continue;
            };
            let throughput = b["throughput"].as_object().and_then(|t| t.iter().next());
            found(
                group.to_string(),
                Result {
                    function: b["function_id"].as_str().unwrap_or("").to_string(),
                    parameter: b["value_str"].as_str().map(str::to_string),
                    median_ns,
                    throughput: throughput.and_then(|(kind, n)| Some((kind.clone(), n.as_f64()?))),
                },
            );
        }
    }
}

/// A row per function, a column per parameter (sizes in numeric order), and a column of its
/// own for cases without one (a READ request is the same whatever it asks for).
fn table(results: &[Result]) -> Table {
    let mut columns: Vec<Option<&str>> = results.iter().map(|r| r.parameter.as_deref()).collect();
    columns.sort_by_key(|p| p.map(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_string())));
    columns.dedup();
    let mut functions: Vec<&str> = results.iter().map(|r| r.function.as_str()).collect();
    functions.dedup();
    if columns == [None] {
        let rate_column = results.iter().any(|r| r.throughput.is_some());
        let mut t = Table::new(if rate_column {
            "case | >time | >rate"
        } else {
            "case | >time"
        });
        for r in results {
            t.row(vec![r.function.clone(), time(r.median_ns), rate(r)]);
        }
        return t;
    }
    let headers = columns
        .iter()
        .map(|c| c.map_or(">any size".into(), |p| format!(">{}", size_name(p))));
    let mut t = Table::new(
        &std::iter::once("case".to_string())
            .chain(headers)
            .collect::<Vec<_>>()
            .join("|"),
    );
    for f in functions {
        let cell = |c: &Option<&str>| {
            let r = results
                .iter()
                .find(|r| r.function == f && r.parameter.as_deref() == *c);
            r.map_or(String::new(), |r| match rate(r) {
                s if s.is_empty() => time(r.median_ns),
                s => format!("{} · {s}", time(r.median_ns)),
            })
        };
        t.row(
            std::iter::once(f.to_string())
                .chain(columns.iter().map(cell))
                .collect(),
        );
    }
    t
}

fn time(ns: f64) -> String {
    match ns {
        ns if ns < 1e3 => format!("{ns:.1} ns"),
        ns if ns < 1e6 => format!("{:.2} µs", ns / 1e3),
        ns if ns < 1e9 => format!("{:.2} ms", ns / 1e6),
        ns => format!("{:.2} s", ns / 1e9),
    }
}

/// Bytes become GB/s (decimal, as the rest of docs/PERFORMANCE.md), elements M/s.
fn rate(r: &Result) -> String {
    let Some((kind, n)) = &r.throughput else {
        return String::new();
    };
    let per_second = n / (r.median_ns / 1e9);
    match kind.as_str() {
        "Bytes" | "BytesDecimal" => format!("{:.2} GB/s", per_second / 1e9),
        _ => format!("{:.1} M/s", per_second / 1e6),
    }
}

fn size_name(p: &str) -> String {
    match p.parse::<u64>() {
        Ok(n) if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        Ok(n) if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        Ok(n) => format!("{n} B"),
        Err(_) => p.to_string(),
    }
}
