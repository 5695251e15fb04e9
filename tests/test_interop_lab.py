"""The interop lab on the CPU: how its scenarios are declared, and that a library that is missing makes its
claims ``skipped`` with the reason (decided before any CUDA call). The run on the GPU is tests/gpu/test_interop.py."""

from ctxlab.labs import interop
from ctxlab.labs.interop import LIBRARIES


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

    def require(lib):
        if lib == "jax":
            raise interop.Missing("jax is not installed")

    monkeypatch.setattr(interop, "_require", require)  # decided before any CUDA call: no GPU needed
    observations = [*interop.alone(0, "jax")["observations"], *interop.refs(0, "jax")["observations"],
                    *interop.exchange(0, "cupy", "jax", "dlpack")["observations"]]
    ran = ["alone-jax", "refs-jax", "exchange-cupy-jax"]
    results = {c.id: c for c in judge(interop.CLAIMS, observations, ran)}
    for cid in ("interop.jax.context", "interop.jax.fresh-thread", "interop.jax.references",
                "interop.exchange.cupy-to-jax"):
        assert results[cid].verdict == "skipped" and "jax is not installed" in results[cid].evidence, results[cid]
    assert results["interop.cupy.context"].verdict == "skipped"  # not run here
