#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder a server's bytes reach, on the stable toolchain.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Builds the libFuzzer targets in fuzz/ (libfuzzer-sys, instrumented with rustc's stable
# SanitizerCoverage flags: no nightly, no cargo-fuzz), seeds fuzz/corpus/ from the Samba
# captures (fuzz/seed.py), runs each target in turn, one process at a time, for the given time
# (default 60 s), and prints executions, coverage and speed per target. Stops with a non-zero
# status if a target crashed: the input is in fuzz/artifacts/TARGET/; once the bug is fixed,
# keep it in fuzz/regressions/TARGET/, where `cargo test` replays it.
#
# Environment: FUZZ_RUNS=N also stops a target after N executions; FUZZ_ARGS adds libFuzzer
# flags; FUZZ_TARGET_DIR is where the instrumented build goes (default target/fuzz).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
fuzz="$root/fuzz"
seconds="${1:-60}"
shift || true
export PATH="$HOME/.cargo/bin:$PATH"

host="$(rustc -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$root/target/fuzz}"
# SanitizerCoverage through stable codegen options: inline 8-bit counters and a PC table
# (what libFuzzer's `cov:`/`ft:` count), comparison tracing (so magic numbers and lengths are
# found), stack depth. Overflow checks and debug assertions on: an arithmetic overflow on
# hostile input is a bug even where release builds would wrap silently. `--target` keeps the
# flags off build scripts and proc macros, which are not linked with libFuzzer.
export RUSTFLAGS="-Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 -Cllvm-args=-sanitizer-coverage-stack-depth \
 -Cdebug-assertions -Coverflow-checks --cfg fuzzing"

echo "==> building the fuzz targets ($host)"
cargo build --manifest-path "$fuzz/Cargo.toml" --release --target "$host" --bins
bin="$CARGO_TARGET_DIR/$host/release"

if [[ $# -gt 0 ]]; then
    targets=("$@")
else
    mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' "$fuzz/Cargo.toml" | grep -v '^smb3-fuzz$')
fi

echo "==> seeding fuzz/corpus from the Samba captures"
python3 "$fuzz/seed.py" "$fuzz/corpus" >/dev/null

# A frame header announcing up to 16 MiB makes the client take a buffer that large before the
# bytes arrive (bounded: one frame per channel), and most fuzzed headers announce megabytes.
# glibc would serve those from its heap and zero them with memset, most of a run's time; a
# fixed mmap threshold gives them fresh zero pages from the kernel instead, of which only the
# few bytes present are touched.
export GLIBC_TUNABLES="${GLIBC_TUNABLES:-glibc.malloc.mmap_threshold=131072}"

summary=()
failed=()
for t in "${targets[@]}"; do
    corpus="$fuzz/corpus/$t"
    mkdir -p "$corpus" "$fuzz/artifacts/$t"
    extra=()
    [[ -d "$fuzz/regressions/$t" ]] && extra+=("$fuzz/regressions/$t")
    [[ -n "${FUZZ_RUNS:-}" ]] && extra=(-runs="$FUZZ_RUNS" "${extra[@]}")
    log="$fuzz/artifacts/$t/last-run.log"
    echo "==> $t: ${seconds}s"
    status=0
    # One process, one job: the machine is shared. A 10 s timeout per input and 1 GiB of RSS
    # bound time and memory per input; the reply dispatch target may allocate one 16 MiB frame.
    # shellcheck disable=SC2086
    "$bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 \
        -dict="$fuzz/smb2.dict" -artifact_prefix="$fuzz/artifacts/$t/" \
        -print_final_stats=1 ${FUZZ_ARGS:-} "$corpus" "${extra[@]}" >"$log" 2>&1 || status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    line=$(printf '%-20s %12s execs %6ss %9s/s  %s' "$t" "${execs:-?}" "${secs:-?}" "${rate:-?}" "$cov")
    if [[ $status -ne 0 ]]; then
        line="$line  CRASH (status $status, see $log)"
        failed+=("$t")
    fi
    echo "$line"
    summary+=("$line")
done

echo
echo "==> summary (target, executions, seconds, executions per second, libFuzzer coverage)"
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "crashed: ${failed[*]}" >&2
    exit 1
fi
