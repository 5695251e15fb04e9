"""What the runs recorded on a real H200 (labs/results/) hold, read as data.

Whether each claim's judge is right is tests/labs/test_claims_can_fail.py's job: it
breaks the recorded observations and expects the verdict to follow.
"""

import pytest

import ctxlab
from ctxlab.labs.migrate.claims import relay_lost
from ctxlab.records.model import Observation
from tests.conftest import RESULTS

FILES = ["migrate.json", "migrate-stress.json", "migrate-stress-h200x1.json", "migrate-traced.json", "refcount.json",
         "lifecycle.json", "lifecycle-traced.json", "modules.json",
         "interop.json"]


def load(name):
    (run,) = ctxlab.load(RESULTS / name)
    return run


@pytest.mark.parametrize("name", FILES)
def test_recorded_runs_come_from_a_real_gpu(name):
    env = load(name).environment
    assert env["gpu"].startswith("NVIDIA") and env["driver_version"] >= 12000 and env["runtime_version"] >= 12000


@pytest.mark.parametrize("name", FILES)
def test_every_claim_of_the_lab_was_judged_in_its_recorded_run(name):
    """A recorded run holds every claim its scenarios decide; it may lack only claims none of whose scenarios
    it ran (added after it was recorded, e.g. the green-context claims beside a --context both run), and the
    claims ADDED_SINCE names, which must judge from the run's own observations."""
    run = load(name)
    claims = {c.id: c for c in ctxlab.claims([run.lab])}
    recorded = {c.id for c in run.claims}
    assert recorded <= set(claims)
    ran = set(run.timings) or {o.scenario for o in run.observations}
    missing = [cid for cid in set(claims) - recorded if set(claims[cid].scenarios) & ran]
    assert not [cid for cid in missing if cid not in ADDED_SINCE]
    for cid in missing:
        result = claims[cid].result(run.observations, ran)
        assert result.verdict == ADDED_SINCE[cid], result.evidence


# Claims added after the runs under labs/results were recorded, from observations those runs already hold,
# with the verdict re-judging them gives (a GPU run records them next time).
ADDED_SINCE = {"interop.exchange.unnamed-stream": "observed"}  # issue 25: PyTorch's interface names no stream


def test_stress_run_verified_every_handoff():
    run = load("migrate-stress.json")
    summaries = [o.value for o in run.observations if o.what == "handoffs verified"]
    assert len(summaries) == 2
    for s in summaries:
        assert s["threads"] == 32 and s["rounds"] == 1000
        assert s["handoffs"] == 32_000 and not relay_lost(s), s


def test_traced_lab_steps_carry_their_driver_calls():
    run = load("migrate-traced.json")
    made = next(o for o in run.observations if o.what == "context made" and o.scenario == "handoff-created")
    assert any(e.startswith("cuCtxCreate") for e in made.events)
    assert any("CONTEXT_CREATED" in e for e in made.events)


def test_stub_parsing_on_the_stub_nvcc_wrote():
    from ctxlab.labs.modules.stub import parse_stub

    parsed = parse_stub((RESULTS / "nvcc_probe.cudafe1.stub.c").read_text())
    assert parsed["kernels"] == [{"name": "tiny_kernel", "mangled": "_Z11tiny_kernelPi"}]
    assert parsed["variables"] == ["tiny_global"]
    assert parsed["expands_to"] == {"__cudaRegisterBinary": "__cudaRegisterFatBinary",
                                    "__cudaRegisterEntry": "__cudaRegisterFunction",
                                    "__cudaRegisterVariable": "__cudaRegisterVar"}
    assert parsed["static_constructor"]
    assert "__cudaLaunch" in parsed["launch_through"]


def test_a_scenario_that_recorded_why_it_did_not_run_skips_its_claims_with_that_reason():
    run = load("modules.json")
    without_nvcc = [o for o in run.observations if o.scenario != "nvcc"]
    without_nvcc.append(Observation("build", "MainThread", None, "skipped", "nvcc is not on the PATH", scenario="nvcc"))
    claims = {c.id: c for c in ctxlab.claims(["modules"])}
    for claim_id in ("modules.nvcc-registration-makes-no-context", "modules.nvcc-library-runtime"):
        claim = claims[claim_id].result(without_nvcc)
        assert (claim.verdict, claim.evidence) == ("skipped", "nvcc: nvcc is not on the PATH")


@pytest.mark.parametrize("path", sorted(RESULTS.rglob("*.xml")), ids=lambda p: str(p.relative_to(RESULTS)))
def test_recorded_xml_reports_parse(path):
    """A JUnit report under labs/results is XML still after its paths were rewritten (repo_relative.py)."""
    import xml.etree.ElementTree as ET

    assert next(ET.parse(path).getroot().iter("testcase"), None) is not None
