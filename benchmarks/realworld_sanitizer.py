"""compute-sanitizer beside ``ctxlab audit`` on examples/realworld/: what the nearest peer reports on each program.

    python benchmarks/realworld_sanitizer.py [--jobs N] [--timeout S] [--table realworld.json] --json FILE

Runs ``compute-sanitizer --tool memcheck --report-api-errors all --leak-check full`` on every one-GPU program
of the manifest (several at once), and keeps per program the API errors it reported (by error name), the
leaks, and whether it finished. With ``--table`` (the GPU test's score table), each program's row gets the
sanitizer's column and a verdict: does the audit report at least every hazard the sanitizer reports?
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MANIFEST = os.path.join(ROOT, "examples", "realworld", "manifest.json")
API_ERROR = re.compile(r"Program hit (\w+) \(error (\d+)\) due to \"?([^\"]*?)\"? on CUDA API call to (\w+)")
LEAK = re.compile(r"Leaked (\d+) bytes")


def sanitize(program: str, timeout: float) -> dict:
    """One program under compute-sanitizer: its API errors and leaks."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    cmd = ["compute-sanitizer", "--tool", "memcheck", "--report-api-errors", "all", "--leak-check", "full",
           "--print-limit", "100", sys.executable, program]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
        text, finished = done.stdout + done.stderr, True
    except subprocess.TimeoutExpired as exc:
        text, finished = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else "", False
    errors: dict[str, list[str]] = {}
    for name, _number, _why, call in API_ERROR.findall(text):
        errors.setdefault(name, [])
        if call not in errors[name]:
            errors[name].append(call)
    leaks = [int(n) for n in LEAK.findall(text)]
    return {"program": program, "finished": finished, "api_errors": errors, "leaks": len(leaks),
            "leaked_bytes": sum(leaks), "reports_hazard": bool(errors or leaks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--table", default=None, help="the GPU test's realworld.json: add the sanitizer's column")
    parser.add_argument("--from", dest="earlier", default=None,
                        help="take the sanitizer's rows from an earlier run's JSON instead of running it again")
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
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda e: {**sanitize(e["program"], args.timeout), "kind": e["kind"]}, entries))
    for row in rows:
        print(f"{os.path.basename(row['program']):48} {'done' if row['finished'] else 'TIMEOUT':7} "
              f"errors {sorted(row['api_errors'])} leaks {row['leaks']}", flush=True)
    write(rows, args.table, args.json)


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
            if peer is not None:
                row["sanitizer"] = {k: peer[k] for k in ("api_errors", "leaks", "leaked_bytes", "finished")}
                if row["kind"] == "hazard":  # the audit names the hazard at its line where the sanitizer saw it
                    row["audit_covers_sanitizer"] = not peer["reports_hazard"] or (bool(row["matched"])
                                                                                    and not row["missed"])
        hazards = [r for r in table["programs"] if r["kind"] == "hazard" and "sanitizer" in r]
        table["sanitizer_reports_on_hazards"] = sum(bool(r["sanitizer"]["api_errors"] or r["sanitizer"]["leaks"])
                                                    for r in hazards)
        table["audit_covers_sanitizer_on_hazards"] = sum(bool(r.get("audit_covers_sanitizer")) for r in hazards)
        table["sanitizer_reports_on_clean"] = sum(bool(r["sanitizer"]["api_errors"] or r["sanitizer"]["leaks"])
                                                  for r in table["programs"] if r["kind"] == "clean"
                                                  and "sanitizer" in r)
        out["table"] = table
    from ctxlab.output import write_output

    write_output(str(path), json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
