"""A decode worker whose PTX kernel reads 32-bit payload words at a 2-byte offset: misaligned address.

Records arrive packed: a 6-byte header, then the payload as 32-bit words. The decode worker copies a
whole record to the GPU and launches its kernel on `record + 6`, reading the payload as u32 words: every
load is 2 bytes off its natural alignment and the kernel faults with "misaligned address"
(CUDA_ERROR_MISALIGNED_ADDRESS, 716). The launch returns success; the worker sees the error at its next
cuStreamSynchronize. The error is sticky: the context cannot be used again, and the worker pops and
releases it (the last release destroys it, with the module, stream and buffers in it).

Report: https://github.com/MegviiRobot/MegBA/issues/43 -- a reduction fails with "misaligned address"
(CUDA error 716, cudaErrorMisalignedAddress) whenever the number of camera frames is odd, so that the
data it reads is not aligned; the error surfaces at the next call that waits for the GPU.

Expected finding: sticky-error on thread decode-worker, at the line marked HAZARD in decode() (the
cuLaunchKernel of the kernel that faults); the error first surfaces at the line marked SYMPTOM (the
cuStreamSynchronize). The program prints the statuses.

    ctxlab audit -- examples/realworld/sticky_misaligned_payload_decode_worker.py
"""

import ctypes
import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device, name  # noqa: E402

HEADER = 6  # bytes before the payload in every record
WORDS = 1 << 16

# copy_payload_u32(src, dst, n): dst[i] = src[i] for i < n, 32-bit loads and stores (PTX ISA 8.0, sm_90).
PAYLOAD_PTX = b"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry copy_payload_u32(
    .param .u64 copy_payload_u32_src,
    .param .u64 copy_payload_u32_dst,
    .param .u32 copy_payload_u32_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<7>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [copy_payload_u32_src];
    ld.param.u64 %rd2, [copy_payload_u32_dst];
    ld.param.u32 %r1, [copy_payload_u32_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.u32 %r6, [%rd6];
    add.s64 %rd7, %rd4, %rd5;
    st.global.u32 [%rd7], %r6;
DONE:
    ret;
}
\x00"""


def decode(dev, record: np.ndarray, out: dict) -> None:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    try:
        module = check(driver.cuModuleLoadData(PAYLOAD_PTX), "cuModuleLoadData")
        fn = check(driver.cuModuleGetFunction(module, b"copy_payload_u32"), "cuModuleGetFunction")
        stream = check(driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        raw = check(driver.cuMemAlloc(record.nbytes), "cuMemAlloc")
        words = check(driver.cuMemAlloc(4 * WORDS), "cuMemAlloc")
        check(driver.cuMemcpyHtoD(raw, record.ctypes.data, record.nbytes), "cuMemcpyHtoD")
        payload = int(raw) + HEADER  # 2 bytes past a 4-byte boundary
        args = ((payload, int(words), WORDS), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32))
        (err,) = driver.cuLaunchKernel(fn, WORDS // 256, 1, 1, 256, 1, 1, 0, stream, args, 0)  # HAZARD: sticky-error
        out["launch"] = err.name
        (err,) = driver.cuStreamSynchronize(stream)  # SYMPTOM: sticky-error
        out["sync"] = err.name
    finally:
        out["pop"] = name(driver.cuCtxPopCurrent())
        out["release"] = name(driver.cuDevicePrimaryCtxRelease(dev))


def main() -> int:
    dev = device(0)
    record = np.zeros(HEADER + 4 * WORDS, dtype=np.uint8)
    record[:HEADER] = np.frombuffer(b"RECv01", dtype=np.uint8)
    record[HEADER:] = np.arange(WORDS, dtype=np.uint32).view(np.uint8)
    out: dict = {}
    worker = threading.Thread(target=decode, args=(dev, record, out), name="decode-worker")
    worker.start()
    worker.join()
    print(f"decode-worker: launch {out.get('launch')}, cuStreamSynchronize {out.get('sync')}, "
          f"pop {out.get('pop')}, release {out.get('release')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
