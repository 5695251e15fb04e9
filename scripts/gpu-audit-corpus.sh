#!/usr/bin/env bash
# On a GPU machine: ctxlab audit on every program of examples/realworld/ (one GPU), each with a wall-clock
# limit; the reports, logs and a summary (exit codes, seconds, findings) land in OUTDIR.
#   scripts/gpu-audit-corpus.sh OUTDIR [PROGRAM...]
# JOBS=N: N programs at once (default 1; the hang programs' stall limits leave room for a loaded machine).
# PLAIN=1: run each program alone first (not the hang programs) and record its time beside the audit's.
set -uo pipefail
out=${1:?usage: scripts/gpu-audit-corpus.sh OUTDIR [PROGRAM...]}
shift
mkdir -p "$out/audit"
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false
programs=("$@")
if [ ${#programs[@]} -eq 0 ]; then
  programs=($(ls examples/realworld/*.py | grep -v '/_'))
fi
summary="$out/audit/summary.tsv"
printf 'program\taudit_exit\tseconds\tfindings\tplain_exit\tplain_seconds\n' > "$summary"

audit_one() {  # one program: its plain run (PLAIN=1), its audit, one summary line (one write: safe in parallel)
  local prog=$1 out=$2 name args plain_code="" plain_s="" start end code found
  name=$(basename "$prog" .py)
  args=$(python3 scripts/corpus_args.py "$prog")
  if [ -n "${PLAIN:-}" ] && [[ "$name" != hang_* ]]; then
    local p0 p1
    p0=$(date +%s.%N)
    timeout -s KILL 120 python3 "$prog" > "$out/audit/$name.plain.log" 2>&1
    plain_code=$?
    p1=$(date +%s.%N)
    plain_s=$(python3 -c "print(round($p1 - $p0, 2))")
  fi
  start=$(date +%s.%N)
  timeout -s KILL 300 python3 -m ctxlab audit --format json -o "$out/audit/$name.json" $args -- "$prog" \
    > "$out/audit/$name.log" 2>&1
  code=$?
  end=$(date +%s.%N)
  found=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join(f['rule']+'@'+str((f.get('location') or {}).get('line')) for f in d['findings']))" "$out/audit/$name.json" 2>/dev/null)
  printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$name" "$code" "$(python3 -c "print(round($end - $start, 2))")" "$found" \
    "$plain_code" "$plain_s" >> "$out/audit/summary.tsv"
  echo "$name exit=$code $found"
}
export -f audit_one
printf '%s\n' "${programs[@]}" | xargs -P "${JOBS:-1}" -I{} bash -c 'audit_one "$1" "$2"' _ {} "$out"
