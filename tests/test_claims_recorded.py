"""Claims judged on observations recorded on a real H200 (labs/results/)."""

import dataclasses

import pytest

from ctxlab.claims import judge
from ctxlab.labs import lifecycle, migrate, modules, refcount
from ctxlab.record import parse_runs
from tests.conftest import RESULTS, recorded

LABS = {"migrate": migrate, "refcount": refcount, "lifecycle": lifecycle, "modules": modules}
FILES = ["migrate.json", "migrate-stress.json", "migrate-stress-h200x1.json", "migrate-traced.json", "refcount.json",
         "lifecycle.json",
         "modules.json"]


def load(name):
    (run,) = parse_runs(recorded(name), name)
    return run


@pytest.mark.parametrize("name", FILES)
def test_recorded_runs_come_from_a_real_gpu(name):
    env = load(name).environment
    assert env["gpu"].startswith("NVIDIA") and env["driver_version"] >= 12000 and env["runtime_version"] >= 12000


@pytest.mark.parametrize("name", FILES)
def test_claims_rejudged_on_recorded_observations_give_the_recorded_verdicts(name):
    run = load(name)
    again = judge(LABS[run.lab].CLAIMS, run.observations)
    assert [(c.id, c.verdict) for c in again] == [(c.id, c.verdict) for c in run.claims]
    assert {c.id for c in again} == {c.id for c in LABS[run.lab].CLAIMS}


def replace_value(run, what, **changes):
    out = []
    for o in run.observations:
        if o.what == what:
            o = dataclasses.replace(o, value={**o.value, **changes})
        out.append(o)
    return out


def verdict(lab, observations, claim_id):
    return {c.id: c for c in judge(lab.CLAIMS, observations)}[claim_id]


def test_stress_run_verified_every_handoff():
    run = load("migrate-stress.json")
    summaries = [o.value for o in run.observations if o.what == "handoffs verified"]
    assert len(summaries) == 2
    for s in summaries:
        assert s["threads"] == 32 and s["rounds"] == 1000
        assert s["verified"] == s["handoffs"] == 32_000 and s["mismatches"] == 0 and s["final_ok"]


def test_a_lost_update_makes_state_follows_context_fail():
    run = load("migrate.json")
    broken = replace_value(run, "handoffs verified", mismatches=1, final_ok=False,
                           first_mismatch={"check": "global left by the previous thread"})
    claim = verdict(migrate, broken, "migrate.state-follows-context")
    assert claim.verdict == "fails" and "global left by the previous thread" in claim.evidence


def test_a_pointer_in_another_context_makes_the_pointer_claim_fail():
    run = load("migrate.json")
    broken = replace_value(run, "allocation context", pointer_context=1)
    assert verdict(migrate, broken, "migrate.pointer-belongs-to-context").verdict == "fails"


def test_runtime_binding_something_else_fails():
    run = load("migrate.json")
    broken = replace_value(run, "runtime call without context", bound_primary=False)
    assert verdict(migrate, broken, "migrate.runtime-binds-primary").verdict == "fails"


def test_cross_context_fault_would_make_the_old_text_hold():
    run = load("migrate.json")
    faulted = replace_value(run, "cross-context dereference", read_ok=False, outcome="CUDA_ERROR_ILLEGAL_ADDRESS")
    assert verdict(migrate, faulted, "migrate.own-address-space").verdict == "holds"


def test_missing_observations_are_skipped_with_the_reason():
    run = load("migrate.json")
    kept = [o for o in run.observations if o.what != "current on two threads"]
    claim = verdict(migrate, kept, "migrate.current-on-several-threads")
    assert claim.verdict == "skipped" and "current on two threads" in claim.evidence


def test_refcount_runtime_reference_counts():
    run = load("refcount.json")
    extra = {o.scenario: o.value["extra"] for o in run.observations if o.what == "extra releases accepted"}
    # Each copy of the runtime holds one reference; CuPy's own driver calls add one more.
    assert extra["runtime-setdevice-only"] == 1 and extra["runtime-bindings-only"] == 1
    assert extra["runtime-2"] == extra["runtime-1"] + 1


def test_no_runtime_reference_would_fail_the_documented_claim():
    run = load("refcount.json")
    broken = replace_value(run, "extra releases accepted", extra=0)
    assert verdict(refcount, broken, "refcount.runtime-holds-reference").verdict == "fails"


def test_thread_exit_present_would_hold_the_old_text():
    run = load("refcount.json")
    present = replace_value(run, "cudaThreadExit", in_cuda_bindings=True)
    assert verdict(refcount, present, "refcount.thread-exit").verdict == "holds"
    assert verdict(refcount, run.observations, "refcount.thread-exit").verdict == "changed"


def test_check_baseline_holds_every_lab_and_no_failure():
    runs = parse_runs(recorded("check.json"), "check.json")
    assert {r.lab for r in runs} == set(LABS)
    assert not any(r.failed for r in runs)
    for run in runs:
        again = judge(LABS[run.lab].CLAIMS, run.observations)
        assert [c.verdict for c in again] == [c.verdict for c in run.claims]


def test_lifecycle_set_device_creates_the_context_at_once():
    run = load("lifecycle.json")
    after = {o.value["call"]: o.value for o in run.observations if o.what == "after" and o.scenario == "first-context"}
    assert not after["cudaGetDeviceProperties"]["primary_active"]
    assert after["cudaSetDevice"]["primary_active"] and after["cudaSetDevice"]["current"]


def test_lifecycle_flags_old_text_would_hold_if_the_driver_refused():
    run = load("lifecycle.json")
    refused = replace_value(run, "flags", set_flags_active="cudaErrorSetOnActiveProcess")
    assert verdict(lifecycle, refused, "lifecycle.set-device-flags-active").verdict == "holds"
    assert verdict(lifecycle, run.observations, "lifecycle.set-device-flags-active").verdict == "changed"


def test_modules_lazy_library_claim_fails_if_loaded_eagerly():
    run = load("modules.json")
    eager_like = []
    for o in run.observations:
        if o.scenario == "library-LAZY" and o.what == "load witness":
            loaded = o.value["step"] in ("cuLibraryLoadData", "second context created")
            o = dataclasses.replace(o, value={**o.value, "module_loaded_events": int(loaded),
                                              "memory_grew_mib": 258.0 if loaded else 0.0})
        eager_like.append(o)
    assert verdict(modules, run.observations, "modules.library-lazy-at-first-use").verdict == "holds"
    assert verdict(modules, eager_like, "modules.library-lazy-at-first-use").verdict == "fails"


def test_traced_lab_steps_carry_their_driver_calls():
    run = load("migrate-traced.json")
    made = next(o for o in run.observations if o.what == "context made" and o.scenario == "handoff-created")
    assert any(e.startswith("cuCtxCreate") for e in made.events)
    assert any("CONTEXT_CREATED" in e for e in made.events)


def test_stub_parsing_on_the_stub_nvcc_wrote():
    from ctxlab.stub import parse_stub

    parsed = parse_stub((RESULTS / "nvcc_probe.cudafe1.stub.c").read_text())
    assert parsed["kernels"] == [{"name": "tiny_kernel", "mangled": "_Z11tiny_kernelPi"}]
    assert parsed["variables"] == ["tiny_global"]
    assert parsed["expands_to"] == {"__cudaRegisterBinary": "__cudaRegisterFatBinary",
                                    "__cudaRegisterEntry": "__cudaRegisterFunction",
                                    "__cudaRegisterVariable": "__cudaRegisterVar"}
    assert parsed["static_constructor"]
    assert "__cudaLaunch" in parsed["launch_through"]


def test_a_scenario_that_recorded_why_it_did_not_run_skips_its_claims_with_that_reason():
    from ctxlab.record import Observation

    run = load("modules.json")
    without_nvcc = [o for o in run.observations if o.scenario != "nvcc"]
    without_nvcc.append(Observation("build", "MainThread", None, "skipped", "nvcc is not on the PATH", scenario="nvcc"))
    for claim_id in ("modules.nvcc-registration-makes-no-context", "modules.nvcc-library-runtime"):
        claim = verdict(modules, without_nvcc, claim_id)
        assert (claim.verdict, claim.evidence) == ("skipped", "nvcc is not on the PATH")
