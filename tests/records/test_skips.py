"""Structured skip reasons (ctxlab/records/skips.py, issue 49 item 3): a skip says what kind of reason it is, with
the counts or the import error, and the run's own environment record and the lab's declared GPUs are checked
against it; a skip they contradict is ``error``. Each rule has a case that breaks it and one that keeps it; older
recordings (the reason as text alone) carry no structure and judge as before."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ctxlab.claim import Claim, Inapplicable, judge, some
from ctxlab.labs import get_lab
from ctxlab.records import skips
from ctxlab.records.model import ClaimResult, LabResult, Observation, ResultFileError
from ctxlab.records.shapes import runs_from_document
from tests.conftest import RESULTS, recorded

H200 = {"gpu": "NVIDIA H200", "gpu_count": 1, "cupy": "14.2.0", "cuda_bindings": "13.3.1",
        "libraries": {"torch": "2.11.0", "jax": "0.11.2", "jaxlib": "0.11.2", "numba-cuda": None, "cuda-core": "1.2.0"}}


def claim(scenario: str = "only") -> Claim:
    return Claim("demo.claim", "A promise.", "a source", "promise", (scenario,),
                 lambda obs: {"n": len(some(obs, "seen"))}, "{n} seen", lambda facts: True)


def skipped(reason) -> list[Observation]:
    return [Observation("start", "MainThread", None, "skipped", reason, scenario="only")]


def verdict(reason, environment=None, gpus: int = 1) -> ClaimResult:
    (result,) = judge([claim()], skipped(reason), ["only"], environment=environment, gpus=gpus)
    return result


# ---------------------------------------------------------------- what a skip carries

def test_a_structured_skip_keeps_its_sentence_as_evidence_and_its_structure_on_the_claim():
    result = verdict(skips.gpus(2, 1), gpus=2)
    assert (result.verdict, result.evidence) == ("skipped", "only: needs 2 GPUs, this machine has 1")
    assert result.skip == {"kind": "hardware", "resource": "gpus", "required": 2, "found": 1}
    library = verdict(skips.library("torch", ("torch",), installed=False, error="No module named 'torch'"))
    assert library.evidence == "only: torch is not installed"
    assert library.skip == {"kind": "library", "library": "torch", "distributions": ["torch"], "installed": False,
                            "error": "No module named 'torch'"}
    broken = skips.library("jax", ("jax", "jaxlib"), installed=True, error="ImportError: libcudart.so.13")
    assert broken["why"] == "jax could not be imported: ImportError: libcudart.so.13"


def test_the_judge_gives_its_own_skips_a_kind():
    (unselected,) = judge([claim()], [], ran=["other"])
    assert unselected.skip == {"kind": "not-selected", "scenarios": ["only"]}
    assert unselected.evidence == "not run: none of its scenarios (only) was selected"  # the sentence as before
    level = dataclasses.replace(claim(), level=2)
    (unjudged,) = judge([level], [], level=1)
    assert unjudged.verdict == "unjudged" and unjudged.skip == {"kind": "level", "required": 2, "found": 1}
    held = Claim("demo.pre", "A promise.", "a source", "promise", ("only",), lambda obs: {"x": 1}, "x={x}",
                 lambda facts: True, precondition=lambda facts: False, unmet="never")
    (pre,) = judge([held], [], ["only"])
    assert pre.verdict == "skipped" and pre.skip == {"kind": "precondition"}

    def untraced(obs):
        raise Inapplicable("only: untraced")

    def absent(obs):
        raise Inapplicable("only: torch is not installed", skips.library("torch", ("torch",), installed=False))

    for facts, kind in ((untraced, "inapplicable"), (absent, "library")):
        (result,) = judge([dataclasses.replace(claim(), facts=facts)], [], ["only"])
        assert result.verdict == "skipped" and result.skip["kind"] == kind and "why" not in result.skip


def test_a_skip_is_recorded_only_with_a_structured_reason():
    from ctxlab.harness.recorder import Recorder
    from ctxlab.labs.common import record_skip, skipped_output

    assert skipped_output("only", skips.unsupported("no nvcc"))["observations"][0].value == {
        "kind": "unsupported", "why": "no nvcc"}
    for wrong in ("needs 2 GPUs", {"kind": "hardware"}, {"kind": "made-up", "why": "x"}, None):
        with pytest.raises(TypeError, match="structured reason"):
            record_skip(Recorder(scenario="only"), wrong)


# ---------------------------------------------------------------- hardware: the lab's GPUs and the record's count

def test_a_one_gpu_lab_cannot_skip_for_want_of_two_gpus_whatever_the_environment():
    for environment in ({}, {"gpu_count": 1}, {"device": 0, "unknown": "crash: no driver"}):
        result = verdict(skips.gpus(2, 1), environment, gpus=1)
        assert result.verdict == "error", environment
        assert "the lab needs 1 GPU(s), so it cannot skip for want of 2" in result.evidence
        assert result.evidence.endswith("(the reason: only: needs 2 GPUs, this machine has 1)")
        assert result.skip["kind"] == "hardware"  # the refused reason is kept


def test_a_two_gpu_lab_skips_on_a_machine_of_one_and_not_where_the_record_shows_two():
    assert verdict(skips.gpus(2, 1), {"gpu_count": 1}, gpus=2).verdict == "skipped"
    assert verdict(skips.gpus(2, 1), {}, gpus=2).verdict == "skipped"  # an older record holds no count
    shows_two = verdict(skips.gpus(2, 1), {"gpu_count": 2}, gpus=2)
    assert shows_two.verdict == "error" and "found 1 GPU(s) where the run's environment records 2" in shows_two.evidence
    enough = verdict(skips.gpus(2, 2), {"gpu_count": 2}, gpus=2)
    assert enough.verdict == "error" and "it found 2 GPU(s), the 2 it needs" in enough.evidence
    uncounted = verdict({"kind": "hardware", "resource": "gpus", "why": "not enough GPUs"}, {"gpu_count": 1}, gpus=2)
    assert uncounted.verdict == "error" and "the count required and the count found" in uncounted.evidence


def test_the_peer_lab_declares_two_gpus_and_every_other_lab_one():
    assert {name: get_lab(name).gpus for name in ("migrate", "refcount", "lifecycle", "modules", "interop", "peer")} \
        == {"migrate": 1, "refcount": 1, "lifecycle": 1, "modules": 1, "interop": 1, "peer": 2}


# ---------------------------------------------------------------- library: the record's versions

def test_a_library_the_environment_records_cannot_be_not_installed():
    absent = skips.library("torch", ("torch",), installed=False, error="No module named 'torch'")
    there = verdict(absent, H200)
    assert there.verdict == "error" and "it says torch is not installed, but the run's environment records torch " \
        "2.11.0" in there.evidence
    assert verdict(absent, {**H200, "libraries": {**H200["libraries"], "torch": None}}).verdict == "skipped"
    assert verdict(absent, {}).verdict == "skipped"  # a record without library versions contradicts nothing
    cupy = skips.library("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy"), installed=False)
    assert verdict(cupy, H200).verdict == "error"  # CuPy's version is recorded at the top level
    assert verdict(cupy, {**H200, "cupy": None}).verdict == "skipped"
    numba = skips.library("numba", ("numba-cuda", "numba"), installed=False)
    assert verdict(numba, H200).verdict == "skipped"  # numba-cuda recorded as absent, plain numba not recorded


def test_an_installed_library_that_fails_names_its_import_error():
    failing = skips.library("jax", ("jax", "jaxlib"), installed=True, error="ImportError: libcudart.so.13")
    assert verdict(failing, H200).verdict == "skipped"  # installed, and its error says why it cannot start
    silent = verdict({**failing, "error": ""}, H200)
    assert silent.verdict == "error" and "names no import error for jax" in silent.evidence
    nowhere = verdict(failing, {**H200, "libraries": {"jax": None, "jaxlib": None}})
    assert nowhere.verdict == "error" and "records none of jax, jaxlib" in nowhere.evidence
    unsaid = verdict({"kind": "library", "library": "jax", "why": "jax?"}, H200)
    assert unsaid.verdict == "error" and "whether jax is installed" in unsaid.evidence


# ---------------------------------------------------------------- the other kinds

def test_a_level_skip_must_agree_with_the_runs_level_and_an_unknown_kind_is_refused():
    level = dataclasses.replace(claim(), level=2)
    (unjudged,) = judge([level], [], level=1, environment={})
    assert unjudged.verdict == "unjudged"
    assert skips.contradiction({"kind": "level", "required": 2, "found": 1}, {}, run_level=2) is not None
    assert skips.contradiction({"kind": "level", "required": 2, "found": 1}, {}, run_level=1) is None
    made_up = verdict({"kind": "made-up", "why": "because"}, {})
    assert made_up.verdict == "error" and "'made-up' is not one of hardware" in made_up.evidence
    for reason in (skips.unsupported("no nvcc"), skips.peer_access("cuDeviceCanAccessPeer: 0, back: 0")):
        assert verdict(reason, H200, gpus=2).verdict == "skipped"


def test_a_contradicted_skip_fails_the_run_and_counts_as_judged():
    from ctxlab.records.model import nothing_judged

    claims = judge([claim()], skipped(skips.gpus(2, 1)), ["only"], environment={"gpu_count": 1}, gpus=1)
    run = LabResult("demo", "2026-01-01T00:00:00+00:00", 1.0, {"gpu_count": 1}, {}, (), claims)
    assert run.failed and nothing_judged([run]) is None  # an error is not an empty run: it is a broken one


# ---------------------------------------------------------------- the file format

def test_the_skip_is_written_read_back_and_fits_the_schema():
    import jsonschema

    from ctxlab.schema import schema

    claims = (*judge([claim()], skipped(skips.gpus(2, 1)), ["only"], environment={"gpu_count": 1}, gpus=2),
              ClaimResult("demo.held", "s", "src", "holds", "e", "promise"))
    run = LabResult("demo", "2026-01-01T00:00:00+00:00", 1.0, {"device": 0, "gpu_count": 1}, {},
                    tuple(skipped(skips.gpus(2, 1))), claims)
    data = json.loads(json.dumps(run.to_dict()))
    assert data["claims"][0]["skip"] == {"kind": "hardware", "resource": "gpus", "required": 2, "found": 1}
    assert "skip" not in data["claims"][1]  # only where set
    jsonschema.validate(data, schema())
    (back,) = runs_from_document(data)
    assert back == run
    for wrong, message in (("gpus", "expected a JSON object"), ({"required": 2}, 'no "kind" field')):
        bad = json.loads(json.dumps(data))
        bad["claims"][0]["skip"] = wrong
        with pytest.raises(ResultFileError, match=message):
            runs_from_document(bad)


CURRENT = ("check.json", "peer-one-gpu.json", "lifecycle-traced.json", "levels/level1-run0.json")  # today's judges


@pytest.mark.parametrize("name", sorted({*CURRENT, "interop.json", "check-all-devices.json", "migrate-green.json",
                                         "drift/check-issue25.json"}))
def test_older_recordings_without_structure_load_and_judge_as_before(name):
    """Recorded before skips had a kind: the claims load without one, their skips are text alone, and re-judging
    the run's own observations against its own environment record (which holds no GPU count) changes no verdict
    or evidence that judging without the record gives; for the files today's judges decide alike, that is every
    verdict and evidence recorded."""
    assert (RESULTS / name).exists()
    for run in runs_from_document(recorded(name), name):
        assert all(c.skip is None for c in run.claims)
        assert "gpu_count" not in run.environment
        assert all(isinstance(o.value, str) for o in run.observations if o.what == "skipped")
        lab = get_lab(run.lab)
        ran, level = set(run.timings) or None, run.options.get("level", 3)
        checked = judge(lab.claims, run.observations, ran, level, run.environment, lab.gpus)
        unchecked = judge(lab.claims, run.observations, ran, level)
        assert [(c.id, c.verdict, c.evidence) for c in checked] == [(c.id, c.verdict, c.evidence) for c in unchecked]
        from_text = [c for c in checked if c.verdict == "skipped" and c.evidence.split(": ")[0] in (ran or ())]
        assert all(c.skip is None for c in from_text)  # a scenario's reason recorded as text: no kind made up
        if name in CURRENT:
            again = {c.id: (c.verdict, c.evidence) for c in checked}
            assert {c.id: (c.verdict, c.evidence) for c in run.claims} == {c.id: again[c.id] for c in run.claims}
