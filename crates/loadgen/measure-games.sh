#!/usr/bin/env bash
# Measures Games.PlayMove on the Redis backend with release builds: starts a private redis-server on a
# spare port (nothing kept on disk) and the validation service on loopback against it, runs
# `draughts-load-games` for each scenario, prints one line per run with the server's CPU per move, then
# stops both (by pid).
#
#   crates/loadgen/measure-games.sh
#   SCENARIOS="1000:2000 2000:3000" DURATION=20s crates/loadgen/measure-games.sh
#
# A scenario is GAMES:RATE (RATE moves/s in all, paced over the games as players who think between
# moves) or GAMES:0 (closed loop: each game moves again as soon as it is answered).
# Environment: CARGO_TARGET_DIR (default /tmp/target-load), PORT (50161), REDIS_PORT (56391), SCENARIOS
# ("64:0 1000:2000 2000:3000"), DURATION (15s), WARMUP (5s), DRAUGHTS_DATABASE_URL (default a SQLite file
# in OUT; finished games are archived there), OUT (default a new temporary directory).
set -euo pipefail

cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-load}
PORT=${PORT:-50161}
REDIS_PORT=${REDIS_PORT:-56391}
SCENARIOS=${SCENARIOS:-64:0 1000:2000 2000:3000}
DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-5s}
OUT=${OUT:-$(mktemp -d /tmp/draughts-load-games.XXXXXX)}
mkdir -p "$OUT"
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install redis-server)"; exit 1; }

cargo build --release -p draughts-validation -p draughts-loadgen
BIN=$CARGO_TARGET_DIR/release

export DRAUGHTS_TOKEN_SECRET=${DRAUGHTS_TOKEN_SECRET:-load-measurement-only-secret-0123456789}
export DRAUGHTS_DATABASE_URL=${DRAUGHTS_DATABASE_URL:-sqlite://$OUT/games.sqlite3?mode=rwc}

echo "cores: $(nproc); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for scenario in $SCENARIOS; do
    games=${scenario%%:*}
    rate=${scenario##*:}
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
        --logfile "$OUT/redis.log" >/dev/null &
    REDIS_PID=$!
    (cd "$OUT" && exec "$BIN/draughts-validation" --metrics-listen off --listen "127.0.0.1:$PORT" --log warn \
        --redis-url "redis://127.0.0.1:$REDIS_PORT" \
        --rate-limit-guest-per-minute 1000000000 --rate-limit-anonymous-per-minute 1000000000) \
        >"$OUT/server.log" 2>&1 &
    SERVER_PID=$!
    trap 'kill "$SERVER_PID" "$REDIS_PID" 2>/dev/null || true' EXIT
    for _ in $(seq 100); do
        (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
        sleep 0.1
    done
    before=$(awk '{print $14 + $15}' "/proc/$SERVER_PID/stat")
    report="$OUT/games-$games-rate-$rate.json"
    "$BIN/draughts-load-games" --server "http://127.0.0.1:$PORT" --games "$games" --rate "$rate" \
        --duration "$DURATION" --warmup "$WARMUP" --json 2>"$OUT/games-$games-rate-$rate.log" >"$report"
    after=$(awk '{print $14 + $15}' "/proc/$SERVER_PID/stat")
    python3 - "$report" "$before" "$after" "$(getconf CLK_TCK)" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
path, before, after, hz, load = sys.argv[1:]
r = json.load(open(path))
# Server CPU over the whole run (set-up and warm-up included) per measured move: an upper bound.
cpu_us = (int(after) - int(before)) / int(hz) * 1e6 / max(r["moves"], 1)
rate = f"paced {r['target_rate']:.0f}/s" if r["target_rate"] else "closed loop"
print(f"{r['games']:5} games {rate:14} {r['moves_per_second']:7.0f} moves/s  p50 {r['p50_ms']:6.2f}  "
      f"p90 {r['p90_ms']:6.2f}  p99 {r['p99_ms']:7.2f}  max {r['max_ms']:7.2f} ms  errors {r['errors']}  "
      f"server cpu <= {cpu_us:4.0f} us/move  load {load}")
PY
    kill "$SERVER_PID" "$REDIS_PID" 2>/dev/null || true
    wait "$SERVER_PID" "$REDIS_PID" 2>/dev/null || true
done
echo "reports in $OUT"
