"""Batched isolation on a GPU: interop's SHARED scenarios (the exchanges) in one child give the verdict and
evidence they give each in a child of its own, and the shared child passes its clean-process checks."""

import dataclasses
import json
import os

import pytest

from ctxlab.harness.runner import LabPlan, plan, run_planned
from ctxlab.lab import Isolation
from ctxlab.labs import get_lab
from ctxlab.records.evidence import normalize

pytestmark = pytest.mark.gpu
KEEP = os.environ.get("CTXLAB_RESULTS")


def shared_part(isolation: str) -> LabPlan:
    """interop's plan cut to its SHARED scenarios."""
    lab = get_lab("interop")
    whole = plan(lab, lab.make_options(isolation=isolation))
    scenarios = [s for s in whole.scenarios if s.isolation is Isolation.SHARED]
    return dataclasses.replace(whole, scenarios=scenarios, jobs=[j for j in whole.jobs if j.scenario in scenarios])


def test_shared_scenarios_decide_as_they_do_each_in_a_child_of_their_own(tmp_path):
    batched, each = run_planned(shared_part("batched")), run_planned(shared_part("each"))
    if KEEP:
        for name, run in (("isolation-interop-batched.json", batched), ("isolation-interop-each.json", each)):
            with open(os.path.join(KEEP, name), "w") as out:
                json.dump(run.to_dict(), out, indent=2)
    assert not batched.errors and not each.errors, (batched.errors, each.errors)
    names = [s.name for s in shared_part("batched").scenarios]
    assert len(names) >= 2 and batched.isolation["shared_children"] == [names]
    assert batched.isolation["re_run_fresh"] == [], batched.isolation["re_run_fresh"]  # every check passed
    assert each.isolation["shared_children"] == []
    decided = {c.id: (c.verdict, normalize(c.evidence)) for c in batched.claims}
    alone = {c.id: (c.verdict, normalize(c.evidence)) for c in each.claims}
    differ = {k: (decided.get(k), alone.get(k)) for k in set(decided) | set(alone) if decided.get(k) != alone.get(k)}
    assert not differ, differ
