#!/usr/bin/env bash
# Builds one container image per service binary with podman, from binaries cargo built on this host,
# and checks each one: `--help` inside the image's root, and a short smoke test of the one-process
# platform (draughtsd inside the image root answers a health check from the host).
#
#   deploy/images/build.sh [--profile debug|release] [--cpu LEVEL] [--tag TAG] [--no-check] [BIN...]
#
# Release binaries are built for the CPU baseline x86-64-v2 (docs/engine.md "CPU baseline for release builds");
# `--cpu x86-64` builds for every x86-64 CPU (the fallback for CPUs without SSE4.2/POPCNT). A RUSTFLAGS
# set in the environment is used as it is.
# Running a container does not work on every build machine (podman on hybrid cgroups), so the check
# runs each binary with `chroot` inside the mounted image (`podman image mount`), which needs root.
# Images: localhost/draughts/<name>:<tag>, name = the binary without its `draughts-` prefix.
set -euo pipefail
cd "$(dirname "$0")/../.."

profile=release
cpu=x86-64-v2
tag=latest
check=1
bins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --cpu) cpu="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --no-check) check=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[ ${#bins[@]} -gt 0 ] || bins=(draughtsd draughts-validation draughts-ratings draughts-analysis draughts-analysis-worker draughts-matchmaking draughts-tournaments)

if ! command -v podman >/dev/null 2>&1; then
  echo "podman is not installed: images not built (apt-get install podman)" >&2
  exit 3
fi

target="${CARGO_TARGET_DIR:-$PWD/target}"
cargo_flags=(--locked)
if [ "$profile" = release ]; then
  cargo_flags+=(--release)
  [ -n "${RUSTFLAGS:-}" ] || export RUSTFLAGS="-C target-cpu=$cpu"
fi
echo "building the workspace's binaries ($profile)"
cargo build "${cargo_flags[@]}" --workspace --bins
for bin in "${bins[@]}"; do
  [ -x "$target/$profile/$bin" ] || { echo "no binary $bin in $target/$profile" >&2; exit 2; }
done

work=$(mktemp -d)
mounted=()
cleanup() {
  for image in "${mounted[@]}"; do podman image umount "$image" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# The image root of one binary: /app, its shared libraries (as ldd resolves them), passwd/group.
make_root() {
  local bin="$1" root="$2"
  mkdir -p "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  install -m 0755 "$target/$profile/$bin" "$root/app"
  ldd "$target/$profile/$bin" | awk '/=> \//{print $3} /^\s*\/[^ ]+/{print $1}' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  printf 'root:x:0:0:root:/:/sbin/nologin\ndraughts:x:10001:10001:draughts:/:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\ndraughts:x:10001:\n' >"$root/etc/group"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    mkdir -p "$root/etc/ssl/certs"
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

for bin in "${bins[@]}"; do
  name="${bin#draughts-}"
  image="localhost/draughts/$name:$tag"
  ctx="$work/$name"
  make_root "$bin" "$ctx/root"
  podman build --quiet --build-arg BIN="$bin" -t "$image" -f deploy/images/Containerfile "$ctx" >/dev/null
  size=$(podman image inspect "$image" --format '{{.Size}}')
  echo "image $image: $((size / 1024 / 1024)) MiB"
  [ "$check" = 1 ] || continue
  mnt=$(podman image mount "$image")
  mounted+=("$image")
  # Nothing but the binary and its libraries: no shell, no package manager.
  for forbidden in bin/sh usr/bin/apt usr/bin/cargo; do
    [ ! -e "$mnt/$forbidden" ] || { echo "$image contains /$forbidden" >&2; exit 1; }
  done
  user=$(podman image inspect "$image" --format '{{.Config.User}}')
  [ "$user" = "10001:10001" ] || { echo "$image runs as '$user', not 10001" >&2; exit 1; }
  chroot --userspec=10001:10001 "$mnt" /app --help >/dev/null
  echo "  /app --help inside the image: ok (as user 10001)"
  if [ "$bin" = draughtsd ]; then
    port=$(free_port)
    chroot --userspec=10001:10001 "$mnt" /app --listen "127.0.0.1:$port" --metrics-listen off \
      --redis-url memory:// --database-url sqlite::memory: >"$work/draughtsd.log" 2>&1 &
    pid=$!
    ok=0
    for _ in $(seq 1 100); do
      if "$target/$profile/draughts" client --server "127.0.0.1:$port" health >/dev/null 2>&1; then ok=1; break; fi
      sleep 0.2
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ "$ok" = 1 ] || { echo "draughtsd inside the image did not answer a health check:" >&2; cat "$work/draughtsd.log" >&2; exit 1; }
    echo "  smoke test: draughtsd inside the image root answered a health check"
  fi
  podman image umount "$image" >/dev/null
  mounted=("${mounted[@]/$image}")
done
