"""A GPU test whose SIGALRM timeout never fires, because the test is blocked in torch.cuda.synchronize().

The suite guards each test the way pytest-timeout's default "signal" method does: signal.alarm with a
Python handler that raises. The test emulates a two-rank exchange in one process: rank 0 (the test, on
MainThread) makes PyTorch's current stream wait (cuStreamWaitValue32) for the ready flag its peer sets
once its shard is uploaded, then reduces and synchronises. The peer thread fails to load its shard,
reports the error and ends without publishing. torch.cuda.synchronize() blocks in cudaDeviceSynchronize
with the GIL released; the alarm goes off after 3 s, but CPython runs a Python signal handler only on the
main thread, between bytecodes, so the handler waits for a call that never returns. The test hangs past
its own timeout, until the audit's --timeout kills it.

Report: https://github.com/Genesis-Embodied-AI/quadrants/pull/556 -- pytest-timeout's signal method
registers a SIGALRM handler that only runs when the interpreter is back in Python bytecode; while a worker
is blocked inside a GIL-released C call (cudaDeviceSynchronize), the handler is never dispatched and the
hung test runs until the outer workflow timeout (the thread method, which calls os._exit, is the fix).

Expected finding: program-hung on thread MainThread, at the line marked HAZARD in test_exchange(); thread
peer-rank1 makes no CUDA call. Ends only when the audit stops it. Changed after the first audit on the H200
(driver 580.159): the header expected the thread blocked in torch.cuda.synchronize(); the flight recorder
showed it never got there: the launch of the sum (cudaLaunchKernel, with cuLaunchKernel beneath it) is the
call that does not return once the stream waits on the flag, so the marker moved to that line.

    ctxlab audit -- examples/realworld/hang_sigalrm_timeout_blocked_in_torch_synchronize.py
"""

import signal
import threading

import torch
from cuda.bindings import driver

TIMEOUT_S = 3
GEQ = int(driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)


class TestTimeout(Exception):
    pass


def on_alarm(signum, frame) -> None:
    raise TestTimeout(f"test exceeded {TIMEOUT_S} s")


def peer(shard_path: str, ready: torch.Tensor, shard: torch.Tensor) -> None:
    """Rank 1: upload its shard, then publish the ready flag. Its shard file is missing."""
    try:
        with open(shard_path, "rb") as handle:
            data = handle.read()
        shard.copy_(torch.frombuffer(bytearray(data), dtype=torch.float32).to(shard.device))
        ready.fill_(1)
    except OSError as exc:
        print(f"peer-rank1: could not load its shard: {exc}", flush=True)


def test_exchange() -> None:
    mine = torch.ones(1 << 20, device="cuda")
    theirs = torch.zeros_like(mine)
    ready = torch.zeros(1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    rank1 = threading.Thread(target=peer, args=("/nonexistent/shard-1.bin", ready, theirs), name="peer-rank1")
    rank1.start()
    stream = torch.cuda.current_stream()
    (err,) = driver.cuStreamWaitValue32(driver.CUstream(stream.cuda_stream), ready.data_ptr(), 1, GEQ)
    print(f"rank 0: waiting for rank 1's ready flag ({err.name})", flush=True)
    total = (mine + theirs).sum()  # HAZARD: program-hung
    torch.cuda.synchronize()
    rank1.join()
    print(f"exchange done: {total.item():.0f}")


def main() -> int:
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TIMEOUT_S)
    try:
        test_exchange()
        print("test passed (not expected: the test hangs)")
    except TestTimeout as exc:
        print(f"test failed: {exc} (not expected: the handler cannot run)")
    finally:
        signal.alarm(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
