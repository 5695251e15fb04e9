"""ctxlab's C callback (ctxlab/tracing/native/cupti_shim.c) driven on the CPU with CUPTI-shaped callback data.

The driver calls CUPTI's callback on the program's threads, sometimes holding a lock of its own; these tests
call the C callback the same way: from many threads at once (ctypes releases the GIL, so they really run
together), from a thread that holds the GIL, and under a lock that another thread, holding the GIL, waits
for (the deadlock a Python callback runs into)."""

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import pytest

from ctxlab.tracing import native
from tests.fake_cupti import Call

pytestmark = pytest.mark.skipif(not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")),
                                reason="no C compiler here: ctxlab's CUPTI callback is built from C")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture()
def tracer():
    """A tracer whose C side runs without CUPTI (its own clock), with the stack thread, names stubbed."""
    from ctxlab.tracing.tracer import Tracer

    t = Tracer(stacks=True)
    lib = native.load()
    t._start_native(lib, 0, 0, 0)
    t._function = lambda kind, cbid: f"fn{cbid}"
    t._status_of = lambda kind, value: "CUDA_SUCCESS" if value == 0 else f"ERR{value}"
    t._begin()
    yield t, lib
    t.close()


def calls_of(events: list[dict]) -> list[dict]:
    """The calls among a drain's events (not the audit's notes, such as a thread that ended)."""
    return [e for e in events if e["domain"] != "audit"]


def call(lib, cbid: int, c: Call) -> None:
    lib.ctxlab_callback(None, native.DOMAIN_DRIVER, cbid, ctypes.addressof(c.enter))
    lib.ctxlab_callback(None, native.DOMAIN_DRIVER, cbid, ctypes.addressof(c.exit))


def test_the_record_layout_matches_the_c_side():
    lib = native.load()
    assert lib.ctxlab_record_size() == native.RECORD_DTYPE.itemsize == 104
    assert lib.ctxlab_abi() == native.ABI_VERSION


def test_calls_from_many_threads_at_once_are_all_recorded_on_their_threads(tracer):
    t, lib = tracer
    per_thread, threads = 500, 16
    barrier = threading.Barrier(threads)
    tids: dict[str, int] = {}

    def work(k: int) -> None:
        calls = [Call(correlation=k * per_thread + i, context=0x1000 + k) for i in range(per_thread)]
        tids[threading.current_thread().name] = threading.get_native_id()
        barrier.wait()
        for c in calls:
            call(lib, 5, c)

    workers = [threading.Thread(target=work, args=(k,), name=f"w{k}") for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    drained = t.drain()
    events = calls_of(drained)
    assert len(events) == threads * per_thread
    ended = {e["thread"] for e in drained if e["name"] == "THREAD_ENDED"}
    assert ended == {f"w{k}" for k in range(threads)}  # each worker ended: its context stack went with it
    for k in range(threads):
        mine = [e for e in events if e["thread"] == f"w{k}"]
        assert len(mine) == per_thread and {e["tid"] for e in mine} == {tids[f"w{k}"]}
        assert {e["context"] for e in mine} == {0x1000 + k}
        assert sorted(e["correlation"] for e in mine) == list(range(k * per_thread, (k + 1) * per_thread))
        assert all(e["start"] <= e["end"] for e in mine)


def test_a_thread_that_ended_keeps_its_python_name(tracer):
    t, lib = tracer
    worker = threading.Thread(target=lambda: call(lib, 5, Call(1)), name="heartbeat")
    worker.start()
    worker.join()
    (event,) = calls_of(t.drain())
    assert event["thread"] == "heartbeat"


def test_parameters_are_read_at_entry_and_through_output_pointers_at_exit(tracer):
    t, lib = tracer
    out = ctypes.c_uint64(0)
    params = ctypes.create_string_buffer(64)
    ctypes.memmove(params, ctypes.byref(ctypes.c_uint64(ctypes.addressof(out))), 8)  # CUcontext *pctx
    ctypes.memmove(ctypes.addressof(params) + 12, ctypes.byref(ctypes.c_int32(3)), 4)  # CUdevice dev
    lib.ctxlab_set_field(native.DOMAIN_DRIVER, 9, native.EXIT, 0, 1, 0, 8)
    lib.ctxlab_set_field(native.DOMAIN_DRIVER, 9, native.ENTER, 12, 0, 0, 4)
    c = Call(1)
    c.enter.params = c.exit.params = ctypes.addressof(params)
    lib.ctxlab_callback(None, native.DOMAIN_DRIVER, 9, ctypes.addressof(c.enter))
    out.value = 0xABCDEF  # the driver writes *pctx during the call
    lib.ctxlab_callback(None, native.DOMAIN_DRIVER, 9, ctypes.addressof(c.exit))
    rows = native.take_records(lib)
    assert int(rows[0]["a"]) == 0xABCDEF and int(rows[0]["b"]) == 3


def test_a_thread_holding_the_gil_has_its_stack_walked_in_the_callback(tracer):
    t, lib = tracer
    lib.ctxlab_set_want(native.DOMAIN_DRIVER, 11, native.WANT_STACK)
    held = ctypes.PyDLL(lib._name)  # PyDLL keeps the GIL during the call, as PyTorch does around CUDA
    held.ctxlab_callback.argtypes = lib.ctxlab_callback.argtypes
    c = Call(1)
    held.ctxlab_callback(None, native.DOMAIN_DRIVER, 11, ctypes.addressof(c.enter))  # the call's line
    held.ctxlab_callback(None, native.DOMAIN_DRIVER, 11, ctypes.addressof(c.exit))
    (event,) = t.drain()
    frame = event["stack"][0]
    assert frame[0].endswith("test_native_callback.py") and frame[2].startswith("test_a_thread_holding")
    assert native.counts(lib)["stacks_walked_with_gil"] == 1


def test_a_thread_that_released_the_gil_gets_a_snapshot_from_the_stack_thread(tracer):
    t, lib = tracer
    lib.ctxlab_set_want(native.DOMAIN_DRIVER, 12, native.WANT_STACK)

    def user_code() -> None:
        call(lib, 12, Call(1))  # ctypes releases the GIL: the C side asks the stack thread

    worker = threading.Thread(target=user_code, name="released")
    worker.start()
    worker.join()
    (event,) = calls_of(t.drain())
    assert event["thread"] == "released"
    assert [f[2] for f in event["stack"]][:1] == ["call"] and "user_code" in [f[2] for f in event["stack"]]
    assert native.counts(lib)["stacks_served"] == 1


def test_a_failing_call_carries_a_stack_when_stacks_are_on(tracer):
    t, lib = tracer
    call(lib, 13, Call(1, status=201))
    (event,) = t.drain()
    assert event["status"] == "ERR201" and event["stack"]


def test_a_call_that_wants_its_callers_names_the_shared_objects_that_made_it(tracer):
    t, lib = tracer
    lib.ctxlab_set_want(native.DOMAIN_DRIVER, 15, native.WANT_CALLERS)
    call(lib, 15, Call(1))  # made through ctypes: libffi (or _ctypes) called the callback
    call(lib, 16, Call(2))  # a function that does not want them
    wanted, other = t.drain()
    assert "arguments" not in wanted and "callers" not in other
    assert wanted["callers"] and not any(name.startswith(("cupti_shim", "libc.so")) for name in wanted["callers"])
    assert wanted["callers"][0].startswith(("libffi", "_ctypes")), wanted["callers"]


def test_nested_calls_share_the_outermost_calls_stack_and_know_their_depth(tracer):
    t, lib = tracer
    lib.ctxlab_set_want(native.DOMAIN_DRIVER, 14, native.WANT_STACK)
    outer, inner = Call(1), Call(2)
    lib.ctxlab_callback(None, native.DOMAIN_RUNTIME, 20, ctypes.addressof(outer.enter))
    call(lib, 14, inner)  # a driver call the runtime makes beneath its own
    lib.ctxlab_callback(None, native.DOMAIN_RUNTIME, 20, ctypes.addressof(outer.exit))
    events = t.drain()
    driver = next(e for e in events if e["domain"] == "driver")
    runtime = next(e for e in events if e["domain"] == "runtime")
    assert driver["from"] == "callback" and "from" not in runtime
    assert runtime["stack"] == driver["stack"]  # one snapshot for the whole outermost call
    assert runtime["start"] <= driver["start"] <= driver["end"] <= runtime["end"]


DEADLOCK = textwrap.dedent("""
    import ctypes, sys, threading, time
    sys.path.insert(0, {root!r})
    from ctxlab.tracing import native
    from ctxlab.tracing.tracer import Tracer
    from tests.fake_cupti import Call

    t = Tracer(stacks=True)
    lib = native.load()
    t._start_native(lib, 0, 0, 0)
    t._function = lambda kind, cbid: "cuDevicePrimaryCtxRetain"
    t._status_of = lambda kind, value: "CUDA_SUCCESS"
    t._begin()
    lib.ctxlab_set_want(native.DOMAIN_DRIVER, 30, native.WANT_STACK)
    held = ctypes.PyDLL(lib._name)
    held.ctxlab_test_take_lock.argtypes = []
    calls = [Call(i) for i in range({n})]
    start = threading.Barrier({n} + 1)

    def initialiser(c):
        start.wait()  # like the runtime's first call: a lock held across the call, callbacks inside it
        lib.ctxlab_test_call_holding_lock(native.DOMAIN_DRIVER, 30, ctypes.addressof(c.enter),
                                          ctypes.addressof(c.exit), 50)

    def gil_holder():
        start.wait()
        for _ in range(100):
            held.ctxlab_test_take_lock()  # waits for that lock with the GIL held, as PyTorch and CuPy do
            time.sleep(0.002)

    threads = [threading.Thread(target=initialiser, args=(c,), name=f"init{{i}}") for i, c in enumerate(calls)]
    threads.append(threading.Thread(target=gil_holder, name="gil-holder"))
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    events = [e for e in t.drain() if e["domain"] != "audit"]
    t.close()
    print(len(events), sum("stack" in e for e in events), sum("stack_missing" in e for e in events),
          round(time.monotonic() - t0, 2))
""")

PYTHON_CALLBACK = textwrap.dedent("""
    import ctypes, sys, threading, time
    sys.path.insert(0, {root!r})
    from ctxlab.tracing import native
    from tests.fake_cupti import Call

    lib = native.load()
    held = ctypes.PyDLL(lib._name)
    held.ctxlab_test_take_lock.argtypes = []
    seen = []
    PYTHON_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p)
    callback = PYTHON_CALLBACK(lambda userdata, domain, cbid, data: seen.append(cbid))  # takes the GIL
    c = Call(1)
    start = threading.Barrier(2)

    def initialiser():
        start.wait()
        lib.ctxlab_test_call_other_holding_lock(ctypes.cast(callback, ctypes.c_void_p), 1, 30,
                                                ctypes.addressof(c.enter), ctypes.addressof(c.exit), 200)

    def gil_holder():
        start.wait()
        for _ in range(100):
            held.ctxlab_test_take_lock()
            time.sleep(0.002)

    threads = [threading.Thread(target=initialiser), threading.Thread(target=gil_holder)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print("finished")
""")


def test_the_same_calls_with_a_python_callback_hang():
    """The control: a Python callback (what cupti-python's subscribe gives) under the same lock deadlocks.
    If this ever finishes, the deadlock test above no longer shows anything."""
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", PYTHON_CALLBACK.format(root=ROOT)], capture_output=True, text=True,
                       timeout=8, cwd=ROOT)


@pytest.mark.parametrize("threads", [2, 16])
def test_a_lock_held_across_the_call_and_wanted_by_a_gil_holder_cannot_deadlock(threads):
    """The hang the Python callback had: thread A holds a lock inside a CUDA call and its callback needs the
    GIL; thread B holds the GIL and waits for A's lock. Each call here is made under the lock; the stack
    thread cannot take the GIL while B waits; the callback's wait is bounded, so all calls finish."""
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", DEADLOCK.format(root=ROOT, n=threads)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    recorded, with_stack, without, _seconds = done.stdout.split()
    assert int(recorded) == threads and int(with_stack) + int(without) == threads


PARAM_INFO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                              ctypes.POINTER(ctypes.c_size_t))
SIZES = {0xF00: (32, 32, 4)}  # two CuPy-style array structs and an int


@PARAM_INFO
def fake_param_info(function, index, offset, size):
    sizes = SIZES.get(function or 0, ())
    if index >= len(sizes):
        return 1  # CUDA_ERROR_INVALID_VALUE past the last parameter
    size[0] = sizes[index]
    return 0


class Launch:
    """cuLaunchKernel's params struct: f; gridDim x3, blockDim x3, sharedMemBytes; hStream @40; kernelParams @48."""

    def __init__(self, context: int, args: list[bytes], function: int = 0xF00):
        self.values = [ctypes.create_string_buffer(a, len(a)) for a in args]
        self.pointers = (ctypes.c_void_p * len(args))(*[ctypes.addressof(v) for v in self.values])
        import struct

        raw = struct.pack("<Q8I", function, 1, 1, 1, 1, 1, 1, 0, 0) + struct.pack(
            "<QQQ", 0x5EED, ctypes.addressof(self.pointers), 0)
        self.call = Call(1, context=context, params=raw.ljust(64, b"\0"))


@pytest.fixture()
def launches():
    """A tracer whose C side keeps launch arguments (cbid 307)."""
    from ctxlab.tracing.tracer import Tracer

    t = Tracer(stacks=True)
    lib = native.load()
    t._start_native(lib, 0, 0, native.address(fake_param_info))
    t._function = lambda kind, cbid: "cuLaunchKernel" if cbid == 307 else "cuMemAlloc_v2"
    t._status_of = lambda kind, value: "CUDA_SUCCESS"
    lib.ctxlab_set_launch(307, 0, 48, 56)
    t._begin()
    yield t, lib
    t.close()


def carray(pointer: int) -> bytes:
    import struct

    return struct.pack("<Qqqq", pointer, 8, 8, 4)


def test_every_launch_keeps_its_arguments_once_per_distinct_bytes(launches):
    t, lib = launches
    first = Launch(0xA, [carray(0x7F00), carray(0x7F10), b"\1\0\0\0"])  # kept alive: C reads its buffers
    counts = (ctypes.c_uint64 * len(native.COUNT_NAMES))()
    call(lib, 307, first.call)
    lib.ctxlab_counts(counts)
    kept_bytes = counts[7]
    call(lib, 307, first.call)  # the same launch again: its record points at the same kept bytes
    lib.ctxlab_counts(counts)
    assert counts[7] == kept_bytes > 0  # a loop adds nothing to the argument store
    other = Launch(0xA, [carray(0x7F20), carray(0x7F10), b"\1\0\0\0"])
    call(lib, 307, other.call)
    events = [e for e in t.drain() if e["name"] == "cuLaunchKernel"]
    assert ["arguments" in e for e in events] == [True, True, True]
    assert events[0]["arguments"] == events[1]["arguments"] != events[2]["arguments"]
    from ctxlab.audit.model.memory import arguments

    kept = arguments(events[0]["arguments"])
    assert [(i, len(raw)) for i, raw in kept] == [(0, 32), (1, 32)]  # the 4-byte int is not an address
    assert arguments(events[2]["arguments"])[0][1] == carray(0x7F20)
    assert kept[0][1] == carray(0x7F00) and events[1]["stack"]  # a launch the pointer rule may report


def test_a_forked_child_records_its_calls_under_its_own_thread_id(tracer):
    """The callback asks the kernel for a thread's id once and keeps it; a forked child's one thread is a new
    thread of the kernel's, so the id the forking thread kept must not follow it into the child."""
    _t, lib = tracer
    call(lib, 5, Call(1))  # the parent's id is now kept on this thread
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one call, then the id its record carries
        try:
            os.close(read)
            lib.ctxlab_set_active(1)
            before = lib.ctxlab_pending_records()  # the parent's, copied into the child at the fork
            call(lib, 5, Call(2))
            count = lib.ctxlab_pending_records()
            buffer = (ctypes.c_char * (native.RECORD_DTYPE.itemsize * count))()
            taken = lib.ctxlab_take_records(buffer, count)
            import numpy

            rows = numpy.frombuffer(bytes(buffer), dtype=native.RECORD_DTYPE, count=taken)[before:]
            os.write(write, f"{os.getpid()} {' '.join(str(int(t)) for t in rows['tid'])}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        reported = handle.read().split()
    os.waitpid(pid, 0)
    assert reported[0] == str(pid) and reported[1:] == [str(pid)]  # the child's id, not the parent's
