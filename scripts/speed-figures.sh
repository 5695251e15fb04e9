#!/usr/bin/env bash
# On a GPU machine: the speed figures, written to the folder given:
#  - what processes (and threads of one process) making contexts at once cost each other, with the driver's
#    defaults and with CUDA_DEVICE_MAX_CONNECTIONS=1;
#  - check's wall time with --profile for the labs of wave 1 (default repeats, and --repeats 1), then the same
#    under CUDA_DEVICE_MAX_CONNECTIONS=1 with the default run as --baseline (any verdict that moved is drift);
#  - the ways of handing a verified step between threads, and the handoff benchmark against the native relay;
#  - the CLI's start-up.
#   scripts/speed-figures.sh OUTDIR [JOBS...]     (JOBS: pool widths to time check at; default: check's own)
set -uo pipefail
out=${1:?usage: scripts/speed-figures.sh OUTDIR [JOBS...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)  # the folder given, before the cd below
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
unset CUDA_DEVICE_MAX_CONNECTIONS  # the default runs are the driver's defaults; the others set it themselves
status=0
run() {  # run NAME COMMAND...: the command's output to NAME.txt (and the terminal); a failure is remembered
  local name=$1
  shift
  "$@" 2>&1 | tee "$out/$name.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
run context_contention python3 benchmarks/context_contention.py --json "$out/context_contention.json"
CUDA_DEVICE_MAX_CONNECTIONS=1 run context_contention-connections1 \
  python3 benchmarks/context_contention.py --json "$out/context_contention-connections1.json"
wave1=(python3 -m ctxlab check --only migrate,refcount,lifecycle,modules --profile)
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(default)
width_of() { [ "$1" = default ] || echo "--jobs $1"; }
for j in "${jobs[@]}"; do
  run "check-profile-wave1-jobs$j" "${wave1[@]}" $(width_of "$j") --json "$out/check-wave1-jobs$j.json"
done
# The rest at the first width, so that their times compare with that run's (their --baseline).
first=$(width_of "${jobs[0]}")
run check-profile-wave1-repeats1 "${wave1[@]}" $first --repeats 1 --json "$out/check-wave1-repeats1.json"
CUDA_DEVICE_MAX_CONNECTIONS=1 run check-profile-wave1-connections1 "${wave1[@]}" $first \
  --baseline "$out/check-wave1-jobs${jobs[0]}.json" --json "$out/check-wave1-connections1.json"
CUDA_DEVICE_MAX_CONNECTIONS=1 run check-profile-wave1-connections1-repeats1 "${wave1[@]}" $first --repeats 1 \
  --baseline "$out/check-wave1-repeats1.json" --json "$out/check-wave1-connections1-repeats1.json"
run handoff_variants python3 benchmarks/handoff_variants.py --json "$out/handoff_variants.json"
run handoff_breakdown python3 benchmarks/handoff_breakdown.py --json "$out/handoff_breakdown.json"
run cli_startup python3 benchmarks/cli_startup.py --json "$out/cli_startup.json"
# The printed figures name no path of this machine (the JSON keeps what the labs observed, nvcc's scratch paths too).
python3 scripts/repo_relative.py --out "$out" "$out"/*.txt || status=1
exit $status
