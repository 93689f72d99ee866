#!/usr/bin/env bash
# make bench, part c: `pushreporter run --once` over generated accounts to a loopback nginx,
# beside `curl --parallel --parallel-max 64 -K` over the same URLs, in the same run.
# Sourced by bench/run.sh after the build: uses BIN, OUT, RUNS, measure, mb, say, die.
#
#   BENCH_SEND_ACCOUNTS=10000   accounts (= requests) in the run --once configuration

SEND_ACCOUNTS=${BENCH_SEND_ACCOUNTS:-10000}
SEND_DIR=$OUT/send
rm -rf "$SEND_DIR"
mkdir -p "$SEND_DIR/nginx/logs" "$SEND_DIR/nginx/tmp" "$SEND_DIR/state"

if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
    say "   installing nginx-light (apt-get) for the loopback server"
    $( [ "$(id -u)" = 0 ] || echo sudo ) env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$SEND_DIR/apt.log" 2>&1 || true
    $( [ "$(id -u)" = 0 ] || echo sudo ) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nginx-light \
        >>"$SEND_DIR/apt.log" 2>&1 || die "cannot install nginx-light (log: $SEND_DIR/apt.log)"
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

# A free port on 127.0.0.1, chosen by the kernel.
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
NGINX_DIR=$(cd "$SEND_DIR/nginx" && pwd)
cat >"$NGINX_DIR/nginx.conf" <<CONF
daemon on;
worker_processes 1;
pid $NGINX_DIR/nginx.pid;
error_log $NGINX_DIR/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $NGINX_DIR/tmp/body;
    proxy_temp_path $NGINX_DIR/tmp/proxy;
    fastcgi_temp_path $NGINX_DIR/tmp/fastcgi;
    uwsgi_temp_path $NGINX_DIR/tmp/uwsgi;
    scgi_temp_path $NGINX_DIR/tmp/scgi;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:$PORT;
        location / { return 204; }
    }
}
CONF
"$NGINX" -p "$NGINX_DIR" -c "$NGINX_DIR/nginx.conf" -e "$NGINX_DIR/logs/error.log" \
    || die "nginx did not start (log: $NGINX_DIR/logs/error.log)"
stop_nginx() { [ -f "$NGINX_DIR/nginx.pid" ] && kill "$(cat "$NGINX_DIR/nginx.pid")" 2>/dev/null || true; }
trap stop_nginx EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done

python3 bench/generate_send.py "$SEND_DIR" "$SEND_ACCOUNTS" "http://127.0.0.1:$PORT" \
    || die "bench/generate_send.py failed"
say "   nginx on 127.0.0.1:$PORT; $SEND_ACCOUNTS accounts in $SEND_DIR/config.yaml, the same URLs in $SEND_DIR/curl.conf"

measure run_once "$BIN/pushreporter" run --once --deadline 120s --config "$SEND_DIR/config.yaml" --state-dir "$SEND_DIR/state"
R_WALL=$BEST_WALL R_CPU=$BEST_CPU R_RSS=$BEST_RSS
say "   pushreporter said: $(tail -1 "$OUT/run_once.out")"
measure curl_parallel curl --silent --fail --parallel --parallel-max 64 -K "$SEND_DIR/curl.conf"
C_WALL=$BEST_WALL C_CPU=$BEST_CPU C_RSS=$BEST_RSS
stop_nginx
trap - EXIT

printf '   %-32s %7.2f s   CPU %6.2f s   peak RSS %s\n' "run --once, $((SEND_ACCOUNTS / 1000))k reports:" "$R_WALL" "$R_CPU" "$(mb "$R_RSS")"
printf '   %-32s %7.2f s   CPU %6.2f s   peak RSS %s\n' "curl --parallel-max 64 -K:" "$C_WALL" "$C_CPU" "$(mb "$C_RSS")"
ratio=$(awk -v r="$R_WALL" -v c="$C_WALL" 'BEGIN { printf "%.2f", r / c }')
verdict=$(awk -v r="$R_WALL" -v c="$C_WALL" 'BEGIN { print (r <= c / 2) ? "ok" : "OVER GOAL" }')
say "   run --once: $R_WALL s   curl --parallel: $C_WALL s   ratio ${ratio}x (goal <= 0.5x)   $verdict"
