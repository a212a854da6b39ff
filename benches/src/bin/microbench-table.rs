//! `microbench-table`: turns the results criterion left under `<target>/criterion/` into the
//! Markdown tables of docs/PERFORMANCE.md, "Micro-benchmarks" (run by `scripts/microbench.sh`).
//!
//! Criterion writes, per benchmark, `benchmark.json` (group, function, parameter, throughput)
//! and `new/estimates.json` (the statistics, in nanoseconds). One table per group: a row per
//! function, a column per parameter (the message size), each cell the median time per
//! operation and, where the bench declared a throughput, the rate it means.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::Value;
use smb3_benches::doc::write_section_under;
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
    parameter: Option<String>,
    median_ns: f64,
    throughput: Option<(String, f64)>,
}

fn main() {
    let args = Args::parse();
    let mut found = Vec::new();
    collect(&args.criterion_dir, &mut found);
    if found.is_empty() {
        eprintln!(
            "microbench-table: no criterion results under {}",
            args.criterion_dir.display()
        );
        std::process::exit(1);
    }
    // Groups in name order; rows in the order the benches declared is lost on disk, so
    // functions are sorted by name too, which keeps backends of one operation together.
    let mut groups: BTreeMap<String, Vec<Result>> = BTreeMap::new();
    for (group, r) in found {
        groups.entry(group).or_default().push(r);
    }
    let mut out = args.preamble.trim().to_string();
    for (group, results) in &groups {
        out.push_str(&format!("\n\n**{group}** (median per call"));
        if results.iter().any(|r| r.throughput.is_some()) {
            out.push_str(" · the rate it means: GB/s of payload, or M requests/s");
        }
        out.push_str(")\n\n");
        out.push_str(group_table(results).markdown().trim_end());
    }
    println!("{out}");
    if let Some(path) = args.write_doc {
        if let Err(e) = write_section_under(&path, "## Micro-benchmarks", "microbench", &out) {
            eprintln!("microbench-table: {e}");
            std::process::exit(1);
        }
    }
}

/// Every `benchmark.json` under `dir` whose `new/estimates.json` sits beside it. Criterion
/// also keeps a `report/` and a `base/` copy per benchmark; only `new/` is the last run.
fn collect(dir: &Path, out: &mut Vec<(String, Result)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.file_name().is_some_and(|n| n == "benchmark.json")
            && path.parent().is_some_and(|p| p.ends_with("new"))
        {
            if let Some(r) = read_result(&path) {
                out.push(r);
            }
        }
    }
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn read_result(benchmark_json: &Path) -> Option<(String, Result)> {
    let b = read_json(benchmark_json)?;
    let e = read_json(&benchmark_json.with_file_name("estimates.json"))?;
    let group = b["group_id"].as_str()?.to_string();
    let function = b["function_id"].as_str().unwrap_or("").to_string();
    let parameter = b["value_str"].as_str().map(str::to_string);
    let median_ns = e["median"]["point_estimate"].as_f64()?;
    let throughput = b["throughput"].as_object().and_then(|t| {
        let (kind, n) = t.iter().next()?;
        Some((kind.clone(), n.as_f64()?))
    });
    let r = Result {
        function,
        parameter,
        median_ns,
        throughput,
    };
    Some((group, r))
}

fn group_table(results: &[Result]) -> Table {
    let mut params: Vec<&str> = results
        .iter()
        .filter_map(|r| r.parameter.as_deref())
        .collect();
    // Sizes are numbers of bytes: sort them as numbers, not as text.
    params.sort_by_key(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_string()));
    params.dedup();
    let mut functions: Vec<&str> = results.iter().map(|r| r.function.as_str()).collect();
    functions.sort();
    functions.dedup();

    if params.is_empty() {
        // A rate column only where some case declared a throughput.
        let with_rate = results.iter().any(|r| r.throughput.is_some());
        let mut t = if with_rate {
            Table::new(&["case", ">time", ">rate"])
        } else {
            Table::new(&["case", ">time"])
        };
        let mut sorted: Vec<&Result> = results.iter().collect();
        sorted.sort_by(|a, b| a.function.cmp(&b.function));
        for r in sorted {
            t.row(vec![r.function.clone(), time(r.median_ns), rate(r)]);
        }
        return t;
    }
    // A group can mix cases run per size with cases that have no size (a READ request is
    // the same whatever it asks for): those get a column of their own.
    let mut columns: Vec<Option<&str>> = Vec::new();
    if results.iter().any(|r| r.parameter.is_none()) {
        columns.push(None);
    }
    columns.extend(params.iter().map(|p| Some(*p)));
    let headers: Vec<String> = std::iter::once("case".to_string())
        .chain(columns.iter().map(|c| match c {
            None => ">any size".to_string(),
            Some(p) => format!(">{}", size_name(p)),
        }))
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&headers);
    for f in functions {
        let mut row = vec![f.to_string()];
        for c in &columns {
            let cell = results
                .iter()
                .find(|r| r.function == f && r.parameter.as_deref() == *c)
                .map(|r| match rate(r) {
                    s if s.is_empty() => time(r.median_ns),
                    s => format!("{} · {s}", time(r.median_ns)),
                })
                .unwrap_or_default();
            row.push(cell);
        }
        t.row(row);
    }
    t
}

fn time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
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
