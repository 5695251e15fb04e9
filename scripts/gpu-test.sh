#!/usr/bin/env bash
# On a GPU machine: install what is missing, run the whole test suite (GPU tests
# included) and the labs, and leave logs and results in the folder given.
#   scripts/gpu-test.sh OUTDIR [extra pytest args]
# Wheels for packages the machine lacks (no registry there) may lie in .whl/.
set -uo pipefail
out=${1:?usage: scripts/gpu-test.sh OUTDIR [pytest args]}
shift
mkdir -p "$out"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1
python3 -m ctxlab doctor || status=1
python3 -m ctxlab claims --format json --output "$out/claims.json" || status=1
mkdir -p "$out/results"
CTXLAB_RESULTS="$out/results" python3 -m pytest -ra --junitxml="$out/pytest.xml" "$@" 2>&1 | tee "$out/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
python3 scripts/repo_relative.py --out "$out" "$out/pytest.log"  # the log names no path of this machine
if [ "$(nvidia-smi -L | wc -l)" -gt 1 ]; then  # several GPUs: every lab on each of them
  python3 -m ctxlab check --devices all --json "$out/results/check-all-devices.json" \
    --markdown "$out/results/check-all-devices.md" 2>&1 | tee "$out/results/check-all-devices.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
python3 benchmarks/handoff_breakdown.py --json "$out/results/handoff_breakdown.json" || status=1
python3 benchmarks/cli_startup.py --json "$out/results/cli_startup.json" || status=1
python3 benchmarks/trace_overhead.py --json "$out/results/trace_overhead.json" || status=1
# One archive: the labs' results, the check reports and the benchmark figures.
tar czf "$out/results.tar.gz" -C "$out" results && rm -rf "$out/results"
exit $status
