"""The audit's hooks (ctxlab.audit.hooks) on real memory laid out as CUPTI passes it (CPU only): a
CUpti_CallbackData whose functionParams points to a ``<function>_params`` struct, kernel arguments behind
a ``void**``; what they note is what the rules read."""

import ctypes
import struct
from types import SimpleNamespace

import pytest

from ctxlab.audit import judge
from ctxlab.audit.hooks import FOREIGN_POINTER, GREEN_CONTEXT, Allocations, AuditHooks

PRIMARY, CREATED = 0x1D2154D0, 0x7F00AA00
BASE_A, BASE_B = 0x7F1000000000, 0x7F2000000000


class FakeTracer:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.clock = 1000

    def timestamp(self) -> int:
        self.clock += 10
        return self.clock

    def note(self, event: dict) -> None:
        self.events.append(event)


class Memory:
    """Buffers kept alive for the test; their addresses are what the hooks read."""

    def __init__(self) -> None:
        self.keep: list = []

    def buf(self, data: bytes) -> int:
        b = ctypes.create_string_buffer(data, max(len(data), 8))
        self.keep.append(b)
        return ctypes.addressof(b)

    def u64s(self, *values: int) -> int:
        return self.buf(struct.pack(f"<{len(values)}Q", *values))

    def callback(self, params: int, site: int, context: int, status: int = 0, correlation: int = 7):
        data = self.buf(struct.pack("<i4xQQ", site, 0, params) + bytes(48))  # functionParams at offset 16
        ret = self.buf(struct.pack("<i", status))
        return SimpleNamespace(callback_site=site, ptr=data, context=context, context_uid=1,
                               correlation_id=correlation, function_return_value=ret)


def allocate(hooks, mem, tracer, base, size, context, name="cuMemAlloc_v2", correlation=7):
    dptr = mem.u64s(base)
    params = mem.u64s(dptr, size)
    hooks.tracer_hooks()[name](tracer, mem.callback(params, 1, context, correlation=correlation))


def launch(hooks, mem, tracer, context, args: list[bytes], function=0xF00, name="cuLaunchKernel"):
    pointers = [mem.buf(a) for a in args]
    kernel_params = mem.u64s(*pointers)
    if name.startswith("cuLaunchKernelEx"):
        params = mem.u64s(0, function, kernel_params, 0)
    else:  # f; gridDim x3, blockDim x3, sharedMemBytes (unsigned); hStream at 40; kernelParams 48; extra 56
        params = mem.buf(struct.pack("<Q8I", function, 1, 1, 1, 1, 1, 1, 0, 0) + struct.pack("<QQQ", 0,
                                                                                            kernel_params, 0))
    hook = hooks.tracer_hooks()[name]
    hook(tracer, mem.callback(params, 0, context))
    hook(tracer, mem.callback(params, 1, context))  # the exit site: nothing to do


def carray(pointer: int, n: int) -> bytes:
    """CuPy's CArray<T, 1> as passed: data pointer, size, shape[1], strides[1]."""
    return struct.pack("<Qqqq", pointer, n, n, 4)


@pytest.fixture
def setup():
    sizes = {0xF00: (32, 32, 4), 0xF01: (8,)}
    return AuditHooks(param_sizes=lambda f: sizes.get(f, ())), Memory(), FakeTracer()


def test_a_pointer_inside_a_struct_argument_into_another_contexts_allocation_is_noted(setup):
    hooks, mem, tracer = setup
    allocate(hooks, mem, tracer, BASE_A, 16384, PRIMARY, correlation=3)
    allocate(hooks, mem, tracer, BASE_B, 16384, CREATED)
    launch(hooks, mem, tracer, CREATED, [carray(BASE_A + 256, 4096), carray(BASE_B, 4096), b"\x01\0\0\0"])
    (event,) = tracer.events
    assert event["name"] == FOREIGN_POINTER and event["domain"] == "audit"
    assert (event["context"], event["owner"], event["parameter"], event["offset"]) == (CREATED, PRIMARY, 0, 0)
    assert (event["pointer"], event["base"], event["size"]) == (BASE_A + 256, BASE_A, 16384)
    assert event["allocation_correlation"] == 3 and event["launch"] == "cuLaunchKernel"
    assert event["stack"] and event["stack"][0][0].endswith("test_audit_hooks.py")


def test_the_same_launch_is_inspected_once_and_the_owners_own_launch_not_at_all(setup):
    hooks, mem, tracer = setup
    allocate(hooks, mem, tracer, BASE_A, 16384, PRIMARY)
    allocate(hooks, mem, tracer, BASE_B, 16384, CREATED)
    for _ in range(3):
        launch(hooks, mem, tracer, CREATED, [carray(BASE_A, 8), carray(BASE_B, 8), b"\0" * 4])
    launch(hooks, mem, tracer, PRIMARY, [carray(BASE_A, 8), carray(BASE_A + 64, 8), b"\0" * 4])
    assert len(tracer.events) == 1
    assert hooks.stats["launches_inspected"] == 2 and hooks.stats["launch_callbacks"] == 4


def test_one_owner_launches_are_not_read(setup):
    hooks, mem, tracer = setup
    allocate(hooks, mem, tracer, BASE_A, 16384, PRIMARY)
    launch(hooks, mem, tracer, PRIMARY, [carray(BASE_A, 8), carray(BASE_A, 8), b"\0" * 4])
    assert not tracer.events and hooks.stats["launches_inspected"] == 0


def test_free_and_reuse_of_an_address_by_another_context(setup):
    hooks, mem, tracer = setup
    allocate(hooks, mem, tracer, BASE_A, 16384, PRIMARY)
    allocate(hooks, mem, tracer, BASE_B, 64, CREATED)
    free = hooks.tracer_hooks()["cuMemFree_v2"]
    free(tracer, mem.callback(mem.u64s(BASE_A), 0, PRIMARY))
    assert hooks.allocations.find(BASE_A) is None
    allocate(hooks, mem, tracer, BASE_A, 4096, CREATED)  # the address again, now the created context's
    launch(hooks, mem, tracer, CREATED, [carray(BASE_A, 8), carray(BASE_B, 8), b"\0" * 4])
    assert not tracer.events


def test_a_failed_allocation_is_not_kept_and_pitch_sizes_are_pitch_times_height(setup):
    hooks, mem, tracer = setup
    hook = hooks.tracer_hooks()["cuMemAlloc_v2"]
    hook(tracer, mem.callback(mem.u64s(mem.u64s(BASE_A), 64), 1, PRIMARY, status=2))
    assert hooks.allocations.count == 0
    pitch = mem.u64s(512)
    params = mem.u64s(mem.u64s(BASE_B), pitch, 300, 10, 4)  # dptr, pPitch, WidthInBytes, Height, ElementSize
    hooks.tracer_hooks()["cuMemAllocPitch_v2"](tracer, mem.callback(params, 1, CREATED))
    assert hooks.allocations.find(BASE_B + 5119)[2] == CREATED and hooks.allocations.find(BASE_B + 5120) is None


def test_cuLaunchKernelEx_and_the_extra_buffer(setup):
    hooks, mem, tracer = setup
    allocate(hooks, mem, tracer, BASE_A, 4096, PRIMARY)
    allocate(hooks, mem, tracer, BASE_B, 4096, CREATED)
    launch(hooks, mem, tracer, CREATED, [struct.pack("<Q", BASE_A + 8)], function=0xF01, name="cuLaunchKernelEx")
    assert [e["launch"] for e in tracer.events] == ["cuLaunchKernelEx"]
    buffer = mem.buf(struct.pack("<QQ", 5, BASE_A + 16))  # a count, then the pointer at byte 8
    size = mem.u64s(16)
    extra = mem.u64s(1, buffer, 2, size, 0)  # BUFFER_POINTER, BUFFER_SIZE, END
    params = mem.buf(struct.pack("<Q8I", 0xF02, *([1] * 6), 0, 0) + struct.pack("<QQQ", 0, 0, extra))
    hooks.tracer_hooks()["cuLaunchKernel"](tracer, mem.callback(params, 0, CREATED))
    assert (tracer.events[-1]["parameter"], tracer.events[-1]["offset"]) == (-1, 8)


def test_a_function_whose_parameters_cannot_be_read_is_skipped(setup):
    hooks, mem, tracer = setup

    def broken(function):
        raise RuntimeError("no cuFuncGetParamInfo")

    hooks._param_sizes = broken
    allocate(hooks, mem, tracer, BASE_A, 4096, PRIMARY)
    allocate(hooks, mem, tracer, BASE_B, 4096, CREATED)
    launch(hooks, mem, tracer, CREATED, [carray(BASE_A, 8)], function=0xF09)
    assert not tracer.events


def test_the_green_hook_notes_the_cucontext_and_the_rule_reads_it(setup):
    hooks, mem, tracer = setup
    out = mem.u64s(0x7F00CC00)
    hooks.tracer_hooks()["cuCtxFromGreenCtx"](tracer, mem.callback(mem.u64s(out, 0x5A5A0000), 1, 0))
    (event,) = tracer.events
    assert (event["name"], event["context"], event["green"]) == (GREEN_CONTEXT, 0x7F00CC00, 0x5A5A0000)


def test_what_the_hooks_note_is_judged(setup):
    hooks, mem, tracer = setup
    allocate(hooks, mem, tracer, BASE_A, 16384, PRIMARY)
    allocate(hooks, mem, tracer, BASE_B, 16384, CREATED)
    launch(hooks, mem, tracer, CREATED, [carray(BASE_A, 8), carray(BASE_B, 8), b"\0" * 4])
    events = [dict(e, seq=i, thread="MainThread") for i, e in enumerate(tracer.events)]
    (finding,) = judge(events)
    assert finding.rule == "pointer-from-another-context" and finding.location.file.endswith("test_audit_hooks.py")


def test_allocations_overlapping_a_new_one_are_dropped():
    allocations = Allocations()
    allocations.add(100_000, 1000, PRIMARY)
    allocations.add(101_000, 1000, PRIMARY)
    allocations.add(100_500, 1000, CREATED)  # overlaps both: their memory was freed unseen
    assert allocations.find(100_000) is None and allocations.find(101_400)[2] == CREATED
    assert allocations.owners == {CREATED: 1}


def test_the_tracer_calls_a_hook_first_and_records_only_the_functions_it_selected():
    from ctxlab.trace import Tracer

    seen = []
    tracer = Tracer(hooks={"cuLaunchKernel": lambda t, data: seen.append((t, data))})
    tracer._domain_names = {1: "driver"}
    tracer._hooks = {(1, 307): (tracer.hooks["cuLaunchKernel"], False)}
    tracer._callback(None, 1, 307, "data")
    assert seen == [(tracer, "data")] and tracer.stats["callbacks"] == 0 and not tracer._entered


def test_a_destroyed_context_takes_its_allocations_out_of_the_map(setup):
    hooks, mem, tracer = setup
    allocate(hooks, mem, tracer, BASE_A, 4096, PRIMARY)
    allocate(hooks, mem, tracer, BASE_B, 64, CREATED)
    destroy = hooks.tracer_hooks()["cuCtxDestroy_v2"]
    destroy(tracer, mem.callback(mem.u64s(CREATED), 1, PRIMARY, status=1))  # it failed: nothing changes
    assert hooks.allocations.find(BASE_B)[2] == CREATED
    destroy(tracer, mem.callback(mem.u64s(CREATED), 1, PRIMARY))
    assert hooks.allocations.find(BASE_B) is None and hooks.allocations.find(BASE_A)[2] == PRIMARY
    assert hooks.allocations.owners == {PRIMARY: 1}


def test_a_hook_that_raises_is_counted_and_never_reaches_the_driver():
    from ctxlab.trace import Tracer

    def broken(t, data):
        raise IndexError("hook bug")

    tracer = Tracer(hooks={"cuLaunchKernel": broken})
    tracer._domain_names = {}  # the recording part has nothing to do here
    tracer._hooks = {(1, 307): (broken, True)}
    tracer._callback(None, 1, 307, "data")
    assert tracer.stats["hook_errors"] == 1
