import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.files import load_runs
from tests.conftest import recorded
from tests.gpu.expected import assert_expected, expectations

pytestmark = pytest.mark.gpu
KEEP = os.environ.get("CTXLAB_RESULTS")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_lifecycle_every_sequence_traced(tmp_path):
    out = os.path.join(KEEP, "lifecycle-traced.json") if KEEP else str(tmp_path / "lifecycle-traced.json")
    result = CliRunner().invoke(cli, ["lifecycle", "--trace", "--format", "json", "--output", out],
                                catch_exceptions=False)
    (run,) = load_runs(out)
    verdicts = {c.id: c.verdict for c in run.claims}
    needs_tracer = set(expectations()["traced"])  # skipped untraced, judged traced (on any GPU)
    assert {cid: verdicts.get(cid) for cid in needs_tracer if verdicts.get(cid) in (None, "skipped")} == {}
    assert_expected(run, traced=True)  # on every GPU: no fails or error; the traced verdicts where written
    assert result.exit_code == 0, result.output
    set_device = [o for o in run.observations if o.what == "after" and o.value["call"] == "cudaSetDevice"
                  and o.scenario == "first-context"][0]
    assert any("cuDevicePrimaryCtxRetain" in e or "CONTEXT_CREATED" in e for e in set_device.events)


def test_trace_command_on_the_example(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = os.path.join(KEEP, "first_context.trace.json") if KEEP else str(tmp_path / "t.json")
    done = subprocess.run([sys.executable, "-m", "ctxlab", "trace", "--format", "json", "-o", out, "--",
                           os.path.join(ROOT, "examples", "first_context.py")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "sum computed on thread 'worker'" in done.stdout
    table = subprocess.run([sys.executable, "-m", "ctxlab", "trace", "--only", "context", "--",
                            os.path.join(ROOT, "examples", "first_context.py")], capture_output=True, text=True,
                           env=env, timeout=300)
    assert table.returncode == 0, table.stderr
    assert "thread MainThread" in table.stdout and "thread worker" in table.stdout
    assert "CONTEXT_CREATED" in table.stdout
    with open(out) as handle:
        fresh = json.load(handle)["events"]
    assert structure(fresh) == structure(recorded("first_context.trace.json")["events"])


def structure(events):
    """What must not change between runs: the calls that make, bind or load into a context beneath
    cudaSetDevice on the main thread and beneath the worker's first cudaMalloc (handles, and the queries
    only ``--calls all`` sees beneath runtime calls, aside); the same for a trace of either tracer."""
    from ctxlab.trace import CALLBACK_PREFIXES, by_thread, calls, only_context

    def changes(items):
        return [c["name"] for c in items if c["domain"] == "resource" or c["name"].startswith(CALLBACK_PREFIXES)]

    threads = by_thread(only_context(calls(events)))
    set_device = next(c for c in threads["MainThread"] if c["name"] == "cudaSetDevice")
    malloc = next(c for c in threads["worker"] if c["name"] == "cudaMalloc")
    return (changes(set_device["children"]), changes(malloc["children"]),
            sum(c["name"] == "CONTEXT_CREATED" for t in threads.values() for c in t))


def test_traced_program_exit_status_passes_through():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "ctxlab", "trace", "-c", "import sys; sys.exit(7)"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 7


def test_a_traced_lab_shows_the_driver_calls_under_its_steps(tmp_path):
    out = os.path.join(KEEP, "migrate-traced.json") if KEEP else str(tmp_path / "m.json")
    result = CliRunner().invoke(cli, ["migrate", "--trace", "--threads", "2", "--rounds", "2", "--context",
                                      "created", "--format", "json", "--output", out], catch_exceptions=False)
    (run,) = load_runs(out)
    assert_expected(run, traced=True)
    assert result.exit_code == 0, result.output
    made = next(o for o in run.observations if o.what == "context made" and o.scenario == "handoff-created")
    assert any("cuCtxCreate" in e for e in made.events) and any("CONTEXT_CREATED" in e for e in made.events)
    popped = next(o for o in run.observations if o.what == "popped" and o.scenario == "handoff-created")
    assert any("cuCtxPopCurrent" in e for e in popped.events)
