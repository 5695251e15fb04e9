"""The peer lab without a GPU: which GPUs it pairs, and that on one GPU every claim is skipped with the reason."""

from __future__ import annotations

import importlib

import pytest
from click.testing import CliRunner

from ctxlab.claim import judge
from ctxlab.cli import cli
from ctxlab.labs import LABS, get_lab
from ctxlab.labs import peer as lab


def _gpus(monkeypatch, count: int, access: int = 1) -> None:
    monkeypatch.setattr("ctxlab.cuda.environment.device_count", lambda: count)
    monkeypatch.setattr(lab.scenarios, "can_access", lambda device, peer: access)


def _run_children_here(options) -> list:
    """Every scenario's function called in this process, as its child would call it."""
    observations = []
    for scenario in lab.LAB.scenarios(options):
        module, _, function = scenario.target.partition(":")
        out = getattr(importlib.import_module(module), function)(*scenario.args, **scenario.kwargs)
        observations += out["observations"]
    return observations


@pytest.mark.parametrize("device", [0, 3])
def test_on_one_gpu_every_claim_is_skipped_with_the_reason(monkeypatch, device):
    _gpus(monkeypatch, 1)
    observations = _run_children_here(lab.LAB.make_options(device=device))
    results = judge(lab.LAB.claims, observations)
    assert len(results) == len(lab.CLAIMS) == 7
    for result in results:
        assert result.verdict == "skipped", result
        assert result.evidence.endswith(": needs 2 GPUs, this machine has 1"), result.evidence
        assert result.skip == {"kind": "hardware", "resource": "gpus", "required": 2, "found": 1}, result.skip
    # the run's environment records the one GPU, and the lab needs two: the skip stands
    assert judge(lab.LAB.claims, observations, environment={"gpu_count": 1}, gpus=lab.LAB.gpus) == results


def test_gpus_that_cannot_reach_each_other_skip_the_peer_scenarios_but_not_the_threads(monkeypatch):
    _gpus(monkeypatch, 2, access=0)
    assert lab.pair_or_reason(0) == (None, {"kind": "hardware", "resource": "peer-access",
                                            "why": "cuDeviceCanAccessPeer: GPU 0 -> GPU 1: 0, back: 0; these GPUs "
                                                   "cannot access each other's memory"})
    assert lab.pair_or_reason(0, need_access=False) == ((0, 1), None)


@pytest.mark.parametrize("device, count, pair", [(0, 2, (0, 1)), (1, 2, (1, 0)), (2, 4, (2, 3)), (3, 4, (3, 0))])
def test_the_lab_pairs_its_device_with_the_next_one(monkeypatch, device, count, pair):
    _gpus(monkeypatch, count)
    assert lab.pair_or_reason(device) == (pair, None)


def test_undefined_reads_repeat_and_the_rest_run_once():
    scenarios = lab.LAB.scenarios(lab.LAB.make_options())
    assert {s.name for s in scenarios if s.undefined} == {"peer-none", "peer-sibling", "peer-reverse"}
    assert {s.name for s in scenarios} == {*lab.HANDOFF, *lab.WITHOUT_ACCESS, *lab.RESET, lab.THREADS}


def test_peer_is_a_lab_check_runs_and_a_command():
    assert "peer" in LABS and get_lab("peer") is lab.LAB
    assert "peer" in " ".join(CliRunner().invoke(cli, ["check", "--help"]).output.split())
    result = CliRunner().invoke(cli, ["peer", "--help"])
    assert result.exit_code == 0 and "Needs 2 GPUs" in " ".join(result.output.split())
    listed = CliRunner().invoke(cli, ["claims", "--lab", "peer", "--format", "json"])
    assert listed.exit_code == 0 and "peer.access-follows-context" in listed.output


def test_set_device_per_thread_is_skipped_when_thread_a_already_ran_on_the_device_it_sets():
    import ctxlab
    from tests.claim_cases import edit
    from tests.conftest import RESULTS

    (run,) = ctxlab.load(RESULTS / "peer.json")
    observations = edit("thread devices", "thread-devices", a_start=1)(list(run.observations))
    (result,) = [r for r in judge(lab.CLAIMS, observations, list(run.timings)) if r.id == "peer.set-device-per-thread"]
    assert result.verdict == "skipped" and "cannot tell a per-thread device" in result.evidence
