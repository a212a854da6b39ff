#!/usr/bin/env bash
# The main job, end to end on a local testbed: build smbcp, start a private Samba server in a
# network namespace behind a veth link, copy a 1 GiB file up and down with smbcp, check it
# byte for byte, print the throughput, and take everything down again.
#
#   sudo bash scripts/demo.sh [--rate MBIT] [--links N]
#
# Needs root (network namespaces) and a Rust toolchain (https://rustup.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"

rate_args=(--unshaped)
links=1
while (($#)); do
    case $1 in
        --rate) rate_args=(--rate "$2"); shift 2 ;;
        --links) links=$2; shift 2 ;;
        *) echo "usage: demo.sh [--rate MBIT] [--links N]" >&2; exit 2 ;;
    esac
done

[[ $(id -u) -eq 0 ]] || { echo "demo.sh needs root (network namespaces): sudo bash scripts/demo.sh" >&2; exit 1; }
command -v cargo >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs" >&2; exit 1; }
bash scripts/install-deps.sh

echo "==> building smbcp (release)"
cargo build --release -p smbcp
SMBCP=$PWD/target/release/smbcp

run=$(mktemp -d /tmp/smbdemo.XXXXXX)
data=$(mktemp -d /dev/shm/smbdemo.XXXXXX)
cleanup() {
    bash tests/testbed/testbed.sh down --dir "$run" >/dev/null 2>&1 || true
    rm -rf "$run" "$data"
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

echo "==> making a 1 GiB file of random data"
head -c 1073741824 /dev/urandom >"$data/big.bin"
want=$(sha256sum "$data/big.bin" | cut -d' ' -f1)

in_client() { bash tests/testbed/testbed.sh exec --dir "$run" -- "$@"; }

echo "==> upload:   smbcp $data/big.bin $url/big.bin"
in_client "$SMBCP" -q "$data/big.bin" "$url/big.bin"
echo "==> download: smbcp $url/big.bin $data/back.bin"
in_client "$SMBCP" -q "$url/big.bin" "$data/back.bin"

got=$(sha256sum "$data/back.bin" | cut -d' ' -f1)
on_server=$(sha256sum "$(get share_plain_path)/big.bin" | cut -d' ' -f1)
if [[ $got == "$want" && $on_server == "$want" ]]; then
    echo "==> sha256 matches on the server and after the round trip: $want"
else
    echo "==> MISMATCH: sent $want, server has $on_server, got back $got" >&2
    exit 1
fi
