"""A long program under ``ctxlab audit`` on a GPU: a CuPy loop of millions of small launches, audited, with the
audit's own (parent's) peak memory, the recording's size and the time from the program's last launch to the
written report.

    python benchmarks/long_program.py [--launches N] [--json FILE]

The loop runs in the audited child and prints, when its last launch has finished, its loop time and the wall
clock; the audit process is started through a small wrapper that prints its own peak resident memory
(``RUSAGE_SELF``: the parent alone, not the child it waited for) and the wall clock as it exits, so the report's
cost after the program is the difference of the two clocks. Without a GPU: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from common import positive, refuse_without_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP = """
import sys, time, cupy
launches = int(sys.argv[1])
a = cupy.zeros(1024, dtype=cupy.float32)
for _ in range(200): a += 1
cupy.cuda.Device().synchronize()
t = time.perf_counter()
for _ in range(launches): a += 1
cupy.cuda.Device().synchronize()
loop = time.perf_counter() - t
print(f"loop {loop / launches * 1e6:.3f} us/launch {loop:.2f} s; ended at {time.time():.3f}", flush=True)
"""
# The audit's own process: its peak memory and the moment it is done, written once the command has ended (its
# report out). ctxlab's console entry ends an audited run with os._exit, past any atexit handler, so the command
# group is called here directly and the figures written before the same os._exit.
WRAPPER = """
import os, resource, sys, time
from ctxlab.cli import cli
code = 0
try:
    cli(prog_name="ctxlab")
except SystemExit as done:
    code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
finally:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sys.stdout.flush()
    sys.stderr.write(f"parent peak {rss:.1f} MiB; done at {time.time():.3f}\\n")
    sys.stderr.flush()
os._exit(code)
"""


def run(launches: int, folder: str) -> dict:
    script, report = os.path.join(folder, "loop.py"), os.path.join(folder, "report.json")
    with open(script, "w") as handle:
        handle.write(LOOP)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    plain_start = time.perf_counter()
    plain = subprocess.run([sys.executable, script, str(launches)], capture_output=True, text=True, env=env)
    plain_wall = time.perf_counter() - plain_start
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WRAPPER, "audit", "--format", "json", "-o", report,
                           "--", script, str(launches)], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    loop = re.search(r"loop ([0-9.]+) us/launch ([0-9.]+) s; ended at ([0-9.]+)", done.stdout)
    parent = re.search(r"parent peak ([0-9.]+) MiB; done at ([0-9.]+)", done.stderr)
    plain_loop = re.search(r"loop ([0-9.]+) us/launch", plain.stdout)
    if not (loop and parent and plain_loop):
        raise SystemExit(f"long_program: the audited run did not say its figures (exit {done.returncode}): "
                         f"{(done.stderr or done.stdout).strip()[-600:]}")
    with open(report) as handle:
        audited = json.load(handle)
    after = float(parent.group(2)) - float(loop.group(3))
    return {"launches": launches, "plain_us_per_launch": float(plain_loop.group(1)),
            "plain_wall_s": round(plain_wall, 2),
            "audited_us_per_launch": float(loop.group(1)), "audited_loop_s": float(loop.group(2)),
            "audit_wall_s": round(wall, 2), "audit_exit": done.returncode,
            "after_program_s": round(after, 2), "after_program_us_per_launch": round(after / launches * 1e6, 3),
            "parent_peak_rss_mib": float(parent.group(1)),
            "stats": audited.get("stats", {}), "findings": len(audited.get("findings") or ())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=positive, default=5_000_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if refuse_without_gpu("long_program"):
        raise SystemExit(2)
    from ctxlab.cuda.environment import capture

    with tempfile.TemporaryDirectory(prefix="ctxlab-long-") as folder:
        result = run(args.launches, folder)
    report = {"environment": capture(0), "result": result}
    r = result
    print(f"{r['launches']:,} launches: plain {r['plain_us_per_launch']} us/launch, audited "
          f"{r['audited_us_per_launch']} us/launch; after the program {r['after_program_s']} s "
          f"({r['after_program_us_per_launch']} us/launch); the audit's peak RSS {r['parent_peak_rss_mib']} MiB; "
          f"exit {r['audit_exit']}, {r['findings']} findings; {r['stats']}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
