"""The tracer's concurrency stress: threads that initialise CUDA at the same moment, bare, under
``ctxlab trace`` and under ``ctxlab audit``, through each library, with a timeout on every run.

    python benchmarks/trace_stress.py [--libraries torch,cupy,...] [--threads 2,4,8,16,32] [--timeout S]
                                      [--json FILE]

Each run is ``benchmarks/stress_program.py LIBRARY THREADS`` in a fresh process. A run past its timeout is a
hang: every thread's Python stack (faulthandler, a few seconds before the timeout) and, where cuda-gdb is
installed, every thread's native stack are kept in the JSON. Threads started before the tracer are run as
``--tracer-after-threads`` (the program starts ctxlab's tracer itself once its threads wait at the barrier).
Each traced run's time is set against the bare run of the same library and thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAM = os.path.join(HERE, "stress_program.py")
LIBRARIES = ("torch", "cupy", "runtime", "cuda_core", "jax", "mix")
MODES = ("bare", "trace", "audit", "trace-after-threads", "audit-after-threads")


def command(mode: str, library: str, threads: int) -> list[str]:
    """The command line of one run."""
    program = [PROGRAM, library, str(threads)]
    if mode == "bare":
        return [sys.executable, *program]
    if mode in ("trace", "audit"):
        extra = ["--only", "context", "-o", os.devnull] if mode == "trace" else ["--format", "json", "-o", os.devnull]
        return [sys.executable, "-m", "ctxlab", mode, *extra, "--", *program]
    return [sys.executable, *program, "--tracer-after-threads", mode.split("-")[0]]


def native_stacks(pid: int) -> str:
    """Every thread's native stack of a hung process, where cuda-gdb can attach."""
    debugger = shutil.which("cuda-gdb") or shutil.which("gdb")
    if not debugger:
        return "no debugger here"
    try:
        done = subprocess.run([debugger, "-p", str(pid), "-batch", "-ex", "thread apply all bt 30"],
                              capture_output=True, text=True, timeout=60)
        return done.stdout[-60000:]
    except (subprocess.TimeoutExpired, OSError) as exc:
        return f"{debugger} failed: {exc}"


def run_one(mode: str, library: str, threads: int, timeout: float) -> dict:
    """One run: its status, time, the program's JSON line, and on a hang both kinds of stacks."""
    env = dict(os.environ, CTXLAB_STRESS_DUMP=str(max(1.0, timeout - 5)), PYTHONUNBUFFERED="1",
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    proc = subprocess.Popen(command(mode, library, threads), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT, start_new_session=True)
    row: dict = {"mode": mode, "library": library, "threads": threads}
    try:
        out, err = proc.communicate(timeout=timeout)
        row.update(status=proc.returncode, hung=False)
    except subprocess.TimeoutExpired:
        row.update(hung=True, native_stacks=native_stacks(proc.pid))
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        row.update(status=None, python_stacks=err[-60000:])
    row["wall_seconds"] = round(time.perf_counter() - t0, 3)
    line = next((text for text in reversed(out.splitlines()) if text.startswith("{")), None)
    if line:
        row["program"] = json.loads(line)
    if row.get("status") not in (0, None):
        row["stderr_tail"] = err[-3000:]
    return row


def main() -> None:
    from common import counts

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--libraries", default=",".join(LIBRARIES), help="comma-separated, of " + ", ".join(LIBRARIES))
    parser.add_argument("--threads", type=counts(256), default=[2, 4, 8, 16, 32], help="thread counts, e.g. 2,16")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of " + ", ".join(MODES))
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds before a run counts as hung")
    parser.add_argument("--json", default=None, help="write the rows and the environment here")
    args = parser.parse_args()
    libraries = [x for x in args.libraries.split(",") if x]
    modes = [x for x in args.modes.split(",") if x]
    bad = [x for x in libraries if x not in LIBRARIES] + [x for x in modes if x not in MODES]
    if bad:
        parser.error(f"unknown: {', '.join(bad)}")
    from common import refuse_without_gpu

    if refuse_without_gpu("trace_stress"):
        raise SystemExit(2)
    from ctxlab.cuda.environment import capture

    rows = []
    for library in libraries:
        for threads in args.threads:
            bare = None
            for mode in modes:
                row = run_one(mode, library, threads, args.timeout)
                if mode == "bare":
                    bare = row["wall_seconds"]
                elif bare and not row["hung"]:
                    row["overhead"] = round(row["wall_seconds"] / bare, 2)
                rows.append(row)
                state = "HUNG" if row["hung"] else f"exit {row['status']}"
                print(f"{library:9} {threads:3} threads {mode:20} {state:8} {row['wall_seconds']:7.2f} s"
                      + (f"  {row['overhead']:.2f}x" if "overhead" in row else ""), flush=True)
    hung = [r for r in rows if r["hung"]]
    failed = [r for r in rows if not r["hung"] and r["status"] != 0]
    print(f"{len(rows)} runs: {len(hung)} hung, {len(failed)} failed")
    if args.json:
        from ctxlab.output import write_output

        write_output(str(args.json), json.dumps({"environment": capture(0), "timeout_seconds": args.timeout,
                                            "rows": rows, "hung": len(hung), "failed": len(failed)},
                                           indent=1) + "\n")
    raise SystemExit(1 if hung or failed else 0)


if __name__ == "__main__":
    main()
