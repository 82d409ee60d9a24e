#!/usr/bin/env bash
# Measures 10,000 concurrent WatchGame streams of ONE game on one replica, with release builds: starts a
# private redis-server on a spare port (nothing kept on disk) and the validation service on loopback
# against it, runs `draughts-load-watch` (the streams over a few hundred HTTP/2 connections, then moves),
# prints its JSON report (Redis clients while every stream is open, the server's memory per watcher, the
# fan-out latency from PlayMove sent to each watcher's event), then stops both (by pid).
#
#   crates/loadgen/measure-watch.sh
#   WATCHERS=2000 CONNECTIONS=50 MOVES=10 crates/loadgen/measure-watch.sh
#
# Environment: CARGO_TARGET_DIR (default /tmp/target-load), PORT (50171), REDIS_PORT (56401), WATCHERS
# (10000), CONNECTIONS (200), MOVES (20), INTERVAL (500ms), OUT (default a new temporary directory).
set -euo pipefail

cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-load}
PORT=${PORT:-50171}
REDIS_PORT=${REDIS_PORT:-56401}
WATCHERS=${WATCHERS:-10000}
CONNECTIONS=${CONNECTIONS:-200}
MOVES=${MOVES:-20}
INTERVAL=${INTERVAL:-500ms}
OUT=${OUT:-$(mktemp -d /tmp/draughts-load-watch.XXXXXX)}
mkdir -p "$OUT"
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install redis-server)"; exit 1; }
# Sockets: the server holds CONNECTIONS client connections plus its Redis connections.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

cargo build --release -p draughts-validation -p draughts-loadgen
BIN=$CARGO_TARGET_DIR/release

export DRAUGHTS_TOKEN_SECRET=${DRAUGHTS_TOKEN_SECRET:-load-measurement-only-secret-0123456789}
export DRAUGHTS_DATABASE_URL=${DRAUGHTS_DATABASE_URL:-sqlite://$OUT/games.sqlite3?mode=rwc}

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --logfile "$OUT/redis.log" >/dev/null &
REDIS_PID=$!
(cd "$OUT" && exec "$BIN/draughts-validation" --metrics-listen off --listen "127.0.0.1:$PORT" --log warn \
    --redis-url "redis://127.0.0.1:$REDIS_PORT" \
    --max-watchers-per-caller "$WATCHERS" --max-watchers "$WATCHERS" \
    --rate-limit-guest-per-minute 1000000000 --rate-limit-anonymous-per-minute 1000000000) \
    >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" "$REDIS_PID" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done
echo "cores: $(nproc); load average before: $(cut -d' ' -f1-3 /proc/loadavg); open files: $(ulimit -n)"
before=$(awk '{print $14 + $15}' "/proc/$SERVER_PID/stat")
"$BIN/draughts-load-watch" --server "http://127.0.0.1:$PORT" --watchers "$WATCHERS" \
    --connections "$CONNECTIONS" --moves "$MOVES" --interval "$INTERVAL" \
    --server-pid "$SERVER_PID" --redis-port "$REDIS_PORT" --json 2>"$OUT/watch.log" | tee "$OUT/watch.json"
after=$(awk '{print $14 + $15}' "/proc/$SERVER_PID/stat")
echo "server cpu over the run: $(( (after - before) * 1000 / $(getconf CLK_TCK) )) ms"
kill "$SERVER_PID" "$REDIS_PID" 2>/dev/null || true
wait "$SERVER_PID" "$REDIS_PID" 2>/dev/null || true
echo "report in $OUT"
