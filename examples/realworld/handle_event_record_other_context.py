"""A transcoding pipeline whose encoder records the decoder's "frame done" event on its own stream.

The decoder and the encoder each have a context of their own (cuCtxCreate), as two libraries that bring
their own context do. The decoder makes a "frame done" event in its context and hands it to the encoder
thread, which records it on its stream after the copy so the decoder can wait for it. cuEventRecord needs
the event and the stream in the same context: the driver refuses the record with CUDA_ERROR_INVALID_HANDLE.

Report: https://github.com/rapidsai/rmm/issues/1306 -- an event created under one device's context
recorded on a stream of another: cudaEventRecord fails with cudaErrorInvalidResourceHandle; the docs
say the event and the stream must be on the same CUDA context.

Expected finding: handle-from-another-context on thread encoder, at the line marked HAZARD in encode()
(the cuEventRecord; the program catches the status and prints it).

    ctxlab audit -- examples/realworld/handle_event_record_other_context.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 18


def encode(enc_ctx, frame_done, out: dict) -> None:
    check(driver.cuCtxPushCurrent(enc_ctx), "cuCtxPushCurrent")
    try:
        stream = check(driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        bitstream = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
        check(driver.cuMemsetD32Async(bitstream, 0xAB, N, stream), "cuMemsetD32Async")
        (err,) = driver.cuEventRecord(frame_done, stream)  # HAZARD: handle-from-another-context
        out["record"] = err.name
        check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
        check(driver.cuMemFree(bitstream), "cuMemFree")
        check(driver.cuStreamDestroy(stream), "cuStreamDestroy")
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def main() -> int:
    dev = device(0)
    dec_ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")  # the decoder's context
    frame_done = check(driver.cuEventCreate(int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    enc_ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")  # the encoder's context
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    out: dict = {}
    encoder = threading.Thread(target=encode, args=(enc_ctx, frame_done, out), name="encoder")
    encoder.start()
    encoder.join()
    check(driver.cuCtxPushCurrent(dec_ctx), "cuCtxPushCurrent")
    check(driver.cuEventDestroy(frame_done), "cuEventDestroy")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuCtxDestroy(enc_ctx), "cuCtxDestroy")
    check(driver.cuCtxDestroy(dec_ctx), "cuCtxDestroy")
    print(f"cuEventRecord(decoder's event, encoder's stream) on thread encoder: {out['record']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
