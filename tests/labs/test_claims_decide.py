"""What a child compares, the claim decides (issue 36): a whole check recorded on the H200 after the children
stopped recording their own comparisons (labs/results/wave4-raw/check.json) carries both sides of each and none
of the old answers, so every verdict below comes from the claims' comparisons; it equals the full check recorded
before (labs/results/check.json), and moving one recorded side changes it."""

import dataclasses

import pytest

from tests.labs.test_missing_instruments import _rejudge, _runs

NEW, OLD = "wave4-raw/check.json", "check.json"
# the children's own answers before: what the claims read only where a recording lacks both sides
CHILD_ANSWERS = ("final_ok", "both_current", "both_worked", "allocation_in_created", "driver_data_read_by_cupy",
                 "pointer_context_is_primary", "same_owner", "current_after_malloc_is_green", "current_is_a",
                 "after_alloc_is", "bound_primary", "allocation_in_primary", "allocation_in_owner", "same_pointer",
                 "read_ok")


def _keys(value, found=None):
    found = set() if found is None else found
    if isinstance(value, dict):
        for key, item in value.items():
            found.add(key)
            _keys(item, found)
    elif isinstance(value, list):
        for item in value:
            _keys(item, found)
    return found


def test_the_new_recording_carries_no_answer_of_a_child():
    keys = set().union(*(_keys(o.value) for run in _runs(NEW).values() for o in run.observations))
    assert not keys & set(CHILD_ANSWERS), keys & set(CHILD_ANSWERS)
    assert {"final", "element_added_min", "still", "allocation_context"} <= keys  # the sides are there


@pytest.mark.parametrize("lab", ["migrate", "lifecycle", "refcount", "modules", "interop", "peer"])
def test_todays_claims_give_the_recorded_verdicts_and_those_of_the_check_before(lab):
    new, old = _runs(NEW)[lab], _runs(OLD)[lab]
    judged = {cid: c.verdict for cid, c in _rejudge(new, new.observations).items()}
    assert judged == {c.id: c.verdict for c in new.claims}
    assert judged == {c.id: c.verdict for c in old.claims if c.id in judged}
    assert "error" not in judged.values()


def _moved(run, what, scenario, change):
    return [dataclasses.replace(o, value=change(dict(o.value))) if (o.what, o.scenario) == (what, scenario) else o
            for o in run.observations]


def test_one_side_moved_turns_the_verdict():
    run = _runs(NEW)["migrate"]
    right = _rejudge(run, run.observations)
    assert right["migrate.state-follows-context"].verdict == "holds"
    assert right["migrate.current-on-several-threads"].verdict == "holds"

    def global_off(v):
        return {**v, "final": {**v["final"], "global": v["final"]["global"] + 1}}

    def still_other(v):
        return {**v, "still": v["still"] + 1}

    off = _rejudge(run, _moved(run, "handoffs verified", "handoff-created", global_off))
    assert off["migrate.state-follows-context"].verdict == "fails"
    other = _rejudge(run, _moved(run, "current on two threads", "concurrent-primary", still_other))
    assert other["migrate.current-on-several-threads"].verdict == "fails"
