"""How long ``ctxlab show`` takes, and how much memory, on a large result (goal: 64 MiB in 10 s and 500 MB).

    python benchmarks/render_large.py [--source FILE] [--size 64M] [--runs N] [--json FILE]

The result is made from a recorded one (``--source``, labs/results/migrate.json by default: its
observations are the smallest, so a file of a given size holds the most of them): every run's
observations are repeated, as they are, until the file is as large as ``--size`` allows, written
compact (more observations to the byte than ctxlab's indented files). Then ``ctxlab show FILE`` (the
table) and ``ctxlab show FILE --format json``, held to the goal, and beside them ``--steps``, ``--html``
and ``--format markdown`` run as child processes, ``--runs`` times each, their output going to a file;
each child's wall time and peak resident memory (``os.wait4``: the child's own ``ru_maxrss``, what
``getrusage(RUSAGE_CHILDREN)`` takes the largest of) are recorded. Exit status 1 when the table or the
JSON is over the goal, 2 for a bad argument (one line).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, NoReturn

from common import recorded_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SOURCE = os.path.join(ROOT, "labs", "results", "migrate.json")
GOAL_SECONDS = 10.0
GOAL_MB = 500.0
# What runs: show's arguments (REPORT: the report's path, where it is not standard output).
FORMATS = {"table": [], "json": ["--format", "json"], "steps": ["--steps"], "html": ["--html", "REPORT"],
           "markdown": ["--format", "markdown"]}
GOAL_FORMATS = ("table", "json")  # what issue 26 holds to the goal; the others are recorded beside them


class OneLineParser(argparse.ArgumentParser):
    """argparse, its errors in one line (``render_large.py: error: ...``) with exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def size(text: str) -> int:
    """An argparse type: a size in bytes, with K, M or G (powers of 1024), from 1 KiB to 1 GiB."""
    match = re.fullmatch(r"\s*(\d{1,10})\s*([KMG]?)i?B?\s*", text, re.I)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 64M")
    value = int(match[1]) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match[2].upper()]
    if not 2**10 <= value <= 2**30:
        raise argparse.ArgumentTypeError(f"{text!r}: give a size from 1K to 1G")
    return value


def runs_count(text: str) -> int:
    """An argparse type: how many times each command runs, 1 to 100."""
    if not re.fullmatch(r"\d{1,3}", text.strip()) or not 1 <= int(text) <= 100:
        raise argparse.ArgumentTypeError(f"{text!r}: give a count from 1 to 100")
    return int(text)


def large_document(source: dict, target: int) -> tuple[str, int]:
    """``source`` (a ctxlab/1 document) with its observations repeated until its compact JSON is as large
    as ``target`` bytes allows; the text and the number of observations."""
    runs = source["runs"] if "runs" in source else [source]
    originals = [list(run["observations"]) for run in runs]
    if not any(originals):
        raise ValueError("the source result has no observations to repeat")

    def text_with(copies: int) -> str:
        for run, observations in zip(runs, originals, strict=True):
            run["observations"] = observations * copies
        return json.dumps(source)

    one = len(text_with(1)) - len(text_with(0))
    copies = max(1, (target - len(text_with(0))) // max(one, 1))  # each copy adds the same text
    return text_with(copies), copies * sum(len(o) for o in originals)


def measure(argv: list[str], out_path: str) -> tuple[float, float, int]:
    """Run ``argv`` with standard output to ``out_path``: wall seconds, peak RSS in MB, exit status."""
    with open(out_path, "wb") as out:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        assert child.stderr is not None
        child.stderr.read()  # drained, so a chatty child never blocks on a full pipe
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, child.returncode  # ru_maxrss is in KiB on Linux


def check_output(fmt: str, out_path: str, observations: int) -> None:
    """The report is there: the table ends with its summary, the JSON holds every observation, the page
    draws, the Markdown has its claims."""
    if fmt in ("html", "markdown"):
        with open(out_path, encoding="utf-8") as handle:
            if ("<svg" if fmt == "html" else "| verdict | claim |") not in handle.read():
                raise SystemExit(f"render_large: the {fmt} report is not what show writes")
    elif fmt == "json":
        with open(out_path, encoding="utf-8") as handle:
            document = json.load(handle)
        found = sum(len(r["observations"]) for r in document.get("runs", [document]))
        if found != observations:
            raise SystemExit(f"render_large: the JSON report holds {found} observations, not {observations}")
    else:
        with open(out_path, encoding="utf-8") as handle:
            if "summary:" not in handle.read():
                raise SystemExit("render_large: the table has no summary")


def main() -> int:
    parser = OneLineParser(prog="render_large.py", description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="the recorded result to grow (ctxlab/1)")
    parser.add_argument("--size", type=size, default=64 * 2**20, help="the large file's size (default 64M)")
    parser.add_argument("--runs", type=runs_count, default=3, help="runs of each command (default 3)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    from ctxlab.records.model import ResultFileError

    try:
        source = recorded_source(args.source)  # a result ctxlab reads, refused in its one line otherwise
        text, observations = large_document(source, args.size)
    except (ResultFileError, ValueError) as exc:
        parser.error(f"--source: {exc}")
    if len(text.encode()) > args.size:
        parser.error(f"--size {args.size} is smaller than {args.source} with its observations once")
    report: dict[str, Any] = {
        "environment": {"python": platform.python_version(), "machine": platform.machine(),
                        "cpus": os.cpu_count(), "ctxlab": _ctxlab_version()},
        "source": os.path.relpath(os.path.abspath(args.source), ROOT), "file_bytes": len(text.encode()),
        "observations": observations, "runs": args.runs,
        "goal": {"seconds": GOAL_SECONDS, "peak_rss_mb": GOAL_MB}, "formats": {}}
    with tempfile.TemporaryDirectory(prefix="render_large.") as tmp:
        path = os.path.join(tmp, "large.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        del text
        limit = [] if report["file_bytes"] <= 64 * 2**20 else ["--max-size", str(report["file_bytes"])]
        for fmt, extra in FORMATS.items():
            out_path = os.path.join(tmp, f"report.{fmt}")
            argv = [out_path if arg == "REPORT" else arg for arg in extra]
            stdout = out_path + ".stdout" if "REPORT" in extra else out_path
            times, peaks = [], []
            for _ in range(args.runs):
                seconds, peak, status = measure([sys.executable, "-m", "ctxlab", "show", path, *argv, *limit],
                                                stdout)
                if status != 0:
                    raise SystemExit(f"render_large: ctxlab show ({fmt}) exited {status}")
                times.append(seconds)
                peaks.append(peak)
            check_output(fmt, out_path, observations)
            report["formats"][fmt] = {
                "command": " ".join(["ctxlab show FILE", *extra, *limit]).replace("REPORT", f"report.{fmt}"),
                "seconds": [round(t, 3) for t in times], "median_seconds": round(statistics.median(times), 3),
                "peak_rss_mb": round(max(peaks), 1), "report_bytes": os.path.getsize(out_path),
                "within_goal": statistics.median(times) <= GOAL_SECONDS and max(peaks) <= GOAL_MB}
    import resource

    report["peak_rss_mb_all_children"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    report["goal_formats"] = list(GOAL_FORMATS)
    report["within_goal"] = all(report["formats"][fmt]["within_goal"] for fmt in GOAL_FORMATS)
    print(f"{report['file_bytes'] / 2**20:.1f} MiB, {observations} observations from {report['source']}")
    for fmt, figures in report["formats"].items():
        print(f"show {fmt:8}  median {figures['median_seconds']:6.2f} s  peak {figures['peak_rss_mb']:7.1f} MB"
              f"{'' if figures['within_goal'] else '  (over the goal)'}")
    return finish(report, " and ".join(GOAL_FORMATS), args.json)


def finish(report: dict, formats: str, json_path: str | None) -> int:
    """The goal's line, the figures written to ``json_path`` when asked, and the exit status (1: a goal missed)."""
    met = "met" if report["within_goal"] else "NOT met"
    print(f"goal {GOAL_SECONDS:.0f} s and {GOAL_MB:.0f} MB for {formats}: {met}")
    if json_path:  # ctxlab's one writer: replaced atomically, never half-written
        from ctxlab.output import write_outputs

        write_outputs([(json_path, json.dumps(report, indent=2) + "\n")])
    return 0 if report["within_goal"] else 1


def _ctxlab_version() -> str:
    import ctxlab

    return ctxlab.__version__


if __name__ == "__main__":
    sys.exit(main())
