#!/usr/bin/env bash
# On a GPU machine: ctxlab check under each driver variable of the environment matrix (issue 25), for
# labs/results/matrix/. Outputs under OUTDIR, each run as NAME.json and NAME.md (+ NAME.log, NAME.exit):
#   baseline                  none of the variables set (a CUDA_VISIBLE_DEVICES the runner gave is kept)
#   again                     the same again, --baseline baseline.json --fail-on-drift: drift must be 0
#   module-loading-eager      CUDA_MODULE_LOADING=EAGER         (and doctor-NAME.json: the loading mode)
#   module-loading-lazy       CUDA_MODULE_LOADING=LAZY
#   max-connections-1         CUDA_DEVICE_MAX_CONNECTIONS=1
#   visible-devices-0         CUDA_VISIBLE_DEVICES=0 (the first GPU the runner gave)
# each variant with --baseline baseline.json (its drift lines in NAME.log), then summary.md from
# python -m tests.gpu.matrix: per variable what differed from the baseline, and whether it may.
#   scripts/gpu-matrix.sh OUTDIR
# Every check is bounded (timeout 900 s, then killed: exit 124 in NAME.exit). Exit 1 when a check failed,
# drifted or timed out, or the summary found an unexpected difference.
set -uo pipefail
out=${1:?usage: scripts/gpu-matrix.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.." || exit 2
. scripts/gpu-env.sh
unset CUDA_MODULE_LOADING CUDA_DEVICE_MAX_CONNECTIONS
first=${CUDA_VISIBLE_DEVICES:-0}
first=${first%%,*}
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ -n "${CUDA_VISIBLE_DEVICES:-}" ] && gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)

run() {  # NAME [VAR=VALUE] -- [check args]
  local name=$1; shift
  local assign=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do assign+=("$1"); shift; done
  shift
  echo "== $name ${assign[*]:-(no variable)}"
  env ${assign[@]+"${assign[@]}"} timeout 900 python3 -m ctxlab check --format json -o "$out/$name.json" \
    --markdown "$out/$name.md" "$@" 2> "$out/$name.log"
  local code=$?
  echo "$code" > "$out/$name.exit"
  tail -n 12 "$out/$name.log"
  [ "$code" -eq 0 ] || status=1
  if [ "${#assign[@]}" -gt 0 ]; then
    env ${assign[@]+"${assign[@]}"} timeout 120 python3 -m ctxlab doctor --format json --output "$out/doctor-$name.json" \
      > /dev/null 2>> "$out/$name.log" || status=1
  fi
}

run baseline --
timeout 120 python3 -m ctxlab doctor --format json --output "$out/doctor-baseline.json" > /dev/null || status=1
run again -- --baseline "$out/baseline.json" --fail-on-drift
run module-loading-eager CUDA_MODULE_LOADING=EAGER -- --baseline "$out/baseline.json"
run module-loading-lazy CUDA_MODULE_LOADING=LAZY -- --baseline "$out/baseline.json"
run max-connections-1 CUDA_DEVICE_MAX_CONNECTIONS=1 -- --baseline "$out/baseline.json"
run visible-devices-0 "CUDA_VISIBLE_DEVICES=$first" -- --baseline "$out/baseline.json"
grep -h '^drift: ' "$out/again.log" && status=1  # two runs of the same code: no drift
timeout 300 python3 -m tests.gpu.matrix "$out" "$gpus" || status=1
python3 scripts/repo_relative.py --out "$out" "$out"/*.log "$out"/*.md
exit $status
