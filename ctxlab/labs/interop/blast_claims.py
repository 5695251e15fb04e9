"""interop's blast-radius claims (area 5): what each library sees after a teardown of the primary context under
its live data. Pure: no CUDA."""

from __future__ import annotations

from collections.abc import Callable

from ctxlab.claim import Claim, Inapplicable, Observations, silent_wrong, some, spread
from ctxlab.labs.interop.names import LIBRARIES, TITLES

TEARDOWNS = {
    "reset-runtime": "cudaDeviceReset (cuda.bindings.runtime)",
    "reset-cupy": "cupy.cuda.runtime.deviceReset",
    "release": "cuDevicePrimaryCtxRelease past zero",
    "primary-reset": "cuDevicePrimaryCtxReset",
    "destroy": "cuCtxDestroy of the created context the arrays were made under",
}
LINE = "CTXLAB-LINE "
CHILD_TIMEOUT = 100.0  # seconds for the whole teardown run; what did not answer by then is "no answer"
RELEASES = 16  # releases tried past the lab's (zero) retains

SOURCES = {
    "reset-runtime": ("CUDA Runtime API, cudaDeviceReset: 'Destroy all allocations and reset all state on the current "
                      "device in the current process.'; 'It is the caller's responsibility to ensure that the "
                      "resources are not accessed or passed in subsequent API calls and doing so will result in "
                      "undefined behavior.'; 'Any subsequent API call to this device will reinitialize the device.'; "
                      "'cudaDeviceReset() will not destroy memory allocations by cudaMallocAsync() and "
                      "cudaMallocFromPoolAsync().' (https://docs.nvidia.com/cuda/cuda-runtime-api/"
                      "group__CUDART__DEVICE.html)"),
    "release": ("CUDA Driver API, cuDevicePrimaryCtxRelease: 'The context is automatically reset once the last "
                "reference to it is released.'; 'Releasing a primary context that has not been previously retained "
                "will fail with CUDA_ERROR_INVALID_CONTEXT.' "
                "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)"),
    "primary-reset": ("CUDA Driver API, cuDevicePrimaryCtxReset: 'Destroy all allocations and reset all state on the "
                      "primary context.'; 'Note that it is responsibility of the calling function to ensure that no "
                      "other module in the process is using the device any more.' "
                      "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)"),
    "destroy": ("CUDA Driver API, cuCtxDestroy: 'Destroys and cleans up all resources associated with the context. "
                "It is the caller's responsibility to ensure that the context or its resources are not accessed or "
                "passed in subsequent API calls and doing so will result in undefined behavior.' "
                "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)"),
}
SOURCES["reset-cupy"] = SOURCES["reset-runtime"] + "; through CuPy's own runtime copy"
AFTERWARDS = "; what each library sees next is not documented: recorded as observed over fresh processes"


def facts_blast(teardown: str, lib: str) -> Callable[[Observations], dict]:
    """Over the repeats: the teardown's status, and what ``lib`` read from its old array and a new one."""

    def facts(obs: Observations) -> dict:
        found = [o.value for o in some(obs, "blast", f"blast-{teardown}") if o.value["library"] == lib]
        if not found:
            raise Inapplicable(f"blast-{teardown}: no outcome for {lib}")
        absent = [v for v in found if not v["present"]]
        if absent:
            raise Inapplicable(f"blast-{teardown}: {absent[0]['reason']}", absent[0].get("skip"))

        reads = [v["old"] for v in found] + [v["new"] for v in found]
        return {"library": TITLES[lib], "version": found[0].get("version") or "unknown",
                "call": TEARDOWNS[teardown], "runs": f"{len(found)} run(s)",
                "made": spread(v["made"] for v in found), "owner": spread(v["owner"] for v in found),
                "before": spread(v["before"] for v in found), "status": spread(v["status"] for v in found),
                "old": spread(v["old"] for v in found), "new": spread(v["new"] for v in found),
                "silent_wrong": silent_wrong(reads)}

    return facts


def _blast_claim(teardown: str, lib: str) -> Claim:
    return Claim(f"interop.blast.{teardown}.{lib}",
                 f"After {TEARDOWNS[teardown]}, what {TITLES[lib]} reads from the array it made before, and from a "
                 "new one.", SOURCES[teardown] + AFTERWARDS, "observation", (f"blast-{teardown}",),
                 facts_blast(teardown, lib),
                 "over {runs}: {library} {version} made its array ({made}; owner: {owner}; read before: {before}); "
                 "{call} -> {status}; then its old array -> {old}; a new array -> {new}; wrong values without an "
                 "error: {silent_wrong}",
                 # after the teardown, which error a library meets is the run's: two H200 runs of the same code
                 # met CUDA_ERROR_ILLEGAL_ADDRESS and CUDA_ERROR_INVALID_VALUE (labs/results/matrix/)
                 error_varies=True)


CLAIMS = tuple(_blast_claim(t, lib) for t in TEARDOWNS for lib in LIBRARIES)
