"""The speed benchmarks' command lines: bad counts and a machine without a GPU are one line and exit 2."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", f"{name}.py"), *args],
                          capture_output=True, text=True, env=ENV, timeout=60)


@pytest.mark.parametrize("name, args", [
    ("context_contention", ["--processes", "0"]), ("context_contention", ["--threads", "1,x"]),
    ("context_contention", ["--threads", "65"]), ("context_contention", ["--rounds", "0"]),
    ("context_contention", ["--device", "-1"]), ("handoff_variants", ["--threads", ""]),
    ("handoff_variants", ["--threads", "1000"]), ("handoff_variants", ["--variants", "spin,teleport"]),
    ("handoff_variants", ["--handoffs", "0"]), ("handoff_breakdown", ["--handoffs", "-3"]),
    ("handoff_breakdown", ["--iterations", "many"]), ("relay_vs_native", ["--pairs", "0"]),
    ("relay_vs_native", ["--threads", "x"]), ("relay_vs_native", ["--child", "green"]),
    ("long_program", ["--launches", "0"]), ("long_program", ["--launches", "5M"]),
])
def test_bad_counts_are_refused_in_one_line(name, args):
    done = run(name, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"{name}.py: error:")


@pytest.mark.nogpu
@pytest.mark.parametrize("name", ["context_contention", "handoff_variants", "handoff_breakdown", "relay_vs_native"])
def test_without_a_gpu_each_says_so_in_one_line(name):
    done = run(name)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith(f"{name}: needs a GPU:")
