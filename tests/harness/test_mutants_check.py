"""The check's exit status, its metrics and the level comparison where the hand-mutant pass (docs/testing.md,
"Hand mutants") found them untested: ``ctxlab_up`` with one node's run that could not run beside runs that did,
``ctxlab_failed`` and ``ctxlab_claims_judged`` for runs that judged nothing (read with the OpenMetrics parser:
the HELP lines hold "ctxlab_failed 1" and "ctxlab_up 1" as text), drift without ``--fail-on-drift``, runs holding
no claim at all, a level recorded as a boolean, and the device a run is keyed by (CPU only)."""

from __future__ import annotations

import dataclasses
import json

from click.testing import CliRunner
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import ctxlab
from ctxlab.cli import cli
from ctxlab.cuda.environment_error import environment_error_run
from ctxlab.levels import FULL
from ctxlab.records.model import LabResult, nothing_judged
from ctxlab.report.openmetrics import render_openmetrics
from ctxlab.report.status import PROBLEM, status_line
from ctxlab.suite import changes, level_differences
from tests.conftest import RESULTS

FOUND_NOTHING = {"hostname": "node-7", "python": "3.12.3", "missing": ["driver: no NVIDIA driver"],
                 "driver": {"ok": False, "problem": "no NVIDIA driver"}, "cupy": {"ok": False}}


def metric(runs: list[LabResult], name: str) -> float:
    (family,) = [f for f in text_string_to_metric_families(render_openmetrics(runs)) if f.name == name]
    (sample,) = family.samples
    return sample.value


def refcount() -> LabResult:
    (run,) = ctxlab.load(RESULTS / "refcount.json")
    return run


def with_verdicts(run: LabResult, *verdicts: str) -> LabResult:
    """``run`` with its first claims' verdicts replaced by ``verdicts`` (the rest kept)."""
    claims = tuple(dataclasses.replace(c, verdict=verdicts[i]) if i < len(verdicts) else c
                   for i, c in enumerate(run.claims))
    return dataclasses.replace(run, claims=claims)


def unable() -> LabResult:
    from ctxlab.cuda.errors import NoGpu

    return environment_error_run(NoGpu("no NVIDIA driver: libcuda.so could not be loaded (OSError)"),
                                 "no usable GPU: no NVIDIA driver", options={"devices": "0", "device": 0},
                                 found=FOUND_NOTHING)


def test_a_file_where_one_run_could_not_run_beside_runs_that_did_is_not_up():
    run = refcount()
    assert metric([run], "ctxlab_up") == 1
    assert metric([run, unable()], "ctxlab_up") == 0
    assert metric([run, unable()], "ctxlab_failed") == 1


def test_a_run_that_judged_nothing_is_failed_in_the_metrics_though_no_claim_fails():
    run = refcount()
    empty = with_verdicts(run, *["skipped"] * len(run.claims))
    assert not empty.failed and metric([empty], "ctxlab_claims_judged") == 0
    assert metric([empty], "ctxlab_failed") == 1
    assert metric([run], "ctxlab_failed") == 0


def test_claims_judged_leaves_out_the_unjudged_and_the_skipped():
    run = refcount()
    assert metric([run], "ctxlab_claims_judged") == len(run.claims)
    assert metric([with_verdicts(run, "unjudged", "skipped")], "ctxlab_claims_judged") == len(run.claims) - 2


def test_runs_that_hold_no_claim_at_all_judged_nothing_and_are_a_problem():
    bare = dataclasses.replace(refcount(), claims=())
    why = nothing_judged([bare])
    assert why is not None and why.startswith("nothing judged: all 0 claims of 1 lab run(s)")
    code, line = status_line([bare])
    assert code == PROBLEM and line.startswith("ctxlab: nothing judged")
    assert metric([bare], "ctxlab_failed") == 1


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_drift_without_fail_on_drift_is_reported_and_exits_0(fake_registry, tmp_path):
    base = tmp_path / "base.json"
    assert invoke("check", "--only", "ok", "--json", str(base)).exit_code == 0
    data = json.loads(base.read_text())
    data["claims"][0]["verdict"] = "changed"
    base.write_text(json.dumps(data))
    drifted = invoke("check", "--only", "ok", "--baseline", str(base))
    assert "drift: ok.claim on GPU 0: verdict" in drifted.output
    assert drifted.exit_code == 0, drifted.output


def test_a_level_recorded_as_a_boolean_reads_as_the_full_check():
    full = refcount()
    odd = with_verdicts(dataclasses.replace(full, options={**full.options, "level": True}), "fails")
    (difference,) = level_differences([odd], [full])
    assert difference["level"] == FULL and difference["level"] is not True
    scenario = next(iter(full.timings))
    fewer = dataclasses.replace(odd, claims=full.claims, timings={k: v for k, v in full.timings.items()
                                                                  if k != scenario})
    assert changes([full], [fewer]) == [{"lab": full.lab, "device": 0, "item": scenario,
                                         "change": "scenario missing"}]


def test_a_run_is_keyed_by_the_device_its_environment_records():
    run = refcount()
    options = {k: v for k, v in run.options.items() if k != "device"}  # recorded in the environment alone
    on = [dataclasses.replace(run, options=options, environment={**run.environment, "device": d}) for d in (0, 1)]
    now = [on[0], with_verdicts(on[1], "fails")]
    (change,) = changes(on, now)
    assert change["device"] == 1 and change["change"] == "verdict"
    assert level_differences(now, on) == [{"lab": run.lab, "device": 1, "claim": run.claims[0].id, "level": FULL,
                                           "verdict": "fails", "full_check": run.claims[0].verdict}]
