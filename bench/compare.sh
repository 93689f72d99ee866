#!/usr/bin/env bash
# `make bench-compare BASE=<commit>`: builds BASE (in the worktree .build-bench-base-src, into
# .build-bench-base) and this checkout (into .build-bench), as they ship, and runs
# bench/compare.py on the two in turns.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
SWIFT=${SWIFT:-swift}
OUT=bench/out
mkdir -p "$OUT"
source bench/tools.sh
install_bench_tools "$OUT" || { echo "bench-compare: cannot install curl and nginx-light (log: $OUT/apt.log)" >&2; exit 1; }
commit=$(git rev-parse --verify "$base^{commit}") || { echo "bench-compare: no commit '$base'" >&2; exit 1; }
# One place for the base's sources, so that its build is incremental from one comparison to the next.
worktree=$PWD/.build-bench-base-src
if git worktree list --porcelain | grep -qx "worktree $worktree"; then
    git -C "$worktree" checkout --quiet --detach "$commit"
else
    rm -rf "$worktree"
    git worktree add --quiet --detach "$worktree" "$commit"
fi
echo "== building base $(git log -1 --format='%h %s' "$commit") (release, .build-bench-base)"
"$SWIFT" build -c release --static-swift-stdlib --package-path "$worktree" --scratch-path .build-bench-base --product pushreporter \
    >"$OUT/build-base.log" 2>&1 || { tail -30 "$OUT/build-base.log" >&2; echo "bench-compare: the base does not build" >&2; exit 1; }
echo "== building this checkout (release, .build-bench)"
"$SWIFT" build -c release --static-swift-stdlib --scratch-path .build-bench --product pushreporter >"$OUT/build-new.log" 2>&1 \
    || { tail -30 "$OUT/build-new.log" >&2; echo "bench-compare: this checkout does not build" >&2; exit 1; }
base_bin=$("$SWIFT" build -c release --static-swift-stdlib --package-path "$worktree" --scratch-path .build-bench-base --show-bin-path)
new_bin=$("$SWIFT" build -c release --static-swift-stdlib --scratch-path .build-bench --show-bin-path)
python3 bench/compare.py "$base_bin" "$new_bin" "$OUT"
