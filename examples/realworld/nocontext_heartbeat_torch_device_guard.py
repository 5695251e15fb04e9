"""A heartbeat thread that re-registers the KV cache with a driver call inside `with torch.cuda.device(0)`.

The worker's main thread allocates the KV cache with PyTorch and registers it with a cache server. When
the server restarts, a heartbeat thread re-registers: it looks up the allocation's range with
cuMemGetAddressRange inside `with torch.cuda.device(0)`, expecting the guard to bind GPU 0 on the thread.
It does not: PyTorch skips the runtime call when the target device equals the thread's current device
(0 by default), so no context is current and the driver returns CUDA_ERROR_INVALID_CONTEXT.

Report: https://github.com/LMCache/LMCache/pull/5169 -- the re-registration after a server restart runs
on the connector's HeartbeatThread, which has no current context: every retry of cuMemGetAddressRange
fails with CUDA_ERROR_INVALID_CONTEXT; `with torch.cuda.device(...)` does not bind one on a fresh thread
(also https://github.com/pytorch/pytorch/issues/195256).

Expected finding: no-context on thread heartbeat, at the line marked HAZARD in reregister() (the program
catches the status and prints it).

    ctxlab audit -- examples/realworld/nocontext_heartbeat_torch_device_guard.py
"""

import threading

import torch
from cuda.bindings import driver


def reregister(ptr: int, out: dict) -> None:
    with torch.cuda.device(0):
        err, base, size = driver.cuMemGetAddressRange(driver.CUdeviceptr(ptr))  # HAZARD: no-context
    out["status"] = err.name
    out["range"] = (int(base), int(size)) if not int(err) else None


def main() -> int:
    kv_cache = torch.zeros(32, 2, 4096, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    out: dict = {}
    beat = threading.Thread(target=reregister, args=(kv_cache.data_ptr(), out), name="heartbeat")
    beat.start()
    beat.join()
    print(f"cuMemGetAddressRange on the heartbeat thread: {out['status']} (range {out['range']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
