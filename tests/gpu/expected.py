"""The verdict each claim is expected to get on the GPU the expectations were written for.

``tests/gpu/expected_verdicts.json`` names the GPU, driver and runtimes it was
written for, and one verdict per claim (for untraced runs; ``traced`` lists the
claims that read differently with --trace). On another GPU or driver the
verdicts may rightly differ: the check is skipped with that reason, and the
file for that machine is written from its recorded run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FILE = Path(__file__).with_name("expected_verdicts.json")


def expectations() -> dict:
    return json.loads(FILE.read_text())


def differs(run) -> str | None:
    """Why the expectations do not apply to the machine ``run`` was recorded on, or None when they do."""
    written = expectations()["written_for"]
    env = run.environment
    for key in ("gpu", "driver_version", "runtime_versions"):  # runtime-sensitive claims (thread-exit) need all three
        if env.get(key) != written[key]:
            return f"the expectations were written for {key} {written[key]!r}; this run is on {env.get(key)!r}"
    return None


def visible_gpus() -> int:
    """How many GPUs this machine's driver shows (the GPU tests run where their runs ran)."""
    from ctxlab.cuda.environment import device_count

    return device_count()


def expected_for(run, traced: bool = False, gpus: int | None = None) -> dict[str, str]:
    """The verdict expected for each claim of ``run``: a claim none of whose scenarios the run selected (migrate's
    green claims under the default ``--context both``) is ``skipped``, whatever it gets when it runs; so is a
    claim that needs two GPUs where ``gpus`` (default: this machine's) is fewer."""
    import ctxlab

    table = expectations()
    expected = {**table["verdicts"], **(table["traced"] if traced else {})}
    if (gpus if gpus is not None else visible_gpus()) < 2:
        expected.update(dict.fromkeys(table.get("needs_two_gpus", {}).get("claims", ()), "skipped"))
    ran = set(run.timings)
    for claim in ctxlab.claims():
        if claim.id in expected and ran and not set(claim.scenarios) & ran:
            expected[claim.id] = "skipped"
    return expected


def assert_expected(run, traced: bool = False, gpus: int | None = None) -> None:
    """Every claim of ``run`` has the verdict expected for it on this GPU (``gpus`` visible: default this
    machine's); no scenario broke."""
    assert run.errors == (), run.errors
    why = differs(run)
    if why:
        pytest.skip(why)
    expected = expected_for(run, traced, gpus)
    predicted = set(expectations().get("predicted", {}).get("claims", ()))
    got = {c.id: c.verdict for c in run.claims}
    wrong = {cid: f"{got[cid]} (expected {expected.get(cid)}{', a prediction' if cid in predicted else ''}): "
                  f"{c.evidence}" for c in run.claims for cid in [c.id] if got[cid] != expected.get(cid)}
    assert not wrong, wrong
