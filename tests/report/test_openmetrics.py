"""OpenMetrics output (issue 28): checked with prometheus_client's own OpenMetrics parser, on recorded runs."""

from __future__ import annotations

import dataclasses
import json

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import ctxlab
from ctxlab.cuda.environment_error import environment_error_run
from ctxlab.records.model import ClaimResult
from ctxlab.records.schema import VERDICTS
from ctxlab.report.openmetrics import LABEL_LIMIT, render_openmetrics
from tests.conftest import RESULTS
from tests.hostile import invoke

FOUND_NOTHING = {"hostname": "node-7", "python": "3.12.3", "missing": ["driver: no NVIDIA driver"],
                 "driver": {"ok": False, "problem": "no NVIDIA driver"}, "cupy": {"ok": False}}


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(text: str, name: str) -> list:
    return families(text)[name].samples


@pytest.mark.parametrize("name", ["check.json", "check-all-devices.json", "check-peer-devices-all.json",
                                  "refcount.json", "interop.json", "migrate-green.json", "peer-one-gpu.json"])
def test_every_recorded_result_parses_with_the_official_parser(name):
    runs = ctxlab.load(RESULTS / name)
    text = render_openmetrics(runs)
    assert text.endswith("# EOF\n")
    fams = families(text)
    assert all(f.type == "gauge" for f in fams.values())  # node_exporter's text parser takes gauges
    assert fams["ctxlab_up"].samples[0].value == 1
    claims = sum(len(r.claims) for r in runs)
    assert len(fams["ctxlab_claim_verdict"].samples) == claims * len(VERDICTS)
    ones = [s for s in fams["ctxlab_claim_verdict"].samples if s.value == 1]
    assert len(ones) == claims  # one verdict per claim
    assert all(s.timestamp is None for f in fams.values() for s in f.samples)  # the textfile collector refuses them
    assert "hostname" not in text and "\nvm" not in text and '"vm"' not in text  # the scraper adds the instance


def test_check_json_claims_and_labs_match_the_run():
    runs = ctxlab.load(RESULTS / "check.json")
    text = render_openmetrics(runs)
    by_claim = {s.labels["claim"]: s for s in samples(text, "ctxlab_claim_verdict") if s.value == 1}
    for run in runs:
        for claim in run.claims:
            sample = by_claim[claim.id]
            assert sample.labels == {"lab": run.lab, "claim": claim.id, "kind": claim.kind, "device": "0",
                                     "verdict": claim.verdict}
    durations = {s.labels["lab"]: s.value for s in samples(text, "ctxlab_lab_duration_seconds")}
    assert durations == {r.lab: pytest.approx(r.seconds) for r in runs}
    counts = {(s.labels["lab"], s.labels["verdict"]): s.value for s in samples(text, "ctxlab_lab_claims")}
    migrate = next(r for r in runs if r.lab == "migrate")
    assert counts[("migrate", "holds")] == sum(c.verdict == "holds" for c in migrate.claims)
    (info,) = samples(text, "ctxlab_environment_info")
    assert info.labels["gpu"] == "NVIDIA H200" and info.labels["driver"] == "13.0"
    assert info.labels["runtime"] == "13.2" and info.labels["ctxlab_version"] == "0.2.0"
    assert info.labels["runtime_cuda_bindings"] == "13.3" and info.labels["cupy"] == "14.2.0"
    assert samples(text, "ctxlab_failed")[0].value == 0
    assert samples(text, "ctxlab_run_timestamp_seconds")[0].value > 1.7e9


def test_two_devices_get_a_series_each():
    runs = ctxlab.load(RESULTS / "check-all-devices.json")
    devices = {str(r.environment["device"]) for r in runs}
    text = render_openmetrics(runs)
    assert {s.labels["device"] for s in samples(text, "ctxlab_environment_info")} == devices
    assert {s.labels["device"] for s in samples(text, "ctxlab_lab_failed")} == devices


def test_a_failing_claim_sets_failed_and_its_verdict():
    (run,) = ctxlab.load(RESULTS / "refcount.json")
    promise = next(c for c in run.claims if c.kind == "promise")
    broken = dataclasses.replace(run, claims=tuple(dataclasses.replace(c, verdict="fails") if c is promise else c
                                                   for c in run.claims))
    text = render_openmetrics([broken])
    assert samples(text, "ctxlab_failed")[0].value == 1
    assert samples(text, "ctxlab_lab_failed")[0].value == 1
    (fails,) = [s for s in samples(text, "ctxlab_claim_verdict") if s.labels["claim"] == promise.id and s.value]
    assert fails.labels["verdict"] == "fails"


def test_hostile_label_values_stay_inert_and_parse():
    (run,) = ctxlab.load(RESULTS / "refcount.json")
    nasty = 'a"b\\c\nd\x1b[31m\ud800' + "x" * 1000
    claim = ClaimResult(id=nasty, statement="s", source="s", verdict="holds", evidence="e", kind="promise")
    twice = dataclasses.replace(run, lab=nasty, claims=(claim, claim),
                                environment={**run.environment, "gpu": nasty})
    text = render_openmetrics([twice, twice])  # the same lab and device twice: a copy label, no duplicate
    assert "\x1b" not in text and "\ud800" not in text
    fams = families(text)
    labels = [s.labels for s in fams["ctxlab_claim_verdict"].samples]
    assert len({tuple(sorted(x.items())) for x in labels}) == len(labels)
    assert all(len(x["claim"]) <= LABEL_LIMIT for x in labels)
    assert {x.get("copy") for x in labels} >= {None, "2"}


def test_a_node_that_could_not_run_is_up_0_with_its_reason():
    from ctxlab.cuda.errors import NoGpu

    run = environment_error_run(NoGpu("no NVIDIA driver: libcuda.so could not be loaded (OSError)"),
                                "no usable GPU: no NVIDIA driver", options={"devices": "0", "device": 0},
                                found=FOUND_NOTHING)
    text = render_openmetrics([run])
    assert samples(text, "ctxlab_up")[0].value == 0
    assert samples(text, "ctxlab_failed")[0].value == 1
    reasons = {s.labels["reason"]: s.value for s in samples(text, "ctxlab_environment_error")}
    assert reasons["no-driver"] == 1 and sum(reasons.values()) == 1
    assert "ctxlab_claim_verdict" not in families(text)


def test_show_format_openmetrics_and_check_help(tmp_path):
    out = tmp_path / "check.prom"
    result = invoke("show", str(RESULTS / "check.json"), "--format", "openmetrics", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert families(out.read_text())["ctxlab_up"].samples[0].value == 1
    assert [p.name for p in tmp_path.iterdir()] == ["check.prom"]  # staged beside it and renamed: no leftovers
    stdout = invoke("show", str(RESULTS / "refcount.json"), "--format", "openmetrics")
    assert stdout.exit_code == 0 and stdout.output.endswith("# EOF\n")
    help_text = invoke("check", "--help").output
    assert "--openmetrics PATH" in help_text and "openmetrics" in help_text


def test_metrics_of_a_file_with_no_runs():
    text = render_openmetrics([])
    assert samples(text, "ctxlab_up")[0].value == 0 and samples(text, "ctxlab_failed")[0].value == 1


def test_the_metrics_file_of_a_recorded_run_is_committed_and_current():
    """labs/results/fleet/check.prom is what show --format openmetrics gives for labs/results/check.json."""
    committed = RESULTS / "fleet" / "check.prom"
    assert committed.read_text() == render_openmetrics(ctxlab.load(RESULTS / "check.json"))
    json.loads((RESULTS / "fleet" / "prometheus-scrape.json").read_text())
