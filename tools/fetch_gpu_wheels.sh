#!/usr/bin/env bash
# Fetch, on a machine with network, every wheel tools/gpu_check.sh may install on a borrowed
# GPU machine that has none: this package's own wheel and its pure-Python dependencies, at the
# versions of constraints.txt. The GPU machine's python3 is expected to hold torch, JAX, NumPy,
# SciPy and pytest already (binary wheels are not fetched unless named with --binary).
#
#   tools/fetch_gpu_wheels.sh [DIR] [--binary NAME==VER ...]
#
# DIR defaults to .gpu-wheels/ in the repository root (ignored by git; carried to the GPU
# machine as an ignored path). Binary wheels are fetched for CPython 3.12, manylinux x86-64.
# The folder stays small (about 1 MiB without --binary).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.gpu-wheels"
BINARY=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --binary) [[ $# -ge 2 ]] || { echo "fetch_gpu_wheels: --binary needs NAME==VER" >&2; exit 2; }
              BINARY+=("$2"); shift 2 ;;
    --binary=*) BINARY+=("${1#--binary=}"); shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "fetch_gpu_wheels: unknown option $1; accepted: [DIR] [--binary NAME==VER]" >&2; exit 2 ;;
    *) DIR="$1"; shift ;;
  esac
done
PY="${PYTHON:-python3}"
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  echo "fetch_gpu_wheels: $PY has no pip; set PYTHON to an interpreter that has it" >&2
  exit 2
fi

# the base dependencies that are pure Python (pyproject.toml's [project] dependencies less
# numpy and scipy), and autograd (pure Python: vit's float64 reference is differentiated by
# it), pinned as constraints.txt pins them
PURE=(py-cpuinfo2 threadpoolctl array-api-compat pytest-benchmark autograd)
pin() {  # NAME -> NAME==VER from constraints.txt (NAME alone if it is not pinned there)
  local line
  line="$(grep -i "^$1==" "$ROOT/constraints.txt" || true)"
  echo "${line:-$1}"
}

mkdir -p "$DIR"
# setuptools leaves these in the tree when it builds: remove only what this script made
LEFT=()
for made in "$ROOT/build" "$ROOT/pytest_mlbench.egg-info"; do [[ -e "$made" ]] || LEFT+=("$made"); done
rm -f "$DIR"/pytest_mlbench-*.whl
for name in "${PURE[@]}"; do
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$DIR" "$(pin "$name")"
done
for spec in "${BINARY[@]}"; do
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$DIR" "$spec"
done
# this package, built from the working tree as it is now (build isolation needs setuptools,
# which pip fetches itself)
"$PY" -m pip wheel --quiet --no-deps -w "$DIR" "$ROOT"
[[ ${#LEFT[@]} -eq 0 ]] || rm -rf "${LEFT[@]}"
echo "fetch_gpu_wheels: $(find "$DIR" -name "*.whl" | wc -l) wheel(s), $(du -sh "$DIR" | cut -f1), in $DIR:"
ls -1 "$DIR"
