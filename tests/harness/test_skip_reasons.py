"""``ctxlab check`` end to end (stand-in labs, no GPU): a skip is checked against the run's own environment record
and the GPUs its lab declares (ctxlab/records/skips.py). A skip they contradict is an ``error``: the check exits 1,
its metrics say ``ctxlab_failed 1``, ``ctxlab status`` reads a problem; one they bear out stays ``skipped``."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.shapes import runs_from_document


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def check(tmp_path, lab: str):
    prom, result = tmp_path / "node.prom", tmp_path / "r.json"
    done = invoke("check", "--only", lab, "--openmetrics", str(prom), "--json", str(result))
    (run,) = runs_from_document(json.loads(result.read_text()))
    return done, run, prom.read_text(), str(result)


def test_a_one_gpu_lab_that_skips_for_want_of_two_gpus_is_an_error(fake_registry, environment, tmp_path):
    from ctxlab.report.status import status_of

    environment({"gpu_count": 1})
    done, run, metrics, path = check(tmp_path, "skips-one-gpu-lab")
    (claim,) = run.claims
    assert done.exit_code == 1, done.output
    assert claim.verdict == "error" and "cannot skip for want of 2" in claim.evidence
    assert claim.skip == {"kind": "hardware", "resource": "gpus", "required": 2, "found": 1}
    assert "ctxlab_failed 1" in metrics and 'verdict="error"} 1' in metrics
    code, line = status_of(path)
    assert code == 1 and line.startswith("ctxlab: fails: skips-one-gpu-lab.claim"), line


def test_a_two_gpu_lab_skips_where_the_record_shows_one_gpu_and_errs_where_it_shows_two(fake_registry, environment,
                                                                                         tmp_path):
    environment({"gpu_count": 1})
    done, run, metrics, _ = check(tmp_path, "skips")
    assert run.claims[0].verdict == "skipped" and run.environment["gpu_count"] == 1
    assert done.exit_code == 1 and "check: nothing judged" in done.output  # skipped, and still no healthy run
    environment({"gpu_count": 2})
    done, run, metrics, _ = check(tmp_path, "skips")
    assert done.exit_code == 1 and "nothing judged" not in done.output
    assert run.claims[0].verdict == "error" and "where the run's environment records 2" in run.claims[0].evidence


def test_a_library_skip_is_checked_against_the_versions_the_record_holds(fake_registry, environment, tmp_path):
    environment({"gpu_count": 1, "cupy": "14.2.0"})
    done, run, metrics, _ = check(tmp_path, "skips-library")
    (claim,) = run.claims
    assert done.exit_code == 1 and claim.verdict == "error"
    assert "it says cupy is not installed, but the run's environment records cupy 14.2.0" in claim.evidence
    environment({"gpu_count": 1, "cupy": None})
    done, run, metrics, _ = check(tmp_path, "skips-library")
    assert run.claims[0].verdict == "skipped" and run.claims[0].skip["error"] == "No module named 'cupy' (stand-in)"
    both = invoke("check", "--only", "skips-library,ok")  # beside a lab that judged: a skip borne out is no alarm
    assert both.exit_code == 0, both.output
