#!/usr/bin/env bash
# make fuzz: a bounded libFuzzer run of the template engine and the configuration loader, then a
# replay of every kept regression input. By hand, not in CI. See fuzz/README.md.
#
#   FUZZ_SECONDS=90     seconds of fuzzing per target
#   FUZZ_TARGETS="template loader http"   which targets to run
#   FUZZ_ARGS=...       extra libFuzzer flags (e.g. -jobs=2 -workers=2)
#
# Exit status: 0 when no new crash was found and every regression input passes; 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SECONDS_EACH=${FUZZ_SECONDS:-90}
TARGETS=${FUZZ_TARGETS:-template loader http}
SCRATCH=.build-fuzz
WORK=$SCRATCH/work
# Swift's own crash handler (the backtracer) trips over ASan and hides the real report; without
# it a Swift trap reaches libFuzzer's deadly-signal handler, which prints a symbolised stack.
export SWIFT_BACKTRACE=enable=no
# FuzzLoader's scratch directories go here, not in /tmp (a crashed process cannot remove its own).
# Only the fuzz binaries get this TMPDIR: SwiftPM keeps its cross-process lock files in TMPDIR.
FUZZ_TMP=$PWD/$WORK/tmp

# -parse-as-library: no top-level code, so libFuzzer's driver owns the process (see the
# FuzzTemplate_main / FuzzLoader_main entry points); -DFUZZING drops the replay-only @main.
# Release (-O keeps Swift's bounds and overflow checks) runs about three times faster than debug.
BUILD_FLAGS=(-c release --scratch-path "$SCRATCH"
             -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -parse-as-library
             -Xswiftc -enable-experimental-feature -Xswiftc Extern)

# The useful part of a libFuzzer log: the error, the broken promise or Swift trap, and the stack
# frames outside libFuzzer, the sanitizer runtime and libc.
report() {
    grep -E '^==[0-9]+==|^ +#[0-9]+ |^SUMMARY|Fatal error|broken promise|ALARM|out-of-memory' "$1" \
        | grep -vE 'compiler-rt/|/libc\.so|csu/|sysdeps/|_start \(|WARNING: ASan' | "$SWIFT" demangle --simplified
}

product() { case $1 in template) echo FuzzTemplate ;; loader) echo FuzzLoader ;; http) echo FuzzHTTP ;; esac; }
max_len() { case $1 in template) echo 1024 ;; loader) echo 4096 ;; http) echo 2048 ;; esac; }

rm -rf "$FUZZ_TMP" && mkdir -p "$FUZZ_TMP"
status=0
bin_dir=
for target in $TARGETS; do
    name=$(product "$target")
    [ -n "$name" ] || { echo "fuzz: unknown target '$target' (template, loader, http)" >&2; exit 2; }
    echo "== building $name (sanitize=fuzzer,address) into $SCRATCH"
    mkdir -p "$WORK"
    "$SWIFT" build "${BUILD_FLAGS[@]}" --product "$name" >"$WORK/build-$target.log" 2>&1
    rc=$?
    # ld.gold warns once per ASan symbol that it cannot export a local symbol: noise, hidden.
    grep -v "Cannot export local symbol" "$WORK/build-$target.log" \
        | grep -vE '^\[[0-9]+/[0-9]+\] (Compiling|Emitting|Wrapping|Write|Planning)' | tail -20
    [ "$rc" -eq 0 ] || { echo "fuzz: the build of $name failed (log: $WORK/build-$target.log)" >&2; exit 1; }
    bin_dir=$("$SWIFT" build "${BUILD_FLAGS[@]}" --show-bin-path)
done

summaries=()
for target in $TARGETS; do
    name=$(product "$target")
    corpus=$WORK/corpus/$target        # grows from run to run; git-ignored
    artifacts=$WORK/artifacts/$target
    log=$WORK/$target.log
    mkdir -p "$corpus" "$artifacts" "fuzz/regressions/$target"
    rm -f "$artifacts"/*
    echo
    echo "== fuzzing $name for ${SECONDS_EACH}s (corpus $corpus + seeds fuzz/corpus/$target, log $log)"
    # The first directory receives new inputs; the seed directory is only read.
    TMPDIR=$FUZZ_TMP "$bin_dir/$name" "$corpus" "fuzz/corpus/$target" \
        -dict="fuzz/$target.dict" -max_len="$(max_len "$target")" -max_total_time="$SECONDS_EACH" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" \
        ${FUZZ_ARGS:-} >"$log" 2>&1
    rc=$?

    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    corp=$(sed -nE 's/.* corp: ([0-9]+)\/.*/\1/p' <<<"$last")
    runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log")
    rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+)/\1/p' "$log")
    rss=$(sed -nE 's/^stat::peak_rss_mb: *([0-9]+)/\1/p' "$log")
    found=0
    for artifact in "$artifacts"/*; do
        [ -f "$artifact" ] || continue
        kind=${artifact##*/}; kind=${kind%%-*}                 # crash, timeout, oom, leak, slow-unit
        # Short, stable name; not crash-* (that pattern is git-ignored for stray artifacts).
        keep="fuzz/regressions/$target/${kind}_$(sha1sum "$artifact" | cut -c1-12)"
        cp "$artifact" "$keep"
        echo "   $kind: kept as $keep"
        found=$((found + 1))
    done
    if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
        status=1
        echo "   $name stopped with status $rc; the report (from the log):"
        report "$log" | head -30 | sed 's/^/   | /'
    fi
    summary=$(printf '%-13s %9s runs  %6s exec/s  cov %5s  features %6s  corpus %5s  peak RSS %5s MB  new findings %s' \
        "$name" "${runs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${rss:-?}" "$found")
    echo "   $summary"
    summaries+=("$summary")
done

echo
echo "== replaying fuzz/regressions (each input in its own process)"
for target in $TARGETS; do
    name=$(product "$target")
    total=0; failed=0
    for input in fuzz/regressions/"$target"/*; do
        [ -f "$input" ] || continue
        total=$((total + 1))
        if ! TMPDIR=$FUZZ_TMP "$bin_dir/$name" -timeout=10 -rss_limit_mb=2048 "$input" >"$WORK/replay.log" 2>&1; then
            failed=$((failed + 1))
            echo "   FAIL $input"
            report "$WORK/replay.log" | grep -vE '^ +#' | head -3 | sed 's/^/      /'
            report "$WORK/replay.log" | grep -E '^ +#' | grep -m1 -E '/Sources/' | sed 's/^ */      at /'
        fi
    done
    echo "   $name: $total regression input(s), $failed still failing"
    [ "$failed" -eq 0 ] || status=1
done

echo
echo "== summary"
for s in "${summaries[@]}"; do echo "   $s"; done
[ "$status" -eq 0 ] && echo "   no crash, hang or broken promise found" || echo "   FAILURES: see above"
exit "$status"
