import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.files import load_runs
from tests.gpu.expected import assert_expected

pytestmark = pytest.mark.gpu
KEEP = os.environ.get("CTXLAB_RESULTS")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def keep(tmp_path, name):
    return os.path.join(KEEP, name) if KEEP else str(tmp_path / name)


def test_modules_every_scenario(tmp_path):
    out = keep(tmp_path, "modules.json")
    result = CliRunner().invoke(cli, ["modules", "--format", "json", "--output", out], catch_exceptions=False)
    (run,) = load_runs(out)
    assert run.errors == (), run.errors
    scenarios = {o.scenario for o in run.observations}
    assert {"module-EAGER", "module-LAZY", "module-unset", "two-contexts", "library-EAGER", "library-LAZY",
            "nvcc", "cupy-cache"} <= scenarios
    assert_expected(run)
    assert result.exit_code == 0


def test_check_runs_every_lab_and_writes_the_reports(tmp_path):
    paths = {kind: keep(tmp_path, name) for kind, name in
             (("json", "check.json"), ("junit", "check.xml"), ("markdown", "check.md"))}
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    baseline = os.path.join(ROOT, "labs", "results", "check.json")  # its timings order the jobs
    done = subprocess.run([sys.executable, "-m", "ctxlab", "check", "--json", paths["json"], "--junit",
                           paths["junit"], "--markdown", paths["markdown"], "--baseline", baseline, "--profile"],
                          capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - t
    runs = load_runs(paths["json"])
    assert {"migrate", "refcount", "lifecycle", "modules"} <= {r.lab for r in runs}
    for run in runs:
        assert_expected(run)
    assert done.returncode == 0, done.stderr
    ends = [line for line in done.stderr.splitlines() if line.startswith(tuple(f"{r.lab} on GPU 0: " for r in runs))]
    assert len(ends) == len(runs)  # one progress line per lab as it ends
    assert "critical path: " in done.stderr
    with open(keep(tmp_path, "check-profile.txt"), "w") as handle:
        handle.write(done.stderr)
    with open(keep(tmp_path, "check-timing.json"), "w") as handle:
        json.dump({"wall_seconds": wall, "labs": {r.lab: r.seconds for r in runs}}, handle, indent=2)
    assert "# ctxlab check" in open(paths["markdown"]).read()
