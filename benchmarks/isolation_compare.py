"""Do two check runs decide the same? Every claim's verdict and evidence, claim by claim (issue 27's proof that
batched isolation changes nothing: ``check`` against ``check --isolation each``).

    python benchmarks/isolation_compare.py BATCHED.json EACH.json [--json OUT]

Evidence is compared as drift compares it (``ctxlab.suite.decided``: handles, addresses, timings and the
values of a silent wrong result blanked; over undefined-behaviour repeats, which error each met). Prints one
line per claim that differs, then the count; exit status 0 when every claim of both runs reads the same, 1
when one differs or is missing from either run, 2 for a file that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys

from ctxlab.records.files import load_runs
from ctxlab.records.model import LabResult, ResultFileError
from ctxlab.suite import decided


def claims_of(runs: list[LabResult]) -> dict[tuple, tuple[str, str]]:
    """(lab, device, claim id) -> (verdict, evidence as drift compares it)."""
    return {(r.lab, r.options.get("device", 0), cid): value for r in runs for cid, value in decided(r).items()}


def differences(first: list[LabResult], second: list[LabResult]) -> list[dict]:
    """Every claim whose verdict or evidence differs between the two runs, or that only one of them has."""
    a, b = claims_of(first), claims_of(second)
    out = []
    for key in sorted(set(a) | set(b), key=str):
        if a.get(key) != b.get(key):
            out.append({"lab": key[0], "device": key[1], "claim": key[2],
                        "first": a.get(key, ("missing", ""))[0], "second": b.get(key, ("missing", ""))[0],
                        "first_evidence": a.get(key, ("", ""))[1], "second_evidence": b.get(key, ("", ""))[1]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", help="a check JSON (e.g. the default, batched)")
    parser.add_argument("second", help="another check JSON (e.g. --isolation each)")
    parser.add_argument("--json", help="write the comparison here")
    args = parser.parse_args(argv)
    try:
        first, second = load_runs(args.first), load_runs(args.second)
    except ResultFileError as exc:
        print(f"isolation_compare: {exc}", file=sys.stderr)
        return 2
    diff = differences(first, second)
    total = len(set(claims_of(first)) | set(claims_of(second)))
    for d in diff:
        print(f"{d['lab']}/{d['claim']} on GPU {d['device']}: {d['first']} vs {d['second']}\n"
              f"  first:  {d['first_evidence']}\n  second: {d['second_evidence']}")
    print(f"{total} claims compared, {len(diff)} differ")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"first": args.first, "second": args.second, "claims": total, "differ": diff}, out, indent=2)
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main())
