#!/usr/bin/env bash
# The main job's torch and JAX cases on a GPU (or, to test this script, on the CPU), in one
# command that fits a short window on a borrowed machine (about 8 minutes; see docs/GPU.md):
#
#   tools/gpu_check.sh [--device=gpu|cpu] [--out DIR] [--wheels DIR] [--budget SECONDS]
#                      [--quick] [--no-startup] [--sessions fp32,timed,other,gpu]
#                      [--select K-EXPRESSION] [-- PYTEST-ARGS]
#
#   install    pytest-mlbench and the pure-Python dependencies python3 lacks, from the wheels
#              tools/fetch_gpu_wheels.sh fetched (default .gpu-wheels/), pip --no-index
#              --no-deps --target a temporary folder (nothing where the plugin is installed)
#   probe      python, versions, nvidia-smi -L, what torch and JAX see   -> environment.json
#              (with --device=gpu and no GPU seen by either, nothing more is run)
#   startup    what a worker's start costs, step by step (imports, the GPU runtime, first
#              compilations), each in a fresh process (--no-startup: left out) -> startup.json
#   checked-fp32  the main job's workloads at the smoke size, nothing timed, torch eager,
#              torch.compile and JAX jit, every workload at fp32
#   timed-*    then alone: mlp and gpt at the default size, fp32, one process, short rounds,
#              every check before, while and after timing                -> timed.json
#   checked-other-precisions  every other policy precision.py holds (tf32, bf16, amp, ...) on
#              mlp, cnn, lstm, gpt and vit, as checked-fp32
#   timed-gpu  only when --sessions names gpu: the gpu size (GPT-2 124M, ViT-B/16) in amp,
#              timed alone, one process, compile times included; by default gpt's best
#              variant of each framework (torch jit+sdpa, JAX jit+cudnn: GPU_CASES); it first
#              prints the gpu size's cases it leaves out                 -> timed.json
#   summary    every session's outcomes, failures and skip reasons      -> summary.json
#
# Several sessions because a campaign's outcomes reach pytest only when it ends: a session cut
# by its timeout reports nothing, and costs only its own workloads.
# DIR (default reports/gpu-check-DEVICE-TIME) gets those files, gpu_check.log (all printed) and
# junit.tar.gz (each session's JUnit file and log). Each session has its own timeout within
# --budget (default 450 s; a cut session is stopped with SIGINT, then SIGKILL 30 s later). Exit
# 0 when every session ran and passed with at least one case passed; 1 otherwise; 2 on bad
# usage. --select narrows every session (and-ed with its own -k: --select "not gpt");
# PYTEST-ARGS go to every session as they are (a -k there replaces the session's own one).
# --sessions runs only the sessions named (default the first three: checked-fp32, timed-mlp-gpt,
# checked-other-precisions; gpu, the gpu size, only when named), to spend a second, shorter
# window on what the first left open. --sessions gpu -- -k EXPR times other gpu-size cases.
# --quick (the test line): mlp only, at the smoke size: one timed torch eager case, and torch
# eager and JAX jit checked at fp32 and tf32 (tf32 skips cleanly off a GPU).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEVICE=gpu
OUT=""
WHEELS="$ROOT/.gpu-wheels"
BUDGET="${MLBENCH_GPU_CHECK_BUDGET:-450}"
QUICK=0
STARTUP=1
SESSIONS="fp32,timed,other"
SELECT=""
EXTRA=()
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
bad() { echo "gpu_check: $1; accepted: --device=gpu|cpu --out DIR --wheels DIR --budget SECONDS --quick --no-startup --sessions fp32,timed,other,gpu --select EXPR [-- PYTEST-ARGS]" >&2; exit 2; }
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
    --no-startup) STARTUP=0; shift ;;
    --sessions=*) SESSIONS="${1#*=}"; shift ;;
    --sessions) [[ $# -ge 2 ]] || bad "--sessions needs a list"; SESSIONS="$2"; shift 2 ;;
    --select=*) SELECT="${1#*=}"; shift ;;
    --select) [[ $# -ge 2 ]] || bad "--select needs a -k expression"; SELECT="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown argument $1" ;;
  esac
done
[[ "$DEVICE" == gpu || "$DEVICE" == cpu ]] || bad "--device is $DEVICE"
[[ "$BUDGET" =~ ^[0-9]+$ ]] || bad "--budget is $BUDGET, not whole seconds"
[[ ",$SESSIONS," =~ ^(,(fp32|timed|other|gpu))+,$ ]] || bad "--sessions is $SESSIONS, not a list of fp32, timed, other, gpu"
wants() { [[ ",$SESSIONS," == *",$1,"* ]]; }
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null || { echo "gpu_check: no $PY on PATH (set PYTHON)" >&2; exit 2; }
OUT="${OUT:-$ROOT/reports/gpu-check-$DEVICE-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT" || exit 2
OUT="$(cd "$OUT" && pwd)"
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
# left), SIGINT first so pytest writes its JUnit and JSON files, then SIGKILL 30 s later;
# 5 s before the cut, every worker is asked for its Python stack (tools/gpu_check.py stacks)
step() {
  local name="$1" want="$2"; shift 2
  local limit; limit=$(left)
  (( limit < want )) || limit=$want
  if (( limit < 20 )); then
    echo "== $name: not run, $(left) s of the ${BUDGET} s budget left"
    printf '%s\t%s\t%s\n' "$name" "not run" 0 >> "$WORK/steps.tsv"
    return 1
  fi
  echo "== $name (at most $limit s; $(( SECONDS - START )) s so far): $*"
  local began=$SECONDS rc watcher
  # 5 s before the cut, every worker writes its stack to the log: where a cut session was
  ( trap 'kill "$nap" 2>/dev/null; exit 0' TERM; sleep $(( limit > 10 ? limit - 5 : limit )) &
    nap=$!; wait "$nap" && "$PY" "$ROOT/tools/gpu_check.py" stacks "$MLBENCH_STACKS" ) &
  watcher=$!
  timeout -s INT -k 30 "$limit" "$@"
  rc=$?
  kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
  (( rc == 124 )) && echo "== $name: TIMED OUT after $limit s"
  echo "== $name: exit $rc in $(( SECONDS - began )) s"
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( SECONDS - began ))" >> "$WORK/steps.tsv"
  return $rc
}

echo "gpu_check: device=$DEVICE quick=$QUICK budget=${BUDGET}s out=$OUT python=$(command -v "$PY")"
date -u

# the install first: the probe then reports what it made importable
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mlbench-gpu-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
SITE="$WORK/site" JUNIT="$WORK/junit"
export MLBENCH_STACKS="$WORK/stacks"  # where a worker writes its stack when asked (child.py)
mkdir -p "$JUNIT" "$MLBENCH_STACKS"
: > "$WORK/steps.tsv"
INSTALLED="$(cd / && "$PY" "$ROOT/tools/gpu_check.py" install "$WHEELS" "$SITE")"
rc=$?
printf '%s\t%s\t%s\n' install "$rc" 0 >> "$WORK/steps.tsv"
(( rc == 0 )) || { echo "gpu_check: the install failed; nothing run"; finish 1; }
# the working tree's code first (the wheel gives the plugin's entry point; the code it runs is
# the tree's, as fresh as the tree), then what was installed
export PYTHONPATH="$ROOT${INSTALLED:+:$INSTALLED}${PYTHONPATH:+:$PYTHONPATH}"
step probe 120 "$PY" "$ROOT/tools/gpu_check.py" probe "$DEVICE" "$OUT"
if [[ "$(tail -n 1 "$WORK/steps.tsv")" == "probe	3	"* ]]; then
  echo "gpu_check: neither torch nor JAX sees a GPU: no session run"
  tar -czf "$OUT/junit.tar.gz" -C "$WORK" junit steps.tsv
  "$PY" "$ROOT/tools/gpu_check.py" summary "$DEVICE" "$OUT" "$WORK"
  finish 1
fi

# what a worker's start costs here, step by step (the full check only: a GPU group's minutes
# are mostly its workers starting)
(( QUICK || ! STARTUP )) || step startup 90 "$PY" "$ROOT/tools/gpu_startup.py" "$DEVICE" --out "$OUT/startup.json"

# A timed torch pool that serves torch.compile cases warms inductor up on the CPU as it starts,
# which needs a C++ compiler; without one that pool would not start and no torch case would be
# timed. The correctness sessions still run the compiled cases (their workers skip the
# warm-up), so a missing compiler shows there as those cases' own failures.
NOJIT=""
if ! command -v c++ >/dev/null && ! command -v g++ >/dev/null && ! command -v clang++ >/dev/null; then
  echo "gpu_check: no C++ compiler on PATH: torch.compile cases are left out of the timed sessions"
  NOJIT=" and not torch-jit"
fi
# shellcheck disable=SC2054  # the commas are option values
COMMON=(-p no:cacheprovider -rfEs --mlbench-device="$DEVICE" --mlbench-frameworks=torch,jax
        --mlbench-threads=1 -o console_output_style=classic)
# shellcheck disable=SC2054
TIMED=(--mlbench-processes=1 --mlbench-workers=1 --benchmark-max-time=0.1
       --benchmark-columns=median,iqr,rounds --benchmark-sort=name)
# every policy but fp64 and fp32 (fp32 is the timed sessions'): tf32, bf16 and whatever
# precision.py holds when this runs (amp, fp16); on the CPU, not those for GPUs only
PRECISIONS="$("$PY" -c 'import sys; from pytest_mlbench.precision import POLICIES
print(" ".join(n for n, p in POLICIES.items() if n not in ("fp64", "fp32")
               and not (p.gpu_only and sys.argv[1] == "cpu")))' "$DEVICE")" || PRECISIONS="bf16"

# a session's own timeout: what it asks for, less what the later sessions are promised
cap() { local c=$(( $(left) - 35 - $2 )); (( c < $1 )) && echo "$c" || echo "$1"; }
# the main job's workloads present, as -k terms ("vit-" is vit's cases, not vit_infer's)
terms() { local w out=""; for w in "$@"; do [[ -f "suites/$w/spec.py" ]] && out+="${out:+ or }$w-"; done; echo "${out:-nothing}"; }
narrow() { echo "($1)${SELECT:+ and ($SELECT)}"; }  # a session's -k, and-ed with --select
timed() {  # NAME SECONDS SIZE K-EXPRESSION: timed alone (nothing else runs beside it)
  step "timed-$1" "$2" "$PY" -m pytest suites -m mlbench_main "${COMMON[@]}" "${TIMED[@]}" \
    --mlbench-size="$3" -k "$(narrow "$4")$NOJIT" --benchmark-json="$WORK/timed/$1.json" \
    --junitxml="$JUNIT/timed-$1.xml" "${EXTRA[@]}"
}
checked() {  # NAME SECONDS PRECISIONS WORKERS K-EXPRESSION
  step "checked-$1" "$2" "$PY" -m pytest suites -m mlbench_main "${COMMON[@]}" \
    --benchmark-disable --mlbench-size=smoke --mlbench-precision="$3" --mlbench-workers="$4" \
    -k "$(narrow "$5")" --junitxml="$JUNIT/checked-$1.xml" "${EXTRA[@]}"
}
mkdir -p "$WORK/timed"
# what a GPU user runs: torch eager and torch.compile (Triton on a GPU), JAX under jit (JAX op
# by op on a GPU is a launch per op, and costs a worker of its own)
VARIANTS="torch-eager or torch-jit or jax-jit"
# the gpu size's cases one window holds (docs/GPU.md): each compiles a 124M model (inductor
# on one thread, XLA autotuning on one core) and checks it against the float32 oracles on the
# device; the two frameworks' cases prepare side by side, each framework's one after another
GPU_CASES="gpt- and (torch-jit+sdpa or jax-jit+cudnn)"
gpu_left_out() {  # the gpu size's torch and JAX cases in amp that K-EXPRESSION leaves out
  local all kept
  all="$("$PY" -m pytest suites --collect-only -q -p no:cacheprovider --mlbench-size=gpu \
    --mlbench-device="$DEVICE" --mlbench-frameworks=torch,jax --mlbench-workers=1 \
    --mlbench-precision=amp 2>/dev/null | grep -o 'test_case\[[^]]*\]' | sort)"
  kept="$("$PY" -m pytest suites --collect-only -q -p no:cacheprovider --mlbench-size=gpu \
    --mlbench-device="$DEVICE" --mlbench-frameworks=torch,jax --mlbench-workers=1 \
    --mlbench-precision=amp -k "$1" "${EXTRA[@]}" 2>/dev/null | grep -o 'test_case\[[^]]*\]' | sort)"
  echo "gpu_check: the gpu session leaves out: $(comm -23 <(echo "$all") <(echo "$kept") \
    | sed 's/test_case\[//; s/\]//' | tr '\n' ' ')"
}

if (( QUICK )); then
  # torch eager: a dispatch-bound case far below the machine's matmul peak, so the
  # plausibility check cannot trip on a busy test host's low peak measurement
  timed mlp "$(cap 200 30)" smoke "mlp-torch-eager-"
  checked fp32-tf32 "$(cap 200 0)" fp32,tf32 1 "mlp-torch-eager- or mlp-jax-jit-"
else
  # A session pays its workers' start once (on a GPU machine tens of seconds: CUDA, the
  # frameworks' GPU runtimes, inductor's first build) and reports when its campaign ends: a
  # few sessions of several workloads each, one after another, each with its own timeout.
  # Each session's share of what is left once the probes ran (REST), a cut session's own
  # 30 s of SIGKILL grace kept in reserve; a session that ends early leaves its time to the
  # next ones.
  REST=$(( $(left) - 35 ))
  # a session's share of REST (WANT %, LATER % promised to the sessions after it), or all
  # that is left when no session asked for comes after it
  share() { local want=$(( REST * $1 / 100 )) later=$(( REST * $2 / 100 ))
            if (( $3 )); then cap "$want" "$later"; else cap 10000 0; fi; }
  other=0; [[ -z "$PRECISIONS" ]] || ! wants other || other=1
  timed=0; ! wants timed || timed=1
  gpu=0; ! wants gpu || gpu=1
  # 1. every workload of the main job checked at fp32, smoke size, nothing timed (one
  #    session: its workers start once; each group's progress line counts its verdicts, so a
  #    session cut short still says what its finished groups found)
  ! wants fp32 || checked fp32 "$(share 35 65 $(( timed || other || gpu )))" fp32 1 "$VARIANTS"
  # 2. timed alone, default size, fp32, one process, every check before, while and after timing
  (( ! timed )) || timed mlp-gpt "$(share 35 30 $(( other || gpu )))" default "($(terms mlp gpt)) and ($VARIANTS)"
  # 3. every other precision policy (tf32, bf16, amp, ...) on the workloads with matmuls,
  #    convolutions and recurrence, with what is left
  (( ! other )) || checked other-precisions "$(share 35 60 "$gpu")" "${PRECISIONS// /,}" 1 \
    "($(terms mlp cnn lstm gpt vit)) and ($VARIANTS)"
  # 4. the gpu size (GPT-2 124M, ViT-B/16) in amp, timed alone, one process, with what is
  #    left: the cases it leaves out said first (a -k after -- replaces GPU_CASES)
  if (( gpu )); then
    gpu_left_out "$(narrow "$GPU_CASES")"
    step timed-gpu "$(cap 10000 0)" "$PY" -m pytest suites "${COMMON[@]}" "${TIMED[@]}" \
      --mlbench-size=gpu --mlbench-precision=amp --benchmark-max-time=0.5 \
      -k "$(narrow "$GPU_CASES")$NOJIT" --benchmark-json="$WORK/timed/gpu.json" \
      --junitxml="$JUNIT/timed-gpu.xml" "${EXTRA[@]}"
  fi
fi
# the timed sessions' pytest-benchmark files as one (the device tool brings back few files)
"$PY" "$ROOT/tools/gpu_check.py" merge "$OUT/timed.json" "$WORK"/timed/*.json
tar -czf "$OUT/junit.tar.gz" -C "$WORK" junit steps.tsv
"$PY" "$ROOT/tools/gpu_check.py" summary "$DEVICE" "$OUT" "$WORK"
rc=$?
echo "gpu_check: $(( SECONDS - START )) s in all"
finish $rc
