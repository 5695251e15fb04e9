"""How long ``ctxlab show`` takes, and how much memory, on a result that is one huge string (goal: 64 MiB in
10 s and 500 MB, issue 38).

    python benchmarks/render_one_string.py [--source FILE] [--sizes 1M,8M,64M] [--fields evidence,...]
                                           [--kinds word,words,wide] [--runs N] [--json FILE]

The result is a recorded one (``--source``, labs/results/migrate.json by default), its first claim made a
``fails`` one (its evidence is then shown whole: the worst case) and one string put in a field (``--fields``:
evidence, statement, id, lab, scenario, message, output_tail) until the file is as large as each of
``--sizes``. The string is one of ``--kinds``: ``word`` (one word, no space: what the fold cuts), ``words``
(short words and spaces), ``wide`` (East Asian characters, two cells each, written as UTF-8). Then ``ctxlab
show FILE`` in each of FORMATS runs as a child process (COLUMNS=80), ``--runs`` times, its output going to
a file; each child's wall time and peak resident memory (``os.wait4``: its own ``ru_maxrss``) are recorded,
and what it wrote is checked. Linux carries a parent's peak into a child's ``ru_maxrss`` across exec, so each
file is made in a process of its own and this one stays small; its own peak, the floor under every figure,
is recorded as ``floor_mb``. What it wrote is checked (the table: every line within 80 cells, a cut
string said to be cut). Exit status 1 when one of GOAL_FORMATS at 64 MiB or less is over the goal, 2 for
a bad argument (one line).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
from typing import Any

from common import recorded_source
from render_large import GOAL_MB, GOAL_SECONDS, OneLineParser, finish, measure, runs_count, size

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SOURCE = os.path.join(ROOT, "labs", "results", "migrate.json")
FIELDS = ("evidence", "statement", "id", "lab", "scenario", "message", "output_tail")
KINDS = {"word": "x", "words": "lorem ipsum ", "wide": "日本語"}
# What runs: show's arguments (REPORT: the report's path, where it is not standard output).
FORMATS = {"table": [], "full": ["--full"], "steps": ["--steps"], "markdown": ["--format", "markdown"],
           "junit": ["--format", "junit"], "json": ["--format", "json"], "html": ["--html", "REPORT"]}
SAID_CUT = ("evidence", "id", "lab", "message")  # shown whole but for the cut (a statement: one line; output: its end)
GOAL_FORMATS = ("table", "full", "steps", "markdown", "junit", "json", "html")  # every format show writes


def names(choices: tuple[str, ...] | dict) -> Any:
    """An argparse type: a comma-separated list of some of ``choices``."""
    def parse(text: str) -> list[str]:
        chosen = [part.strip() for part in text.split(",")]
        unknown = [part for part in chosen if part not in choices]
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(choices)}")
        return list(dict.fromkeys(chosen))
    return parse


def sizes(text: str) -> list[int]:
    """An argparse type: sizes such as 1M,8M,64M (each from 1K to 1G)."""
    return [size(part) for part in text.split(",")]


def put(doc: dict, field: str, text: str) -> None:
    """``text`` in ``field`` of the document's first run (its first claim made a fails one)."""
    run = doc["runs"][0] if "runs" in doc else doc
    first = run["claims"][0]
    first["verdict"] = "fails"
    if field in ("evidence", "statement", "id"):
        first[field] = text
    elif field == "lab":
        run["lab"] = text
    elif field == "scenario":
        run["observations"][0]["scenario"] = text
    else:
        run.setdefault("errors", []).append({"scenario": "one-string", "kind": "crash", "message": "it broke",
                                            "output_tail": "tail", field: text})


def overhead(source: dict, field: str) -> int:
    """The bytes of the source with an empty string in ``field``: what a file's size leaves to the string."""
    empty = json.loads(json.dumps(source))
    put(empty, field, "")
    return len(json.dumps(empty, ensure_ascii=False).encode())


def one_string_document(source: dict, field: str, kind: str, target: int) -> tuple[str, int]:
    """The source with one string in ``field`` as long as a file of ``target`` bytes allows: the document's
    text (UTF-8, compact) and the string's length in characters."""
    rest = overhead(source, field)
    unit = KINDS[kind]
    per_char = len(unit.encode()) / len(unit)
    length = int((target - rest) / per_char)
    if length < 1:
        raise ValueError(f"{target} bytes is smaller than the source without the string ({rest} bytes)")
    text = (unit * (length // len(unit) + 1))[:length]
    if field in ("id", "lab", "scenario"):
        text = "a" + text[1:]  # a name starts with a letter (the schema's own rule for ids)
    doc = json.loads(json.dumps(source))
    put(doc, field, text)
    return json.dumps(doc, ensure_ascii=False), length


def _holds(path: str, marker: str) -> bool:
    """Whether the file holds ``marker``, read a chunk at a time (a report may be 130 MB: see the docstring)."""
    tail = ""
    with open(path, encoding="utf-8") as handle:
        while chunk := handle.read(2**20):
            if marker in tail + chunk:
                return True
            tail = chunk[-len(marker):]
    return False


def check_output(fmt: str, out_path: str, field: str, length: int) -> None:
    """The report is there and as it should be: the table within 80 cells and saying what it cut."""
    from ctxlab.report.screen import text_width

    expected = {"markdown": "| verdict | claim |", "junit": "<testsuite", "json": '"schema"', "html": "<svg"}
    if fmt in expected:
        if not _holds(out_path, expected[fmt]):
            raise SystemExit(f"render_one_string: the {fmt} report is not what show writes")
        return
    kept: list[str] = []
    with open(out_path, encoding="utf-8") as handle:
        for line in handle:
            if text_width(line.rstrip("\n")) > 80:
                raise SystemExit(f"render_one_string: the {fmt} table has a line wider than 80")
            if len(kept) < 2**14:
                kept.append(line)
    if not _holds(out_path, "summary:"):
        raise SystemExit(f"render_one_string: the {fmt} table has no summary")
    if fmt == "full" or length <= 4000:
        return
    if os.path.getsize(out_path) > 2**20:  # cut, the string costs the table no more than a screen or two
        raise SystemExit(f"render_one_string: the {fmt} table holds {os.path.getsize(out_path)} bytes of a cut string")
    said = " ".join("".join(kept).split())
    if field in SAID_CUT and "more characters" not in said and "characters before" not in said:
        raise SystemExit(f"render_one_string: the {fmt} table cut the {field} and did not say so")


def main() -> int:
    parser = OneLineParser(prog="render_one_string.py", description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="the recorded result to put the string in")
    parser.add_argument("--sizes", type=sizes, default=[2**20, 8 * 2**20, 64 * 2**20],
                        help="the files' sizes (default 1M,8M,64M)")
    parser.add_argument("--fields", type=names(FIELDS), default=["evidence"],
                        help=f"where the string goes (default evidence; of {', '.join(FIELDS)})")
    parser.add_argument("--kinds", type=names(KINDS), default=list(KINDS),
                        help=f"what the string is (default {','.join(KINDS)})")
    parser.add_argument("--runs", type=runs_count, default=1, help="runs of each command (default 1)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    from ctxlab.records.model import ResultFileError

    try:
        source = recorded_source(args.source)  # a result ctxlab reads, refused in its one line otherwise
        rest = max(overhead(source, field) for field in args.fields)  # no file made here: see _write
        if min(args.sizes) <= rest:
            raise ValueError(f"{min(args.sizes)} bytes is smaller than the source without the string ({rest} bytes)")
    except (ResultFileError, ValueError, KeyError, IndexError) as exc:
        parser.error(f"--source: {exc}")
    report: dict[str, Any] = {
        "environment": {"python": platform.python_version(), "machine": platform.machine(),
                        "cpus": os.cpu_count(), "ctxlab": _ctxlab_version()},
        "source": os.path.relpath(os.path.abspath(args.source), ROOT), "runs": args.runs, "columns": 80,
        "goal": {"seconds": GOAL_SECONDS, "peak_rss_mb": GOAL_MB, "formats": list(GOAL_FORMATS)}, "cases": []}
    os.environ["COLUMNS"] = "80"  # the children's screen, whatever this terminal is
    with tempfile.TemporaryDirectory(prefix="render_one_string.") as tmp:
        for target in args.sizes:
            for field in args.fields:
                for kind in args.kinds:
                    report["cases"].append(_case(tmp, source, target, field, kind, args.runs))
    import resource

    report["floor_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    report["within_goal"] = all(case["within_goal"] for case in report["cases"])
    print(f"ctxlab show on {report['source']} holding one string, COLUMNS=80, {args.runs} run(s) each; "
          f"median s / peak MB (none below {report['floor_mb']} MB: this process's own)")
    header = f"{'MiB':>5} {'field':11} {'kind':5} " + " ".join(f"{fmt:>14}" for fmt in FORMATS)
    print(header)
    for case in report["cases"]:
        cells = " ".join(f"{f['median_seconds']:6.2f} {f['peak_rss_mb']:7.1f}" for f in case["formats"].values())
        print(f"{case['file_bytes'] / 2**20:5.1f} {case['field']:11} {case['kind']:5} {cells}"
              f"{'' if case['within_goal'] else '  (over the goal)'}")
    return finish(report, f"{', '.join(GOAL_FORMATS)} up to 64 MiB", args.json)


def _case(tmp: str, source: dict, target: int, field: str, kind: str, runs: int) -> dict[str, Any]:
    """One file (a size, a field, a kind): every format's figures."""
    path = os.path.join(tmp, "one-string.json")
    made = multiprocessing.get_context("spawn").Process(target=_write, args=(source, field, kind, target, path))
    made.start()
    made.join()
    if made.exitcode != 0:
        raise SystemExit(f"render_one_string: making the {field} {kind} file failed ({made.exitcode})")
    with open(path + ".length", encoding="utf-8") as handle:
        length = int(handle.read())
    file_bytes = os.path.getsize(path)
    limit = [] if file_bytes <= 64 * 2**20 else ["--max-size", str(file_bytes)]
    case: dict[str, Any] = {"field": field, "kind": kind, "file_bytes": file_bytes, "string_chars": length,
                            "formats": {}}
    for fmt, extra in FORMATS.items():
        out_path = os.path.join(tmp, f"report.{fmt}")
        argv = [out_path if arg == "REPORT" else arg for arg in extra]
        stdout = out_path + ".stdout" if "REPORT" in extra else out_path
        times, peaks = [], []
        for _ in range(runs):
            seconds, peak, status = measure([sys.executable, "-m", "ctxlab", "show", path, *argv, *limit], stdout)
            if status not in (0, 1):  # 1: the fails claim, with --check only; show itself exits 0
                raise SystemExit(f"render_one_string: ctxlab show ({fmt}) exited {status}")
            times.append(seconds)
            peaks.append(peak)
        check_output(fmt, out_path, field, length)
        held = fmt in GOAL_FORMATS and file_bytes <= 64 * 2**20
        case["formats"][fmt] = {
            "command": " ".join(["ctxlab show FILE", *extra, *limit]).replace("REPORT", f"report.{fmt}"),
            "seconds": [round(t, 3) for t in times], "median_seconds": round(statistics.median(times), 3),
            "peak_rss_mb": round(max(peaks), 1), "report_bytes": os.path.getsize(out_path),
            "within_goal": not held or (statistics.median(times) <= GOAL_SECONDS and max(peaks) <= GOAL_MB)}
    case["within_goal"] = all(f["within_goal"] for f in case["formats"].values())
    return case


def _write(source: dict, field: str, kind: str, target: int, path: str) -> None:
    """Write the file (and its string's length beside it), in a process of its own (see the docstring)."""
    text, length = one_string_document(source, field, kind, target)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    with open(path + ".length", "w", encoding="utf-8") as handle:
        handle.write(str(length))


def _ctxlab_version() -> str:
    import ctxlab

    return ctxlab.__version__


if __name__ == "__main__":
    sys.exit(main())
