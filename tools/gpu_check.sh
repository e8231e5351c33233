#!/usr/bin/env bash
# The main job's torch and JAX cases on a GPU (or, to test this script, on the CPU), in one
# command that fits a short window on a borrowed machine (about 8 minutes; see docs/GPU.md):
#
#   tools/gpu_check.sh [--device=gpu|cpu] [--out DIR] [--wheels DIR] [--budget SECONDS] [--quick]
#
#   1. probe      python, versions, nvidia-smi -L, what torch and JAX see  (environment.json)
#   2. install    pytest-mlbench and the pure-Python dependencies python3 lacks, from the
#                 wheels tools/fetch_gpu_wheels.sh fetched (default .gpu-wheels/), with
#                 pip --no-index --no-deps --target (skipped where the plugin is installed)
#   3. smoke      correctness at the smoke size, nothing timed: fp32, tf32, bf16, one device
#                 and two workers (data parallel)                            (smoke.xml)
#   4. timed      the main job at the default size, one process, short rounds (timed.json)
#   5. precisions the same timed at tf32 and bf16, if the budget has room   (precisions.json)
#   6. summary    every session judged                                        (summary.json)
#
# Everything it prints is also in DIR/gpu_check.log. Exit 0 when every step ran and every
# case that ran passed, with at least one case passed per session; 1 otherwise; 2 on bad usage.
# --quick (the test line): the mlp workload only (torch eager, JAX jit), at fp32 and tf32 (a
# clean skip off a GPU), and a one-case timed session at the smoke size.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEVICE=gpu
OUT=""
WHEELS="$ROOT/.gpu-wheels"
BUDGET="${MLBENCH_GPU_CHECK_BUDGET:-480}"
QUICK=0
usage() { sed -n '2,21p' "$0"; }
bad() { echo "gpu_check: $1; accepted: --device=gpu|cpu --out DIR --wheels DIR --budget SECONDS --quick" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --device=*) DEVICE="${1#*=}"; shift ;;
    --device) [[ $# -ge 2 ]] || bad "--device needs a value"; DEVICE="$2"; shift 2 ;;
    --out=*) OUT="${1#*=}"; shift ;;
    --out) [[ $# -ge 2 ]] || bad "--out needs a folder"; OUT="$2"; shift 2 ;;
    --wheels=*) WHEELS="${1#*=}"; shift ;;
    --wheels) [[ $# -ge 2 ]] || bad "--wheels needs a folder"; WHEELS="$2"; shift 2 ;;
    --budget=*) BUDGET="${1#*=}"; shift ;;
    --budget) [[ $# -ge 2 ]] || bad "--budget needs seconds"; BUDGET="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown argument $1" ;;
  esac
done
[[ "$DEVICE" == gpu || "$DEVICE" == cpu ]] || bad "--device is $DEVICE"
[[ "$BUDGET" =~ ^[0-9]+$ ]] || bad "--budget is $BUDGET, not whole seconds"
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null || { echo "gpu_check: no $PY on PATH (set PYTHON)" >&2; exit 2; }
OUT="${OUT:-$ROOT/reports/gpu-check-$DEVICE-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT" || exit 2
OUT="$(cd "$OUT" && pwd)"
: > "$OUT/steps.tsv"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
TEE=$!
finish() {  # the log complete before the script exits
  exec 1>&- 2>&-
  wait "$TEE" 2>/dev/null
  exit "$1"
}
cd "$ROOT" || exit 2
START=$SECONDS

# JAX preallocates 75% of a GPU per process unless told not to: a campaign runs several
# workers on the one GPU. TF32 and the rest are the harness's own policies, set per case.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONHASHSEED=0 TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1

left() { echo $(( BUDGET - (SECONDS - START) )); }
# step NAME SECONDS CMD...: run CMD under a timeout (the smaller of SECONDS and the budget
# left), SIGINT first so pytest writes its JUnit and JSON files, then SIGKILL 30 s later
step() {
  local name="$1" want="$2"; shift 2
  local limit; limit=$(left)
  (( limit < want )) || limit=$want
  if (( limit < 20 )); then
    echo "== $name: not run, $(left) s of the ${BUDGET} s budget left"
    printf '%s\t%s\t%s\n' "$name" "not run" 0 >> "$OUT/steps.tsv"
    return 1
  fi
  echo "== $name (at most $limit s; $(( SECONDS - START )) s so far): $*"
  local began=$SECONDS rc
  timeout -s INT -k 30 "$limit" "$@"
  rc=$?
  (( rc == 124 )) && echo "== $name: TIMED OUT after $limit s"
  echo "== $name: exit $rc in $(( SECONDS - began )) s"
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( SECONDS - began ))" >> "$OUT/steps.tsv"
  return $rc
}

echo "gpu_check: device=$DEVICE quick=$QUICK budget=${BUDGET}s out=$OUT python=$(command -v "$PY")"
date -u

# 2 before 1: the probe reports what the install made importable
SITE="$(mktemp -d "${TMPDIR:-/tmp}/mlbench-gpu-site.XXXXXX")"
trap 'rm -rf "$SITE"' EXIT
INSTALLED="$(cd / && "$PY" "$ROOT/tools/gpu_check.py" install "$WHEELS" "$SITE")"
rc=$?
printf '%s\t%s\t%s\n' install "$rc" 0 >> "$OUT/steps.tsv"
(( rc == 0 )) || { echo "gpu_check: the install failed; nothing run"; finish 1; }
# the working tree's code first (the wheel gives the plugin's entry point; the code it runs is
# the tree's, as fresh as the tree), then what was installed
export PYTHONPATH="$ROOT${INSTALLED:+:$INSTALLED}${PYTHONPATH:+:$PYTHONPATH}"
step probe 180 "$PY" "$ROOT/tools/gpu_check.py" probe "$DEVICE" "$OUT"

COMMON=(-p no:cacheprovider -rfEs --mlbench-device="$DEVICE" --mlbench-frameworks=torch,jax
        --mlbench-threads=1 -o console_output_style=classic)
TIMED=(--mlbench-size=default --mlbench-processes=1 --mlbench-workers=1
       --benchmark-max-time=0.1 --benchmark-columns=median,iqr,rounds --benchmark-sort=name)
if (( QUICK )); then
  SELECT=(-m mlbench_main -k "mlp-torch-eager or mlp-jax-jit")
  step smoke 240 "$PY" -m pytest suites "${SELECT[@]}" "${COMMON[@]}" --benchmark-disable \
    --mlbench-size=smoke --mlbench-precision=fp32,tf32 --mlbench-workers=1 \
    --junitxml="$OUT/smoke.xml"
  step timed 240 "$PY" -m pytest suites -m mlbench_main -k "mlp-jax-jit" "${COMMON[@]}" \
    "${TIMED[@]/--mlbench-size=default/--mlbench-size=smoke}" \
    --benchmark-json="$OUT/timed.json" --junitxml="$OUT/timed.xml"
else
  step smoke 200 "$PY" -m pytest suites -m mlbench_main "${COMMON[@]}" --benchmark-disable \
    --mlbench-size=smoke --mlbench-precision=fp32,tf32,bf16 --mlbench-workers=1,2 \
    --junitxml="$OUT/smoke.xml"
  step timed 200 "$PY" -m pytest suites -m mlbench_main "${COMMON[@]}" "${TIMED[@]}" \
    --benchmark-json="$OUT/timed.json" --junitxml="$OUT/timed.xml"
  if (( $(left) >= 100 )); then
    step precisions $(( $(left) - 15 )) "$PY" -m pytest suites -m mlbench_main "${COMMON[@]}" \
      "${TIMED[@]}" --mlbench-precision=tf32,bf16 -k "not linreg" \
      --benchmark-json="$OUT/precisions.json" --junitxml="$OUT/precisions.xml"
  else
    echo "== precisions: not run, $(left) s left (100 s needed)"
  fi
fi

"$PY" "$ROOT/tools/gpu_check.py" summary "$DEVICE" "$OUT"
rc=$?
echo "gpu_check: $(( SECONDS - START )) s in all"
finish $rc
