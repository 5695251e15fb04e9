#!/usr/bin/env bash
# On a GPU machine: the speed figures (check's wall time with --profile, what
# processes starting CUDA at once cost each other, the handoff benchmark against
# the native relay), written to the folder given.
#   scripts/speed-figures.sh OUTDIR [JOBS...]     (JOBS: pool widths to time check at; default: 8, check's own default)
set -uo pipefail
out=${1:?usage: scripts/speed-figures.sh OUTDIR [JOBS...]}
shift
mkdir -p "$out"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
status=0
python3 benchmarks/context_contention.py --json "$out/context_contention.json" 2>&1 | tee "$out/context_contention.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
for jobs in "${@:-8}"; do
  python3 -m ctxlab check --only migrate,refcount,lifecycle,modules --jobs "$jobs" --profile \
    --json "$out/check-wave1-jobs$jobs.json" 2>&1 | tee "$out/check-profile-wave1-jobs$jobs.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
python3 benchmarks/handoff_breakdown.py --json "$out/handoff_breakdown.json" 2>&1 | tee "$out/handoff_breakdown.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
