"""The interop lab on the CPU: how its scenarios are declared, and that a library that is missing makes its
claims ``skipped`` with the reason (decided before any CUDA call). The run on the GPU is tests/gpu/test_interop.py."""

from ctxlab.labs import interop
from ctxlab.labs.interop import LIBRARIES, libs
from ctxlab.records import skips


def test_libraries_start_in_fresh_interpreters_and_undefined_behaviour_is_repeated():
    from ctxlab.lab import Isolation, LabOptions

    declared = {s.name: s for s in interop.LAB.scenarios(LabOptions())}
    for name in [f"{kind}-{lib}" for kind in ("alone", "refs") for lib in LIBRARIES] + ["together"]:
        assert declared[name].isolation is Isolation.FRESH, name
    # Releasing the primary context to zero under live libraries, and CUDA after fork: repeated.
    repeated = [f"refs-{lib}" for lib in LIBRARIES] + ["together", "fork", "start-methods"]
    assert all(declared[name].undefined for name in repeated)
    assert not any(declared[f"alone-{lib}"].undefined for lib in LIBRARIES)
    assert all(s.env.get("XLA_PYTHON_CLIENT_PREALLOCATE") == "false" for s in declared.values())


def test_a_missing_library_skips_its_claims_with_the_reason(monkeypatch):
    from ctxlab.claim import judge
    from ctxlab.labs.interop.exchange import exchange  # the module's name is the function's: not re-exported

    def require(lib):
        if lib == "jax":
            raise interop.Missing(skips.library("jax", ("jax", "jaxlib"), installed=False,
                                                error="No module named 'jax'"))

    monkeypatch.setattr(libs, "require", require)  # decided before any CUDA call: no GPU needed
    observations = [*interop.alone(0, "jax")["observations"], *interop.refs(0, "jax")["observations"],
                    *exchange(0, "cupy", "jax", "dlpack")["observations"]]
    ran = ["alone-jax", "refs-jax", "exchange-cupy-jax"]
    results = {c.id: c for c in judge(interop.CLAIMS, observations, ran)}
    for cid in ("interop.jax.context", "interop.jax.fresh-thread", "interop.jax.references",
                "interop.exchange.cupy-to-jax"):
        assert results[cid].verdict == "skipped" and "jax is not installed" in results[cid].evidence, results[cid]
        assert results[cid].skip == {"kind": "library", "library": "jax", "distributions": ["jax", "jaxlib"],
                                     "installed": False, "error": "No module named 'jax'"}, results[cid].skip
    assert results["interop.cupy.context"].verdict == "skipped"  # not run here
    assert results["interop.cupy.context"].skip["kind"] == "not-selected"


def test_areas_four_to_seven_are_scenarios_of_the_lab_and_of_check():
    from ctxlab.harness.runner import plan
    from ctxlab.lab import Isolation, LabOptions
    from ctxlab.labs.interop import TEARDOWNS

    options = LabOptions()
    declared = {s.name: s for s in interop.LAB.scenarios(options)}
    under = [f"under-{kind}-{lib}" for kind in ("created", "green") for lib in LIBRARIES]
    blast = [f"blast-{t}" for t in TEARDOWNS]
    for name in [*under, *blast, "torch-green-contexts", "ipc", "vmm", "vmm-torch-expandable"]:
        assert declared[name].isolation is Isolation.FRESH, name
    # Teardowns under live data are undefined behaviour: repeated, each repeat a fresh process; one scenario each.
    assert all(declared[name].undefined for name in blast) and not any(declared[name].undefined for name in under)
    assert declared["vmm-torch-expandable"].env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert all(s.env.get("XLA_PYTHON_CLIENT_PREALLOCATE") == "false" for s in declared.values())
    # check plans every scenario of every lab (no filter): the new ones run there, the teardowns repeated.
    jobs = [job.label for job in plan(interop.LAB, options).jobs]
    assert {*under, "ipc", "vmm"} <= set(jobs)
    assert {f"blast-release #{r + 1}" for r in range(options.repeats)} <= set(jobs)


def test_a_missing_library_skips_its_claims_under_another_context(monkeypatch):
    from ctxlab.claim import judge
    from ctxlab.labs.interop import under as interop_under

    def require(lib):
        raise interop.Missing(skips.library(lib, libs.distributions_of(lib), installed=False))

    monkeypatch.setattr(libs, "require", require)  # decided before any CUDA call: no GPU needed
    observations = interop_under.under(0, "created", "numba")["observations"]
    (result,) = [r for r in judge(interop.CLAIMS, observations, ["under-created-numba"])
                 if r.id == "interop.under-created.numba"]
    assert result.verdict == "skipped" and "numba is not installed" in result.evidence


def test_a_teardown_child_that_crashes_keeps_the_outcomes_before_it(monkeypatch):
    """The teardown runs in a separate interpreter that reports each outcome as it is known: a crash while
    reading one library leaves the earlier reads, and the rest read "no answer" with how the process ended."""
    from ctxlab.claim import judge
    from ctxlab.labs.interop import blast as interop_blast

    lines = [{"step": "made", "library": "cupy", "present": True, "version": "14.2.0", "made": "ok", "owner_id": 1,
              "before": "correct"},
             {"step": "made", "library": "torch", "present": True, "version": "2.11.0", "made": "ok", "owner_id": 1,
              "before": "correct"},
             {"step": "made", "library": "jax", "present": False, "reason": "jax is not installed",
              "skip": skips.library("jax", ("jax", "jaxlib"), installed=False)},
             {"step": "ids", "ids": {}, "owners": {"cupy": "the primary context", "torch": "the primary context"}},
             {"step": "teardown", "status": "CUDA_SUCCESS"},
             {"step": "old", "library": "cupy", "old": "silent-wrong-result (got 0, expected 8390656)"}]
    monkeypatch.setattr(interop_blast, "_run_child", lambda device, teardown: (lines, "ended by SIGSEGV", ""))
    observations = interop_blast.blast(0, "primary-reset")["observations"]
    rows = {o.value["library"]: o.value for o in observations if o.what == "blast"}
    crashed = "no answer (ended by SIGSEGV)"
    assert rows["cupy"]["old"].startswith("silent-wrong-result") and rows["cupy"]["new"] == crashed
    assert rows["torch"]["old"] == "no answer (ended by SIGSEGV)"
    assert rows["numba"]["made"] == "no answer (ended by SIGSEGV)" and rows["numba"]["old"] == "-"
    results = {r.id: r for r in judge(interop.CLAIMS, observations, ["blast-primary-reset"])}
    assert results["interop.blast.primary-reset.jax"].verdict == "skipped"
    assert "jax is not installed" in results["interop.blast.primary-reset.jax"].evidence
    assert results["interop.blast.primary-reset.jax"].skip["kind"] == "library"  # the child's structured reason
    cupy = results["interop.blast.primary-reset.cupy"]
    assert cupy.verdict == "observed" and "wrong values without an error: 1" in cupy.evidence


def test_vmm_claims_of_a_missing_library_are_skipped():
    import ctxlab
    from ctxlab.claim import judge
    from ctxlab.records.model import Observation
    from tests.conftest import RESULTS

    (recorded,) = ctxlab.load(RESULTS / "interop.json")
    observations = [o for o in recorded.observations if o.scenario == "vmm"
                    and not (o.what == "library allocation" and o.value["library"] == "jax")]
    observations.append(Observation(step="jax", thread="MainThread", context_id=None, what="library allocation",
                                    value={"library": "jax", "present": False, "reason": "jax is not installed"},
                                    scenario="vmm"))
    results = {r.id: r for r in judge(interop.CLAIMS, observations, ["vmm"])}
    assert results["interop.vmm.jax"].verdict == "skipped"
    assert results["interop.vmm.jax"].skip == {"kind": "inapplicable"}  # a row of an older recording: text alone
    assert results["interop.vmm.cuda-core"].verdict == "observed"


def test_each_librarys_array_is_as_long_as_the_sum_it_is_read_against():
    # libs.make fills 1..N and checked() compares with SUM: one N for both (the package move once took the
    # exchanges' N, 1 << 24, and every read before a teardown read as a silent wrong result on the H200)
    from ctxlab.labs.interop import libs, under_claims

    assert libs.N == under_claims.N == 4096 and libs.SUM == libs.N * (libs.N + 1) // 2
