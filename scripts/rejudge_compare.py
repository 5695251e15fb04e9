"""Every recorded run under labs/results, re-judged by two checkouts, compared claim by claim.

    python scripts/rejudge_compare.py OLD_CHECKOUT NEW_CHECKOUT [RESULTS]   (e.g. a worktree of the commit before)

Each checkout re-judges every run of every result file under RESULTS (default: OLD_CHECKOUT's labs/results, so
that both judge the same recordings) with its own claims (in a process of its own, that checkout first on the
path); the verdicts and evidence sentences are compared.
Prints the counts and each difference; exit 1 when a verdict or an evidence sentence differs.
"""

from __future__ import annotations

import json
import subprocess
import sys

JUDGE = r'''
import dataclasses, glob, json, sys, warnings
warnings.simplefilter("ignore")
root, results = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
from ctxlab.claim import judge
from ctxlab.harness.runner import plan
from ctxlab.labs import get_lab
try:
    from ctxlab.records.files import load_runs
except ImportError:
    from ctxlab.record import load_runs
out = {}
for path in sorted(glob.glob(f"{results}/**/*.json", recursive=True)):
    try:
        runs = load_runs(path)
    except Exception:
        continue  # not a result file (benchmark figures, SARIF, traces)
    for i, run in enumerate(runs):
        try:
            lab = get_lab(run.lab)
        except Exception:
            continue  # the environment-error record, a stand-in lab
        known = {f.name for f in dataclasses.fields(lab.options)}
        options = lab.make_options(**{k: v for k, v in run.options.items() if k in known})
        ran = [s.name for s in plan(lab, options).scenarios]
        out.setdefault(path[len(results) + 1:], {})[f"{i}:{run.lab}"] = {
            c.id: [c.verdict, c.evidence] for c in judge(lab.claims, run.observations, ran)}
json.dump(out, sys.stdout)
'''


def judged(root: str, results: str) -> dict:
    done = subprocess.run([sys.executable, "-c", JUDGE, root, results], capture_output=True, text=True, cwd="/")
    if done.returncode != 0:
        raise SystemExit(f"rejudge_compare: {root}: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python scripts/rejudge_compare.py OLD_CHECKOUT NEW_CHECKOUT [RESULTS]", file=sys.stderr)
        return 2
    import os

    results = os.path.abspath(argv[2] if len(argv) == 3 else os.path.join(argv[0], "labs", "results"))
    old, new = judged(argv[0], results), judged(argv[1], results)
    total, differ = 0, []
    for path, runs in sorted(old.items()):
        for run, claims in sorted(runs.items()):
            for cid, (verdict, evidence) in sorted(claims.items()):
                total += 1
                now = new.get(path, {}).get(run, {}).get(cid)
                if now is None:
                    differ.append(f"{path} {run} {cid}: missing now")
                elif now != [verdict, evidence]:
                    what = f"verdict {verdict} -> {now[0]}" if now[0] != verdict else "evidence"
                    differ.append(f"{path} {run} {cid}: {what}")
    added = sum(1 for path, runs in new.items() for run, claims in runs.items() for cid in claims
                if cid not in old.get(path, {}).get(run, {}))
    print(f"{results}: {len(old)} result files, {total} claim judgements compared: {len(differ)} differ; "
          f"{added} judged only by the new checkout")
    for line in differ:
        print(line)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
