"""The environment matrix: ``ctxlab check`` under a driver variable against a run without it.

Each variant sets one variable the CUDA driver reads. What should change: the runs record the variable
(``environment.driver_variables``), and the driver shows it (``ctxlab doctor``: the loading mode under
CUDA_MODULE_LOADING, one device under CUDA_VISIBLE_DEVICES=0). What must not: any claim's verdict or its
normalised evidence (``ctxlab.suite.decided``, as drift compares it), except

- the claims that read a race (a distribution with silent wrong results: the unordered hand-overs): what a
  race decides may differ under anything that changes timing, and is printed, not failed;
- under CUDA_VISIBLE_DEVICES=0 on a machine of several GPUs, the peer lab's claims (it needs two GPUs).

The modules lab's loading claims run their scenarios under a CUDA_MODULE_LOADING each scenario sets (or
unsets) itself (``Scenario.env``): ``pinned`` names them, and under CUDA_MODULE_LOADING they must read exactly
as without it; a lab that stopped pinning would show here (its "unset" scenario would report EAGER).

``python -m tests.gpu.matrix OUTDIR [GPUS]`` compares the runs scripts/gpu-matrix.sh left in OUTDIR and writes
OUTDIR/summary.md (exit 1 on an unexpected difference).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ctxlab.records.schema import SILENT_WRONG
from ctxlab.suite import changes


@dataclass(frozen=True)
class Variant:
    name: str  # the recorded files' stem
    variable: str
    value: str


VARIANTS = (Variant("module-loading-eager", "CUDA_MODULE_LOADING", "EAGER"),
            Variant("module-loading-lazy", "CUDA_MODULE_LOADING", "LAZY"),
            Variant("max-connections-1", "CUDA_DEVICE_MAX_CONNECTIONS", "1"),
            Variant("visible-devices-0", "CUDA_VISIBLE_DEVICES", "0"))
VARIABLES = tuple(dict.fromkeys(v.variable for v in VARIANTS))
# A distribution of outcomes that holds a silent wrong result (claim.spread, before normalize).
_RACY = re.compile(re.escape(SILENT_WRONG) + r"(?: \([^()]*\))? (?:in \d+ of \d+|\(all \d+\))")


def differences(base: list, other: list) -> list[dict]:
    """Every run, claim, verdict and normalised evidence of a variant that differs from the baseline."""
    return changes(base, other, evidence="all", scenarios=False)


def racy(runs: list) -> set[str]:
    """Claims whose evidence reads a distribution with silent wrong results (a race's outcomes)."""
    return {c.id for r in runs for c in r.claims if _RACY.search(c.evidence)}


def pinned(variable: str, runs: list) -> set[str]:
    """Claims every scenario of which sets (or unsets) ``variable`` itself: the variable given to check cannot
    reach them."""
    import ctxlab
    from tests.gpu.expected import selected_scenarios

    out: set[str] = set()
    for run in runs:
        sets = {s.name for s in selected_scenarios(run) if variable in s.env}
        out |= {c.id for c in ctxlab.claims(run.lab) if set(c.scenarios) <= sets}
    return out


# Found on the H200 (labs/results/matrix/, 2026-12-02): after a teardown under the libraries (the primary context
# released past zero or reset), their next read returns an error under the default lazy loading, but ends the
# process by SIGSEGV in most runs under CUDA_MODULE_LOADING=EAGER. Undefined behaviour either way; which kind of
# outcome it is depends on what the context had loaded.
EAGER_TEARDOWN = ("undefined behaviour after a teardown: under eager loading a library's next read mostly ends by "
                  "SIGSEGV where lazily it returns an error")


def may_change(variant: Variant, base: list, gpus: int) -> dict[str, str]:
    """Claim id -> why it may read differently under ``variant`` (``gpus``: the GPUs visible without it)."""
    import ctxlab

    allowed = dict.fromkeys(racy(base), "reads a race (silent wrong results over repeats): timing decides it")
    if (variant.variable, variant.value) == ("CUDA_MODULE_LOADING", "EAGER"):
        allowed.update(dict.fromkeys((c.id for c in ctxlab.claims("interop")
                                      if c.id.startswith("interop.blast.") and c.error_varies), EAGER_TEARDOWN))
    if variant.variable == "CUDA_VISIBLE_DEVICES" and gpus > 1:
        allowed.update(dict.fromkeys((c.id for c in ctxlab.claims("peer")), "one GPU visible: peer needs two"))
    return allowed


def unexpected(diffs: list[dict], allowed: dict[str, str]) -> list[dict]:
    return [d for d in diffs if d["item"] not in allowed]


def not_recorded(variant: Variant, runs: list) -> list[str]:
    """The runs that do not record ``variant``'s variable with its value."""
    return [r.lab for r in runs if r.environment.get("driver_variables", {}).get(variant.variable) != variant.value]


def driver_problem(variant: Variant, driver: dict) -> str | None:
    """What ``ctxlab doctor``'s ``driver`` block under ``variant`` should show and does not (None: it does)."""
    if variant.variable == "CUDA_MODULE_LOADING" and driver.get("module_loading_mode") != \
            f"CU_MODULE_{variant.value}_LOADING":
        return f"the driver's loading mode is {driver.get('module_loading_mode')}"
    if variant.variable == "CUDA_VISIBLE_DEVICES" and len(driver.get("devices", [])) != 1:
        return f"the driver shows {len(driver.get('devices', []))} devices"
    return None


def line(d: dict) -> str:
    what = f"{d['lab']}: {d['item']}" if d["item"] != d["lab"] else d["lab"]
    now = f": now {d['now']}" if "now" in d else ""
    was = f" (was {d['was']})" if "was" in d else ""
    return f"{what}: {d['change']}{now}{was}"


def summary(results: list[tuple[Variant, list[dict], dict[str, str], list[str]]]) -> str:
    """Markdown: per variant, what was recorded, what differed (allowed or not)."""
    out = ["# ctxlab check under driver variables", "",
           "Each variant against the run without it: verdicts and normalised evidence per claim.", ""]
    for variant, diffs, allowed, missing in results:
        wrong = unexpected(diffs, allowed)
        seen = "yes" if not missing else "no: " + ", ".join(missing)
        out += [f"## {variant.variable}={variant.value}", "",
                f"- recorded in every run and shown by the driver: {seen}",
                f"- differences: {len(diffs)} ({len(wrong)} unexpected)"]
        out += [f"  - {'UNEXPECTED ' if d in wrong else ''}{line(d)}"
                + (f" [may change: {allowed[d['item']]}]" if d["item"] in allowed else "") for d in diffs]
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    import ctxlab

    if len(argv) not in (1, 2):
        print("usage: python -m tests.gpu.matrix OUTDIR [GPUS]", file=sys.stderr)
        return 2
    out, gpus = Path(argv[0]), int(argv[1]) if len(argv) == 2 else 1  # GPUS: visible without the variables
    base = ctxlab.load(out / "baseline.json")
    results = []
    for variant in VARIANTS:
        path = out / f"{variant.name}.json"
        if not path.exists():
            print(f"{variant.name}: no {path.name}", file=sys.stderr)
            continue
        runs = ctxlab.load(path)
        missing = not_recorded(variant, runs)
        doctor = out / f"doctor-{variant.name}.json"
        if doctor.exists():
            problem = driver_problem(variant, json.loads(doctor.read_text()).get("driver", {}))
            missing += [f"doctor ({problem})"] if problem else []
        results.append((variant, differences(base, runs), may_change(variant, base, gpus), missing))
    text = summary(results)
    (out / "summary.md").write_text(text + "\n")
    print(text)
    bad = any(unexpected(d, a) or m for _, d, a, m in results) or len(results) < len(VARIANTS)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
