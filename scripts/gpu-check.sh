#!/usr/bin/env bash
# The GPU check: one command that proves the GPU path on a machine with one CUDA device (an H100 or
# H200 lent for minutes, no network), every figure written under OUTDIR (or $OUT).
#
#   scripts/gpu-wheels.sh                  # here, with PyPI: fill .whl/ (TRL and what the device lacks)
#   scripts/gpu-check.sh OUTDIR            # there: within an 8-minute budget on one H100
#   scripts/gpu-check.sh --dry-run OUTDIR  # here or in CI: the same steps on CPU, at tiny sizes,
#                                          # every GPU part skipped by name (about a minute)
#
# Steps, each timed and marked PASS, FAIL or SKIP (with the reason) in the summary table:
#   carry      the size of what travels (tree + .whl) against the device's 64 MiB
#   cuda       torch sees a CUDA device (which, which driver)
#   wheels     install .whl/*.whl with --no-index --no-deps into a folder of their own put first on
#              PYTHONPATH (the device's torch, transformers, accelerate stay as they are); the
#              project runs from the tree (PYTHONPATH); every need is on the device or carried
#   tests      pytest -m gpu tests/test_gpu.py (bf16 CURE step, checkpoint and resume, TesterReward,
#              the engine on CUDA against CPU under greedy decoding, a pair sharing one GPU)
#   training   benchmarks/training.py --device cuda: coevo step against a bare TRL step, phases
#   grpo-0.5b  benchmarks/grpo_shape.py: a GRPO step of a random model of Qwen2.5-0.5B's shape at
#              the default batch: generated tokens/s, generation / sandbox / rewards / update, peak
#              GPU memory
#   cure-cuda  the default CURE run (`coevo train`: the shipped tiny model, 90 steps, held-out
#              problems scored at steps 0, 45, 90) with --use_cpu false --bf16 true, in the
#              background beside the tests, finished before the timed benchmarks start
#   cure-cpu   the same run on the CPU, in the background from the start: the curve the GPU run
#              is set beside (cure-curve.tsv), on the same machine
# It prints the summary table (also OUTDIR/summary.txt, the figures in OUTDIR/figures.json, the
# whole log in OUTDIR/log.txt, the held-out curves in cure-curve.tsv, cure-eval-*.jsonl and
# heldout-*.png: 8 files) and exits 1 if any step failed, naming each. Every step runs under a
# time limit inside the whole check's budget (GPU_CHECK_BUDGET_S, default 480 s), so the table is
# printed even when a step hangs; a step the budget cannot reach is marked FAIL, out of time.
# Environment: PYTHON (default python3), GPU_CHECK_BUDGET_S, GPU_CHECK_CURE_STEPS (default: the
# run's own 90), GPU_CHECK_BENCH_STEPS (default 6), GPU_CHECK_SHAPE_STEPS (default 3).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DRY=0
OUTDIR=""
for a in "$@"; do
  case "$a" in
    --dry-run) DRY=1 ;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option $a (--dry-run, --help)" >&2; exit 2 ;;
    *) [ -z "$OUTDIR" ] || { echo "gpu-check: one output folder, got $OUTDIR and $a" >&2; exit 2; }
       OUTDIR=$a ;;
  esac
done
OUTDIR=${OUTDIR:-${OUT:-}}
if [ -z "$OUTDIR" ]; then
  echo "gpu-check: give the folder for the figures (an argument or \$OUT)" >&2
  exit 2
fi
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd) || { echo "gpu-check: cannot write $OUTDIR" >&2; exit 2; }

PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/coevo-gpu-check.XXXXXX")
SITE=$WORK/site
LOG=$OUTDIR/log.txt
STEPS=$WORK/steps.tsv
: >"$LOG"
: >"$STEPS"
export OMP_NUM_THREADS=1 TRL_EXPERIMENTAL_SILENCE=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# nothing here needs the hub (the tiny models ship with the package; the 0.5B shape is built in
# code), and the GPU machine has no network: fail at once rather than wait on a connection
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" COEVO_GPU_FIGURES=$WORK
T_START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET_S:-480}
[ "$DRY" = 1 ] && BUDGET=${GPU_CHECK_BUDGET_S:-900}  # a busy CI machine is slow, not broken

say() { echo "gpu-check: $*" | tee -a "$LOG"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$STEPS"; }
skip() { say "SKIP $1: $2"; record "$1" SKIP 0 "$2"; }
# add to the note of the step recorded last
note_last() {
  local n; n=$(wc -l <"$STEPS")
  awk -v L="$n" -v t="$1" 'BEGIN { FS = OFS = "\t" } NR == L { $4 = $4 "; " t } 1' "$STEPS" \
    >"$STEPS.tmp" && mv "$STEPS.tmp" "$STEPS"
}

# the seconds a step may take: its own limit, or what the budget leaves (RESERVE s kept for the
# steps after it and the summary)
left() { echo $(( T_START + BUDGET - $(date +%s) - ${1:-20} )); }

# run NAME LIMIT_S NOTE CMD...: the command's output goes to the log and NAME.out in WORK
run() {
  local name=$1 limit=$2 note=$3 t0 rc secs status room
  shift 3
  room=$(left "${RESERVE:-20}")
  if [ "$room" -lt 20 ]; then
    say "FAIL $name: out of time (${BUDGET} s budget spent)"
    record "$name" FAIL 0 "out of time: the ${BUDGET} s budget was spent before it; $note"
    return 1
  fi
  [ "$room" -lt "$limit" ] && limit=$room
  say "=== $name (limit ${limit} s): $*"
  t0=$(date +%s)
  timeout --kill-after=15 "$limit" "$@" 2>&1 | tee "$WORK/$name.out" >>"$LOG"
  rc=${PIPESTATUS[0]}
  secs=$(( $(date +%s) - t0 ))
  if [ "$rc" = 0 ]; then status=PASS
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=FAIL; note="timed out after ${limit} s; $note"
  else status=FAIL; note="exit $rc; $note"
  fi
  tail -n 4 "$WORK/$name.out" | sed "s/^/  $name| /"
  say "$status $name (${secs} s)"
  record "$name" "$status" "$secs" "$note"
  return "$rc"
}

if [ "$DRY" = 1 ]; then
  say "dry run on CPU: the same steps at tiny sizes, the GPU parts skipped by name; figures in $OUTDIR"
else
  say "GPU run; figures in $OUTDIR"
fi

# ---- carry --------------------------------------------------------------------------------------
run carry 60 "tree + .whl against 64 MiB" "$PY" scripts/gpu_check.py carry
note_last "$(grep -o '= [0-9.]* MiB of' "$WORK/carry.out" | head -1 | sed 's/= //; s/ of//') carried"

# ---- cuda ---------------------------------------------------------------------------------------
ENV_PY='import json, sys, torch, transformers
cuda = torch.cuda.is_available()
env = {"python": sys.version.split()[0], "torch": torch.__version__,
       "transformers": transformers.__version__, "cuda": cuda,
       "gpu": torch.cuda.get_device_name(0) if cuda else None,
       "cuda_runtime": torch.version.cuda,
       "gpu_mem_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if cuda else None}
print(json.dumps(env)); json.dump(env, open(sys.argv[1], "w"))
sys.exit(0 if cuda or sys.argv[2] == "dry" else 1)'
if [ "$DRY" = 1 ]; then
  "$PY" -c "$ENV_PY" "$WORK/env.json" dry >>"$LOG" 2>&1
  skip cuda "dry run: no CUDA device used"
else
  smi=$(nvidia-smi -L 2>/dev/null | head -1)
  if ! run cuda 120 "${smi:-nvidia-smi lists no GPU}" "$PY" -c "$ENV_PY" "$WORK/env.json" real; then
    for s in wheels tests training cure-cpu cure-cuda grpo-0.5b; do skip "$s" "torch sees no CUDA device"; done
    "$PY" scripts/gpu_check.py summary "$STEPS" "$WORK" "$OUTDIR"
    rm -rf "$WORK"
    exit 1
  fi
fi

# ---- wheels -------------------------------------------------------------------------------------
n_whl=$(ls .whl/*.whl 2>/dev/null | wc -l)
if [ "$DRY" = 1 ]; then
  if [ "$n_whl" -gt 0 ]; then
    # installable for the device's interpreter (CPython 3.12, manylinux x86-64), needs read from them
    run wheels 180 "$n_whl wheels installable for cp312 manylinux; closure complete" bash -c "
      '$PY' -m pip install -q --no-index --no-deps --no-compile --target '$SITE' \
        --python-version 3.12 --implementation cp --only-binary=:all: \
        --platform manylinux2014_x86_64 .whl/*.whl &&
      '$PY' scripts/gpu_check.py closure --site '$SITE'"
  else
    run wheels 120 "no .whl here (scripts/gpu-wheels.sh fills it): closure checked against the pins" \
      "$PY" scripts/gpu_check.py closure
  fi
else
  if [ "$n_whl" = 0 ]; then
    say "FAIL wheels: no .whl/*.whl in the tree (run scripts/gpu-wheels.sh here and carry .whl)"
    record wheels FAIL 0 "no .whl/*.whl: run scripts/gpu-wheels.sh and carry .whl"
  else
    run wheels 180 "$n_whl wheels into their own folder" bash -c "
      '$PY' -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target '$SITE' .whl/*.whl &&
      PYTHONPATH='$SITE:$PYTHONPATH' '$PY' scripts/gpu_check.py closure --site '$SITE' &&
      PYTHONPATH='$SITE:$PYTHONPATH' '$PY' -c 'import trl, datasets, coevo_code.training; print(\"trl\", trl.__version__, \"datasets\", datasets.__version__)'"
  fi
  export PYTHONPATH="$SITE:$PYTHONPATH"
fi

# ---- the default CURE run, on CPU and on CUDA, in the background from here --------------------
# bg_start NAME LIMIT_S NOTE CMD...: started now, output in NAME.out; bg_wait NAME records it
bg_start() {
  local name=$1 limit=$2 note=$3
  shift 3
  [ "$limit" -lt 30 ] && limit=30
  ( timeout --kill-after=10 "$limit" "$@" >"$WORK/$name.out" 2>&1; echo $? >"$WORK/$name.rc" ) &
  echo $! >"$WORK/$name.pid"
  echo "$note" >"$WORK/$name.note"
  date +%s >"$WORK/$name.t0"
  say "$name started in the background (pid $!, limit $limit s): $*"
}
bg_wait() {
  local name=$1 rc secs status note
  say "waiting for $name"
  wait "$(cat "$WORK/$name.pid")"
  rc=$(cat "$WORK/$name.rc" 2>/dev/null || echo 1)
  secs=$(( $(date +%s) - $(cat "$WORK/$name.t0") ))
  note=$(cat "$WORK/$name.note")
  cat "$WORK/$name.out" >>"$LOG"
  tail -n 3 "$WORK/$name.out" | cut -c1-300 | sed "s/^/  $name| /"
  if [ "$rc" = 0 ]; then status=PASS
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=FAIL; note="timed out; $note"
  else status=FAIL; note="exit $rc; $note"
  fi
  say "$status $name (${secs} s, in the background)"
  record "$name" "$status" "$secs" "$note"
}

if [ "$DRY" = 1 ]; then
  CURE_ARGS=(--max_steps 1 --eval_steps 1 --save_steps 1 --eval_tasks_limit 4 --torch_threads 1)
  CURE_NOTE="dry: 1 step, 4 held-out problems, 1 torch thread"
else
  CURE_ARGS=()
  [ -n "${GPU_CHECK_CURE_STEPS:-}" ] && CURE_ARGS=(--max_steps "$GPU_CHECK_CURE_STEPS")
  CURE_NOTE="the default run${GPU_CHECK_CURE_STEPS:+, $GPU_CHECK_CURE_STEPS steps}"
fi
bg_start cure-cpu "$(left 25)" "$CURE_NOTE, on CPU, beside the other steps" \
  "$PY" -m coevo_code.cli train --output_dir "$WORK/cure-cpu" "${CURE_ARGS[@]}" --disable_tqdm true
if [ "$DRY" = 1 ]; then
  skip cure-cuda "dry run: the GPU run of the default config is skipped (its CPU twin runs)"
else
  # beside the tests (not timed); done before the timed benchmarks start, which then have the
  # GPU to themselves: 240 s of the budget are kept for them
  bg_start cure-cuda "$(left 240)" "$CURE_NOTE, --use_cpu false --bf16 true, beside the gpu tests" \
    "$PY" -m coevo_code.cli train --output_dir "$WORK/cure-cuda" --use_cpu false --bf16 true \
    "${CURE_ARGS[@]}" --disable_tqdm true
fi

# ---- tests --------------------------------------------------------------------------------------
RESERVE=240 run tests 240 "pytest -m gpu tests/test_gpu.py" "$PY" -m pytest -q -rs -p no:cacheprovider -m gpu \
  tests/test_gpu.py
res=$(grep -E '(passed|failed|skipped|error)' "$WORK/tests.out" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
[ "$DRY" = 1 ] && res="$res (no CUDA: each skip is named in log.txt)"
failed_tests=$(grep -E '^(FAILED|ERROR) ' "$WORK/tests.out" | sed 's/^[A-Z]* tests\/test_gpu.py:://; s/ - .*//' | tr '\n' ' ')
[ -n "$failed_tests" ] && res="$res; failed: $failed_tests"
note_last "$res"

if [ "$DRY" = 0 ]; then
  bg_wait cure-cuda
  "$PY" -m coevo_code.cli report "$WORK/cure-cuda" >>"$LOG" 2>&1 \
    && cp "$WORK/cure-cuda/heldout.png" "$OUTDIR/heldout-cuda.png" 2>/dev/null
  cp "$WORK/cure-cuda/eval.jsonl" "$OUTDIR/cure-eval-cuda.jsonl" 2>/dev/null
fi

# ---- training benchmark -------------------------------------------------------------------------
if [ "$DRY" = 1 ]; then
  run training 240 "dry: CPU, 2 steps, scripted workload only" \
    "$PY" benchmarks/training.py --device cpu --steps 2 --workload scripted --json "$WORK/training.json"
else
  RESERVE=130 run training 150 "coevo against bare TRL, both workloads" \
    "$PY" benchmarks/training.py --device cuda --steps "${GPU_CHECK_BENCH_STEPS:-6}" \
    --json "$WORK/training.json"
fi

# ---- a GRPO step of Qwen2.5-0.5B's shape --------------------------------------------------------
if [ "$DRY" = 1 ]; then
  run grpo-0.5b 240 "dry: REDUCED shape (2 layers, hidden 64) on CPU, 1 step per workload" \
    "$PY" benchmarks/grpo_shape.py --device cpu --reduced --steps 1 --json "$WORK/grpo_shape.json"
else
  RESERVE=25 run grpo-0.5b 200 "random weights, Qwen2.5-0.5B's config, default batch" \
    "$PY" benchmarks/grpo_shape.py --device cuda --steps "${GPU_CHECK_SHAPE_STEPS:-3}" \
    --json "$WORK/grpo_shape.json"
fi

# ---- the held-out curves side by side -----------------------------------------------------------
bg_wait cure-cpu
"$PY" -m coevo_code.cli report "$WORK/cure-cpu" >>"$LOG" 2>&1 \
  && cp "$WORK/cure-cpu/heldout.png" "$OUTDIR/heldout-cpu.png" 2>/dev/null
cp "$WORK/cure-cpu/eval.jsonl" "$OUTDIR/cure-eval-cpu.jsonl" 2>/dev/null
if [ "$DRY" = 1 ]; then
  "$PY" scripts/gpu_check.py curve "$WORK/cure-cpu" >"$OUTDIR/cure-curve.tsv" 2>>"$LOG"
else
  "$PY" scripts/gpu_check.py curve "$WORK/cure-cpu" "$WORK/cure-cuda" >"$OUTDIR/cure-curve.tsv" 2>>"$LOG"
fi

say "total $(( $(date +%s) - T_START )) s"
echo
"$PY" scripts/gpu_check.py summary "$STEPS" "$WORK" "$OUTDIR" | tee -a "$LOG"
rc=${PIPESTATUS[0]}
rm -rf "$WORK"
exit "$rc"
