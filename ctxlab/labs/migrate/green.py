"""migrate's green-context scenarios, each run in a child process: two threads with one green context current,
the SMs its kernels ran on, which context owns memory allocated under it, and CuPy under it."""

from __future__ import annotations

import ctypes
import struct
import threading
from collections import Counter

from ctxlab.cuda import driver as drv
from ctxlab.cuda import green as greens
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.errors import check
from ctxlab.cuda.kernels import ProbeModule
from ctxlab.cuda.outcome import checked
from ctxlab.labs.common import cuda_recorder, green_or_skip, scenario_output
from ctxlab.labs.migrate.claims import GREEN
from ctxlab.labs.migrate.contexts import FRESH_KERNEL_SUM, fresh_kernel

GREEN_LAUNCHES = 200  # kernel launches per thread while both threads hold the green context
SMID_BLOCKS = 1024  # blocks of the %smid kernel: more than a 16-SM partition holds at once
SMID_THREADS = 128
SMID_SPIN = 20_000  # clock cycles each block spins, so blocks stay resident and spread over every SM allowed


def _green_thread(label: str, green, probe, barrier, out: dict, launches: int) -> None:
    """One of two threads that push the same green context and launch into it at the same time."""
    import cupy

    mine: dict = {"error": None}
    try:
        mine["push"] = drv.outcome(drv.push, green.handle)["status"]
        mine["current_is_green"] = drv.current().handle == green.handle
        barrier.wait(timeout=30)  # both threads have pushed it: it is current on both now
        statuses = Counter(drv.outcome(probe.add_to_global, 1)["status"] for _ in range(launches))
        mine["launches_tried"], mine["launches_ok"] = launches, statuses.pop("CUDA_SUCCESS", 0)
        mine["launch_errors"] = dict(statuses)
        mine["synchronize"] = drv.outcome(drv.synchronize)["status"]
        barrier.wait(timeout=30)
        mine["cupy"] = checked(lambda: int((cupy.full(1024, 5, dtype=cupy.int32) * 2).sum()), 10240)
        mine["pop"] = drv.outcome(drv.pop)["status"]
    except Exception as exc:  # a broken barrier or a library error: an outcome of this run, recorded
        mine["error"] = f"{type(exc).__name__}: {exc}"
    out[label] = mine


def concurrent_green(device: int, launches: int = GREEN_LAUNCHES) -> dict:
    """A green context current on two threads at once (the documentation rules it out): both launch into it."""
    green = green_or_skip("concurrent-green", device)
    if isinstance(green, dict):  # none here: why is recorded
        return green
    rec = cuda_recorder(scenario="concurrent-green")
    drv.push(green.handle)
    probe = ProbeModule.load()
    probe.write_global(0)
    rec.add("make", "context made", {"kind": GREEN, **green.info(), "id": drv.context_id(green.handle)})
    drv.pop()
    barrier = threading.Barrier(2)
    out: dict = {}
    threads = [threading.Thread(target=_green_thread, args=(name, green, probe, barrier, out, launches), name=name)
               for name in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    hung = [t.name for t in threads if t.is_alive()]
    drv.push(green.handle)
    rec.add("check", "green current on two threads",
            {"threads": {name: out.get(name, {"error": "hung" if name in hung else "no result"}) for name in "AB"},
             "global": checked(probe.read_global, 2 * launches), "expected_global": 2 * launches})
    drv.pop()
    return scenario_output(rec)


def distinct_sms(probe, stream: int, blocks: int) -> list[int]:
    """The distinct SMs that ran the blocks of one %smid launch on ``stream`` in the current context."""
    import numpy

    driver = init_driver()
    out = drv.mem_alloc(4 * blocks)
    launch = probe.packed("record_smid", [(out, ctypes.c_void_p), (SMID_SPIN, ctypes.c_longlong)], blocks,
                          SMID_THREADS)
    cu_stream = driver.CUstream(stream)
    launch(cu_stream)
    check(driver.cuStreamSynchronize(cu_stream), "cuStreamSynchronize")
    ids = numpy.frombuffer(drv.copy_from_device(out, 4 * blocks), dtype=numpy.uint32)
    check(driver.cuMemFree(out), "cuMemFree")
    return sorted({int(i) for i in ids})


def green_sm(device: int, blocks: int = SMID_BLOCKS) -> dict:
    """Which SMs a kernel's blocks ran on: in the primary context, then in the green context (NULL stream and
    a cuGreenCtxStreamCreate stream)."""
    green = green_or_skip("green-sm", device)
    if isinstance(green, dict):  # none here: why is recorded
        return green
    rec = cuda_recorder(scenario="green-sm")
    drv.push(drv.primary_retain(device))  # the primary context is active: the green context retains it
    in_primary = distinct_sms(ProbeModule.load(), 0, blocks)
    drv.pop()
    drv.push(green.handle)
    probe = ProbeModule.load()
    null_stream = distinct_sms(probe, 0, blocks)
    green_stream = distinct_sms(probe, greens.stream_create(green), blocks)
    rec.add("launch", "green sm ids",
            {**green.info(), "green_resource_sms": greens.resource_sms(green), "blocks": blocks,
             "primary_distinct": len(in_primary), "null_stream_distinct": len(null_stream),
             "green_stream_distinct": len(green_stream), "null_stream_sms": null_stream,
             "green_stream_sms": green_stream})
    drv.pop()
    return scenario_output(rec)


def _read_with(probe, src: int) -> int:
    """What a kernel of ``probe``'s context reads at ``src`` (through read_through, into memory of that context)."""
    out = drv.mem_alloc(8)
    drv.copy_to_device(out, struct.pack("<q", -1))
    probe.read_through(src, out)
    drv.synchronize()
    return struct.unpack("<q", drv.copy_from_device(out, 8))[0]


def green_memory(device: int) -> dict:
    """Which context owns memory allocated under the green context; kernels of the primary context and the
    green context each read the other's memory."""
    green = green_or_skip("green-memory", device)
    if isinstance(green, dict):  # none here: why is recorded
        return green
    rec = cuda_recorder(scenario="green-memory")
    in_green, in_primary = 0x6EE2_0001, 0x9A1_0002
    primary = drv.primary_retain(device)
    drv.push(green.handle)
    g_ptr = drv.mem_alloc(8)
    drv.copy_to_device(g_ptr, struct.pack("<q", in_green))
    owner = drv.pointer_context(g_ptr)
    green_probe = ProbeModule.load()
    drv.pop()
    drv.push(primary)
    p_ptr = drv.mem_alloc(8)
    drv.copy_to_device(p_ptr, struct.pack("<q", in_primary))
    primary_probe = ProbeModule.load()
    primary_reads = checked(lambda: _read_with(primary_probe, g_ptr), in_green)
    drv.pop()
    drv.push(green.handle)
    green_reads = checked(lambda: _read_with(green_probe, p_ptr), in_primary)
    drv.pop()
    rec.add("memory", "green allocation",
            {"pointer": g_ptr, "pointer_context": owner, "pointer_context_id": drv.outcome(drv.context_id, owner)
             .get("value"), "green": green.handle, "green_id": drv.context_id(green.handle), "primary": primary,
             "primary_id": drv.context_id(primary), "primary_reads_green": primary_reads,
             "green_reads_primary": green_reads})
    return scenario_output(rec)


def green_cupy(device: int) -> dict:
    """CuPy with the green context current: an allocation, then CuPy's first kernel; does the thread stay on it?"""
    import cupy

    green = green_or_skip("green-cupy", device)
    if isinstance(green, dict):  # none here: why is recorded
        return green
    rec = cuda_recorder(scenario="green-cupy")
    primary = drv.primary_retain(device)
    drv.push(green.handle)
    before = drv.current()
    x = cupy.empty(4096, dtype=cupy.float32)
    after_alloc = drv.current()
    kernel = checked(fresh_kernel, FRESH_KERNEL_SUM)  # the process's first CuPy kernel
    after_kernel = drv.current()
    owner = drv.pointer_context(x.data.ptr)
    rec.add("green", "cupy under green",
            {"green_id": drv.context_id(green.handle), "primary_id": drv.context_id(primary),
             "current_before_id": before.id, "after_alloc_id": after_alloc.id, "after_kernel_id": after_kernel.id,
             "allocation_owner_id": drv.outcome(drv.context_id, owner).get("value"), "kernel": kernel})
    drv.set_current(0)
    return scenario_output(rec)
