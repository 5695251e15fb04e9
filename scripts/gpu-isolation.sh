#!/usr/bin/env bash
# On a GPU machine: check's time with batched isolation and the proof that it decides as one child per
# scenario does (issue 27), and the drift between two runs of the same code (issue 25). Into OUTDIR:
#   check-batched-{1,2,3}.json / -profile.txt   every lab, the default (batched), three times
#   check-each.json / -profile.txt              every lab, --isolation each
#   wave1-batched-{1,2,3}.json / -profile.txt   the four wave-1 labs, three times
#   check-jobs16-profile.txt                    with --jobs16: every lab, --jobs 16 (more children at once)
#   isolation-compare.json/.txt                 batched run 1 against each, claim by claim
#   drift-2-vs-1.txt                            run 2 with run 1 as its baseline
#   scripts/gpu-isolation.sh OUTDIR [--quick|--jobs16]   (--quick: one batched run of each kind)
set -uo pipefail
out=${1:?usage: scripts/gpu-isolation.sh OUTDIR [--quick]}
runs="1 2 3"
[ "${2:-}" = "--quick" ] && runs="1"
mkdir -p "$out"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
export CTXLAB_CACHE=/tmp/ctxlab-cache PYTHONFAULTHANDLER=1
status=0
check() {  # NAME ARGS...: a bounded check; its standard error (progress and --profile) in NAME-profile.txt
  local name=$1; shift
  timeout -s ABRT -k 10 300 python3 -m ctxlab check --profile --format json -o "$out/$name.json" "$@" \
    2>"$out/$name-profile.txt" >/dev/null
  local rc=$?
  echo "$name: exit $rc, $(grep -E '^check: ' "$out/$name-profile.txt") $(grep -oE 'child processes [0-9]+' "$out/$name-profile.txt")"
  [ $rc -le 1 ] || status=1
}
for i in $runs; do check "check-batched-$i"; done
check check-each --isolation each
for i in $runs; do check "wave1-batched-$i" --only migrate,refcount,lifecycle,modules; done
[ "${2:-}" = "--jobs16" ] && check check-jobs16 --jobs 16
python3 benchmarks/isolation_compare.py "$out/check-batched-1.json" "$out/check-each.json" \
  --json "$out/isolation-compare.json" | tee "$out/isolation-compare.txt" | tail -25
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if [ -f "$out/check-batched-2.json" ]; then
  python3 - "$out" <<'PY' | tee "$out/drift-2-vs-1.txt"
import sys
from ctxlab.records.files import load_runs
from ctxlab.report.summary import drift_line
from ctxlab.suite import drift
out = sys.argv[1]
found = drift(load_runs(f"{out}/check-batched-2.json"), load_runs(f"{out}/check-batched-1.json"))
for d in found:
    print("drift:", drift_line(d))
print(f"{len(found)} drift(s) between two runs of the same code")
PY
fi
exit $status
