"""benchmarks/render_large.py's command line (its timings are not tested: they are the machine's): bad
arguments are one line and exit 2; a small run writes its figures and checks what show wrote."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "render_large.py"), *args],
                          capture_output=True, text=True, env=ENV, timeout=120)


@pytest.mark.parametrize("args", [
    ["--runs", "0"], ["--runs", "x"], ["--runs", "101"], ["--size", "5T"], ["--size", "10"], ["--size", "2G"],
    ["--size", ""], ["--source", "/nonexistent/result.json"],
    ["--source", os.path.join(ROOT, "labs", "results", "claims.json")],
    ["--size", "2K"], ["--frobnicate"],
])
def test_bad_arguments_are_one_line_and_exit_2(args):
    done = run(*args)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("render_large.py: error:")


def test_a_small_run_writes_its_figures(tmp_path):
    out = tmp_path / "figures.json"
    done = run("--size", "512K", "--runs", "1", "--json", str(out))
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert 0 < figures["file_bytes"] <= 512 * 1024 and figures["observations"] > 75
    assert set(figures["formats"]) == {"table", "json", "steps", "html", "markdown"} and figures["within_goal"] is True
    for fmt in figures["formats"].values():
        assert len(fmt["seconds"]) == 1 and fmt["peak_rss_mb"] > 0 and fmt["report_bytes"] > 0


def test_the_recorded_figure_meets_the_goal():
    figures = json.loads(open(os.path.join(ROOT, "labs", "results", "speed", "render_large.json")).read())
    assert figures["file_bytes"] > 60 * 2**20 and figures["within_goal"] is True
    assert all(f["median_seconds"] <= 10 and f["peak_rss_mb"] <= 500 for f in figures["formats"].values())
