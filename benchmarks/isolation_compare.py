"""Do two check runs decide the same? Every claim's verdict and evidence, claim by claim (issue 27's proof that
batched isolation changes nothing: ``check`` against ``check --isolation each``).

    python benchmarks/isolation_compare.py BATCHED.json EACH.json [--json OUT]

Claims are compared by ``ctxlab.suite.changes``, evidence as drift compares it (handles,
addresses, timings and the values of a silent wrong result blanked; where a claim declares that its error
varies, which error each repeat met). Prints one line per claim that differs, then the count; exit status 0
when every claim of both runs reads the same, 1 when one differs or is missing from either run, 2 for a file
that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys

from ctxlab.records.files import load_runs
from ctxlab.records.model import ResultFileError
from ctxlab.suite import changes


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
    diff = changes(first, second, evidence="all", scenarios=False)
    total = len({(r.lab, r.options.get("device", 0), c.id) for r in (*first, *second) for c in r.claims})
    for d in diff:
        print(f"{d['lab']}/{d['item']} on GPU {d['device']}: {d['change']}"
              + "".join(f"\n  {side}:  {d[key]}" for side, key in (("first", "was"), ("second", "now")) if key in d))
    print(f"{total} claims compared, {len(diff)} differ")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"first": args.first, "second": args.second, "claims": total, "differ": diff}, out, indent=2)
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main())
