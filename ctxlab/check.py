"""``ctxlab check``: every lab on every chosen GPU, isolated, with drift against a baseline.

Each lab's scenarios run in child processes (from the forkserver that preloaded
CuPy and cuda.bindings), each with a timeout, so a lab that crashes, hangs or
leaves a sticky error is reported as that lab's error with its output tail while
the others go on. Labs and their scenarios run side by side; scenarios whose
figures need the GPU alone (timings, device memory in use) take it exclusively
through ``harness.gpu_lock``.
"""

from __future__ import annotations

import datetime
import re
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from ctxlab.labs import LABS, lab_module
from ctxlab.record import LabResult

# What each lab runs with under check: the labs' own command-line defaults.
DEFAULT_OPTIONS = {
    "migrate": {"threads": 4, "rounds": 3, "context": "both", "timeout": 30.0},
}


def options_for(name: str, device: int, timeout: float | None) -> dict:
    return {"device": device, **DEFAULT_OPTIONS.get(name, {}), "trace": False, "scenario_timeout": timeout}


def _error_result(name: str, device: int, exc: BaseException, seconds: float) -> LabResult:
    text = "".join(traceback.format_exception(exc))
    return LabResult(lab=name, started=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                     seconds=seconds, environment={"device": device}, options={"device": device},
                     observations=(), claims=(),
                     errors=({"scenario": "lab", "kind": "exception", "message": f"{type(exc).__name__}: {exc}",
                              "output_tail": text[-4000:]},))


def run_one(name: str, device: int, timeout: float | None, registry: dict) -> LabResult:
    t = time.perf_counter()
    try:
        module = lab_module(name, registry)
        return module.run(options_for(name, device, timeout))
    except Exception as exc:  # the lab's own code broke: its error, the others go on
        return _error_result(name, device, exc, time.perf_counter() - t)


def run_check(names: list[str], devices: list[int], timeout: float | None = None, jobs: int = 4,
              progress: Callable[[LabResult], None] | None = None, registry: dict | None = None) -> list[LabResult]:
    registry = registry or LABS
    work = [(name, device) for name in names for device in devices]

    def one(item):
        result = run_one(item[0], item[1], timeout, registry)
        if progress:
            progress(result)
        return result

    # Labs side by side; inside each, scenarios that need the GPU alone take it (harness.gpu_lock).
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, work))


# ---------------------------------------------------------------- drift

_VOLATILE = [
    (re.compile(r"0x[0-9a-fA-F]{5,}"), "0x…"),       # handles and addresses change every run
    (re.compile(r"\b\d+\.\d+\b"), "#.#"),             # rates and timings
]


def normalize(evidence: str) -> str:
    for pattern, replacement in _VOLATILE:
        evidence = pattern.sub(replacement, evidence)
    return evidence


def _key(run: LabResult) -> tuple:
    return (run.lab, run.environment.get("device", run.options.get("device", 0)))


def drift(runs: list[LabResult], baseline: list[LabResult]) -> list[dict]:
    """Every claim whose verdict differs from the baseline, and every ``observed`` outcome that reads differently."""
    before = {_key(r): {c.id: c for c in r.claims} for r in baseline}
    out = []
    for run in runs:
        old = before.get(_key(run))
        if old is None:
            continue
        for claim in run.claims:
            was = old.get(claim.id)
            if was is None:
                out.append({"lab": run.lab, "claim": claim.id, "change": "new claim", "now": claim.verdict})
            elif was.verdict != claim.verdict:
                out.append({"lab": run.lab, "claim": claim.id, "change": "verdict", "was": was.verdict,
                            "now": claim.verdict, "evidence": claim.evidence})
            elif claim.verdict == "observed" and normalize(was.evidence) != normalize(claim.evidence):
                out.append({"lab": run.lab, "claim": claim.id, "change": "observed outcome", "was": was.evidence,
                            "now": claim.evidence})
    return out


def summary_markdown(runs: list[LabResult], drifted: list[dict] | None = None) -> str:
    """A CI step summary: verdict counts, what failed, what drifted (``ctxlab.report.summary``, escaped)."""
    from ctxlab.report.summary import summary_markdown as render

    return render(runs, drifted)
