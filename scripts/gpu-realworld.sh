#!/usr/bin/env bash
# On a GPU machine: audit every program of examples/realworld/ (the GPU test scores rule, thread and line) and
# run compute-sanitizer beside it; the reports and the score table under OUTDIR.
#   scripts/gpu-realworld.sh OUTDIR [--no-sanitizer] [extra pytest args]
set -uo pipefail
out=${1:?usage: scripts/gpu-realworld.sh OUTDIR [--no-sanitizer] [pytest args]}
shift
sanitizer=1
if [ "${1:-}" = "--no-sanitizer" ]; then sanitizer=0; shift; fi
mkdir -p "$out/results"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
export CTXLAB_CACHE=/tmp/ctxlab-cache
status=0
CTXLAB_RESULTS="$out/results" timeout 480 python3 -m pytest -q -p no:cacheprovider -rA tests/gpu/test_realworld.py "$@" \
  2>&1 | tee "$out/realworld-pytest.log" | grep -E "PASS|FAIL|SKIP|passed|failed|Error" | cut -c1-400
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if [ "$sanitizer" = 1 ]; then
  timeout 300 python3 benchmarks/realworld_sanitizer.py --jobs 8 --timeout 100 \
    --table "$out/results/audit/realworld/realworld.json" --json "$out/results/audit/realworld-sanitizer.json" \
    2>&1 | tee "$out/realworld-sanitizer.log" || status=1
fi
python3 scripts/repo_relative.py --out "$out" "$out/realworld-pytest.log" 2>/dev/null
tar czf "$out/results.tar.gz" -C "$out" results && rm -rf "$out/results"
exit $status
