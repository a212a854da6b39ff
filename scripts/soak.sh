#!/usr/bin/env bash
# The soak (docs/RELIABILITY.md, "Soak"): builds the `soak` binary and runs it as
# root, keeping its log (the library's info lines and the soak's own) beside its results.
#
#   sudo bash scripts/soak.sh                        # one hour, random seed (printed)
#   sudo bash scripts/soak.sh --minutes 3            # the short mode
#   sudo bash scripts/soak.sh --seed 42 --out /tmp/soak-42
#   sudo bash scripts/soak.sh --mount --minutes 60   # the same through an smbfuse mount
#
# Every argument goes to the binary (`soak --help`). The results directory (default
# /tmp/soak-<seed>) gets samples.csv (written as the run goes), samples.json, events.csv,
# summary.json, summary.txt and soak.log. Exit status: 0 passed, 1 failed, 2 could not run. SIGINT/SIGTERM
# stop the run early and still take the testbed down.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${CARGO_TARGET_DIR:-target}
# --mount uses the smbfuse and smbctl built beside the soak.
cargo build --release -p smb3-benches --bin soak >&2
cargo build --release -p smbfuse -p smbcp --bins >&2

# The results directory is chosen here so the log can go into it; the seed too, so that both
# are known before the run starts.
args=("$@")
seed="" out=""
for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
        --seed) seed=${args[i + 1]-} ;;
        --seed=*) seed=${args[i]#--seed=} ;;
        --out) out=${args[i + 1]-} ;;
        --out=*) out=${args[i]#--out=} ;;
    esac
done
if [[ -z $seed ]]; then
    seed=$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')
    args+=(--seed "$seed")
fi
if [[ -z $out ]]; then
    out=/tmp/soak-$seed
    args+=(--out "$out")
fi
mkdir -p "$out"
echo "soak: seed $seed, results and log in $out" >&2
SMB_TEST_LOG=${SMB_TEST_LOG:-smb3_client=info} "$target/release/soak" "${args[@]}" 2>"$out/soak.log" \
    | tee "$out/summary.txt"
