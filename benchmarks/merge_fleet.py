"""How long ``ctxlab report merge`` takes over a fleet's result files, and how much memory (goal: 1,000 files
in at most 10 s).

    python benchmarks/merge_fleet.py [--files N] [--jobs N] [--json FILE] [--keep DIR]

The files are made from the results recorded on real H200s (labs/results/check.json, one GPU, and
check-all-devices.json, two), one per runner: each runner gets its own hostname and GPU UUID; every tenth
runs an older driver (12080) and every twentieth an older ctxlab, with one claim's verdict changed the way
an older judge gave it, so that the fleet view has groups and differences to find; 1 in 100 is this
machine's own environment-error record (labs/results/fleet/check-no-gpu.json). ``report merge`` then
runs as a command, writing Markdown and HTML, and its wall time and peak memory (the largest resident
set of it and its child processes, from getrusage) are recorded, with the CPU time they took and the load
average before the run: on a machine others share, the wall time says little without them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "labs" / "results"


def runner_file(n: int, one: dict, two: dict, unable: dict) -> dict:
    """Runner ``n``'s result file, from the recorded ones."""
    if n % 100 == 99:
        return {**unable, "runs": [{**r, "environment": {**r["environment"], "hostname": f"gpu-node-{n:04d}"}}
                                   for r in unable["runs"]]}
    base = two if n % 7 == 3 else one
    runs = []
    for run in base["runs"]:
        env = dict(run["environment"], hostname=f"gpu-node-{n:04d}",
                   gpu_uuid=f"GPU-{n:08x}-0000-4000-8000-{run['environment'].get('device', 0):012x}")
        claims = run["claims"]
        if n % 10 == 5:
            env["driver_version"] = 12080
        if n % 20 == 7:
            env["ctxlab"] = "0.1.0"
            claims = [dict(c, verdict="observed") if i == 0 and c["verdict"] == "holds" else c
                      for i, c in enumerate(claims)]
        runs.append(dict(run, environment=env, claims=claims))
    return {"schema": "ctxlab/1", "runs": runs}


def make_files(folder: Path, count: int) -> tuple[list[str], int]:
    one = json.loads((RESULTS / "check.json").read_text())
    two = json.loads((RESULTS / "check-all-devices.json").read_text())
    unable = json.loads((RESULTS / "fleet" / "check-no-gpu.json").read_text())
    paths, total = [], 0
    for n in range(count):
        path = folder / f"runner-{n:04d}.json"
        text = json.dumps(runner_file(n, one, two, unable))
        path.write_text(text)
        total += len(text)
        paths.append(str(path))
    return paths, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000, help="runner files (1 to 10000)")
    parser.add_argument("--jobs", type=int, default=None, help="CTXLAB_MERGE_JOBS for the merge (default: its own)")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--keep", help="make the files in this folder and keep them")
    args = parser.parse_args()
    if not 1 <= args.files <= 10000:
        parser.error("--files must be between 1 and 10000")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        paths, size = make_files(folder, args.files)
        env = dict(os.environ, **({"CTXLAB_MERGE_JOBS": str(args.jobs)} if args.jobs else {}))
        argv = [sys.executable, "-m", "ctxlab", "report", "merge", *paths, "-o", str(Path(tmp) / "matrix.md"),
                "--html", str(Path(tmp) / "matrix.html")]
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        t = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_kib, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
        if done.returncode not in (0, 1):
            print(done.stderr, file=sys.stderr)
            return 2
        markdown = (Path(tmp) / "matrix.md").read_text()
        html_size = (Path(tmp) / "matrix.html").stat().st_size
    differ = next((line for line in markdown.splitlines() if "claim(s) differ between groups" in line), "")
    report = {"environment": {"python": platform.python_version(), "machine": platform.machine(),
                              "cpus": os.cpu_count(), "jobs": args.jobs or "default"},
              "files": args.files, "input_bytes": size, "exit_status": done.returncode,
              "wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
              "load_average_before": None if load is None else round(load, 2),
              "peak_rss_mib": round(peak_kib / 1024, 1),
              "markdown_bytes": len(markdown), "html_bytes": html_size,
              "groups": sum(1 for line in markdown.splitlines() if line.startswith("- G")),
              "differs_line": differ.strip("*: "),
              "could_not_run": sum(1 for n in range(args.files) if n % 100 == 99)}
    print(f"{args.files} files ({size / 2**20:.0f} MiB): {wall:.2f} s ({cpu:.2f} s of CPU, load before "
          f"{report['load_average_before']}), "
          f"peak RSS {report['peak_rss_mib']} MiB, "
          f"exit {done.returncode}; {report['groups']} groups; {differ.strip('*: ')}")
    if args.json:  # ctxlab's one writer: replaced atomically, never half-written
        from ctxlab.output import write_outputs

        write_outputs([(args.json, json.dumps(report, indent=2) + "\n")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
