"""The peer lab on the GPU: on two GPUs every claim gets its expected verdict (``check --devices all`` pairs
0->1 and 1->0); with one GPU visible every claim is skipped with the reason."""

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.files import load_runs
from tests.gpu.expected import assert_expected, visible_gpus

pytestmark = pytest.mark.gpu
KEEP = os.environ.get("CTXLAB_RESULTS")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TWO_GPU_SCENARIOS = {"peer-handoff-created", "peer-handoff-primary", "peer-none", "peer-sibling", "peer-reverse",
                     "peer-reset-peer", "peer-reset-own", "thread-devices"}


def keep(tmp_path, name):
    return os.path.join(KEEP, name) if KEEP else str(tmp_path / name)


def needs_two_gpus():
    count = visible_gpus()
    if count < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {count}")


def ctxlab_in_child(*args, env=None):
    """``python -m ctxlab ARGS`` in a child process (so CUDA_VISIBLE_DEVICES can differ from this one's)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-m", "ctxlab", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_peer_on_two_gpus(tmp_path):
    needs_two_gpus()
    out = keep(tmp_path, "peer.json")
    result = CliRunner().invoke(cli, ["peer", "--format", "json", "--output", out], catch_exceptions=False)
    (run,) = load_runs(out)
    skipped = [o.value for o in run.observations if o.what == "skipped"]
    assert not skipped, skipped  # two H200s with NVLink reach each other's memory
    assert set(run.timings) == TWO_GPU_SCENARIOS
    enabled = [o.value for o in run.observations if o.what == "peer enabled"]
    assert {(v["kind"], v["device"], v["peer"]) for v in enabled} == {("created", 0, 1), ("primary", 0, 1)}
    used = [o for o in run.observations if o.what == "peer after handoff"]
    assert {o.thread for o in used} == {"T2"}
    for variant in ("none", "sibling", "reverse"):  # undefined-behaviour territory: three fresh processes
        assert {o.repeat for o in run.observations if o.scenario == f"peer-{variant}"} == {0, 1, 2}
    assert_expected(run)
    assert result.exit_code == 0


def test_check_devices_all_pairs_each_gpu_with_the_next(tmp_path):
    needs_two_gpus()
    out = keep(tmp_path, "check-peer-devices-all.json")
    done = ctxlab_in_child("check", "--devices", "all", "--only", "peer", "--json", out)
    runs = load_runs(out)
    assert [r.options["device"] for r in runs] == list(range(visible_gpus())), done.stderr
    for run in runs:
        device = run.options["device"]
        pairs = {(o.value["device"], o.value["peer"]) for o in run.observations if o.what == "peer enabled"}
        assert pairs == {(device, (device + 1) % len(runs))}
        assert_expected(run)
    assert done.returncode == 0, done.stderr


def test_peer_with_one_visible_gpu_skips_every_claim_with_why(tmp_path):
    out = keep(tmp_path, "peer-one-gpu.json")
    done = ctxlab_in_child("peer", "--format", "json", "--output", out, env={"CUDA_VISIBLE_DEVICES": "0"})
    (run,) = load_runs(out)
    assert run.claims and all(c.verdict == "skipped" for c in run.claims), run.claims
    # the structured reason, borne out by the run's own record: one GPU visible, the lab needs two
    assert run.environment["gpu_count"] == 1, run.environment
    assert all(c.skip == {"kind": "hardware", "resource": "gpus", "required": 2, "found": 1} for c in run.claims), \
        run.claims
    assert all(c.evidence.endswith(": needs 2 GPUs, this machine has 1") for c in run.claims), run.claims
    assert_expected(run, gpus=1)
    assert done.returncode == 0, done.stderr
