"""report merge never hides a result (issue 12 point 2)."""

from __future__ import annotations

import copy

from tests.conftest import RESULTS, recorded
from tests.hostile import claim, invoke, run, write


def table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_a_failing_file_is_not_hidden_by_a_passing_one(tmp_path):
    fails = write(tmp_path / "fails.json", run(claims=[claim("fails")]))
    holds = write(tmp_path / "holds.json", run(claims=[claim("holds")]))
    result = invoke("report", "merge", fails, holds)
    assert result.exit_code == 1, result.output
    header, _, row = table_rows(result.output)[:3]
    assert header.count("duplicate key") == 2
    assert row.startswith("| demo.claim | **fails** | holds |")
    assert "1 failing" in result.output


def test_an_error_anywhere_fails_the_merge(tmp_path):
    errored = write(tmp_path / "e.json", run(errors=[{"scenario": "s", "kind": "crash", "message": "m"}]))
    result = invoke("report", "merge", errored)
    assert result.exit_code == 1
    assert "| demo (lab errors) | **error** |" in result.output


def test_two_devices_of_one_host_are_two_columns():
    result = invoke("report", "merge", RESULTS / "check-all-devices.json")
    header = table_rows(result.output)[0]
    assert "vm GPU 0" in header and "vm GPU 1" in header
    assert len(table_rows(result.output)[1].split("|")) == 5  # claim + two runners


def test_the_same_runner_in_two_files_is_two_marked_columns(tmp_path):
    again = tmp_path / "again.json"  # the same runner and GPU, recorded twice
    again.write_bytes((RESULTS / "check.json").read_bytes())
    result = invoke("report", "merge", RESULTS / "check.json", again)
    header = table_rows(result.output)[0]
    assert header.count("duplicate key 1 of 2") == 1 and header.count("duplicate key 2 of 2") == 1
    assert "check.json" in header and "again.json" in header
    assert header.count("|") - 1 == 3  # claim, GPU 0 twice


def test_two_machines_with_one_hostname_stay_apart(tmp_path):
    a = write(tmp_path / "a.json", run(environment={"hostname": "ci", "device": 0, "driver_version": 13000,
                                                    "runtime_version": 13020, "gpu_uuid": "GPU-aaaa"}))
    b = write(tmp_path / "b.json", run(environment={"hostname": "ci", "device": 0, "driver_version": 13000,
                                                    "runtime_version": 13020, "gpu_uuid": "GPU-bbbb"}))
    header = table_rows(invoke("report", "merge", a, b).output)[0]
    assert "GPU-aaaa" in header and "GPU-bbbb" in header and "duplicate" not in header


def test_two_runs_of_one_lab_in_one_file_are_two_columns(tmp_path):
    doc = recorded("refcount.json")
    both = write(tmp_path / "two.json", {"schema": "ctxlab/1", "runs": [doc, copy.deepcopy(doc)]})
    header = table_rows(invoke("report", "merge", both).output)[0]
    assert header.count("duplicate key") == 2


def test_markdown_and_html_carry_a_legend(tmp_path):
    out = tmp_path / "m.html"
    result = invoke("report", "merge", RESULTS / "refcount.json", "--html", out, "-o", "-")
    assert result.exit_code == 0
    assert "Legend:" in result.output and "**fails**: a documented promise is broken" in result.output
    page = out.read_text()
    assert "<h2>Legend</h2>" in page and "duplicate" in page


def test_merging_an_empty_result_is_well_formed_markdown(tmp_path):
    empty = write(tmp_path / "empty.json", {"schema": "ctxlab/1", "runs": []})
    result = invoke("report", "merge", empty)
    assert result.exit_code == 0
    rows = table_rows(result.output)
    assert len({row.count("|") for row in rows}) <= 1  # every row of a table has as many cells as its header
    assert "No runs" in result.output


def test_the_same_runner_judged_by_two_ctxlab_versions_is_two_columns_named_by_version(tmp_path):
    """A verdict can change because ctxlab's judges changed, not the GPU: the matrix says which version judged."""
    env = {"hostname": "ci", "device": 0, "driver_version": 13000, "runtime_version": 13020}
    a = write(tmp_path / "a.json", run(environment={**env, "ctxlab": "0.1.0"}))
    b = write(tmp_path / "b.json", run(environment={**env, "ctxlab": "0.2.0"}))
    header = table_rows(invoke("report", "merge", a, b).output)[0]
    assert "ctxlab 0.1.0" in header and "ctxlab 0.2.0" in header and "duplicate" not in header
