#!/usr/bin/env bash
# Does the SMB3 POSIX extensions' path cost the mount's data path anything? One Samba 4.22
# server (the testbed's Debian 13 root), its share [plain] (POSIX extensions on) and
# [noposix] (off), both mounted with smbfuse at once; fio reads a 1 GiB file and writes
# 1 GiB through each, 1 MiB blocks, one job, the two shares taking turns, REPS times. Prints
# fio's rate, fio's CPU (user, sys) and the mount daemon's CPU seconds for each run.
#
#   sudo bash scripts/bench-posix-mount.sh [--rate MBIT|--unshaped] [--reps N]
#
# Needs root, fio, and a release build (cargo build --release -p smbfuse). Everything it
# starts (testbed, mounts, daemons) is taken down when it ends, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

rate_args=(--rate 1000)
reps=3
while (($#)); do
    case $1 in
        --rate) rate_args=(--rate "${2:?}"); shift 2 ;;
        --unshaped) rate_args=(--unshaped); shift ;;
        --reps) reps=${2:?}; shift 2 ;;
        *) echo "usage: $0 [--rate MBIT|--unshaped] [--reps N]" >&2; exit 2 ;;
    esac
done
smbfuse=$PWD/target/release/smbfuse
[[ -x $smbfuse ]] || { echo "build smbfuse first: cargo build --release -p smbfuse" >&2; exit 1; }

work=$(mktemp -d /tmp/bench-posix-mount.XXXXXX)
testbed=$work/testbed
declare -A daemon=()
cleanup() {
    for share in "${!daemon[@]}"; do
        fusermount3 -u "$work/$share" 2>/dev/null || umount -l "$work/$share" 2>/dev/null || true
        kill "${daemon[$share]}" 2>/dev/null || true
        wait "${daemon[$share]}" 2>/dev/null || true
    done
    bash tests/testbed/testbed.sh down --dir "$testbed" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

bash tests/testbed/testbed.sh up --dir "$testbed" --links 1 "${rate_args[@]}" --owner none \
    --samba trixie >"$work/up" 2>&1 || { cat "$work/up" >&2; exit 1; }
value() { sed -n "s/^$1=//p" "$work/up"; }
ns=smbtb-$(value id)-cli
url_of() { echo "smb://SMBTB;$(value user)@$(value link1_server_addr)/$1"; }

for share in plain noposix; do
    head -c $((1 << 30)) /dev/urandom >"$testbed/shares/$share/big"
    chmod 0644 "$testbed/shares/$share/big"
    mkdir "$work/$share"
    SMB_PASSWORD=$(value password) nsenter --net="/run/netns/$ns" -- \
        "$smbfuse" "$(url_of "$share")" "$work/$share" -f </dev/null >"$work/$share.log" 2>&1 &
    daemon[$share]=$!
done
for _ in $(seq 60); do
    mountpoint -q "$work/plain" && mountpoint -q "$work/noposix" && break
    sleep 0.5
done
for share in plain noposix; do
    mountpoint -q "$work/$share" || { echo "$share not mounted" >&2; cat "$work/$share.log" >&2; exit 1; }
done

# CPU seconds (user + system) a process has used so far.
cpu_of() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }

echo "rep share direction MB/s fio_user_s fio_sys_s daemon_cpu_s"
for rep in $(seq "$reps"); do
    for share in plain noposix; do
        dir=$work/$share
        for direction in read write; do
            if [[ $direction == read ]]; then
                what=(--filename="$dir/big" --rw=read)
            else
                what=(--directory="$dir" --filename_format='fio-w.$jobnum' --rw=write --end_fsync=1)
            fi
            before=$(cpu_of "${daemon[$share]}")
            /usr/bin/time -f "%U %S" -o "$work/time" fio --name=seq --bs=1M --ioengine=psync \
                --numjobs=1 --size=1G --fallocate=none --output-format=json "${what[@]}" \
                >"$work/fio.json"
            after=$(cpu_of "${daemon[$share]}")
            rate=$(python3 -c '
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
side = job["read"] if job["read"]["io_bytes"] else job["write"]
print("%.1f" % (side["io_bytes"] / side["runtime"] / 1000))' "$work/fio.json")
            echo "$rep $share $direction $rate $(cat "$work/time") $(echo "$after - $before" | bc)"
            rm -f "$dir"/fio-w.*
        done
    done
done
