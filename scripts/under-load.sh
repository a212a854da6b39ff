#!/usr/bin/env bash
# Runs a command N times in a row while both CPUs are kept busy, and counts the failures: how
# the tests are checked for the busy machine CI may be (issue: a failover test that failed
# only when a build ran beside it).
#
#   sudo bash scripts/under-load.sh 50 -- cargo test --release -p smb3-tests --test failover \
#       -- an_upload_survives_every_channel_cut_at_once
#   sudo bash scripts/under-load.sh 5 -- cargo test --release -p smb3-tests
#
# The load is one busy loop per CPU at nice 10 (the tests still get the CPUs they ask for,
# only later, as beside a build). Each run's output goes to LOGDIR (default
# /tmp/under-load.XXXX); the last line is "N passed, N failed". Exit status 1 if any failed.
set -euo pipefail

usage() { echo "usage: $0 RUNS -- COMMAND [ARGS...]" >&2; exit 2; }
(($# >= 3)) || usage
runs=$1
[[ $runs =~ ^[0-9]+$ ]] && ((runs > 0)) || usage
shift
[[ $1 == -- ]] || usage
shift

logdir=${LOGDIR:-$(mktemp -d /tmp/under-load.XXXX)}
mkdir -p "$logdir"
spinners=()
stop_load() {
    local pid
    for pid in "${spinners[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${spinners[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    spinners=()
}
trap stop_load EXIT
trap "exit 130" INT TERM


for ((c = 0; c < $(nproc); c++)); do
    nice -n 10 bash -c 'while :; do :; done' &
    spinners+=($!)
done
echo "load: ${#spinners[@]} busy loop(s) at nice 10 (pids ${spinners[*]}); logs in $logdir"

passed=0 failed=0
for ((i = 1; i <= runs; i++)); do
    started=$SECONDS
    if "$@" >"$logdir/run-$i.log" 2>&1; then
        passed=$((passed + 1))
        echo "run $i: ok ($((SECONDS - started)) s)"
    else
        failed=$((failed + 1))
        echo "run $i: FAILED ($((SECONDS - started)) s), log $logdir/run-$i.log"
        grep -E "^test .* FAILED|panicked at" "$logdir/run-$i.log" | head -5 || true
    fi
done
stop_load
echo "$passed passed, $failed failed"
((failed == 0))
