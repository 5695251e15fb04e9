#!/usr/bin/env bash
# On a GPU machine: which copies of the CUDA runtime retain the primary context, named by the tracer (the
# callers of cuDevicePrimaryCtxRetain), in the audit's several-runtime-copies programs and the clean programs
# that used to report it. Each run has a timeout; at the timeout SIGABRT makes faulthandler dump every
# thread's Python stack into its log.
#   scripts/gpu-runtime-copies.sh OUTDIR
set -uo pipefail
out=${1:?usage: scripts/gpu-runtime-copies.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
export CTXLAB_CACHE=/tmp/ctxlab-cache PYTHONFAULTHANDLER=1
status=0
for program in examples/hazards/several_runtime_copies.py examples/realworld/clean_cupy_device_per_thread.py \
               examples/realworld/clean_cuda_core_threads.py examples/realworld/clean_cupy_barrier_stress.py; do
  name=$(basename "$program" .py)
  timeout -s ABRT -k 5 120 python3 -m ctxlab audit --format json -o "$out/$name.audit.json" -- "$program" \
    >"$out/$name.log" 2>&1
  echo "$name: audit exit $?"
done
# the lifecycle lab's CuPy-only sequence: setDevice, then a reduction (the first kernel)
timeout -s ABRT -k 5 120 python3 -m ctxlab trace --format json -o "$out/cupy-sequence.trace.json" \
  -c "import cupy; cupy.cuda.runtime.setDevice(0); print(int(cupy.arange(10).sum()))" >"$out/cupy-sequence.log" 2>&1
echo "cupy-sequence: trace exit $?"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for path in sorted(out.glob("*.audit.json")):
    doc = json.loads(path.read_text())
    hits = [f for f in doc.get("findings", []) if f.get("rule") == "several-runtime-copies"]
    print(f"{path.name}: {len(doc.get('findings', []))} findings; several-runtime-copies: {len(hits)}")
    for f in hits:
        print("   ", f.get("message"))
path = out / "cupy-sequence.trace.json"
if path.exists():
    doc = json.loads(path.read_text())
    events = doc.get("events", doc if isinstance(doc, list) else [])
    for e in events:
        if str(e.get("name", "")).startswith("cuDevicePrimaryCtx"):
            print("trace:", e.get("name"), e.get("status"), e.get("from"), e.get("callers"))
PY
exit $status
