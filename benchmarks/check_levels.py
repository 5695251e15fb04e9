"""Time ``ctxlab check`` at each level and compare each lower level's verdicts with the full check's.

    python benchmarks/check_levels.py OUTDIR [--runs 3] [--levels 3,1,2] [--full-runs 1]

Runs the whole command (``python -m ctxlab check --level L --json ...``, interpreter start included, as a
HealthCheckProgram pays for it) ``--runs`` times per level (level 3 ``--full-runs`` times), alternating the
levels, on one GPU; each check orders its jobs by the last one's timings (harness.timing_cache), as a node
running its health check again and again does. The first
full-level run's files (check.json, check.xml, check.md) are the full check. Writes OUTDIR/levels.json: each
level's wall seconds (every run, median), its counts of judged, unjudged and skipped claims, and
``differences``: every claim a lower level judged whose verdict differs from the full check's (the promise of
each level: none). Exit 1 when any differs or a check failed, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import positive, refuse_without_gpu


def _levels(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give levels such as 3,1,2") from None
    if not values or any(v not in (1, 2, 3) for v in values) or 3 not in values:
        raise argparse.ArgumentTypeError(f"{text!r}: levels are 1, 2 and 3, and 3 (the comparison) must be among them")
    return values


def _run(level: int, out: Path, index: int) -> dict:
    stem = out / f"level{level}-run{index}"
    argv = [sys.executable, "-m", "ctxlab", "check", "--level", str(level), "--json", f"{stem}.json",
            "--format", "table", "--output", f"{stem}.txt"]
    if level == 3 and index == 0:  # the full check's other reports, as labs/results/ keeps them
        argv += ["--junit", str(out / "check.xml"), "--markdown", str(out / "check.md")]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - t0
    (stem.with_suffix(".log")).write_text(done.stdout + done.stderr)
    print(f"level {level} run {index}: {seconds:.2f} s, exit {done.returncode}", flush=True)
    return {"level": level, "run": index, "seconds": round(seconds, 3), "exit": done.returncode,
            "json": f"{stem.name}.json"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=positive, default=3)
    parser.add_argument("--levels", type=_levels, default=[3, 1, 2])
    parser.add_argument("--full-runs", type=positive, default=None,
                        help="runs of level 3 (default: --runs); the first of each index is its comparison")
    args = parser.parse_args()
    if refuse_without_gpu("check_levels"):
        return 2
    import ctxlab
    from ctxlab.suite import level_differences

    args.out.mkdir(parents=True, exist_ok=True)
    full_runs = args.full_runs or args.runs
    runs = [_run(level, args.out, index) for index in range(max(args.runs, full_runs)) for level in args.levels
            if index < (full_runs if level == 3 else args.runs)]
    loaded = {(r["level"], r["run"]): ctxlab.load(args.out / r["json"]) for r in runs}
    full = loaded[(3, 0)]
    shutil.copyfile(args.out / "level3-run0.json", args.out / "check.json")  # the full check, as labs/results/
    levels = {}
    differences = []
    for level in args.levels:
        mine = [r for r in runs if r["level"] == level]
        claims = [c for lab_run in loaded[(level, 0)] for c in lab_run.claims]
        levels[str(level)] = {
            "seconds": [r["seconds"] for r in mine],
            "median_s": round(statistics.median(r["seconds"] for r in mine), 3),
            "exit": [r["exit"] for r in mine], "claims": len(claims),
            "judged": sum(c.verdict not in ("unjudged", "skipped") for c in claims),
            "unjudged": sum(c.verdict == "unjudged" for c in claims),
            "skipped": sum(c.verdict == "skipped" for c in claims)}
        if level != 3:
            for r in mine:
                differences += [{**d, "run": r["run"]} for d in level_differences(loaded[(level, r["run"])], full)]
    environment = full[0].environment if full else {}
    report = {"environment": environment, "full_check": "check.json", "runs": runs, "levels": levels,
              "differences": differences}
    (args.out / "levels.json").write_text(json.dumps(report, indent=2) + "\n")
    for level, row in levels.items():
        print(f"level {level}: median {row['median_s']:.2f} s of {len(row['seconds'])}; {row['judged']} judged, "
              f"{row['unjudged']} unjudged, {row['skipped']} skipped of {row['claims']}")
    print(f"{len(differences)} verdicts differ from the full check")
    return 1 if differences or any(r["exit"] not in (0,) for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
