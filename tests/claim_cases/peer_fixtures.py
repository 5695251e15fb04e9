"""Synthetic observations of the peer lab's scenarios, for tests only.

No two-GPU run has been recorded yet, so the cases of the peer claims start from
this list instead of a file under labs/results/. Each value has exactly the
shape ``ctxlab/labs/peer.py`` records (``handoff``, ``without_access``,
``primary_reset``, ``thread_devices``); the outcomes are what the documentation
leads one to expect on two H200s with peer access, not measurements (the reads
without access and the resets are guesses the observation claims merely report).
Once a run is recorded, the cases can use it.
"""

from __future__ import annotations

from ctxlab.record import Observation
from tests.claim_cases.green_fixtures import RUNS, obs

A, P = 0xA0A0_0000, 0xB1B1_0000  # context A on GPU 0, the peer context P on GPU 1
A_ID, P_ID = 2, 1
PRIMARY_0, PRIMARY_1 = 0x1000_0000, 0x2000_0000
ENABLED, ALREADY = "CUDA_SUCCESS", "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"


def _handoff(kind: str) -> list[Observation]:
    scenario = f"peer-handoff-{kind}"
    return [
        obs(scenario, "peer enabled",
            {"kind": kind, "device": 0, "peer": 1, "can_access": 1, "can_access_back": 1, "a": A, "a_id": A_ID,
             "p": P, "p_id": P_ID, "src_context_is_p": True, "first": ENABLED, "second": ALREADY},
            step="T1: enable", thread="T1"),
        obs(scenario, "peer after handoff",
            {"kind": kind, "enabled_on": "T1", "current_is_a": True, "kernel": "correct", "memcpy_peer": "correct",
             "dtod": "correct", "enable_again": ALREADY}, step="T2: use", thread="T2"),
    ]


def _without(variant: str) -> list[Observation]:
    return [obs(f"peer-{variant}", "read without access",
                {"variant": variant, "reader_device": 1 if variant == "reverse" else 0, "reader_id": 3,
                 "granted": "none" if variant == "none" else ENABLED, "memcpy_peer": "correct",
                 "kernel": "CUDA_ERROR_ILLEGAL_ADDRESS"}, step="read", repeat=r) for r in RUNS]


def _reset(which: str) -> Observation:
    return obs(f"peer-reset-{which}", "peer after primary reset",
               {"reset": which, "reset_device": 1 if which == "peer" else 0, "reset_status": "CUDA_SUCCESS",
                "active_after_reset": False, "own_same_handle": True, "peer_same_handle": True,
                "enable_before": ENABLED, "read_before": "correct", "enable_after": ENABLED,
                "read_after": "correct"}, step="after reset")


def _primaries(zero: bool, one: bool) -> dict:
    return {"0": {"active": zero, "handle": PRIMARY_0 if zero else None, "id": 1 if zero else None},
            "1": {"active": one, "handle": PRIMARY_1 if one else None, "id": 2 if one else None}}


def _after(call: str, thread: str, device: int, current: int, zero: bool, one: bool) -> Observation:
    current_id = {PRIMARY_0: 1, PRIMARY_1: 2}.get(current)
    return obs("thread-devices", "after",
               {"call": call, "runtime_device": device, "current": current, "current_id": current_id,
                "primaries": _primaries(zero, one)}, step=call, thread=thread)


THREADS: list[Observation] = [
    _after("A: before any call", "A", 0, 0, False, False),
    _after("A: cudaSetDevice(1)", "A", 1, PRIMARY_1, False, True),
    _after("B: before any call", "B", 0, 0, False, True),
    _after("B: cudaMalloc", "B", 0, PRIMARY_0, True, True),
    _after("A: after B's cudaMalloc", "A", 1, PRIMARY_1, True, True),
    obs("thread-devices", "thread devices",
        {"a_start": 0, "set_device": 1, "a_after_set": 1, "a_end": 1, "b_start": 0, "b_end": 0,
         "b_bound": "GPU 0's primary context"}, step="summary", thread="B"),
]

PEER: list[Observation] = [
    *(o for kind in ("created", "primary") for o in _handoff(kind)),
    *(o for variant in ("none", "sibling", "reverse") for o in _without(variant)),
    _reset("peer"), _reset("own"),
    *THREADS,
]
