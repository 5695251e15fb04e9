"""Batched isolation on a GPU: interop's SHARED scenarios (the exchanges) in one child give the verdict and
evidence they give each in a child of its own, and the shared child passes its clean-process checks."""

import dataclasses
import json
import os

import pytest

from ctxlab.harness.pool import run_planned
from ctxlab.harness.runner import LabPlan, plan
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


def batch_of(*targets: str):
    from ctxlab.harness.batch import Item, run_batch

    return run_batch([Item(f"tests.gpu.batch_targets:{t}", (0,), {}, 60) for t in targets])


def test_a_primary_context_a_library_left_current_passes_the_check():
    run = batch_of("uses_the_primary", "uses_the_primary")
    assert run.stopped is None and len(run.ran) == 2, run


@pytest.mark.parametrize("target, why", [
    ("leaves_a_created_context_current", ("a context other than a primary context is current",)),
    ("leaves_a_sticky_error", ("has a sticky error", "CUDA_ERROR_ILLEGAL_ADDRESS")),
])
def test_the_check_refuses_what_a_scenario_left_behind(target, why):
    run = batch_of(target, "uses_the_primary")
    assert [r.index for r in run.ran] == [0] and run.stopped is not None, run
    assert run.stopped[0] == 1 and all(part in run.stopped[1] for part in why), run.stopped


def test_the_check_refuses_a_primary_context_reset_after_the_first_scenario():
    run = batch_of("uses_the_primary", "uses_the_primary", "resets_the_primary", "uses_the_primary")
    assert [r.index for r in run.ran] == [0, 1, 2] and run.stopped is not None, run
    assert run.stopped[0] == 3 and "primary context is inactive" in run.stopped[1], run.stopped
