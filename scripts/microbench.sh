#!/usr/bin/env bash
# Runs the criterion micro-benchmarks of the pure parts (codec, signing/sealing per size and
# backend, planner, credit window) and prints their tables; with --write-doc, also puts them
# in docs/PERFORMANCE.md under "Micro-benchmarks". No testbed, no root needed.
#
#   bash scripts/microbench.sh                 # criterion's settings from the bench files
#   bash scripts/microbench.sh --quick         # 0.2 s warm-up, 1 s per case, 10 samples
#   bash scripts/microbench.sh --quick --write-doc
#
# One bench alone, and criterion's own options (a filter, --save-baseline/--baseline to
# compare before and after a change):
#   cargo bench -p smb3-proto --bench codec
#   cargo bench -p smb3-proto --bench crypto -- 'seal/Aes128Gcm'
#   cargo bench -p smb3-client --bench multichannel -- --save-baseline before
#
# Results are read back from criterion's files under $CARGO_TARGET_DIR/criterion (default
# target/criterion) by the microbench-table binary.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=() write_doc=()
for arg in "$@"; do
    case $arg in
        --quick) quick=(--warm-up-time 0.2 --measurement-time 1 --sample-size 10) ;;
        --write-doc) write_doc=(--write-doc docs/PERFORMANCE.md) ;;
        *) echo "usage: $0 [--quick] [--write-doc]" >&2; exit 2 ;;
    esac
done

target=${CARGO_TARGET_DIR:-target}
benches=("smb3-proto codec" "smb3-proto crypto" "smb3-client multichannel")
for b in "${benches[@]}"; do
    read -r package bench <<<"$b"
    echo "==> cargo bench -p $package --bench $bench -- ${quick[*]}" >&2
    # `--` before criterion's options: everything after it goes to the bench binary.
    cargo bench -p "$package" --bench "$bench" -- "${quick[@]}"
done

cores=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)
preamble="\`bash scripts/microbench.sh ${*}\` on $(date -u +%Y-%m-%d), $cores cores, load average \
$load when the table was written; $(rustc --version | cut -d' ' -f1-2), release profile."
cargo run --release -q -p smb3-benches --bin microbench-table -- \
    "$target/criterion" --preamble "$preamble" "${write_doc[@]}"
