"""Check levels (ctxlab.levels, issue 35): a level runs only the scenarios of the claims it judges, each once
below the full level; a claim above the level reads ``unjudged`` with its reason, never missing; drift and the
level comparison leave unjudged claims out; the real labs' level-1 claims are the node-health promises."""

import dataclasses

import pytest
from click.testing import CliRunner

from ctxlab.api import checked_selection
from ctxlab.claim import Claim
from ctxlab.cli import cli
from ctxlab.errors import OptionError
from ctxlab.harness.runner import plan
from ctxlab.lab import LabOptions
from ctxlab.labs import get_lab
from ctxlab.levels import FULL, LEVELS, default_level, unjudged_reason
from ctxlab.records.shapes import runs_from_document
from ctxlab.suite import changes, deciding_options, level_differences, run_check
from tests.conftest import RESULTS, recorded
from tests.fake_labs import REGISTRY


def _verdicts(run):
    return {c.id: c.verdict for c in run.claims}


def _ran(run):
    """(scenario, repeat) of every observation: which child processes ran."""
    return sorted({(o.scenario, o.repeat) for o in run.observations if o.what == "seen"},
                  key=lambda x: (x[0], -1 if x[1] is None else x[1]))


def test_level_one_runs_only_the_node_health_scenario_and_lists_the_rest_as_unjudged():
    (run,) = run_check(["levelled"], [0], registry=REGISTRY, options={"levelled": {0: LabOptions(level=1)}})
    assert _verdicts(run) == {"levelled.health": "holds", "levelled.documented": "unjudged",
                              "levelled.observed": "unjudged"}
    assert _ran(run) == [("health", None)]  # nothing else started a process
    unjudged = [c for c in run.claims if c.verdict == "unjudged"]
    assert all("not judged at level 1" in c.evidence for c in unjudged)
    assert {c.id: c.evidence.rsplit("--level ", 1)[1].split()[0] for c in unjudged} == {
        "levelled.documented": "2", "levelled.observed": "3"}  # each names the level that judges it
    assert not run.failed  # unjudged is not a failure


def test_level_two_judges_documented_claims_and_runs_an_undefined_scenario_once():
    (run,) = run_check(["levelled"], [0], registry=REGISTRY,
                       options={"levelled": {0: LabOptions(level=2, repeats=5)}})
    assert _verdicts(run) == {"levelled.health": "holds", "levelled.documented": "holds",
                              "levelled.observed": "unjudged"}
    assert _ran(run) == [("health", None), ("undefined", 0)]  # once, though repeats says 5


def test_the_full_level_repeats_undefined_scenarios_and_judges_everything():
    (run,) = run_check(["levelled"], [0], registry=REGISTRY,
                       options={"levelled": {0: LabOptions(level=3, repeats=3)}})
    assert _verdicts(run) == {"levelled.health": "holds", "levelled.documented": "holds",
                              "levelled.observed": "observed"}
    assert _ran(run) == [("extra", None), ("health", None), ("undefined", 0), ("undefined", 1), ("undefined", 2)]
    assert run.options["level"] == 3


def test_a_level_gives_the_full_checks_verdicts_and_a_differing_one_is_found():
    full = run_check(["levelled"], [0], registry=REGISTRY, options={"levelled": {0: LabOptions(level=3)}})
    for level in (1, 2):
        lower = run_check(["levelled"], [0], registry=REGISTRY, options={"levelled": {0: LabOptions(level=level)}})
        assert level_differences(lower, full) == []
        assert changes(full, lower) == [] and changes(lower, full) == []  # unjudged and fewer scenarios are by design
        assert changes(full, lower, evidence="all", scenarios=False) == []
    broken = dataclasses.replace(full[0], claims=tuple(
        dataclasses.replace(c, verdict="fails") if c.id == "levelled.health" else c for c in full[0].claims))
    assert level_differences(lower, [broken]) == [{"lab": "levelled", "device": 0, "claim": "levelled.health",
                                                   "level": 2, "verdict": "holds", "full_check": "fails"}]
    gone = dataclasses.replace(full[0], claims=full[0].claims[1:])
    assert [d["full_check"] for d in level_differences(lower, [gone])] == ["missing"]
    assert [d["item"] for d in changes([broken], lower)] == ["levelled.health"]  # a judged claim still drifts
    skipping = dataclasses.replace(lower[0], claims=tuple(  # a level that skips what the full check decides
        dataclasses.replace(c, verdict="skipped") if c.id == "levelled.health" else c for c in lower[0].claims))
    assert level_differences([skipping], full) == [{"lab": "levelled", "device": 0, "claim": "levelled.health",
                                                    "level": 2, "verdict": "skipped", "full_check": "holds"}]
    assert [(d["item"], d["change"], d["now"]) for d in changes(full, [skipping])] == [
        ("levelled.health", "verdict", "skipped")]  # drift between levels sees it too


def test_a_claim_level_must_be_one_to_three_and_defaults_by_kind():
    args = ("x.y", "s.", "src", "promise", ("a",), lambda o: {}, "e", lambda f: True)
    for bad in (0, 4, -1):
        with pytest.raises(ValueError, match="level"):
            Claim(*args, level=bad)
    assert Claim(*args).lowest_level == 2 and Claim(*args, level=1).lowest_level == 1
    assert default_level("old-text") == 2 and default_level("observation") == FULL
    assert set(LEVELS) == {1, 2, 3}
    assert "ctxlab check --level 2" in unjudged_reason(2, 1)


@pytest.mark.parametrize("bad", [0, 4, 2.5, True, "2", None])
def test_a_bad_level_is_an_option_error(bad):
    with pytest.raises(OptionError, match="level"):
        LabOptions(level=bad)


@pytest.mark.parametrize("argv, message", [
    (["check", "--level", "4"], "--level"),
    (["check", "--level", "one"], "--level"),
    (["check", "--level", "1", "--repeats", "5"], "--repeats: level 1 runs each scenario once"),
])
def test_the_cli_refuses_a_bad_level_in_one_line(argv, message):
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("Error")]) == 1


def test_repeats_below_the_full_level_are_refused_by_the_api():
    with pytest.raises(OptionError, match="repeats apply at level 3"):
        checked_selection(["levelled"], [0], repeats=3, registry=REGISTRY, level=2)


def test_check_traces_lifecycle_only_where_cupti_is_installed(monkeypatch):
    import importlib.util

    lifecycle = get_lab("lifecycle")
    assert lifecycle.check_options == {"trace": True}
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cupti" else real(name, *a))
    assert deciding_options(lifecycle) == {}  # untraced, its traced claims read skipped naming CUPTI
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "cupti" else real(name, *a))
    assert deciding_options(lifecycle) == {"trace": True}
    assert deciding_options(get_lab("migrate")) == {"context": "all"}  # green contexts judged where supported


def test_check_traces_lifecycle_only_where_a_c_compiler_or_a_built_callback_is(monkeypatch, tmp_path):
    import importlib.util
    import shutil

    from ctxlab.tracing.missing import trace_missing

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "cupti" else real(name, *a))
    monkeypatch.setenv("CTXLAB_CACHE", str(tmp_path))  # nothing built before
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert "no C compiler" in (trace_missing() or "")
    assert deciding_options(get_lab("lifecycle")) == {}


def _scenarios_at(name: str, level: int) -> list[str]:
    lab = get_lab(name)
    options = lab.make_options(level=level, **lab.check_options)
    return sorted(s.name for s in plan(lab, options).scenarios)


def test_the_real_labs_level_one_is_the_node_health_promises():
    level_one = {c.id for name in ("migrate", "refcount", "lifecycle", "modules", "interop", "peer")
                 for c in get_lab(name).claims if c.lowest_level == 1}
    assert level_one == {
        "migrate.state-follows-context", "migrate.pointer-belongs-to-context", "migrate.current-on-several-threads",
        "migrate.runtime-binds-primary", "refcount.runtime-holds-reference", "refcount.primary-count",
        "lifecycle.handle-is-primary", "lifecycle.new-thread-has-no-context", "lifecycle.new-thread-binds-primary"}
    assert all(get_lab(name).claims[0].kind for name in ("modules", "interop", "peer"))
    for name in ("modules", "interop", "peer"):
        assert _scenarios_at(name, 1) == []  # nothing of theirs is node health
    for name in ("migrate", "refcount", "lifecycle"):
        lab = get_lab(name)
        one, two, full = (_scenarios_at(name, level) for level in (1, 2, 3))
        assert one and set(one) <= set(two) <= set(full)
        needed = {s for c in lab.claims if c.lowest_level == 1 for s in c.scenarios}
        assert set(one) == needed & set(full)


def test_below_the_full_level_no_scenario_repeats():
    for name in ("migrate", "refcount", "lifecycle", "modules", "interop", "peer"):
        lab = get_lab(name)
        for level in (1, 2):
            planned = plan(lab, lab.make_options(level=level, **lab.check_options))
            assert all(job.repeat in (None, 0) for job in planned.jobs)
            assert len({job.scenario.name for job in planned.jobs}) == len(planned.jobs)
        full = plan(lab, lab.make_options(level=3, repeats=4, **lab.check_options))
        assert all(len([j for j in full.jobs if j.scenario is s]) == 4 for s in full.scenarios if s.undefined)


# Why a catalogued claim may read skipped on the H200's full check: missing hardware, a library (or a function
# of one) that is not there, or, for one claim, a precondition no library meets: numba's as_cuda_array of a
# torch tensor names no stream, and the value read is promised only where the handover names one (what is read
# then is interop.exchange.unnamed-stream's observation).
MISSING_HARDWARE_OR_LIBRARY = ("needs 2 GPUs", "not installed", "has no ")
NO_LIBRARY_MEETS_THE_PRECONDITION = {"interop.exchange.torch-to-numba": "handovers named none"}


def test_the_recorded_full_check_judges_every_claim_it_can_on_the_h200():
    """A catalogued claim is skipped on the H200's full check only for missing hardware (a second GPU) or a
    missing library: never because check left a scenario out (migrate's green contexts were, before)."""
    runs = runs_from_document(recorded("check.json"), "check.json")
    assert runs[0].environment["gpu"] == "NVIDIA H200"
    skipped = [(c.id, c.evidence) for r in runs for c in r.claims if c.verdict == "skipped"]
    wrong = [(cid, why) for cid, why in skipped if not any(word in why for word in MISSING_HARDWARE_OR_LIBRARY)
             and NO_LIBRARY_MEETS_THE_PRECONDITION.get(cid, "\0") not in why]
    assert wrong == [], wrong
    assert all(r.options.get("level", FULL) == FULL for r in runs)
    assert not [c.id for r in runs for c in r.claims if c.verdict == "unjudged"]
    catalogue = {c.id for name in ("migrate", "refcount", "lifecycle", "modules", "interop", "peer")
                 for c in get_lab(name).claims}
    assert {c.id for r in runs for c in r.claims} == catalogue  # the recording is of today's catalogue
    migrate = next(r for r in runs if r.lab == "migrate")
    assert migrate.options["context"] == "all"
    green = [c for c in migrate.claims if c.id.startswith("migrate.green-")]
    assert green and all(c.verdict in ("holds", "observed") for c in green)
    lifecycle = next(r for r in runs if r.lab == "lifecycle")
    assert lifecycle.options["trace"] is True
    assert next(c for c in lifecycle.claims if c.id == "lifecycle.driver-calls-beneath").verdict == "observed"


def test_the_levels_recorded_on_the_h200_keep_their_promise():
    """labs/results/levels/levels.json: level 1 within 5 s and level 2 within 15 s (medians of three whole
    commands), every verdict a lower level gave equal to the full check's."""
    doc = recorded("levels/levels.json")
    assert doc["differences"] == []
    assert doc["levels"]["1"]["median_s"] <= 5.0 and doc["levels"]["2"]["median_s"] <= 15.0
    assert doc["levels"]["3"]["unjudged"] == 0 and doc["levels"]["3"]["judged"] == 124
    assert doc["levels"]["1"]["judged"] == 9 and doc["levels"]["1"]["skipped"] == 0
    assert all(exit == 0 for row in doc["levels"].values() for exit in row["exit"])


def test_the_level_comparison_is_recomputed_from_the_committed_runs():
    """The differences levels.json states are worked out again from the runs it names that are committed (each
    level's first run, beside the full check), not read from the file; a moved verdict in either side is one."""
    doc = recorded("levels/levels.json")
    full = runs_from_document(recorded(doc["full_check"]), doc["full_check"])
    committed = [row for row in doc["runs"] if row["level"] != 3 and (RESULTS / "levels" / row["json"]).exists()]
    assert {row["level"] for row in committed} == {1, 2}  # each lower level has a run to recompute from
    recomputed = []
    for row in committed:
        lower = runs_from_document(recorded(f"levels/{row['json']}"), row["json"])
        recomputed += level_differences(lower, full)
        judged = next(c for r in lower for c in r.claims if c.verdict not in ("unjudged", "skipped"))
        moved = "fails" if judged.verdict != "fails" else "holds"
        broken = [dataclasses.replace(r, claims=tuple(dataclasses.replace(c, verdict=moved) if c.id == judged.id
                                                      else c for c in r.claims)) for r in lower]
        assert [d["claim"] for d in level_differences(broken, full)] == [judged.id]
    assert recomputed == doc["differences"] == []
