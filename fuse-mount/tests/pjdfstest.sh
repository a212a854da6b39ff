#!/usr/bin/env bash
# Run pjdfstest (../shared/third_party/pjdfstest) against a mounted smbfuse directory and
# compare with the checked-in list of expected failures (a ratchet: a new failure fails the
# run, and so does an expected failure that passes now - take it off the list).
#
#   fuse-mount/tests/pjdfstest.sh MOUNTED_DIR [--write-list]
#
# Needs root, autoconf, automake, perl's prove. PJDFSTEST_SRC overrides the source folder,
# PJDFSTEST_LIST the expected-failure list (one per kind of share), PJDFSTEST_GROUPS (space
# separated) the groups run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mnt=${1:?usage: pjdfstest.sh MOUNTED_DIR [--write-list]}
write=${2:-}
src=${PJDFSTEST_SRC:-$here/../../../shared/third_party/pjdfstest}
list=${PJDFSTEST_LIST:-$here/pjdfstest-expected-failures.txt}
read -r -a groups <<<"${PJDFSTEST_GROUPS:-open truncate ftruncate mkdir rmdir unlink rename link utimensat posix_fallocate}"

build=$(mktemp -d /tmp/pjdfstest.XXXXXX)
# Best effort: paths longer than the server takes (PATH_MAX tests) cannot be removed.
trap 'rm -rf "$build"; [[ -z "${work:-}" ]] || rm -rf "$work" 2>/dev/null || true' EXIT
cp -r "$src"/. "$build"
(cd "$build" && autoreconf -ifs >/dev/null 2>&1 && ./configure >/dev/null && make pjdfstest >/dev/null)

work=$mnt/pjdfstest.$$
mkdir "$work"
cd "$work"
actual=$(mktemp)
for g in "${groups[@]}"; do
    # One line per failing test: "group/NN.t N".
    prove -v -r "$build/tests/$g" 2>/dev/null | awk -v g="$g" '
        / \.\. *$/ || /\.t \.\./ { f = $1; sub(/.*\/tests\//, "", f) }
        /^not ok [0-9]+/ { print f, $3 }' >>"$actual" || true
done
sort -u "$actual" -o "$actual"
total_fail=$(wc -l <"$actual")
echo "pjdfstest: $total_fail failing test(s) in ${groups[*]}"

# Tests marked unstable in the list (lines "~FILE: numbers  # why") pass in some runs and
# fail in others (timing of attribute caches against the server's own): neither way counts.
unstable=$(mktemp)
{ grep '^~' "$list" 2>/dev/null || true; } | sed 's/^~//; s/  #.*//' | while IFS=: read -r f nums; do
    for n in $nums; do echo "$f $n"; done
done | sort -u >"$unstable"
comm -23 "$actual" "$unstable" >"$actual.stable"
mv "$actual.stable" "$actual"

if [[ "$write" == --write-list ]]; then
    # The list's header (why the tests fail) and its unstable lines are kept; the other lines
    # are rewritten from this run.
    header=$(grep '^#' "$list" 2>/dev/null || echo "# pjdfstest tests expected to fail on smbfuse.")
    {
        echo "$header"
        grep '^~' "$list" 2>/dev/null || true
        awk '{ a[$1] = a[$1] " " $2 } END { for (f in a) print f ":" a[f] }' "$actual" | sort |
            while IFS= read -r line; do
                f=${line%%:*}
                desc=$(grep -m1 '^desc=' "$build/tests/$f" | sed 's/^desc=//; s/"//g')
                echo "$line  # $desc"
            done
    } >"$list"
    echo "wrote $list"
    exit 0
fi

expected=$(mktemp)
grep -v '^[#~]' "$list" | sed 's/  #.*//' | while IFS=: read -r f nums; do
    for n in $nums; do echo "$f $n"; done
done | sort -u >"$expected"
new=$(comm -13 "$expected" "$actual")
fixed=$(comm -23 "$expected" "$actual")
rm -f "$actual" "$expected" "$unstable"
status=0
if [[ -n "$new" ]]; then
    echo "new failures (not in $list):"; echo "$new"; status=1
fi
if [[ -n "$fixed" ]]; then
    echo "passing now, take them off $list:"; echo "$fixed"; status=1
fi
[[ $status -eq 0 ]] && echo "pjdfstest: as expected"
exit $status
