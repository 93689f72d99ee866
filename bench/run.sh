#!/usr/bin/env bash
# make bench: release-mode figures printed beside their references. See bench/README.md.
#
#   BENCH_ACCOUNTS=100000   accounts in the generated configuration
#   BENCH_RUNS=3            timed runs of each command (the best wall-clock time counts)
#   BENCH_RENDER_SECONDS=2  length of the render loop
#   BENCH_SEND_ACCOUNTS=10000 reports sent by run --once (part c)
#   BENCH_IDLE_SECONDS=60   how long part d watches the idle agent
#   BENCH_PARTS=abcd        which parts to run (a validate, b render, c run --once, d idle agent)
#
# Exit status: 0 when every figure was measured (a missed goal is printed, not an error);
# 1 when something could not be built or run, validate did not exit 0, rendering was wrong, the
# release binary links corelibs Foundation, or the agent did not exit 0 on SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
ACCOUNTS=${BENCH_ACCOUNTS:-100000}
RUNS=${BENCH_RUNS:-3}
RENDER_SECONDS=${BENCH_RENDER_SECONDS:-2}
PARTS=${BENCH_PARTS:-abcd}
OUT=bench/out
CONFIG=$OUT/config
SCRATCH=.build-bench
mkdir -p "$OUT"

say() { printf '%s\n' "$*"; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }

# ---- build -------------------------------------------------------------------------------------
say "== building (release, $SCRATCH)"
start=$EPOCHREALTIME
for product in pushreporter pushreporter-bench pushreporter-receiver; do
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

# ---- timing ------------------------------------------------------------------------------------
# time_run NAME CMD...: runs CMD once (stdout and stderr to $OUT/NAME.out / .err) and sets RUN_WALL
# (s), RUN_CPU (user+sys s) and RUN_RSS (peak KB, or "").
if [ -x /usr/bin/time ]; then HAVE_TIME=1; else HAVE_TIME=0; fi
time_run() {
    local name=$1; shift
    local t0 t1 rc user sys
    t0=$EPOCHREALTIME
    if [ "$HAVE_TIME" = 1 ]; then
        /usr/bin/time -f '%U %S %M' -o "$OUT/$name.time" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" && rc=0 || rc=$?
        t1=$EPOCHREALTIME
        read -r user sys RUN_RSS <"$OUT/$name.time" || true
    else
        local TIMEFORMAT='%U %S'
        { time "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; } 2>"$OUT/$name.time" && rc=0 || rc=$?
        t1=$EPOCHREALTIME
        read -r user sys <"$OUT/$name.time" || true
        RUN_RSS=
    fi
    [ "$rc" -eq 0 ] || { cat "$OUT/$name.err" | tail -5 >&2; die "$name exited with status $rc (stderr: $OUT/$name.err)"; }
    RUN_CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
    RUN_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}

# keep_best PREFIX: sets PREFIX_WALL, PREFIX_CPU and PREFIX_RSS to the last run's (time_run) when it
# is the fastest so far (PREFIX_WALL empty: none yet).
keep_best() {
    local best="${1}_WALL"
    if [ -z "${!best}" ] || awk -v w="$RUN_WALL" -v b="${!best}" 'BEGIN { exit !(w < b) }'; then
        printf -v "${1}_WALL" '%s' "$RUN_WALL"
        printf -v "${1}_CPU" '%s' "$RUN_CPU"
        printf -v "${1}_RSS" '%s' "$RUN_RSS"
    fi
}

# measure NAME CMD...: runs CMD $RUNS times and sets BEST_WALL (s, best run), BEST_CPU (user+sys s
# of that run) and BEST_RSS (peak KB, or "").
measure() {
    local name=$1 i; shift
    BEST_WALL=; BEST_CPU=; BEST_RSS=
    for ((i = 1; i <= RUNS; i++)); do
        time_run "$name" "$@"
        keep_best BEST
    done
}
mb() { [ -n "$1" ] && awk -v k="$1" 'BEGIN { printf "%.0f MB", k / 1024 }' || printf 'n/a'; }

if [[ $PARTS == *a* ]]; then
# ---- config ------------------------------------------------------------------------------------
rm -rf "$CONFIG"
python3 bench/generate.py "$CONFIG" "$ACCOUNTS" || die "bench/generate.py failed"
files=("$CONFIG"/*.yaml)
say "   generated $ACCOUNTS accounts in ${#files[@]} files ($(du -ch "${files[@]}" | tail -1 | cut -f1)) in $CONFIG"

say
say "== a) validate vs. raw libyaml (best of $RUNS wall-clock runs each, taken in turns; CPU = user+sys of that run)"
# In turns, so that both commands see the same spells of a busy machine: run back to back, one
# could get a quiet minute and the other a noisy one.
V_WALL= Y_WALL= PAIR_RATIOS=()
for ((pair = 1; pair <= RUNS; pair++)); do
    time_run validate "$BIN/pushreporter" validate --config "$CONFIG"
    keep_best V
    pair_validate=$RUN_WALL
    time_run yaml_events "$OUT/yaml_events" "${files[@]}"
    keep_best Y
    PAIR_RATIOS+=("$(awk -v v="$pair_validate" -v y="$RUN_WALL" 'BEGIN { printf "%.3f", v / y }')")
done
say "   validate said: $(tail -1 "$OUT/validate.err")   (all of its stderr: $OUT/validate.err)"
say "   libyaml parsed: $(cat "$OUT/yaml_events.out")"
ratio=$(awk -v v="$V_WALL" -v y="$Y_WALL" 'BEGIN { printf "%.1f", v / y }')
median_ratio=$(printf '%s\n' "${PAIR_RATIOS[@]}" | sort -n | awk '{ r[NR] = $1 } END { printf "%.2f", NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2 }')
verdict=$(awk -v v="$V_WALL" -v y="$Y_WALL" 'BEGIN { print (v <= 2 * y) ? "ok" : "OVER GOAL" }')
printf '   %-32s %7.2f s   CPU %6.2f s   peak RSS %s\n' "validate $((ACCOUNTS / 1000))k accounts:" "$V_WALL" "$V_CPU" "$(mb "$V_RSS")"
printf '   %-32s %7.2f s   CPU %6.2f s   peak RSS %s\n' "libyaml events only:" "$Y_WALL" "$Y_CPU" "$(mb "$Y_RSS")"
say "   validate $((ACCOUNTS / 1000))k accounts: $V_WALL s   libyaml events only: $Y_WALL s   ratio ${ratio}x (goal <= 2x)   $verdict"
say "   (the ratio of each turn's two runs: median ${median_ratio}x, all: ${PAIR_RATIOS[*]})"

fi

if [[ $PARTS == *b* ]]; then
say
say "== b) render throughput (pushreporter-bench, 1 thread, ${RENDER_SECONDS} s)"
"$BIN/pushreporter-bench" "$RENDER_SECONDS" | sed 's/^/   /' || die "pushreporter-bench failed"
fi

if [[ $PARTS == *c* ]]; then
say
say "== c) run --once to a loopback nginx vs. curl --parallel (best of $RUNS wall-clock runs)"
# shellcheck source=bench/run_once.sh
source bench/run_once.sh
fi

if [[ $PARTS == *d* ]]; then
say
say "== d) the long-running agent: idle cost and time to READY=1"
# shellcheck source=bench/idle.sh
source bench/idle.sh
fi
