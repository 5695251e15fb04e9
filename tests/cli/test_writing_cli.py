"""Check writes all of its reports or none, with the same option names as every other command."""

from __future__ import annotations

import json

from tests.hostile import assert_one_line_exit_2, invoke


def test_check_takes_format_and_output_like_the_labs(fake_registry, tmp_path):
    out = tmp_path / "r.json"
    result = invoke("check", "--only", "ok", "--format", "json", "--output", out)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["lab"] == "ok"  # one run, as its object (show writes it the same)


def test_check_old_report_options_still_work_together(fake_registry, tmp_path):
    result = invoke("check", "--only", "ok", "--json", tmp_path / "r.json", "--junit", tmp_path / "r.xml",
                    "--markdown", tmp_path / "r.md", "-o", tmp_path / "t.txt")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.xml").read_text().startswith("<?xml")
    assert "# ctxlab check" in (tmp_path / "r.md").read_text()
    assert "ok.claim" in (tmp_path / "t.txt").read_text()


def test_check_writes_all_reports_or_none(fake_registry, tmp_path, monkeypatch):
    import dataclasses

    from ctxlab.report import formats

    def broken(runs, view):
        raise OSError(28, "No space left on device")

    monkeypatch.setitem(formats.REGISTRY, "junit", dataclasses.replace(formats.REGISTRY["junit"], write=broken))
    result = invoke("check", "--only", "ok", "--json", tmp_path / "r.json", "--junit", tmp_path / "r.xml")
    assert result.exit_code == 2
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.xml").exists()


def test_merge_takes_format_and_output(tmp_path):
    from tests.conftest import RESULTS

    out = tmp_path / "m.html"
    result = invoke("report", "merge", RESULTS / "refcount.json", "--format", "html", "--output", out)
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!doctype html>")


def test_doctor_takes_format_and_output(tmp_path):
    out = tmp_path / "d.json"
    result = invoke("doctor", "--format", "json", "--output", out)
    assert result.exit_code in (0, 2)
    assert "driver" in json.loads(out.read_text())


def test_check_rejects_the_same_path_twice(fake_registry, tmp_path):
    result = invoke("check", "--only", "ok", "--json", tmp_path / "r", "--junit", tmp_path / "r")
    assert_one_line_exit_2(result)
