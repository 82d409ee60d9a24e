#!/usr/bin/env bash
# Checks the deployment without a cluster: every overlay renders (kubectl kustomize, or kustomize), every
# rendered object validates against the Kubernetes schemas offline (kubernetes-validate --strict), the
# KEDA ScaledObjects against KEDA's CRD schema (deploy/check/keda.mjs), the security lint
# (deploy/check/lint.py), and the ingress controller's client key (deploy/check/ingress_map.py).
# Installs kubernetes-validate (PyPI) and the npm packages when missing.
set -euo pipefail
cd "$(dirname "$0")"

if command -v kubectl >/dev/null 2>&1; then
  render() { kubectl kustomize "$1"; }
elif command -v kustomize >/dev/null 2>&1; then
  render() { kustomize build "$1"; }
else
  echo "neither kubectl nor kustomize is installed: install kubectl (it renders kustomize offline)" >&2
  exit 1
fi
if ! command -v kubernetes-validate >/dev/null 2>&1; then
  echo "installing kubernetes-validate (PyPI)"
  python3 -m pip install --quiet kubernetes-validate
fi
(cd check && npm ci --no-audit --no-fund --silent)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for overlay in overlays/*/; do
  name=$(basename "$overlay")
  render "$overlay" >"$out/$name.yaml"
  echo "== $name: $(grep -c '^kind:' "$out/$name.yaml") objects rendered"
  # ScaledObject has no Kubernetes schema (KEDA's is checked below): its warning is expected.
  kubernetes-validate --strict --quiet "$out/$name.yaml" 2>&1 | grep -v "Couldn't find schema for kind ScaledObject" || true
  kubernetes-validate --strict --quiet --no-warn "$out/$name.yaml" >/dev/null
  echo "   Kubernetes schemas: ok"
  node check/keda.mjs <"$out/$name.yaml" | sed 's/^/   /'
  python3 check/lint.py <"$out/$name.yaml" | sed 's/^/   /'
done
# The ingress controller's client key (not part of an overlay: it is the controller's ConfigMap).
echo "== ingress-nginx controller settings"
kubernetes-validate --strict --quiet --no-warn ingress-nginx/controller-config.yaml >/dev/null
echo "   Kubernetes schemas: ok"
python3 check/ingress_map.py ingress-nginx/controller-config.yaml | sed 's/^/   /'
