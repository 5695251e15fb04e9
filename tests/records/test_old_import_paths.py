"""The import paths of old (``ctxlab.record``, ``ctxlab.loading``, ``ctxlab.shapes``, ``ctxlab.envrecord``) still
work and say, once imported, where their names live now; nothing inside ctxlab uses them."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OLD = {"ctxlab.record": "ctxlab.records.model", "ctxlab.loading": "ctxlab.records.files",
       "ctxlab.shapes": "ctxlab.records.shapes", "ctxlab.envrecord": "ctxlab.records.environment_error"}


@pytest.mark.parametrize("old, new", sorted(OLD.items()))
def test_an_old_path_warns_naming_the_new_one_and_forwards(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    home = importlib.import_module(new)
    shared = [name for name in module.__all__ if hasattr(home, name)]
    assert shared and all(getattr(module, name) is getattr(home, name) for name in shared)


def test_the_record_shim_still_writes_and_reads(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "ctxlab.record", raising=False)
    with pytest.warns(DeprecationWarning):
        record = importlib.import_module("ctxlab.record")
    target = tmp_path / "r.json"
    record.atomic_write(target, record.dumps([]))
    assert record.load_runs(target) == [] and record.parse_runs({"schema": "ctxlab/1", "runs": []}) == []


def test_nothing_inside_ctxlab_imports_an_old_path():
    """ctxlab itself imports the new homes only: importing the package and its CLI warns of nothing."""
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning); "
            "import ctxlab, ctxlab.cli, ctxlab.api, ctxlab.report.fleet_load, ctxlab.suite")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
