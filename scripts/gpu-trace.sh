#!/usr/bin/env bash
# On a GPU machine: the tracer's and the audit's work in one call: the C callback's CPU tests, the concurrency
# stress (threads initialising CUDA at once, bare / trace / audit, each with a timeout), the serving-program
# overhead, and the GPU tests of trace and audit; logs and JSON under OUTDIR.
#   scripts/gpu-trace.sh OUTDIR [stress libraries] [stress threads] [extra pytest args]
set -uo pipefail
out=${1:?usage: scripts/gpu-trace.sh OUTDIR [libraries] [threads] [pytest args]}
libraries=${2:-torch,cupy,runtime,cuda_core,jax,mix}
threads=${3:-2,4,8,16,32}
shift $(( $# < 3 ? $# : 3 ))
mkdir -p "$out"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
export CTXLAB_CACHE=/tmp/ctxlab-cache
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1
python3 -m pytest -q -p no:cacheprovider tests/tracing/test_native_callback.py 2>&1 | tail -3
timeout 420 python3 benchmarks/trace_stress.py --libraries "$libraries" --threads "$threads" --timeout 60 \
  --json "$out/trace_stress.json" 2>&1 | tee "$out/trace_stress.log" || status=1
timeout 300 python3 benchmarks/serving_overhead.py --json "$out/serving_overhead.json" 2>&1 \
  | tee "$out/serving_overhead.log" || status=1
mkdir -p "$out/results"
CTXLAB_RESULTS="$out/results" timeout 900 python3 -m pytest -ra -p no:cacheprovider "$@" 2>&1 | tee "$out/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
python3 scripts/repo_relative.py --out "$out" "$out/pytest.log" "$out/trace_stress.log" 2>/dev/null
tar czf "$out/results.tar.gz" -C "$out" results && rm -rf "$out/results"
exit $status
