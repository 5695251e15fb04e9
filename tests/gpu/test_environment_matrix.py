"""``ctxlab check`` under the driver variables a GPU runner may set, each against a run without it (issue 25):
CUDA_MODULE_LOADING=EAGER and =LAZY, CUDA_DEVICE_MAX_CONNECTIONS=1, CUDA_VISIBLE_DEVICES=0.

What should change does (the run records the variable; ``ctxlab doctor`` shows the driver took it) and nothing
else does: every claim's verdict and normalised evidence read as without the variable, except what
tests/gpu/matrix.py says may change (a race's outcomes; the peer lab where CUDA_VISIBLE_DEVICES=0 hides the
second GPU). The modules lab's loading claims set CUDA_MODULE_LOADING per scenario themselves: under the
variable they must read exactly as without it. Every run also passes the checks of every GPU
(tests/gpu/expected.py). Two runs without any variable show no drift against each other (``--baseline``).

Each check takes about a minute on one H200: the module runs six. With CTXLAB_RESULTS set, the runs are kept
under $CTXLAB_RESULTS/matrix/ (scripts/gpu-matrix.sh records the same set for labs/results/matrix/).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ctxlab.records.files import load_runs
from tests.gpu import matrix
from tests.gpu.expected import assert_expected, visible_gpus

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEEP = os.environ.get("CTXLAB_RESULTS")
TIMEOUT = 900  # one check, bounded: a hang is a result too (the process is killed and the test fails)


def folder(tmp_path_factory) -> str:
    path = os.path.join(KEEP, "matrix") if KEEP else str(tmp_path_factory.mktemp("matrix"))
    os.makedirs(path, exist_ok=True)
    return path


def environment(variant: matrix.Variant | None) -> dict:
    """This process's environment for a child: PYTHONPATH with the checkout; the variables under test unset
    except ``variant``'s (CUDA_VISIBLE_DEVICES, which a runner may set to give the job its GPUs, is kept, and
    the variant's 0 means the first of those)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in matrix.VARIABLES:
        if name != "CUDA_VISIBLE_DEVICES":
            env.pop(name, None)
    if variant is not None:
        value = variant.value
        if variant.variable == "CUDA_VISIBLE_DEVICES" and os.environ.get("CUDA_VISIBLE_DEVICES"):
            value = os.environ["CUDA_VISIBLE_DEVICES"].split(",")[0]
        env[variant.variable] = value
    return env


def ctxlab(args: list[str], env: dict) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "ctxlab", *args], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"ctxlab {' '.join(args)} ran past {TIMEOUT} s:\n{(exc.stderr or b'')[-5000:]!r}")


def check(out_dir: str, name: str, variant: matrix.Variant | None, *extra: str):
    path = os.path.join(out_dir, f"{name}.json")
    if os.path.exists(path):
        os.remove(path)  # a run from before must not pass for this one
    done = ctxlab(["check", "--format", "json", "-o", path, "--markdown", os.path.join(out_dir, f"{name}.md"),
                   *extra], environment(variant))
    with open(os.path.join(out_dir, f"{name}.log"), "w") as handle:
        handle.write(done.stderr)
    assert os.path.exists(path), f"check wrote no result (exit {done.returncode}):\n{done.stderr[-5000:]}"
    return load_runs(path), done


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return folder(tmp_path_factory)


@pytest.fixture(scope="module")
def gpus():
    return visible_gpus()


@pytest.fixture(scope="module")
def baseline(out_dir, gpus):
    runs, done = check(out_dir, "baseline", None)
    for run in runs:
        assert_expected(run, gpus=gpus)
    assert done.returncode == 0, done.stderr[-5000:]
    return runs


def test_two_runs_without_any_variable_show_no_drift(baseline, out_dir, gpus):
    runs, done = check(out_dir, "again", None, "--baseline", os.path.join(out_dir, "baseline.json"),
                       "--fail-on-drift")
    drift = [line for line in done.stderr.splitlines() if line.startswith("drift: ")]
    assert drift == [] and done.returncode == 0, "\n".join(drift) or done.stderr[-5000:]
    assert matrix.differences(baseline, runs) == [], "\n".join(map(matrix.line, matrix.differences(baseline, runs)))


@pytest.mark.parametrize("variant", matrix.VARIANTS, ids=[v.name for v in matrix.VARIANTS])
def test_check_under_a_driver_variable_changes_only_what_it_should(variant, baseline, out_dir, gpus):
    runs, done = check(out_dir, variant.name, variant)
    # What should change: the runs record the variable, and the driver took it.
    expected_value = environment(variant)[variant.variable]
    assert [r.lab for r in runs if r.environment.get("driver_variables", {}).get(variant.variable)
            != expected_value] == [], [r.environment.get("driver_variables") for r in runs]
    shown = driver_shows(out_dir, variant)
    # The checks of every GPU hold under it too (one GPU visible under CUDA_VISIBLE_DEVICES=0).
    for run in runs:
        assert_expected(run, gpus=1 if variant.variable == "CUDA_VISIBLE_DEVICES" else gpus)
    assert done.returncode == 0, done.stderr[-5000:]
    # What must not change: every claim, but the ones that may.
    diffs = matrix.differences(baseline, runs)
    allowed = matrix.may_change(variant, baseline, gpus)
    for d in diffs:
        print(("may change: " if d["item"] in allowed else "UNEXPECTED: ") + matrix.line(d))
    if variant.variable == "CUDA_MODULE_LOADING":
        loading = matrix.pinned(variant.variable, baseline)
        assert {"modules.module-load-is-immediate", "modules.default-loading-mode",
                "modules.library-lazy-at-first-use", "modules.library-eager-everywhere"} <= loading, loading
        assert [d for d in diffs if d["item"] in loading] == []  # they set the variable themselves
    wrong = matrix.unexpected(diffs, allowed)
    assert not wrong, (f"under {variant.variable}={expected_value} (the driver shows {shown}), beyond what may "
                       f"change:\n" + "\n".join(map(matrix.line, wrong)))


def driver_shows(out_dir: str, variant: matrix.Variant) -> str:
    """``ctxlab doctor`` under the variant: the loading mode under CUDA_MODULE_LOADING, one device under
    CUDA_VISIBLE_DEVICES (asserted); what it shows, for the messages."""
    path = os.path.join(out_dir, f"doctor-{variant.name}.json")
    done = ctxlab(["doctor", "--format", "json", "--output", path], environment(variant))
    assert done.returncode == 0, done.stderr[-3000:]
    with open(path) as handle:
        driver = json.load(handle)["driver"]
    problem = matrix.driver_problem(variant, driver)
    assert problem is None, f"under {variant.variable}={variant.value} {problem}: {driver}"
    return f"loading mode {driver.get('module_loading_mode')}, {len(driver.get('devices', []))} device(s)"
