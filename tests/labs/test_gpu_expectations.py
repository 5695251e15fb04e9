"""The GPU tests' checks (tests/gpu/expected.py) on the CPU, on runs recorded on the H200 (labs/results/).

On a machine no expectations were written for (the recorded run with its environment key changed) the
invariants still run, and catch a planted defect: a missing claim, a promise that fails, an error, a missing
repeat, a scenario that recorded nothing or skipped without a reason, a whole lab skipped for a reason the run's
environment record does not bear out. The exact verdicts apply only where the environment's file exists. The
recorded runs are re-judged with today's claims first (a claim is a pure function of the observations), their
skips restated as today's scenarios record them (``RESTATED``: the two reasons they hold, as text) and their
environment given the GPU count today's records hold (the H200 they were recorded on shows one): what a GPU run
made with this code would hold.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

import ctxlab
from ctxlab.claim import judge
from ctxlab.labs import get_lab
from ctxlab.records import skips
from ctxlab.records.model import Observation
from ctxlab.records.shapes import runs_from_document
from tests.conftest import recorded
from tests.gpu import expected
from tests.gpu.expected import (
    EXPECTATIONS,
    H200,
    assert_expected,
    environment_key,
    expectations_for,
    invariant_problems,
    outcome_problems,
    selected_scenarios,
    slug,
    verdict_problems,
)

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

H100 = EXPECTATIONS / "nvidia-h100-80gb-hbm3_driver-13000_cuda-bindings-13030_cupy-13020.json"
ELSEWHERE = {"gpu": "NVIDIA L4", "driver_version": 12080, "runtime_versions": {"cupy": 12080, "cuda_bindings": 12090}}


# The skip reasons the recorded runs hold as text, as today's scenarios record them (ctxlab.records.skips).
RESTATED = {"needs 2 GPUs, this machine has 1": skips.gpus(2, 1),
            "cupy.cuda.runtime has no deviceReset (CuPy 14.2.0)":
                skips.unsupported("cupy.cuda.runtime has no deviceReset (CuPy 14.2.0)")}
RECORDED_GPUS = 1  # the H200 of labs/results/ (labs/results/doctor.json lists one device)


def restated(run):
    """``run`` as this code records it: its skips structured (``RESTATED``), its environment's GPU count."""
    observations = tuple(dataclasses.replace(o, value=RESTATED[o.value])
                         if o.what == "skipped" and isinstance(o.value, str) and o.value in RESTATED else o
                         for o in run.observations)
    environment = run.environment if "gpu_count" in run.environment else {**run.environment,
                                                                          "gpu_count": RECORDED_GPUS}
    return dataclasses.replace(run, observations=observations, environment=environment)


def rejudged(run):
    """``run`` with its verdicts given by today's judges over its own observations, as this code records them
    (``restated``), each skip checked against its environment record."""
    run = restated(run)
    ran = [s.name for s in selected_scenarios(run)]
    lab = get_lab(run.lab)
    return dataclasses.replace(run, claims=judge(lab.claims, run.observations, ran, run.options.get("level", 3),
                                                 run.environment, lab.gpus))


def check_runs():
    return [rejudged(r) for r in runs_from_document(recorded("check.json"), "check.json")]


def elsewhere(run):
    return dataclasses.replace(run, environment={**run.environment, **ELSEWHERE})


def by_lab(lab):
    return next(r for r in check_runs() if r.lab == lab)


def replace_claim(run, cid, **changes):
    claims = tuple(dataclasses.replace(c, **changes) if c.id == cid else c for c in run.claims)
    assert claims != run.claims, cid
    return dataclasses.replace(run, claims=claims)


def failure(run, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        assert_expected(run, gpus=1, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------- the files

def test_every_expectations_file_is_named_for_its_environment_and_covers_the_catalogue():
    catalogue = {c.id: c.kind for c in ctxlab.claims()}
    assert expected.files() == [H100, H200]  # today's: the H100's and the H200's
    for path in expected.files():
        table = json.loads(path.read_text())
        assert path.stem == slug(table["written_for"]), path.name
        assert set(table["verdicts"]) == set(catalogue), path.name
        for cid, verdict in {**table["verdicts"], **table.get("traced", {})}.items():
            assert verdict in expected.ALLOWED[catalogue[cid]] | {"fails", "changed"}, (path.name, cid, verdict)


def test_the_file_is_found_by_the_runs_environment():
    run = by_lab("refcount")
    assert slug(run.environment) == "nvidia-h200_driver-13000_cuda-bindings-13030_cupy-13020"
    assert expectations_for(run.environment) == json.loads(H200.read_text())
    assert expectations_for(ELSEWHERE) is None
    for key in ("gpu", "driver_version", "runtime_versions"):  # any one of the three differing
        other = {**run.environment, key: ELSEWHERE[key]}
        assert expectations_for(other) is None and slug(other) != slug(run.environment)
    assert environment_key({**run.environment, "hostname": "elsewhere"}) == environment_key(run.environment)


# ---------------------------------------------------------------- the recorded runs pass, on the H200 and elsewhere

@pytest.mark.parametrize("lab", ["migrate", "refcount", "lifecycle", "modules", "interop", "peer"])
def test_the_recorded_h200_run_passes_with_exact_verdicts_and_elsewhere_with_the_invariants(lab):
    run = by_lab(lab)
    assert invariant_problems(run) == []
    assert verdict_problems(run, expectations_for(run.environment), gpus=1) == []
    assert_expected(run, gpus=1)
    with pytest.warns(UserWarning, match="no expectations for .*NVIDIA L4.*the invariants were checked"):
        assert_expected(elsewhere(run), gpus=1)


@pytest.mark.parametrize("lab", ["migrate", "refcount", "lifecycle", "modules", "interop", "peer"])
def test_the_recorded_h100_run_meets_the_h100s_file_exactly(lab):
    """labs/results/h100/check.json, a full check on one H100 with structured skips and its GPU count: its file
    is found by its environment, and every verdict and observation's outcome class is the one the file expects."""
    runs = runs_from_document(recorded("h100/check.json"), "h100/check.json")
    (run,) = [r for r in runs if r.lab == lab]
    table = expectations_for(run.environment)
    assert table == json.loads(H100.read_text()) and run.environment["gpu_count"] == 1
    assert verdict_problems(run, table, gpus=1) == [] and outcome_problems(run, table) == []
    assert_expected(run, gpus=1)
    changed = [c for c in run.claims if c.verdict == "changed"]  # the file decides: an old text read as holding
    for claim in changed[:1]:
        assert f"{claim.id}: holds (expected changed)" in failure(replace_claim(run, claim.id, verdict="holds"))


def test_the_recorded_lab_runs_pass_too():
    for name, traced in (("migrate-green.json", False), ("lifecycle-traced.json", True), ("peer-one-gpu.json", False),
                         ("interop.json", False), ("migrate-all.json", False)):
        (run,) = [rejudged(r) for r in runs_from_document(recorded(name), name)]
        assert_expected(run, traced=traced, gpus=1)


# ---------------------------------------------------------------- planted defects, caught where no file exists

def test_a_missing_claim_is_caught():
    run = elsewhere(by_lab("interop"))
    gone = dataclasses.replace(run, claims=tuple(c for c in run.claims if c.id != "interop.exchange.unnamed-stream"))
    assert "interop.exchange.unnamed-stream: missing from the run" in failure(gone)
    # the recorded run as the judges of its day left it lacks that claim (added since): caught too
    old_file = "drift/check-issue25.json"
    (old,) = [r for r in runs_from_document(recorded(old_file), old_file) if r.lab == "interop"]
    assert "interop.exchange.unnamed-stream: missing" in failure(elsewhere(old))


def test_a_promise_that_fails_is_caught_naming_the_claim_and_its_evidence():
    run = elsewhere(by_lab("refcount"))
    cid = "refcount.primary-count"
    claim = next(c for c in run.claims if c.id == cid)
    assert claim.kind == "promise"
    message = failure(replace_claim(run, cid, verdict="fails"))
    assert f"{cid}: fails (promise): {claim.evidence}" in message and "NVIDIA L4" in message


def test_an_error_verdict_is_caught_for_every_kind_of_claim():
    run = elsewhere(by_lab("interop"))
    for kind in ("promise", "old-text", "observation"):
        claim = next((c for c in run.claims if c.kind == kind), None)
        if claim is None:
            continue
        message = failure(replace_claim(run, claim.id, verdict="error", evidence="the judge raised KeyError: 'x'"))
        assert f"{claim.id}: error ({kind}): the judge raised KeyError" in message


def test_a_scenario_that_broke_is_caught():
    run = elsewhere(by_lab("modules"))
    broke = dataclasses.replace(run, errors=({"scenario": "nvcc", "kind": "crash", "message": "exit -11"},))
    assert "scenario nvcc broke: crash: exit -11" in failure(broke)


def test_a_missing_repeat_is_caught():
    run = elsewhere(by_lab("migrate"))
    undefined = next(s.name for s in selected_scenarios(run) if s.undefined)
    short = dataclasses.replace(run, observations=tuple(o for o in run.observations
                                                       if not (o.scenario == undefined and o.repeat == 2)))
    assert f"scenario {undefined}: repeats [2] of 3 recorded nothing" in failure(short)


def test_a_selected_scenario_that_recorded_nothing_is_caught():
    """Its claims would read skipped ("not run") or error: the scenario itself is named."""
    run = elsewhere(by_lab("lifecycle"))
    gone = dataclasses.replace(run, observations=tuple(o for o in run.observations if o.scenario != "green-runtime"))
    gone = rejudged(gone)
    assert "scenario green-runtime was selected and recorded nothing" in failure(gone)


def test_a_scenario_skipped_without_a_reason_is_caught_and_with_one_passes():
    from ctxlab.records.model import Observation

    run = elsewhere(by_lab("refcount"))
    green = {"green-reference", "green-primary-reset", "green-destroy-elsewhere"}

    def skipping(reason):
        kept = [o for o in run.observations if o.scenario not in green]
        undefined = {s.name for s in selected_scenarios(run) if s.undefined}
        skips = [Observation("probe", "MainThread", None, "skipped", reason, scenario=s, repeat=r)
                 for s in sorted(green) for r in ((0, 1, 2) if s in undefined else (None,))]
        return rejudged(dataclasses.replace(run, observations=tuple(kept + skips)))

    with pytest.warns(UserWarning):  # no green contexts here: every green claim skipped with why, and that is fine
        assert_expected(skipping(skips.unsupported("cuGreenCtxCreate returned CUDA_ERROR_NOT_SUPPORTED")), gpus=1)
    assert "skipped without a reason" in failure(skipping(""))
    assert "skipped without a reason" in failure(skipping({"kind": "unsupported", "why": " "}))
    text = failure(skipping("cuGreenCtxCreate returned CUDA_ERROR_NOT_SUPPORTED"))  # as text alone: not trusted
    assert "scenario green-reference was skipped without a structured reason" in text
    assert "refcount.green-retains-primary: skipped without a structured reason" in text


def test_exact_verdicts_apply_only_where_the_file_exists():
    """An old-text claim read `holds` instead of `changed` breaks no invariant: on the H200 its file catches it,
    elsewhere nothing says what that machine should read."""
    run = by_lab("refcount")
    cid = next(c.id for c in run.claims if c.verdict == "changed")
    moved = replace_claim(run, cid, verdict="holds")
    assert invariant_problems(moved) == []
    assert f"{cid}: holds (expected changed)" in failure(moved)
    with pytest.warns(UserWarning):
        assert_expected(elsewhere(moved), gpus=1)


def test_a_new_machines_file_is_written_from_its_runs(tmp_path, monkeypatch):
    runs = [elsewhere(r) for r in check_runs()]
    monkeypatch.setattr(expected, "EXPECTATIONS", tmp_path)
    path = tmp_path / f"{slug(ELSEWHERE)}.json"
    out = tmp_path / "check.json"
    from ctxlab.records.model import dumps

    out.write_text(dumps(runs, as_list=True))
    assert expected.main([str(out)]) == 0
    table = json.loads(path.read_text())
    assert environment_key(table["written_for"]) == ELSEWHERE
    assert table["verdicts"] == {c.id: c.verdict for r in runs for c in r.claims}
    for run in runs:
        assert_expected(run, gpus=1)  # the new file's verdicts are exactly what that machine decided
    assert EXPECTATIONS.name == "expectations"


# ---------------------------------------------------------------- the environment matrix's comparison

def with_variable(runs, variable, value):
    return [dataclasses.replace(r, environment={**r.environment, "driver_variables": {variable: value}})
            for r in runs]


def test_the_matrix_compares_verdicts_and_normalised_evidence_of_every_claim():
    from tests.gpu import matrix
    from tests.report.test_drift_normalized import earlier_evidence, with_evidence

    base = check_runs()
    earlier = with_evidence(base, {cid: was for cid, (_, was) in earlier_evidence().items()})
    assert matrix.differences(base, earlier) == []  # two H200 runs of the same code
    promise = next(c for c in base[1].claims if c.kind == "promise")
    moved = with_evidence(base, {promise.id: promise.evidence + " and then some"},
                          {"modules.cupy-kernel-cache": "skipped"})
    assert {(d["item"], d["change"]) for d in matrix.differences(base, moved)} == {
        (promise.id, "evidence"), ("modules.cupy-kernel-cache", "verdict")}  # a promise's evidence counts too
    fewer = [dataclasses.replace(base[0], claims=base[0].claims[1:]), *base[1:-1]]
    assert {(d["lab"], d["item"], d["change"]) for d in matrix.differences(base, fewer)} == {
        (base[0].lab, base[0].claims[0].id, "claim missing"), (base[-1].lab, base[-1].lab, "run missing")}


def test_what_may_change_under_each_variable():
    from tests.gpu import matrix

    base = check_runs()
    assert matrix.racy(base) == {"interop.exchange.unordered", "interop.exchange.torch-to-numba",
                                 "interop.exchange.unnamed-stream"}  # not ipc.torch: one wrong read, no race
    loading = matrix.pinned("CUDA_MODULE_LOADING", base)
    assert loading == {"modules.module-load-is-immediate", "modules.library-lazy-at-first-use",
                       "modules.library-eager-everywhere", "modules.default-loading-mode",
                       "modules.library-per-context"}
    assert matrix.pinned("CUDA_DEVICE_MAX_CONNECTIONS", base) == set()
    visible = next(v for v in matrix.VARIANTS if v.variable == "CUDA_VISIBLE_DEVICES")
    peer = {c.id for c in ctxlab.claims("peer")}
    assert peer <= set(matrix.may_change(visible, base, gpus=2))
    assert not peer & set(matrix.may_change(visible, base, gpus=1))
    for variant in matrix.VARIANTS:
        assert not loading & set(matrix.may_change(variant, base, gpus=2)), variant
    # the teardown claims' kind of outcome under eager loading (an H200 finding), and under that variable only
    blast = {c.id for c in ctxlab.claims("interop") if c.id.startswith("interop.blast.")}
    eager, lazy = (next(v for v in matrix.VARIANTS if v.value == value) for value in ("EAGER", "LAZY"))
    assert blast and blast <= set(matrix.may_change(eager, base, gpus=1))
    assert not blast & set(matrix.may_change(lazy, base, gpus=1))
    assert not {c for c in matrix.may_change(eager, base, gpus=1) if c.startswith("interop.blast.")} - {
        c.id for c in ctxlab.claims("interop") if c.error_varies}


def test_the_matrix_summary_of_recorded_folders(tmp_path):
    from ctxlab.records.model import dumps
    from tests.gpu import matrix

    base = check_runs()
    (tmp_path / "baseline.json").write_text(dumps(base, as_list=True))
    for variant in matrix.VARIANTS:
        (tmp_path / f"{variant.name}.json").write_text(dumps(with_variable(base, variant.variable, variant.value),
                                                             as_list=True))
    assert matrix.main([str(tmp_path), "1"]) == 0
    text = (tmp_path / "summary.md").read_text()
    assert "## CUDA_MODULE_LOADING=EAGER" in text and "differences: 0 (0 unexpected)" in text
    # a loading claim that read differently under EAGER, and a run that did not record the variable
    eager = with_variable(base, "CUDA_MODULE_LOADING", "EAGER")
    modules = next(i for i, r in enumerate(eager) if r.lab == "modules")
    eager[modules] = replace_claim(eager[modules], "modules.default-loading-mode", verdict="fails",
                                   evidence="with CUDA_MODULE_LOADING unset, cuModuleGetLoadingMode reports "
                                            "CU_MODULE_EAGER_LOADING")
    eager[0] = dataclasses.replace(eager[0], environment={**eager[0].environment, "driver_variables": {}})
    (tmp_path / "module-loading-eager.json").write_text(dumps(eager, as_list=True))
    assert matrix.main([str(tmp_path), "1"]) == 1
    text = (tmp_path / "summary.md").read_text()
    assert "UNEXPECTED modules: modules.default-loading-mode: verdict: now fails (was holds)" in text
    assert f"recorded in every run and shown by the driver: no: {eager[0].lab}" in text
    doctor = recorded("doctor.json")  # the H200's, no variable: LAZY, one device
    eager_, lazy, visible = (next(v for v in matrix.VARIANTS if v.name == n)
                             for n in ("module-loading-eager", "module-loading-lazy", "visible-devices-0"))
    assert matrix.driver_problem(eager_, doctor["driver"]) == "the driver's loading mode is CU_MODULE_LAZY_LOADING"
    assert matrix.driver_problem(lazy, doctor["driver"]) is None
    assert matrix.driver_problem(visible, doctor["driver"]) is None


CUPY_ABSENT = skips.library("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy"), installed=False,
                            error="No module named 'cupy'")
CUPY_BROKEN = skips.library("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy"), installed=True,
                            error="ImportError: libnvrtc.so.13: cannot open shared object file")


@pytest.mark.parametrize("lab, reason, environment, bites", [
    ("refcount", "cuInit: CUDA_ERROR_UNKNOWN", {}, True),
    ("refcount", skips.unsupported("the lab's child could not start"), {}, True),
    ("refcount", "needs 2 GPUs, this machine has 1", {}, True),  # the text alone is not trusted
    ("refcount", "cupy is not installed here", {"cupy": None}, True),
    ("refcount", skips.gpus(2, 1), {}, True),  # a one-GPU lab cannot skip for want of two GPUs
    ("peer", skips.gpus(2, 1), {}, False),  # the run's record counts one GPU
    ("peer", skips.gpus(2, 1), {"gpu_count": 2}, True),  # the record counts the two it needs
    ("peer", skips.gpus(2, 1), {"gpu_count": None}, True),  # no count recorded to check it against
    ("peer", skips.peer_access("cuDeviceCanAccessPeer: GPU 0 -> GPU 1: 0, back: 0"), {"gpu_count": 2}, False),
    ("peer", skips.peer_access("cuDeviceCanAccessPeer: GPU 0 -> GPU 1: 0, back: 0"), {}, True),  # with one GPU?
    ("refcount", CUPY_ABSENT, {"cupy": None}, False),  # the record shows CuPy is not installed
    ("refcount", CUPY_ABSENT, {}, True),  # the record holds CuPy's version: it is installed
    ("refcount", CUPY_BROKEN, {}, True),  # installed and broken on a GPU runner: a finding, not a missing library
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_lab_skipped_whole_passes_only_for_missing_hardware_or_library_the_record_shows(lab, reason, environment,
                                                                                          bites):
    from ctxlab.claim import Observation

    run = elsewhere(by_lab(lab))
    run = dataclasses.replace(run, environment={**run.environment, **environment})
    skipped = [Observation(step="skip", what="skipped", value=reason, thread="MainThread", context_id=None,
                           scenario=s.name) for s in selected_scenarios(run)]
    whole = dataclasses.replace(run, observations=skipped)
    problems = [p for p in invariant_problems(whole) if p.startswith(f"every scenario of {lab} was skipped")]
    assert bool(problems) is bites, problems
    if lab != "peer":  # the recorded peer run ran nothing on its one GPU: no scenario of it to keep
        half = dataclasses.replace(run, observations=skipped[1:] + [o for o in run.observations
                                                                    if o.scenario == skipped[0].scenario])
        assert not [p for p in invariant_problems(half) if p.startswith("every scenario")]


def test_the_peer_lab_skipped_on_one_gpu_passes_and_claims_it_for_a_one_gpu_lab_do_not():
    """The recorded one-GPU peer run, as this code records it, passes; its skips moved into a one-GPU lab's run are
    errors by the judge and problems by the invariants."""
    peer = by_lab("peer")
    assert all(c.verdict == "skipped" and c.skip == {"kind": "hardware", "resource": "gpus", "required": 2,
                                                     "found": 1} for c in peer.claims)
    assert invariant_problems(peer) == []
    refcount = restated(next(r for r in runs_from_document(recorded("check.json"), "check.json")
                             if r.lab == "refcount"))
    two = dataclasses.replace(refcount, observations=tuple(
        Observation("skip", "MainThread", None, "skipped", skips.gpus(2, 1), scenario=s.name)
        for s in selected_scenarios(refcount)))
    judged = rejudged(two)
    assert {c.verdict for c in judged.claims} == {"error"}
    problems = invariant_problems(judged)
    assert any("cannot skip for want of 2" in p for p in problems), problems


# ---------------------------------------------------------------- observations' outcome classes, under the key

def observation_claims():
    return [(run.lab, c.id) for run in check_runs() for c in run.claims
            if c.kind == "observation" and c.verdict == "observed"
            and "silent-wrong" not in expected.expectations(H200)["outcomes"].get(c.id, ["silent-wrong"])]


@pytest.mark.parametrize("lab, cid", observation_claims(), ids=lambda v: v)
def test_an_observation_that_turns_silently_wrong_is_caught_under_the_recorded_key(lab, cid):
    """Both read ``observed``: the outcome class tells an error (or a right answer) from a silent wrong value."""
    run = by_lab(lab)
    claim = next(c for c in run.claims if c.id == cid)
    wrong = replace_claim(run, cid, evidence=claim.evidence + "; then silent-wrong-result (got 0, expected 1)")
    message = failure(wrong)
    assert f"{cid}: shows silent-wrong, never recorded here" in message


def test_outcome_classes_name_what_the_evidence_shows():
    classes = expected.outcome_classes
    assert classes("primary: correct; created: CUDA_ERROR_INVALID_HANDLE (all 3)") == ["correct", "error"]
    assert classes("cudaErrorIllegalAddress in 2 of 3, crashed (SIGSEGV) in 1") == ["crash", "error"]
    assert classes("wrong values returned without an error: 0") == []
    assert classes("wrong values returned without an error: 4") == ["silent-wrong"]
    assert classes("silent-wrong-result (got 0, expected 1499500)") == ["silent-wrong"]
    assert classes("the sum is incorrect") == []  # a word that only contains "correct"


def test_a_race_that_did_not_hit_this_time_passes():
    """A class recorded before and not shown now (the unnamed stream's race read right every time) is no change."""
    run = by_lab("interop")
    cid = "interop.exchange.unnamed-stream"
    assert "silent-wrong" in expected.expectations(H200)["outcomes"][cid]
    assert_expected(replace_claim(run, cid, evidence="every read correct (all 3)"), gpus=1)


# ---------------------------------------------------------------- the same GPU under another driver

def driver_update(run):
    return dataclasses.replace(run, environment={**run.environment, "driver_version": 13010})


def test_a_driver_update_on_the_same_gpu_still_checks_what_does_not_depend_on_the_driver():
    run = driver_update(by_lab("migrate"))
    assert expectations_for(run.environment) is None and expected.same_gpu(run.environment) is not None
    assert_expected(run, gpus=1)  # as recorded: nothing differs
    promise = next(c for c in run.claims if c.kind == "promise" and c.verdict == "holds")
    skipped = replace_claim(run, promise.id, verdict="skipped", evidence="precondition not met: no context",
                            skip={"kind": "precondition"})
    assert f"{promise.id}: skipped on the GPU its file decides it on (holds)" in failure(skipped)
    # a library missing on this runner, as its environment record shows, is no finding on the GPU
    absent = skips.structure_of(skips.library("cupti-python", ("cupti-python",), installed=False))
    missing = replace_claim(run, promise.id, verdict="skipped", evidence="cupti-python is not installed", skip=absent)
    without = dataclasses.replace(missing, environment={**missing.environment, "cupti_python": None})
    with pytest.warns(UserWarning, match=f"differ from .*\\n{promise.id}: skipped"):
        assert_expected(without, gpus=1)
    # where the record holds its version, or the reason is text alone, it is one
    assert f"{promise.id}: skipped for a reason the run's environment record contradicts" in failure(missing)
    text = replace_claim(run, promise.id, verdict="skipped", evidence="cupti-python is not installed here")
    assert f"{promise.id}: skipped without a structured reason" in failure(text)


def test_a_driver_update_may_change_old_texts_and_observations_with_a_warning():
    run = driver_update(by_lab("refcount"))
    old = next(c for c in run.claims if c.kind == "old-text" and c.verdict == "holds")
    obs = next(c for c in run.claims if c.kind == "observation" and c.verdict == "observed"
               and "silent-wrong" not in expected.expectations(H200)["outcomes"].get(c.id, ["silent-wrong"]))
    changed = replace_claim(replace_claim(run, old.id, verdict="changed"), obs.id,
                            evidence=obs.evidence + "; silent-wrong-result (got 0, expected 1)")
    with pytest.warns(UserWarning, match=f"(?s)differ from .*{old.id}: changed.*{obs.id}: shows silent-wrong"):
        assert_expected(changed, gpus=1)
    # the same run under the recorded key fails on both
    message = failure(dataclasses.replace(changed, environment=by_lab("refcount").environment))
    assert f"{old.id}: changed" in message and f"{obs.id}: shows silent-wrong" in message


def test_elsewhere_a_skipped_promise_with_a_reason_is_only_the_invariants_business():
    run = elsewhere(by_lab("migrate"))
    promise = next(c for c in run.claims if c.kind == "promise" and c.verdict == "holds")
    with pytest.warns(UserWarning, match="no expectations"):
        assert_expected(replace_claim(run, promise.id, verdict="skipped", evidence="precondition not met",
                                      skip={"kind": "precondition"}), gpus=1)
