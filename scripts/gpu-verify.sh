#!/usr/bin/env bash
# On a GPU machine, the wave's checks in parts that each fit one call of the device (under ten minutes); each
# part leaves one archive, OUTDIR/<part>.tar.gz, with its logs and results.
#   scripts/gpu-verify.sh corpus OUTDIR   every one-GPU program of examples/realworld/ alone and under the
#                                         audit (scripts/gpu-audit-corpus.sh, PLAIN=1), scored with the GPU
#                                         test's own function (benchmarks/realworld_score.py)
#   scripts/gpu-verify.sh suite OUTDIR    the GPU tests (-m gpu) but the corpus (the part above scores it the
#                                         same way), the stress matrix (the part below) and the environment
#                                         matrix (the part "matrix")
#   scripts/gpu-verify.sh relay OUTDIR    the relay against the native one (benchmarks/relay_vs_native.py)
#   scripts/gpu-verify.sh matrix OUTDIR   check under each driver variable (scripts/gpu-matrix.sh), its summary
#   scripts/gpu-verify.sh stress OUTDIR   the stress matrix (tests/gpu/test_trace_stress.py) and
#                                         compute-sanitizer on the whole corpus (benchmarks/realworld_sanitizer.py)
#   scripts/gpu-verify.sh levels OUTDIR   check at levels 3, 1 and 2, alternating, three runs each, compared
#                                         (benchmarks/check_levels.py), then a full check with cupti-python hidden
#   TESTS="..." scripts/gpu-verify.sh again OUTDIR   the GPU tests named (after a fix), then the levels with
#                                         one full check
set -uo pipefail
part=${1:?usage: scripts/gpu-verify.sh corpus|suite|relay|matrix|stress|levels|again OUTDIR}
out=${2:?usage: scripts/gpu-verify.sh corpus|suite|relay|matrix|stress|levels|again OUTDIR}
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false
work="$out/$part"
mkdir -p "$work"
status=0
python3 -m ctxlab doctor --json "$work/doctor.json" > "$work/doctor.log" 2>&1 || true
case "$part" in
  corpus)
    PLAIN=1 bash scripts/gpu-audit-corpus.sh "$work" 2>&1 | tee "$work/corpus.log" | tail -80
    python3 benchmarks/realworld_score.py "$work/audit" --summary "$work/audit/summary.tsv" \
      --json "$work/realworld.json" 2>&1 | tee "$work/score.log" | tail -20 || status=1
    ;;
  again)  # the GPU tests named in TESTS (after a fix), then the levels with one full check (FULL_RUNS=1)
    TESTS=${TESTS:?name the tests}
    timeout -s INT 330 python3 -m pytest -ra -p no:cacheprovider --durations=10 $TESTS 2>&1 \
      | tee "$work/pytest-again.log" | tail -30
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    timeout -s INT 240 python3 benchmarks/check_levels.py "$work/levels" --runs 3 --full-runs 1 --levels 3,1,2 2>&1 \
      | tee "$work/levels.log" | tail -12
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    ;;
  suite)
    mkdir -p "$work/results"
    CTXLAB_RESULTS="$work/results" timeout -s INT 570 python3 -m pytest -m gpu -ra -p no:cacheprovider \
      --junitxml="$work/pytest.xml" --durations=15 tests \
      --ignore tests/gpu/test_realworld.py --ignore tests/gpu/test_trace_stress.py \
      --ignore tests/gpu/test_environment_matrix.py 2>&1 \
      | tee "$work/pytest.log" | tail -60
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    ;;
  relay)
    timeout -s INT 300 python3 benchmarks/relay_vs_native.py --json "$work/relay_vs_native.json" 2>&1 \
      | tee "$work/relay_vs_native.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    ;;
  matrix)
    timeout -s INT 540 bash scripts/gpu-matrix.sh "$work/matrix" 2>&1 | tee "$work/matrix.log" | tail -40
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    ;;
  stress)
    timeout -s INT 300 python3 -m pytest -ra -p no:cacheprovider --durations=10 tests/gpu/test_trace_stress.py \
      2>&1 | tee "$work/pytest-stress.log" | tail -30
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    timeout -s KILL 280 python3 benchmarks/realworld_sanitizer.py --jobs 12 --timeout 150 \
      --json "$work/sanitizer.json" 2>&1 | tee "$work/sanitizer.log" | tail -20
    ;;
  levels)
    timeout -s INT 420 python3 benchmarks/check_levels.py "$work/levels" --runs 3 --full-runs "${FULL_RUNS:-3}" --levels 3,1,2 2>&1 \
      | tee "$work/levels.log" | tail -12
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    # cupti-python hidden: the same wheels but cupti's, on a path of their own
    hidden=/tmp/ctxlab-site-nocupti
    rm -rf "$hidden" && cp -a /tmp/ctxlab-site "$hidden" && rm -rf "$hidden"/cupti "$hidden"/cupti_python*
    PYTHONPATH="$PWD:$hidden" python3 -c "import importlib.util as u; print('cupti visible:', u.find_spec('cupti'))" \
      > "$work/nocupti.log" 2>&1
    PYTHONPATH="$PWD:$hidden" timeout -s INT 150 python3 -m ctxlab check --json "$work/nocupti.json" \
      >> "$work/nocupti.log" 2>&1
    echo "exit $?" >> "$work/nocupti.log"; tail -12 "$work/nocupti.log"
    ;;
  *) echo "gpu-verify.sh: unknown part '$part' (corpus, suite, relay, matrix, stress, levels or again)" >&2; exit 2 ;;
esac
python3 scripts/repo_relative.py --out "$work" "$work"/*.log >/dev/null 2>&1 || true
tar czf "$out/$part.tar.gz" -C "$out" "$part" && rm -rf "$work"
exit $status
