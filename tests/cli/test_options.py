"""Options: finite floats, non-empty lists, one naming of output options, show --check (issue 12 points 4, 5)."""

from __future__ import annotations

import pytest

from tests.hostile import assert_usage_error, claim, invoke, run, write


@pytest.mark.parametrize("command", [["migrate"], ["check"]])
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "infinity"])
def test_non_finite_timeouts_are_refused(command, value):
    assert_usage_error(invoke(*command, "--timeout", value), "--timeout")


@pytest.mark.parametrize("value", ["", ",", " , "])
def test_check_only_refuses_an_empty_list(value):
    assert_usage_error(invoke("check", "--only", value), "--only")


def test_check_only_help_lists_the_labs():
    text = " ".join(invoke("check", "--help").output.split())
    assert "migrate, refcount, lifecycle, modules" in text


@pytest.mark.parametrize("command", [["show", "x.json"], ["check"], ["migrate"], ["report", "merge", "x.json"],
                                     ["doctor"]])
def test_every_writing_command_takes_format_and_output(command):
    text = invoke(*command, "--help").output
    assert "--format" in text and "--output" in text


@pytest.mark.nogpu
def test_the_no_gpu_line_points_to_doctor():
    result = invoke("refcount")
    assert result.exit_code == 2 and "ctxlab doctor" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("doc, status", [
    (run(claims=[claim("holds")]), 0),
    (run(claims=[claim("fails")]), 1),
    (run(claims=[claim("holds")], errors=[{"scenario": "s", "kind": "timeout", "message": "m"}]), 1),
    (run(claims=[claim("skipped"), claim("observed"), claim("changed")]), 0),
])
def test_show_check_gates_on_recorded_verdicts(tmp_path, doc, status):
    path = write(tmp_path / "r.json", doc)
    assert invoke("show", path, "--check").exit_code == status
    assert invoke("show", path).exit_code == 0  # without --check, show only renders


def test_show_check_treats_error_as_failing(tmp_path):
    from ctxlab.records.schema import VERDICTS

    assert "error" in VERDICTS
    path = write(tmp_path / "r.json", run(claims=[claim("error")]))
    result = invoke("show", path, "--check")
    assert result.exit_code == 1, result.output
    assert invoke("report", "merge", path).exit_code == 1


def test_doctor_names_each_missing_part_once(monkeypatch):
    import ctxlab.cuda.environment as environment

    report = {"ctxlab": "0.1.0", "python": "3.12", "hostname": "h", "CUDA_MODULE_LOADING": None,
              "driver": {"ok": False, "problem": "no NVIDIA driver"},
              "cupy": {"ok": True, "version": "14"}, "cuda_bindings": {"ok": True}, "nvrtc": {"ok": True},
              "cupti": {"ok": False, "problem": "cupti: NotSupportedError: CUDA driver is not found"},
              "missing": ["driver: no NVIDIA driver", "cupti: cupti: NotSupportedError: CUDA driver is not found"]}
    monkeypatch.setattr(environment, "doctor", lambda: report)
    result = invoke("doctor")
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "cupti: cupti:" not in text and "missing cupti: NotSupportedError" in text
