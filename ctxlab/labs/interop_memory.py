"""interop, areas 6 (rest) and 7: CUDA IPC memory handles across processes, and memory that belongs to no context.

``ipc``: a separate (non-daemon) interpreter allocates 1..N with cuda.bindings'
runtime (``cudaMalloc``), CuPy and PyTorch (each after a small array, so the
exported one may sit inside a larger allocation of the library's pool), exports
the base of each array's allocation (``cuMemGetAddressRange``; the documentation
asks for the base) with ``cudaIpcGetMemHandle``, tries ``cudaIpcOpenMemHandle``
in the same process, and hands the 64 handle bytes to a child started with
multiprocessing's ``spawn``: it opens each handle and reads at the returned
address and at the array's offset inside its allocation.

``vmm`` and ``vmm-torch-expandable``: what ``CU_POINTER_ATTRIBUTE_CONTEXT``
reports for memory from the virtual memory API (``cuMemCreate``,
``cuMemAddressReserve``, ``cuMemMap``, ``cuMemSetAccess``), stream-ordered
``cuMemAllocAsync``, ``cuMemAllocManaged`` and ``cuMemAlloc``; for JAX's and
cuda.core's allocations and PyTorch's with ``expandable_segments:True``; and
whether a kernel in a ``cuCtxCreate`` context reads the VMM memory. Scenarios
call ``cuda.bindings`` directly: those calls are the subject of the experiment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxlab.claim import Claim, Inapplicable, Observations, some
from ctxlab.lab import Isolation, Scenario
from ctxlab.labs.interop_names import ENV

N = 4096
SUM = N * (N + 1) // 2
HANDLE_BYTES = 64  # CUDA_IPC_HANDLE_SIZE
IPC_SOURCES = ("cuda-bindings", "cupy", "torch")
IPC_TITLES = {"cuda-bindings": "cuda.bindings' cudaMalloc", "cupy": "CuPy", "torch": "PyTorch"}
LINE = "CTXLAB-RESULT "
DRIVER_ALLOCATORS = ("cuMemAlloc", "cuMemCreate+cuMemMap", "cuMemAllocAsync", "cuMemAllocManaged")
EXPANDABLE = {**ENV, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
VMM_LIBRARIES = ("jax", "cuda-core", "torch-expandable")

IPC_OPEN = ("CUDA Runtime API, cudaIpcOpenMemHandle: 'Opens an interprocess memory handle exported from another "
            "process and returns a device pointer usable in the local process.'; cudaIpcGetMemHandle: 'Takes a "
            "pointer to the base of an existing device memory allocation created with cudaMalloc and exports it for "
            "use in another process.' (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
IPC_SAME = (IPC_OPEN + "; what opening a handle in the process that exported it gives is not documented there: "
            "recorded as observed")
POINTER_CONTEXT = ("CUDA Driver API, cuPointerGetAttribute: CU_POINTER_ATTRIBUTE_CONTEXT 'Returns in *data the "
                   "CUcontext in which ptr was allocated or registered'; 'If ptr was not allocated by, mapped by, or "
                   "registered with a CUcontext which uses unified virtual addressing then CUDA_ERROR_INVALID_VALUE "
                   "is returned.' (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html); "
                   "cuMemCreate/cuMemMap take no context (https://docs.nvidia.com/cuda/cuda-driver-api/"
                   "group__CUDA__VA.html): what the attribute reports for them is recorded as observed")
ACCESS = ("CUDA Driver API, cuMemSetAccess: 'Set the access flags for each location specified in desc for the given "
          "virtual address range' (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html): access is "
          "granted to a location (a device), not to a context; whether a kernel of another context on that device "
          "reads the memory is recorded as observed")
LIBRARY_SOURCES = {
    "jax": "JAX/XLA's GPU allocator (https://docs.jax.dev/en/latest/gpu_memory_allocation.html)",
    "cuda-core": ("cuda.core, Device.allocate: 'Allocate device memory from a specified stream' through the "
                  "device's default memory resource (a memory pool: "
                  "https://nvidia.github.io/cuda-python/cuda-core/latest/generated/cuda.core.Device.html)"),
    "torch-expandable": ("PyTorch, CUDA memory management: 'expandable_segments ... If set to True, this setting "
                         "instructs the allocator to create CUDA allocations that can later be expanded' "
                         "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-"
                         "pytorch-cuda-alloc-conf)"),
}
LIBRARY_TITLES = {"jax": "JAX", "cuda-core": "cuda.core (its default memory resource)",
                  "torch-expandable": "PyTorch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"}


# ---------------------------------------------------------------- IPC

def _handle_bytes(handle: Any) -> bytes:
    import ctypes

    return ctypes.string_at(handle.getPtr(), HANDLE_BYTES)


def _handle_from(data: bytes) -> Any:
    import ctypes

    from cuda.bindings import runtime

    handle = runtime.cudaIpcMemHandle_t()
    ctypes.memmove(handle.getPtr(), data, HANDLE_BYTES)
    return handle


def _read_sum(pointer: int) -> int:
    import numpy
    from cuda.bindings import runtime

    from ctxlab.cuda.errors import check

    host = numpy.zeros(N, dtype=numpy.int64)
    check(runtime.cudaMemcpy(host.ctypes.data, pointer, 8 * N, runtime.cudaMemcpyKind.cudaMemcpyDeviceToHost),
          "cudaMemcpy")
    return int(host.sum())


def ipc_child(device: int, exports: list, conn: Any) -> None:
    """In the spawned child: open each handle, read at the address returned and at the array's offset, close."""
    from functools import partial

    from cuda.bindings import runtime

    from ctxlab.cuda.outcome import checked

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
    """name -> the pointer of an array of 1..N, or why that library is absent."""
    import numpy
    from cuda.bindings import runtime

    from ctxlab.cuda.errors import check
    from ctxlab.labs.interop import Missing, _require

    host = numpy.arange(1, N + 1, dtype=numpy.int64)
    pointer = int(check(runtime.cudaMalloc(8 * N), "cudaMalloc"))
    check(runtime.cudaMemcpy(pointer, host.ctypes.data, 8 * N, runtime.cudaMemcpyKind.cudaMemcpyHostToDevice),
          "cudaMemcpy")
    found: dict[str, Any] = {"cuda-bindings": pointer}
    for lib in ("cupy", "torch"):
        try:
            _require(lib)
        except Missing as why:
            found[lib] = str(why)
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
    import multiprocessing

    from cuda.bindings import driver, runtime

    from ctxlab.cuda.errors import check

    check(runtime.cudaSetDevice(device), "cudaSetDevice")
    keep: list = []
    arrays = _ipc_arrays(device, keep)
    rows: dict[str, dict] = {}
    exports = []
    for name, pointer in arrays.items():
        if isinstance(pointer, str):
            rows[name] = {"present": False, "reason": pointer}
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
    import json
    import subprocess
    import sys

    from ctxlab.harness.recorder import Recorder
    from ctxlab.labs.common import scenario_output

    rec = Recorder(scenario="ipc")
    code = ("import json, sys; from ctxlab.labs.interop_memory import ipc_main; "
            f"print({LINE!r} + json.dumps(ipc_main(int(sys.argv[1]))))")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(device)], capture_output=True, text=True, timeout=150)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith(LINE)), None)
        rows = json.loads(line[len(LINE):]) if line else {}
        problem = None if line else f"exit status {done.returncode}: {done.stderr[-500:]}"
    except subprocess.TimeoutExpired:
        rows, problem = {}, "the parent did not finish within 150 s"
    for name in IPC_SOURCES:
        row = rows.get(name) or {"present": True, "get": f"no answer ({problem})", "same": "-", "offset": None,
                                 "child": {"open": "-", "at_base": "-", "at_offset": "-", "close": "-"}}
        row.setdefault("child", {"open": "-", "at_base": "-", "at_offset": "-", "close": "-"})
        rec.add(name, "ipc", {"source": name, **row}, context=(None, None))
    return scenario_output(rec)


# ---------------------------------------------------------------- memory that belongs to no context

def _pointer_owner(pointer: int, ids: dict[str, int | None]) -> str:
    from ctxlab.labs.interop_under import owner_of

    return owner_of(pointer, ids)


def _vmm_alloc(device: int, size_hint: int) -> tuple[int, int]:
    """cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess (read-write for the device): (pointer, size)."""
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

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
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

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
    import struct

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.cuda.outcome import checked

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
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.outcome import status_name
    from ctxlab.labs.common import cuda_recorder, scenario_output
    from ctxlab.labs.interop import Missing, _require, _version
    from ctxlab.labs.interop_under import make

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
            _require(lib)
            made = make(lib, device)
            keep.append(made)
            row = {"present": True, "version": _version(lib), "owner": _pointer_owner(made.pointer or 0, ids)}
        except Missing as why:
            row = {"present": False, "reason": str(why)}
        except Exception as exc:
            row = {"present": True, "version": _version(lib), "owner": f"not allocated: {status_name(exc)[:300]}"}
        drv.set_current(primary)  # whatever the library left current, the next reads with the primary context
        rec.add(lib, "library allocation", {"library": lib, **row})
    return scenario_output(rec)


def torch_expandable(device: int) -> dict:
    """PyTorch with expandable segments: which context CU_POINTER_ATTRIBUTE_CONTEXT names for its tensor."""
    import os

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import cuda_recorder, scenario_output, skipped_output
    from ctxlab.labs.interop import Missing, _primary, _require, _version
    from ctxlab.labs.interop_under import make

    try:
        _require("torch")
    except Missing as why:
        return skipped_output("vmm-torch-expandable", str(why))
    init_driver()
    rec = cuda_recorder("vmm-torch-expandable")
    made = make("torch", device)
    _, primary_id = _primary(device)
    ids = {"the primary context": primary_id}
    range_start = drv.outcome(_range_start, made.pointer)
    rec.add("torch", "library allocation",
            {"library": "torch-expandable", "present": True, "version": _version("torch"),
             "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), "owner": _pointer_owner(made.pointer or 0, ids),
             "mapping": "cuMemGetAddressRange -> " + range_start["status"]})
    return scenario_output(rec)


def _range_start(pointer: int) -> int:
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    base, _ = check(init_driver().cuMemGetAddressRange(pointer), "cuMemGetAddressRange")
    return int(base)


# ---------------------------------------------------------------- claims

def _ipc_rows(obs: Observations, source: str) -> dict:
    v = next((o.value for o in some(obs, "ipc", "ipc") if o.value["source"] == source), None)
    if v is None:
        raise Inapplicable(f"ipc: no row for {source}")
    if not v["present"]:
        raise Inapplicable(f"ipc: {v['reason']}")
    return v


def facts_ipc(source: str) -> Callable[[Observations], dict]:
    """The export, the spawned child's open and reads (at the address returned, at the array's offset)."""

    def facts(obs: Observations) -> dict:
        v = _ipc_rows(obs, source)
        c = v["child"]
        return {"source": IPC_TITLES[source], "offset": v["offset"], "get": v["get"], "open": c["open"],
                "at_base": c["at_base"], "at_offset": c["at_offset"], "close": c["close"]}

    return facts


def facts_ipc_same(obs: Observations) -> dict:
    """What cudaIpcOpenMemHandle returned in the exporting process, per source."""
    rows = [o.value for o in some(obs, "ipc", "ipc") if o.value["present"]]
    return {"same": "; ".join(f"{IPC_TITLES[v['source']]}: {v['same']}" for v in rows) or "nothing exported"}


def facts_driver_owners(obs: Observations) -> dict:
    """What the pointer attribute reports for each driver allocator."""
    v = some(obs, "driver allocations", "vmm")[0].value
    return {"owners": "; ".join(f"{name} -> {v[name]}" for name in DRIVER_ALLOCATORS),
            "vmm": v["cuMemCreate+cuMemMap"]}


def facts_other_context(obs: Observations) -> dict:
    """A created context's kernel reading VMM memory, and cuMemAlloc memory of the primary context for comparison."""
    v = some(obs, "vmm from another context", "vmm")[0].value
    return {"read": v["read"], "baseline": v["baseline"]}


def facts_library(lib: str) -> Callable[[Observations], dict]:
    """Which context the pointer attribute names for the library's allocation."""
    scenario = "vmm-torch-expandable" if lib == "torch-expandable" else "vmm"

    def facts(obs: Observations) -> dict:
        v = next((o.value for o in some(obs, "library allocation", scenario) if o.value["library"] == lib), None)
        if v is None:
            raise Inapplicable(f"{scenario}: no allocation recorded for {lib}")
        if not v["present"]:
            raise Inapplicable(f"{scenario}: {v['reason']}")
        return {"library": LIBRARY_TITLES[lib], "version": v.get("version") or "unknown", "owner": v["owner"],
                "extra": f"; {v['mapping']}" if v.get("mapping") else ""}

    return facts


def _ipc_claim(source: str) -> Claim:
    return Claim(f"interop.ipc.{source}",
                 f"An IPC handle of {IPC_TITLES[source]}'s array, opened in a child started with spawn, reads the "
                 "parent's values (at the array's offset inside the allocation the handle names).", IPC_OPEN,
                 "promise", ("ipc",), facts_ipc(source),
                 "{source}: the array sits {offset} bytes into its allocation; cudaIpcGetMemHandle -> {get}; in the "
                 "spawned child cudaIpcOpenMemHandle -> {open}; read at the address returned -> {at_base}; at the "
                 "offset -> {at_offset}; cudaIpcCloseMemHandle -> {close}",
                 lambda f: f["open"] == "cudaSuccess" and f["at_offset"] == "correct")


CLAIMS = (
    *(_ipc_claim(source) for source in IPC_SOURCES),
    Claim("interop.ipc.same-process", "What cudaIpcOpenMemHandle returns in the process that exported the handle.",
          IPC_SAME, "observation", ("ipc",), facts_ipc_same, "{same}"),
    Claim("interop.vmm.pointer-context",
          "What CU_POINTER_ATTRIBUTE_CONTEXT reports for memory of each driver allocator, the virtual memory API "
          "(cuMemCreate/cuMemMap) included; where it reports no context, migrate.pointer-belongs-to-context (a "
          "pointer names the context it was allocated in) does not extend to that memory.", POINTER_CONTEXT,
          "observation", ("vmm",), facts_driver_owners,
          "with the primary context current: {owners}"),
    Claim("interop.vmm.other-context-kernel",
          "Whether a kernel of a cuCtxCreate context reads memory mapped with cuMemMap whose access was set for the "
          "device.", ACCESS, "observation", ("vmm",), facts_other_context,
          "a read_through kernel of the created context on the cuMemMap memory -> {read}; on the primary "
          "context's cuMemAlloc memory -> {baseline}"),
    *(Claim(f"interop.vmm.{lib}",
            f"Which context CU_POINTER_ATTRIBUTE_CONTEXT names for an allocation of {LIBRARY_TITLES[lib]}.",
            LIBRARY_SOURCES[lib] + "; " + POINTER_CONTEXT, "observation",
            ("vmm-torch-expandable" if lib == "torch-expandable" else "vmm",), facts_library(lib),
            "{library} {version}: its allocation's CU_POINTER_ATTRIBUTE_CONTEXT -> {owner}{extra}")
      for lib in VMM_LIBRARIES),
)


def scenarios(device: int) -> list[Scenario]:
    """IPC across a spawned child; the pointer context of each allocator, and of PyTorch's expandable segments."""
    here = "ctxlab.labs.interop_memory"
    return [Scenario("ipc", f"{here}:ipc", (device,), isolation=Isolation.FRESH, timeout=180, env=ENV),
            Scenario("vmm", f"{here}:vmm", (device,), isolation=Isolation.FRESH, env=ENV),
            Scenario("vmm-torch-expandable", f"{here}:torch_expandable", (device,), isolation=Isolation.FRESH,
                     env=EXPANDABLE)]

