"""Threads that initialise CUDA at the same moment, under ``ctxlab trace`` and ``ctxlab audit`` (the hang the
tracer had with two CuPy threads): each run finishes within its timeout, every thread's first calls are
recorded on that thread by its Python name, and the audit of a clean program reports no error or warning.
A run past its timeout fails with every thread's Python stack (faulthandler) in the message."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAM = os.path.join(ROOT, "benchmarks", "stress_program.py")
TIMEOUT = 120
NEEDS = {"torch": "torch", "cupy": "cupy", "runtime": "cuda.bindings", "cuda_core": "cuda.core", "jax": "jax"}


def run(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               CTXLAB_STRESS_DUMP=str(TIMEOUT - 10), XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:
        try:
            return subprocess.run(args, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=ROOT,
                                  timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"hung past {TIMEOUT} s: {' '.join(args)}\n{log.read_text()[-20000:]}")


def needs(library: str) -> None:
    for name in NEEDS.values() if library == "mix" else (NEEDS[library],):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed here")


@pytest.mark.parametrize("library,threads", [("cupy", 2), ("cupy", 16), ("torch", 4), ("runtime", 16),
                                             ("cuda_core", 8), ("mix", 10)])
def test_threads_initialising_cuda_at_once_under_trace(tmp_path, library, threads):
    needs(library)
    out = tmp_path / "trace.json"
    done = run([sys.executable, "-m", "ctxlab", "trace", "--format", "json", "-o", str(out), "--", PROGRAM, library,
                str(threads)], tmp_path)
    assert done.returncode == 0, done.stdout
    program = json.loads(done.stdout.strip().splitlines()[-1])
    assert program["finished"] == threads and not program["errors"]
    events = json.loads(out.read_text())["events"]
    workers = {e["thread"] for e in events if e["domain"] in ("driver", "runtime")}
    assert {f"{library}-worker-{i}" for i in range(threads)} <= workers, sorted(workers)


@pytest.mark.parametrize("library,threads", [("cupy", 2), ("cupy", 16), ("torch", 4), ("mix", 10)])
def test_threads_initialising_cuda_at_once_under_audit(tmp_path, library, threads):
    needs(library)
    out = tmp_path / "audit.json"
    done = run([sys.executable, "-m", "ctxlab", "audit", "--format", "json", "-o", str(out), "--", PROGRAM, library,
                str(threads)], tmp_path)
    doc = json.loads(out.read_text())
    assert doc["exit_status"] == 0 and done.returncode == 0, (done.stdout, doc["findings"])
    loud = [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
    assert not loud, loud
    for finding in doc["findings"]:
        assert finding["thread"] and (finding["location"] or finding.get("location_missing")), finding


@pytest.mark.parametrize("mode", ["trace", "audit"])
def test_threads_started_before_the_tracer_are_named_and_recorded(tmp_path, mode):
    needs("cupy")
    done = run([sys.executable, PROGRAM, "cupy", "4", "--tracer-after-threads", mode], tmp_path)
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["named_threads"] == sorted(f"cupy-worker-{i}" for i in range(4))
    if mode == "audit":
        assert report["findings"] == [] or all(r == "several-runtime-copies" for r in report["findings"])
