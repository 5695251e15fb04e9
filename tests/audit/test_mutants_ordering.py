"""The ordering model where the hand-mutant pass (docs/testing.md, "Hand mutants") found it untested: the legacy
stream's implicit synchronisation stays inside its context, a synchronisation counts from the instant it
returned, a value wait holds judgement until a synchronisation ends it, a device synchronisation with no context
recorded waits for every stream, a device-to-device cudaMemcpy leaves the host unsynchronised, and a stream
query that returned success is a synchronisation (CPU only)."""

from __future__ import annotations

import pytest

from ctxlab.audit.rules.catalogue import RULES_BY_ID, judge
from tests.audit_events import PRIMARY
from tests.ordering_events import BASE, A, B, Calls

ORDERING_RULES = ("freed-while-in-use", "unordered-access", "wait-orders-nothing", "graph-replays-freed",
                  "ipc-interior-pointer")
NON_BLOCKING = 1
ANOTHER_CONTEXT = 0x7F00BB00
OTHER, THIRD = BASE + (1 << 21), BASE + (2 << 21)
HOST = 0x5555_0000_0000  # host memory: not a block the model knows


def rules_found(c: Calls) -> list[str]:
    return [f.rule for f in judge(c.events, rules=[RULES_BY_ID[r] for r in ORDERING_RULES])]


def two_streams() -> Calls:
    c = Calls()
    c.stream(A, NON_BLOCKING)
    c.stream(B, NON_BLOCKING)
    c.alloc()
    return c


@pytest.mark.parametrize("context, hazard", [(PRIMARY, False), (ANOTHER_CONTEXT, True)],
                         ids=["same context", "another context"])
def test_the_legacy_stream_waits_for_the_blocking_streams_of_its_own_context_only(context, hazard):
    c = Calls()
    c.stream(A, 0)["context"] = context  # a blocking stream, made in ``context``
    c.alloc()
    c.kernel(A, BASE)["context"] = context  # it writes
    c.d2h(BASE, 0)  # the primary context's legacy stream reads
    assert rules_found(c) == (["unordered-access"] if hazard else [])


def test_a_synchronisation_orders_a_call_that_starts_the_instant_it_returned():
    c = two_streams()
    c.kernel(A, BASE)
    synced = c.sync(A)
    c.t = synced["end"] - 10  # the next call starts exactly at the synchronisation's end
    read = c.d2h(BASE, B)
    assert read["start"] == synced["end"]
    assert rules_found(c) == []


def test_a_use_queued_behind_a_value_wait_is_not_judged_at_a_free():
    c = Calls()
    c.stream(A, NON_BLOCKING)
    c.stream(B, NON_BLOCKING)
    c.at("cuMemAllocAsync", ptr=BASE, size=1 << 20, stream=B)
    c.at("cuStreamWaitValue32_v2", stream=A)  # what follows on A runs once something writes the value
    c.kernel(A, BASE)
    c.at("cuMemFreeAsync", ptr=BASE, stream=B)
    assert rules_found(c) == []


@pytest.mark.parametrize("synced, hazard", [(False, False), (True, True)], ids=["still waiting", "synchronised"])
def test_a_stream_synchronisation_ends_its_value_wait_so_later_work_is_judged(synced, hazard):
    c = two_streams()
    c.at("cuStreamWaitValue32_v2", stream=A)
    if synced:
        c.sync(A)  # it returned: the value was written, what comes after on A runs in plain stream order
    c.kernel(A, BASE)
    c.d2h(BASE, B)
    assert rules_found(c) == (["unordered-access"] if hazard else [])


def test_a_device_synchronisation_with_no_context_recorded_waits_for_every_stream():
    c = two_streams()
    c.kernel(A, BASE)
    c.at("cudaDeviceSynchronize", domain="runtime", dur=5)["context"] = 0
    c.d2h(BASE, B)
    assert rules_found(c) == []


@pytest.mark.parametrize("destination, kind, hazard", [(OTHER, 3, True), (HOST, 2, False)],
                         ids=["device to device", "device to host"])
def test_a_device_to_device_cudamemcpy_returns_before_the_work_a_copy_to_host_waits_for(destination, kind, hazard):
    c = Calls()
    c.stream(B, NON_BLOCKING)
    for ptr in (BASE, OTHER, THIRD):
        c.alloc(ptr)
    c.kernel(0, BASE)  # the legacy stream writes BASE
    c.at("cudaMemcpy", domain="runtime", ptr=destination, src=THIRD, size=64, kind=kind, dur=5)
    c.d2h(BASE, B)  # a non-blocking stream reads it: ordered only if the host saw the legacy stream finish
    assert rules_found(c) == (["unordered-access"] if hazard else [])


@pytest.mark.parametrize("name, domain", [("cuStreamQuery", "driver"), ("cudaStreamQuery", "runtime")])
def test_a_stream_query_that_returned_success_orders_the_work_it_saw_finish(name, domain):
    c = two_streams()
    c.kernel(A, BASE)
    c.at(name, domain=domain, stream=A)
    c.d2h(BASE, B)
    assert rules_found(c) == []
