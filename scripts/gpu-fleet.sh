#!/usr/bin/env bash
# On a GPU machine: the fleet work of issue 28 that needs a GPU, outputs under OUTDIR.
#   scripts/gpu-fleet.sh OUTDIR
# 1. ctxlab check --format openmetrics (to OUTDIR/check.prom), with --openmetrics, --json, --junit beside it;
# 2. both metrics files parsed with prometheus_client's OpenMetrics parser (its wheel may lie in .whl/), and
#    checked against the JSON: ctxlab_up 1, one verdict per claim;
# 3. check -d 1023 (a device that does not exist): the environment-error record (exit 2, one line);
# 4. the recipes against the real run: the NPD plugin's exit status and line, the Slurm health check with a
#    fake scontrol (what it would run), the node_exporter script into OUTDIR/textfile;
# 5. the CPU tests of the fleet work (tests/report/test_openmetrics.py, test_envrecord.py, test_fleet_*.py).
# The check's own exit status is in OUTDIR/check.exit; this script exits 1 when a step it checks went wrong.
set -uo pipefail
out=${1:?usage: scripts/gpu-fleet.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.." || exit 2
. scripts/gpu-env.sh
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
timeout 900 python3 -m ctxlab check --format openmetrics --output "$out/check.prom" \
  --openmetrics "$out/check-second.prom" --json "$out/check.json" --junit "$out/check.xml" 2> "$out/check.log"
echo $? > "$out/check.exit"
cat "$out/check.log"
python3 - "$out" <<'PY' 2>&1 | tee "$out/parse.log" || status=1
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
import ctxlab
runs = ctxlab.load(out / "check.json")
first, second = (out / "check.prom").read_text(), (out / "check-second.prom").read_text()
assert first == second, "--format openmetrics and --openmetrics wrote different files"
try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:
    print("prometheus_client is not installed: the official parse was skipped (put its wheel in .whl/)")
    sys.exit(1)
families = {f.name: f for f in text_string_to_metric_families(first)}
claims = sum(len(r.claims) for r in runs)
ones = [s for s in families["ctxlab_claim_verdict"].samples if s.value == 1]
assert families["ctxlab_up"].samples[0].value == 1 and len(ones) == claims
print(f"parsed: {len(families)} families, {sum(len(f.samples) for f in families.values())} samples, "
      f"{claims} claims, ctxlab_failed {families['ctxlab_failed'].samples[0].value:g}")
for s in families["ctxlab_environment_info"].samples:
    print("environment:", json.dumps(s.labels))
PY
timeout 120 python3 -m ctxlab check -d 1023 --json "$out/missing-device.json" --openmetrics "$out/missing-device.prom" \
  > "$out/missing-device.log" 2>&1
echo "exit $?" >> "$out/missing-device.log"
cat "$out/missing-device.log"
grep -q '^exit 2$' "$out/missing-device.log" && grep -q '"reason": "device-missing"' "$out/missing-device.json" || status=1
{
  CTXLAB_RESULT="$out/check.json" CTXLAB_PYTHON=python3 bash fleet/kubernetes/ctxlab-npd-plugin.sh
  echo "npd plugin exit $?"
  mkdir -p "$out/bin"
  printf '#!/bin/sh\necho scontrol "$@" >> %s/scontrol.log\n' "$out" > "$out/bin/scontrol" && chmod +x "$out/bin/scontrol"
  PATH="$out/bin:$PATH" CTXLAB_RESULT="$out/check.json" NODENAME=$(hostname -s) bash fleet/slurm/ctxlab-healthcheck.sh
  echo "slurm health check exit $?; scontrol calls:"; cat "$out/scontrol.log" 2>/dev/null
  CTXLAB_RESULT="$out/missing-device.json" bash fleet/kubernetes/ctxlab-npd-plugin.sh
  echo "npd plugin on the environment-error record exit $?"
} 2>&1 | tee "$out/recipes.log"
timeout 600 python3 -m pytest -q -p no:cacheprovider tests/report/test_openmetrics.py tests/records/test_envrecord.py \
  tests/report/test_fleet_merge.py tests/house/test_fleet_recipes.py 2>&1 | tee "$out/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
