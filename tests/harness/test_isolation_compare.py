"""benchmarks/isolation_compare.py on real H200 recordings: the same run reads the same, a changed verdict, a
changed error name or a missing claim does not, a handle alone does not count."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import RESULTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def compare(first, second, *extra):
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "isolation_compare.py"), str(first),
                           str(second), *extra], capture_output=True, text=True, env=ENV, timeout=60)


def planted(tmp_path, edit) -> str:
    doc = json.loads((RESULTS / "check.json").read_text())
    edit(doc["runs"])
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return str(path)


def claim(runs, lab, verdict=None):
    return next(c for r in runs if r["lab"] == lab for c in r["claims"] if verdict is None or c["verdict"] == verdict)


def test_a_run_against_itself_reads_the_same(tmp_path):
    done = compare(RESULTS / "check.json", RESULTS / "check.json", "--json", tmp_path / "c.json")
    assert done.returncode == 0 and done.stdout.strip().endswith("claims compared, 0 differ")
    assert json.loads((tmp_path / "c.json").read_text())["differ"] == []


def test_another_handle_in_the_evidence_is_not_a_difference(tmp_path):
    def with_handle(handle):
        def edit(runs):
            c = claim(runs, "migrate")
            c["evidence"] += f" (context {handle})"
        return edit
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = planted(tmp_path / "a", with_handle("0x7f0012345678"))
    second = planted(tmp_path / "b", with_handle("0x7f00deadbeef"))
    assert compare(first, second).returncode == 0


@pytest.mark.parametrize("change", ["verdict", "error name", "missing"])
def test_a_decided_change_is_a_difference(tmp_path, change):
    def edit(runs):
        c = claim(runs, "refcount", "holds")
        if change == "verdict":
            c["verdict"] = "fails"
        elif change == "error name":
            c["evidence"] += " CUDA_ERROR_INVALID_HANDLE"
        else:
            next(r for r in runs if r["lab"] == "refcount")["claims"].remove(c)
    done = compare(RESULTS / "check.json", planted(tmp_path, edit))
    assert done.returncode == 1 and done.stdout.strip().endswith("claims compared, 1 differ")
    assert done.stdout.startswith("refcount/")


def test_a_file_that_cannot_be_read_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    done = compare(RESULTS / "check.json", bad)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
