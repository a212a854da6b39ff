#!/usr/bin/env bash
# The main job, end to end on a local testbed: a private Samba server in a network namespace
# behind four 1 Gbit/s links (each a NIC pair, shaped with tbf). smbcp copies a 1 GiB file up
# and down over every link at once (multichannel), smbclient does the same over its one
# connection, raw TCP over all four links is the yardstick; then smbfuse mounts the share
# and the file is read through the mount. Every copy is checked byte for byte (sha256), and
# everything is taken down again.
#
#   sudo bash scripts/demo.sh [--links N] [--rate MBIT|--unshaped] [--size-mib N]
#
# Needs root (network namespaces) and a Rust toolchain (https://rustup.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"

links=4
rate_args=(--rate 1000)
size_mib=1024
while (($#)); do
    case $1 in
        --links) links=$2; shift 2 ;;
        --rate) rate_args=(--rate "$2"); shift 2 ;;
        --unshaped) rate_args=(--unshaped); shift ;;
        --size-mib) size_mib=$2; shift 2 ;;
        *) echo "usage: demo.sh [--links N] [--rate MBIT|--unshaped] [--size-mib N]" >&2; exit 2 ;;
    esac
done

[[ $(id -u) -eq 0 ]] || { echo "demo.sh needs root (network namespaces): sudo bash scripts/demo.sh" >&2; exit 1; }
command -v cargo >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs" >&2; exit 1; }
bash scripts/install-deps.sh

echo "==> building smbcp and smbfuse (release)"
cargo build --release -p smbcp -p smbfuse
SMBCP=$PWD/target/release/smbcp
SMBFUSE=$PWD/target/release/smbfuse

run=$(mktemp -d /tmp/smbdemo.XXXXXX)
data=$(mktemp -d /dev/shm/smbdemo.XXXXXX)
mnt=$(mktemp -d /tmp/smbdemo-mnt.XXXXXX)
iperf_pids=()
cleanup() {
    mountpoint -q "$mnt" && umount "$mnt" 2>/dev/null
    for p in "${iperf_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    bash tests/testbed/testbed.sh down --dir "$run" >/dev/null 2>&1 || true
    rm -rf "$run" "$data"
    rmdir "$mnt" 2>/dev/null || true
}
trap cleanup EXIT

echo "==> starting the testbed ($links link(s), ${rate_args[*]})"
bash tests/testbed/testbed.sh up --dir "$run" --links "$links" "${rate_args[@]}" --owner $$ >"$run/env"
get() { sed -n "s/^$1=//p" "$run/env"; }
server=$(get link1_server_addr)
user=$(get user)
domain=$(get domain)
export SMB_PASSWORD
SMB_PASSWORD=$(get password)
url="smb://$domain;$user@$server/plain"
share_dir=$(get share_plain_path)
in_client() { bash tests/testbed/testbed.sh exec --dir "$run" -- "$@"; }
in_server() { bash tests/testbed/testbed.sh exec --dir "$run" --server -- "$@"; }

echo "==> making a $size_mib MiB file of random data"
head -c $((size_mib << 20)) /dev/urandom >"$data/big.bin"
want=$(sha256sum "$data/big.bin" | cut -d' ' -f1)
bytes=$((size_mib << 20))
check() { # what, file
    local got
    got=$(sha256sum "$2" | cut -d' ' -f1)
    [[ $got == "$want" ]] || { echo "==> MISMATCH: $1: sent $want, got $got" >&2; exit 1; }
}

# Raw TCP over every link at once: one iperf3 per link, each bound to its link's addresses.
raw_tcp() { # "" for upload (client to server), -R for download
    local k out sum=0 pids=()
    for k in $(seq "$links"); do
        in_client iperf3 -c "$(get "link${k}_server_addr")" -B "$(get "link${k}_client_addr")" \
            -p $((5200 + k)) -t 5 -J $1 >"$run/iperf$k.json" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    for k in $(seq "$links"); do
        out=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"])' "$run/iperf$k.json")
        sum=$(python3 -c "print($sum + $out)")
    done
    python3 -c "print(round($sum / 8e6, 1))"
}
echo "==> raw TCP over the $links link(s) (iperf3, 5 s each way)"
for k in $(seq "$links"); do
    in_server iperf3 -s -p $((5200 + k)) -B "$(get "link${k}_server_addr")" >/dev/null 2>&1 &
    iperf_pids+=($!)
done
sleep 1
tcp_up=$(raw_tcp "")
tcp_down=$(raw_tcp -R)

mbs() { python3 -c "print(round($bytes / $1 / 1e6, 1))"; }
now() { date +%s.%N; }
elapsed() { python3 -c "print($(now) - $1)"; }

echo "==> upload:   smbcp $data/big.bin $url/big.bin"
in_client "$SMBCP" -q --json "$data/big.bin" "$url/big.bin" >"$run/up.json"
check "smbcp upload (on the server)" "$share_dir/big.bin"
echo "==> download: smbcp $url/big.bin $data/back.bin"
in_client "$SMBCP" -q --json "$url/big.bin" "$data/back.bin" >"$run/down.json"
check "smbcp download" "$data/back.bin"
smbcp_up=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["mb_per_s"], 1))' "$run/up.json")
smbcp_down=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["mb_per_s"], 1))' "$run/down.json")
rm -f "$data/back.bin"

echo "==> the same with smbclient (one connection)"
t=$(now)
PASSWD=$SMB_PASSWORD in_client smbclient "//$server/plain" -U "$domain/$user" -m SMB3 -c "put $data/big.bin sc.bin" >"$run/smbclient.log" 2>&1
smbclient_up=$(mbs "$(elapsed "$t")")
check "smbclient upload (on the server)" "$share_dir/sc.bin"
t=$(now)
PASSWD=$SMB_PASSWORD in_client smbclient "//$server/plain" -U "$domain/$user" -m SMB3 -c "get sc.bin $data/sc.bin" >>"$run/smbclient.log" 2>&1
smbclient_down=$(mbs "$(elapsed "$t")")
check "smbclient download" "$data/sc.bin"
rm -f "$data/sc.bin"

echo "==> mounting the share with smbfuse and reading the file through the mount"
# In the client's network namespace but the host's mount namespace (`ip netns exec` would
# give the mount a namespace of its own), so the mount shows here.
nsenter --net="/run/netns/$(get client_ns)" -- "$SMBFUSE" "$url" "$mnt"
t=$(now)
dd if="$mnt/big.bin" of="$data/via-mount.bin" bs=1M status=none
mount_read=$(mbs "$(elapsed "$t")")
check "read through the mount" "$data/via-mount.bin"
umount "$mnt"

share() { python3 -c "print(f'{100 * $1 / $2:.1f} %')"; }
echo
echo "Results ($size_mib MiB, $links link(s) ${rate_args[*]}; every copy checked with sha256):"
printf '  %-34s %10s %16s\n' "" "MB/s" "of raw TCP"
printf '  %-34s %10s %16s\n' "raw TCP, all links (iperf3) up" "$tcp_up" "100 %"
printf '  %-34s %10s %16s\n' "smbcp up (multichannel)" "$smbcp_up" "$(share "$smbcp_up" "$tcp_up")"
printf '  %-34s %10s %16s\n' "smbclient up (one connection)" "$smbclient_up" "$(share "$smbclient_up" "$tcp_up")"
printf '  %-34s %10s %16s\n' "raw TCP, all links (iperf3) down" "$tcp_down" "100 %"
printf '  %-34s %10s %16s\n' "smbcp down (multichannel)" "$smbcp_down" "$(share "$smbcp_down" "$tcp_down")"
printf '  %-34s %10s %16s\n' "smbclient down (one connection)" "$smbclient_down" "$(share "$smbclient_down" "$tcp_down")"
printf '  %-34s %10s %16s\n' "read through the smbfuse mount" "$mount_read" "$(share "$mount_read" "$tcp_down")"
echo
echo "Bytes each link carried in smbcp's download (channels per server address):"
python3 - "$run/down.json" <<'EOF'
import collections, json, sys
chans = json.load(open(sys.argv[1]))["channels"]
per_link = collections.Counter()
count = collections.Counter()
for c in chans:
    addr = c["server"].rsplit(":", 1)[0]
    per_link[addr] += c["bytes"]
    count[addr] += 1
total = sum(per_link.values()) or 1
for addr in sorted(per_link):
    print(f"  {addr:<16} {count[addr]} channel(s) {per_link[addr]:>14} bytes  {100 * per_link[addr] / total:5.1f} %")
EOF
