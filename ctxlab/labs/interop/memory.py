"""interop's memory scenarios (areas 6 and 7): IPC handles opened in a spawned child, and the pointer context of
memory that belongs to no context (VMM, pools, PyTorch's expandable segments)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import struct
from functools import partial
from typing import Any

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.errors import check
from ctxlab.cuda.kernels import ProbeModule
from ctxlab.cuda.outcome import checked, status_name
from ctxlab.harness.recorder import Recorder
from ctxlab.lab import Isolation, Scenario
from ctxlab.labs.common import cuda_recorder, scenario_output, skipped_output
from ctxlab.labs.interop import libs
from ctxlab.labs.interop.libs import Missing, make, owner_of, primary_of, run_main, version_of
from ctxlab.labs.interop.memory_claims import EXPANDABLE, HANDLE_BYTES, IPC_SOURCES, SUM, N
from ctxlab.labs.interop.names import ENV

# ---------------------------------------------------------------- IPC

def _handle_bytes(handle: Any) -> bytes:
    return ctypes.string_at(handle.getPtr(), HANDLE_BYTES)


def _handle_from(data: bytes) -> Any:
    from cuda.bindings import runtime

    handle = runtime.cudaIpcMemHandle_t()
    ctypes.memmove(handle.getPtr(), data, HANDLE_BYTES)
    return handle


def _read_sum(pointer: int) -> int:
    import numpy
    from cuda.bindings import runtime

    host = numpy.zeros(N, dtype=numpy.int64)
    check(runtime.cudaMemcpy(host.ctypes.data, pointer, 8 * N, runtime.cudaMemcpyKind.cudaMemcpyDeviceToHost),
          "cudaMemcpy")
    return int(host.sum())


def ipc_child(device: int, exports: list, conn: Any) -> None:
    """In the spawned child: open each handle, read at the address returned and at the array's offset, close."""
    from cuda.bindings import runtime

    runtime.cudaSetDevice(device)
    out = {}
    for name, data, offset in exports:
        err, pointer = runtime.cudaIpcOpenMemHandle(_handle_from(bytes.fromhex(data)),
                                                    runtime.cudaIpcMemLazyEnablePeerAccess)
        got = {"open": err.name, "at_base": "-", "at_offset": "-", "close": "-"}
        if int(err) == 0:
            base = int(pointer)
            got["at_base"] = checked(partial(_read_sum, base), SUM)[:300]
            got["at_offset"] = checked(partial(_read_sum, base + offset), SUM)[:300]
            got["close"] = runtime.cudaIpcCloseMemHandle(base)[0].name
        out[name] = got
    conn.send(out)
    conn.close()


def _ipc_arrays(device: int, keep: list) -> dict[str, Any]:
    """name -> the pointer of an array of 1..N, or why that library is absent (its library skip)."""
    import numpy
    from cuda.bindings import runtime

    host = numpy.arange(1, N + 1, dtype=numpy.int64)
    pointer = int(check(runtime.cudaMalloc(8 * N), "cudaMalloc"))
    check(runtime.cudaMemcpy(pointer, host.ctypes.data, 8 * N, runtime.cudaMemcpyKind.cudaMemcpyHostToDevice),
          "cudaMemcpy")
    found: dict[str, Any] = {"cuda-bindings": pointer}
    for lib in ("cupy", "torch"):
        try:
            libs.require(lib)
        except Missing as why:
            found[lib] = why.skip  # a library skip (ctxlab.records.skips): its row says why, structured
            continue
        if lib == "cupy":
            import cupy

            keep += [cupy.zeros(8, dtype=cupy.int64), cupy.asarray(host)]  # a small array first: the pool packs
            found[lib] = keep[-1].data.ptr
            cupy.cuda.Device(device).synchronize()
        else:
            import torch

            keep += [torch.zeros(8, dtype=torch.int64, device=f"cuda:{device}"),
                     torch.from_numpy(host).to(f"cuda:{device}")]
            found[lib] = keep[-1].data_ptr()
            torch.cuda.synchronize(device)
    return found


def ipc_main(device: int) -> dict:
    """Run as a plain (non-daemon) process: export each array, open in this process, then in a spawned child."""
    from cuda.bindings import driver, runtime

    check(runtime.cudaSetDevice(device), "cudaSetDevice")
    keep: list = []
    arrays = _ipc_arrays(device, keep)
    rows: dict[str, dict] = {}
    exports = []
    for name, pointer in arrays.items():
        if isinstance(pointer, dict):
            rows[name] = {"present": False, "reason": pointer["why"], "skip": pointer}
            continue
        base, size = check(driver.cuMemGetAddressRange(pointer), "cuMemGetAddressRange")
        offset = pointer - int(base)
        err, handle = runtime.cudaIpcGetMemHandle(int(base))  # documented: the base of the allocation
        row = {"present": True, "offset": offset, "allocation_size": int(size), "get": err.name, "same": "-"}
        if int(err) == 0:
            same_err, same_ptr = runtime.cudaIpcOpenMemHandle(handle, runtime.cudaIpcMemLazyEnablePeerAccess)
            row["same"] = same_err.name
            if int(same_err) == 0:
                runtime.cudaIpcCloseMemHandle(same_ptr)
            exports.append((name, _handle_bytes(handle).hex(), offset))
        rows[name] = row
    mp: Any = multiprocessing.get_context("spawn")
    receive, send = mp.Pipe(duplex=False)
    child = mp.Process(target=ipc_child, args=(device, exports, send), name="ctxlab-ipc-child")
    child.start()
    send.close()
    answer = receive.recv() if receive.poll(60) else {}
    child.join(10)
    if child.is_alive():
        child.kill()
        child.join(5)
    for name, _, _ in exports:
        rows[name]["child"] = answer.get(name, {"open": f"no answer (child exit status {child.exitcode})",
                                                "at_base": "-", "at_offset": "-", "close": "-"})
    return rows


def ipc(device: int) -> dict:
    """A fresh non-daemon interpreter exports the arrays; a child started with spawn opens them."""
    rec = Recorder(scenario="ipc")
    rows, problem = run_main(ipc_main, device)
    if rows is None:
        rows = {}
    for name in IPC_SOURCES:
        row = rows.get(name) or {"present": True, "get": f"no answer ({problem})", "same": "-", "offset": None,
                                 "child": {"open": "-", "at_base": "-", "at_offset": "-", "close": "-"}}
        row.setdefault("child", {"open": "-", "at_base": "-", "at_offset": "-", "close": "-"})
        rec.add(name, "ipc", {"source": name, **row}, context=(None, None))
    return scenario_output(rec)


# ---------------------------------------------------------------- memory that belongs to no context

def _pointer_owner(pointer: int, ids: dict[str, int | None]) -> str:
    return owner_of(pointer, ids)


def _vmm_alloc(device: int, size_hint: int) -> tuple[int, int]:
    """cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess (read-write for the device): (pointer, size)."""
    driver = init_driver()
    prop = driver.CUmemAllocationProp()
    prop.type = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    minimum = driver.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
    granularity = int(check(driver.cuMemGetAllocationGranularity(prop, minimum), "cuMemGetAllocationGranularity"))
    size = max(granularity, -(-size_hint // granularity) * granularity)
    handle = check(driver.cuMemCreate(size, prop, 0), "cuMemCreate")
    reserved = check(driver.cuMemAddressReserve(size, 0, driver.CUdeviceptr(0), 0), "cuMemAddressReserve")
    check(driver.cuMemMap(reserved, size, 0, handle, 0), "cuMemMap")
    access = driver.CUmemAccessDesc()
    access.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device
    access.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    check(driver.cuMemSetAccess(reserved, size, [access], 1), "cuMemSetAccess")
    return int(reserved), size


def _driver_allocations(device: int) -> dict[str, int]:
    """One allocation of each driver allocator, made with the primary context current."""
    driver = init_driver()
    stream = driver.CUstream(drv.stream_create())
    pointer_async = int(check(driver.cuMemAllocAsync(8 * N, stream), "cuMemAllocAsync"))
    check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
    managed = int(check(driver.cuMemAllocManaged(8 * N, int(driver.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)),
                        "cuMemAllocManaged"))
    return {"cuMemAlloc": drv.mem_alloc(8 * N), "cuMemCreate+cuMemMap": _vmm_alloc(device, 8 * N)[0],
            "cuMemAllocAsync": pointer_async, "cuMemAllocManaged": managed}


def _other_context_reads(device: int, pointer: int) -> str:
    """A kernel of a cuCtxCreate context reads a value written to ``pointer`` from the primary context."""
    drv.copy_to_device(pointer, struct.pack("<q", 0x5EED))
    created = drv.create_context(device)
    try:
        probe = ProbeModule.load()
        out = drv.mem_alloc(8)

        def read() -> int:
            probe.read_through(pointer, out)
            drv.synchronize()
            return struct.unpack("<q", drv.copy_from_device(out, 8))[0]

        return checked(read, 0x5EED)
    finally:
        drv.destroy_context(created)


def vmm(device: int) -> dict:
    """Each driver allocator's and each library's pointer context, and a kernel of another context on VMM memory."""
    init_driver()
    rec = cuda_recorder("vmm")
    primary = drv.primary_retain(device)
    drv.set_current(primary)
    ids = {"the primary context": drv.context_id(primary)}
    pointers = _driver_allocations(device)
    rec.add("driver", "driver allocations", {name: _pointer_owner(p, ids) for name, p in pointers.items()})
    rec.add("kernel", "vmm from another context",
            {"read": _other_context_reads(device, pointers["cuMemCreate+cuMemMap"]),
             "baseline": _other_context_reads(device, pointers["cuMemAlloc"])})
    keep = []
    for lib in ("jax", "cuda-core"):
        try:
            libs.require(lib)
            made = make(lib, device)
            keep.append(made)
            row: dict[str, Any] = {"present": True, "version": version_of(lib),
                                   "owner": _pointer_owner(made.pointer or 0, ids)}
        except Missing as why:
            row = {"present": False, "reason": str(why), "skip": why.skip}
        except Exception as exc:
            row = {"present": True, "version": version_of(lib), "owner": f"not allocated: {status_name(exc)[:300]}"}
        drv.set_current(primary)  # whatever the library left current, the next reads with the primary context
        rec.add(lib, "library allocation", {"library": lib, **row})
    return scenario_output(rec)


def torch_expandable(device: int) -> dict:
    """PyTorch with expandable segments: which context CU_POINTER_ATTRIBUTE_CONTEXT names for its tensor."""
    try:
        libs.require("torch")
    except Missing as why:
        return skipped_output("vmm-torch-expandable", why.skip)
    init_driver()
    rec = cuda_recorder("vmm-torch-expandable")
    made = make("torch", device)
    _, primary_id = primary_of(device)
    ids = {"the primary context": primary_id}
    range_start = drv.outcome(_range_start, made.pointer)
    rec.add("torch", "library allocation",
            {"library": "torch-expandable", "present": True, "version": version_of("torch"),
             "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), "owner": _pointer_owner(made.pointer or 0, ids),
             "mapping": "cuMemGetAddressRange -> " + range_start["status"]})
    return scenario_output(rec)


def _range_start(pointer: int) -> int:
    base, _ = check(init_driver().cuMemGetAddressRange(pointer), "cuMemGetAddressRange")
    return int(base)


def area_scenarios(device: int) -> list[Scenario]:
    """IPC across a spawned child; the pointer context of each allocator, and of PyTorch's expandable segments."""
    return [Scenario("ipc", ipc, (device,), isolation=Isolation.FRESH, timeout=180, env=ENV),
            Scenario("vmm", vmm, (device,), isolation=Isolation.FRESH, env=ENV),
            Scenario("vmm-torch-expandable", torch_expandable, (device,), isolation=Isolation.FRESH,
                     env=EXPANDABLE)]
