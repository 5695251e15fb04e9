"""No verdict from a missing instrument (issue 35): with CUPTI, a C compiler, nvcc or a library absent, a claim
whose evidence needs it reads ``skipped`` naming it, never ``holds`` or ``fails``. Each instrument is hidden in
turn from recorded H200 observations (labs/results/), rewritten as the scenario code records that absence:
the judges then see what they would see on such a runner."""

import dataclasses

import pytest

from ctxlab.claim import judge
from ctxlab.labs import get_lab
from ctxlab.records.model import Observation
from ctxlab.records.shapes import runs_from_document
from tests.conftest import recorded

NO_CUPTI = ("CUPTI is not available: cupti-python is not installed (No module named 'cupti'); install ctxlab "
            "with the extra cu13 or cu12")
NO_CC = "no C compiler found (set CC, or install gcc): ctxlab's CUPTI callback is built from C on first use"


def _runs(name="check.json"):
    return {r.lab: r for r in runs_from_document(recorded(name), name)}


def _rejudge(run, observations):
    """The recorded run's claims judged again over ``observations`` (claims newer than the recording left out)."""
    recorded_ids = {c.id for c in run.claims}
    lab = get_lab(run.lab)
    claims = [c for c in lab.claims if c.id in recorded_ids]
    return {c.id: c for c in judge(claims, tuple(observations), set(run.timings) or None)}


def _changed_only_to_skipped(run, observations, instrument):
    """Every claim whose verdict moved from today's judges' verdict over the recording is now skipped, its
    evidence naming ``instrument``; the claims it moved."""
    before = {cid: c.verdict for cid, c in _rejudge(run, run.observations).items()}
    after = _rejudge(run, observations)
    moved = {cid: c for cid, c in after.items() if c.verdict != before[cid]}
    assert all(c.verdict == "skipped" for c in moved.values()), {k: (c.verdict, c.evidence) for k, c in moved.items()}
    assert all(instrument in c.evidence for c in moved.values()), {k: c.evidence for k, c in moved.items()}
    assert not [c for c in after.values() if c.verdict in ("fails", "error")]
    return moved


def _witness_without(reason):
    """A load witness as load_witness records it when its tracer cannot start: no MODULE_LOADED events."""
    def rewrite(o: Observation) -> Observation:
        if o.what != "load witness":
            return o
        return dataclasses.replace(o, value={**o.value, "cupti": reason, "module_loaded_events": 0}, events=())
    return rewrite


@pytest.mark.parametrize("reason, instrument", [(NO_CUPTI, "cupti-python"), (NO_CC, "C compiler")])
def test_modules_without_a_tracer_skips_what_only_cupti_witnesses(reason, instrument):
    run = _runs()["modules"]
    moved = _changed_only_to_skipped(run, map(_witness_without(reason), run.observations), instrument)
    assert "modules.library-eager-everywhere" in moved  # what read fails on a runner without cupti-python


def test_lifecycle_untraced_skips_the_driver_calls_beneath_and_keeps_the_rest():
    run = _runs()["lifecycle"]
    untraced = [dataclasses.replace(o, events=()) for o in run.observations]
    moved = _changed_only_to_skipped(run, untraced, "not traced")
    assert "lifecycle.driver-calls-beneath" in moved  # the recording is traced: hiding the trace bites
    before = {cid: c.verdict for cid, c in _rejudge(run, run.observations).items()}
    after = _rejudge(run, untraced)
    assert all(after[cid].verdict == before[cid] for cid in before if cid not in moved)


def _scenario_skipped(run, scenario, why):
    """``scenario``'s observations replaced by what a scenario that cannot start records (skipped_output)."""
    kept = [o for o in run.observations if o.scenario != scenario]
    return [*kept, Observation("start", "MainThread", None, "skipped", why, None, scenario)]


def _every_scenario():
    runs = _runs()
    return [(lab, scenario) for lab, run in runs.items() for scenario in sorted({o.scenario for o in run.observations
                                                                               if o.scenario})]


@pytest.mark.parametrize("lab, scenario", _every_scenario())
def test_a_scenario_that_could_not_start_for_a_missing_tool_decides_no_claim(lab, scenario):
    """nvcc, a library (torch, JAX, Numba) or the GPU feature a scenario needs, missing: its scenario records
    why and starts nothing; every claim over it reads skipped with that reason, none holds or fails on it."""
    run = _runs()[lab]
    why = f"nvcc is not on the PATH (nor in /usr/local/cuda/bin); torch is not installed ({scenario})"
    _changed_only_to_skipped(run, _scenario_skipped(run, scenario, why), why)


def test_the_nvcc_claim_is_skipped_without_nvcc():
    run = _runs()["modules"]
    nvcc_claims = [c.id for c in get_lab("modules").claims if "nvcc" in c.scenarios]
    moved = _changed_only_to_skipped(run, _scenario_skipped(run, "nvcc", "nvcc is not on the PATH"), "nvcc")
    assert nvcc_claims and set(nvcc_claims) <= set(moved) | {c.id for c in run.claims if c.verdict == "skipped"}
