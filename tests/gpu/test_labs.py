"""The labs end to end on the GPU, through the CLI as a user runs them: on every GPU each selected scenario
ran, every claim of the lab is judged, none is an error and every promise holds; where expectations were written
for this GPU, driver and runtimes (tests/gpu/expectations/), every claim gets its verdict (tests/gpu/expected.py)."""

import json
import os

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.labs.migrate.claims import final_values_right, relay_lost
from ctxlab.records.files import load_runs
from tests.gpu.expected import assert_expected, skipped_here

pytestmark = pytest.mark.gpu

KEEP = os.environ.get("CTXLAB_RESULTS")  # where to keep the runs' JSON (the GPU script sets it)


def run_lab(tmp_path, name, *args):
    out = os.path.join(KEEP, f"{name}.json") if KEEP else str(tmp_path / f"{name}.json")
    result = CliRunner().invoke(cli, [name.split("-")[0], *args, "--format", "json", "--output", out],
                                catch_exceptions=False)
    (run,) = load_runs(out)
    return result, run


def test_migrate_both_context_kinds(tmp_path):
    result, run = run_lab(tmp_path, "migrate")
    assert_expected(run)
    summaries = [o for o in run.observations if o.what == "handoffs verified"]
    assert {o.scenario for o in summaries} == {"handoff-primary", "handoff-created"}
    for o in summaries:
        assert o.value["handoffs"] == 4 * 3 and not relay_lost(o.value), o.value
        # the relay's threads shared one core, one this child may run on (a Linux GPU runner allows pinning)
        assert o.value["one_core"] is True and isinstance(o.value["core"], int) and o.value["core"] >= 0
    repeats = {o.repeat for o in run.observations if o.scenario == "cupy-caches"}
    assert repeats == {0, 1, 2}  # undefined-behaviour territory: three fresh processes
    assert result.exit_code == 0


def test_migrate_stress_32_threads_1000_rounds(tmp_path):
    result, run = run_lab(tmp_path, "migrate-stress", "--threads", "32", "--rounds", "1000", "--context", "both",
                          "--repeats", "1")
    assert_expected(run)
    for o in (o for o in run.observations if o.what == "handoffs verified"):
        assert o.value["handoffs"] == 32_000 and not relay_lost(o.value), o.value
    assert run.metrics["primary: verified handoffs/s"] > 0 and run.metrics["primary: bare handoffs/s"] > 0
    assert result.exit_code == 0


def test_migrate_green_context(tmp_path):
    """migrate --context green: the relay of a green context and its own scenarios."""
    result, run = run_lab(tmp_path, "migrate-green", "--context", "green")
    assert_expected(run)  # every green scenario ran, or said why it could not here
    assert result.exit_code == 0
    green = ("handoff-green", "concurrent-green", "green-sm", "green-memory", "green-cupy")
    assert set(run.timings) >= set(green)
    if skipped_here(run, green):  # an H200 with a CUDA 13 driver makes green contexts (its expectations say so)
        return
    (summary,) = [o.value for o in run.observations if o.what == "handoffs verified"]
    assert summary["handoffs"] == 4 * 3 and not relay_lost(summary), summary
    (sms,) = [o.value for o in run.observations if o.what == "green sm ids"]
    assert 0 < sms["group_sms"] < sms["device_sms"], sms
    assert {o.repeat for o in run.observations if o.scenario == "concurrent-green"} == {0, 1, 2}


def test_migrate_all_context_kinds(tmp_path):
    """--context all: the primary, created and green relays in one run."""
    result, run = run_lab(tmp_path, "migrate-all", "--context", "all", "--repeats", "1")
    assert_expected(run)
    summaries = {o.scenario: o.value for o in run.observations if o.what == "handoffs verified"}
    relays = {"handoff-primary", "handoff-created", "handoff-green"}
    assert set(summaries) == relays - skipped_here(run, ["handoff-green"])
    assert not any(relay_lost(v) for v in summaries.values()), summaries
    assert result.exit_code == 0


def test_refcount_every_scenario(tmp_path):
    result, run = run_lab(tmp_path, "refcount")
    assert_expected(run)
    scenarios = {o.scenario for o in run.observations}
    assert {"runtime-1", "runtime-2", "release-without-retain", "device-reset", "primary-reset", "created",
            "thread-exit"} <= scenarios
    assert {o.repeat for o in run.observations if o.scenario == "device-reset"} == {0, 1, 2}
    green = {"green-reference", "green-primary-reset", "green-destroy-elsewhere"}
    assert green <= scenarios
    skipped_here(run, green)  # none on the H200; elsewhere each says why
    assert {o.repeat for o in run.observations if o.scenario == "green-reference"} == {0, 1, 2}
    assert result.exit_code == 0


def test_lifecycle_every_sequence(tmp_path):
    result, run = run_lab(tmp_path, "lifecycle")
    assert_expected(run)
    imported = [o for o in run.observations if o.scenario == "first-context" and o.what == "after"
                and o.value["call"] == "import cupy"]
    assert imported and imported[0].value.get("cupy_already_imported") is False  # a fresh interpreter
    assert {"green-runtime", "execution-context"} <= set(run.timings)
    if not skipped_here(run, ["green-runtime"]):
        assert any(o.what == "runtime under a green context" for o in run.observations)
    assert result.exit_code == 0


def test_doctor_json_names_the_gpu(tmp_path):
    out = os.path.join(KEEP, "doctor.json") if KEEP else str(tmp_path / "doctor.json")
    result = CliRunner().invoke(cli, ["doctor", "--format", "json", "--output", out], catch_exceptions=False)
    assert result.exit_code == 0
    with open(out) as handle:  # the report goes to --output, not also to standard output
        report = json.load(handle)
    assert report["driver"]["devices"] and not report["missing"]


# A relay whose expected global is one off from the start: every handoff's check must catch it and name it.
_OFF_BY_ONE = """
import json
from ctxlab.labs.migrate import relay

class OffByOne(relay.Relay):
    def setup(self, baton):
        popped = super().setup(baton)
        self.global_value += 1
        return popped

relay.Relay = OffByOne
output = relay.handoff(0, "primary", 4, 5, 60.0, bare=False)
print(json.dumps(next(o.value for o in output["observations"] if o.what == "handoffs verified")))
"""


def test_the_relay_counts_and_names_every_mismatch():
    """The relay compares a handoff's values at once; a mismatch must still be counted on every handoff and told
    check by check (its first names the check), while the device's values stay right."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _OFF_BY_ONE], capture_output=True, text=True, timeout=120,
                          cwd=root, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["handoffs"] == 20 and summary["verified"] == 0 and summary["mismatches"] == 20
    assert summary["first_mismatch"]["check"] == "global left by the previous thread"
    assert summary["first_mismatch"]["seen"] + 1 == summary["first_mismatch"]["expected"]
    # the device's values stay right: every element gained one a handoff, the global three
    assert final_values_right(summary) and summary["final"]["element_added_min"] == 20, summary
