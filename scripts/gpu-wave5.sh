#!/usr/bin/env bash
# On a GPU machine, within one device call: the realworld corpus under the audit (several programs at once)
# and its score table, the side-by-side launch cost, then every GPU-marked test but the corpus test (several
# workers), each with a limit. The corpus's reports and logs are packed into OUTDIR/audit.tgz (one file comes
# back where hundreds may not).
#   scripts/gpu-wave5.sh OUTDIR [pytest args and paths; default: tests]
# CORPUS_S=0, TESTS_S=0: leave that part out. LAUNCH_COST="ARGS": run benchmarks/launch_cost.py ARGS (LAUNCH_S).
# LONG="ARGS": run benchmarks/long_program.py ARGS (LONG_S), the audit of a program of millions of launches.
# LEVELS="ARGS": run benchmarks/check_levels.py OUTDIR/levels ARGS (LEVELS_S), e.g. "--runs 3 --levels 3,2" (the
# full level is the comparison, run once).
# TEST_TIMEOUT: each test's limit (default 600 s: the environment matrix's fixture runs five full checks).
# REPEAT="N PATH": audit that program N times (REPEAT_S each, its --timeout 10 s less), JSON reports and logs in
# OUTDIR/repeat-K.json and .log: a hang that comes in some runs only.
# TRACE_PROGRAM=PATH: trace that program with every call's stack (--calls all, JSON), to see what a library's
# synchronisation is made of (TRACE_S).
set -uo pipefail
out=${1:?usage: scripts/gpu-wave5.sh OUTDIR [pytest args]}
shift
mkdir -p "$out"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | tee "$out/gpu.txt"
python3 -m ctxlab doctor > "$out/doctor.txt" 2>&1 || status=1
if [ "${CORPUS_S:-300}" != 0 ]; then
  JOBS=${JOBS:-8} timeout -s KILL "${CORPUS_S:-300}" scripts/gpu-audit-corpus.sh "$out" > "$out/corpus.log" 2>&1 \
    || status=1
  python3 benchmarks/realworld_score.py "$out/audit" --json "$out/realworld.json" \
    --summary "$out/audit/summary.tsv" 2>&1 | tee "$out/score.txt" || status=1
  tar czf "$out/audit.tgz" -C "$out" audit && rm -rf "$out/audit"
fi
if [ -n "${LAUNCH_COST:-}" ]; then
  # shellcheck disable=SC2086  # the arguments are meant to split
  timeout -s KILL "${LAUNCH_S:-200}" python3 benchmarks/launch_cost.py $LAUNCH_COST --json "$out/launch-cost.json" \
    > "$out/launch-cost.txt" 2> "$out/launch-cost.log" || status=1
  cat "$out/launch-cost.txt"
fi
if [ -n "${LONG:-}" ]; then
  # shellcheck disable=SC2086  # the arguments are meant to split
  timeout -s KILL "${LONG_S:-300}" python3 benchmarks/long_program.py $LONG --json "$out/long-program.json" \
    > "$out/long-program.txt" 2>&1 || status=1
  cat "$out/long-program.txt"
fi
if [ -n "${LEVELS:-}" ]; then
  # shellcheck disable=SC2086  # the arguments are meant to split
  timeout -s KILL "${LEVELS_S:-300}" python3 benchmarks/check_levels.py "$out/levels" $LEVELS \
    > "$out/levels.txt" 2>&1 || status=1
  tail -5 "$out/levels.txt"
fi
if [ -n "${TRACE_PROGRAM:-}" ]; then
  XLA_PYTHON_CLIENT_PREALLOCATE=false timeout -s KILL "${TRACE_S:-120}" python3 -m ctxlab trace --calls all \
    --format json -o "$out/trace-program.json" --timeout 100 -- "$TRACE_PROGRAM" > "$out/trace-program.log" 2>&1 \
    || status=1
  tail -3 "$out/trace-program.log"
fi
if [ -n "${REPEAT:-}" ]; then
  read -r times program <<< "$REPEAT"
  for k in $(seq 1 "$times"); do
    timeout -s KILL "${REPEAT_S:-60}" python3 -m ctxlab audit --timeout "$(( ${REPEAT_S:-60} - 10 ))" --format json \
      -o "$out/repeat-$k.json" -- "$program" > "$out/repeat-$k.log" 2>&1
    echo "repeat $k of $program: exit $?" | tee -a "$out/repeat.txt"
  done
fi
if [ "${TESTS_S:-260}" != 0 ]; then
  targets=("$@")
  [ ${#targets[@]} -eq 0 ] && targets=(tests)
  mkdir -p "$out/results"
  # SIGINT first: pytest then names the tests that failed so far (a kill would lose them), KILL 30 s later
  CTXLAB_RESULTS="$out/results" timeout -s INT -k 30 "${TESTS_S:-260}" python3 -m pytest -m gpu -n "${WORKERS:-6}" \
    -p no:cacheprovider --timeout "${TEST_TIMEOUT:-600}" -ra --durations 20 --junitxml="$out/pytest.xml" \
    --ignore=tests/gpu/test_realworld.py "${targets[@]}" > "$out/pytest.log" 2>&1 || status=1
  tail -60 "$out/pytest.log"
fi
exit $status
