"""interop's memory claims (areas 6 and 7): IPC handles across processes, and memory that belongs to no context.
Pure: no CUDA."""

from __future__ import annotations

from collections.abc import Callable

from ctxlab.claim import Claim, Inapplicable, Observations, some
from ctxlab.labs.interop.names import ENV

N = 4096
SUM = N * (N + 1) // 2
HANDLE_BYTES = 64  # CUDA_IPC_HANDLE_SIZE
IPC_SOURCES = ("cuda-bindings", "cupy", "torch")
IPC_TITLES = {"cuda-bindings": "cuda.bindings' cudaMalloc", "cupy": "CuPy", "torch": "PyTorch"}
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


def _ipc_rows(obs: Observations, source: str) -> dict:
    v = next((o.value for o in some(obs, "ipc", "ipc") if o.value["source"] == source), None)
    if v is None:
        raise Inapplicable(f"ipc: no row for {source}")
    if not v["present"]:
        raise Inapplicable(f"ipc: {v['reason']}", v.get("skip"))
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
            raise Inapplicable(f"{scenario}: {v['reason']}", v.get("skip"))
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
