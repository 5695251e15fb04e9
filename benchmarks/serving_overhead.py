"""What tracing and auditing cost a multithreaded PyTorch serving program, in one run: the program bare,
under ``ctxlab trace`` and under ``ctxlab audit``, rounds alternating, each with a timeout.

    python benchmarks/serving_overhead.py [--workers N] [--requests N] [--repeats R] [--timeout S] [--json FILE]

The figure is the whole process's wall time (start-up, the program, collecting and judging what was
recorded), as a user waits for it; the program's own serving time is reported beside it.
Goals: traced at most 1.5x, audited at most 2x the bare run (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from trace_stress import ROOT, native_stacks

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "serving_program.py")


def run(mode: str, workers: int, requests: int, timeout: float) -> dict:
    import subprocess
    import time

    args = [PROGRAM, str(workers), str(requests)]
    if mode == "bare":
        cmd = [sys.executable, *args]
    elif mode == "trace":
        cmd = [sys.executable, "-m", "ctxlab", "trace", "--only", "context", "-o", os.devnull, "--", *args]
    else:
        cmd = [sys.executable, "-m", "ctxlab", "audit", "--format", "json", "-o", os.devnull, "--", *args]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stacks = native_stacks(proc.pid)
        os.killpg(proc.pid, 9)
        proc.communicate()
        return {"mode": mode, "hung": True, "native_stacks": stacks}
    wall = time.perf_counter() - t0
    line = next((text for text in reversed(out.splitlines()) if text.startswith("{")), "{}")
    return {"mode": mode, "hung": False, "status": proc.returncode, "wall_seconds": round(wall, 3),
            "serving_seconds": json.loads(line).get("serving_seconds"), "stderr_tail": err[-400:]}


def main() -> None:
    from common import positive, refuse_without_gpu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=positive, default=4)
    parser.add_argument("--requests", type=positive, default=400)
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if refuse_without_gpu("serving_overhead"):
        raise SystemExit(2)
    from ctxlab.cuda.environment import capture

    rows = []
    for _ in range(args.repeats):
        for mode in ("bare", "trace", "audit"):
            rows.append(run(mode, args.workers, args.requests, args.timeout))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "stderr_tail"}), flush=True)
    summary = {}
    for mode in ("bare", "trace", "audit"):
        done = [r for r in rows if r["mode"] == mode and not r["hung"] and r["status"] == 0]
        if done:
            summary[mode] = {"wall_seconds": statistics.median(r["wall_seconds"] for r in done),
                             "serving_seconds": statistics.median(r["serving_seconds"] or 0 for r in done),
                             "runs": len(done)}
    if "bare" in summary:
        for mode in ("trace", "audit"):
            if mode in summary:
                summary[mode]["ratio"] = round(summary[mode]["wall_seconds"] / summary["bare"]["wall_seconds"], 3)
                summary[mode]["serving_ratio"] = round(
                    summary[mode]["serving_seconds"] / max(summary["bare"]["serving_seconds"], 1e-9), 3)
    print(json.dumps(summary))
    if args.json:
        from ctxlab.output import write_output

        write_output(str(args.json), json.dumps({"environment": capture(0), "workers": args.workers,
                                            "requests": args.requests, "summary": summary, "rows": rows},
                                           indent=1) + "\n")
    ok = all(not r["hung"] and r.get("status") == 0 for r in rows)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
