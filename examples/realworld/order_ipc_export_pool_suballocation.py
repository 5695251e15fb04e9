"""An IPC handle exported for a CuPy array that lies inside a pool block: the peer process maps the block's base.

A KV-cache server shares its value array with a worker process through CUDA IPC. Its arrays come from
CuPy's memory pool: an earlier 32 MiB slab was freed back to the pool, and the keys and the values were
then carved out of that one cudaMalloc block, the keys at its base and the values 16 MiB inside it.
cudaIpcGetMemHandle on the values' pointer succeeds, but the handle names the whole allocation: the peer
that opens it gets the block's base, and reads the keys (1) where it expects the values (2). No call
fails; the program prints what the peer read and what it should have.

Report: https://github.com/pytorch/tensorpipe/pull/248 -- "The cudaIpcGetMemHandle() function returns a
handle to the base address of the allocation of the given pointer, so we need to get the offset of the
buffer from the base address and send that over to the other process."

Expected finding: ipc-interior-pointer on thread MainThread, at the line marked HAZARD in main() (the
ipcGetMemHandle of the values); its cause is the allocation the pool made for the slab, the line marked
CAUSE. The peer is a process started with 'spawn' (name kv-peer); it opens the handle and reads one word.

    ctxlab audit -- examples/realworld/order_ipc_export_pool_suballocation.py
"""

import multiprocessing as mp

import cupy
import numpy as np

M = 4 << 20  # 4 Mi uint32 values: 16 MiB per array


def peer(handle: bytes, answers) -> None:
    import cupy

    ptr = cupy.cuda.runtime.ipcOpenMemHandle(handle)
    host = np.zeros(1, dtype=np.uint32)
    cupy.cuda.runtime.memcpy(host.ctypes.data, ptr, 4, cupy.cuda.runtime.memcpyDeviceToHost)
    cupy.cuda.runtime.ipcCloseMemHandle(ptr)
    answers.put(int(host[0]))


def main() -> int:
    slab = cupy.empty(2 * M, dtype=cupy.uint32)  # CAUSE: ipc-interior-pointer
    del slab  # back to the pool: one free 32 MiB block
    keys = cupy.full(M, 1, dtype=cupy.uint32)  # the block's first half, at its base
    values = cupy.full(M, 2, dtype=cupy.uint32)  # its second half
    cupy.cuda.Stream.null.synchronize()
    handle = cupy.cuda.runtime.ipcGetMemHandle(values.data.ptr)  # HAZARD: ipc-interior-pointer
    ctx = mp.get_context("spawn")
    answers = ctx.Queue()
    worker = ctx.Process(target=peer, args=(handle, answers), name="kv-peer")
    worker.start()
    got = answers.get(timeout=60)
    worker.join()
    print(f"values 16 MiB inside their pool block: {values.data.ptr - keys.data.ptr == 4 * M}; "
          f"the peer read {got} at the start of the values (expected 2; the keys hold 1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
