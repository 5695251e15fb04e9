"""Batched isolation (ctxlab/harness/batch.py): SHARED scenarios one after another in one child, checked clean
between two; a scenario that leaves the child unclean, crashes or hangs sends the rest to fresh children, with
the verdicts of one child per scenario."""

import threading
import time

import pytest

from ctxlab.harness import batch
from ctxlab.suite import run_check
from tests.fake_labs import REGISTRY


def pids(run) -> dict[str, int]:
    return {o.scenario: o.value for o in run.observations if o.what == "pid"}


def verdicts(run) -> dict[str, tuple[str, str]]:
    return {c.id: (c.verdict, c.evidence) for c in run.claims}


def check(name: str, isolation: str = "batched"):
    (run,) = run_check([name], [0], registry=REGISTRY, isolation=isolation)
    return run


def test_shared_scenarios_run_in_one_child_and_each_in_their_own_with_each():
    batched, each = check("shared"), check("shared", "each")
    assert len(set(pids(batched).values())) == 1 and len(pids(batched)) == 4
    assert len(set(pids(each).values())) == 4
    assert verdicts(batched) == verdicts(each) and batched.claims[0].verdict == "holds"
    assert batched.isolation == {"mode": "batched", "shared_children": [["s1", "s2", "s3", "s4"]],
                                 "re_run_fresh": []}
    assert each.isolation["mode"] == "each" and each.isolation["shared_children"] == []
    assert set(batched.timings) == {"s1", "s2", "s3", "s4"} and not batched.errors


def test_a_scenario_that_leaves_the_child_unclean_sends_the_rest_to_fresh_children():
    run, each = check("shared-dirty"), check("shared-dirty", "each")
    seen = pids(run)
    assert seen["s1"] == seen["s2"]  # the scenario that dirtied the child ran, from a clean start
    assert len({seen["s2"], seen["s3"], seen["s4"]}) == 3  # the rest: a fresh child each
    assert [r["scenario"] for r in run.isolation["re_run_fresh"]] == ["s3", "s4"]
    assert all("a context is current (stand-in)" in r["why"] for r in run.isolation["re_run_fresh"])
    assert verdicts(run) == verdicts(each) and run.claims[0].verdict == "holds"


def test_the_re_runs_run_side_by_side_not_one_after_another():
    schedule: list = []
    (run,) = run_check(["shared-dirty-slow"], [0], registry=REGISTRY, jobs=8, schedule=schedule)
    reruns = [s for s in schedule if "fresh" in s.job]
    assert len(reruns) == 4 and [r["scenario"] for r in run.isolation["re_run_fresh"]] == ["s2", "s3", "s4", "s5"]
    first_end = min(s.ended for s in reruns)
    assert sum(s.started < first_end for s in reruns) >= 2  # several were running at once (one worker: 1)
    assert run.claims[0].verdict == "holds"


def test_a_crash_in_the_shared_child_re_runs_that_scenario_and_the_rest_fresh():
    run, each = check("shared-crash"), check("shared-crash", "each")
    assert [r["scenario"] for r in run.isolation["re_run_fresh"]] == ["s2", "s3"]
    assert "signal 11" in run.isolation["re_run_fresh"][0]["why"]
    assert verdicts(run) == verdicts(each) and run.claims[0].verdict == "holds" and not run.errors


def test_a_hang_in_the_shared_child_is_cut_at_its_own_timeout_and_re_run_fresh():
    t0 = time.perf_counter()
    run = check("shared-hang")
    assert time.perf_counter() - t0 < 30  # the 3 s timeout, not the 60 s nap
    assert [r["scenario"] for r in run.isolation["re_run_fresh"]] == ["s2", "s3"]
    assert "did not finish within 3 s" in run.isolation["re_run_fresh"][0]["why"]
    assert run.claims[0].verdict == "holds" and not run.errors


def test_threads_left_names_a_thread_still_running_and_waits_for_one_finishing(monkeypatch):
    before = {t.ident for t in threading.enumerate()}
    monkeypatch.setattr(batch, "THREAD_GRACE", 0.5)
    stop = threading.Event()
    finishing = threading.Thread(target=time.sleep, args=(0.1,), name="finishing")
    lingering = threading.Thread(target=stop.wait, args=(10,), name="lingering")
    finishing.start()
    lingering.start()
    try:
        assert batch.threads_left(before) == ["lingering"]
    finally:
        stop.set()
        lingering.join()
    assert batch.threads_left(before) == []


def test_the_check_that_cannot_run_counts_as_unclean():
    # the real CUDA check on a machine where it cannot run (or a broken check): the rest re-run fresh
    items = [batch.Item("tests.fake_labs.targets:observe_pid", ("a",), {}, 10),
             batch.Item("tests.fake_labs.targets:observe_pid", ("b",), {}, 10)]
    run = batch.run_batch(items, clean_check="tests.fake_labs.targets:does_not_exist")
    assert [r.index for r in run.ran] == [0]
    assert run.stopped is not None and run.stopped[0] == 1 and "the check failed: AttributeError" in run.stopped[1]


@pytest.mark.parametrize("isolation", ["x", "", "EACH", None, 1])
def test_an_unknown_isolation_is_a_one_line_option_error(isolation):
    from ctxlab.errors import OptionError
    from ctxlab.lab import LabOptions

    if isolation is None:  # None means the default, as for every option
        assert LabOptions(isolation=isolation).isolation is None
        return
    with pytest.raises(OptionError, match="isolation: .* is not one of batched, each"):
        LabOptions(isolation=isolation)


def test_check_isolation_on_the_command_line_is_checked_in_one_line():
    from click.testing import CliRunner

    from ctxlab.cli import cli

    result = CliRunner().invoke(cli, ["check", "--isolation", "sometimes"])
    assert result.exit_code == 2 and "Invalid value for '--isolation'" in result.output
    assert "Traceback" not in result.output
