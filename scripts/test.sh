#!/usr/bin/env bash
# The whole test suite, from a fresh machine (stock Debian 12 or Ubuntu 24.04 with a Rust toolchain from
# rustup): installs what is missing, saying what (servers and chromium from apt; kubectl, the Python tools
# and a recent enough Node.js into the project's virtual environment: scripts/tools/setup.sh), then checks
# formatting, lints and runs every test. Slow suites are opt-in: DRAUGHTS_PERFT_DEEP=1 runs every published perft depth.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
# apt_install and setup_tools.
# shellcheck source=scripts/tools/setup.sh
source scripts/tools/setup.sh

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
  echo "installing: ${missing[*]} (apt)"
  apt_install "${missing[@]}"
fi
redis-server --version
ls -d /usr/lib/postgresql/*/bin | head -1

step "tools (kubectl or kustomize, kubernetes-validate, Node.js; what is missing goes into the project's virtual environment, target/tools/venv: scripts/tools/setup.sh)"
setup_tools

step "supported Rust version (rust-version in Cargo.toml): the workspace's libraries and binaries build with it"
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
if command -v rustup >/dev/null 2>&1; then
  if rustup toolchain install "$msrv" --profile minimal --no-self-update >/dev/null; then
    cargo "+$msrv" check --workspace --locked --target-dir target/msrv
  else
    echo "SKIPPED: Rust $msrv could not be installed here (no network to rustup's server?), so it is not checked"
  fi
else
  echo "SKIPPED: rustup is missing, so Rust $msrv cannot be installed to check it"
fi

step "format (cargo fmt --check)"
cargo fmt --all -- --check

step "lints (cargo clippy --all-targets -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "docs (cargo doc --no-deps, warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "fuzz targets compile (crates/engine/fuzz, a workspace of its own)"
cargo check --manifest-path crates/engine/fuzz/Cargo.toml --bins --locked

step "web dependencies (npm ci; Chromium for the end-to-end tests)"
# Before the Rust tests: the integrators' gRPC-Web example runs in them with web/node_modules's tools.
# Node.js and npm: the tools step above.
(cd web && npm ci --no-audit --no-fund)
if [ ! -x /usr/bin/chromium ]; then
  echo "installing: chromium (apt)"
  apt_install chromium
fi

step "tests (cargo test --workspace)"
# The examples' tests fail instead of skipping when their toolchains are missing.
DRAUGHTS_EXAMPLES_REQUIRED=1 cargo test --workspace --locked

step "web client (build, end-to-end in headless Chromium)"
cargo build --workspace --bins --locked
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
  echo "installing: podman (apt)"
  apt_install podman ||
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
