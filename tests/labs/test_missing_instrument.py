"""No verdict from a missing instrument: a claim whose evidence needs CUPTI is ``skipped`` with that reason when
CUPTI was not there, never ``fails`` or ``holds`` (a runner installed without cupti-python read
``modules.library-eager-everywhere: fails``). The recorded H200 run of the modules lab, with CUPTI hidden from
its load witnesses as such a runner records them, is judged again."""

from __future__ import annotations

import dataclasses

from ctxlab.claim import judge
from ctxlab.labs import get_lab
from ctxlab.records.shapes import runs_from_document
from tests.conftest import recorded
from tests.gpu.expected import selected_scenarios

MISSING = "CUPTI is not available: cupti-python is not installed (No module named 'cupti')"


def modules_run():
    return next(r for r in runs_from_document(recorded("check.json"), "check.json") if r.lab == "modules")


def without_cupti(run):
    def hide(o):
        if o.what != "load witness":
            return o
        return dataclasses.replace(o, value={**o.value, "cupti": MISSING, "module_loaded_events": 0})

    return dataclasses.replace(run, observations=[hide(o) for o in run.observations])


def verdicts(run) -> dict:
    ran = [s.name for s in selected_scenarios(run)]
    return {c.id: c for c in judge(get_lab("modules").claims, run.observations, ran)}


def test_with_cupti_the_recorded_run_decides_the_witnessed_claims():
    got = verdicts(modules_run())
    for cid in ("modules.module-load-is-immediate", "modules.library-lazy-at-first-use",
                "modules.library-eager-everywhere"):
        assert got[cid].verdict == "holds", got[cid]


def test_without_cupti_no_claim_that_needs_it_fails_or_holds():
    with_cupti, without = verdicts(modules_run()), verdicts(without_cupti(modules_run()))
    changed = [cid for cid in with_cupti if with_cupti[cid].verdict != without[cid].verdict]
    assert "modules.library-eager-everywhere" in changed
    for cid in changed:
        assert without[cid].verdict == "skipped", without[cid]
        assert "CUPTI was not there" in without[cid].evidence and "cupti-python is not installed" in \
            without[cid].evidence
    assert not [c for c in without.values() if c.verdict in ("fails", "error")], without
