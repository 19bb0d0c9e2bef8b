#!/usr/bin/env bash
# Validates compose/kubernetes/ offline (`make k8s-check`, run by `make test`): `kubectl kustomize`
# renders the base and every overlay (an overlay's secret files, which are not in git, are stood
# in for by dummies in a copy), then kubernetes-validate checks every object against the
# Kubernetes schemas (--strict: unknown fields fail too). kubernetes-validate (PyPI) is installed
# into .build/k8s-venv on first use; its schemas ship inside it, so later runs need no network.
# Works with Debian bookworm's kubectl 1.20 (kustomize 2.0) as with current ones.
# Usage: tools/check-k8s.sh [KUBERNETES_VERSION]   (default 1.30.0)
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:-1.30.0}
KUBECTL=${KUBECTL:-kubectl}
VALIDATE_VERSION=1.37.0
venv=.build/k8s-venv
command -v "$KUBECTL" >/dev/null || { echo "k8s-check: no kubectl (Debian package kubernetes-client)" >&2; exit 1; }
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$VALIDATE_VERSION"; then
  echo "k8s-check: installing kubernetes-validate $VALIDATE_VERSION into $venv"
  rm -rf "$venv"; mkdir -p .build
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$VALIDATE_VERSION"
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp -r compose/kubernetes "$work/k"
for dir in "$work"/k/overlays/*/; do   # dummy secret files, as the overlay's comment makes them
  grep -oE '(=|- )secrets/[A-Za-z0-9_.-]+' "$dir/kustomization.yaml" | sed -E 's/^(=|- )//' | sort -u |
    while read -r file; do mkdir -p "$dir/$(dirname "$file")"; [ -e "$dir/$file" ] || printf 'dummy' > "$dir/$file"; done
done
fail=0
for dir in "$work"/k/base "$work"/k/overlays/*; do
  name=${dir#"$work"/k/}
  out="$work/$(echo "$name" | tr / -).yaml"
  if ! "$KUBECTL" kustomize "$dir" > "$out" 2> "$work/err"; then
    grep -v '^# Warning' "$work/err" >&2; echo "k8s-check: kubectl kustomize $name failed" >&2; fail=1; continue
  fi
  objects=$(grep -c '^kind:' "$out" || true)
  if "$venv/bin/kubernetes-validate" --strict --quiet -k "$VERSION" "$out" > "$work/validate" 2>&1; then
    echo "k8s-check: $name: $objects objects render and validate against Kubernetes $VERSION"
  else
    cat "$work/validate" >&2; echo "k8s-check: $name does not validate" >&2; fail=1
  fi
done
exit $fail
