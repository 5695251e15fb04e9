"""compute-sanitizer beside ``ctxlab audit`` on examples/realworld/: what the nearest peer reports on each program.

    python benchmarks/realworld_sanitizer.py [--jobs N] [--timeout S] [--only NAME ...] [--table realworld.json]
        --json FILE

Runs ``compute-sanitizer --tool memcheck --report-api-errors all --leak-check full`` on every one-GPU program
of the manifest (several at once; ``--only``: those whose file name starts with one of the names), and keeps
per program the API errors it reported (by error name, with each call and its first native host frame), the
memory errors (kind and kernel), the leaks, whether it finished, and its time. With ``--table`` (a score table
of the audit: the GPU test's, or benchmarks/realworld_score.py's), each hazard program's row gets the
sanitizer's column and an honest verdict: the sanitizer points at the hazard only when it reports the
hazard's own failing call (the call of the audit's matched finding) or a memory error in a kernel; leaks and
other calls' errors do not count.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MANIFEST = os.path.join(ROOT, "examples", "realworld", "manifest.json")
API_ERROR = re.compile(r"Program hit (\w+) \(error (\d+)\) due to \"?([^\"]*?)\"? on CUDA API call to (\w+)")
LEAK = re.compile(r"Leaked (\d+) bytes")
MEMORY_ERROR = re.compile(r"Invalid (__global__|__shared__|__local__) (read|write) of size (\d+) bytes?")
KERNEL_AT = re.compile(r"^=+\s+at (?:0x[0-9a-f]+ in )?([^\s(]+)", re.M)
HOST_FRAME = re.compile(r"Host Frame:\s*(?:0x[0-9a-f]+\s+)?(?:in\s+)?(\S+)")


def sanitize(program: str, timeout: float) -> dict:
    """One program under compute-sanitizer: its API errors and leaks."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    cmd = ["compute-sanitizer", "--tool", "memcheck", "--report-api-errors", "all", "--leak-check", "full",
           "--print-limit", "100", sys.executable, program]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
        text, finished = done.stdout + done.stderr, True
    except subprocess.TimeoutExpired as exc:
        text, finished = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else "", False
    seconds = time.perf_counter() - start
    errors: dict[str, list[str]] = {}
    frames: dict[str, str] = {}
    for match in API_ERROR.finditer(text):
        name, call = match.group(1), match.group(4)
        errors.setdefault(name, [])
        if call not in errors[name]:
            errors[name].append(call)
        frame = HOST_FRAME.search(text, match.end())
        if frame and call not in frames:
            frames[call] = frame.group(1)
    memory = []
    for match in MEMORY_ERROR.finditer(text):
        kernel = KERNEL_AT.search(text, match.end())
        item = {"kind": f"{match.group(1)} {match.group(2)} of {match.group(3)} bytes",
                "kernel": kernel.group(1) if kernel else None}
        if item not in memory:
            memory.append(item)
    leaks = [int(n) for n in LEAK.findall(text)]
    return {"program": program, "finished": finished, "seconds": round(seconds, 2), "api_errors": errors,
            "native_frames": frames, "memory_errors": memory, "leaks": len(leaks), "leaked_bytes": sum(leaks),
            "reports_anything": bool(errors or leaks or memory)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--table", default=None, help="the GPU test's realworld.json: add the sanitizer's column")
    parser.add_argument("--from", dest="earlier", default=None,
                        help="take the sanitizer's rows from an earlier run's JSON instead of running it again")
    parser.add_argument("--only", nargs="*", default=None, help="programs whose file name starts with these")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    if args.earlier:
        with open(args.earlier) as handle:
            rows = json.load(handle)["programs"]
        write(rows, args.table, args.json)
        return
    if not shutil.which("compute-sanitizer"):
        print("realworld_sanitizer: compute-sanitizer is not installed here", file=sys.stderr)
        raise SystemExit(2)
    with open(MANIFEST) as handle:
        entries = [e for e in json.load(handle) if e.get("gpus", 1) == 1]
    if args.only:
        entries = [e for e in entries if os.path.basename(e["program"]).startswith(tuple(args.only))]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda e: {**sanitize(e["program"], args.timeout), "kind": e["kind"]}, entries))
    for row in rows:
        print(f"{os.path.basename(row['program']):48} {'done' if row['finished'] else 'TIMEOUT':7} "
              f"errors {sorted(row['api_errors'])} leaks {row['leaks']}", flush=True)
    write(rows, args.table, args.json)


def _base(call: str) -> str:
    return re.sub(r"(_v\d+|_ptsz|_ptds)+$", "", call)


def points_at_hazard(row: dict, peer: dict) -> str:
    """How the sanitizer points at a hazard program's hazard: "call" when it reports the failing call of the
    audit's matched finding, "memory" when it reports a memory error in a kernel (a sticky error's cause), else
    "" (a leak, or another call's error, is not the hazard)."""
    if peer.get("memory_errors"):
        return "memory"
    reported = {_base(c) for calls in (peer.get("api_errors") or {}).values() for c in calls}
    for found in row.get("found", ()):
        for text in found.get("calls", ()):
            if _base(str(text).split(" ")[0]) in reported:
                return "call"
    return ""


def write(rows: list[dict], table_path: str | None, path: str) -> None:
    """The sanitizer's rows, and the audit's score table with the sanitizer's column where given."""
    out: dict = {"sanitizer": "compute-sanitizer --tool memcheck --report-api-errors all --leak-check full",
                 "programs": rows}
    if table_path and os.path.exists(table_path):
        with open(table_path) as handle:
            table = json.load(handle)
        by_program = {r["program"]: r for r in rows}
        for row in table["programs"]:
            peer = by_program.get(row["program"])
            if peer is None:
                continue
            row["sanitizer"] = {k: peer.get(k) for k in ("api_errors", "native_frames", "memory_errors", "leaks",
                                                          "finished", "seconds")}
            if row["kind"] == "hazard":
                points = points_at_hazard(row, peer)
                row["sanitizer_points_at_hazard"] = points
                row["audit_places_it"] = bool(row["matched"]) and not row["missed"]
        hazards = [r for r in table["programs"] if r["kind"] == "hazard" and "sanitizer" in r]
        table["sanitizer_points_at_hazards"] = sum(bool(r["sanitizer_points_at_hazard"]) for r in hazards)
        table["audit_places_what_the_sanitizer_points_at"] = sum(
            bool(r["sanitizer_points_at_hazard"] and r["audit_places_it"]) for r in hazards)
        table["sanitizer_hazards_compared"] = len(hazards)
        table["sanitizer_reports_on_clean"] = sum(bool(r["sanitizer"]["api_errors"] or r["sanitizer"]["memory_errors"])
                                                  for r in table["programs"] if r["kind"] == "clean"
                                                  and "sanitizer" in r)
        out["table"] = table
    from ctxlab.output import write_output

    write_output(str(path), json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
