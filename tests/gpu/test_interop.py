"""The interop lab end to end on the GPU, through the CLI as a user runs it: every library alone, counted and
together, every exchange pair, fork and the start methods, every library under a created and a green context,
each teardown against every library's data, IPC handles in a spawned child, and the pointer context of VMM and
pool memory: on every GPU each scenario the lab declares ran (tests/gpu/expected.py), and every claim gets the
verdict expected where expectations exist for this environment (tests/gpu/expectations/).
tests/labs/test_interop_lab.py checks on the CPU how the scenarios are declared and that a missing library makes its
claims ``skipped`` with the reason."""

import os

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records import skips
from ctxlab.records.files import load_runs
from tests.gpu.expected import assert_expected, expectations_for, selected_scenarios

pytestmark = pytest.mark.gpu

KEEP = os.environ.get("CTXLAB_RESULTS")  # where to keep the run's JSON (the GPU script sets it)
# Skips that are findings about the installed libraries (kind "unsupported"), not missing libraries.
KNOWN_SKIPS = ("cupy.cuda.runtime has no deviceReset",)


def test_interop_every_library_pair_and_process(tmp_path):
    out = os.path.join(KEEP, "interop.json") if KEEP else str(tmp_path / "interop.json")
    result = CliRunner().invoke(cli, ["interop", "--format", "json", "--output", out], catch_exceptions=False)
    (run,) = load_runs(out)
    assert_expected(run)
    scenarios = {o.scenario for o in run.observations}
    declared = selected_scenarios(run)  # every one must have run: assert_expected checks it, repeats included
    assert {"together", "fork", "start-methods", "torch-green-contexts", "ipc", "vmm",
            "vmm-torch-expandable"} <= {s.name for s in declared} and scenarios
    # Undefined-behaviour territory: three fresh processes each.
    for scenario in ("fork", "start-methods", *(s.name for s in declared if s.name.startswith("blast-"))):
        assert {o.repeat for o in run.observations if o.scenario == scenario} == {0, 1, 2}, scenario
    assert result.exit_code == 0
    if expectations_for(run.environment) is not None:  # the machine they were written on has every library
        installed = run.environment["libraries"]
        assert all(installed[name] for name in ("torch", "jax", "numba-cuda", "cuda-core")), installed
        skipped = [o.value for o in run.observations if o.what == "skipped"]
        assert all(skips.structure_of(why) == {"kind": "unsupported"}
                   and any(known in skips.text_of(why) for known in KNOWN_SKIPS) for why in skipped), skipped
        assert not [c for c in run.claims if c.skip and c.skip["kind"] == "library"], "a library skipped where " \
            "every library is installed"
