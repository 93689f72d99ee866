#!/usr/bin/env bash
# make bench: release-mode figures printed beside their references and goals (issue 20), written
# to docs/performance.md with a picture (bench/report.py). See bench/README.md.
#
#   BENCH_PARTS=abcdefg             which parts to run: a validate, b render, c run --once vs curl,
#                                   d the long-running agent, e preview, f every backend's batching,
#                                   g 1, 2 and 3 agents on PostgreSQL beside one on SQLite (issue 19)
#   BENCH_RUNS=3                    timed runs of each command (the median counts)
#   BENCH_VALIDATE_SIZES="1000 10000 100000 1000000"   accounts for part a
#   BENCH_RUNS_1M=1                 runs at a million accounts or more (each takes seconds)
#   BENCH_RENDER_SECONDS=2          length of the render loop (part b)
#   BENCH_SEND_SIZES="1000 10000 100000"               accounts for parts c and e
#   BENCH_PREVIEW_SIZES="1000 10000 100000"
#   BENCH_AGENT_ACCOUNTS=100000     accounts of the long-running agent (part d)
#   BENCH_IDLE_SECONDS=20           how long part d watches the idle agent
#   BENCH_RELOADS=10                unchanged reloads in part d
#   BENCH_BATCH_REQUESTS=1000       requests each batching backend sends (part f)
#   BENCH_SHARED_ACCOUNTS=20000     accounts the agents share in part g
#   BENCH_SHARED_LARGE=1000000      accounts three long-running agents share in part g (0: none)
#   BENCH_SHAPES="plain rich"       account shapes of parts c and d (rich: two tokens, both app ids,
#                                   a longer URL, a removal URL)
#   BENCH_REPORT=1                  0: do not rewrite docs/performance.md
#
# Exit status: 0 when every figure was measured (a missed goal is printed, not an error);
# 1 when something could not be built or run, a command failed, a receiver did not see every
# request, rendering was wrong, the release binary links corelibs Foundation, or the agent did not
# exit 0 on SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
RENDER_SECONDS=${BENCH_RENDER_SECONDS:-2}
PARTS=${BENCH_PARTS:-abcdefg}
OUT=bench/out
SCRATCH=.build-bench
mkdir -p "$OUT"

say() { printf '%s\n' "$*"; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
bench_start=$EPOCHREALTIME

# ---- tools -------------------------------------------------------------------------------------
# The references and the receiver: Debian's curl and nginx-light, installed when missing.
source bench/tools.sh
install_bench_tools "$OUT" || die "cannot install curl and nginx-light (log: $OUT/apt.log)"

# ---- build -------------------------------------------------------------------------------------
say "== building (release, $SCRATCH)"
start=$EPOCHREALTIME
for product in pushreporter pushreporter-bench; do
    "$SWIFT" build -c release --static-swift-stdlib --scratch-path "$SCRATCH" --product "$product" >"$OUT/build-$product.log" 2>&1 \
        || { tail -30 "$OUT/build-$product.log" >&2; die "the release build of $product failed (log: $OUT/build-$product.log)"; }
done
BIN=$("$SWIFT" build -c release --static-swift-stdlib --scratch-path "$SCRATCH" --show-bin-path)
cc -O2 bench/yaml_events.c -lyaml -o "$OUT/yaml_events" || die "cannot compile bench/yaml_events.c (is libyaml-dev installed? make deps)"
say "   built in $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s"
# The shipped binary must not carry corelibs Foundation (its start-up code and ICU cost the idle
# agent megabytes; see "What keeps the idle agent small" in bench/README.md).
if [ "$(nm "$BIN/pushreporter" | grep -c __CFInitialize)" != 0 ]; then
    die "the release binary links corelibs Foundation (CoreFoundation's __CFInitialize is in it): a module imports Foundation"
fi
"$BIN/pushreporter" --version >/dev/null || die "the release binary does not start"

part() {
    local letter=$1 name=$2 title=$3
    [[ $PARTS == *$letter* ]] || return 0
    say
    say "== $letter) $title"
    local t0=$EPOCHREALTIME
    python3 bench/measure.py "$name" "$BIN" "$OUT" || die "part $letter ($name) failed"
    say "   ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s)"
}

part a validate "validate vs. the libyaml event parse (C), 1k to 1M accounts"
if [[ $PARTS == *b* ]]; then
    say
    say "== b) render throughput (pushreporter-bench, 1 thread, ${RENDER_SECONDS} s, ${BENCH_RUNS:-3} runs)"
    # The best of the runs counts: another build on the machine only ever slows a run down.
    rates=()
    for ((run = 1; run <= ${BENCH_RUNS:-3}; run++)); do
        line=$("$BIN/pushreporter-bench" "$RENDER_SECONDS") || die "pushreporter-bench failed"
        say "   $line"
        rates+=("$(sed -E 's/^[^:]*: ([0-9,]+)\/s.*/\1/; s/,//g' <<<"$line")")
    done
    python3 - "$OUT" "${rates[@]}" <<'PY'
import statistics, sys
sys.path.insert(0, "bench")
from measure import Results
rates = [int(rate) for rate in sys.argv[2:]]
Results(sys.argv[1]).figure("render", per_second=max(rates), median=int(statistics.median(rates)), runs=rates)
print(f"   best {max(rates):,}/s, median {int(statistics.median(rates)):,}/s   goal >= 1,000,000/s: {'ok' if max(rates) >= 1_000_000 else 'MISSED'}")
PY
fi
part c send "run --once vs. curl --parallel --parallel-max 64, one loopback nginx"
part d agent "the long-running agent: start-up, idle, reloads, a changed account"
part e preview "preview --format json: time and memory against accounts"
part f batching "every backend's batching on one loopback nginx: requests per second"
if [[ $PARTS == *g* ]]; then
    say
    say "== g) several agents on PostgreSQL beside one on SQLite: run --once, one loopback nginx"
    t0=$EPOCHREALTIME
    python3 bench/shared_state.py "$BIN" "$OUT" || die "part g (shared state) failed"
    say "   ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s)"
fi

elapsed=$(awk -v a="$bench_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
say
say "== make bench took $elapsed s"
if [[ $PARTS == *a*b*c*d*e*f*g* ]]; then
    # A whole run: docs/performance.md says how long make bench takes.
    python3 - "$OUT" "$elapsed" <<'PY'
import sys
sys.path.insert(0, "bench")
from measure import Results
results = Results(sys.argv[1])
results.data["bench_seconds"] = int(sys.argv[2])
results.save()
PY
fi
if [ "${BENCH_REPORT:-1}" = 1 ]; then
    python3 bench/report.py "$OUT/results.json" docs/performance.md docs/performance.svg \
        || die "bench/report.py failed"
    say "   wrote docs/performance.md and docs/performance.svg"
fi
