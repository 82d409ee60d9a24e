#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, then checks formatting, lints and
# runs every test. Slow suites are opt-in: DRAUGHTS_PERFT_DEEP=1 runs every published perft depth.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is required (https://rustup.rs)" >&2
  exit 1
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
cargo --version

step "servers the tests start on free ports (redis-server and redis-cli for a Redis Cluster, postgresql)"
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
redis-server --version
ls -d /usr/lib/postgresql/*/bin | head -1

step "format (cargo fmt --check)"
cargo fmt --all -- --check

step "lints (cargo clippy --all-targets -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "docs (cargo doc --no-deps, warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "fuzz targets compile (crates/engine/fuzz, a workspace of its own)"
cargo check --manifest-path crates/engine/fuzz/Cargo.toml --bins --locked

step "tests (cargo test --workspace)"
cargo test --workspace --locked

step "web client (npm ci, build, end-to-end in headless Chromium)"
web_missing=()
command -v npm >/dev/null 2>&1 || web_missing+=(nodejs npm)
[ -x /usr/bin/chromium ] || web_missing+=(chromium)
if [ ${#web_missing[@]} -gt 0 ]; then
  echo "installing: ${web_missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${web_missing[@]}"
fi
cargo build --workspace --bins --locked
(cd web && npm ci --no-audit --no-fund)
step "API compatibility (buf breaking: proto/ against the last released set, proto/released/v1.binpb)"
(cd proto && ../web/node_modules/.bin/buf breaking --against released/v1.binpb)
step "API reference (docs/api-reference.md is what the protos' comments give: cd web && npm run reference)"
reference=$(mktemp -d)
(cd web && ./node_modules/.bin/buf generate ../proto --template buf.reference.yaml -o "$reference/web")
diff -u docs/api-reference.md "$reference/docs/api-reference.md"
rm -rf "$reference"
(cd web && npm run build && \
  DRAUGHTSD_BIN="${CARGO_TARGET_DIR:-$PWD/../target}/debug/draughtsd" npm run test:e2e)

step "container images (podman build; each binary run inside its image root)"
if ! command -v podman >/dev/null 2>&1; then
  echo "installing: podman"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends podman ||
    echo "podman could not be installed"
fi
if ! command -v podman >/dev/null 2>&1; then
  echo "SKIPPED: podman is missing, container images not checked"
elif [ "$(id -u)" != 0 ]; then
  echo "SKIPPED: checking images needs root (podman image mount + chroot)"
else
  deploy/images/build.sh --profile debug --tag test
fi

step "deployment manifests (render every overlay, validate offline, lint the security settings)"
deploy/check.sh
