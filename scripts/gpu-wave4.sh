#!/usr/bin/env bash
# On a GPU machine, the wave-4 checks that fit one call: the GPU tests of the audit and the tracer,
# compute-sanitizer beside the audit on the corpus' new programs, and the audit's time against the plain run
# on the short programs. Logs and results land in OUTDIR.
#   scripts/gpu-wave4.sh OUTDIR
set -uo pipefail
out=${1:?usage: scripts/gpu-wave4.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout -s KILL 170 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_audit.py tests/gpu/test_trace_programs.py \
  -k "not overhead and not numba" 2>&1 | tee "$out/pytest-audit-trace.log" | tail -15
timeout -s KILL 130 python3 benchmarks/realworld_sanitizer.py --jobs 12 --timeout 110 \
  --only sticky_ capture_ freed_ launchcfg_ destroyed_handle_ crash_stream crash_pinned \
  --json "$out/sanitizer.json" 2>&1 | tail -15
PLAIN=1 timeout -s KILL 60 bash scripts/gpu-audit-corpus.sh "$out/corpus" \
  examples/realworld/leak_context_per_request.py examples/realworld/handle_event_record_other_context.py \
  examples/realworld/freed_staging_double_free_after_uploader.py examples/realworld/launchcfg_block_size_off_by_one_autotune.py \
  examples/realworld/clean_created_context_balanced.py examples/realworld/nocontext_cached_kernel_side_thread.py 2>&1 | tail -8
