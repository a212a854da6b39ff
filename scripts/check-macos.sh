#!/usr/bin/env bash
# Type-checks and lints (clippy, -D warnings) the whole workspace for macOS
# (x86_64-apple-darwin) from Linux: every `cfg` branch taken on macOS is compiled, nothing is
# linked or run. Two native dependencies would
# need Apple's SDK for their build scripts, which this machine does not have, so both are
# stood in for, which is sound for checking only:
# - aws-lc-sys: its build script is overridden (Cargo's `links` override) with the cfg that
#   selects its pregenerated x86_64-apple-darwin bindings and the include path aws-lc-rs's
#   build script asks for; no C is compiled.
# - fuser: its build script asks pkg-config for macFUSE's `fuse.pc`; a stand-in .pc file
#   answers (the library it names is never linked).
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-apple-darwin
rustup target list --installed | grep -qx "$target" || rustup target add "$target"

links=$(sed -n 's/^links = "\(aws_lc_[0-9_]*\)"$/\1/p' \
    "$(cargo metadata --format-version 1 --filter-platform "$target" |
        python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"]=="aws-lc-sys"))')")
[[ -n $links ]] || { echo "aws-lc-sys's links name not found" >&2; exit 1; }

pc_dir=$(mktemp -d)
trap 'rm -rf "$pc_dir"' EXIT
printf 'Name: fuse\nDescription: stand-in for macFUSE, cargo check only\nVersion: 2.9.9\nLibs: -lfuse\nCflags:\n' \
    >"$pc_dir/fuse.pc"

PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_PATH="$pc_dir" PKG_CONFIG_LIBDIR="$pc_dir" \
    cargo clippy --target "$target" --workspace --all-targets \
    --config "target.$target.$links.rustc-cfg=[\"x86_64_apple_darwin\"]" \
    --config "target.$target.$links.include=\"/nonexistent\"" \
    -- -D warnings
