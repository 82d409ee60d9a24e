#!/usr/bin/env bash
# Measures draughts.v1.Rules/ValidateMove against the Diagnostics/Echo baseline on release builds: starts
# the validation service on loopback, runs `draughts-load --compare` for each request and concurrency
# level, prints one summary line per run and keeps every JSON report, then stops the server (by its pid).
#
#   crates/loadgen/measure.sh                       # 16 64 256, 20 s each
#   LEVELS="64" DURATION=30s crates/loadgen/measure.sh
#
# Environment: CARGO_TARGET_DIR (default /tmp/target-load), PORT (50151), LEVELS ("16 64 256"),
# DURATION (20s), WARMUP (2s), OUT (directory for the JSON reports, default a new temporary one).
set -euo pipefail

cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-load}
PORT=${PORT:-50151}
LEVELS=${LEVELS:-16 64 256}
DURATION=${DURATION:-20s}
WARMUP=${WARMUP:-2s}
OUT=${OUT:-$(mktemp -d /tmp/draughts-load.XXXXXX)}
mkdir -p "$OUT"

cargo build --release -p draughts-validation -p draughts-loadgen
BIN=$CARGO_TARGET_DIR/release

# The service's stateful parts (games, auth) need a token secret and backends, though Rules and Echo use
# neither: a throwaway secret, in-memory backends.
export DRAUGHTS_TOKEN_SECRET=${DRAUGHTS_TOKEN_SECRET:-load-measurement-only-secret-0123456789}
export DRAUGHTS_REDIS_URL=${DRAUGHTS_REDIS_URL:-memory://}
export DRAUGHTS_DATABASE_URL=${DRAUGHTS_DATABASE_URL:-sqlite::memory:}
# Rules sits behind the auth layer (anonymous calls limited per address): lift the limit for the load.
export DRAUGHTS_RATE_LIMIT_ANONYMOUS_PER_MINUTE=${DRAUGHTS_RATE_LIMIT_ANONYMOUS_PER_MINUTE:-4000000000}
# Run the server from $OUT: any file it creates (an embedded database) stays out of the work tree.
(cd "$OUT" && exec "$BIN/draughts-validation" --metrics-listen off --listen "127.0.0.1:$PORT" --log warn) \
    >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done

ENGLISH='{"rules":{"variant":"VARIANT_ENGLISH"},"move":{"text":"11-15"}}'
# International middle game, 16 men each, White to move: 28x17 (forced) takes the man on 22.
INTERNATIONAL='{"rules":{"variant":"VARIANT_INTERNATIONAL"},"fen":"W:W27,28,31,32,33,34,36,37,38,39,41,42,43,44,46,47:B3,6,7,8,9,11,12,13,14,16,18,19,22,23,24,25","move":{"text":"28x17"}}'

echo "cores: $(nproc); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for level in $LEVELS; do
    for name in english international; do
        if [ "$name" = english ]; then request=$ENGLISH; else request=$INTERNATIONAL; fi
        report="$OUT/$name-c$level.json"
        "$BIN/draughts-load" --server "http://127.0.0.1:$PORT" --method draughts.v1.Rules/ValidateMove \
            --request "$request" --concurrency "$level" --requests 100000000 --duration "$DURATION" \
            --warmup "$WARMUP" --server-pid "$SERVER_PID" --compare --json --quiet >"$report"
        python3 - "$report" "$name" "$level" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
path, name, level, load = sys.argv[1:]
out = json.load(open(path))
for run in out["runs"]:
    l = run["latency_ms"]
    print(f"{name:13} c={level:>3} {run['method'].split('/')[1]:12} {run['throughput_rps']:8.0f} req/s  "
          f"p50 {l['p50']:6.3f}  p99 {l['p99']:7.3f}  max {l['max']:8.3f} ms  "
          f"cpu us/req server {run.get('server_cpu_us_per_request', 0):5.1f} client {run.get('client_cpu_us_per_request', 0):5.1f}  "
          f"errors {sum(run['errors'].values())}")
c = out["comparison"]
print(f"{'':13} ratio: throughput x{c['throughput_ratio']:.3f}  p50 x{c['p50_ratio']:.3f}  p99 x{c['p99_ratio']:.3f}  "
      f"server cpu x{c.get('server_cpu_ratio', float('nan')):.3f}   (load average {load})")
PY
    done
done
echo "reports: $OUT"
