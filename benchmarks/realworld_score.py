"""Score a folder of ``ctxlab audit --format json`` reports of examples/realworld/ (one per program, named
after it, as scripts/gpu-audit-corpus.sh writes them) with the GPU test's own scoring
(``tests/gpu/test_realworld.score``): matched, missed, every extra, the ending.

    python benchmarks/realworld_score.py REPORTS_DIR --json FILE [--summary summary.tsv]
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _scorer():
    spec = importlib.util.spec_from_file_location("realworld_test", os.path.join(ROOT, "tests", "gpu",
                                                                                  "test_realworld.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports")
    parser.add_argument("--json", required=True)
    parser.add_argument("--summary", default=None, help="the corpus script's summary.tsv: times beside the score")
    args = parser.parse_args()
    test = _scorer()
    times: dict[str, dict] = {}
    if args.summary:
        with open(args.summary) as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                times[row["program"]] = row
    rows = []
    for entry in test.programs():
        name = os.path.basename(entry["program"])[:-3]
        path = os.path.join(args.reports, f"{name}.json")
        if not os.path.exists(path):
            continue
        with open(path) as handle:
            doc = json.load(handle)
        row = test.score(entry, doc)
        if name in times and times[name].get("plain_seconds"):
            row["audit_seconds"] = float(times[name]["seconds"])
            row["plain_seconds"] = float(times[name]["plain_seconds"])
        rows.append(row)
    exact = [r for r in rows if r["exact"]]
    ratios = [r["audit_seconds"] / r["plain_seconds"] for r in rows if r.get("plain_seconds")]
    table = {"programs": rows, "audited": len(rows), "exact": len(exact),
             "hazards": sum(r["kind"] == "hazard" for r in rows),
             "hazards_exact": sum(r["kind"] == "hazard" and r in exact for r in rows),
             "clean": sum(r["kind"] == "clean" for r in rows),
             "clean_exact": sum(r["kind"] == "clean" and r in exact for r in rows),
             "extras": sum(len(r["extra"]) for r in rows),
             "audit_over_plain_median": round(statistics.median(ratios), 3) if ratios else None,
             "audit_over_plain_programs": len(ratios)}
    with open(args.json, "w") as handle:
        json.dump(table, handle, indent=1)
        handle.write("\n")
    print(f"{table['exact']} of {table['audited']} programs exactly as expected ({table['hazards_exact']} of "
          f"{table['hazards']} hazard, {table['clean_exact']} of {table['clean']} clean; {table['extras']} extra "
          f"findings); audit over plain run, median of {len(ratios)}: {table['audit_over_plain_median']}")


if __name__ == "__main__":
    main()
