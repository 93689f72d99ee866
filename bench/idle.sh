#!/usr/bin/env bash
# make bench, part d: the long-running agent, idle with 1,000 delivered accounts (CPU time over
# BENCH_IDLE_SECONDS and RSS), and the time from exec to READY=1 with 1,000 and 100,000 accounts.
# Sourced by bench/run.sh after the build: uses BIN, OUT, say, die.
#
#   BENCH_IDLE_SECONDS=60   how long the idle agent is watched

IDLE_SECONDS=${BENCH_IDLE_SECONDS:-60}
IDLE_DIR=$OUT/idle
rm -rf "$IDLE_DIR"
mkdir -p "$IDLE_DIR"

"$BIN/pushreporter-receiver" --port-file "$IDLE_DIR/port" >"$IDLE_DIR/receiver.log" 2>&1 &
RECEIVER=$!
stop_receiver() { kill "$RECEIVER" 2>/dev/null || true; wait "$RECEIVER" 2>/dev/null || true; }
trap stop_receiver EXIT
for _ in $(seq 100); do [ -s "$IDLE_DIR/port" ] && break; sleep 0.1; done
[ -s "$IDLE_DIR/port" ] || die "the receiver did not start (log: $IDLE_DIR/receiver.log)"
BASE="http://127.0.0.1:$(cat "$IDLE_DIR/port")"

for count in 1000 100000; do
    mkdir -p "$IDLE_DIR/$count/state"
    python3 bench/generate_send.py "$IDLE_DIR/$count" "$count" "$BASE" || die "bench/generate_send.py failed"
done

say "   1,000 accounts reporting to a receiver on $BASE; watching the idle agent for $IDLE_SECONDS s"
line=$(python3 bench/idle.py "$BIN/pushreporter" "$IDLE_DIR/1000/config.yaml" "$IDLE_DIR/1000/state" 1000 "$IDLE_SECONDS") \
    || die "the idle measurement failed (agent log: $IDLE_DIR/1000/state/agent.err)"
eval "$line"
I_CPU=$idle_cpu_ms I_TICKS=$idle_cpu_ticks_ms I_RSS=$rss_kb I_PEAK=$peak_rss_kb I_ANON=$anon_kb I_FILE=$file_kb R1K=$ready_ms
[ "$exit" = 0 ] || die "the agent exited $exit on SIGTERM (log: $IDLE_DIR/1000/state/agent.err)"
line=$(python3 bench/idle.py "$BIN/pushreporter" "$IDLE_DIR/100000/config.yaml" "$IDLE_DIR/100000/state" 100000 0) \
    || die "the READY measurement failed (agent log: $IDLE_DIR/100000/state/agent.err)"
eval "$line"
R100K=$ready_ms
[ "$exit" = 0 ] || die "the agent exited $exit on SIGTERM (log: $IDLE_DIR/100000/state/agent.err)"
stop_receiver
trap - EXIT

printf '   %-32s %7s ms   (goal < 10 ms; %s ms in 10 ms ticks)   %s\n' "idle CPU over ${IDLE_SECONDS} s:" "$I_CPU" "$I_TICKS" \
    "$(awk -v c="$I_CPU" 'BEGIN { print (c < 10) ? "ok" : "OVER GOAL" }')"
printf '   %-32s %7s     (goal < 30 MB; peak %s)   %s\n' "idle RSS:" "$(mb "$I_RSS")" "$(mb "$I_PEAK")" \
    "$(awk -v r="$I_RSS" 'BEGIN { print (r < 30 * 1024) ? "ok" : "OVER GOAL" }')"
printf '   %-32s %7s     (code and libraries, clean, shared with the page cache)\n' "  of which file-backed:" "$(mb "$I_FILE")"
printf '   %-32s %7s     (heap, stacks, written data)\n' "  of which private:" "$(mb "$I_ANON")"
printf '   %-32s %7s ms\n' "exec to READY=1, 1k accounts:" "$R1K"
printf '   %-32s %7s ms\n' "exec to READY=1, 100k accounts:" "$R100K"
