"""The labs end to end on the GPU, through the CLI as a user runs them."""

import json
import os

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.record import load_runs

pytestmark = pytest.mark.gpu

KEEP = os.environ.get("CTXLAB_RESULTS")  # where to keep the runs' JSON (the GPU script sets it)


def run_lab(tmp_path, name, *args):
    out = os.path.join(KEEP, f"{name}.json") if KEEP else str(tmp_path / f"{name}.json")
    result = CliRunner().invoke(cli, [name.split("-")[0], *args, "--format", "json", "--output", out],
                                catch_exceptions=False)
    (run,) = load_runs(out)
    return result, run


def verdicts(run):
    return {c.id: c.verdict for c in run.claims}


def test_migrate_both_context_kinds(tmp_path):
    result, run = run_lab(tmp_path, "migrate")
    assert run.errors == (), run.errors
    assert result.exit_code == 0, verdicts(run)
    summaries = [o for o in run.observations if o.what == "handoffs verified"]
    assert {o.scenario for o in summaries} == {"handoff-primary", "handoff-created"}
    for o in summaries:
        assert o.value["verified"] == o.value["handoffs"] == 4 * 3 and o.value["final_ok"]
    v = verdicts(run)
    assert v["migrate.state-follows-context"] == "holds"
    assert v["migrate.runtime-binds-primary"] == "holds"
    assert v["migrate.current-on-several-threads"] == "holds"


def test_migrate_stress_32_threads_1000_rounds(tmp_path):
    result, run = run_lab(tmp_path, "migrate-stress", "--threads", "32", "--rounds", "1000", "--context", "both")
    assert run.errors == (), run.errors
    for o in (o for o in run.observations if o.what == "handoffs verified"):
        assert o.value["verified"] == o.value["handoffs"] == 32_000 and o.value["mismatches"] == 0
    assert run.metrics["primary: verified handoffs/s"] > 0 and run.metrics["primary: bare handoffs/s"] > 0
    assert result.exit_code == 0


def test_refcount_every_scenario(tmp_path):
    result, run = run_lab(tmp_path, "refcount")
    assert run.errors == (), run.errors
    scenarios = {o.scenario for o in run.observations}
    assert {"runtime-1", "runtime-2", "release-without-retain", "device-reset", "primary-reset", "created",
            "thread-exit"} <= scenarios
    assert all(c.verdict != "skipped" for c in run.claims), verdicts(run)
    assert result.exit_code == (1 if any(c.verdict == "fails" for c in run.claims) else 0)


def test_doctor_json_names_the_gpu(tmp_path):
    out = os.path.join(KEEP, "doctor.json") if KEEP else str(tmp_path / "doctor.json")
    result = CliRunner().invoke(cli, ["doctor", "--json", "--output", out], catch_exceptions=False)
    assert result.exit_code == 0
    report = json.loads(result.output)
    assert report["driver"]["devices"]
