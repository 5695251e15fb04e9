"""The environment-error record (issue 28): a node that cannot run still says so in its report files."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

import ctxlab
from ctxlab.cuda.environment import BadDevice
from ctxlab.cuda.environment_error import environment_error_run, reason_of
from ctxlab.cuda.errors import NoGpu
from ctxlab.records.environment_error import REASONS, is_environment_error
from ctxlab.records.model import ResultFileError, dumps
from ctxlab.records.shapes import runs_from_document
from ctxlab.report.merge import matrix, render_html, render_markdown
from ctxlab.schema import schema
from tests.conftest import RESULTS
from tests.hostile import invoke

FOUND = {"hostname": "node-7", "python": "3.12.3", "missing": ["driver: no NVIDIA driver"],
         "driver": {"ok": False, "problem": "no NVIDIA driver"}, "cupy": {"ok": False}}


def unable(reason_exc: BaseException | None = None, host: str = "node-7"):
    exc = reason_exc or NoGpu("no NVIDIA driver: libcuda.so could not be loaded (OSError)")
    return environment_error_run(exc, f"no usable GPU: {exc}", options={"devices": "0", "device": 0},
                                 found={**FOUND, "hostname": host})


@pytest.mark.parametrize(("exc", "reason"), [
    (NoGpu("no NVIDIA driver: libcuda.so could not be loaded (OSError)"), "no-driver"),
    (NoGpu("cuda-bindings is not installed (No module named 'cuda.bindings'); install ..."), "no-bindings"),
    (NoGpu("the NVIDIA driver is loaded but sees no GPU (CUDA_ERROR_NO_DEVICE)"), "no-gpu"),
    (NoGpu("the driver reports no GPU"), "no-gpu"),
    (NoGpu("cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"), "driver-error"),
    (BadDevice("device 3 does not exist: this machine has 1 GPU(s), 0..0"), "device-missing"),
])
def test_each_reason(exc, reason):
    assert reason_of(exc) == reason and reason in REASONS


def test_cupti_missing_is_a_reason():
    from ctxlab.trace import TraceUnavailable

    assert reason_of(TraceUnavailable("CUPTI could not be loaded")) == "cupti-missing"


def test_the_record_round_trips_fits_the_schema_and_fails_the_run():
    run = unable()
    doc = json.loads(dumps([run], as_list=True))
    jsonschema.validate(doc, schema())
    (back,) = runs_from_document(doc, "x.json")
    assert back == run and is_environment_error(back) and back.failed
    assert back.lab == "check" and back.claims == () and back.errors[0]["kind"] == "environment"
    assert back.environment_error["reason"] == "no-driver" and back.environment["hostname"] == "node-7"


def test_a_malformed_environment_error_is_refused():
    doc = json.loads(dumps([unable()], as_list=True))
    doc["runs"][0]["environment_error"]["reason"] = 7
    with pytest.raises(ResultFileError, match="environment_error.reason"):
        runs_from_document(doc, "x.json")


def test_merge_lists_runners_that_could_not_run_apart_and_fails():
    runs = ctxlab.load(RESULTS / "refcount.json")
    files = [("ok.json", runs), ("down.json", [unable(host="node-7")])]
    m = matrix(files)
    assert len(m.columns) == 1 and [run.environment["hostname"] for _, run in m.unable] == ["node-7"]
    md = render_markdown(files)
    assert "**1 runner(s) could not run**" in md and "node-7: no NVIDIA driver" in md and "down.json" in md
    assert "check (lab errors)" not in md  # not a column of errors: a runner apart
    assert "could not run</b>" in render_html(files)


def test_merge_of_unable_runners_only_cli(tmp_path):
    path = tmp_path / "down.json"
    path.write_text(dumps([unable()], as_list=True))
    result = invoke("report", "merge", str(path), "-o", str(tmp_path / "m.md"))
    assert result.exit_code == 1
    text = (tmp_path / "m.md").read_text()
    assert "could not run" in text and "nothing to merge" in text


def test_check_writes_the_record_for_a_missing_device(monkeypatch, tmp_path):
    import ctxlab.cuda.environment

    def missing(text):
        raise BadDevice("device 5 does not exist: this machine has 1 GPU(s), 0..0")

    monkeypatch.setattr("ctxlab.cli.parse_devices", missing)
    monkeypatch.setattr(ctxlab.cuda.environment, "doctor", lambda: {**FOUND, "driver": {
        "ok": True, "version": 13000, "devices": [{"name": "NVIDIA H200"}]}})
    out, prom = tmp_path / "r.json", tmp_path / "r.prom"
    result = invoke("check", "-d", "5", "--json", str(out), "--openmetrics", str(prom))
    assert result.exit_code == 2 and result.output == "Error: device 5 does not exist: this machine has 1 GPU(s), " \
                                                      "0..0\n"
    (run,) = ctxlab.load(out)
    assert run.environment_error["reason"] == "device-missing" and run.environment_error["gpus"] == ["NVIDIA H200"]
    assert run.environment["device"] == 5 and run.environment["driver_version"] == 13000
    assert "ctxlab_up 0" in prom.read_text() and 'reason="device-missing"} 1' in prom.read_text()


def test_check_writes_the_record_when_cupti_is_missing(monkeypatch, tmp_path, fake_registry):
    import ctxlab.api
    import ctxlab.cuda.environment
    from ctxlab.trace import TraceUnavailable

    def no_cupti(*args, **kwargs):
        raise TraceUnavailable("CUPTI could not be loaded: libcupti.so not found")

    monkeypatch.setattr(ctxlab.api, "check", no_cupti)
    monkeypatch.setattr(ctxlab.cuda.environment, "doctor", lambda: FOUND)
    result = invoke("check", "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"),
                    "--markdown", str(tmp_path / "r.md"))
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1
    assert ctxlab.load(tmp_path / "r.json")[0].environment_error["reason"] == "cupti-missing"
    assert "CUPTI could not be loaded" in (tmp_path / "r.xml").read_text()
    assert "CUPTI could not be loaded" in (tmp_path / "r.md").read_text()


def test_an_unwritable_record_still_leaves_the_one_line(monkeypatch, tmp_path):
    import ctxlab.cuda.environment

    monkeypatch.setattr("ctxlab.cli.parse_devices", lambda text: (_ for _ in ()).throw(NoGpu("no NVIDIA driver")))
    monkeypatch.setattr(ctxlab.cuda.environment, "doctor", lambda: FOUND)
    target = tmp_path / "r.json"
    target.mkdir()  # check_outputs refuses a directory before the run: usage error, not the environment
    result = invoke("check", "--json", str(target))
    assert result.exit_code == 2 and "is a directory" in result.output


@pytest.mark.nogpu
def test_this_machine_without_a_gpu_writes_its_record_for_real(tmp_path):
    """Here there is no GPU: ``ctxlab check --json`` is exactly a node that cannot run."""
    out, prom = tmp_path / "x.json", tmp_path / "x.prom"
    done = subprocess.run([sys.executable, "-m", "ctxlab", "check", "--json", str(out), "--openmetrics", str(prom)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("Error: no usable GPU:") and len(done.stderr.splitlines()) == 1
    jsonschema.validate(json.loads(out.read_text()), schema())
    (run,) = ctxlab.load(out)
    assert is_environment_error(run) and run.environment_error["reason"] in ("no-driver", "no-bindings", "no-gpu")
    assert run.environment_error["message"] == done.stderr.removeprefix("Error: ").strip()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json", "x.prom"]  # no temporary file left
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    up = {f.name: f for f in text_string_to_metric_families(prom.read_text())}["ctxlab_up"]
    assert up.samples[0].value == 0
    shown = invoke("show", str(out))
    assert shown.exit_code == 0 and "no usable GPU" in shown.output
    assert invoke("show", str(out), "--check").exit_code == 1
    merged = invoke("report", "merge", str(RESULTS / "check.json"), str(out))
    assert merged.exit_code == 1 and "could not run" in merged.output


@pytest.mark.nogpu
def test_without_report_files_nothing_is_written(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ctxlab", "check"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 2 and list(tmp_path.iterdir()) == []


def test_the_committed_record_of_this_cpu_machine_loads():
    (run,) = ctxlab.load(RESULTS / "fleet" / "check-no-gpu.json")
    assert is_environment_error(run) and run.environment["ctxlab"] == "0.2.0"
    log = (RESULTS / "fleet" / "check-no-gpu.log").read_text()
    assert log.startswith("Error: no usable GPU:") and log.endswith("exit 2\n")
