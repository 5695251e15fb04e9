"""What each tool adds per kernel launch, side by side in one run: plain, ``ctxlab trace``, ``ctxlab audit`` (and
the audit with its older stack path, ``CTXLAB_STACKS=snapshot``), the PyTorch profiler with CUDA activities,
and compute-sanitizer, on a CuPy launch loop and a PyTorch op loop; and ``cupti-dispatch``, a trace whose
callback returns at once (``CTXLAB_CALLBACK=off``): what CUPTI itself costs before ctxlab's callback does
anything.

    python benchmarks/launch_cost.py [--launches N] [--repeats R] [--libraries cupy,torch] [--tools T,...]
                                     [--json FILE]

Each run is a fresh process; the rounds go through the tools in a rotating order so drift hits all of them.
The program times its own loop (after a warm-up) in five stretches and prints the median's microseconds per
launch; the whole process's wall
time (start, imports, the tool's own start and its report) is measured around it. Reported: medians per tool,
and each tool's added microseconds per launch over plain. Without a GPU: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP = """
import os, sys, time
launches = int(sys.argv[1])
library = sys.argv[2]
profile = os.environ.get("LAUNCH_COST_PROFILER") == "1"
if library == "cupy":
    import cupy
    a = cupy.zeros(1024, dtype=cupy.float32)
    def step(): a.__iadd__(1)
    def sync(): cupy.cuda.Device().synchronize()
else:
    import torch
    a = torch.zeros(1024, device="cuda")
    def step(): a.add_(1)
    def sync(): torch.cuda.synchronize()
for _ in range(200): step()
sync()
def loop():  # the median of five stretches: a stall in one (another process, a page fault) moves no figure
    part, times = launches // 5, []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(part): step()
        sync()
        times.append((time.perf_counter() - t) / part)
    return sorted(times)[2]
if profile:
    import torch
    from torch.profiler import ProfilerActivity, profile as profiler
    with profiler(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        seconds = loop()
else:
    seconds = loop()
print(f"loop {seconds * 1e6:.3f} us/launch", flush=True)
"""
TOOLS = ("plain", "cupti-dispatch", "trace", "audit", "audit-snapshot", "torch.profiler", "compute-sanitizer")


def command(tool: str, script: str, launches: int, library: str) -> tuple[list[str], dict]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    program = [script, str(launches), library]
    if tool in ("trace", "cupti-dispatch"):
        if tool == "cupti-dispatch":  # CUPTI calls ctxlab's callback, which returns at once: CUPTI's own cost
            env["CTXLAB_CALLBACK"] = "off"
        return [sys.executable, "-m", "ctxlab", "trace", "-o", os.devnull, "--", *program], env
    if tool in ("audit", "audit-snapshot"):
        if tool == "audit-snapshot":
            env["CTXLAB_STACKS"] = "snapshot"
        return [sys.executable, "-m", "ctxlab", "audit", "-o", os.devnull, "--", *program], env
    if tool == "torch.profiler":
        env["LAUNCH_COST_PROFILER"] = "1"
    if tool == "compute-sanitizer":
        return ["compute-sanitizer", "--print-limit", "1", sys.executable, *program], env
    return [sys.executable, *program], env


def run_once(tool: str, script: str, launches: int, library: str) -> dict:
    cmd, env = command(tool, script, launches, library)
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    wall = time.perf_counter() - t
    found = re.search(r"loop ([0-9.]+) us/launch", done.stdout)
    if not found:
        return {"error": f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-400:]}"}
    return {"us_per_launch": float(found.group(1)), "wall_s": wall}


def measure(library: str, launches: int, repeats: int, tools: tuple[str, ...], script: str) -> dict:
    runs: dict[str, list[dict]] = {tool: [] for tool in tools}
    for i in range(repeats):
        order = tools[i % len(tools):] + tools[:i % len(tools)]
        for tool in order:
            runs[tool].append(run_once(tool, script, launches, library))
            print(f"  {library} round {i + 1}/{repeats} {tool}: {runs[tool][-1]}", file=sys.stderr, flush=True)
    table: dict[str, dict] = {}
    for tool, got in runs.items():
        good = [r for r in got if "error" not in r]
        if not good:
            table[tool] = {"error": got[-1]["error"]}
            continue
        table[tool] = {"us_per_launch": round(statistics.median(r["us_per_launch"] for r in good), 3),
                       "wall_s": round(statistics.median(r["wall_s"] for r in good), 3), "runs": got}
    plain = table.get("plain", {})
    for row in table.values():
        if "error" not in row and "error" not in plain:
            row["added_us_per_launch"] = round(row["us_per_launch"] - plain["us_per_launch"], 3)
            row["wall_ratio"] = round(row["wall_s"] / plain["wall_s"], 3)
    return {"library": library, "launches": launches, "repeats": repeats, "tools": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--libraries", default="cupy,torch")
    parser.add_argument("--tools", default=",".join(TOOLS), help="which of them (plain is the baseline)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    tools = tuple(t for t in args.tools.split(",") if t)
    unknown = [t for t in tools if t not in TOOLS]
    if unknown or "plain" not in tools:
        parser.error(f"--tools: give plain and any of {', '.join(TOOLS[1:])} "
                     f"(not {', '.join(unknown) or 'without plain'})")
    if "compute-sanitizer" in tools and not shutil.which("compute-sanitizer"):
        tools = tuple(t for t in tools if t != "compute-sanitizer")
        print("launch_cost: compute-sanitizer is not on PATH: left out", file=sys.stderr)
    from ctxlab.cuda.environment import BadDevice, NoGpu, capture, require_device

    try:
        require_device(0)
    except (NoGpu, BadDevice) as exc:
        print(f"launch_cost: cannot measure here: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    script = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ctxlab-launch-cost.py")
    with open(script, "w") as handle:
        handle.write(LOOP)
    measures = [measure(library, args.launches, args.repeats, tools, script) for library in args.libraries.split(",")]
    report = {"environment": capture(0), "measures": measures}
    for m in measures:
        print(f"{m['library']} loop, {m['launches']} launches, medians of {m['repeats']}:")
        for tool, row in m["tools"].items():
            if "error" in row:
                print(f"  {tool:18} not measured: {row['error'][:200]}")
            else:
                print(f"  {tool:18} {row['us_per_launch']:9.2f} us/launch (+{row.get('added_us_per_launch', 0):.2f})"
                      f"  process {row['wall_s']:.2f} s ({row.get('wall_ratio', 1):.2f}x)")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
