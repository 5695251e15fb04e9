"""The audit's replay of the calls' kept parameters (ctxlab.audit.model.hooks) on call events as the tracer
makes them (CPU only); what it notes is what the rules read. What the C callback keeps is tested in
tests/tracing/test_native_callback.py."""

import struct

import pytest

from ctxlab.audit import judge
from ctxlab.audit.model.hooks import FOREIGN_POINTER, GREEN_CONTEXT, AuditHooks
from ctxlab.audit.model.memory import Memory

PRIMARY, CREATED = 0x1D2154D0, 0x7F00AA00
BASE_A, BASE_B = 0x7F1000000000, 0x7F2000000000


STACK = [["tests/audit/test_audit_hooks.py", 1, "user"]]


class Calls:
    """Call events as the tracer makes them from its C callback's records: name, status, context, ``args``
    (the parameters ctxlab.tracing.fields keeps), a launch's ``arguments`` blob."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.clock = 1000

    def add(self, name: str, context: int, status: str = "CUDA_SUCCESS", correlation: int = 7, **extra) -> dict:
        self.clock += 10
        event = {"domain": "driver", "name": name, "tid": 101, "start": self.clock, "end": self.clock + 5,
                 "status": status, "context": context, "context_uid": 1, "correlation": correlation, **extra}
        self.events.append(event)
        return event


def allocate(calls, base, size, context, name="cuMemAlloc_v2", correlation=7, status="CUDA_SUCCESS"):
    calls.add(name, context, status=status, correlation=correlation, args={"ptr": base, "size": size})


def blob(args: list[bytes], index_from: int = 0) -> bytes:
    """Kernel arguments as the C callback keeps them: (u32 index, u32 size, bytes) each."""
    return b"".join(struct.pack("<II", i, len(a)) + a for i, a in enumerate(args, index_from))


def launch(calls, context, args: list[bytes], function=0xF00, name="cuLaunchKernel", status="CUDA_SUCCESS"):
    calls.add(name, context, status=status, args={"function": function, "stream": 0}, arguments=blob(args),
              stack=STACK)


def carray(pointer: int, n: int) -> bytes:
    """CuPy's CArray<T, 1> as passed: data pointer, size, shape[1], strides[1]."""
    return struct.pack("<Qqqq", pointer, n, n, 4)


@pytest.fixture
def setup():
    return AuditHooks(), Calls()


def noted(hooks, calls) -> list[dict]:
    return hooks.annotate(calls.events)


def test_a_pointer_inside_a_struct_argument_into_another_contexts_allocation_is_noted(setup):
    hooks, calls = setup
    allocate(calls, BASE_A, 16384, PRIMARY, correlation=3)
    allocate(calls, BASE_B, 16384, CREATED)
    launch(calls, CREATED, [carray(BASE_A + 256, 4096), carray(BASE_B, 4096), b"\x01\0\0\0\0\0\0\0"])
    (event,) = noted(hooks, calls)
    assert event["name"] == FOREIGN_POINTER and event["domain"] == "audit"
    assert (event["context"], event["owner"], event["parameter"], event["offset"]) == (CREATED, PRIMARY, 0, 0)
    assert (event["pointer"], event["base"], event["size"]) == (BASE_A + 256, BASE_A, 16384)
    assert event["allocation_correlation"] == 3 and event["launch"] == "cuLaunchKernel"
    assert event["stack"] == STACK and event["function"] == 0xF00


def test_the_owners_own_launch_is_quiet_and_every_launch_is_counted(setup):
    hooks, calls = setup
    allocate(calls, BASE_A, 16384, PRIMARY)
    allocate(calls, BASE_B, 16384, CREATED)
    launch(calls, PRIMARY, [carray(BASE_A, 8), carray(BASE_A + 64, 8)])
    calls.add("cuLaunchKernel", PRIMARY, args={"function": 0xF00})  # arguments not kept (seen before)
    assert noted(hooks, calls) == []
    assert hooks.stats["launches_inspected"] == 1 and hooks.stats["launch_callbacks"] == 2


@pytest.mark.parametrize("context, status", [(0, "CUDA_ERROR_INVALID_CONTEXT"), (CREATED, "CUDA_ERROR_INVALID_HANDLE")])
def test_a_launch_that_failed_ran_no_kernel_and_is_quiet(setup, context, status):
    # a thread with no context launching a kernel cached elsewhere (the no-context hazard): nothing was read
    hooks, calls = setup
    allocate(calls, BASE_A, 16384, PRIMARY)
    launch(calls, context, [carray(BASE_A, 8)], status=status)
    assert noted(hooks, calls) == []
    launch(calls, CREATED, [carray(BASE_A, 8)])  # the same launch run: noted
    assert [e["name"] for e in noted(hooks, calls)] == [FOREIGN_POINTER]


def test_a_launch_before_the_allocation_it_names_is_quiet(setup):
    hooks, calls = setup
    launch(calls, CREATED, [carray(BASE_A, 8)])
    allocate(calls, BASE_A, 16384, PRIMARY)  # later in time: the replay goes by time, not list order
    assert noted(hooks, calls) == []


def test_free_and_reuse_of_an_address_by_another_context(setup):
    hooks, calls = setup
    allocate(calls, BASE_A, 16384, PRIMARY)
    allocate(calls, BASE_B, 64, CREATED)
    calls.add("cuMemFree_v2", PRIMARY, args={"ptr": BASE_A})
    allocate(calls, BASE_A, 4096, CREATED)  # the address again, now the created context's
    launch(calls, CREATED, [carray(BASE_A, 8), carray(BASE_B, 8)])
    assert noted(hooks, calls) == []
    assert hooks.allocations.outer(BASE_A).context == CREATED


def test_a_failed_allocation_is_not_kept_and_pitch_sizes_are_pitch_times_height(setup):
    hooks, calls = setup
    allocate(calls, BASE_A, 64, PRIMARY, status="CUDA_ERROR_OUT_OF_MEMORY")
    calls.add("cuMemAllocPitch_v2", CREATED, args={"ptr": BASE_B, "pitch": 512, "height": 10})
    hooks.annotate(calls.events)
    assert hooks.allocations.count == 1
    assert hooks.allocations.outer(BASE_B + 5119).context == CREATED and hooks.allocations.outer(BASE_B + 5120) is None


def test_the_extra_buffer_is_read_as_parameter_minus_one(setup):
    hooks, calls = setup
    allocate(calls, BASE_A, 4096, PRIMARY)
    allocate(calls, BASE_B, 4096, CREATED)
    packed = struct.pack("<II", 0xFFFFFFFF, 16) + struct.pack("<QQ", 5, BASE_A + 16)  # a count, then a pointer
    calls.add("cuLaunchKernelEx", CREATED, args={"function": 0xF02}, arguments=packed, stack=STACK)
    (event,) = noted(hooks, calls)
    assert (event["launch"], event["parameter"], event["offset"]) == ("cuLaunchKernelEx", -1, 8)


def test_small_words_are_not_addresses(setup):
    hooks, calls = setup
    allocate(calls, 0x100, 1 << 20, PRIMARY)  # an allocation "at" a small address: counts would match it
    allocate(calls, BASE_B, 64, CREATED)
    launch(calls, CREATED, [struct.pack("<Q", 0x200)])
    assert noted(hooks, calls) == []


def test_the_green_replay_notes_the_cucontext_and_the_rule_reads_it(setup):
    hooks, calls = setup
    calls.add("cuCtxFromGreenCtx", 0, args={"ctx": 0x7F00CC00, "green": 0x5A5A0000}, stack=STACK)
    calls.add("cuCtxFromGreenCtx", 0, status="CUDA_ERROR_INVALID_VALUE", args={"ctx": 0x7F00DD00, "green": 1})
    (event,) = noted(hooks, calls)
    assert (event["name"], event["context"], event["green"]) == (GREEN_CONTEXT, 0x7F00CC00, 0x5A5A0000)


def test_what_the_replay_notes_is_judged(setup):
    hooks, calls = setup
    allocate(calls, BASE_A, 16384, PRIMARY)
    allocate(calls, BASE_B, 16384, CREATED)
    launch(calls, CREATED, [carray(BASE_A, 8), carray(BASE_B, 8)])
    events = [dict(e, seq=i, thread="MainThread") for i, e in enumerate(noted(hooks, calls))]
    (finding,) = judge(events)
    assert finding.rule == "pointer-from-another-context" and finding.location.file.endswith("test_audit_hooks.py")


def test_allocations_overlapping_a_new_one_are_dropped():
    allocations = Memory(history=False)
    allocations.allocated(100_000, 1000, {"context": PRIMARY, "start": 1})
    allocations.allocated(101_000, 1000, {"context": PRIMARY, "start": 2})
    allocations.allocated(100_500, 1000, {"context": CREATED, "start": 3})  # overlaps both: freed unseen
    assert allocations.outer(100_000) is None and allocations.outer(101_400).context == CREATED
    assert [b.context for b in allocations.blocks] == [CREATED] and allocations.made == []


def test_a_destroyed_context_takes_its_allocations_out_of_the_map(setup):
    hooks, calls = setup
    allocate(calls, BASE_A, 4096, PRIMARY)
    allocate(calls, BASE_B, 64, CREATED)
    calls.add("cuCtxDestroy_v2", PRIMARY, status="CUDA_ERROR_INVALID_CONTEXT", args={"ctx": CREATED})
    hooks.annotate(calls.events)
    assert hooks.allocations.outer(BASE_B).context == CREATED  # it failed: nothing changed
    calls.events = []
    calls.add("cuCtxDestroy_v2", PRIMARY, args={"ctx": CREATED})
    hooks.annotate(calls.events)
    assert hooks.allocations.outer(BASE_B) is None and hooks.allocations.outer(BASE_A).context == PRIMARY
    assert [b.context for b in hooks.allocations.blocks] == [PRIMARY]
