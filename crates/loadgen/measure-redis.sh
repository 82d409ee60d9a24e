#!/usr/bin/env bash
# What one Redis primary does per move: runs the validation service against a private redis-server
# and then against a private 3-primary Redis Cluster (redis+cluster:// URL), drives games with
# `draughts-load-games`, and reads every node's INFO (commandstats, cpu, memory) before and after.
# Prints per move: Redis commands (inner commands of Lua scripts counted too; `evalsha` is the
# script call), Redis CPU (user + system, all nodes), the share of each primary, and the memory the
# games hold per game. Stops everything it started (by pid).
#
#   crates/loadgen/measure-redis.sh
#   GAMES=1000 RATE=1000 DURATION=20s PROFILE=release crates/loadgen/measure-redis.sh
#
# Environment: CARGO_TARGET_DIR (default /tmp/target-load), PROFILE (debug: the Redis figures do not
# depend on the service's build; release for the service's own speed), PORT (50171), GAMES (500),
# RATE (500 moves/s in all, paced; 0 = closed loop), DURATION (15s), WARMUP (3s, whole seconds),
# IDLE (5: seconds measured with no load first), MODES ("single cluster"), OUT.
set -euo pipefail

cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-load}
PROFILE=${PROFILE:-debug}
PORT=${PORT:-50171}
GAMES=${GAMES:-500}
RATE=${RATE:-500}
DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-3s}
MODES=${MODES:-single cluster}
IDLE=${IDLE:-5}
OUT=${OUT:-$(mktemp -d /tmp/draughts-measure-redis.XXXXXX)}
mkdir -p "$OUT"
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install redis-server)"; exit 1; }
command -v redis-cli >/dev/null || { echo "redis-cli is needed (apt-get install redis-tools)"; exit 1; }

if [ "$PROFILE" = release ]; then
    cargo build --release -p draughts-validation -p draughts-loadgen
else
    cargo build -p draughts-validation -p draughts-loadgen
fi
BIN=$CARGO_TARGET_DIR/$PROFILE

export DRAUGHTS_TOKEN_SECRET=${DRAUGHTS_TOKEN_SECRET:-load-measurement-only-secret-0123456789}
export DRAUGHTS_DATABASE_URL=${DRAUGHTS_DATABASE_URL:-sqlite://$OUT/games.sqlite3?mode=rwc}

# A free port P with P + 10000 free too (the cluster bus).
free_port() {
    python3 - <<'PY'
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    if p > 55000:
        s.close(); continue
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", p + 10000)); t.close(); s.close(); print(p); break
    except OSError:
        s.close(); t.close()
PY
}

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

start_redis() { # port dir [extra args]
    local port=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
        --logfile "$dir/redis.log" "$@" >/dev/null &
    PIDS+=($!)
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "redis-server on $port did not start"; exit 1
}

echo "cores: $(nproc); load average before: $(cut -d' ' -f1-3 /proc/loadavg); $GAMES games, $RATE moves/s paced, $DURATION"
for mode in $MODES; do
    ports=()
    if [ "$mode" = cluster ]; then
        for n in 1 2 3; do
            p=$(free_port)
            start_redis "$p" "$OUT/$mode-$p" --cluster-enabled yes --cluster-config-file nodes.conf
            ports+=("$p")
        done
        redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
            >"$OUT/cluster-create.log" 2>&1
        for _ in $(seq 200); do
            ok=1
            for p in "${ports[@]}"; do
                redis-cli -p "$p" cluster info | grep -q cluster_state:ok || ok=0
            done
            [ $ok = 1 ] && break
            sleep 0.05
        done
        hosts=$(printf '127.0.0.1:%s,' "${ports[@]}")
        url="redis+cluster://${hosts%,}/"
    else
        p=$(free_port)
        start_redis "$p" "$OUT/$mode-$p"
        ports+=("$p")
        url="redis://127.0.0.1:$p/"
    fi
    (cd "$OUT" && exec "$BIN/draughts-validation" --metrics-listen off --listen "127.0.0.1:$PORT" --log warn \
        --redis-url "$url" \
        --rate-limit-guest-per-minute 1000000000 --rate-limit-anonymous-per-minute 1000000000) \
        >"$OUT/server-$mode.log" 2>&1 &
    SERVER_PID=$!
    PIDS+=($SERVER_PID)
    for _ in $(seq 300); do
        (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
        sleep 0.1
    done
    # Idle first: what Redis does with the service connected and no game played (the timers' polls,
    # Redis's own cron), to tell the fixed cost from the cost per move.
    for p in "${ports[@]}"; do redis-cli -p "$p" info all >"$OUT/$mode-$p.idle0"; done
    sleep "$IDLE"
    for p in "${ports[@]}"; do redis-cli -p "$p" info all >"$OUT/$mode-$p.idle1"; done
    report="$OUT/games-$mode.json"
    "$BIN/draughts-load-games" --server "http://127.0.0.1:$PORT" --games "$GAMES" --rate "$RATE" \
        --duration "$DURATION" --warmup "$WARMUP" --json 2>"$OUT/games-$mode.log" >"$report" &
    LOAD_PID=$!
    # The counters are read when the generator starts counting moves (after its warm-up: the games'
    # set-up is not counted) and when it has stopped.
    sleep "${WARMUP%s}"
    for p in "${ports[@]}"; do redis-cli -p "$p" info all >"$OUT/$mode-$p.before"; done
    wait "$LOAD_PID"
    for p in "${ports[@]}"; do redis-cli -p "$p" info all >"$OUT/$mode-$p.after"; done
    python3 - "$mode" "$report" "$OUT" "$(cut -d' ' -f1 /proc/loadavg)" "$IDLE" "${ports[@]}" <<'PY'
import json, sys
mode, path, out, load, idle, *ports = sys.argv[1:]
r = json.load(open(path))
IGNORED = ("info", "ping", "cluster|info", "cluster|slots", "cluster|shards", "cluster|nodes",
           "command|docs", "command")

def info(file):
    calls, cpu, mem = {}, 0.0, 0
    for line in open(file):
        line = line.strip()
        if line.startswith("cmdstat_"):
            name, rest = line[len("cmdstat_"):].split(":", 1)
            if name not in IGNORED:
                calls[name] = int(rest.split(",")[0].split("=")[1])
        elif line.startswith(("used_cpu_user:", "used_cpu_sys:")):
            cpu += float(line.split(":")[1])
        elif line.startswith("used_memory:"):
            mem = int(line.split(":")[1])
    return calls, cpu, mem

def delta(first, second):
    total_calls, total_cpu, total_mem, shares, cpus = {}, 0.0, 0, [], []
    for p in ports:
        c0, cpu0, m0 = info(f"{out}/{mode}-{p}.{first}")
        c1, cpu1, m1 = info(f"{out}/{mode}-{p}.{second}")
        n = 0
        for name, calls in c1.items():
            d = calls - c0.get(name, 0)
            if d > 0:
                total_calls[name] = total_calls.get(name, 0) + d
                n += d
        shares.append(n)
        cpus.append(cpu1 - cpu0)
        total_cpu += cpu1 - cpu0
        total_mem += m1 - m0
    return total_calls, total_cpu, total_mem, shares, cpus

idle_calls, idle_cpu, _, _, _ = delta("idle0", "idle1")
idle_s = float(idle)
# Everything Redis did while the moves were counted (new games every 80 plies, archiving, the
# timers' polls included) per move counted; "marginal" takes off the idle rate over the same time.
moves = max(r["moves"], 1)
calls, cpu, mem, shares, cpus = delta("before", "after")
all_calls = sum(calls.values())
detail = ", ".join(f"{k} {v / moves:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1]))
share = " / ".join(f"{100 * s / max(all_calls, 1):.0f}% (CPU {100 * c / max(cpu, 1e-9):.0f}%)"
                   for s, c in zip(shares, cpus))
idle_rate = sum(idle_calls.values()) / idle_s
marginal_us = (cpu - idle_cpu / idle_s * r["seconds"]) * 1e6 / moves
print(f"{mode:8} {r['games']} games, {r['moves']} moves, {r['moves_per_second']:.0f} moves/s, errors {r['errors']}, "
      f"p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms; load {load}")
print(f"         idle: {idle_rate:.0f} commands/s ({', '.join(f'{k} {v / idle_s:.0f}' for k, v in sorted(idle_calls.items(), key=lambda kv: -kv[1]))}), "
      f"Redis CPU {idle_cpu / idle_s * 1e3:.1f} ms/s (all nodes)")
print(f"         Redis per move: {all_calls / moves:.1f} commands ({detail})")
print(f"         Redis CPU per move: {cpu * 1e6 / moves:.1f} us in all, {marginal_us:.1f} us over idle (all nodes); "
      f"share of commands (and of the CPU) per node: {share}; memory per game: {mem / max(r['games'], 1):.0f} bytes")
PY
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    PIDS=()
    sleep 0.5
done
echo "reports in $OUT"
