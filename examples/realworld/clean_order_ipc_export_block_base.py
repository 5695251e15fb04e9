"""Clean: an IPC handle exported for the base of the pool block that holds an array, sent with its offset.

The same KV-cache server as order_ipc_export_pool_suballocation.py, done right: it asks the driver for
the base of the allocation that holds the values (cuMemGetAddressRange), exports the handle of that base
and sends the values' offset inside it with the handle; the peer adds the offset to the address it maps
and reads the values (2).

Report: https://github.com/pytorch/tensorpipe/pull/248 -- the fix: "get the offset of the buffer from the
base address and send that over to the other process" (with the driver API's cuMemGetAddressRange).

Expected findings: none. The peer is a process started with 'spawn' (name kv-peer).

    ctxlab audit -- examples/realworld/clean_order_ipc_export_block_base.py
"""

import multiprocessing as mp

import cupy
import numpy as np
from cuda.bindings import driver

M = 4 << 20  # 4 Mi uint32 values: 16 MiB per array


def peer(handle: bytes, offset: int, answers) -> None:
    import cupy

    base = cupy.cuda.runtime.ipcOpenMemHandle(handle)
    ptr = base + offset  # the values inside the mapped block
    host = np.zeros(1, dtype=np.uint32)
    cupy.cuda.runtime.memcpy(host.ctypes.data, ptr, 4, cupy.cuda.runtime.memcpyDeviceToHost)
    cupy.cuda.runtime.ipcCloseMemHandle(base)
    answers.put(int(host[0]))


def main() -> int:
    slab = cupy.empty(2 * M, dtype=cupy.uint32)
    del slab  # back to the pool: one free 32 MiB block
    keys = cupy.full(M, 1, dtype=cupy.uint32)  # the block's first half, at its base
    values = cupy.full(M, 2, dtype=cupy.uint32)  # its second half
    cupy.cuda.Stream.null.synchronize()
    err, base, _ = driver.cuMemGetAddressRange(driver.CUdeviceptr(values.data.ptr))  # the block's base
    assert int(err) == 0, err
    handle = cupy.cuda.runtime.ipcGetMemHandle(int(base))
    offset = values.data.ptr - int(base)  # sent with the handle
    ctx = mp.get_context("spawn")
    answers = ctx.Queue()
    worker = ctx.Process(target=peer, args=(handle, offset, answers), name="kv-peer")
    worker.start()
    got = answers.get(timeout=60)
    worker.join()
    print(f"values 16 MiB inside their pool block: {values.data.ptr - keys.data.ptr == 4 * M}; "
          f"the peer read {got} at the start of the values (expected 2; the keys hold 1); offset sent {offset}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
